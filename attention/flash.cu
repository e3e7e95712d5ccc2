// attention/flash.cu: the flash dispatcher: which shapes the kernels take, and which family
// runs: wgmma on a Hopper GPU when the build holds it (sm_90a), mma.sync everywhere else. For
// the backward it also picks the dQ path (flash.h's FlashDq), deterministic or not.
#include <limits.h>
#include <math.h>
#include "attention/flash.h"

const char* flash_attention_unsupported(AttentionShape s) {
    if (s.HS != 64 && s.HS != 128) return "flash attention: head size must be 64 or 128";
    if (s.B < 1 || s.T < 1 || s.NH < 1) return "flash attention: B, T and NH must be at least 1";
    if (!(s.scale > 0.0f) || isinf(s.scale)) return "flash attention: the softmax scale must be positive and finite";
    // Launch grids, row indices (b, h, t) and offsets within a qkv row stay in int; offsets
    // across rows are 64-bit.
    if ((long long)s.B * s.NH * s.T > INT_MAX) return "flash attention: B*NH*T must be below 2^31";
    if (3LL * s.NH * s.HS > INT_MAX) return "flash attention: 3*NH*HS must be below 2^31";
    return NULL;
}

// Tells whether the code the GPU runs is sm_90a code: the wgmma kernels' bodies exist only
// there (elsewhere they compile empty).
__global__ void wgmma_probe_kernel(int* has_wgmma) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    *has_wgmma = 1;
#else
    *has_wgmma = 0;
#endif
}

int flash_attention_wgmma_available(void) {
    static int available = -1;
    if (available < 0) {
        int* flag;
        cudaCheck(cudaMalloc((void**)&flag, sizeof(int)));
        wgmma_probe_kernel<<<1, 1>>>(flag);
        cudaCheckLaunch();
        cudaCheck(cudaMemcpy(&available, flag, sizeof(int), cudaMemcpyDeviceToHost));
        cudaCheck(cudaFree(flag));
    }
    return available;
}

void flash_attention_forward(AttentionShape s, bf16* out, float* lse, const bf16* qkv, cudaStream_t stream) {
    if (flash_attention_wgmma_available()) flash_attention_forward_wgmma(s, out, lse, qkv, stream);
    else flash_attention_forward_mma(s, out, lse, qkv, stream);
}

// The wgmma backward's dQ path: dQ in a kernel of its own (deterministic) up to the longest T
// at which it measured faster on an H200 than the in-kernel path of the same mode, atomic or
// fixed point (bench/RESULTS.md, attention v23); the in-kernel path above.
static FlashDq wgmma_dq_path(AttentionShape s, int deterministic) {
    int separate_max_T = s.HS == 64 ? (deterministic ? 1024 : 256) : (deterministic ? 2048 : 1024);
    if (s.T <= separate_max_T) return FLASH_DQ_SEPARATE;
    return deterministic ? FLASH_DQ_FIXED : FLASH_DQ_ATOMIC;
}

void flash_attention_backward(AttentionShape s, bf16* dqkv, const bf16* dout, const bf16* out, const float* lse,
                              const bf16* qkv, void* scratch, int deterministic, cudaStream_t stream) {
    if (flash_attention_wgmma_available()) {
        flash_attention_backward_wgmma(s, dqkv, dout, out, lse, qkv, scratch, wgmma_dq_path(s, deterministic), stream);
    } else {
        flash_attention_backward_mma(s, dqkv, dout, out, lse, qkv, scratch,
                                     deterministic ? FLASH_DQ_SEPARATE : FLASH_DQ_ATOMIC, stream);
    }
}
