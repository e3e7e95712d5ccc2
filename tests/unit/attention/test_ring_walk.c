// tests/unit/attention/test_ring_walk.c: the walk of the ring attention (attention/ring_walk.h) on the CPU, for
// rings of 1 to 8 ranks, with and without a mask, with windows from one key to more than the
// sequence. Against the causal rule, position by position: every rank's walk meets each pair of
// (its query chunk, a key chunk at or before it) exactly once, causal on the diagonal, and leaves
// out exactly the blocks in which no query sees a key under the window; the keys of a step are
// those of the rank ring_origin names, which the ring's passes bring; the blocks that start the
// accumulators come first. The GPU test (tests/unit/attention/test_ring_attention.cu) checks what the passes
// compute on them.
#include <string.h>

#include "attention/ring_walk.h"
#include "tests/lib/test.h"

// 1 when some query of chunk q sees some key of chunk kc (chunks of c tokens): causal, and within
// the window (0: none). The nearest pair is the chunk's first query and the other's last key.
static int chunk_pair_seen(int q, int kc, int c, int window) {
    for (int i = q * c; i < (q + 1) * c; i++)
        for (int j = kc * c; j < (kc + 1) * c; j++)
            if (j <= i && (window <= 0 || i - j < window)) return 1;
    return 0;
}

// Rank r's walk over every step: checks each block and counts the (query chunk, key chunk)
// pairs it covers in met (2N x 2N).
static void walk_rank(int r, int N, int masked, int window, int c, int* met) {
    for (int k = 0; k < N; k++) {
        RingBlock blocks[3];
        int n = ring_step_blocks(r, k, N, masked, window, c, blocks), merged = 0;
        CHECK(n >= 0 && n <= 3, "rank %d step %d: %d blocks", r, k, n);
        for (int j = 0; j < n; j++) {
            const RingBlock* x = &blocks[j];
            int from = ring_origin(r, k, N);
            CHECK(x->a >= 0 && x->a < 2 && x->b >= 0 && x->b < 2, "rank %d step %d: halves (%d, %d)", r, k, x->a, x->b);
            CHECK(x->q_chunk == zigzag_chunk(r, x->a, N), "rank %d step %d: query chunk %d is not half %d's", r, k,
                  x->q_chunk, x->a);
            CHECK(x->k_chunk == zigzag_chunk(from, x->b, N), "rank %d step %d: key chunk %d is not rank %d's half %d",
                  r, k, x->k_chunk, from, x->b);
            if (x->kind == RING_LOCAL) {
                CHECK(k == 0 && !masked, "rank %d step %d: the whole local sequence, masked %d", r, k, masked);
                CHECK(!merged, "rank %d: the local sequence after a merged block", r);
                // Both halves against themselves, and half 1 against half 0.
                met[x->q_chunk * 2 * N + x->q_chunk]++;
                int second = zigzag_chunk(r, 1, N);
                met[second * 2 * N + second]++;
                met[second * 2 * N + x->q_chunk]++;
                continue;
            }
            if (x->kind == RING_DIAGONAL) {
                CHECK(k == 0 && masked && x->a == x->b, "rank %d step %d: a diagonal block (%d, %d), masked %d", r, k,
                      x->a, x->b, masked);
                CHECK(!merged, "rank %d: diagonal block %d after a merged block", r, x->a);
            } else {
                CHECK(x->k_chunk < x->q_chunk, "rank %d step %d: block (%d, %d) not wholly below the diagonal", r, k,
                      x->q_chunk, x->k_chunk);
                merged = 1;
            }
            CHECK(chunk_pair_seen(x->q_chunk, x->k_chunk, c, window), "rank %d step %d: block (%d, %d) seen by no row", r,
                  k, x->q_chunk, x->k_chunk);
            met[x->q_chunk * 2 * N + x->k_chunk]++;
        }
    }
}

static void check_walk(int N, int masked, int window, int c) {
    int met[16 * 16];
    for (int r = 0; r < N; r++) {
        memset(met, 0, sizeof(met));
        walk_rank(r, N, masked, window, c, met);
        for (int half = 0; half < 2; half++) {
            int q = zigzag_chunk(r, half, N);
            for (int kc = 0; kc < 2 * N; kc++) {
                int want = kc <= q && chunk_pair_seen(q, kc, c, window);
                CHECK(met[q * 2 * N + kc] == want, "N %d rank %d: chunk %d against chunk %d met %d times, expected %d",
                      N, r, q, kc, met[q * 2 * N + kc], want);
            }
        }
    }
}

// After k passes, each rank's buffer to the next rank, rank r holds what rank ring_origin(r, k, N)
// started with.
static void check_origin(int N) {
    int held[8], next[8];
    for (int i = 0; i < N; i++) held[i] = i;
    for (int k = 0; k < N; k++) {
        for (int r = 0; r < N; r++)
            CHECK(held[r] == ring_origin(r, k, N), "N %d step %d: rank %d holds rank %d's, ring_origin says %d", N, k, r,
                  held[r], ring_origin(r, k, N));
        for (int i = 0; i < N; i++) next[(i + 1) % N] = held[i];
        memcpy(held, next, sizeof(held));
    }
}

int main(void) {
    test_begin("ring_origin_follows_the_passes");
    for (int N = 1; N <= 8; N++) check_origin(N);
    test_end();

    test_begin("ring_walk_meets_every_block_once");
    for (int N = 1; N <= 8; N++)
        for (int masked = 0; masked < 2; masked++) check_walk(N, masked, 0, 5);
    test_end();

    // Windows of 1 key, inside a chunk, a chunk's length and just past it, several chunks, and
    // longer than the sequence: the walk leaves out exactly the blocks no row reaches.
    test_begin("ring_walk_leaves_out_the_blocks_past_the_window");
    const int c = 6, windows[] = {1, 2, 5, 6, 7, 12, 13, 18, 40, 1000};
    for (int N = 1; N <= 8; N++)
        for (size_t w = 0; w < sizeof(windows) / sizeof(windows[0]); w++) check_walk(N, 1, windows[w], c);
    test_end();

    // The order the passes merge in (and so the bits): step 0 (0, 0) (1, 1) (1, 0), and later
    // steps by the rank whose keys arrived.
    test_begin("ring_walk_order");
    RingBlock blocks[3];
    int n = ring_step_blocks(1, 0, 3, 1, 0, 4, blocks);
    CHECK(n == 3 && blocks[0].a == 0 && blocks[0].b == 0 && blocks[1].a == 1 && blocks[1].b == 1 && blocks[2].a == 1 &&
              blocks[2].b == 0, "step 0: %d blocks", n);
    n = ring_step_blocks(2, 1, 3, 0, 0, 4, blocks);   // keys of rank 1 < 2
    CHECK(n == 2 && blocks[0].a == 0 && blocks[0].b == 0 && blocks[1].a == 1 && blocks[1].b == 0,
          "keys from before: %d blocks", n);
    n = ring_step_blocks(0, 1, 3, 0, 0, 4, blocks);   // keys of rank 2 > 0
    CHECK(n == 2 && blocks[0].a == 1 && blocks[0].b == 0 && blocks[1].a == 1 && blocks[1].b == 1,
          "keys from after: %d blocks", n);
    n = ring_step_blocks(2, 0, 3, 0, 0, 4, blocks);
    CHECK(n == 1 && blocks[0].kind == RING_LOCAL, "step 0 without a mask: %d blocks", n);
    test_end();
    return test_exit_code();
}
