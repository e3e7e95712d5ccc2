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

void batch_rows_pin(BatchRows* b) {
    size_t bytes = (size_t)b->rows * b->cols * sizeof(int);
    for (int i = 0; i < 2; i++) {
        cudaCheck(cudaMallocHost((void**)&b->tokens[i], bytes));
        cudaCheck(cudaMallocHost((void**)&b->targets[i], bytes));
        cudaCheck(cudaEventCreateWithFlags(&b->copied[i], cudaEventDisableTiming));
    }
}

int next_batch(BatchRows* b, DataLoader* dl, const char* what) {
    char err[ERR_LEN];
    int i = b->next, split = batch_rows_ring(b);
    int *tokens = b->tokens[i], *targets = b->targets[i];
    b->next = 1 - i;
    // Waits for the copies of the batch before the last, which the GPU reaches before the last
    // batch's work: the host runs at most about a batch ahead, the GPU's queue holding that batch.
    cudaCheck(cudaEventSynchronize(b->copied[i]));
    if (dataloader_next(dl, split ? b->full_tokens : tokens, split ? b->full_targets : targets, err) != 0)
        die("%s: %s", what, err);
    if (split) {
        zigzag_split(&b->ring, b->full_tokens, b->B, b->T, tokens);
        zigzag_split(&b->ring, b->full_targets, b->B, b->T, targets);
    }
    return i;
}

void batch_copied(BatchRows* b, int i, cudaStream_t stream) { cudaCheck(cudaEventRecord(b->copied[i], stream)); }

void batch_rows_free(BatchRows* b) {
    free(b->full_tokens);
    free(b->full_targets);
    for (int i = 0; i < 2; i++) {
        if (!b->tokens[i]) continue;
        cudaCheck(cudaFreeHost(b->tokens[i]));
        cudaCheck(cudaFreeHost(b->targets[i]));
        cudaCheck(cudaEventDestroy(b->copied[i]));
    }
}
