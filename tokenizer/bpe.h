// tokenizer/bpe.h: what a Tokenizer holds, shared by the files that build one (training, the
// project's file, GPT-2's files) and the one that encodes and decodes with it.
// Ids are 0..vocab_size-1. Each id has a byte string (the eot token's is "<|endoftext|>", which
// decoding prints but encoding never produces); byte_ids maps each byte to its one-byte token;
// merge r (rank r, lowest first) turns the adjacent pair (left, right) into result, whose bytes
// are left's followed by right's.
#ifndef FLASHGPT_BPE_H
#define FLASHGPT_BPE_H

#include <stdint.h>
#include "tokenizer/tokenizer.h"

#define EOT_TEXT "<|endoftext|>"
// Bound every reader checks: token bytes fit uint32 offsets.
#define TOKENIZER_MAX_TOKEN_BYTES 0x7FFFFFFFu

typedef struct {
    int left, right, result;
} BpeMerge;

typedef struct {
    uint64_t key;   // left << 32 | right; PAIR_EMPTY marks a free slot
    int rank;
} PairSlot;

struct Tokenizer {
    int vocab_size;
    int eot;
    int byte_ids[256];
    uint32_t* token_offset;      // (vocab_size + 1): token id's bytes are [offset[id], offset[id+1])
    unsigned char* token_bytes;
    BpeMerge* merges;            // (n_merges), in rank order
    int n_merges;
    PairSlot* pair_slots;        // (pair_mask + 1): (left, right) -> rank
    uint64_t pair_mask;
};

static inline uint64_t pair_key(int left, int right) {
    return ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
}

// Rank of the merge of (left, right), or -1.
int tokenizer_pair_rank(const Tokenizer* t, int left, int right);

// Checks the parts and builds a tokenizer from them: every byte has exactly one one-byte token,
// eot is in range and takes part in no merge, every merge's ids are in range, its result's bytes
// are its left's then right's, and no pair is merged twice. Takes ownership of token_offset,
// token_bytes and merges, also on failure. Errors name source (the file the parts came from).
Tokenizer* tokenizer_assemble(int vocab_size, uint32_t* token_offset, unsigned char* token_bytes,
                              int eot, BpeMerge* merges, int n_merges, const char* source, char* err);

#endif
