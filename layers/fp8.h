// layers/fp8.h: per-tensor scaling for FP8, the 8-bit floats of Hopper's tensor cores, and the
// quantisation of a bf16 tensor x (rows, cols) into them: q (rows, cols) and, for the matmuls whose
// operands must run along the reduced dimension (layers/matmul.h), q_t (cols, rows), its transpose,
// both row-major, one byte an element, written in one pass.
//   E4M3: 4 exponent bits, 3 mantissa bits, largest 448, no infinity: weights and activations.
//   E5M2: 5 exponent bits, 2 mantissa bits, largest 57344: gradients, whose range is wider.
// q = fp8(x * scale), rounded to nearest even with subnormals, saturating: what would pass the
// largest finite value (an infinity too) becomes it, NaN stays NaN. The matmul reads
// scale_inv = 1 / scale as the dequantising factor of q.
//
// The scale is a power of two: scale = 2^floor(log2(fp8_max / amax)), amax = max |x|. Multiplying
// by it is exact, so FP8's rounding is the only one and q * scale_inv is exactly the value q
// stands for; rounding down to the power of two is the margin, a factor 1 to 2, that keeps
// amax * scale <= fp8_max: with current scaling nothing saturates. It gives up at most one binade
// of range at the small end, of the 18 that E4M3 spans (2^-9 to 448) and the 32 of E5M2 (2^-16
// to 57344).
// amax 0 gives scale 1; an amax under fp8_max / 2^126 gives 2^126; an amax that is infinite or
// NaN gives a NaN scale, so the matmul's output is NaN rather than silently zero.
//
// Two ways to choose the scale, both on the GPU (nothing waits for the host):
//   current: from this tensor's own amax, one more pass over it before the quantisation;
//   delayed: from the largest of the FP8_HISTORY latest amaxes of the tensor, known before the
//            pass, which finds this tensor's amax as it quantises (one pass); values beyond the
//            history's range saturate. The first quantisation of a tensor, with no history yet,
//            takes the current scale.
// Either way each quantisation ends by pushing the tensor's amax into its history and computing
// from it the scale the next delayed quantisation takes.
#ifndef FLASHGPT_FP8_H
#define FLASHGPT_FP8_H

#include <stddef.h>
#include <stdint.h>
#include "common/cuda_check.h"

#define FP8_E4M3_MAX 448.0f
#define FP8_E5M2_MAX 57344.0f
#define FP8_HISTORY 16   // the amaxes delayed scaling looks back over

typedef enum { FP8_E4M3, FP8_E5M2 } Fp8Format;
typedef enum { FP8_SCALING_CURRENT, FP8_SCALING_DELAYED } Fp8Scaling;

// The scaling state of one tensor, on the GPU (zero when made). One tensor's quantisations run in
// stream order, never two at once.
typedef struct {
    // First, at the start of its allocation: cuBLASLt takes its address as a matmul's scale
    // pointer, and its FP8 algorithms refuse one that is not 16-byte aligned (cuBLASLt 13.1 on
    // Hopper: CUBLAS_STATUS_NOT_SUPPORTED at the call, after the heuristic offered them).
    float scale_inv;   // 1 / the scale of the latest quantisation: the dequantising factor of its q
    float scale;       // what the next delayed quantisation multiplies by
    float amax;        // max |x| found during a quantisation (0 between quantisations)
    float history[FP8_HISTORY];   // the latest quantisations' amaxes, newest first; 0: none yet
    unsigned int blocks_done;     // the quantisation's thread blocks that are done (0 between)
} Fp8Scale;

// One tensor quantised again and again (an activation, a weight, a gradient): its format and
// scaling, its state on the GPU, and whether it has been quantised yet (host), which delayed
// scaling needs: the first quantisation takes the current scale. A state restored from a
// checkpoint comes with has_history 1.
typedef struct {
    Fp8Format format;
    Fp8Scaling scaling;
    Fp8Scale* state;
    int has_history;
} Fp8Tensor;

float fp8_max(Fp8Format format);

void fp8_tensor_init(Fp8Tensor* t, Fp8Format format, Fp8Scaling scaling);
void fp8_tensor_free(Fp8Tensor* t);

// *amax = max(*amax, max |x|) over x (n), n % 8 == 0 and x 16-byte aligned; a NaN in x makes it
// NaN. Exact: a maximum of bf16 values.
void fp8_amax(float* amax, const bf16* x, size_t n, cudaStream_t stream);

// q (rows, cols) and q_t (cols, rows), either may be NULL, = x (rows, cols) quantised with t's
// scale; then t's history and next scale are updated (above). rows and cols multiples of 16 (the
// matmuls' FP8 operands are), every pointer 16-byte aligned.
void fp8_quantise(Fp8Tensor* t, uint8_t* q, uint8_t* q_t, const bf16* x, int rows, int cols, cudaStream_t stream);

#endif
