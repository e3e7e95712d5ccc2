// common/error.h: the one way errors are reported. Library functions never exit: they return a
// failure value and write a one-line message, naming the file or flag and what is wrong, into a
// caller's buffer of ERR_LEN bytes (set_err). Programs, and the CUDA checks, end with die():
// "error: <message>" on stderr and exit status 1.
#ifndef FLASHGPT_ERROR_H
#define FLASHGPT_ERROR_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

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
    fflush(stdout);
    fprintf(stderr, "error: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

#endif
