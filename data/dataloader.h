// data/dataloader.h: batches of B samples from one or many shards (a glob). A sample is T+1
// consecutive tokens of the shards' stream, starting at a multiple of T (so the samples next to
// it share one token with it), or with rows aligned to documents (dataloader_align_documents) at
// a document's first token; a batch gives their first T tokens as inputs (B, T) and their last T
// as targets (B, T), the targets shifted by one token.
// Rank r of R reads only its own disjoint part of every epoch; with shuffling, the order of
// samples and shards changes every epoch, from a seed. The position (DataLoaderState) can be
// saved and restored so that a resumed run sees exactly the batches it would have seen.
#ifndef FLASHGPT_DATALOADER_H
#define FLASHGPT_DATALOADER_H

#include <stddef.h>
#include <stdint.h>
#include "common/error.h"

#ifdef __cplusplus
extern "C" {
#endif

// Everything needed to continue exactly where a loader was: plain integers, written raw
// into the training state file.
typedef struct {
    int64_t epoch;
    int64_t step_in_epoch;   // batches this rank has taken in the current epoch
} DataLoaderState;

typedef struct DataLoader DataLoader;

// vocab_size: every token must be < vocab_size (a clear error otherwise). Opening reads each
// shard's header and a small sample of its tokens, not the whole payload.
// Returns NULL with err for a missing file, a bad header, a file truncated or longer than its
// header says, an id outside the vocabulary in the sample, shards made by different tokenizers
// (their fingerprints, data/shard.h; shards without one, such as llm.c's, go with any), or too
// little data for one batch per rank.
DataLoader* dataloader_open(const char* pattern, int B, int T, int rank, int world_size,
                            int shuffle, uint64_t seed, int vocab_size, char* err);

// The vocabulary size the header of the first shard pattern matches states, 0 when it states none
// (llm.c's shards), or -1 with err naming the pattern or the shard: a model's vocabulary when no
// tokenizer or checkpoint gives it.
int dataloader_vocab_size(const char* pattern, char* err);

// The fingerprint of the tokenizer that made the shards, 0 when none of them records it.
uint64_t dataloader_fingerprint(const DataLoader* dl);

// Refuses shards made by another tokenizer than the one of fingerprint expected (the caller's
// tokenizer_fingerprint, or another loader's dataloader_fingerprint); 0 or shards without a
// fingerprint pass. 0, or -1 with err naming a shard.
int dataloader_check_fingerprint(const DataLoader* dl, uint64_t expected, char* err);

// Makes every sample start at a document: at a position of the stream holding document_token
// (the tokenizer's <|endoftext|>, which prepare_data puts before each document). A sample still
// holds the T+1 tokens from its start, running on into the documents after its own when that one
// is shorter. The samples start at the document starts taken in stream order, each the first at or
// after the end of the sample before it (that sample's start + T: the token they share), while its
// T+1 tokens lie within the stream; so a document longer than T is cut at T+1 tokens, and the rest
// of the document a sample ends in starts no sample and goes unseen, as does any text before the
// first document. Order, shuffle and the ranks' parts are as above, over these samples; the
// position goes back to the first batch. Reads the whole stream once, checking every id against
// the vocabulary. 0, or -1 with err naming the pattern (no token document_token in the shards,
// fewer samples than a batch per rank) or a shard, the loader then as it was.
int dataloader_align_documents(DataLoader* dl, int document_token, char* err);

// What an epoch covers: the stream's tokens, the documents in it (the positions holding the
// document token of dataloader_align_documents; 0 without it), its samples, and the tokens past
// the first that are no sample's target (n_tokens - 1 - samples * T: the stream's last tokens,
// short of a sample; aligned, also the rest of each document cut and any text before the first
// document), which every epoch leaves unseen.
typedef struct {
    int64_t tokens, documents, samples, unseen;
} DataLoaderCoverage;
DataLoaderCoverage dataloader_coverage(const DataLoader* dl);

// Fills inputs and targets, each (B, T), checking every token read against the vocabulary.
// Returns 0, or -1 with err naming the shard (an id outside the vocabulary, with the token's
// position in the shard; a shard changed); a failed call leaves the position where it was.
int dataloader_next(DataLoader* dl, int* inputs, int* targets, char* err);

// Batches per epoch for this rank.
int64_t dataloader_batches_per_epoch(const DataLoader* dl);

void dataloader_reset(DataLoader* dl);   // back to the first batch of epoch 0
DataLoaderState dataloader_state(const DataLoader* dl);
int dataloader_restore(DataLoader* dl, DataLoaderState s, char* err);   // 0 on success
// The same for a state saved by a loader of saved_ranks ranks (a run resumed on another number
// of them): the samples of the epoch it had taken count as taken, in this loader's batches;
// *seen_again is 1 when they are no whole number of them, and the last are read again.
int dataloader_restore_ranks(DataLoader* dl, DataLoaderState s, int saved_ranks, int* seen_again, char* err);

// Which files the loader reads, for a program to say: "1 shard (PATH)" or "N shards (FIRST to
// LAST)", into out (len bytes).
void dataloader_describe(const DataLoader* dl, char* out, size_t len);

// The glob of the validation shards beside the training shards of train_pattern: "train_" in its
// file-name part becomes "val_" (datasets/x/train_*.bin: datasets/x/val_*.bin), into out (len
// bytes). 0, or -1 with err when that part has no "train_" or out is too short.
int dataloader_val_pattern(const char* train_pattern, char* out, size_t len, char* err);

void dataloader_close(DataLoader* dl);

#ifdef __cplusplus
}
#endif
#endif
