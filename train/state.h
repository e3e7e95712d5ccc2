// train/state.h: the training state, the file of a checkpoint that an exact resume needs beside
// the model (gpt/checkpoint.h):
//   state_%08d.bin: int32 header[256] (StateFileHeader), then the optimizer's arrays as the model
//     writes them (gpt_write_optimizer_state: the fp32 master weights, m and v, num_params each,
//     whole whatever the ranks that wrote it; a run on any number of ranks reads its own shard
//     back; with NorMuon, v holds each Muon matrix's moments at the start of its place), then with
//     --fp8-scaling delayed the FP8 layers' amax histories (gpt_write_fp8_state). The model's
//     architecture is the model file's alone: a resume reads it there.
// What the header holds (TrainingState): the run's settings that an exact resume must repeat
// (batch, schedule, optimizer, seed, the rows' alignment, what changes the rounding) and where the
// run stood (step, data position, sampler, the optimizer's step count). Data-parallel ranks all
// call the writer (the optimizer's gathers need every rank); only rank 0 writes, through a
// temporary sibling and a rename (common/atomic_file.h). Every reader checks magic, version,
// bounds, shape, size and values on the host, so train_gpt refuses a bad file before it takes the
// GPU, and dies naming the file and what is wrong.
#ifndef FLASHGPT_TRAIN_STATE_H
#define FLASHGPT_TRAIN_STATE_H

#include <stdint.h>
#include "data/dataloader.h"
#include "gpt/checkpoint.h"
#include "gpt/schedule.h"

#define STATE_MAGIC 20241130
#define STATE_VERSION_ADAMW 1    // AdamW runs of the default schedule, as every earlier version wrote them
#define STATE_VERSION_MUON 2     // Muon runs of the default schedule: their settings in slots 32-38
                                 // (an untied head's learning rate in 38, 0 in the files of a tied
                                 // head), which an older reader would not see, so it refuses the version
#define STATE_VERSION_SCHEDULE 3 // runs of either optimizer whose step schedule is not the default
                                 // (cosine, no momentum warm-up or cool-down, a constant decay): the
                                 // rest of it in slots 39-45, which an older reader would not see. A
                                 // run of the default schedule keeps version 1 or 2, which every
                                 // reader takes
#define STATE_VERSION_DOCUMENTS 4 // runs whose training rows are aligned to documents (--align-documents), of
                                  // either optimizer and any schedule: the switch and the document token in
                                  // slots 46-47, which an older reader would not see (its batches would be
                                  // other ones). A run without keeps version 1, 2 or 3
#define STATE_VERSION_MUON_VARIANTS 5 // Muon runs with any of Muon's variants (--muon-qkv, --muon-ns,
                                      // --cautious-weight-decay, --normuon): them in slots 48-52, which
                                      // an older reader would not see (it would update the matrices
                                      // otherwise, and read NorMuon's moments in v as nothing). A run
                                      // without keeps version 1 to 4
#define STATE_VERSION_FP8 6      // runs with FP8 matmuls (--fp8), any optimizer and schedule: the
                                 // settings in slots 53-55, and with delayed scaling the FP8 layers'
                                 // state after the optimizer's arrays (gpt/checkpoint.h's
                                 // fp8_state_bytes), which an older reader would not see (it would
                                 // resume in bf16). A run without keeps version 1 to 5
#define STATE_VERSION_INIT_BETAS 7 // runs drawn with nanochat's init (--init nanochat), or Muon runs whose
                                   // embeddings or head take Adam betas of their own (--embedding-beta1 and
                                   // the others): the init in slot 56, the betas in slots 57-61, which an
                                   // older reader would not see (it would resume with other betas, and
                                   // record the run as drawn by the default init). A run without keeps
                                   // an earlier version

// The training state's header: magic, version, then the fields of a TrainingState (the table
// state_fields of train/state.cu pairs each with its member here), each in the int32 slots of its
// member: an int or a float (by its bits) in one, a 64-bit value in two, low half first. A
// field's slots follow from this layout, so none overlaps another or passes the end; the slots
// after the last are zero. Slots 0-31 are those of every earlier version; an AdamW run's file has
// zeros in slots 32-38, a file of the default schedule in slots 39-45, and one of rows not aligned
// to documents in slots 46-47, one without Muon's variants in slots 48-52, one without FP8 in
// slots 53-55, and one of the default init and the groups' betas equal to the vectors' in slots 56-61.
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
    // The step schedule past its warmup and end (gpt/schedule.h's StepSchedule; version 3)
    int32_t lr_schedule;
    float warmdown_frac;
    int32_t momentum_warmup_steps;
    float momentum_start;
    int32_t momentum_cooldown_steps;
    float momentum_end;
    int32_t weight_decay_schedule;
    // The training rows' alignment (version 4)
    int32_t align_documents;
    int32_t document_token;
    // Muon's variants (version 5)
    int32_t muon_qkv, muon_ns, cautious_weight_decay, normuon;
    float normuon_beta2;
    // The FP8 matmuls (version 6)
    int32_t fp8, fp8_scaling, fp8_grad;
    // The init and the Adam groups' betas (version 7)
    int32_t init_scheme;
    int32_t group_betas;
    float embedding_b1, embedding_b2, head_b1, head_b2;
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
    int B, T, grad_accum, steps;
    StepSchedule schedule;       // all of it in version 3; the default's zeros past the warmup and
                                 // the end in versions 1 and 2
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
    float lr, weight_decay, grad_clip;
    float muon_momentum, embedding_lr, vector_lr, adam_b1, adam_b2;
    float head_lr;
    // --align-documents, and the token its rows start at (the tokenizer's <|endoftext|>; 0 without)
    int align_documents, document_token;
    // Muon's variants (gpt/optimizer.h), all zero without them and under AdamW
    int muon_qkv, muon_ns, cautious_weight_decay, normuon;
    float normuon_beta2;
    // The FP8 matmuls: FP8_* flags (gpt/activations.h), their Fp8Scaling and whether their
    // gradients run in bf16; all zero without FP8
    int fp8, fp8_scaling, fp8_grad_bf16;
    // How the initial model was drawn (InitScheme): the run's start, which a resume keeps
    int init_scheme;
    // Muon's Adam betas of the embeddings and an untied head, where either group's differ from
    // --adam-beta1/2 (group_betas 1; the head's 0 without an untied head); all zero otherwise
    int group_betas;
    float embedding_b1, embedding_b2, head_b1, head_b2;
} TrainingState;

// The optimizer settings s records (its kind's, Muon's variants among them; an untied head's rate
// 0 without one, and eps, which no run sets, the kind's default), and s's record of o.
OptimizerConfig training_state_optimizer(const TrainingState* s);
void training_state_set_optimizer(TrainingState* s, const OptimizerConfig* o);

// The header of s (every slot past its fields zero), and back: 0, or -1 with err saying which
// field is out of range, which slot past the fields is not zero, or what is wrong across fields
// (for read_training_state to name the file).
void state_header_pack(const TrainingState* s, StateFileHeader* h);
int state_header_unpack(const StateFileHeader* h, TrainingState* s, char* err);

// s and the model's optimizer state as the file path (every rank calls it; rank 0 writes).
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

// The checkpoint a run resumed from dir continues: the latest step with both files
// (train/checkpoint_folder.h; their paths into model and state, len bytes each) and its training
// state (read_training_state), whose shape the model file's header must have, with the model
// file's architecture. 0, or -1 with err naming dir or the file.
int find_resume_checkpoint(const char* dir, char* model, char* state, size_t len, TrainingState* s, char* err);

#endif
