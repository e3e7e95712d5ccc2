// attention/decode.h: the decode attention kernel behind attention.h (attention_decode), for
// generation with a KV cache: the one new query of each of B sequences against the keys and
// values cached for it, by the strides of attention/params.h, so the cache can be a buffer of
// its own or the model's fused qkv activation. Sequence b's query is at positions[b] (device, B;
// below p->shape.T) and sees the keys 0..positions[b], read on the GPU, so that one launch
// serves every step of a captured decoding loop. The same function as the query's row of the
// causal forward; one kernel serves both attention kinds. p->q and p->o hold one row per
// sequence (their row stride is unused); p->lse is not written.
#ifndef FLASHGPT_DECODE_H
#define FLASHGPT_DECODE_H

#include <stddef.h>
#include "attention/params.h"

const char* decode_attention_unsupported(AttentionShape s);   // NULL when supported
// Bytes of scratch (16-byte aligned) for caches of up to s.T keys of s.B sequences: the chunks'
// partial results and a counter per (sequence, head). The scratch is zeroed once (cudaMemset)
// before its first use; every call leaves its counters zero again, so calls on one stream (and
// replays of a captured graph) reuse it as it is. Calls that may run at once need a scratch each.
size_t decode_attention_scratch_bytes(AttentionShape s);
// The query's transform before its scores, and that of its own key: QK-norm and rotary
// embeddings as layers/rotary.h's forward (the same device code, device/rotary.cuh), the
// rotation at the query's position.
typedef struct {
    float norm_eps;      // QK-norm's eps (layers/rmsnorm.h's RMSNORM_EPS); 0: no QK-norm
    float rotary_base;   // rotary's base (above 1); 0: no rotation
} DecodeQK;

// One launch (device/launch.cuh's launch_overlapped: it may start while the kernel before
// it ends). It waits for that kernel before it reads q, the positions, the query's own row of K
// and V or the scratch, so that kernel may write any of them; the rows before the query's,
// which earlier steps wrote, it starts reading before (where the positions it finds then are
// not those after the wait, it reads them again). window > 0: the query sees only its last
// `window` keys (a sliding window, params.h's AttentionMask), and the cache rows before them are
// not read; 0: every key up to its own. qk (NULL: none; the head size 16 or more): q and the
// query's own row of K are read as the kernel before left them and transformed before the
// scores, and that row of K is written back transformed, so that the cache holds every key as
// the prompt's pass leaves it (the rows before the query's hold transformed keys already).
void decode_attention(const AttentionParams* p, const int* positions, int window, const DecodeQK* qk, void* scratch,
                      cudaStream_t stream);

#endif
