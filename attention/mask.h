// attention/mask.h: the key window of masked attention (params.h's AttentionMask): which masks
// a call takes, and the documents of a batch found on the GPU from its tokens. flashgpt's shards
// are documents that each start with <|endoftext|> (prepare_data.c), so row t's document starts
// at the last <|endoftext|> at or before t (an <|endoftext|> sees only itself and what follows
// it), or at 0 when there is none, and ends just before the next one, or at T - 1.
#ifndef FLASHGPT_ATTENTION_MASK_H
#define FLASHGPT_ATTENTION_MASK_H

#include "attention/params.h"

// 1 when the mask narrows what a causal row sees: documents, or a window.
static inline int attention_mask_active(const AttentionMask* m) {
    return m && (m->doc_start || m->window > 0);
}

// What a kernel takes: the mask, or (NULL) one that is not active.
static inline AttentionMask attention_mask_or_none(const AttentionMask* m) {
    AttentionMask none = {NULL, NULL, 0};
    return m ? *m : none;
}

// NULL when a call of shape s can take the mask m (NULL: no mask), else a one-line reason.
const char* attention_mask_unsupported(const AttentionMask* m, AttentionShape s);

// doc_start and doc_end (B, T) int32 of tokens (B, T) int32, all on the device: the first and
// last position of each row's document, <|endoftext|> (the id eot) starting a document. One
// thread block per sequence; no host work.
void attention_document_bounds(const int* tokens, int B, int T, int eot, int* doc_start, int* doc_end,
                               cudaStream_t stream);

#endif
