// generate.cu: the generation program: text from a trained model. It reads a checkpoint and a
// tokenizer and continues the prompt (<|endoftext|> then the prompt's tokens) with the KV cache
// of gpt/generation.h. Tokens are printed as they come; the timing goes to stderr.
#include <getopt.h>
#include <math.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/cuda_check.h"
#include "common/error.h"
#include "common/parse.h"
#include "common/read_file.h"
#include "common/rng.h"
#include "gpt/checkpoint.h"
#include "gpt/gpt.h"
#include "gpt/generation.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    const char* checkpoint;
    const char* tokenizer;
    const char* prompt;      // text, "-" for stdin, NULL for none
    int max_tokens;
    float temperature, top_p;
    int top_k;
    uint64_t seed;
} GenerateOptions;

static void usage(void) {
    printf(
        "usage: generate --checkpoint FILE --tokenizer FILE [options] [PROMPT]\n"
        "Continues PROMPT (\"-\": standard input; none: a new document) with a trained model,\n"
        "on the GPU, printing the tokens as they come.\n"
        "  --checkpoint FILE   model checkpoint (train_gpt's model_*.bin, version 3 or 5)\n"
        "  --tokenizer FILE    the tokenizer the model was trained with\n"
        "  --max-tokens N      tokens to generate, at most up to the model's context [256]\n"
        "  --temperature X     0 for the most likely token (greedy) [1.0]\n"
        "  --top-k N           sample among the K most likely tokens, 0 for all [0]\n"
        "  --top-p X           sample among the most likely tokens that make up X of the\n"
        "                      probability, 1 for all [1.0]\n"
        "  --seed N            sampling seed [1337]\n"
        "  -h, --help          this text\n");
}

static void parse_args(int argc, char** argv, GenerateOptions* o) {
    enum { OPT_CHECKPOINT = 256, OPT_TOKENIZER, OPT_MAX_TOKENS, OPT_TEMPERATURE, OPT_TOP_K, OPT_TOP_P, OPT_SEED };
    static const struct option long_options[] = {
        {"checkpoint", required_argument, NULL, OPT_CHECKPOINT},
        {"tokenizer", required_argument, NULL, OPT_TOKENIZER},
        {"max-tokens", required_argument, NULL, OPT_MAX_TOKENS},
        {"temperature", required_argument, NULL, OPT_TEMPERATURE},
        {"top-k", required_argument, NULL, OPT_TOP_K},
        {"top-p", required_argument, NULL, OPT_TOP_P},
        {"seed", required_argument, NULL, OPT_SEED},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    memset(o, 0, sizeof(*o));
    o->max_tokens = 256;
    o->temperature = 1.0f;
    o->top_p = 1.0f;
    o->seed = 1337;
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

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

// Prints each token as it comes; remembers when the first one came (the prompt's time).
typedef struct {
    const Tokenizer* tok;
    double first_token_at;
} Printer;

static void print_token(int token, void* ctx) {
    Printer* p = (Printer*)ctx;
    if (p->first_token_at == 0.0) p->first_token_at = now_seconds();
    size_t bytes;
    const unsigned char* piece = tokenizer_token(p->tok, token, &bytes);
    if (piece) fwrite(piece, 1, bytes, stdout);
    fflush(stdout);
}

int main(int argc, char** argv) {
    GenerateOptions o;
    parse_args(argc, argv, &o);
    char err[ERR_LEN];

    // Everything that needs no GPU first: the files, the prompt, the lengths.
    Tokenizer* tok = tokenizer_load(o.tokenizer, err);
    if (!tok) die("%s", err);
    FILE* f = fopen_regular_file(o.checkpoint, err);
    if (!f) die("--checkpoint: %s", err);
    int version;
    GPTConfig config = read_model_header(f, o.checkpoint, &version);
    fclose(f);
    if (tokenizer_vocab_size(tok) != config.V)
        die("--tokenizer %s has %d tokens, the model in %s %d", o.tokenizer, tokenizer_vocab_size(tok), o.checkpoint,
            config.V);
    size_t text_len;
    unsigned char* text = prompt_text(o.prompt, &text_len);
    int* prompt = (int*)malloc((text_len + 1 + (size_t)o.max_tokens) * sizeof(int));
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
    static GPT g;
    gpt_build(&g, config, 1, length, &mo, NULL);
    gpt_set_params(&g, values);
    free(values);
    Rng rng = {o.seed};
    Sampler sampler;
    sampler_init(&sampler, config.V, (SamplerSettings){o.temperature, o.top_k, o.top_p});

    fwrite(text, 1, text_len, stdout);
    fflush(stdout);
    Printer printer = {tok, 0.0};
    double t0 = now_seconds();
    int generated = gpt_generate(&g, prompt, n_prompt, length - n_prompt, 0, &sampler, &rng, print_token, &printer);
    double t_all = now_seconds() - t0, t_prompt = printer.first_token_at - t0;
    printf("\n");
    fprintf(stderr, "prompt: %d tokens in %.1f ms; generated %d tokens in %.3f s: %.1f tokens/s%s\n", n_prompt,
            t_prompt * 1e3, generated, t_all - t_prompt, generated > 1 ? (generated - 1) / (t_all - t_prompt) : 0.0,
            n_prompt + o.max_tokens > config.maxT ? " (stopped at the model's context)" : "");
    sampler_free(&sampler);
    free(prompt);
    free(text);
    gpt_free(&g);
    tokenizer_free(tok);
    return 0;
}
