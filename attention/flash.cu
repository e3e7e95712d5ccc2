// attention/flash.cu: flash_attention_forward and _backward pick the kernel family: wgmma on a
// Hopper GPU when the build holds it (sm_90a), mma.sync everywhere else. For the wgmma backward
// they also pick the dQ path where the caller leaves the choice (deterministic == 0).
#include "attention/flash.h"

void flash_attention_forward(AttentionShape s, bf16* out, float* lse, const bf16* qkv, cudaStream_t stream) {
    if (flash_attention_wgmma_available()) flash_attention_forward_wgmma(s, out, lse, qkv, stream);
    else flash_attention_forward_mma(s, out, lse, qkv, stream);
}

void flash_attention_backward(AttentionShape s, bf16* dqkv, const bf16* dout, const bf16* out, const float* lse,
                              const bf16* qkv, void* scratch, int deterministic, cudaStream_t stream) {
    if (flash_attention_wgmma_available()) {
        // Up to these lengths the deterministic path (dK/dV, then dQ on its own, no atomics)
        // measured faster than the atomic one on an H200 (bench/RESULTS.md, attention v10).
        int two_kernels = deterministic || s.T <= (s.HS == 64 ? 2048 : 4096);
        flash_attention_backward_wgmma(s, dqkv, dout, out, lse, qkv, scratch, two_kernels, stream);
    } else {
        flash_attention_backward_mma(s, dqkv, dout, out, lse, qkv, scratch, deterministic, stream);
    }
}
