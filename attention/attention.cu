// attention/attention.cu: attention.h. The plan sends each pass to the ring (attention/ring.h),
// the flash kernels (attention/flash.h) or the textbook path (attention/naive.h), on the views
// of the fused activations; decoding goes to attention/decode.h for both kinds. What the forward
// keeps for the backward: the log-sum-exp L (B, NH, T) fp32 (flash, ring) or the probabilities
// P (B, NH, T, T) bf16 (naive).
#include "attention/attention.h"
#include "attention/decode.h"
#include "attention/flash.h"
#include "attention/naive.h"

const char* attention_kind_name(AttentionKind kind) { return kind == ATTENTION_FLASH ? "flash" : "naive"; }

AttentionParams attention_fused_params(AttentionShape s, const bf16* qkv, bf16* out, float* lse, bf16* dqkv,
                                       const bf16* dout) {
    long long C = (long long)s.NH * s.HS, T = s.T;
    // Q, K, V of (b, t, h) are HS values at (b*T + t)*3C + {0, C, 2C} + h*HS.
    AttentionTensor q = {(bf16*)qkv, T * 3 * C, 3 * C, s.HS}, o = {out, T * C, C, s.HS};
    AttentionTensor k = q, v = q, dq = q, dk, dv, dout_view = o;
    k.ptr += C;
    v.ptr += 2 * C;
    dq.ptr = dqkv;
    dk = dq, dv = dq;
    if (dqkv) dk.ptr += C, dv.ptr += 2 * C;
    dout_view.ptr = (bf16*)dout;
    AttentionParams p = {s, q, k, v, o, {lse, (long long)s.NH * T, s.T}, dout_view, dq, dk, dv};
    return p;
}

const char* attention_unsupported(const AttentionPlan* plan, AttentionShape s) {
    const char* why = attention_mask_unsupported(&plan->mask, s);
    if (why) return why;
    if (plan->ring) {
        if (plan->kind != ATTENTION_FLASH) return "context parallel: the ring runs flash attention only";
        return ring_attention_unsupported(plan->ring, s);
    }
    return plan->kind == ATTENTION_FLASH ? flash_attention_unsupported(s) : naive_attention_unsupported(s);
}

const char* attention_head_size_unsupported(int HS) {
    AttentionShape one = {1, 1, 1, HS, 1, 1.0f};   // a row of one head: the other sizes at their least
    const char* why = flash_attention_unsupported(one);
    if (!why) why = naive_attention_unsupported(one);
    if (!why) why = decode_attention_unsupported(one);
    return why;
}

size_t attention_saved_bytes(const AttentionPlan* plan, AttentionShape s) {
    size_t rows = (size_t)s.B * s.NH * s.T;
    return plan->kind == ATTENTION_FLASH ? rows * sizeof(float) : rows * s.T * sizeof(bf16);
}

size_t attention_scratch_bytes(const AttentionPlan* plan, AttentionShape s) {
    if (plan->ring) return ring_attention_workspace_bytes(plan->ring, s);
    return plan->kind == ATTENTION_FLASH ? flash_attention_scratch_bytes(s) : naive_attention_scratch_bytes(s);
}

// A shape the plan cannot compute is an error, never a wrong result. Checked here, once, for
// every kernel behind the interface.
static void require_supported(const AttentionPlan* plan, AttentionShape s) {
    const char* why = attention_unsupported(plan, s);
    if (why) die("%s", why);
}

void attention_forward(const AttentionPlan* plan, AttentionShape s, bf16* out, void* saved, const bf16* qkv,
                       void* scratch, cudaStream_t stream) {
    require_supported(plan, s);
    AttentionParams p = attention_fused_params(s, qkv, out, (float*)saved, NULL, NULL);
    if (plan->ring) ring_attention_forward(plan->ring, s, &plan->mask, out, (float*)saved, qkv, scratch, stream);
    else if (plan->kind == ATTENTION_FLASH) flash_attention_forward(&p, &plan->mask, stream);
    else naive_attention_forward(&p, &plan->mask, (bf16*)saved, stream);
}

void attention_backward(const AttentionPlan* plan, AttentionShape s, bf16* dqkv, const bf16* dout, const bf16* out,
                        const void* saved, const bf16* qkv, void* scratch, cudaStream_t stream) {
    require_supported(plan, s);
    AttentionParams p = attention_fused_params(s, qkv, (bf16*)out, (float*)saved, dqkv, dout);
    if (plan->ring)
        ring_attention_backward(plan->ring, s, &plan->mask, dqkv, dout, out, (const float*)saved, qkv, scratch,
                                plan->deterministic, stream);
    else if (plan->kind == ATTENTION_FLASH) flash_attention_backward(&p, &plan->mask, scratch, plan->deterministic, stream);
    else naive_attention_backward(&p, &plan->mask, (const bf16*)saved, scratch, stream);
}

const char* attention_decode_unsupported(const AttentionPlan* plan, AttentionShape cache) {
    if (plan->ring) return "decode attention: not under context parallelism";
    if (plan->mask.doc_start) return "decode attention: a sample is one document (a plan without documents decodes it)";
    if (plan->mask.window < 0) return "attention mask: the window must be 0 (none) or a number of keys";
    return decode_attention_unsupported(cache);
}

size_t attention_decode_scratch_bytes(const AttentionPlan* plan, AttentionShape cache) {
    return decode_attention_scratch_bytes(cache);
}

void attention_decode(const AttentionPlan* plan, const AttentionParams* p, const int* positions, const DecodeQK* qk,
                      void* scratch, cudaStream_t stream) {
    const char* why = attention_decode_unsupported(plan, p->shape);
    if (why) die("%s", why);
    if (!positions) die("attention_decode: the queries' positions are needed");
    decode_attention(p, positions, plan->mask.window, qk, scratch, stream);
}
