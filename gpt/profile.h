// gpt/profile.h: where the time of one training step goes. The model's functions record CUDA
// events on the model's stream between their calls (profile_start, profile_mark); each mark
// closes an interval that belongs to one part (a layer kind, summed over the L layers and the
// micro-steps) in one phase (forward, backward, update). The report sets each part's time
// against its floor: its FLOPs at the dense bf16 rate or its bytes (every input read once,
// every output written once) at the memory bandwidth, whichever takes longer. The parts and their
// work follow the model's architecture and optimizer: LayerNorm or RMSNorm, GELU or ReLU^2,
// biases or none, tied or untied head, attention's windows, the 2026 recipe's parts, AdamW or
// Muon.
// With no Profile (NULL) the model records nothing; events between kernels change no result.
#ifndef FLASHGPT_GPT_PROFILE_H
#define FLASHGPT_GPT_PROFILE_H

#include <stddef.h>
#include <stdio.h>
#include "common/cuda_check.h"
#include "gpt/config.h"
#include "gpt/param_table.h"

// Measured ceilings of one H200 (the device machine's dense bf16 matmul and copy benchmarks);
// the FLOP rate gives way to --peak-tflops.
#define H200_DENSE_BF16_FLOPS 790e12
#define H200_MEMORY_BYTES_PER_S 4.3e12

typedef enum {
    PART_EMBEDDING,       // encoder: token (+ position) embeddings; the smear
    PART_RESIDUAL_LAMBDAS,   // each block's resid_lambda x + x0_lambda x0, where the model has them
    PART_NORM,            // ln1, ln2, lnf: LayerNorm or RMSNorm; the embedding's RMSNorm; the backout
    PART_QKV,             // the qkv matmul
    PART_VALUE_EMBEDDINGS,   // the value embeddings and their gates, where the model has them
    PART_QK_NORM_ROTARY,  // QK-norm and rotary on q and k (layers/rotary.h), where the model has them
    PART_ATTENTION,       // flash, naive or the ring
    PART_ATTPROJ,         // the attention's output projection, with the residual add
    PART_MLP_UP,          // fc with its activation: GELU's epilogue or ReLU^2's pass
    PART_MLP_DOWN,        // fcproj with the residual add; its backward ends with the activation's
                          // (GELU's dinp epilogue or ReLU^2's pass)
    PART_CLASSIFIER,      // logits, softmax + cross-entropy; backward: dlnf and the head's gradient
    PART_UPDATE,          // gradient norm and the optimizer (AdamW, or Muon and Adam)
    NUM_PROFILE_PARTS
} ProfilePart;

typedef enum { PHASE_FORWARD, PHASE_BACKWARD, PHASE_UPDATE, NUM_PROFILE_PHASES } ProfilePhase;

extern const char* const profile_part_names[NUM_PROFILE_PARTS];

// An event and the interval it closes; part -1 opens one without closing any.
typedef struct {
    cudaEvent_t event;
    int part, phase;
} ProfileMark;

typedef struct {
    ProfileMark* marks;   // in stream order
    int count, capacity;  // capacity: events created so far (kept for the next step)
    int pass_end;         // count may not go past it in the pass in progress (profile_start)
} Profile;

void profile_init(Profile* p);
void profile_free(Profile* p);
// Makes events for at least `marks` marks, so that a profiled step creates none on its way.
void profile_reserve(Profile* p, int marks);
// Records an event on stream; part -1 starts an interval, else closes one for (part, phase).
// Called through profile_start and profile_mark.
void profile_record(Profile* p, int part, int phase, cudaStream_t stream);

// A model function calls profile_start before its first call on the stream (so host work and
// waits before it belong to no part), saying how many marks it records at most (this start
// included: the count its reserve is made of), and profile_mark after each part; a mark past
// that count dies, so a miscounted pass cannot outgrow the events reserved for it.
static inline void profile_start(Profile* p, int marks, cudaStream_t stream) {
    if (!p) return;
    p->pass_end = p->count + marks;
    profile_record(p, -1, 0, stream);
}
static inline void profile_mark(Profile* p, ProfilePart part, ProfilePhase phase, cudaStream_t stream) {
    if (p) profile_record(p, part, phase, stream);
}

// Once the stream has finished: milliseconds per part and phase of the marks recorded; then
// forgets them (the events are kept for reuse).
void profile_collect(Profile* p, double ms[NUM_PROFILE_PARTS][NUM_PROFILE_PHASES]);

// The work of a part in a phase: FLOPs on the tensor cores and bytes through memory.
typedef struct {
    double flops, bytes;
} PartWork;

// What one optimizer step of the model processes.
typedef struct {
    int rows, cols;            // the model's batch per micro-step: rows of cols tokens
    int context_parallel;      // ranks sharing each sequence (1: none); rows, cols are local
    int micro_steps;
    int classifier_rows;       // rows of one classifier chunk (each chunk reads the head again)
    size_t params;             // parameters: the gradient norm reads all of their gradients
    size_t updated_params;     // those this rank's optimizer updates (its ZeRO-1 shard, or all)
    int muon_matrices[NUM_PARAM_TENSORS];   // of those, the matrices of each tensor that Muon
                                            // orthogonalises (gpt_muon_matrices); Adam or AdamW
                                            // updates the rest; zeros under AdamW
    int muon_qkv;              // how Muon cuts qkvw (MuonQkv)
    int normuon;               // 1: Muon's updates normalised by NorMuon (a pass more)
} ProfileShape;

// The work of every part and phase of one step of shape s (zeros where a part does nothing).
void profile_work(const GPTConfig* c, const ProfileShape* s, PartWork work[NUM_PROFILE_PARTS][NUM_PROFILE_PHASES]);

// Seconds the work takes at best: the slower of its FLOPs and its bytes.
static inline double work_floor_seconds(PartWork w, double flops_per_s, double bytes_per_s) {
    double compute = w.flops / flops_per_s, memory = w.bytes / bytes_per_s;
    return compute > memory ? compute : memory;
}

typedef struct {
    int step;
    double step_seconds;       // the step's wall time, as the step line reports it
    double mfu;                // the step line's MFU (0: unknown peak)
    double peak_tflops;        // the MFU's peak
    double flops_per_s;        // the floors' rates
    double bytes_per_s;
} ProfileSummary;

// The table: per part forward, backward and total ms, % of the step, floor ms, time / floor
// and what sets the floor (a part without work or time, one the model has not, left out); then
// the parts' sum against the step's time, and the MFU.
void profile_print(FILE* out, const ProfileSummary* s, const double ms[NUM_PROFILE_PARTS][NUM_PROFILE_PHASES],
                   const PartWork work[NUM_PROFILE_PARTS][NUM_PROFILE_PHASES]);

#endif
