// bench/bench_tokenizer.c: speed of the BPE tokenizer on one CPU core: training an 8192-id
// vocabulary, encoding (whole text in one call, and in 4 KiB calls whose caches start cold)
// and decoding. Text: $FLASHGPT_TEXT, default ../shared/data/tinyshakespeare.txt. Each number
// is the best of several runs.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "common/read_file.h"
#include "tokenizer/tokenizer.h"

#define VOCAB 8192
#define RUNS 5
#define PIECE 4096

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

int main(void) {
    const char* path = getenv("FLASHGPT_TEXT");
    if (!path || !*path) path = "../shared/data/tinyshakespeare.txt";
    char err[ERR_LEN];
    size_t len;
    unsigned char* text = read_file(path, &len, err);
    if (!text) die("bench_tokenizer: %s", err);
    double mb = len / 1e6;
    printf("text: %s, %.2f MB\n", path, mb);

    double best_train = 1e30;
    Tokenizer* t = NULL;
    for (int r = 0; r < RUNS; r++) {
        tokenizer_free(t);
        double t0 = seconds();
        t = tokenizer_train(text, len, VOCAB, 0);
        double dt = seconds() - t0;
        if (!t) die("bench_tokenizer: training failed");
        if (dt < best_train) best_train = dt;
    }
    printf("train %d ids: %.3f s\n", tokenizer_vocab_size(t), best_train);

    int* ids = malloc((len + 1) * sizeof(int));
    unsigned char* back = malloc(len + 1);
    size_t n = 0;
    double best_encode = 1e30, best_pieces = 1e30, best_decode = 1e30;
    for (int r = 0; r < RUNS; r++) {
        double t0 = seconds();
        n = tokenizer_encode(t, text, len, ids);
        double t1 = seconds();
        size_t back_len = tokenizer_decode(t, ids, n, back);
        double t2 = seconds();
        if (back_len != len || memcmp(back, text, len) != 0) die("bench_tokenizer: round trip failed");
        if (t1 - t0 < best_encode) best_encode = t1 - t0;
        if (t2 - t1 < best_decode) best_decode = t2 - t1;
        t0 = seconds();
        for (size_t p = 0; p < len; p += PIECE)
            tokenizer_encode(t, text + p, len - p < PIECE ? len - p : PIECE, ids);
        double dt = seconds() - t0;
        if (dt < best_pieces) best_pieces = dt;
    }
    printf("encode (one call): %.1f MB/s, %zu tokens, %.2f bytes/token\n", mb / best_encode, n, (double)len / n);
    printf("encode (%d-byte calls): %.1f MB/s\n", PIECE, mb / best_pieces);
    printf("decode: %.1f MB/s\n", mb / best_decode);
    free(ids);
    free(back);
    free(text);
    tokenizer_free(t);
    return 0;
}
