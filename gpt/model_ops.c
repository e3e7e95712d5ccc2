// gpt/model_ops.c: an architecture's lists of operations (gpt/model_ops.h).
#include "gpt/model_ops.h"

static NormKind norm_kind(const Architecture* a) { return a->rms_norm ? NORM_RMSNORM : NORM_LAYERNORM; }

StemOps stem_ops(const Architecture* a) {
    StemOps s = {0};
    s.op[s.count++] = STEM_EMBEDDING;
    if (a->embedding_norm) s.op[s.count++] = STEM_EMBEDDING_NORM;
    if (a->smear) s.op[s.count++] = STEM_SMEAR;
    return s;
}

BlockOps block_ops(const Architecture* a, int l, int L) {
    BlockOps b = {0};
    b.norm = norm_kind(a);
    b.qk_norm = a->qk_norm;
    b.rotary = a->rotary;
    b.rotary_base = a->rotary_base;
    b.window = architecture_window(a, l);
    b.activation = a->relu2 ? ACTIVATION_RELU2 : ACTIVATION_GELU;
    if (a->residual_lambdas) b.op[b.count++] = BLOCK_RESIDUAL_LAMBDAS;
    int value_embedding = architecture_value_embedding_layer(a, l, L);
    b.op[b.count++] = BLOCK_NORM1;
    if (value_embedding) b.op[b.count++] = BLOCK_VALUE_GATE;
    b.op[b.count++] = BLOCK_QKV;
    if (value_embedding) b.op[b.count++] = BLOCK_VALUE_EMBEDDING;
    if (architecture_transforms_qk(a)) b.op[b.count++] = BLOCK_QK_NORM_ROTARY;
    b.op[b.count++] = BLOCK_ATTENTION;
    b.op[b.count++] = BLOCK_ATTPROJ;
    b.op[b.count++] = BLOCK_NORM2;
    b.op[b.count++] = BLOCK_FC;
    b.op[b.count++] = BLOCK_FCPROJ;
    return b;
}

HeadOps head_ops(const Architecture* a) {
    HeadOps h = {0};
    h.norm = norm_kind(a);
    h.softcap = a->softcap;
    if (a->backout) h.op[h.count++] = HEAD_BACKOUT;
    h.op[h.count++] = HEAD_NORM;
    h.op[h.count++] = HEAD_LOGITS;
    return h;
}
