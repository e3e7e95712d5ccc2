// generate.cu: the generation program: text from a trained model. It reads a checkpoint and a
// tokenizer and continues the prompt (<|endoftext|> then the prompt's tokens) on the inference
// model of gpt/inference.h: the parameters, a KV cache for the prompt and the new tokens, and a
// decoding step replayed as a CUDA graph. --samples N draws N continuations at once, one cache
// row each. One sample is printed as it comes, several once they are done; the memory and the
// timing go to stderr. A model with documents writes one document per sample: a sample ends with
// the first <|endoftext|> it draws (gpt/generation.h).
#include <string.h>

#include "common/clock.h"
#include "common/cuda_check.h"
#include "common/error.h"
#include "common/options.h"
#include "common/read_file.h"
#include "gpt/checkpoint.h"
#include "gpt/generation.h"
#include "gpt/inference.h"
#include "gpt/model_files.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    const char* checkpoint;
    const char* tokenizer;
    const char* prompt;      // text, "-" for stdin, NULL for none
    int max_tokens;
    float temperature, top_p;
    int top_k;
    int samples;
    uint64_t seed;
} GenerateOptions;

static void parse_args(int argc, char** argv, GenerateOptions* o) {
    *o = (GenerateOptions){.max_tokens = 256, .temperature = 1.0f, .top_p = 1.0f, .samples = 1, .seed = 1337};
    const Option options[] = {
        OPTION_CHECKPOINT(o->checkpoint),
        OPTION_MODEL_TOKENIZER(o->tokenizer),
        {OPTION_INT, "--max-tokens", "N", &o->max_tokens, "tokens to generate, at most up to the model's context [256]",
         1, 1 << 30},
        OPTION_TEMPERATURE(o->temperature),
        OPTION_TOP_K(o->top_k),
        {OPTION_FLOAT, "--top-p", "X", &o->top_p,
         "sample among the most likely tokens that make up X of the\nprobability, 1 for all [1.0]"},
        {OPTION_INT, "--samples", "N", &o->samples, "continuations of the prompt drawn together, one cache row each [1]",
         1, INFERENCE_MAX_SEQUENCES},
        {OPTION_SEED, "--seed", "N", &o->seed, "sampling seed [1337]"},
    };
    const CommandLine line = {
        "generate",
        "usage: generate --checkpoint FILE --tokenizer FILE [options] [--] [PROMPT]\n"
        "Continues PROMPT (\"-\": standard input; none: a new document) with a trained model,\n"
        "on the GPU, printing the tokens as they come (several samples: once they are done).\n",
        22, "PROMPT", options, sizeof(options) / sizeof(options[0])};
    int first = options_parse(&line, argc, argv);
    if (first < argc) o->prompt = argv[first++];
    if (first < argc) die("unexpected argument '%s': give the prompt as one argument (quoted)", argv[first]);
    if (!(o->top_p > 0.0f && o->top_p <= 1.0f)) die("--top-p %g must be in (0, 1]", o->top_p);
}

// The prompt's bytes: the argument, standard input for "-", none without a prompt.
static unsigned char* prompt_text(const char* prompt, size_t* len) {
    char err[ERR_LEN];
    if (!prompt) {
        *len = 0;
        return (unsigned char*)calloc(1, 1);
    }
    if (strcmp(prompt, "-") != 0) {
        *len = strlen(prompt);
        return (unsigned char*)strdup(prompt);
    }
    unsigned char* text = read_file("/dev/stdin", len, err);
    if (!text) die("the prompt from standard input: %s", err);
    return text;
}

// What generate does with each step's tokens: keeps them, (n_new, S); one sample is printed as
// it comes. The prompt's time ends with its first token.
typedef struct {
    const Tokenizer* tok;
    int S;
    int* drawn;
    double t0, t_prompt;
} Drawn;

static void take_tokens(const int* tokens, int i, void* user) {
    Drawn* d = (Drawn*)user;
    if (i == 0) d->t_prompt = now_seconds() - d->t0;
    memcpy(d->drawn + (size_t)i * d->S, tokens, (size_t)d->S * sizeof(int));
    if (d->S == 1) {
        print_token(d->tok, tokens[0]);
        fflush(stdout);
    }
}

int main(int argc, char** argv) {
    GenerateOptions o;
    parse_args(argc, argv, &o);
    char err[ERR_LEN];

    // Everything that needs no GPU first: the files, the prompt, the lengths.
    const ProgramInput checkpoint = {"--checkpoint", o.checkpoint, 0}, tokenizer = {"--tokenizer", o.tokenizer, 0};
    GPTConfig config;
    Tokenizer* tok;
    if (open_model_files(&checkpoint, &tokenizer, &config, &tok, err) != 0) die("%s", err);
    size_t text_len;
    unsigned char* text = prompt_text(o.prompt, &text_len);
    int* prompt = (int*)malloc((text_len + 1) * sizeof(int));
    if (!prompt) die("out of host memory for the prompt");
    prompt[0] = tokenizer_eot(tok);
    int n_prompt = 1 + (int)tokenizer_encode(tok, text, text_len, prompt + 1);
    if (n_prompt >= config.maxT)
        die("the prompt is %d tokens with <|endoftext|>: the model's context of %d leaves no room to generate",
            n_prompt, config.maxT);
    int length = n_prompt + o.max_tokens < config.maxT ? n_prompt + o.max_tokens : config.maxT;
    const char* why = generation_unsupported(&config, length, n_prompt);
    if (why) die("%s: %s", o.checkpoint, why);
    // The long read last: every value of the checkpoint, checked on the host.
    float* values = read_model_values(o.checkpoint, &config);

    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
        die("no CUDA device: generate runs on an NVIDIA GPU");
    static InferenceModel m;
    int S = o.samples, n_new = length - n_prompt;
    inference_build(&m, config, S, length, n_prompt, (DrawSettings){o.temperature, o.top_k, o.top_p, o.seed});
    inference_set_params(&m, values);
    free(values);
    inference_sizes_print(&m.sizes);
    Drawn d = {tok, S, (int*)malloc((size_t)S * n_new * sizeof(int)), 0.0, 0.0};
    if (!d.drawn) die("out of host memory for %d samples of %d tokens", S, n_new);

    if (S == 1) {
        fwrite(text, 1, text_len, stdout);
        fflush(stdout);
    }
    d.t0 = now_seconds();
    int drawn = generate_tokens(&m, prompt, n_prompt, n_new, NULL, take_tokens, &d);
    double t_steps = now_seconds() - d.t0 - d.t_prompt;
    if (S == 1) printf("\n");
    for (int s = 0; S > 1 && s < S; s++) {
        printf("--- sample %d of %d\n", s + 1, S);
        fwrite(text, 1, text_len, stdout);
        for (int i = 0; i < drawn; i++) {
            int token = d.drawn[(size_t)i * S + s];
            print_token(tok, token);
            if (ends_sample(&config, token)) break;
        }
        printf("\n");
    }
    fprintf(stderr, "prompt: %d tokens in %.1f ms; generated %d tokens x %d samples in %.3f s: %.1f tokens/s%s\n",
            n_prompt, d.t_prompt * 1e3, drawn, S, t_steps, drawn > 1 ? (double)(drawn - 1) * S / t_steps : 0.0,
            drawn < n_new ? " (every sample's document ended)"
            : n_prompt + o.max_tokens > config.maxT ? " (stopped at the model's context)" : "");
    free(d.drawn);
    free(prompt);
    free(text);
    inference_free(&m);
    tokenizer_free(tok);
    return 0;
}
