// utils.h: error reporting and atomic file writes, shared by the C code (tokenizer, data) and
// the programs. Library functions never exit: they return a failure value and write a one-line
// message, naming the file or flag and what is wrong, into a caller's buffer of ERR_LEN bytes.
// Programs print that message with die() and exit non-zero.
#ifndef FLASHGPT_UTILS_H
#define FLASHGPT_UTILS_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#define ERR_LEN 512

static inline void set_err(char* err, const char* fmt, ...) {
    if (!err) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, ERR_LEN, fmt, ap);
    va_end(ap);
}

__attribute__((noreturn)) static inline void die(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "error: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

// Every file the project writes goes to a temporary sibling first and is renamed over its path
// once complete and on disk, so a reader or a crash sees the old file or the whole new one.
// atomic_open: the temporary file for path (its name into tmp, tmp_len bytes), or NULL with err.
static inline FILE* atomic_open(const char* path, char* tmp, size_t tmp_len, char* err) {
    if (snprintf(tmp, tmp_len, "%s.tmp%ld", path, (long)getpid()) >= (int)tmp_len) {
        set_err(err, "%s: path too long", path);
        return NULL;
    }
    FILE* f = fopen(tmp, "wb");
    if (!f) set_err(err, "%s: cannot create: %s", tmp, strerror(errno));
    return f;
}

// atomic_close: ok says whether every write to f succeeded. Flushes f to disk and renames it
// into place; otherwise removes it. 0, or -1 with err.
static inline int atomic_close(FILE* f, const char* tmp, const char* path, int ok, char* err) {
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int write_errno = errno;
    if (fclose(f) != 0 && ok) {
        ok = 0;
        write_errno = errno;
    }
    if (!ok) {
        set_err(err, "%s: write failed: %s", tmp, strerror(write_errno));
        remove(tmp);
        return -1;
    }
    if (rename(tmp, path) != 0) {
        set_err(err, "%s: cannot rename to %s: %s", tmp, path, strerror(errno));
        remove(tmp);
        return -1;
    }
    return 0;
}

#endif
