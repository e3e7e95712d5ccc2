// train/report.h: what a run says as it goes, on rank 0 (train/plan.h silences the others'
// stdout): its description once the GPU is taken (device, model, batch, ranks, attention, memory,
// the MFU basis; the data and the optimizer are said before, by the plan), each step's line on
// stdout and row in the CSV log (--log: step, loss, val_loss, lr, grad_norm, ms, tokens_per_s,
// mfu, mem_gib), and --profile's table of one step's parts against their floors.
#ifndef FLASHGPT_TRAIN_REPORT_H
#define FLASHGPT_TRAIN_REPORT_H

#include <stdio.h>
#include "gpt/gpt.h"
#include "gpt/profile.h"
#include "train/plan.h"

// What one step did, for the report.
typedef struct {
    int step;
    float loss, val_loss, lr, norm;   // val_loss NAN when not measured; lr that of the optimizer's
                                      // own group (AdamW's, Muon's matrices')
    double seconds, tokens_per_s, mfu;
    size_t peak_mem;
} StepReport;

// The run of p on model, on the GPU device_name: its MFU basis flops_per_token at peak_tflops (0:
// unknown).
void print_run(const RunPlan* p, const GPT* model, const char* device_name, double flops_per_token,
               float peak_tflops);
// The log of p (--log), its folder made if missing: appended to when a resumed run finds one,
// else new, with its header line.
FILE* open_log(const RunPlan* p);
// The step's line on stdout (of a run of steps) and its row in log (NULL: none).
void report_step(const StepReport* s, int steps, FILE* log);
// The profile of step s just done (--profile), its parts' times in profile against their floors
// (at --peak-tflops, else an H200's rates), its MFU of peak_tflops.
void print_profile(const RunPlan* p, const GPT* g, Profile* profile, const StepReport* s, float peak_tflops);

#endif
