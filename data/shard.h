// data/shard.h: the token shard file, compatible with llm.c.
// Header: 256 int32 = [magic 20240520, version, token count, vocab size or 0, fingerprint low
// 32 bits, high 32 bits, 0...], then the tokens: uint16 for version 1 (vocabularies up to 65 536
// ids), uint32 for version 2. The fingerprint is that of the tokenizer that made the tokens
// (tokenizer_fingerprint); 0, as in llm.c's files, means unknown, and such shards load with any.
#ifndef FLASHGPT_SHARD_H
#define FLASHGPT_SHARD_H

#include <stddef.h>
#include <stdint.h>
#include "common/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SHARD_MAGIC 20240520
#define SHARD_VERSION_U16 1
#define SHARD_VERSION_U32 2
#define SHARD_HEADER_INTS 256

// Writes tokens (each < vocab_size), made by the tokenizer of that fingerprint (0: unknown),
// atomically (temporary name, then rename); 0 on success.
int shard_write_tagged(const char* path, const int* tokens, size_t n, int vocab_size,
                       uint64_t fingerprint, char* err);

// The same without a fingerprint, for tokens of no particular tokenizer (tests).
int shard_write(const char* path, const int* tokens, size_t n, int vocab_size, char* err);

// Reads a whole shard; checks magic, version, size, that every id < vocab_size (vocab_size <= 0:
// no id check) and the fingerprint (shard_check_fingerprint). Returns a malloc'd array and sets
// *n, or NULL with err.
int* shard_read(const char* path, size_t* n, int vocab_size, uint64_t fingerprint, char* err);

// What a shard's header says, once checked against the file.
typedef struct {
    int version;        // SHARD_VERSION_U16 or SHARD_VERSION_U32
    int vocab_size;     // header[3]: 0 in llm.c files
    int64_t n_tokens;
    uint64_t fingerprint;   // of the tokenizer that made the tokens; 0: unknown
} ShardHeader;

// Reads and checks the header of the shard open as fd: magic, version, that the file holds
// exactly n_tokens tokens, and (vocab_size > 0) that the shard's vocabulary is not larger.
// 0, or -1 with err naming path.
int shard_read_header(int fd, const char* path, int vocab_size, ShardHeader* h, char* err);

// Refuses a shard made by another tokenizer than the one of fingerprint expected: 0, or -1 with
// err naming path. A shard without a fingerprint, or expected 0, passes.
int shard_check_fingerprint(const ShardHeader* h, const char* path, uint64_t expected, char* err);

// Reads tokens [start, start + count) of the shard open as fd into out, checking that every id
// is < vocab_size (vocab_size <= 0: no check). 0, or -1 with err naming path.
int shard_read_tokens(int fd, const char* path, const ShardHeader* h, int64_t start,
                      size_t count, int* out, int vocab_size, char* err);

#ifdef __cplusplus
}
#endif
#endif
