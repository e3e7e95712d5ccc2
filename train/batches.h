// train/batches.h: a run's batches as the model reads them. The data loader gives (B, T) batches
// of whole sequences; the model's rows are those sequences, or under context parallelism (a
// group of N ranks sharing each sequence) this rank's zigzag chunks r and 2N-1-r of each (one
// row per rank of the group held here: all N when the group is simulated on one GPU), the
// model's attention then running as the ring of attention/ring.h, whose buffers the group's
// transport moves (distributed/ring_transport.h).
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
} BatchRows;

// The rows of ranks' batches of B sequences of T tokens, T a multiple of 2 * the group's size;
// the ring (for the model's AttentionPlan) is &b->ring, moving its buffers by ranks->ring: both
// must stay where they are while the model runs.
void batch_rows_init(BatchRows* b, Ranks* ranks, int B, int T);
// Whether the model's attention runs as the ring (a group of more than one rank).
int batch_rows_ring(const BatchRows* b);
// The loader's next batch into the model's inputs and targets (rows, cols); what names the option
// of its shards in the error when the loader fails.
void next_batch(BatchRows* b, DataLoader* dl, int* tokens, int* targets, const char* what);
void batch_rows_free(BatchRows* b);

#endif
