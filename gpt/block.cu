// gpt/block.cu: the transformer block's forward and backward (gpt/block.h), a case per operation
// of gpt/model_ops.h's block list.
#include "gpt/block.h"

#include "layers/gelu.h"
#include "layers/layernorm.h"
#include "layers/residual_lambdas.h"
#include "layers/rmsnorm.h"
#include "layers/rotary.h"
#include "layers/value_embedding.h"

const char* block_unsupported(const Architecture* arch, int HS) {
    const char* why = attention_head_size_unsupported(HS);
    if (why || !architecture_transforms_qk(arch)) return why;
    return rotary_unsupported(HS, arch->rotary_base);
}

// Plan i serves the layers l = i mod the pattern's length, whose window is layer i's.
void block_attention_plans(const Architecture* arch, const AttentionPlan* base, const int* doc_start,
                           const int* doc_end, AttentionPlan plans[ARCHITECTURE_MAX_WINDOWS]) {
    for (int i = 0; i < block_attention_count(arch); i++) {
        plans[i] = *base;
        plans[i].mask = (AttentionMask){arch->documents ? doc_start : NULL, arch->documents ? doc_end : NULL,
                                        architecture_window(arch, i)};
    }
}

int block_forward_marks(const Architecture* arch, int L) {
    int marks = 0;
    for (int l = 0; l < L; l++) marks += block_ops(arch, l, L).count;
    return marks;
}

int block_backward_marks(const Architecture* arch, int L) {
    int marks = 0;
    for (int l = 0; l < L; l++) marks += block_ops(arch, l, L).count + 3;
    return marks;
}

void norm_forward(NormKind norm, bf16* out, float* mean, float* rstd, const bf16* inp, const bf16* weight,
                  const bf16* bias, int N, int C, cudaStream_t stream) {
    switch (norm) {
    case NORM_LAYERNORM: layernorm_forward(out, mean, rstd, inp, weight, bias, N, C, stream); break;
    case NORM_RMSNORM: rmsnorm_forward(out, rstd, inp, N, C, stream); break;
    }
}

void norm_backward(NormKind norm, bf16* dinp, bf16* dweight, bf16* dbias, const bf16* dout, const bf16* inp,
                   const bf16* weight, const float* mean, const float* rstd, int N, int C, void* scratch,
                   cudaStream_t stream) {
    switch (norm) {
    case NORM_LAYERNORM:
        layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, scratch, stream);
        break;
    case NORM_RMSNORM: rmsnorm_backward(dinp, dout, inp, rstd, N, C, stream); break;
    }
}

// QK-norm and rotary, whichever the block has, in place on qkv: forward, or (dqkv given)
// backward; a part of the profile of its own.
static void qk_norm_rotary(const BlockPass* pass, const BlockOps* ops, const BlockActivations* x, bf16* dqkv) {
    AttentionShape s = pass->shape;
    float* rstd = ops->qk_norm ? x->qk_rstd : NULL;
    const int* positions = ops->rotary ? pass->positions : NULL;
    cudaStream_t st = pass->matmul->stream;
    if (dqkv)
        qk_norm_rotary_backward(dqkv, x->qkv, rstd, positions, s.B * s.T, s.NH, s.HS, ops->rotary_base, st);
    else qk_norm_rotary_forward(x->qkv, rstd, positions, s.B * s.T, s.NH, s.HS, ops->rotary_base, st);
    profile_mark(pass->profile, PART_QK_NORM_ROTARY, dqkv ? PHASE_BACKWARD : PHASE_FORWARD, st);
}

// fch_gelu (N, 4C) = activation(ln2 @ fcw^T + fcb): ReLU^2 after the matmul; GELU in its epilogue
// (fch kept), or with RECOMPUTE_GELU in a kernel of its own after it. In FP8 (fc the layer's
// Fp8Linear) GELU is that kernel either way (layers/matmul.h), so the recomputation sees the
// forward's bits.
static void fc_forward(const BlockPass* pass, const BlockOps* ops, const BlockActivations* x,
                       const LayerParameters* w, Fp8Linear* fc) {
    int C = pass->shape.NH * pass->shape.HS, N = pass->shape.B * pass->shape.T;
    const MatmulStream* mm = pass->matmul;
    void* scratch = pass->fp8_scratch;
    switch (ops->activation) {
    case ACTIVATION_RELU2:
        if (fc) matmul_forward_relu2_fp8(x->fch_gelu, x->ln2, w->fcb, N, fc, scratch, mm);
        else matmul_forward_relu2(x->fch_gelu, x->ln2, w->fcw, w->fcb, N, C, 4 * C, mm);
        break;
    case ACTIVATION_GELU:
        if (fc && (pass->recompute & RECOMPUTE_GELU)) {
            matmul_forward_fp8(x->fch, NULL, x->ln2, w->fcb, NULL, N, fc, scratch, mm);
            gelu_forward(x->fch_gelu, x->fch, (size_t)N * 4 * C, mm->stream);
        } else if (fc) {
            matmul_forward_fp8(x->fch_gelu, x->fch, x->ln2, w->fcb, NULL, N, fc, scratch, mm);
        } else if (pass->recompute & RECOMPUTE_GELU) {
            matmul_forward(x->fch, NULL, x->ln2, w->fcw, w->fcb, NULL, N, C, 4 * C, mm);
            gelu_forward(x->fch_gelu, x->fch, (size_t)N * 4 * C, mm->stream);
        } else {
            matmul_forward(x->fch_gelu, x->fch, x->ln2, w->fcw, w->fcb, NULL, N, C, 4 * C, mm);
        }
        break;
    }
}

// fcproj's backward, into dwide the gradient of fch (the MLP's pre-activation): the activation's
// backward done with this matmul, GELU's in its epilogue, ReLU^2's in the pass after it; through
// fcproj, the layer's Fp8Linear, when its gradients run in FP8.
static void fcproj_backward(const BlockPass* pass, const BlockOps* ops, const BlockActivations* x,
                            const LayerParameters* w, const LayerParameters* dw, const BlockGradients* d,
                            Fp8Linear* fcproj) {
    int C = pass->shape.NH * pass->shape.HS, N = pass->shape.B * pass->shape.T;
    void* scratch = pass->scratch;
    const MatmulStream* mm = pass->matmul;
    switch (ops->activation) {
    case ACTIVATION_RELU2:
        if (fcproj)
            matmul_backward_relu2_fp8(d->dwide, dw->fcprojw, dw->fcprojb, d->dresidual, x->fch_gelu, N, fcproj,
                                      pass->fp8_scratch, mm);
        else matmul_backward_relu2(d->dwide, dw->fcprojw, dw->fcprojb, d->dresidual, x->fch_gelu, w->fcprojw, N, 4 * C,
                                   C, scratch, mm);
        break;
    case ACTIVATION_GELU:
        if (fcproj)
            matmul_backward_fp8(d->dwide, dw->fcprojw, dw->fcprojb, d->dresidual, x->fch, N, fcproj, pass->fp8_scratch,
                                mm);
        else matmul_backward(d->dwide, dw->fcprojw, dw->fcprojb, d->dresidual, x->fch_gelu, w->fcprojw, x->fch, N,
                             4 * C, C, scratch, mm);
        break;
    }
}

// Layer l's fc (which 0) or fcproj (1) in FP8, or NULL where the MLP is bf16.
static Fp8Linear* fp8_mlp(const BlockPass* pass, int l, int which) {
    return pass->fp8_mlp ? &pass->fp8_mlp[2 * l + which] : NULL;
}

// The same for the gradients' matmuls, which --fp8-grad bf16 leaves in bf16.
static Fp8Linear* fp8_mlp_backward(const BlockPass* pass, int l, int which) {
    return pass->fp8_grad_bf16 ? NULL : fp8_mlp(pass, l, which);
}

void block_forward(const BlockPass* pass, int l, const BlockActivations* x, const LayerParameters* w) {
    const BlockOps ops = block_ops(pass->arch, l, pass->layers);
    AttentionShape s = pass->shape;
    int C = s.NH * s.HS, N = s.B * s.T;
    const MatmulStream* mm = pass->matmul;
    cudaStream_t st = mm->stream;
    Profile* prof = pass->profile;
    // The residual connections are added in the projections' epilogues.
    for (int i = 0; i < ops.count; i++) {
        switch (ops.op[i]) {
        case BLOCK_RESIDUAL_LAMBDAS:
            residual_lambdas_forward(x->res, x->x, x->x0, w->resid_lambda, w->x0_lambda, N, C, st);
            profile_mark(prof, PART_RESIDUAL_LAMBDAS, PHASE_FORWARD, st);
            break;
        case BLOCK_NORM1:
            norm_forward(ops.norm, x->ln1, x->ln1_mean, x->ln1_rstd, x->res, w->ln1w, w->ln1b, N, C, st);
            profile_mark(prof, PART_NORM, PHASE_FORWARD, st);
            break;
        case BLOCK_VALUE_GATE:
            value_gate_forward(x->value_gate, x->ln1, w->value_gate, N, C, s.NH, VALUE_GATE_CHANNELS, st);
            profile_mark(prof, PART_VALUE_EMBEDDINGS, PHASE_FORWARD, st);
            break;
        case BLOCK_QKV:
            matmul_forward(x->qkv, NULL, x->ln1, w->qkvw, w->qkvb, NULL, N, C, 3 * C, mm);
            profile_mark(prof, PART_QKV, PHASE_FORWARD, st);
            break;
        case BLOCK_VALUE_EMBEDDING:
            value_embedding_forward(x->qkv + 2 * C, 3 * C, pass->tokens, w->value_embedding, x->value_gate, NULL, 0, 0,
                                    NULL, N, s.NH, s.HS, st);
            profile_mark(prof, PART_VALUE_EMBEDDINGS, PHASE_FORWARD, st);
            break;
        case BLOCK_QK_NORM_ROTARY: qk_norm_rotary(pass, &ops, x, NULL); break;
        case BLOCK_ATTENTION:
            attention_forward(block_attention(pass->arch, pass->attention, l), s, x->atty, x->att_saved, x->qkv,
                              pass->scratch, st);
            profile_mark(prof, PART_ATTENTION, PHASE_FORWARD, st);
            break;
        case BLOCK_ATTPROJ:
            matmul_forward(x->mid, NULL, x->atty, w->attprojw, w->attprojb, x->res, N, C, C, mm);
            profile_mark(prof, PART_ATTPROJ, PHASE_FORWARD, st);
            break;
        case BLOCK_NORM2:
            norm_forward(ops.norm, x->ln2, x->ln2_mean, x->ln2_rstd, x->mid, w->ln2w, w->ln2b, N, C, st);
            profile_mark(prof, PART_NORM, PHASE_FORWARD, st);
            break;
        case BLOCK_FC:
            fc_forward(pass, &ops, x, w, fp8_mlp(pass, l, 0));
            profile_mark(prof, PART_MLP_UP, PHASE_FORWARD, st);
            break;
        case BLOCK_FCPROJ:
            if (pass->fp8_mlp)
                matmul_forward_fp8(x->res_next, NULL, x->fch_gelu, w->fcprojb, x->mid, N, fp8_mlp(pass, l, 1),
                                   pass->fp8_scratch, mm);
            else matmul_forward(x->res_next, NULL, x->fch_gelu, w->fcprojw, w->fcprojb, x->mid, N, 4 * C, C, mm);
            profile_mark(prof, PART_MLP_DOWN, PHASE_FORWARD, st);
            break;
        }
    }
}

void block_backward(const BlockPass* pass, int l, const BlockActivations* x, const LayerParameters* w,
                    const LayerParameters* dw, const BlockGradients* d) {
    const BlockOps ops = block_ops(pass->arch, l, pass->layers);
    AttentionShape s = pass->shape;
    int C = s.NH * s.HS, N = s.B * s.T;
    int re_ln = pass->recompute & RECOMPUTE_LAYERNORM, re_gelu = pass->recompute & RECOMPUTE_GELU;
    const MatmulStream* mm = pass->matmul;
    cudaStream_t st = mm->stream;
    Profile* prof = pass->profile;
    void* scratch = pass->scratch;
    // A recomputed activation is made again from what the block kept (the same kernels on the
    // same inputs: the forward's bits): the MLP's inputs before its backward, ln1 once the
    // attention's backward is done (fc's backward has read ln2 then, whose buffer ln1 may share).
    // Its time counts in the backward of its part, beyond the part's floor.
    for (int i = ops.count - 1; i >= 0; i--) {
        switch (ops.op[i]) {
        case BLOCK_FCPROJ:
            if (re_gelu) {
                gelu_forward(x->fch_gelu, x->fch, (size_t)N * 4 * C, st);
                profile_mark(prof, PART_MLP_UP, PHASE_BACKWARD, st);
            }
            if (re_ln) {
                norm_forward(ops.norm, x->ln2, x->ln2_mean, x->ln2_rstd, x->mid, w->ln2w, w->ln2b, N, C, st);
                profile_mark(prof, PART_NORM, PHASE_BACKWARD, st);
            }
            fcproj_backward(pass, &ops, x, w, dw, d, fp8_mlp_backward(pass, l, 1));
            profile_mark(prof, PART_MLP_DOWN, PHASE_BACKWARD, st);
            break;
        case BLOCK_FC:
            if (fp8_mlp_backward(pass, l, 0))
                matmul_backward_fp8(d->dnarrow, dw->fcw, dw->fcb, d->dwide, NULL, N, fp8_mlp_backward(pass, l, 0),
                                    pass->fp8_scratch, mm);
            else matmul_backward(d->dnarrow, dw->fcw, dw->fcb, d->dwide, x->ln2, w->fcw, NULL, N, C, 4 * C, scratch,
                                 mm);
            profile_mark(prof, PART_MLP_UP, PHASE_BACKWARD, st);
            break;
        case BLOCK_NORM2:
            norm_backward(ops.norm, d->dresidual, dw->ln2w, dw->ln2b, d->dnarrow, x->mid, w->ln2w, x->ln2_mean,
                          x->ln2_rstd, N, C, scratch, st);
            profile_mark(prof, PART_NORM, PHASE_BACKWARD, st);
            break;
        case BLOCK_ATTPROJ:
            matmul_backward(d->dnarrow, dw->attprojw, dw->attprojb, d->dresidual, x->atty, w->attprojw, NULL, N, C, C,
                            scratch, mm);
            profile_mark(prof, PART_ATTPROJ, PHASE_BACKWARD, st);
            break;
        case BLOCK_ATTENTION:
            attention_backward(block_attention(pass->arch, pass->attention, l), s, d->dwide, d->dnarrow, x->atty,
                               x->att_saved, x->qkv, scratch, st);
            profile_mark(prof, PART_ATTENTION, PHASE_BACKWARD, st);
            if (re_ln) {
                norm_forward(ops.norm, x->ln1, x->ln1_mean, x->ln1_rstd, x->res, w->ln1w, w->ln1b, N, C, st);
                profile_mark(prof, PART_NORM, PHASE_BACKWARD, st);
            }
            break;
        case BLOCK_QK_NORM_ROTARY: qk_norm_rotary(pass, &ops, x, d->dwide); break;   // from the rotated q and k
        case BLOCK_VALUE_EMBEDDING:   // from v's gradient, which QK-norm and rotary leave alone
            value_embedding_backward(d->dvalue_gate, dw->value_embedding, d->dwide + 2 * C, 3 * C, pass->tokens,
                                     pass->token_groups, pass->token_group_count, w->value_embedding, x->value_gate, N,
                                     s.NH, s.HS, st);
            profile_mark(prof, PART_VALUE_EMBEDDINGS, PHASE_BACKWARD, st);
            break;
        case BLOCK_QKV:
            matmul_backward(d->dnarrow, dw->qkvw, dw->qkvb, d->dwide, x->ln1, w->qkvw, NULL, N, C, 3 * C, scratch, mm);
            profile_mark(prof, PART_QKV, PHASE_BACKWARD, st);
            break;
        case BLOCK_VALUE_GATE:   // after qkv's backward, which writes ln1's gradient the gate adds to
            value_gate_backward(dw->value_gate, d->dnarrow, d->dvalue_gate, x->value_gate, x->ln1, w->value_gate, N, C,
                                s.NH, VALUE_GATE_CHANNELS, st);
            profile_mark(prof, PART_VALUE_EMBEDDINGS, PHASE_BACKWARD, st);
            break;
        case BLOCK_NORM1:
            norm_backward(ops.norm, d->dresidual, dw->ln1w, dw->ln1b, d->dnarrow, x->res, w->ln1w, x->ln1_mean,
                          x->ln1_rstd, N, C, scratch, st);
            profile_mark(prof, PART_NORM, PHASE_BACKWARD, st);
            break;
        case BLOCK_RESIDUAL_LAMBDAS:   // the first block's x is x0: its gradients meet in dresidual
            residual_lambdas_backward(d->dresidual, d->dx0, dw->resid_lambda, dw->x0_lambda, x->x, x->x0,
                                      w->resid_lambda, w->x0_lambda, l == 0, N, C, scratch, st);
            profile_mark(prof, PART_RESIDUAL_LAMBDAS, PHASE_BACKWARD, st);
            break;
        }
    }
}
