// common/atomic_file.h: every file the project writes goes to a temporary sibling first and is
// renamed over its path once complete and on disk, so a reader or a crash sees the old file or
// the whole new one.
#ifndef FLASHGPT_ATOMIC_FILE_H
#define FLASHGPT_ATOMIC_FILE_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

// The temporary file for path (its name into tmp, tmp_len bytes), or NULL with err.
FILE* atomic_open(const char* path, char* tmp, size_t tmp_len, char* err);

// ok says whether every write to f succeeded. Flushes f to disk and renames it into place;
// otherwise removes it. 0, or -1 with err.
int atomic_close(FILE* f, const char* tmp, const char* path, int ok, char* err);

#ifdef __cplusplus
}
#endif
#endif
