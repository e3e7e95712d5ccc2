// attention/flash.cu: the flash dispatcher: which shapes the kernels take, and which family
// runs: wgmma on a Hopper GPU when the build holds it (sm_90a), mma.sync everywhere else. For
// the backward it also picks the dQ path (flash.h's FlashDq), deterministic or not.
#include <limits.h>
#include <math.h>
#include "attention/flash.h"
#include "attention/mask.h"

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

const char* flash_attention_params_unsupported(const AttentionParams* p, const AttentionMask* mask) {
    const char* why = flash_attention_unsupported(p->shape);
    if (!why) why = attention_mask_unsupported(mask, p->shape);
    if (why) return why;
    const AttentionTensor* views[] = {&p->q, &p->k, &p->v, &p->o, &p->dout, &p->dq, &p->dk, &p->dv};
    for (int i = 0; i < 8; i++)
        if (views[i]->ptr && !attention_tensor_packed(views[i]))
            return "flash attention: every tensor must be 16-byte aligned, its strides multiples of 8 elements";
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

// A call the kernels cannot compute is an error, never a wrong result.
static void require_supported(const AttentionParams* p, const AttentionMask* mask) {
    const char* why = flash_attention_params_unsupported(p, mask);
    if (why) die("%s", why);
}

void flash_attention_forward(const AttentionParams* p, const AttentionMask* mask, cudaStream_t stream) {
    require_supported(p, mask);
    if (flash_attention_wgmma_available()) flash_attention_forward_wgmma(p, mask, stream);
    else flash_attention_forward_mma(p, mask, stream);
}

// The wgmma backward's dQ path: dQ in a kernel of its own (deterministic) up to the longest T
// at which it measured faster on an H200 than the in-kernel path of the same mode, atomic or
// fixed point (its two products more than pay for the accumulator's adds at short T); the
// in-kernel path above.
static FlashDq wgmma_dq_path(AttentionShape s, int deterministic) {
    int separate_max_T = s.HS == 64 ? (deterministic ? 1024 : 256) : (deterministic ? 2048 : 1024);
    if (s.T <= separate_max_T) return FLASH_DQ_SEPARATE;
    return deterministic ? FLASH_DQ_FIXED : FLASH_DQ_ATOMIC;
}

void flash_attention_backward(const AttentionParams* p, const AttentionMask* mask, void* scratch, int deterministic,
                              cudaStream_t stream) {
    require_supported(p, mask);
    if (flash_attention_wgmma_available())
        flash_attention_backward_wgmma(p, mask, scratch, wgmma_dq_path(p->shape, deterministic), stream);
    else
        flash_attention_backward_mma(p, mask, scratch, deterministic ? FLASH_DQ_SEPARATE : FLASH_DQ_ATOMIC, stream);
}
