// common/bytes.h: byte counts: in GiB (2^30 bytes) for printing, and rounded up to the 256 bytes
// that each buffer carved out of one allocation starts at (cudaMalloc's own alignment, which
// vector loads, cp.async and TMA rely on).
#ifndef FLASHGPT_BYTES_H
#define FLASHGPT_BYTES_H

#include <stddef.h>

#define GIB(bytes) ((double)(bytes) / (1024.0 * 1024.0 * 1024.0))

#define CARVE_ALIGN 256

static inline size_t carve_round_up(size_t bytes) { return (bytes + CARVE_ALIGN - 1) / CARVE_ALIGN * CARVE_ALIGN; }

#endif
