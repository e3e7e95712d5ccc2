// generate.cu: the generation program: text from a trained model. It reads a checkpoint and a
// tokenizer and continues the prompt (<|endoftext|> then the prompt's tokens) on the inference
// model of gpt/inference.h: the parameters, a KV cache for the prompt and the new tokens, and a
// decoding step replayed as a CUDA graph. --samples N draws N continuations at once, one cache
// row each. One sample is printed as it comes, several once they are done; the memory and the
// timing go to stderr.
#include <getopt.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/cuda_check.h"
#include "common/error.h"
#include "common/parse.h"
#include "common/read_file.h"
#include "common/rng.h"
#include "gpt/checkpoint.h"
#include "gpt/generation.h"
#include "gpt/gpt.h"
#include "gpt/inference.h"
#include "gpt/activations.h"
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

static void usage(void) {
    printf(
        "usage: generate --checkpoint FILE --tokenizer FILE [options] [PROMPT]\n"
        "Continues PROMPT (\"-\": standard input; none: a new document) with a trained model,\n"
        "on the GPU, printing the tokens as they come (several samples: once they are done).\n"
        "  --checkpoint FILE   model checkpoint (train_gpt's model_*.bin, version 3 or 5)\n"
        "  --tokenizer FILE    the tokenizer the model was trained with\n"
        "  --max-tokens N      tokens to generate, at most up to the model's context [256]\n"
        "  --temperature X     0 for the most likely token (greedy) [1.0]\n"
        "  --top-k N           sample among the K most likely tokens, 0 for all [0]\n"
        "  --top-p X           sample among the most likely tokens that make up X of the\n"
        "                      probability, 1 for all [1.0]\n"
        "  --samples N         continuations of the prompt drawn together, one cache row each [1]\n"
        "  --seed N            sampling seed [1337]\n"
        "  -h, --help          this text\n");
}

static void parse_args(int argc, char** argv, GenerateOptions* o) {
    enum { OPT_CHECKPOINT = 256, OPT_TOKENIZER, OPT_MAX_TOKENS, OPT_TEMPERATURE, OPT_TOP_K, OPT_TOP_P, OPT_SAMPLES,
           OPT_SEED };
    static const struct option long_options[] = {
        {"checkpoint", required_argument, NULL, OPT_CHECKPOINT},
        {"tokenizer", required_argument, NULL, OPT_TOKENIZER},
        {"max-tokens", required_argument, NULL, OPT_MAX_TOKENS},
        {"temperature", required_argument, NULL, OPT_TEMPERATURE},
        {"top-k", required_argument, NULL, OPT_TOP_K},
        {"top-p", required_argument, NULL, OPT_TOP_P},
        {"samples", required_argument, NULL, OPT_SAMPLES},
        {"seed", required_argument, NULL, OPT_SEED},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    memset(o, 0, sizeof(*o));
    o->max_tokens = 256;
    o->temperature = 1.0f;
    o->top_p = 1.0f;
    o->seed = 1337;
    o->samples = 1;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", long_options, NULL)) != -1) {
        switch (c) {
        case OPT_CHECKPOINT: o->checkpoint = optarg; break;
        case OPT_TOKENIZER: o->tokenizer = optarg; break;
        case OPT_MAX_TOKENS: o->max_tokens = parse_int_in("--max-tokens", optarg, 1, 1 << 30); break;
        case OPT_TEMPERATURE: o->temperature = parse_float("--temperature", optarg); break;
        case OPT_TOP_K: o->top_k = parse_int_in("--top-k", optarg, 0, 1 << 30); break;
        case OPT_TOP_P: o->top_p = parse_float("--top-p", optarg); break;
        case OPT_SAMPLES: o->samples = parse_int_in("--samples", optarg, 1, INFERENCE_MAX_SEQUENCES); break;
        case OPT_SEED: o->seed = (uint64_t)parse_integer("--seed", optarg); break;
        case 'h': usage(); exit(0);
        case ':': die("%s needs a value (generate --help lists the options)", argv[optind - 1]);
        default: die("unknown option %s (generate --help lists the options)", argv[optind - 1]);
        }
    }
    if (optind < argc) o->prompt = argv[optind++];
    if (optind < argc) die("unexpected argument '%s': give the prompt as one argument (quoted)", argv[optind]);
    if (!o->checkpoint) die("--checkpoint: missing (generate --help)");
    if (!o->tokenizer) die("--tokenizer: missing (generate --help)");
    if (o->temperature < 0.0f) die("--temperature %g must be >= 0", o->temperature);
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
    GPTConfig config;
    if (read_model_shape(o.checkpoint, &config, err) != 0) die("--checkpoint: %s", err);
    Tokenizer* tok = tokenizer_load_sized(o.tokenizer, config.V, err);
    if (!tok) die("--tokenizer %s", err);
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
    ModelOptions mo = {.attention = {.kind = ATTENTION_FLASH}};
    const char* why = attention_unsupported(&mo.attention, attention_shape(&config, 1, n_prompt));
    if (!why) why = attention_decode_unsupported(&mo.attention, attention_shape(&config, 1, length));
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
    inference_plan_print(&m.plan);
    Drawn d = {tok, S, (int*)malloc((size_t)S * n_new * sizeof(int)), 0.0, 0.0};
    if (!d.drawn) die("out of host memory for %d samples of %d tokens", S, n_new);

    if (S == 1) {
        fwrite(text, 1, text_len, stdout);
        fflush(stdout);
    }
    d.t0 = now_seconds();
    generate_tokens(&m, prompt, n_prompt, n_new, NULL, take_tokens, &d);
    double t_steps = now_seconds() - d.t0 - d.t_prompt;
    if (S == 1) printf("\n");
    for (int s = 0; S > 1 && s < S; s++) {
        printf("--- sample %d of %d\n", s + 1, S);
        fwrite(text, 1, text_len, stdout);
        for (int i = 0; i < n_new; i++) print_token(tok, d.drawn[(size_t)i * S + s]);
        printf("\n");
    }
    fprintf(stderr, "prompt: %d tokens in %.1f ms; generated %d tokens x %d samples in %.3f s: %.1f tokens/s%s\n",
            n_prompt, d.t_prompt * 1e3, n_new, S, t_steps, n_new > 1 ? (double)(n_new - 1) * S / t_steps : 0.0,
            n_prompt + o.max_tokens > config.maxT ? " (stopped at the model's context)" : "");
    free(d.drawn);
    free(prompt);
    free(text);
    inference_free(&m);
    tokenizer_free(tok);
    return 0;
}
