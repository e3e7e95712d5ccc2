// train/batches.cu: the model's rows of the loader's batches (train/batches.h).
#include "train/batches.h"

#include <stdlib.h>
#include "common/error.h"

void batch_rows_init(BatchRows* b, Ranks* ranks, int B, int T) {
    // The ring moves its buffers by the ranks' own transport, which gets its communicator once the
    // ranks connect (ranks_connect).
    RingTransport* t = &ranks->ring;
    *b = (BatchRows){.B = B, .T = T, .rows = B * t->count, .cols = T / t->size};
    if (t->size == 1) return;
    b->ring = (AttentionRing){t->size, t->first, t->count, ring_transport_pass, t};
    b->full_tokens = (int*)malloc((size_t)B * T * sizeof(int));
    b->full_targets = (int*)malloc((size_t)B * T * sizeof(int));
    if (!b->full_tokens || !b->full_targets) die("out of host memory for a batch");
}

int batch_rows_ring(const BatchRows* b) { return b->full_tokens != NULL; }

void next_batch(BatchRows* b, DataLoader* dl, int* tokens, int* targets, const char* what) {
    char err[ERR_LEN];
    int split = batch_rows_ring(b);
    if (dataloader_next(dl, split ? b->full_tokens : tokens, split ? b->full_targets : targets, err) != 0)
        die("%s: %s", what, err);
    if (split) {
        zigzag_split(&b->ring, b->full_tokens, b->B, b->T, tokens);
        zigzag_split(&b->ring, b->full_targets, b->B, b->T, targets);
    }
}

void batch_rows_free(BatchRows* b) {
    free(b->full_tokens);
    free(b->full_targets);
}
