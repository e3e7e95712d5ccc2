// attention/params.h: what one attention call reads and writes, as pointers and strides (the way
// FlashAttention's Flash_fwd_params holds them), so that every kernel runs on any layout: the
// model's fused qkv activation, the ring's travelling keys and values, a KV cache of its own.
//   AttentionTensor  (B, T, NH, HS) bf16: element (b, t, h, d) at ptr[b*batch + t*row + h*head + d]
//   AttentionLse     (B, NH, T) fp32:     element (b, h, t)    at ptr[b*batch + h*head + t]
// The HS values of a head are contiguous; the other strides are free (the flash kernels ask for
// multiples of 8 elements, their 16-byte loads, and 16-byte aligned pointers).
#ifndef FLASHGPT_ATTENTION_PARAMS_H
#define FLASHGPT_ATTENTION_PARAMS_H

#include <stdint.h>
#include "common/cuda_check.h"

typedef struct {
    int B, T, NH, HS;
    int causal;     // 1: query t sees keys <= t only; 0: every key (the ring's off-diagonal blocks)
    float scale;    // softmax scale; 1/sqrt(HS) for GPT-2
} AttentionShape;

typedef struct {
    bf16* ptr;
    long long batch, row;   // strides in elements
    int head;
} AttentionTensor;

typedef struct {
    float* ptr;
    long long batch;
    int head;               // the T values of a head are contiguous
} AttentionLse;

// The key window of a masked call: row t of sequence b sees the keys [lo(t), t], the later of
// its document's start and its sliding window's,
//   lo(t) = max(doc_start[b * T + t], t - window + 1, 0)
// and key t is seen by the queries [t, hi(t)], hi(t) = min(doc_end[b * T + t], t + window - 1,
// T - 1). lo never decreases along a sequence, so the queries that see a key are one run, as the
// keys a query sees are: a tile of rows has its first key at lo of its first row, a tile of keys
// its last query at hi of its last key. The flash kernels and naive take the mask beside their
// params (NULL: the shape's causal flag alone).
// A block of the ring (attention/ring.h) is a call on views of one sequence (B = 1) whose query
// t and key s lie at the positions query0 + t and key0 + s of the sequence the mask's arrays
// hold: its rows see the keys of that sequence's rule. On the diagonal (query0 = key0) the call
// is causal; off it every key comes before every query, and the call, not causal, lets row t see
// the keys from lo (in its own positions) to its last: a row may then see none, and gets O = 0
// and L = -inf (which a merge of log-sum-exps passes over). Its backward takes a finite L for
// every row, as the ring's merged L is (with L = -inf the row's probabilities would be NaN).
typedef struct {
    const int* doc_start;   // (B, T) device: the first position of row t's document; NULL: none
    const int* doc_end;     // (B, T) device: the last position of row t's document (with doc_start)
    int window;             // the most keys a row sees, its own included; 0: no bound
    int query0, key0;       // the positions of the call's first query and first key (B = 1); 0: plain
} AttentionMask;

// One call: the forward reads q, k, v and writes o and lse (the log-sum-exp of the scaled
// scores, natural log); the backward reads q, k, v, o, lse and dout and writes dq, dk, dv.
typedef struct {
    AttentionShape shape;
    AttentionTensor q, k, v, o;
    AttentionLse lse;
    AttentionTensor dout, dq, dk, dv;
} AttentionParams;

// 1 when x can be read and written in 16-byte pieces: its pointer 16-byte aligned, its strides
// whole packs of 8 elements (what the flash and decode kernels ask of every view).
static inline int attention_tensor_packed(const AttentionTensor* x) {
    return (uintptr_t)x->ptr % 16 == 0 && x->batch % 8 == 0 && x->row % 8 == 0 && x->head % 8 == 0;
}

// The model's activations: qkv (B, T, 3, NH, HS), O and dO (B, T, NH, HS), L (B, NH, T);
// dqkv (B, T, 3, NH, HS) for the backward (NULL in a forward).
AttentionParams attention_fused_params(AttentionShape s, const bf16* qkv, bf16* out, float* lse,
                                       bf16* dqkv, const bf16* dout);

#endif
