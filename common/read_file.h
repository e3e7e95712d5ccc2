// common/read_file.h: reading a whole file into memory, for the tokenizer, the data tools and the
// programs; opening a file that is read at offsets or checked against its size (shards,
// checkpoints, tokenizers, the files of a bounded size below), which only a regular file can be,
// and checking that size.
#ifndef FLASHGPT_READ_FILE_H
#define FLASHGPT_READ_FILE_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

// The file's bytes in a malloc'd buffer (with one extra 0 byte after them) and their count in
// *len, or NULL with err naming path. Any file that reads to an end: a pipe (/dev/stdin) too.
unsigned char* read_file(const char* path, size_t* len, char* err);

// The same, for a regular file of a kind that is never larger than max_len bytes (a FIFO, a
// device or a folder is refused as open_regular_file refuses it): one that is larger (a wrong
// file) is refused unread, or once max_len + 1 bytes have been read should it grow meanwhile.
unsigned char* read_file_at_most(const char* path, size_t max_len, size_t* len, char* err);

// path opened for reading when it is a regular file: a descriptor, or -1 with err naming path
// (a FIFO, a device or a folder is refused without waiting for a FIFO's writer).
int open_regular_file(const char* path, char* err);

// The same as a stream ("rb"), or NULL with err.
FILE* fopen_regular_file(const char* path, char* err);

// 0 when f, opened from path, has exactly expected bytes; else -1 with err naming path ("truncated
// or corrupt"), or why it cannot be measured.
int file_size_refused(FILE* f, const char* path, long long expected, char* err);

#ifdef __cplusplus
}
#endif
#endif
