// attention/attention.cu: attention.h, dispatching to the flash kernels (attention/flash.h) or
// the textbook path (attention/naive.h). What the forward keeps for the backward:
//   flash: the log-sum-exp L (B, NH, T) fp32;  naive: the probabilities P (B, NH, T, T) bf16.
#include "attention/attention.h"
#include "attention/flash.h"
#include "attention/naive.h"

const char* attention_kind_name(AttentionKind kind) { return kind == ATTENTION_FLASH ? "flash" : "naive"; }

const char* attention_unsupported(AttentionKind kind, AttentionShape s) {
    return kind == ATTENTION_FLASH ? flash_attention_unsupported(s) : naive_attention_unsupported(s);
}

size_t attention_saved_bytes(AttentionKind kind, AttentionShape s) {
    size_t rows = (size_t)s.B * s.NH * s.T;
    return kind == ATTENTION_FLASH ? rows * sizeof(float) : rows * s.T * sizeof(bf16);
}

size_t attention_scratch_bytes(AttentionKind kind, AttentionShape s) {
    return kind == ATTENTION_FLASH ? flash_attention_scratch_bytes(s) : naive_attention_scratch_bytes(s);
}

// A shape the implementation cannot compute is an error, never a wrong result. Checked here,
// once, for every kernel behind the interface.
static void require_supported(AttentionKind kind, AttentionShape s) {
    const char* why = attention_unsupported(kind, s);
    if (why) die("%s", why);
}

void attention_forward(AttentionKind kind, AttentionShape s, bf16* out, void* saved,
                       const bf16* qkv, cudaStream_t stream) {
    require_supported(kind, s);
    if (kind == ATTENTION_FLASH) flash_attention_forward(s, out, (float*)saved, qkv, stream);
    else naive_attention_forward(s, out, (bf16*)saved, qkv, stream);
}

// The naive path is deterministic whatever the flag says.
void attention_backward(AttentionKind kind, AttentionShape s, bf16* dqkv, const bf16* dout,
                        const bf16* out, const void* saved, const bf16* qkv, void* scratch,
                        int deterministic, cudaStream_t stream) {
    require_supported(kind, s);
    if (kind == ATTENTION_FLASH)
        flash_attention_backward(s, dqkv, dout, out, (const float*)saved, qkv, scratch,
                                 deterministic, stream);
    else naive_attention_backward(s, dqkv, dout, (const bf16*)saved, qkv, scratch, stream);
}
