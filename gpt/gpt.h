// gpt/gpt.h: the GPT model as a library: build it for a batch size, set or load its
// parameters, run the forward, the loss (classifier), the backward and the update (AdamW or
// Muon, gpt/optimizer.h).
// Either architecture of gpt/config.h: GPT-2's (pre-LayerNorm blocks, learned positions, the
// token embedding tied to the output projection, GELU (tanh form)) or the modern one (RMSNorm,
// rotary positions with QK-norm, ReLU^2, no biases, an untied head, soft-capped logits), or any
// mix, with any of the 2026 recipe's parts (the embedding norm, the QK scale, the residual
// lambdas, value embeddings, the smear, the backout); the stem, the blocks and the head each walk
// their list of operations (gpt/model_ops.h). bf16 parameters and activations, fp32 master
// weights and optimizer state.
// The layers live in layers/ and attention/, the transformer block in gpt/block.h; this library
// decides which buffer is which and the order of the calls. The contract (parameter order,
// init, AdamW) is the one the numpy reference in tests/reference/gen_gpt_reference.py follows; Muon's,
// tests/reference/gen_muon_reference.py.
//
//   gpt_forward(g, inputs, B, T)           lnf (B, T, C)
//   gpt_classifier(g, targets, ...)        losses (B, T), their mean added to the loss sum on the
//                                          GPU; with write_dlogits also dlnf, dhead
//   gpt_backward(g, inputs)                grads += d loss / d params
//   gpt_update(g, rates)                   one optimizer step, the gradients clipped
//   gpt_finish_loss(g)                     the mean loss of the batches since the last, on the GPU
//
// None of these waits for the GPU: the loss and the gradient norm stay in device memory
// (g->scalars) until a caller copies them out, and the clip's factor is computed and read there,
// so that the host can queue a whole step (and read the next batch) while the GPU runs the last.
// gpt_mean_loss and gpt_grad_norm are the same values read back at once.
//
// Data parallel (DataParallel, one process per GPU): every rank holds the whole model and runs
// its own batches; on the last micro-step of a step the backward averages each layer's
// gradients over the ranks on a side stream (comm_stream) as soon as the layer is done, while
// the layers below it go on; the update waits for the last of them. With ZeRO-1 each rank keeps
// the fp32 master weights and optimizer state of its shard only (distributed/zero_shard.h:
// AdamW's by flat ranges, Muon's by whole matrices, so that each rank orthogonalises its share
// of them), updates those parameters, and the ranks all-gather the bf16 parameters on the side
// stream; the next forward waits for that on the GPU, not the host. Without ZeRO-1 every rank
// does the whole update. With ZeRO-1 the backward's reduction is a reduce-scatter: each piece of
// finished gradients is reduced to the rank that owns it (distributed/zero_shard.h's
// zero_shard_piece), so each rank receives its share alone and holds averaged gradients only
// there; the gradient norm adds the ranks' squared norms of their shares.
#ifndef FLASHGPT_GPT_H
#define FLASHGPT_GPT_H

#include <stdint.h>
#include "common/cuda_check.h"
#include "distributed/nccl_comm.h"
#include "distributed/zero_shard.h"
#include "gpt/activations.h"
#include "gpt/config.h"
#include "gpt/optimizer.h"
#include "gpt/parameters.h"
#include "gpt/profile.h"
#include "gpt/schedule.h"
#include "layers/matmul.h"

// How the model is spread over data-parallel ranks; comm NULL: one GPU, or with world_size > 1
// and ZeRO-1 one rank's share of the update alone, nothing exchanged (ranks simulated in one
// process).
typedef struct {
    NcclComm* comm;
    int rank, world_size;
    int zero_stage;          // 1: the fp32 master weights and optimizer state sharded over the ranks
} DataParallel;

// A step's values as a report reads them.
typedef struct {
    float loss;                  // the mean loss (gpt_finish_loss), over the ranks with data parallel
    float norm;                  // the gradient norm before clipping (gpt_update)
} StepValues;

// The values of a step that stay on the GPU (device memory, one per model).
typedef struct {
    StepValues values;
    float grad_scale;            // the clip's factor the update reads
    float norm_parts[NUM_PARAM_TENSORS];   // squared norms of the runs of gradients this rank adds
                                           // up (the whole array, or its ZeRO-1 share), zeros past
    double loss_sum;             // the batches' mean losses (each rounded to float) since the last
                                 // gpt_finish_loss
} StepScalars;

// The FP8 matmuls of ModelOptions' fp8, an Fp8Linear each (layers/matmul.h). Their weights are
// quantised at the first forward after the parameters change (an update, gpt_set_params), always
// with current scaling: a function of the weights alone (a pass over them once a step), so that a
// resume quantises them to the same bytes. The inputs' and the gradients' scaling is the option's;
// with delayed scaling their histories are state that the training state keeps
// (gpt_write_fp8_state).
typedef struct {
    Fp8Linear* mlp;       // (L, 2): layer l's fc and fcproj; NULL without FP8_MLP
    Fp8Linear* head;      // NULL without FP8_HEAD
    void* scratch;        // the largest matmul_fp8_scratch_bytes of them
    int weights_at;       // the adam_t whose weights are quantised; -1: none
} Fp8Layers;

typedef struct {
    GPTConfig config;
    int B, T;                    // the largest batch the buffers hold
    int forward_B, forward_T;    // the batch of the last gpt_forward (0: none yet)
    int positions_T;             // the T of the rows' positions on the GPU (rotary; 0: none yet)
    ModelOptions options;
    AttentionPlan attention[ARCHITECTURE_MAX_WINDOWS];   // options' plan with each window of the
                                                         // architecture's pattern (gpt/block.h)
    size_t num_params;
    size_t param_sizes[NUM_PARAM_TENSORS];
    DataParallel dp;             // comm NULL on one GPU
    OptimizerConfig optimizer;   // all zero when built without one
    ZeroTensor zero_tensors[NUM_PARAM_TENSORS];   // the tensors as the shard cuts them
    ZeroShard shard;             // the parameters whose optimizer state this rank keeps: all of
                                 // them but with ZeRO-1 (padded_count >= num_params, zeros past)
    bf16* params_memory;         // (shard.padded_count) one allocation
    bf16* grads_memory;          // (shard.padded_count)
    float* optimizer_memory;     // (3, shard.shard_size): master weights, m, v of the shard; NULL
                                 // without an optimizer. Under Muon m holds the matrices'
                                 // momentum, and v is Adam's (zero for the matrices but with
                                 // NorMuon: a matrix's moments at the start of its place).
    float* master;
    float* m;
    float* v;
    void* optimizer_scratch;     // Muon's Newton-Schulz scratch (plan.optimizer_scratch), or NULL
    ParameterTensors params, grads;
    char* acts_memory;
    Activations acts;
    MemorySizes sizes;
    float* host_losses;          // (B, T) pinned: the last gpt_classifier's losses
    StepScalars* scalars;        // device memory
    int loss_batches;            // gpt_classifier calls since the last gpt_finish_loss
    int adam_t;                  // optimizer steps taken (Adam's bias correction counts them)
    cudaStream_t stream;
    MatmulStream matmul;         // stream, with the cuBLASLt workspace of its matmuls
    cudaStream_t loss_stream;    // the losses' sums, beside the backward
    cudaEvent_t losses_ready;    // the classifier's losses are written (stream -> loss_stream)
    cudaEvent_t losses_summed;   // they are added to the loss sum (loss_stream -> stream)
    cudaStream_t comm_stream;    // data parallel: the collectives
    cudaEvent_t grads_ready;     // a layer's gradients are final (stream -> comm_stream)
    cudaEvent_t grads_reduced;   // every gradient is averaged (comm_stream -> stream)
    cudaEvent_t params_ready;    // the all-gathered parameters (comm_stream -> stream)
    cudaEvent_t scalars_ready;   // the ranks' scalars are reduced (comm_stream -> stream)
    Profile* profile;            // NULL: none; else the forward, classifier, backward and
                                 // update record their parts' events in it (gpt/profile.h)
    Fp8Layers fp8;               // all NULL without FP8
} GPT;

// Bytes that gpt_build would allocate, part by part (dp NULL: one GPU; optimizer NULL: none).
MemorySizes gpt_memory_sizes(const GPTConfig* c, int B, int T, const ModelOptions* opt, const DataParallel* dp,
                             const OptimizerConfig* optimizer);

// NULL when the model can run opt's FP8 matmuls on batches of B x T (every dimension of an FP8
// operand a multiple of 16, cuBLASLt's), else why not, naming the size.
const char* gpt_fp8_unfit(const GPTConfig* c, int B, int T, const ModelOptions* opt);

// Allocates everything for batches up to (B, T), which must fit (gpu_memory_unfit). dp NULL:
// one GPU. optimizer NULL: a model that is not trained (no optimizer state, no gpt_update).
void gpt_build(GPT* g, GPTConfig c, int B, int T, const ModelOptions* opt, const DataParallel* dp,
               const OptimizerConfig* optimizer);
void gpt_free(GPT* g);

// Sets the model from fp32 values (num_params, checkpoint order): master = values,
// params = values rounded to bf16. The optimizer starts over.
void gpt_set_params(GPT* g, const float* values);
// The contract's random init (init_param_values) from seed, by the scheme (InitScheme).
void gpt_init_random(GPT* g, uint64_t seed, int scheme);

// The final norm's output lnf (B, T, C) of host_inputs (B, T), B and T within what the model
// was built for; the logits come from gpt_logits or gpt_classifier, a chunk at a time. The
// classifier and the backward that follow run on this batch. With rotary, each row of the batch
// takes its positions: t, or under context parallelism its zigzag chunks' (set once per T). With
// documents, their bounds are found on the GPU from the batch's tokens, once per forward (under
// context parallelism those of each row's whole sequence, whose chunks travel the ring).
void gpt_forward(GPT* g, const int* host_inputs, int B, int T);

// The logits (rows, Vp) = lnf @ head^T (head: wte or lm_head), before any soft cap, of the rows
// [row, row + rows) of the last gpt_forward, rows at most g->sizes.logits_rows; returns them
// (device memory, valid until the next call).
bf16* gpt_logits(GPT* g, int row, int rows);

// Cross-entropy per position of the last gpt_forward (B, T: its batch) against host_targets,
// of the logits soft-capped when the architecture caps them, into the losses, copied to
// host_losses; their mean, summed in double one after another as a host loop would, is added
// to the loss sum on a side stream. The logits exist a chunk of rows at a time. write_dlogits:
// also the classifier's backward, chunk by chunk: dlnf (B, T, C) into dnarrow for gpt_backward and dhead += dlogits^T
// lnf, with dlogits = dloss/dlogits * dloss_scale. Nothing waits for the GPU here.
void gpt_classifier(GPT* g, const int* host_targets, int B, int T, float dloss_scale, int write_dlogits);

// The mean of the batches' mean losses since the last call (at least one gpt_classifier), in
// double then rounded to float, into g->scalars->values.loss; data parallel, then averaged over
// the ranks. The sum starts over. Nothing waits for the GPU.
void gpt_finish_loss(GPT* g);
// gpt_finish_loss's value, once the GPU is done.
float gpt_mean_loss(GPT* g);

// Adds the gradients of the batch of the last gpt_forward to the grads; gpt_classifier with
// write_dlogits must have run (dlnf in dnarrow, dhead started) and host_inputs must be that
// batch. last_micro_step: the gradients are then final, and data-parallel ranks average
// them over the ranks, layer by layer, while the backward goes on.
void gpt_backward(GPT* g, const int* host_inputs, int last_micro_step);

// The matrices of tensor i that this rank's update orthogonalises by Muon (its ZeRO-1 share, or
// all L); 0 under AdamW, without an optimizer and for the tensors Adam updates.
int gpt_muon_matrices(const GPT* g, int i);
// The most marks a step of micro_steps micro-steps records in g->profile (profile_reserve).
int gpt_profile_marks(const GPT* g, int micro_steps);

void gpt_zero_grads(GPT* g);
// The global gradient norm (before clipping), in fp32 on the GPU, once the GPU is done.
float gpt_grad_norm(GPT* g);
// One step of the model's optimizer on every tensor (with ZeRO-1: on this rank's shard, then
// the parameters are all-gathered), the gradients clipped to grad_clip on the GPU; the norm
// before clipping goes to g->scalars->values.norm. rates: the step's (gpt/schedule.h): each
// group's learning rate, Muon's momentum and the weight decay.
void gpt_update(GPT* g, const StepRates* rates);

#endif
