// train/report.cu: a run's description, its step lines and log, the profile of a step
// (train/report.h).
#include "train/report.h"

#include <math.h>
#include "common/bytes.h"
#include "common/error.h"
#include "common/output_path.h"

void print_run(const RunPlan* p, const GPT* model, const char* device_name, double flops_per_token,
               float peak_tflops) {
    const TrainOptions* o = &p->o;
    const GPTConfig* c = &p->config;
    const ModelOptions* mo = &o->model_options;
    const MemorySizes* m = &model->sizes;
    char recompute[64];
    recompute_name(mo->recompute, recompute, sizeof(recompute));
    printf("device: %s\n", device_name);
    char arch[ARCHITECTURE_TEXT];
    architecture_describe(&c->arch, c->maxT, c->L, arch, sizeof(arch));
    printf("model: L %d, C %d, NH %d, HS %d, vocab %d (padded %d), context %d, %zu parameters; architecture %s\n",
           c->L, c->C, c->NH, c->C / c->NH, c->V, c->Vp, c->maxT, model->num_params, arch);
    printf("batch: B %d x T %d x %d micro-steps x %d data-parallel rank%s = %lld tokens per step, %d steps "
           "(from step %d)\n", o->B, o->T, p->grad_accum, p->ranks.data_ranks, p->ranks.data_ranks > 1 ? "s" : "", o->total_batch,
           o->steps, p->start_step + 1);
    if (o->context_parallel > 1)
        printf("context parallel: %d ranks share each sequence (%s), each %d tokens of it in two chunks of %d\n",
               o->context_parallel, p->ranks.ring.comm ? "an NCCL ring" : "simulated on this GPU", p->batch.cols,
               p->batch.cols / 2);
    if (p->dp.comm) {
        const ZeroShard* z = &model->shard;
        printf("ranks: %d (%s), each with the whole model, its gradients averaged by NCCL; ", p->ranks.launch.world_size,
               p->ranks.launch.launcher);
        if (o->zero_stage) printf("ZeRO-1: rank 0 keeps the optimizer state of %zu of %zu parameters\n",
                                  z->owned, model->num_params);
        else printf("every rank keeps the whole optimizer state\n");
    }
    printf("attention: %s%s; recompute in the backward: %s; classifier: %d chunk%s of %d rows\n",
           attention_kind_name(mo->attention.kind),
           mo->attention.kind == ATTENTION_FLASH && !mo->attention.deterministic ? "" : " (deterministic)", recompute,
           (int)ceil_div(m->rows, m->logits_rows), m->logits_rows < m->rows ? "s" : "", m->logits_rows);
    if (mo->fp8) {
        char fp8[16];
        fp8_name(mo->fp8, fp8, sizeof(fp8));
        printf("FP8: %s matmuls, E4M3 forward (the weights with current scaling, the inputs with %s), gradients %s\n",
               fp8, mo->fp8_scaling == FP8_SCALING_DELAYED ? "delayed" : "current",
               mo->fp8_grad_bf16 ? "in bf16" : "E5M2");
    }
    memory_sizes_print(m, mo->attention.kind);
    if (peak_tflops > 0.0f)
        printf("MFU: %.3g GFLOP per token%s, peak %.0f TFLOP/s\n", flops_per_token * 1e-9,
               mo->fp8 ? " (those in FP8 counted at half: at twice the peak)" : "", peak_tflops);
    else printf("MFU: unknown peak for this device (give --peak-tflops), shown as 0\n");
    if (o->sample_every > 0 && !p->tok) printf("note: no --tokenizer, so no samples\n");
}

FILE* open_log(const RunPlan* p) {
    char err[ERR_LEN];
    int appended;
    FILE* log = open_output_file(p->o.log_path, p->resuming, &appended, err);
    if (!log) die("--log %s", err);
    if (!appended) fprintf(log, "step,loss,val_loss,lr,grad_norm,ms,tokens_per_s,mfu,mem_gib\n");
    return log;
}

void report_step(const StepReport* s, int steps, FILE* log) {
    printf("step %5d/%d | loss %.6f | lr %.3e | norm %.4f | %7.1f ms | %7.1fK tok/s | MFU %5.1f%% | mem %.2f GiB",
           s->step, steps, s->loss, s->lr, s->norm, s->seconds * 1e3, s->tokens_per_s * 1e-3, s->mfu * 100.0,
           GIB(s->peak_mem));
    if (!isnan(s->val_loss)) printf(" | val loss %.6f", s->val_loss);
    printf("\n");
    fflush(stdout);
    if (log) {
        fprintf(log, "%d,%.9g,", s->step, s->loss);
        if (!isnan(s->val_loss)) fprintf(log, "%.9g", s->val_loss);
        fprintf(log, ",%.9g,%.9g,%.3f,%.1f,%.4f,%.3f\n", s->lr, s->norm, s->seconds * 1e3, s->tokens_per_s,
                s->mfu, GIB(s->peak_mem));
        fflush(log);
    }
}

void print_profile(const RunPlan* p, const GPT* g, Profile* profile, const StepReport* s, float peak_tflops) {
    double ms[NUM_PROFILE_PARTS][NUM_PROFILE_PHASES];
    PartWork work[NUM_PROFILE_PARTS][NUM_PROFILE_PHASES];
    profile_collect(profile, ms);
    ProfileShape shape = {.rows = p->batch.rows, .cols = p->batch.cols, .context_parallel = p->o.context_parallel,
                          .micro_steps = p->grad_accum, .classifier_rows = g->sizes.logits_rows,
                          .params = g->num_params, .updated_params = g->shard.owned,
                          .muon_qkv = g->optimizer.muon_qkv, .normuon = g->optimizer.normuon};
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) shape.muon_matrices[i] = gpt_muon_matrices(g, i);
    profile_work(&g->config, &shape, work);
    ProfileSummary summary = {.step = s->step, .step_seconds = s->seconds, .mfu = s->mfu,
                              .peak_tflops = peak_tflops,
                              .flops_per_s = p->o.peak_tflops > 0.0f ? p->o.peak_tflops * 1e12 : H200_DENSE_BF16_FLOPS,
                              .bytes_per_s = H200_MEMORY_BYTES_PER_S};
    profile_print(stdout, &summary, ms, work);
}
