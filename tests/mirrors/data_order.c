// tests/mirrors/data_order.c: prints the batches the data loader gives one rank (rank 0 of 1), for
// tests/mirrors/test_data_order.py to compare with the PyTorch reference's (scripts/shard_batches.py):
//   data_order GLOB B T SHUFFLE SEED BATCHES [DOCUMENT_TOKEN]
// SHUFFLE 1 or 0, SEED as train_gpt's --seed takes it; with DOCUMENT_TOKEN the rows are aligned to
// the documents it starts (dataloader_align_documents). For each of the first BATCHES batches
// (past the end of an epoch into the next) it prints B lines, each a sample's T+1 tokens: its
// inputs, then its last target.
#include <stdio.h>
#include <stdlib.h>

#include "common/error.h"
#include "common/parse.h"
#include "data/dataloader.h"

int main(int argc, char** argv) {
    if (argc != 7 && argc != 8) die("usage: data_order GLOB B T SHUFFLE SEED BATCHES [DOCUMENT_TOKEN]");
    const char* pattern = argv[1];
    int B = parse_int_in("B", argv[2], 1, 1 << 20), T = parse_int_in("T", argv[3], 1, 1 << 20);
    int shuffle = parse_int_in("SHUFFLE", argv[4], 0, 1);
    uint64_t seed = (uint64_t)parse_integer("SEED", argv[5]);
    int batches = parse_int_in("BATCHES", argv[6], 0, 1 << 20);
    char err[ERR_LEN];
    int vocab = dataloader_vocab_size(pattern, err);
    if (vocab <= 0) die("%s: %s", pattern, vocab < 0 ? err : "the shards state no vocabulary");
    DataLoader* dl = dataloader_open(pattern, B, T, 0, 1, shuffle, seed, vocab, err);
    if (!dl) die("%s", err);
    if (argc == 8 && dataloader_align_documents(dl, parse_int_in("DOCUMENT_TOKEN", argv[7], 0, vocab - 1), err) != 0)
        die("%s", err);
    int* inputs = malloc((size_t)B * T * sizeof(int));
    int* targets = malloc((size_t)B * T * sizeof(int));
    if (!inputs || !targets) die("out of memory");
    for (int k = 0; k < batches; k++) {
        if (dataloader_next(dl, inputs, targets, err) != 0) die("%s", err);
        for (int b = 0; b < B; b++) {
            for (int t = 0; t < T; t++) printf("%d ", inputs[b * T + t]);
            printf("%d\n", targets[b * T + T - 1]);
        }
    }
    free(inputs);
    free(targets);
    dataloader_close(dl);
    return 0;
}
