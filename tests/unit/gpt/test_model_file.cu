// tests/unit/gpt/test_model_file.cu: the model checkpoint's header on the host (gpt/checkpoint.h): a
// version 6 file holding fields without effect (a rotary base without rotary, a window of the
// context or more, a window pattern longer than the layers) reads as the model it computes, its
// values as written, and is saved again as that model's file: a GPT-2 as llm.c's version 3 with
// nothing past its shape, another model as version 6 without the fields dropped. A model with a
// part of the 2026 recipe is saved as version 8 and read back; a version 8 file without one (or
// with a QK scale of 1, which is none) is saved again as version 6, which the readers without the
// parts read. A model of the 2026 preset reads back as one.
#include <stdlib.h>
#include <string.h>
#include "gpt/checkpoint.h"
#include "tests/lib/test.h"

static const char* tmp_dir;

// A file of version (6 or 8) at path of c's shape and architecture, as given (no field dropped),
// holding values (count_params(c) fp32).
static void write_version(const char* path, int version, const GPTConfig* c, const float* values) {
    ModelFileHeader h;
    memset(&h, 0, sizeof(h));
    h.f.magic = MODEL_MAGIC;
    h.f.version = version;
    h.f.shape = (ShapeFields){.maxT = c->maxT, .V = c->V, .L = c->L, .NH = c->NH, .C = c->C, .Vp = c->Vp};
    h.f.arch = c->arch;
    FILE* f = fopen(path, "wb");
    if (!f) die("%s: cannot write", path);
    size_t n = count_params(c);
    if (fwrite(&h, sizeof(h), 1, f) != 1 || fwrite(values, sizeof(float), n, f) != n || fclose(f) != 0)
        die("%s: write failed", path);
}

static void read_header(const char* path, ModelFileHeader* h) {
    FILE* f = fopen(path, "rb");
    if (!f || fread(h, sizeof(*h), 1, f) != 1) die("%s: cannot read its header", path);
    fclose(f);
}

// The file of c (whose architecture holds fields without effect) as version `written` reads as
// `read`, with its values, and is saved again as version `saved` holding read's architecture.
static void check_read_and_saved(const char* name, int written, const GPTConfig* c, const Architecture* read,
                                 int saved) {
    char path[4096], again[4096];
    snprintf(path, sizeof(path), "%s/model_file_%s.bin", tmp_dir, name);
    snprintf(again, sizeof(again), "%s/model_file_%s_saved.bin", tmp_dir, name);
    size_t n = count_params(c);
    float* values = (float*)malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) values[i] = (float)(i % 97) * 0.01f - 0.5f;
    write_version(path, written, c, values);

    GPTConfig config;
    char err[ERR_LEN];
    CHECK(read_model_shape(path, &config, err) == 0, "%s: %s", name, err);
    char have[ARCHITECTURE_TEXT], want[ARCHITECTURE_TEXT];
    architecture_describe(&config.arch, c->maxT, c->L, have, sizeof(have));
    architecture_describe(read, c->maxT, c->L, want, sizeof(want));
    CHECK(gpt_config_same_shape(&config, c) && architecture_equal(&config.arch, read), "%s reads as %s, expected %s",
          name, have, want);
    float* back = read_model_values(path, &config);
    CHECK(!memcmp(back, values, n * sizeof(float)), "%s: the values read are not those written", name);

    save_model_values(again, &config, back);
    ModelFileHeader h;
    read_header(again, &h);
    CHECK(h.f.version == saved, "%s saved again as version %d, expected %d", name, h.f.version, saved);
    Architecture stored = saved == MODEL_VERSION_FP32 ? (Architecture){} : *read;
    CHECK(!memcmp(&h.f.arch, &stored, sizeof(stored)), "%s saved again with another architecture in its header", name);
    for (int i = MODEL_HEADER_USED_INTS; i < HEADER_INTS; i++) CHECK(h.ints[i] == 0, "%s: slot %d set", name, i);
    GPTConfig reread;
    CHECK(read_model_shape(again, &reread, err) == 0 && gpt_config_same_model(&reread, &config),
          "%s saved again does not read back as the model", name);
    float* reread_values = read_model_values(again, &reread);
    CHECK(!memcmp(reread_values, values, n * sizeof(float)), "%s saved again: other values", name);
    free(values);
    free(back);
    free(reread_values);
}

static void test_fields_without_effect_dropped(void) {
    test_begin("model file: fields without effect dropped as read, the model saved again as its own file");
    const Architecture gpt2 = ARCHITECTURE_GPT2, modern = ARCHITECTURE_MODERN;
    GPTConfig c = {.maxT = 64, .V = 300, .Vp = padded_vocab(300), .L = 2, .NH = 2, .C = 128, .arch = gpt2};
    c.arch.rotary_base = 5000.0f;
    check_read_and_saved("gpt2_base_5000", MODEL_VERSION_ARCH_FP32, &c, &gpt2, MODEL_VERSION_FP32);
    c.arch = gpt2;
    c.arch.window_count = 3;
    c.arch.windows[0] = 64;
    c.arch.windows[2] = 16;   // past the layers
    check_read_and_saved("gpt2_windows_without_effect", MODEL_VERSION_ARCH_FP32, &c, &gpt2, MODEL_VERSION_FP32);
    c.arch = modern;
    c.arch.window_count = 3;
    c.arch.windows[0] = 8;
    c.arch.windows[1] = 100000;
    c.arch.windows[2] = 32;
    Architecture read = modern;
    read.window_count = 2;
    read.windows[0] = 8;
    check_read_and_saved("modern_windows_8_full", MODEL_VERSION_ARCH_FP32, &c, &read, MODEL_VERSION_ARCH_FP32);
    test_end();
}

static void test_parts_versions(void) {
    test_begin("model file: a model with a part of the 2026 recipe is version 8, one without it version 6");
    const Architecture modern = ARCHITECTURE_MODERN, gpt2 = ARCHITECTURE_GPT2;
    GPTConfig c = {.maxT = 64, .V = 300, .Vp = padded_vocab(300), .L = 2, .NH = 2, .C = 128, .arch = modern};
    c.arch.embedding_norm = 1;
    check_read_and_saved("modern_embedding_norm", MODEL_VERSION_PARTS_FP32, &c, &c.arch, MODEL_VERSION_PARTS_FP32);
    c.arch = gpt2;
    c.arch.embedding_norm = 1;
    check_read_and_saved("gpt2_embedding_norm", MODEL_VERSION_PARTS_FP32, &c, &c.arch, MODEL_VERSION_PARTS_FP32);
    c.arch = modern;
    c.arch.qk_scale = 1.25f;
    check_read_and_saved("modern_qk_scale", MODEL_VERSION_PARTS_FP32, &c, &c.arch, MODEL_VERSION_PARTS_FP32);
    c.arch.residual_lambdas = 1;   // two tensors more, at the end
    check_read_and_saved("modern_lambdas", MODEL_VERSION_PARTS_FP32, &c, &c.arch, MODEL_VERSION_PARTS_FP32);
    c.arch.value_embeddings = 1;   // a table and a gate of layer 1, after the lambdas
    check_read_and_saved("modern_value_embeddings", MODEL_VERSION_PARTS_FP32, &c, &c.arch, MODEL_VERSION_PARTS_FP32);
    c.arch = gpt2;
    c.arch.value_embeddings = 1;
    check_read_and_saved("gpt2_value_embeddings", MODEL_VERSION_PARTS_FP32, &c, &c.arch, MODEL_VERSION_PARTS_FP32);
    c.arch.smear = 1;   // two tensors more, last
    check_read_and_saved("gpt2_smear", MODEL_VERSION_PARTS_FP32, &c, &c.arch, MODEL_VERSION_PARTS_FP32);
    c.arch.backout = 1;   // one tensor more, last
    check_read_and_saved("gpt2_backout", MODEL_VERSION_PARTS_FP32, &c, &c.arch, MODEL_VERSION_PARTS_FP32);
    c.arch = modern;
    check_read_and_saved("modern_in_version_8", MODEL_VERSION_PARTS_FP32, &c, &modern, MODEL_VERSION_ARCH_FP32);
    c.arch.qk_scale = 1.0f;   // without effect: the modern model, saved as its version 6
    check_read_and_saved("modern_qk_scale_1", MODEL_VERSION_PARTS_FP32, &c, &modern, MODEL_VERSION_ARCH_FP32);
    test_end();
}

// A model of the 2026 preset: its components, parts and key windows (at 6 layers of context 64:
// 16,16,16,full,16,full) in a version 8 file, read back and saved again as they are, and named
// 2026 again; the same file at another context is no 2026 model.
static void test_preset_2026(void) {
    test_begin("model file: a 2026 model is version 8, read back and described as 2026");
    GPTConfig c = {.maxT = 64, .V = 300, .Vp = padded_vocab(300), .L = 6, .NH = 2, .C = 128};
    char err[256], text[ARCHITECTURE_TEXT + 128];
    CHECK(!architecture_of_preset(&architecture_presets[2], c.maxT, c.L, &c.arch, err, sizeof(err)), "%s", err);
    check_read_and_saved("2026", MODEL_VERSION_PARTS_FP32, &c, &c.arch, MODEL_VERSION_PARTS_FP32);
    char path[4096];
    snprintf(path, sizeof(path), "%s/model_file_2026_saved.bin", tmp_dir);
    GPTConfig read;
    CHECK(read_model_shape(path, &read, err) == 0, "%s", err);
    gpt_config_describe(&read, text, sizeof(text));
    CHECK(!strcmp(text, "L 6 C 128 NH 2 V 300 context 64, 2026"), "read back as '%s'", text);
    read.maxT = 128;
    gpt_config_describe(&read, text, sizeof(text));
    CHECK(strstr(text, "context 128, modern, embedding norm") && strstr(text, "windows 16,16,16,full,16,full"),
          "at context 128: '%s'", text);
    test_end();
}

int main(void) {
    tmp_dir = test_env("FLASHGPT_TMP", "/tmp");
    test_fields_without_effect_dropped();
    test_parts_versions();
    test_preset_2026();
    return test_exit_code();
}
