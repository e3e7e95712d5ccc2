// utils.h: error reporting shared by the C code (tokenizer, data) and the programs.
// Library functions never exit: they return a failure value and write a one-line message,
// naming the file or flag and what is wrong, into a caller's buffer of ERR_LEN bytes.
// Programs print that message with die() and exit non-zero.
#ifndef FLASHGPT_UTILS_H
#define FLASHGPT_UTILS_H

#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>

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

#endif
