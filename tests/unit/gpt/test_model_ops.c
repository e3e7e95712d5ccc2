// tests/unit/gpt/test_model_ops.c: the model's lists of operations (gpt/model_ops.h) on the CPU, written
// out as text with each operation's settings: the stem, the block and the head of GPT-2 and of
// the modern recipe; each switch of the architecture alone, on GPT-2's and off the modern one,
// changing what it computes and nothing else (the biases, the untied head and zero init change
// the parameters, not the operations); each layer's key window under a pattern, and documents,
// which leave the lists as they are; each part of the 2026 recipe on either preset. Its switches, as every path's, name every operation: a new
// one is written out here too.
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "gpt/model_ops.h"
#include "tests/lib/test.h"

#define TEXT 512

static const char* norm_name(NormKind norm) {
    switch (norm) {
    case NORM_LAYERNORM: return "layernorm";
    case NORM_RMSNORM: return "rmsnorm";
    }
    return "?";
}

static const char* activation_name(Activation a) {
    switch (a) {
    case ACTIVATION_GELU: return "gelu";
    case ACTIVATION_RELU2: return "relu2";
    }
    return "?";
}

// Appends to out (TEXT bytes) as printf would.
static void append(char* out, const char* fmt, ...) {
    size_t n = strlen(out);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out + n, TEXT - n, fmt, ap);
    va_end(ap);
}

static void stem_text(const StemOps* ops, char* out) {
    out[0] = '\0';
    for (int i = 0; i < ops->count; i++) {
        if (i) append(out, " ");
        switch (ops->op[i]) {
        case STEM_EMBEDDING: append(out, "embedding"); break;
        case STEM_EMBEDDING_NORM: append(out, "embedding_norm"); break;
        case STEM_SMEAR: append(out, "smear"); break;
        }
    }
}

// "norm1(rmsnorm) qkv qk(norm 1 rotary 1 base 10000) attention(window 0) attproj norm2(rmsnorm)
// fc(relu2) fcproj"
static void block_text(const BlockOps* ops, char* out) {
    out[0] = '\0';
    for (int i = 0; i < ops->count; i++) {
        if (i) append(out, " ");
        switch (ops->op[i]) {
        case BLOCK_RESIDUAL_LAMBDAS: append(out, "lambdas"); break;
        case BLOCK_NORM1: append(out, "norm1(%s)", norm_name(ops->norm)); break;
        case BLOCK_VALUE_GATE: append(out, "value_gate"); break;
        case BLOCK_QKV: append(out, "qkv"); break;
        case BLOCK_VALUE_EMBEDDING: append(out, "value_embedding"); break;
        case BLOCK_QK_NORM_ROTARY:
            append(out, "qk(norm %d rotary %d base %g)", ops->qk_norm, ops->rotary, ops->rotary_base);
            break;
        case BLOCK_ATTENTION: append(out, "attention(window %d)", ops->window); break;
        case BLOCK_ATTPROJ: append(out, "attproj"); break;
        case BLOCK_NORM2: append(out, "norm2(%s)", norm_name(ops->norm)); break;
        case BLOCK_FC: append(out, "fc(%s)", activation_name(ops->activation)); break;
        case BLOCK_FCPROJ: append(out, "fcproj"); break;
        }
    }
}

static void head_text(const HeadOps* ops, char* out) {
    out[0] = '\0';
    for (int i = 0; i < ops->count; i++) {
        if (i) append(out, " ");
        switch (ops->op[i]) {
        case HEAD_BACKOUT: append(out, "backout"); break;
        case HEAD_NORM: append(out, "norm(%s)", norm_name(ops->norm)); break;
        case HEAD_LOGITS: append(out, "logits(softcap %g)", ops->softcap); break;
        }
    }
}

// The layers of the model whose lists are checked: layer l < LAYERS.
#define LAYERS 3

// The stem's, layer l's block's and the head's text against the expected.
static void check_lists(const char* what, const Architecture* a, int l, const char* stem, const char* block,
                        const char* head) {
    char got[TEXT];
    StemOps s = stem_ops(a);
    BlockOps b = block_ops(a, l, LAYERS);
    HeadOps h = head_ops(a);
    CHECK(s.count <= MODEL_MAX_OPS && b.count <= MODEL_MAX_OPS && h.count <= MODEL_MAX_OPS,
          "%s: a list longer than MODEL_MAX_OPS", what);
    stem_text(&s, got);
    CHECK(!strcmp(got, stem), "%s: the stem is \"%s\", not \"%s\"", what, got, stem);
    block_text(&b, got);
    CHECK(!strcmp(got, block), "%s: layer %d's block is \"%s\", not \"%s\"", what, l, got, block);
    head_text(&h, got);
    CHECK(!strcmp(got, head), "%s: the head is \"%s\", not \"%s\"", what, got, head);
}

#define GPT2_BLOCK "norm1(layernorm) qkv attention(window 0) attproj norm2(layernorm) fc(gelu) fcproj"
#define MODERN_BLOCK                                                                                            \
    "norm1(rmsnorm) qkv qk(norm 1 rotary 1 base 10000) attention(window 0) attproj norm2(rmsnorm) fc(relu2) fcproj"

static void test_presets(void) {
    test_begin("model_ops_presets");
    const Architecture gpt2 = ARCHITECTURE_GPT2, modern = ARCHITECTURE_MODERN;
    for (int l = 0; l < 3; l++) {
        check_lists("gpt2", &gpt2, l, "embedding", GPT2_BLOCK, "norm(layernorm) logits(softcap 0)");
        check_lists("modern", &modern, l, "embedding", MODERN_BLOCK, "norm(rmsnorm) logits(softcap 30)");
    }
    test_end();
}

// Each switch on GPT-2's architecture, then off the modern one.
static void test_switches(void) {
    test_begin("model_ops_switches");
    const char* stem = "embedding";
    const char* gpt2_head = "norm(layernorm) logits(softcap 0)";
    const char* modern_head = "norm(rmsnorm) logits(softcap 30)";
    Architecture a = ARCHITECTURE_GPT2;
    a.rotary = 1;
    check_lists("gpt2 with rotary", &a, 0, stem,
                "norm1(layernorm) qkv qk(norm 0 rotary 1 base 10000) attention(window 0) attproj norm2(layernorm) "
                "fc(gelu) fcproj",
                gpt2_head);
    a = (Architecture)ARCHITECTURE_GPT2;
    a.rotary = 1;
    a.rotary_base = 500000.0f;
    check_lists("gpt2 with rotary, base 500000", &a, 0, stem,
                "norm1(layernorm) qkv qk(norm 0 rotary 1 base 500000) attention(window 0) attproj norm2(layernorm) "
                "fc(gelu) fcproj",
                gpt2_head);
    a = (Architecture)ARCHITECTURE_GPT2;
    a.qk_norm = 1;
    check_lists("gpt2 with qk-norm", &a, 0, stem,
                "norm1(layernorm) qkv qk(norm 1 rotary 0 base 10000) attention(window 0) attproj norm2(layernorm) "
                "fc(gelu) fcproj",
                gpt2_head);
    a = (Architecture)ARCHITECTURE_GPT2;
    a.rms_norm = 1;
    check_lists("gpt2 with rms norm", &a, 0, stem,
                "norm1(rmsnorm) qkv attention(window 0) attproj norm2(rmsnorm) fc(gelu) fcproj",
                "norm(rmsnorm) logits(softcap 0)");
    a = (Architecture)ARCHITECTURE_GPT2;
    a.relu2 = 1;
    check_lists("gpt2 with relu2", &a, 0, stem,
                "norm1(layernorm) qkv attention(window 0) attproj norm2(layernorm) fc(relu2) fcproj", gpt2_head);
    a = (Architecture)ARCHITECTURE_GPT2;
    a.softcap = 15.0f;
    check_lists("gpt2 with softcap 15", &a, 0, stem, GPT2_BLOCK, "norm(layernorm) logits(softcap 15)");
    a = (Architecture)ARCHITECTURE_GPT2;
    a.bias = 0;
    a.untied_head = 1;
    a.zero_init = 1;
    check_lists("gpt2 without bias, untied, zero init", &a, 0, stem, GPT2_BLOCK, gpt2_head);

    a = (Architecture)ARCHITECTURE_MODERN;
    a.rotary = 0;
    check_lists("modern without rotary", &a, 0, stem,
                "norm1(rmsnorm) qkv qk(norm 1 rotary 0 base 10000) attention(window 0) attproj norm2(rmsnorm) "
                "fc(relu2) fcproj",
                modern_head);
    a = (Architecture)ARCHITECTURE_MODERN;
    a.qk_norm = 0;
    check_lists("modern without qk-norm", &a, 0, stem,
                "norm1(rmsnorm) qkv qk(norm 0 rotary 1 base 10000) attention(window 0) attproj norm2(rmsnorm) "
                "fc(relu2) fcproj",
                modern_head);
    a = (Architecture)ARCHITECTURE_MODERN;
    a.qk_norm = a.rotary = 0;
    check_lists("modern without qk-norm and rotary", &a, 0, stem,
                "norm1(rmsnorm) qkv attention(window 0) attproj norm2(rmsnorm) fc(relu2) fcproj", modern_head);
    a = (Architecture)ARCHITECTURE_MODERN;
    a.rms_norm = 0;
    check_lists("modern with layernorm", &a, 0, stem,
                "norm1(layernorm) qkv qk(norm 1 rotary 1 base 10000) attention(window 0) attproj norm2(layernorm) "
                "fc(relu2) fcproj",
                "norm(layernorm) logits(softcap 30)");
    a = (Architecture)ARCHITECTURE_MODERN;
    a.relu2 = 0;
    check_lists("modern with gelu", &a, 0, stem,
                "norm1(rmsnorm) qkv qk(norm 1 rotary 1 base 10000) attention(window 0) attproj norm2(rmsnorm) "
                "fc(gelu) fcproj",
                modern_head);
    a = (Architecture)ARCHITECTURE_MODERN;
    a.softcap = 0.0f;
    check_lists("modern without softcap", &a, 0, stem, MODERN_BLOCK, "norm(rmsnorm) logits(softcap 0)");
    a = (Architecture)ARCHITECTURE_MODERN;
    a.bias = 1;
    a.untied_head = 0;
    a.zero_init = 0;
    check_lists("modern with bias, tied, without zero init", &a, 0, stem, MODERN_BLOCK, modern_head);
    test_end();
}

// The parts of the 2026 recipe, each on its own on either preset: the embedding's norm, the
// stem's second operation (an RMSNorm whatever the blocks' norm); the residual lambdas, the first
// of every block; the QK scale, which changes no list (it is attention's scale); the value
// embeddings, two operations of every other block; the smear, the stem's last; the backout, the
// head's first.
#define LAMBDAS_MODERN_BLOCK                                                                                   \
    "lambdas norm1(rmsnorm) qkv qk(norm 1 rotary 1 base 10000) attention(window 0) attproj norm2(rmsnorm) "     \
    "fc(relu2) fcproj"
static void test_parts(void) {
    test_begin("model_ops_parts");
    Architecture a = ARCHITECTURE_GPT2;
    a.embedding_norm = 1;
    check_lists("gpt2 with embedding norm", &a, 0, "embedding embedding_norm", GPT2_BLOCK,
                "norm(layernorm) logits(softcap 0)");
    a = (Architecture)ARCHITECTURE_MODERN;
    a.embedding_norm = 1;
    check_lists("modern with embedding norm", &a, 1, "embedding embedding_norm", MODERN_BLOCK,
                "norm(rmsnorm) logits(softcap 30)");
    a = (Architecture)ARCHITECTURE_GPT2;
    a.residual_lambdas = 1;
    for (int l = 0; l < 3; l++)
        check_lists("gpt2 with residual lambdas", &a, l, "embedding", "lambdas " GPT2_BLOCK,
                    "norm(layernorm) logits(softcap 0)");
    a = (Architecture)ARCHITECTURE_MODERN;
    a.embedding_norm = a.residual_lambdas = 1;
    a.qk_scale = 1.2f;
    a.window_count = 2;
    a.windows[1] = 64;
    check_lists("modern with every part, windows full,64", &a, 0, "embedding embedding_norm", LAMBDAS_MODERN_BLOCK,
                "norm(rmsnorm) logits(softcap 30)");
    a.qk_scale = 0.0f;
    check_lists("modern with the parts but the QK scale", &a, 2, "embedding embedding_norm", LAMBDAS_MODERN_BLOCK,
                "norm(rmsnorm) logits(softcap 30)");
    // The value embeddings on layers 0 and 2 of 3: the gate after the norm it reads, the values
    // added after the QKV layer that makes them; layer 1's block without them.
    a = (Architecture)ARCHITECTURE_MODERN;
    a.value_embeddings = 1;
    for (int l = 0; l < LAYERS; l++)
        check_lists("modern with value embeddings", &a, l, "embedding",
                    l == 1 ? MODERN_BLOCK
                           : "norm1(rmsnorm) value_gate qkv value_embedding qk(norm 1 rotary 1 base 10000) "
                             "attention(window 0) attproj norm2(rmsnorm) fc(relu2) fcproj",
                    "norm(rmsnorm) logits(softcap 30)");
    a = (Architecture)ARCHITECTURE_GPT2;
    a.value_embeddings = 1;
    // The smear: the stem's last operation, after the norm, whose output it smears.
    Architecture smeared = ARCHITECTURE_MODERN;
    smeared.smear = 1;
    check_lists("modern with the smear", &smeared, 0, "embedding smear", MODERN_BLOCK, "norm(rmsnorm) logits(softcap 30)");
    smeared.embedding_norm = 1;
    check_lists("modern with the embedding norm and the smear", &smeared, 1, "embedding embedding_norm smear",
                MODERN_BLOCK, "norm(rmsnorm) logits(softcap 30)");
    // The backout: the head's first operation, before the norm of what it leaves.
    smeared.backout = 1;
    check_lists("modern with the embedding norm, the smear and the backout", &smeared, 2,
                "embedding embedding_norm smear", MODERN_BLOCK, "backout norm(rmsnorm) logits(softcap 30)");
    check_lists("gpt2 with value embeddings", &a, 2, "embedding",
                "norm1(layernorm) value_gate qkv value_embedding attention(window 0) attproj norm2(layernorm) fc(gelu) "
                "fcproj",
                "norm(layernorm) logits(softcap 0)");
    test_end();
}

// The pattern 16, full, 8 over seven layers (layer l takes windows[l % 3]), with documents; and
// a window of 4 on every layer of GPT-2's.
static void test_windows(void) {
    test_begin("model_ops_windows");
    Architecture a = ARCHITECTURE_MODERN;
    a.documents = 1;
    a.document_token = 50256;
    a.window_count = 3;
    a.windows[0] = 16;
    a.windows[1] = 0;
    a.windows[2] = 8;
    const int expected[7] = {16, 0, 8, 16, 0, 8, 16};
    for (int l = 0; l < 7; l++) {
        char block[TEXT];
        snprintf(block, sizeof(block),
                 "norm1(rmsnorm) qkv qk(norm 1 rotary 1 base 10000) attention(window %d) attproj norm2(rmsnorm) "
                 "fc(relu2) fcproj",
                 expected[l]);
        check_lists("modern, windows 16,full,8, documents", &a, l, "embedding", block,
                    "norm(rmsnorm) logits(softcap 30)");
    }
    a = (Architecture)ARCHITECTURE_GPT2;
    a.window_count = 1;
    a.windows[0] = 4;
    for (int l = 0; l < 3; l++)
        check_lists("gpt2, window 4", &a, l, "embedding",
                    "norm1(layernorm) qkv attention(window 4) attproj norm2(layernorm) fc(gelu) fcproj",
                    "norm(layernorm) logits(softcap 0)");
    test_end();
}

int main(void) {
    test_presets();
    test_switches();
    test_windows();
    test_parts();
    return test_exit_code();
}
