// gpt/checkpoint.h: the two files of a checkpoint, and where they go.
//   model_%08d.bin: the model: int32 header[256] (ModelFileHeader), then the parameters in
//     checkpoint order (gpt/param_table.h). A GPT-2 is llm.c's file, fp32 (version 3) or bf16
//     (version 5); a model of another architecture (gpt/config.h) is version 6 (fp32) or 7
//     (bf16), its architecture in the header after the shape, its present tensors in the same
//     order. A GPT-2 with documents or windows is such a model too: llm.c's versions have no
//     slot for them.
//   state_%08d.bin: what an exact resume needs besides the model: int32 header[256]
//     (StateFileHeader), then the fp32 master weights, m and v (num_params each: AdamW's
//     moments; under Muon m is the matrices' momentum and Adam's first moment elsewhere, v
//     Adam's second moment, zero for the matrices), whole whatever the ranks that wrote it:
//     with ZeRO-1 the ranks gather their shards for rank 0, and a run on any number of ranks
//     reads its own shard back. The model's architecture is the model file's alone: a resume
//     reads it there.
// Data-parallel ranks all call the writers (the gathers need every rank); only rank 0 writes.
// Both are written through a temporary sibling and a rename (common/atomic_file.h). Every
// reader checks magic, version, bounds, shape, size and values on the host, so a program can
// refuse a bad file before it takes the GPU, and dies naming the file and what is wrong.
#ifndef FLASHGPT_GPT_CHECKPOINT_H
#define FLASHGPT_GPT_CHECKPOINT_H

#include <stdint.h>
#include <stdio.h>
#include "data/dataloader.h"
#include "gpt/gpt.h"

#define MODEL_MAGIC 20240326
#define MODEL_VERSION_FP32 3
#define MODEL_VERSION_BF16 5
#define MODEL_VERSION_ARCH_FP32 6   // a model of any architecture but GPT-2's
#define MODEL_VERSION_ARCH_BF16 7
#define STATE_MAGIC 20241130
#define STATE_VERSION_ADAMW 1    // the files of AdamW runs, as every earlier version wrote them
#define STATE_VERSION_MUON 2     // Muon runs: their settings in slots 32-38 (an untied head's
                                 // learning rate in 38, 0 in the files of a tied head), which an older
                                 // reader would not see, so it refuses the version
#define HEADER_INTS 256

// The model's shape as both headers store it (llm.c's order).
typedef struct {
    int32_t maxT, V, L, NH, C, Vp;
} ShapeFields;

// Slots 0-7 as llm.c's; versions 6 and 7 hold the architecture in slots 8-83 (Architecture's
// fields in their order: rotary, rotary_base, rms_norm, qk_norm, relu2, bias, untied_head,
// zero_init, softcap in 8-16, the floats by their bits; documents, document_token, window_count
// in 17-19 and the 64 windows in 20-83, zero in the files of models without them), zero in
// versions 3 and 5. Every later slot is 0.
typedef union {
    struct {
        int32_t magic, version;
        ShapeFields shape;
        Architecture arch;
    } f;
    int32_t ints[HEADER_INTS];
} ModelFileHeader;
#define MODEL_HEADER_USED_INTS (8 + ARCHITECTURE_SLOTS)

// The training state's header: magic, version, then the fields of a TrainingState (the table
// state_fields of gpt/checkpoint.cu pairs each with its member here), each in the int32 slots of
// its member: an int or a float (by its bits) in one, a 64-bit value in two, low half first. A
// field's slots follow from this layout, so none overlaps another or passes the end; the slots
// after the last are zero. Slots 0-31 are those of every earlier version; an AdamW run's file has
// zeros from slot 32 on.
typedef struct {
    int32_t magic, version;
    int32_t step;
    ShapeFields shape;
    int32_t B, T, grad_accum, warmup_steps, steps, adam_t;
    float lr, min_lr_frac, weight_decay, grad_clip;
    int32_t seed[2], data_epoch[2], data_step[2], sample_rng[2];
    int32_t attention, deterministic, recompute, classifier_rows, world_size;
    int32_t optimizer;
    float muon_momentum, embedding_lr, vector_lr, adam_b1, adam_b2;
    float head_lr;   // Muon with an untied head; 0 otherwise, as in the files of earlier versions
} StateSlots;

typedef union {
    StateSlots f;
    int32_t ints[HEADER_INTS];
} StateFileHeader;

// What a resumed run must agree on, and where the interrupted one stood.
typedef struct {
    int step;                    // steps done
    int world_size;              // data-parallel ranks: train_loader counts this rank's batches
    GPTConfig config;            // the shape from the header, the architecture from the model file
                                 // (read_training_state)
    int B, T, grad_accum, warmup_steps, steps;
    float lr, min_lr_frac, weight_decay, grad_clip;
    uint64_t seed;
    DataLoaderState train_loader;
    uint64_t sample_rng;
    int adam_t;
    // What changes the rounding, so an exact resume needs the same: attention kind, its
    // deterministic flag, RECOMPUTE_* flags, rows per classifier chunk.
    int attention, deterministic, recompute, classifier_rows;
    // The optimizer (OptimizerKind; lr is its peak, gpt/optimizer.h) and Muon's own settings,
    // all zero in an AdamW run (whose betas are fixed); head_lr zero without an untied head.
    int optimizer;
    float muon_momentum, embedding_lr, vector_lr, adam_b1, adam_b2;
    float head_lr;
} TrainingState;

// The optimizer settings s records (its kind's; an untied head's rate 0 without one, and eps,
// which no run sets, the kind's default), and s's record of o.
OptimizerConfig training_state_optimizer(const TrainingState* s);
void training_state_set_optimizer(TrainingState* s, const OptimizerConfig* o);

// The header of s (every slot past its fields zero), and back: 0, or -1 with err saying which
// field is out of range, which slot past the fields is not zero, or what is wrong across fields
// (for read_training_state to name the file).
void state_header_pack(const TrainingState* s, StateFileHeader* h);
int state_header_unpack(const StateFileHeader* h, TrainingState* s, char* err);

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
// The model as a bf16 checkpoint: version 5 for a GPT-2, 7 for any other architecture.
void gpt_save_checkpoint(GPT* g, const char* path);
// values (count_params(c) fp32, checkpoint order, on the host) as an fp32 checkpoint (version 3 for
// a GPT-2, 6 for any other architecture):
// a model written without a GPU (train_gpt --save-init, its initial one).
void save_model_values(const char* path, const GPTConfig* c, const float* values);

void save_training_state(GPT* g, const TrainingState* s, const char* path);
// The state in path, from its header, which is checked (bounds, and the file's size, that of a
// model of architecture arch: the model file's).
TrainingState read_training_state(const char* path, const Architecture* arch);
// 1, with one line naming the flag in err, unless the resuming run (now, as its state file would
// say it) has the tokens per step of the interrupted one (was) and every setting an exact resume
// needs; 0 otherwise. note: a line when the learning-rate schedule changes (--steps), else "".
int resume_settings_differ(const TrainingState* was, const TrainingState* now, char* err, char* note);
// Dies naming path unless every optimizer value in it is finite and every second moment >= 0:
// a read of the whole file on the host, so that a corrupt state stops before the GPU.
void check_training_state_values(const char* path, const TrainingState* s);
// This rank's part of the optimizer arrays in path (s its read_training_state) into the model,
// whose shape, architecture and optimizer must be the state's, and the optimizer's step count.
void load_optimizer_state(GPT* g, const TrainingState* s, const char* path);

// dir/model_%08d.bin and dir/state_%08d.bin of a step.
void checkpoint_paths(const char* dir, int step, char* model, char* state, size_t len);
// The step of a checkpoint file's name (model_%08d.bin or state_%08d.bin, no folder), or -1 for
// any other name.
int checkpoint_file_step(const char* name);
// The latest step in dir with both files; -1 if none, -2 with err when dir cannot be read.
int latest_checkpoint_step(const char* dir, char* err);
// How many checkpoint files (model_*.bin and state_*.bin of a step) dir holds, the latest step
// among them in *latest; 0 when dir does not exist, -1 with err when it cannot be read.
int count_checkpoint_files(const char* dir, int* latest, char* err);

// The checkpoint a run resumed from dir continues: the latest step with both files (their paths
// into model and state, len bytes each) and its training state (read_training_state), whose
// shape the model file's header must have, with the model file's architecture. 0, or -1 with err
// naming dir or the file.
int find_resume_checkpoint(const char* dir, char* model, char* state, size_t len, TrainingState* s, char* err);
// Whether a run may write its checkpoints into dir: 0 when it holds none of another run (whose
// steps this run would write over, and whose --resume would take whichever run got further) or is
// resumed_dir (NULL: none), the folder of the run resumed, however spelled; else the number of
// checkpoint files it holds with err saying so, or -1 with err when it cannot be read.
int check_checkpoint_folder(const char* dir, const char* resumed_dir, char* err);

#endif
