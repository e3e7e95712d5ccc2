// attention/ring_walk.h: which blocks the ring attention of context parallelism (attention/ring.h)
// computes, step by step, in which order: one walk, which the forward and the backward both take
// (attention/ring.cu). Plain C, so that tests/unit/attention/test_ring_walk.c checks it on the CPU.
//
// One sequence of T tokens is cut into 2N chunks of c = T / 2N; rank r of a group of N holds
// chunks r and 2N-1-r ("zigzag", so every rank does the same causal work) as its local sequence,
// halves 0 and 1. At step k the keys and values at hand are those of rank (r - k) mod N
// (ring_origin): the rank's own at step 0, then each other rank's as they travel the ring.
//   step 0:            the local sequence against its own keys: both halves against themselves
//                      (causal) and half 1 against half 0 (all visible)
//   from a rank s < r: both local halves against s's first chunk (all of it visible)
//   from a rank s > r: the local half 1 against both of s's chunks (all visible)
// The rest lies above the diagonal. Every block but the diagonal ones is computed without a
// mask but the caller's (documents, a sliding window), at its chunks' global positions; a block
// that the window puts out of every row's reach is left out of the walk.
#ifndef FLASHGPT_ATTENTION_RING_WALK_H
#define FLASHGPT_ATTENTION_RING_WALK_H

// The chunk of the full sequence that half h (0, 1) of rank r's local sequence is.
static inline int zigzag_chunk(int rank, int half, int size) { return half ? 2 * size - 1 - rank : rank; }

// The rank whose keys and values rank r holds at step k of a ring of N.
static inline int ring_origin(int r, int k, int N) { return (r - k + N) % N; }

typedef enum {
    RING_LOCAL,      // step 0 without a mask: the whole local sequence against its own keys, one causal call
    RING_DIAGONAL,   // step 0 with a mask: half a against itself, causal
    RING_BLOCK,      // half a against half b of the keys at hand, all of which come before its queries
} RingBlockKind;

// One block of the walk. RING_LOCAL and RING_DIAGONAL write the pass's outputs for their rows,
// which start its accumulators; a RING_BLOCK is merged into them, so it comes after them.
typedef struct {
    RingBlockKind kind;
    int a, b;               // the local half of the queries, the half of the keys and values at hand
    int q_chunk, k_chunk;   // their chunks of the whole sequence (where a mask places them)
} RingBlock;

// The blocks rank r of a ring of N computes at step k (0 .. N-1), in their order, into blocks;
// returns how many (at most 3). masked: the calls take a mask (attention_mask_active); window:
// its sliding window in keys (0: none), c: the tokens of a chunk, by which the blocks that no row
// reaches are left out: a block's first query, whose window reaches furthest back, does not see
// its last key.
static inline int ring_step_blocks(int r, int k, int N, int masked, int window, int c, RingBlock blocks[3]) {
    // (a, b) of each block: at step 0, then with keys from a rank before r, then from one after it.
    static const int pairs[3][3][2] = {{{0, 0}, {1, 1}, {1, 0}}, {{0, 0}, {1, 0}}, {{1, 0}, {1, 1}}};
    int s = ring_origin(r, k, N), which = k == 0 ? 0 : s < r ? 1 : 2, n = 0;
    if (k == 0 && !masked) {
        blocks[0] = (RingBlock){RING_LOCAL, 0, 0, zigzag_chunk(r, 0, N), zigzag_chunk(r, 0, N)};
        return 1;
    }
    for (int j = 0; j < (k == 0 ? 3 : 2); j++) {
        int a = pairs[which][j][0], b = pairs[which][j][1];
        RingBlock x = {k == 0 && a == b ? RING_DIAGONAL : RING_BLOCK, a, b, zigzag_chunk(r, a, N), zigzag_chunk(s, b, N)};
        if (window <= 0 || x.q_chunk * c - (x.k_chunk * c + c - 1) < window) blocks[n++] = x;
    }
    return n;
}

#endif
