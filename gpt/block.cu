// gpt/block.cu: the transformer block's forward and backward (gpt/block.h).
#include "gpt/block.h"

#include "layers/gelu.h"
#include "layers/layernorm.h"
#include "layers/rmsnorm.h"
#include "layers/rotary.h"

const char* block_unsupported(const Architecture* arch, int HS) {
    const char* why = attention_head_size_unsupported(HS);
    if (why || !architecture_transforms_qk(arch)) return why;
    return rotary_unsupported(HS, arch->rotary_base);
}

void block_attention_plans(const Architecture* arch, const AttentionPlan* base, const int* doc_start,
                           const int* doc_end, AttentionPlan plans[ARCHITECTURE_MAX_WINDOWS]) {
    for (int i = 0; i < block_attention_count(arch); i++) {
        plans[i] = *base;
        plans[i].mask = (AttentionMask){arch->documents ? doc_start : NULL, arch->documents ? doc_end : NULL,
                                        architecture_window(arch, i)};
    }
}

void norm_forward(const Architecture* arch, bf16* out, float* mean, float* rstd, const bf16* inp, const bf16* weight,
                  const bf16* bias, int N, int C, cudaStream_t stream) {
    if (arch->rms_norm) rmsnorm_forward(out, rstd, inp, N, C, stream);
    else layernorm_forward(out, mean, rstd, inp, weight, bias, N, C, stream);
}

void norm_backward(const Architecture* arch, bf16* dinp, bf16* dweight, bf16* dbias, const bf16* dout,
                   const bf16* inp, const bf16* weight, const float* mean, const float* rstd, int N, int C,
                   void* scratch, cudaStream_t stream) {
    if (arch->rms_norm) rmsnorm_backward(dinp, dout, inp, rstd, N, C, stream);
    else layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, scratch, stream);
}

// QK-norm and rotary, whichever the architecture has, in place on qkv: forward, or (dqkv given)
// backward; a part of the profile of its own.
static void qk_norm_rotary(const BlockPass* pass, const BlockActivations* x, bf16* dqkv) {
    const Architecture* arch = pass->arch;
    if (!architecture_transforms_qk(arch)) return;
    AttentionShape s = pass->shape;
    float* rstd = arch->qk_norm ? x->qk_rstd : NULL;
    const int* positions = arch->rotary ? pass->positions : NULL;
    cudaStream_t st = pass->matmul->stream;
    if (dqkv)
        qk_norm_rotary_backward(dqkv, x->qkv, rstd, positions, s.B * s.T, s.NH, s.HS, arch->rotary_base, st);
    else qk_norm_rotary_forward(x->qkv, rstd, positions, s.B * s.T, s.NH, s.HS, arch->rotary_base, st);
    profile_mark(pass->profile, PART_QK_NORM_ROTARY, dqkv ? PHASE_BACKWARD : PHASE_FORWARD, st);
}

void block_forward(const BlockPass* pass, const BlockActivations* x, const LayerParameters* w) {
    const Architecture* arch = pass->arch;
    AttentionShape s = pass->shape;
    int C = s.NH * s.HS, N = s.B * s.T;
    const MatmulStream* mm = pass->matmul;
    cudaStream_t st = mm->stream;
    Profile* prof = pass->profile;
    norm_forward(arch, x->ln1, x->ln1_mean, x->ln1_rstd, x->res, w->ln1w, w->ln1b, N, C, st);
    profile_mark(prof, PART_NORM, PHASE_FORWARD, st);
    matmul_forward(x->qkv, NULL, x->ln1, w->qkvw, w->qkvb, NULL, N, C, 3 * C, mm);
    profile_mark(prof, PART_QKV, PHASE_FORWARD, st);
    qk_norm_rotary(pass, x, NULL);
    attention_forward(pass->attention, s, x->atty, x->att_saved, x->qkv, pass->scratch, st);
    profile_mark(prof, PART_ATTENTION, PHASE_FORWARD, st);
    // The residual connections are added in the projections' epilogues.
    matmul_forward(x->mid, NULL, x->atty, w->attprojw, w->attprojb, x->res, N, C, C, mm);
    profile_mark(prof, PART_ATTPROJ, PHASE_FORWARD, st);
    norm_forward(arch, x->ln2, x->ln2_mean, x->ln2_rstd, x->mid, w->ln2w, w->ln2b, N, C, st);
    profile_mark(prof, PART_NORM, PHASE_FORWARD, st);
    if (arch->relu2) {
        matmul_forward_relu2(x->fch_gelu, x->ln2, w->fcw, w->fcb, N, C, 4 * C, mm);
    } else if (pass->recompute & RECOMPUTE_GELU) {
        matmul_forward(x->fch, NULL, x->ln2, w->fcw, w->fcb, NULL, N, C, 4 * C, mm);
        gelu_forward(x->fch_gelu, x->fch, (size_t)N * 4 * C, st);
    } else {
        matmul_forward(x->fch_gelu, x->fch, x->ln2, w->fcw, w->fcb, NULL, N, C, 4 * C, mm);
    }
    profile_mark(prof, PART_MLP_UP, PHASE_FORWARD, st);
    matmul_forward(x->res_next, NULL, x->fch_gelu, w->fcprojw, w->fcprojb, x->mid, N, 4 * C, C, mm);
    profile_mark(prof, PART_MLP_DOWN, PHASE_FORWARD, st);
}

void block_backward(const BlockPass* pass, const BlockActivations* x, const LayerParameters* w,
                    const LayerParameters* dw, const BlockGradients* d) {
    const Architecture* arch = pass->arch;
    AttentionShape s = pass->shape;
    int C = s.NH * s.HS, N = s.B * s.T;
    int re_ln = pass->recompute & RECOMPUTE_LAYERNORM, re_gelu = pass->recompute & RECOMPUTE_GELU;
    const MatmulStream* mm = pass->matmul;
    cudaStream_t st = mm->stream;
    Profile* prof = pass->profile;
    void* scratch = pass->scratch;
    // A recomputed activation is made again from what the block kept, just before its use (the
    // same kernels on the same inputs: the forward's bits). Its time counts in the backward of
    // its part, beyond the part's floor.
    if (re_gelu) {
        gelu_forward(x->fch_gelu, x->fch, (size_t)N * 4 * C, st);
        profile_mark(prof, PART_MLP_UP, PHASE_BACKWARD, st);
    }
    if (re_ln) {
        norm_forward(arch, x->ln2, x->ln2_mean, x->ln2_rstd, x->mid, w->ln2w, w->ln2b, N, C, st);
        profile_mark(prof, PART_NORM, PHASE_BACKWARD, st);
    }
    // dwide: the gradient of fch (the MLP's pre-activation), the activation's backward done with
    // this matmul: GELU's in its epilogue, ReLU^2's in the pass after it.
    if (arch->relu2)
        matmul_backward_relu2(d->dwide, dw->fcprojw, dw->fcprojb, d->dresidual, x->fch_gelu, w->fcprojw, N, 4 * C, C,
                              scratch, mm);
    else matmul_backward(d->dwide, dw->fcprojw, dw->fcprojb, d->dresidual, x->fch_gelu, w->fcprojw, x->fch, N, 4 * C,
                         C, scratch, mm);
    profile_mark(prof, PART_MLP_DOWN, PHASE_BACKWARD, st);
    matmul_backward(d->dnarrow, dw->fcw, dw->fcb, d->dwide, x->ln2, w->fcw, NULL, N, C, 4 * C, scratch, mm);
    profile_mark(prof, PART_MLP_UP, PHASE_BACKWARD, st);
    norm_backward(arch, d->dresidual, dw->ln2w, dw->ln2b, d->dnarrow, x->mid, w->ln2w, x->ln2_mean, x->ln2_rstd, N, C,
                  scratch, st);
    profile_mark(prof, PART_NORM, PHASE_BACKWARD, st);
    matmul_backward(d->dnarrow, dw->attprojw, dw->attprojb, d->dresidual, x->atty, w->attprojw, NULL, N, C, C,
                    scratch, mm);
    profile_mark(prof, PART_ATTPROJ, PHASE_BACKWARD, st);
    attention_backward(pass->attention, s, d->dwide, d->dnarrow, x->atty, x->att_saved, x->qkv, scratch, st);
    profile_mark(prof, PART_ATTENTION, PHASE_BACKWARD, st);
    if (re_ln) {
        norm_forward(arch, x->ln1, x->ln1_mean, x->ln1_rstd, x->res, w->ln1w, w->ln1b, N, C, st);
        profile_mark(prof, PART_NORM, PHASE_BACKWARD, st);
    }
    qk_norm_rotary(pass, x, d->dwide);   // from the rotated q and k that attention read
    matmul_backward(d->dnarrow, dw->qkvw, dw->qkvb, d->dwide, x->ln1, w->qkvw, NULL, N, C, 3 * C, scratch, mm);
    profile_mark(prof, PART_QKV, PHASE_BACKWARD, st);
    norm_backward(arch, d->dresidual, dw->ln1w, dw->ln1b, d->dnarrow, x->res, w->ln1w, x->ln1_mean, x->ln1_rstd, N, C,
                  scratch, st);
    profile_mark(prof, PART_NORM, PHASE_BACKWARD, st);
}
