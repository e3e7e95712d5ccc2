// gpt/param_table.h: the parameter table: one row per kind of parameter tensor, in the order of the
// checkpoint file (llm.c's for GPT-2), saying everything the program needs to know about it:
//   its shape as a function of the model's sizes (rows and cols, each a multiple of 1, C, HS, Vp,
//     maxT or NH); whether it is one tensor of the model or a slice per layer, and on which layers;
//   whether the architecture has it (a tensor it lacks has size 0, so GPT-2's layout is llm.c's
//     and any other model's flat array is its present tensors in the same order);
//   how it starts (zero, ones, or normal with a standard deviation, divided by sqrt(2L) for a
//     projection into the residual stream; zero with the architecture's zero_init where the row
//     says so; a vocabulary table's rows past V always zero);
//   the optimizer group that updates it (gpt/optimizer.h: Muon's matrices, or Adam's embeddings,
//     head and vectors) and its multiples of the group's learning rate and of the weight decay;
//   how Muon cuts a slice into matrices: blocks of muon_rows rows, each orthogonalised on its own;
//     for qkvw, blocks of its own under each of train_gpt's --muon-qkv (MuonQkv).
// Computed from it (here and in gpt/parameters.h): the sizes and offsets in the one flat array,
// each layer's slices, the initial values, Muon's matrices and ZeRO-1's units; gpt/gpt.cu takes
// each tensor's group and multipliers from it, the checkpoint writes the tensors in its order and
// train_gpt --help lists it. scripts/gpt_parameters.py mirrors the table for the Python scripts;
// tests/mirrors/test_param_table.py holds the two together.
//
// A new kind of tensor is a line of PARAM_TENSORS below (its enum name, and its field in
// ParameterTensors, or LayerParameters for a per-layer kind) and its row in param_table
// (gpt/param_table.c); then the kernels that use it. Plain C, so CPU programs can read it.
#ifndef FLASHGPT_GPT_PARAM_TABLE_H
#define FLASHGPT_GPT_PARAM_TABLE_H

#include <stddef.h>
#include <stdint.h>
#include "common/rng.h"
#include "gpt/config.h"

#ifdef __cplusplus
extern "C" {
#endif

// The kinds in checkpoint order: ONCE(NAME, field) is a tensor of the model, LAYER(NAME, field) a
// slice per layer. Shapes as stored, (out, in) for a weight; L: over the layers that hold it.
#define PARAM_TENSORS(ONCE, LAYER)                                   \
    ONCE(WTE, wte)             /* (Vp, C) token embedding */          \
    ONCE(WPE, wpe)             /* (maxT, C) position embedding */     \
    LAYER(LN1W, ln1w)          /* (L, C) */                           \
    LAYER(LN1B, ln1b)          /* (L, C) */                           \
    LAYER(QKVW, qkvw)          /* (L, 3C, C) */                       \
    LAYER(QKVB, qkvb)          /* (L, 3C) */                          \
    LAYER(ATTPROJW, attprojw)  /* (L, C, C) */                        \
    LAYER(ATTPROJB, attprojb)  /* (L, C) */                           \
    LAYER(LN2W, ln2w)          /* (L, C) */                           \
    LAYER(LN2B, ln2b)          /* (L, C) */                           \
    LAYER(FCW, fcw)            /* (L, 4C, C) */                       \
    LAYER(FCB, fcb)            /* (L, 4C) */                          \
    LAYER(FCPROJW, fcprojw)    /* (L, C, 4C) */                       \
    LAYER(FCPROJB, fcprojb)    /* (L, C) */                           \
    ONCE(LNFW, lnfw)           /* (C) */                              \
    ONCE(LNFB, lnfb)           /* (C) */                              \
    ONCE(LM_HEAD, lm_head)     /* (Vp, C) an untied output head */    \
    LAYER(RESID_LAMBDA, resid_lambda)   /* (L, 1) residual lambdas */ \
    LAYER(X0_LAMBDA, x0_lambda)         /* (L, 1) x0 lambdas */       \
    LAYER(VALUE_EMBEDDING, value_embedding)   /* (L', Vp, C) */       \
    LAYER(VALUE_GATE, value_gate)   /* (L', NH, 12) value embeddings' gates */ \
    ONCE(SMEAR_GATE, smear_gate)   /* (1, 24) the smear's gate */            \
    ONCE(SMEAR_LAMBDA, smear_lambda)   /* (1) the smear's scale */          \
    ONCE(BACKOUT_LAMBDA, backout_lambda)   /* (1) the backout's share */

// What PARAM_TENSORS generates with: an item per kind, or nothing.
#define PARAM_ENUM_ITEM(NAME, field) PARAM_##NAME,
#define PARAM_LAYER_ITEM(NAME, field) LAYER_PARAM_##NAME,
#define PARAM_NO_ITEM(NAME, field)

typedef enum { PARAM_TENSORS(PARAM_ENUM_ITEM, PARAM_ENUM_ITEM) NUM_PARAM_TENSORS } ParamTensor;
// The per-layer kinds among them, in the same order: LayerParameters' index.
enum { PARAM_TENSORS(PARAM_NO_ITEM, PARAM_LAYER_ITEM) NUM_LAYER_PARAMS };

// By ParamTensor: the field's name ("wte").
extern const char* const param_names[NUM_PARAM_TENSORS];
// By LayerParameters' index: the kind.
extern const ParamTensor layer_param_tensors[NUM_LAYER_PARAMS];

// A size in the model's terms: times * of, e.g. {3, DIM_C} is 3C, {2, DIM_HS} two heads, {1, DIM_NH}
// one per head.
typedef enum { DIM_ONE, DIM_C, DIM_HS, DIM_VP, DIM_MAXT, DIM_NH } DimOf;
typedef struct {
    int times;
    DimOf of;
} Dim;

typedef enum { INIT_ZERO, INIT_ONES, INIT_NORMAL } ParamInit;

// How a run draws its initial model (train_gpt --init): each row's own init (default), or
// nanochat's, which differs from it in these tensors alone: wte N(0, 0.8) and an untied head
// N(0, 0.001); qkvw uniform with the standard deviation 1/sqrt(C) and fcw 0.4/sqrt(C) (uniform, so
// no draw is an outlier); attprojw and fcprojw zero; the residual lambdas from 1.15 at the first
// layer down to 1.05 at the last, the x0 lambdas from 0.2 down to 0.05. A choice of the start
// alone: the model file holds the values, and the training state the choice.
typedef enum { INIT_SCHEME_DEFAULT, INIT_SCHEME_NANOCHAT, NUM_INIT_SCHEMES } InitScheme;

// What updates a tensor under Muon: Muon itself (the matrices) or Adam at the group's own rate.
// AdamW updates every group alike.
typedef enum { GROUP_MATRIX, GROUP_EMBEDDING, GROUP_HEAD, GROUP_VECTOR } ParamGroup;

// The slice of a per-layer kind that layer l of L holds, or -1 for none: the layers that hold one
// take the slices 0, 1, ... in layer order, packed one after another in the tensor.
typedef int (*LayerSlice)(int l, int L);

typedef struct {
    Dim rows, cols;              // one slice (the tensor of a model kind): a vector has cols {1, DIM_ONE}
    LayerSlice layers;           // which layers hold a slice (a LAYER of PARAM_TENSORS); NULL: a
                                 // tensor of the model (a ONCE)
    int (*present)(const Architecture* a);   // whether the architecture has it; NULL: every one
    ParamInit init;
    double std;                  // INIT_NORMAL: the standard deviation
    int residual;                // INIT_NORMAL: std / sqrt(2L) (a projection into the residual stream)
    int zero_init;               // starts at zero when the architecture's zero_init is on
    ParamGroup group;
    float lr_scale;              // times the group's learning rate
    float decay_scale;           // times the weight decay
    Dim muon_rows;               // GROUP_MATRIX: Muon orthogonalises each block of muon_rows rows
                                 // (a divisor of rows) of a slice on its own
    Dim muon_rows_by_qkv[NUM_MUON_QKV];   // the blocks under a --muon-qkv where they are not
                                          // muon_rows (qkvw's); times 0: muon_rows
} ParamKind;

// By ParamTensor.
extern const ParamKind param_table[NUM_PARAM_TENSORS];

// d in elements for the model c.
size_t param_dim(Dim d, const GPTConfig* c);
// Slices of kind k in the model c: 0 when the architecture lacks it, 1 for a model kind, the
// layers that hold one for a per-layer kind.
int param_slices(const ParamKind* k, const GPTConfig* c);
// The slice of kind k (per layer) that layer l holds, -1 for none (or the architecture lacks k).
int param_layer_slice(const ParamKind* k, int l, const GPTConfig* c);
// Elements of one slice of kind k (of its tensor, for a model kind), 0 when absent.
size_t param_slice_size(const ParamKind* k, const GPTConfig* c);
// The rows of each block Muon cuts a slice of kind k (GROUP_MATRIX) into under the cut qkv.
Dim param_muon_rows(const ParamKind* k, int qkv);
// The matrices Muon cuts a slice of kind k (GROUP_MATRIX) into under the cut qkv: each (rows, cols).
void param_muon_matrix(const ParamKind* k, const GPTConfig* c, int qkv, int* rows, int* cols);
// The unit ZeRO-1 cuts kind k's tensor by (distributed/zero_shard.h): under Muon (cut as qkv says)
// one of its matrices, so a rank orthogonalises each of its own whole; else ZERO_SHARD_ALIGN.
size_t param_zero_unit(const ParamKind* k, const GPTConfig* c, int muon, int qkv);
// NULL when Muon can cut the model c's matrices as qkv says, else why not: the head pairs of an
// odd head count.
const char* muon_qkv_unfit(int qkv, const GPTConfig* c);
// "fused", "split" or "head-pairs", as --muon-qkv names them.
const char* muon_qkv_name(int qkv);

// Elements of each tensor, in checkpoint order (0: not in the architecture).
void param_sizes(const GPTConfig* c, size_t sizes[NUM_PARAM_TENSORS]);
size_t count_params(const GPTConfig* c);

// Tensor k's initial values (param_slices * param_slice_size of them, fp32, slice after slice)
// into values, its normal draws from rng: zero, ones, or N(0, std) (std / sqrt(2L) for a residual
// projection), zero under zero_init where the row says so; a vocabulary table's rows past V zero
// and not drawn.
void init_param_tensor(const ParamKind* k, const GPTConfig* c, float* values, Rng* rng);
// The initial values of the whole model (count_params fp32, checkpoint order), each already a bf16
// value (the master weights start as the bf16 model), the tensors drawn one after another from
// seed by the scheme (InitScheme), so no tensor's values depend on the tensors after it: the
// parts' tensors, last, leave every other tensor's draws as a model without them has them.
void init_param_values(float* values, const GPTConfig* c, uint64_t seed, int scheme);
// "default" or "nanochat", as --init names them.
const char* init_scheme_name(int scheme);

// The bytes param_table_describe may take.
#define PARAM_TABLE_TEXT 4096
// The table as train_gpt --help lists it: a line per kind with its shape, init, which presets
// (gpt/config.h) have it and its optimizer group (last, the one column of any length).
void param_table_describe(char* out, size_t len);

#ifdef __cplusplus
}
#endif

#endif
