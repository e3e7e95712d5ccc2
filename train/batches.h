// train/batches.h: a run's batches as the model reads them. The data loader gives (B, T) batches
// of whole sequences; the model's rows are those sequences, or under context parallelism (a
// group of N ranks sharing each sequence) this rank's zigzag chunks r and 2N-1-r of each (one
// row per rank of the group held here: all N when the group is simulated on one GPU), the
// model's attention then running as the ring of attention/ring.h, whose buffers the group's
// transport moves (distributed/ring_transport.h).
// The batches alternate between two pinned buffers: the loader reads the next batch into one
// while the GPU runs the model on the other, a buffer refilled only once the copies from it that
// were queued are done (an event each).
#ifndef FLASHGPT_TRAIN_BATCHES_H
#define FLASHGPT_TRAIN_BATCHES_H

#include "attention/ring.h"
#include "data/dataloader.h"
#include "distributed/ranks.h"

typedef struct {
    int B, T;                    // the loader's batch
    int rows, cols;              // the model's: rows of local sequences of cols tokens
    AttentionRing ring;          // the group's ring attention, moving its buffers by the ranks' transport
    int* full_tokens;            // (B, T) a batch as the loader gives it, when the model's rows are
    int* full_targets;           // zigzag chunks of it (context parallel); else NULL
    int* tokens[2];              // (rows, cols) pinned, once batch_rows_pin: the model's inputs
    int* targets[2];             // (rows, cols) pinned: its targets
    cudaEvent_t copied[2];       // the copies from a buffer to the GPU are done
    int next;                    // the buffer the next batch goes to
} BatchRows;

// The rows of ranks' batches of B sequences of T tokens, T a multiple of 2 * the group's size;
// the ring (for the model's AttentionPlan) is &b->ring, moving its buffers by ranks->ring: both
// must stay where they are while the model runs.
void batch_rows_init(BatchRows* b, Ranks* ranks, int B, int T);
// Whether the model's attention runs as the ring (a group of more than one rank).
int batch_rows_ring(const BatchRows* b);
// Once the GPU is taken: the two pinned buffers and their events.
void batch_rows_pin(BatchRows* b);
// The loader's next batch into the model's inputs and targets (rows, cols) in the next buffer,
// once the copies from it queued before are done; returns the buffer. what names the option of
// the loader's shards in the error when it fails.
int next_batch(BatchRows* b, DataLoader* dl, const char* what);
// The copies of buffer i to the GPU (the forward's inputs, the classifier's targets) are queued on
// stream: the buffer is free once stream has done them.
void batch_copied(BatchRows* b, int i, cudaStream_t stream);
void batch_rows_free(BatchRows* b);

#endif
