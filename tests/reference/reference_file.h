// tests/reference/reference_file.h: the header of the files the numpy reference generators write
// (tests/reference/gen_gpt_reference.py, tests/reference/gen_muon_reference.py): int32[256] holding the magic, version
// 1, B, T, the model's shape (maxT, V, Vp, L, NH, C), the steps and the parameter count in slots
// 0-11, the architecture from slot 16 on (as the model checkpoint holds it from slot 8,
// gpt/checkpoint.h); the slots 12-15 are each file's own. And the relative error a result is checked by.
#ifndef FLASHGPT_TESTS_REFERENCE_FILE_H
#define FLASHGPT_TESTS_REFERENCE_FILE_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "common/error.h"
#include "gpt/parameters.h"

typedef struct {
    int32_t ints[256];
    int B, T, nsteps;
    GPTConfig config;
    size_t P;
} ReferenceHeader;

// path opened and its header read (magic: the file's; generator: the script that writes it):
// the file, at its first byte past the header, or NULL with why.
static inline FILE* open_reference(const char* path, int32_t magic, const char* generator, ReferenceHeader* h,
                                   char* why) {
    FILE* f = fopen(path, "rb");
    if (!f) {
        set_err(why, "%s: cannot open (%s writes it)", path, generator);
        return NULL;
    }
    const int32_t* x = h->ints;
    if (fread(h->ints, sizeof(int32_t), 256, f) != 256 || x[0] != magic || x[1] != 1) {
        set_err(why, "%s: bad header", path);
        fclose(f);
        return NULL;
    }
    h->B = x[2];
    h->T = x[3];
    h->config = (GPTConfig){.maxT = x[4], .V = x[5], .Vp = x[6], .L = x[7], .NH = x[8], .C = x[9]};
    memcpy(&h->config.arch, x + 16, sizeof(Architecture));
    h->nsteps = x[10];
    h->P = (size_t)x[11];
    const char* invalid = gpt_config_invalid(&h->config);
    if (!invalid) invalid = architecture_invalid(&h->config.arch);
    if (invalid) {
        set_err(why, "%s: bad header: %s", path, invalid);
        fclose(f);
        return NULL;
    }
    if (h->P != count_params(&h->config)) {
        set_err(why, "%s: %zu parameters, the model has %zu", path, h->P, count_params(&h->config));
        fclose(f);
        return NULL;
    }
    return f;
}

// ||a - b|| / ||b|| over n values (||a - b|| when b is zero): a result against its reference b.
static inline double relative_l2(const float* a, const float* b, size_t n) {
    double diff = 0.0, ref = 0.0;
    for (size_t i = 0; i < n; i++) {
        diff += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        ref += (double)b[i] * b[i];
    }
    return ref > 0.0 ? sqrt(diff / ref) : sqrt(diff);
}

#endif
