// bpe.c: the `bpe` program: train a tokenizer on a text file, encode a text file
// into a token shard (data/shard.h), decode a shard back to text on stdout.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "data/shard.h"
#include "tokenizer/tokenizer.h"
#include "common/atomic_file.h"
#include "common/read_file.h"

static const char* usage =
    "usage: bpe train --input FILE --vocab-size N --out TOK\n"
    "       bpe encode (--tokenizer TOK | --gpt2 ENCODER_JSON VOCAB_BPE) --input FILE --out SHARD\n"
    "       bpe decode (--tokenizer TOK | --gpt2 ENCODER_JSON VOCAB_BPE) --input SHARD\n"
    "\n"
    "train   learns a byte-level BPE vocabulary of N ids (256 bytes, N - 257 merges and\n"
    "        <|endoftext|>) on FILE and writes it to TOK; fewer ids if FILE runs out of pairs\n"
    "encode  writes the tokens of FILE (exactly its bytes, no <|endoftext|> added) to SHARD,\n"
    "        with a tokenizer file or with GPT-2's encoder.json and vocab.bpe\n"
    "decode  writes the text of the tokens in SHARD to stdout\n"
    "\n"
    "Shards record the tokenizer that made them; decode refuses one made by another.\n"
    "An output may not be one of the inputs; --out /dev/stdout writes to standard output.\n";

typedef struct {
    const char* input;
    const char* out;
    const char* vocab_size;
    const char* tokenizer;
    const char* gpt2_json;
    const char* gpt2_bpe;
} Args;

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

// Flags of one command; allowed lists the flags it takes, e.g. "--input --out".
static Args parse_args(const char* cmd, int argc, char** argv, const char* allowed) {
    Args a = {0};
    for (int i = 2; i < argc; i++) {
        const char* flag = argv[i];
        const char** slot = !strcmp(flag, "--input") ? &a.input : !strcmp(flag, "--out") ? &a.out :
                            !strcmp(flag, "--vocab-size") ? &a.vocab_size :
                            !strcmp(flag, "--tokenizer") ? &a.tokenizer :
                            !strcmp(flag, "--gpt2") ? &a.gpt2_json : NULL;
        const char* at = slot ? strstr(allowed, flag) : NULL;
        size_t fl = strlen(flag);
        if (!at || (at[fl] != ' ' && at[fl] != 0)) die("bpe %s: unknown flag '%s' (see bpe --help)", cmd, flag);
        if (*slot) die("bpe %s: %s given twice", cmd, flag);
        int n_values = slot == &a.gpt2_json ? 2 : 1;
        const char* needs = n_values == 2 ? "two files" : "a value";
        if (i + n_values >= argc) die("bpe %s: %s needs %s", cmd, flag, needs);
        for (int k = 1; k <= n_values; k++) {
            if (!strncmp(argv[i + k], "--", 2)) die("bpe %s: %s needs %s, not the flag '%s'", cmd, flag, needs, argv[i + k]);
            if (!*argv[i + k] && slot != &a.vocab_size) die("bpe %s: %s '': empty path", cmd, flag);
        }
        *slot = argv[++i];
        if (n_values == 2) a.gpt2_bpe = argv[++i];
    }
    return a;
}

static void require(const char* cmd, const char* value, const char* flag) {
    if (!value) die("bpe %s: %s is required (see bpe --help)", cmd, flag);
}

// Refuses --out when it is the same file as an input: writing it would destroy the input.
static void refuse_same(const char* cmd, const char* out, const char* input, const char* flag) {
    struct stat a, b;
    if (input && stat(out, &a) == 0 && stat(input, &b) == 0 && a.st_dev == b.st_dev &&
        a.st_ino == b.st_ino) {
        die("bpe %s: --out %s is the same file as %s %s", cmd, out, flag, input);
    }
}

// Refuses an --out that cannot be written, before the work rather than after it.
static void check_out(const char* cmd, const char* out) {
    char err[ERR_LEN];
    if (atomic_check(out, err) != 0) die("bpe %s: --out %s", cmd, err);
}

static Tokenizer* load_tokenizer(const char* cmd, const Args* a) {
    if (!a->tokenizer == !a->gpt2_json) die("bpe %s: give either --tokenizer or --gpt2 (see bpe --help)", cmd);
    char err[ERR_LEN];
    Tokenizer* t = a->tokenizer ? tokenizer_load(a->tokenizer, err)
                                : tokenizer_load_gpt2(a->gpt2_json, a->gpt2_bpe, err);
    if (!t) die("bpe %s: %s", cmd, err);
    return t;
}

static int train(int argc, char** argv) {
    Args a = parse_args("train", argc, argv, "--input --vocab-size --out");
    require("train", a.input, "--input");
    require("train", a.vocab_size, "--vocab-size");
    require("train", a.out, "--out");
    char* end;
    long vocab_size = strtol(a.vocab_size, &end, 10);
    if (*a.vocab_size == 0 || *end || vocab_size < 257 || vocab_size > TOKENIZER_MAX_VOCAB)
        die("bpe train: --vocab-size '%s' is not an integer in [257, %d]", a.vocab_size, TOKENIZER_MAX_VOCAB);
    refuse_same("train", a.out, a.input, "--input");
    check_out("train", a.out);
    char err[ERR_LEN];
    size_t len;
    unsigned char* text = read_file(a.input, &len, err);
    if (!text) die("bpe train: %s", err);
    double t0 = seconds();
    Tokenizer* t = tokenizer_train(text, len, (int)vocab_size, 1);
    if (!t) die("bpe train: out of memory training on %s", a.input);
    fprintf(stderr, "bpe train: %d ids learned from %zu bytes in %.2f s\n", tokenizer_vocab_size(t), len,
            seconds() - t0);
    if (tokenizer_save(t, a.out, err)) die("bpe train: %s", err);
    tokenizer_free(t);
    free(text);
    return 0;
}

static int encode(int argc, char** argv) {
    Args a = parse_args("encode", argc, argv, "--tokenizer --gpt2 --input --out");
    require("encode", a.input, "--input");
    require("encode", a.out, "--out");
    refuse_same("encode", a.out, a.input, "--input");
    refuse_same("encode", a.out, a.tokenizer, "--tokenizer");
    refuse_same("encode", a.out, a.gpt2_json, "--gpt2");
    refuse_same("encode", a.out, a.gpt2_bpe, "--gpt2");
    check_out("encode", a.out);
    Tokenizer* t = load_tokenizer("encode", &a);
    char err[ERR_LEN];
    size_t len;
    unsigned char* text = read_file(a.input, &len, err);
    if (!text) die("bpe encode: %s", err);
    int* ids = malloc((len ? len : 1) * sizeof(int));
    if (!ids) die("bpe encode: out of memory for the tokens of %s", a.input);
    double t0 = seconds();
    size_t n = tokenizer_encode(t, text, len, ids);
    double dt = seconds() - t0;
    if (shard_write_tagged(a.out, ids, n, tokenizer_vocab_size(t), tokenizer_fingerprint(t), err)) {
        die("bpe encode: %s", err);
    }
    fprintf(stderr, "bpe encode: %zu bytes -> %zu tokens (%.2f bytes/token) in %.2f s -> %s\n", len, n,
            n ? (double)len / n : 0.0, dt, a.out);
    free(ids);
    free(text);
    tokenizer_free(t);
    return 0;
}

static int decode(int argc, char** argv) {
    Args a = parse_args("decode", argc, argv, "--tokenizer --gpt2 --input");
    require("decode", a.input, "--input");
    Tokenizer* t = load_tokenizer("decode", &a);
    char err[ERR_LEN];
    size_t n;
    int* ids = shard_read(a.input, &n, tokenizer_vocab_size(t), tokenizer_fingerprint(t), err);
    if (!ids) die("bpe decode: %s", err);
    size_t len = tokenizer_decode(t, ids, n, NULL);
    unsigned char* text = malloc(len ? len : 1);
    if (!text) die("bpe decode: out of memory for the text of %s", a.input);
    tokenizer_decode(t, ids, n, text);
    if (fwrite(text, 1, len, stdout) != len || fflush(stdout) != 0) die("bpe decode: cannot write stdout");
    free(text);
    free(ids);
    tokenizer_free(t);
    return 0;
}

int main(int argc, char** argv) {
    if (argc < 2) die("bpe: no command (see bpe --help)");
    const char* cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        fputs(usage, stdout);
        return 0;
    }
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            return 0;
        }
    }
    if (!strcmp(cmd, "train")) return train(argc, argv);
    if (!strcmp(cmd, "encode")) return encode(argc, argv);
    if (!strcmp(cmd, "decode")) return decode(argc, argv);
    die("bpe: unknown command '%s' (see bpe --help)", cmd);
    return 1;
}
