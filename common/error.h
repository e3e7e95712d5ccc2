// common/error.h: the one way errors are reported, one line naming the file or flag and what is
// wrong. The plain C libraries (common/, tokenizer/, data/, distributed/) never exit: they return
// a failure value and write the message into a caller's buffer of ERR_LEN bytes (set_err), but
// for the command line's readers (common/parse.h, common/options.h), which end the program as
// the programs do, naming the argument. The programs end with die(): "error: <message>" on
// stderr and exit status 1, and so does the trainer's library (train/), which is train_gpt's,
// naming its flags. So do the CUDA libraries (layers/, attention/, gpt/), in library
// words (never a program's flags), on what a caller cannot recover from: a CUDA, cuBLAS or NCCL
// error (common/cuda_check.h), a call outside their contract (the callers check first:
// attention_unsupported, gpu_memory_unfit, ...), host memory running out, and, in
// gpt/checkpoint.cu, a checkpoint file that cannot be read or written or is corrupt.
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
