// gpt/checkpoint.h: the model checkpoint, and the model's optimizer state as a training state
// file holds it (train/state.h).
//   The model checkpoint: int32 header[256] (ModelFileHeader), then the parameters in
//     checkpoint order (gpt/param_table.h). A GPT-2 is llm.c's file, fp32 (version 3) or bf16
//     (version 5); a model of another architecture (gpt/config.h) is version 6 (fp32) or 7
//     (bf16), its architecture in the header after the shape, its present tensors in the same
//     order. A GPT-2 with documents or windows is such a model too: llm.c's versions have no
//     slot for them. A model with a part of the 2026 recipe is version 8 (fp32) or 9 (bf16),
//     whose header holds the parts' slots too; a model without them stays version 6 or 7, which
//     the readers that know no parts read.
//   The optimizer's state: the fp32 master weights, m and v (num_params each: AdamW's moments;
//     under Muon m is the matrices' momentum and Adam's first moment elsewhere, v Adam's second
//     moment, zero for the matrices), whole whatever the ranks that wrote it: with ZeRO-1 the
//     ranks gather their shards for rank 0, and a run on any number of ranks reads its own shard
//     back.
// Data-parallel ranks all call the writers (the gathers need every rank); only rank 0 writes.
// A model file is written through a temporary sibling and a rename (common/atomic_file.h). Every
// reader checks magic, version, bounds, shape, size and values on the host, so a program can
// refuse a bad file before it takes the GPU, and dies naming the file and what is wrong.
#ifndef FLASHGPT_GPT_CHECKPOINT_H
#define FLASHGPT_GPT_CHECKPOINT_H

#include <stdint.h>
#include <stdio.h>
#include "gpt/gpt.h"

#define MODEL_MAGIC 20240326
#define MODEL_VERSION_FP32 3
#define MODEL_VERSION_BF16 5
#define MODEL_VERSION_ARCH_FP32 6   // a model of any architecture but GPT-2's, without the parts
#define MODEL_VERSION_ARCH_BF16 7
#define MODEL_VERSION_PARTS_FP32 8  // a model with a part of the 2026 recipe
#define MODEL_VERSION_PARTS_BF16 9
#define HEADER_INTS 256   // int32 slots of a checkpoint file's header, the model's and the training state's
// The most bytes a reader or writer of a checkpoint's files holds on the host at once.
#define CHECKPOINT_IO_CHUNK ((size_t)64 << 20)

// The model's shape as both headers store it (llm.c's order).
typedef struct {
    int32_t maxT, V, L, NH, C, Vp;
} ShapeFields;

// Slots 0-7 as llm.c's; versions 6 and 7 hold the architecture in slots 8-83 (Architecture's
// fields in their order: rotary, rotary_base, rms_norm, qk_norm, relu2, bias, untied_head,
// zero_init, softcap in 8-16, the floats by their bits; documents, document_token, window_count
// in 17-19 and the 64 windows in 20-83, zero in the files of models without them), zero in
// versions 3 and 5; versions 8 and 9 also its parts from slot 84 on (embedding_norm, qk_scale,
// residual_lambdas, value_embeddings, smear, backout in 84-89).
// Every later slot is 0.
typedef union {
    struct {
        int32_t magic, version;
        ShapeFields shape;
        Architecture arch;
    } f;
    int32_t ints[HEADER_INTS];
} ModelFileHeader;
#define MODEL_HEADER_PARTS_INT (8 + ARCHITECTURE_PARTS_SLOT)   // the first slot past versions 6 and 7's
#define MODEL_HEADER_USED_INTS (8 + ARCHITECTURE_SLOTS)

// The shape and architecture in a model checkpoint's header (every field checked, the file's
// size too, and that the block computes the architecture at its head size; a field without
// effect dropped, gpt/config.h's gpt_config_drop_without_effect), and its version.
GPTConfig read_model_header(FILE* f, const char* path, int* version);
// The shape and architecture in the model checkpoint at path: 0, or -1 with err when path is
// not a regular file that can be read (a corrupt header ends the program, as read_model_header
// does).
int read_model_shape(const char* path, GPTConfig* shape, char* err);
// The parameters of the checkpoint at path, whose shape and architecture must be config's, on
// the host: count_params(config) fp32 values in checkpoint order (malloc'd), each checked
// finite. gpt_set_params puts them into a model.
float* read_model_values(const char* path, const GPTConfig* config);
// The model as a bf16 checkpoint: version 5 for a GPT-2, 9 for a model with a part of the 2026
// recipe, 7 for any other architecture.
void gpt_save_checkpoint(GPT* g, const char* path);
// values (count_params(c) fp32, checkpoint order, on the host) as an fp32 checkpoint (version 3 for
// a GPT-2, 8 with a part, 6 for any other architecture):
// a model written without a GPU (train_gpt --save-init, its initial one).
void save_model_values(const char* path, const GPTConfig* c, const float* values);

// path for reading, either file of a checkpoint: dies naming it unless it is a regular file (it is
// read at offsets and checked against its size).
FILE* open_checkpoint_file(const char* path);

// The optimizer's state (the master weights, m and v, whole) written to f where it stands, by rank
// 0 (f NULL on the other ranks): with ZeRO-1 each rank's shard is gathered first, so every rank
// calls it. 0, or -1 when a write failed.
int gpt_write_optimizer_state(GPT* g, FILE* f);
// This rank's part of the optimizer's state that f holds from byte at on into the model (whose
// shape, architecture and optimizer must be the writer's), the rest of its optimizer arrays zero.
// 0, or -1 when a read failed.
int gpt_read_optimizer_state(GPT* g, FILE* f, long long at);

// The FP8 layers' scaling state that a training state keeps after the optimizer's arrays: with
// delayed scaling the Fp8Scale (layers/fp8.h) of the input and of the gradient of each FP8 matmul,
// each layer's fc and fcproj in layer order, then the head; the weights' none (current scaling,
// gpt/gpt.h's Fp8Layers). Current scaling keeps no state: nothing. Its bytes for a model of c
// with the FP8 flags fp8 and that scaling.
size_t fp8_state_bytes(const GPTConfig* c, int fp8, Fp8Scaling scaling);
// NULL when s is a state a quantisation leaves (its scales and amaxes finite and >= 0, its amax
// and counter 0 between quantisations), else what is wrong.
const char* fp8_scale_invalid(const Fp8Scale* s);
// The model's FP8 state written to f where it stands by rank 0 (f NULL on the other ranks, which
// write nothing); and read back from byte at on, the histories then taken as delayed scaling's
// (no first current quantisation). 0, or -1 when a write or read failed.
int gpt_write_fp8_state(GPT* g, FILE* f);
int gpt_read_fp8_state(GPT* g, FILE* f, long long at);

#endif
