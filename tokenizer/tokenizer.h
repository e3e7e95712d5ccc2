// tokenizer/tokenizer.h: byte-level BPE, as GPT-2 does it.
// Token ids: 0..255 are the single bytes (own tokenizers) or GPT-2's ids (imported files);
// each merge adds one id; <|endoftext|> is a special token that encoding never produces from
// text (callers insert it between documents). decode(encode(x)) == x for any bytes x.
#ifndef FLASHGPT_TOKENIZER_H
#define FLASHGPT_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>
#include "common/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct Tokenizer Tokenizer;

// The largest vocabulary any tokenizer may have (every reader checks it): ids fit an int.
#define TOKENIZER_MAX_VOCAB (1 << 24)

// Learns merges on text until the vocabulary (bytes + merges + <|endoftext|>) has vocab_size ids.
// verbose != 0 prints progress to stderr.
Tokenizer* tokenizer_train(const unsigned char* text, size_t len, int vocab_size, int verbose);

// The project's tokenizer file. Load returns NULL and writes err on any problem.
int tokenizer_save(const Tokenizer* t, const char* path, char* err);   // 0 on success
Tokenizer* tokenizer_load(const char* path, char* err);
// The same, refused (NULL, err) unless it has vocab_size ids: the tokenizer of a model.
Tokenizer* tokenizer_load_sized(const char* path, int vocab_size, char* err);

// A hash of the tokenizer's file content, never 0: shards record the fingerprint of the
// tokenizer that made them (data/shard.h), so that a mismatch can be refused.
uint64_t tokenizer_fingerprint(const Tokenizer* t);

// GPT-2's encoder.json + vocab.bpe: gives GPT-2's exact token ids.
Tokenizer* tokenizer_load_gpt2(const char* encoder_json, const char* vocab_bpe, char* err);

int tokenizer_vocab_size(const Tokenizer* t);
int tokenizer_eot(const Tokenizer* t);   // id of <|endoftext|>

// Writes at most len ids to out (a token covers at least one byte); returns how many.
size_t tokenizer_encode(const Tokenizer* t, const unsigned char* text, size_t len, int* out);

// The bytes of one token (not NUL-terminated). NULL for an id outside the vocabulary.
const unsigned char* tokenizer_token(const Tokenizer* t, int id, size_t* len);

// Writes the bytes of ids to out (out == NULL: only counts); returns the byte count.
// Ids outside the vocabulary decode to nothing.
size_t tokenizer_decode(const Tokenizer* t, const int* ids, size_t n, unsigned char* out);

void tokenizer_free(Tokenizer* t);

#ifdef __cplusplus
}
#endif
#endif
