// prepare_data.c: the prepare_data program: text files in, train and val token shards out.
// Each document (an input file, or with --split-blank-lines each paragraph ending in a blank
// line) becomes <|endoftext|> followed by its tokens, as llm.c prepares tinyshakespeare. The
// last documents, about --val-fraction of them, are held out for validation. The tokenizer is
// trained on the training documents or loaded, and saved beside the shards as tokenizer.bin;
// every shard records its fingerprint. The dataset is built in a temporary sibling folder that
// replaces --out-dir in one step once complete, so a failed or interrupted run leaves the old
// dataset as it was, and a new folder only appears finished.
// Input files are mapped, not read into memory, and encoded a piece at a time, so memory stays
// bounded by the shard size.
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/shard.h"
#include "tokenizer/tokenizer.h"
#include "common/atomic_file.h"
#include "common/error.h"
#include "common/temporary.h"

#define PIECE_BYTES (1 << 20)              // text encoded per tokenizer call
#define PROGRESS_MIN_BYTES (64LL << 20)    // inputs at least this large show progress

static void usage(FILE* f) {
    fprintf(f,
        "usage: prepare_data --out-dir DIR (--vocab-size N | --tokenizer FILE |\n"
        "                    --gpt2 ENCODER_JSON VOCAB_BPE) [options] TEXT_FILE...\n"
        "Tokenizes text files into token shards DIR/train_000000.bin ... and DIR/val_000000.bin\n"
        "... (llm.c format). Every document starts with <|endoftext|>; a document is one input\n"
        "file, or with --split-blank-lines one paragraph. The whole dataset is built beside DIR\n"
        "and then replaces it, so a failed or interrupted run leaves DIR as it was; files in DIR\n"
        "that are not the dataset's are kept.\n"
        "  --out-dir DIR          where the shards and the tokenizer used (DIR/tokenizer.bin)\n"
        "                         go; made if missing\n"
        "  --vocab-size N         train a BPE tokenizer of N ids on the training documents\n"
        "  --tokenizer FILE       use a saved tokenizer\n"
        "  --gpt2 JSON BPE        use GPT-2's encoder.json and vocab.bpe\n"
        "  --split-blank-lines    each blank-line-separated paragraph is a document\n"
        "  --val-fraction F       fraction of documents held out, the last ones (default 0.1;\n"
        "                         0: no validation shards)\n"
        "  --shard-tokens N       tokens per shard (default 100000000)\n"
        "  --help                 this text\n"
        "Prints token counts and the unigram baseline: the validation cross-entropy of a unigram\n"
        "model fitted on the training tokens, which a trained model should beat.\n");
}

static long long parse_int(const char* flag, const char* s, long long lo, long long hi) {
    char* end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        die("%s: '%s' is not an integer in %lld..%lld", flag, s, lo, hi);
    }
    return v;
}

typedef struct {
    const char* path;
    const unsigned char* text;
    size_t len;
} InputFile;

// The mapped input being read. A file that shrinks under its mapping raises SIGBUS on the next
// read past its new end; the handler says which file, where a default SIGBUS would say nothing.
static const char* volatile reading;

static void on_sigbus(int sig) {
    static const char a[] = "error: ", b[] = ": the file shrank while it was being read\n";
    const char* path = reading ? reading : "an input file";
    (void)!write(2, a, sizeof a - 1);
    (void)!write(2, path, strlen(path));
    (void)!write(2, b, sizeof b - 1);
    temporary_remove_held();
    _exit(1);
}

static InputFile map_input(const char* path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) die("%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) die("%s: cannot stat: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode)) die("%s: not a regular file", path);
    if (st.st_size == 0) die("%s: empty file", path);
    void* p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) die("%s: cannot map: %s", path, strerror(errno));
    close(fd);
    InputFile f = {path, p, (size_t)st.st_size};
    return f;
}

// Where the line break "\n" or "\r\n" starting at i ends; i when there is none.
static size_t line_break_end(const InputFile* f, size_t i) {
    if (i < f->len && f->text[i] == '\n') return i + 1;
    if (i + 1 < f->len && f->text[i] == '\r' && f->text[i + 1] == '\n') return i + 2;
    return i;
}

// End of the document starting at pos: after the next blank line ("\n\n", or "\n\r\n" in CRLF
// text) and the line breaks right after it when splitting, else the end of the file.
// Concatenating the documents gives the file back.
static size_t document_end(const InputFile* f, size_t pos, int split) {
    if (!split) return f->len;
    for (size_t i = pos; i < f->len; i++) {
        if (f->text[i] != '\n') continue;
        size_t end = line_break_end(f, i + 1);
        if (end == i + 1) continue;   // a line break, but the next line is not blank
        while (line_break_end(f, end) != end) end = line_break_end(f, end);
        return end;
    }
    return f->len;
}

static int ascii_non_space(unsigned char c) { return c < 0x80 && !isspace(c); }

// Where to cut [start, end) for the next encode call: at most PIECE_BYTES, at a line break
// between two ASCII non-space bytes x and y: "x\n|y", or "x\r|\ny" in CRLF text. GPT-2's
// pre-tokenizer splits the whole text there ("\r" and "\n" are pre-tokens of their own), and
// the piece's last pre-token, that lone "\n" or "\r", is the same whether or not more follows,
// so the pieces encode to the same tokens as the whole. (Not after "\r\n": at the end of a piece
// "\r\n" is one pre-token.) Failing that (one enormous line), before a UTF-8 start byte.
static size_t piece_end(const unsigned char* text, size_t start, size_t end) {
    if (end - start <= PIECE_BYTES) return end;
    size_t limit = start + PIECE_BYTES;
    for (size_t p = limit; p > start + 1; p--) {
        if (!ascii_non_space(text[p - 2])) continue;
        if (text[p - 1] == '\n' && ascii_non_space(text[p])) return p;
        if (text[p - 1] == '\r' && text[p] == '\n' && p + 1 < end &&
            ascii_non_space(text[p + 1])) {
            return p;
        }
    }
    size_t p = limit;
    while (p > start + 1 && (text[p] & 0xC0) == 0x80) p--;
    return p;
}

// Tokens collected into shards of shard_tokens, written as each fills up.
typedef struct {
    const char* dir;
    const char* split;   // "train" or "val"
    int vocab_size;
    uint64_t fingerprint;
    int* buf;            // (cap,)
    size_t n, cap;
    int n_shards;
    int64_t n_tokens;
} ShardSink;

static void shard_name(char* out, size_t size, const ShardSink* s, int index) {
    if (snprintf(out, size, "%s/%s_%06d.bin", s->dir, s->split, index) >= (int)size) {
        die("--out-dir %s: path too long", s->dir);
    }
}

static void sink_flush(ShardSink* s) {
    if (s->n == 0) return;
    char path[4096], err[ERR_LEN];
    shard_name(path, sizeof(path), s, s->n_shards);
    if (shard_write_tagged(path, s->buf, s->n, s->vocab_size, s->fingerprint, err) != 0) die("%s", err);
    s->n_shards++;
    s->n = 0;
}

static void sink_push(ShardSink* s, const int* tokens, size_t n) {
    while (n > 0) {
        size_t take = s->cap - s->n < n ? s->cap - s->n : n;
        memcpy(s->buf + s->n, tokens, take * sizeof(int));
        s->n += take;
        s->n_tokens += (int64_t)take;
        tokens += take;
        n -= take;
        if (s->n == s->cap) sink_flush(s);
    }
}

// Appends tokens to a sink while counting train tokens for the unigram baseline, or adding the
// val tokens' negative log-likelihood under it (add-one smoothing); every train token comes
// before the first val token, so the counts are final by then.
static void add_tokens(ShardSink* sink, const ShardSink* train, int64_t* train_counts,
                       double* val_nll, const int* tokens, size_t n) {
    int V = sink->vocab_size;
    for (size_t j = 0; j < n; j++) {
        if (tokens[j] < 0 || tokens[j] >= V) {
            die("the tokenizer produced id %d, outside its vocabulary of %d", tokens[j], V);
        }
        if (sink == train) train_counts[tokens[j]]++;
        else *val_nll -= log((double)(train_counts[tokens[j]] + 1) /
                             (double)(train->n_tokens + V));
    }
    sink_push(sink, tokens, n);
}

// Whether name is one of a dataset's files, or a temporary left while writing one.
static int dataset_file(const char* name) {
    return !fnmatch("tokenizer.bin*", name, 0) || !fnmatch("train_*.bin*", name, 0) ||
           !fnmatch("val_*.bin*", name, 0);
}

// The files in the existing out_dir that are not the dataset's move on with it: linked into the
// new folder (link = 1), or only checked for that, before the long work (link = 0). A folder in
// it is refused: it would be lost with the old dataset.
static void keep_other_files(const char* out_dir, const char* new_dir, int link_them) {
    DIR* d = opendir(out_dir);
    if (!d) return;   // a new dataset
    struct dirent* e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || dataset_file(e->d_name)) {
            continue;
        }
        char from[4096], to[4096];
        snprintf(from, sizeof from, "%s/%s", out_dir, e->d_name);
        snprintf(to, sizeof to, "%s/%s", new_dir, e->d_name);
        struct stat st;
        if (lstat(from, &st) != 0 || S_ISDIR(st.st_mode)) {
            die("--out-dir %s holds the folder %s, which replacing the dataset would remove; "
                "give the dataset a folder of its own", out_dir, e->d_name);
        }
        if (link_them && link(from, to) != 0) {
            die("--out-dir %s: cannot keep %s in the new dataset: %s", out_dir, e->d_name,
                strerror(errno));
        }
    }
    closedir(d);
}

static void save_tokenizer(const Tokenizer* tok, const char* dir) {
    char path[4096], err[ERR_LEN];
    if (snprintf(path, sizeof(path), "%s/tokenizer.bin", dir) >= (int)sizeof(path)) {
        die("--out-dir %s: path too long", dir);
    }
    if (tokenizer_save(tok, path, err) != 0) die("%s", err);
}

// Trains on the training documents only: a prefix of the concatenated inputs.
static Tokenizer* train_tokenizer(const InputFile* files, int n_inputs, int64_t n_train_docs,
                                  int split, int vocab_size) {
    size_t total = 0;
    for (int i = 0; i < n_inputs; i++) total += files[i].len;
    unsigned char* text = malloc(total);
    if (!text) die("out of memory for %zu bytes of training text", total);
    size_t len = 0;
    int64_t doc = 0;
    for (int i = 0; i < n_inputs && doc < n_train_docs; i++) {
        size_t pos = 0;
        reading = files[i].path;
        while (pos < files[i].len && doc < n_train_docs) {
            pos = document_end(&files[i], pos, split);
            doc++;
        }
        memcpy(text + len, files[i].text, pos);
        len += pos;
    }
    fprintf(stderr, "prepare_data: training a tokenizer of %d ids on %zu bytes\n", vocab_size,
            len);
    Tokenizer* tok = tokenizer_train(text, len, vocab_size, 1);
    free(text);
    if (!tok) die("training a tokenizer of %d ids failed", vocab_size);
    return tok;
}

int main(int argc, char** argv) {
    const char* out_dir = NULL;
    const char* tokenizer_path = NULL;
    const char* gpt2_json = NULL;
    const char* gpt2_bpe = NULL;
    int vocab_size = 0, split = 0;
    double val_fraction = 0.1;
    long long shard_tokens = 100000000;
    const char** inputs = malloc((size_t)argc * sizeof(char*));
    int n_inputs = 0;
    for (int i = 1; i < argc; i++) {
        const char* a = argv[i];
        int values = !strcmp(a, "--gpt2") ? 2
                   : (!strcmp(a, "--out-dir") || !strcmp(a, "--vocab-size") ||
                      !strcmp(a, "--tokenizer") || !strcmp(a, "--val-fraction") ||
                      !strcmp(a, "--shard-tokens")) ? 1 : 0;
        if (i + values >= argc) die("%s needs %d value(s); see --help", a, values);
        for (int k = 1; k <= values; k++) {
            if (!strncmp(argv[i + k], "--", 2)) {
                die("%s: expected a value, got the flag %s", a, argv[i + k]);
            }
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        else if (!strcmp(a, "--out-dir")) out_dir = argv[++i];
        else if (!strcmp(a, "--vocab-size")) {
            vocab_size = (int)parse_int(a, argv[++i], 257, TOKENIZER_MAX_VOCAB);
        } else if (!strcmp(a, "--tokenizer")) tokenizer_path = argv[++i];
        else if (!strcmp(a, "--gpt2")) { gpt2_json = argv[++i]; gpt2_bpe = argv[++i]; }
        else if (!strcmp(a, "--split-blank-lines")) split = 1;
        else if (!strcmp(a, "--val-fraction")) {
            char* end;
            const char* s = argv[++i];
            val_fraction = strtod(s, &end);
            if (end == s || *end || !(val_fraction >= 0 && val_fraction < 1)) {
                die("--val-fraction: '%s' is not a number in [0, 1)", s);
            }
        } else if (!strcmp(a, "--shard-tokens")) {
            shard_tokens = parse_int(a, argv[++i], 1, INT32_MAX);
        } else if (a[0] == '-' && a[1]) die("unknown flag %s; see --help", a);
        else inputs[n_inputs++] = a;
    }
    if (!out_dir) die("--out-dir is required; see --help");
    if (!*out_dir) die("--out-dir: empty path");
    if ((vocab_size > 0) + (tokenizer_path != NULL) + (gpt2_json != NULL) != 1) {
        die("give exactly one of --vocab-size, --tokenizer, --gpt2; see --help");
    }
    if (n_inputs == 0) die("no input text file; see --help");
    signal(SIGBUS, on_sigbus);

    InputFile* files = malloc((size_t)n_inputs * sizeof(InputFile));
    int64_t n_docs = 0, total_bytes = 0;
    for (int i = 0; i < n_inputs; i++) {
        files[i] = map_input(inputs[i]);
        reading = inputs[i];
        total_bytes += (int64_t)files[i].len;
        for (size_t pos = 0; pos < files[i].len; n_docs++) {
            pos = document_end(&files[i], pos, split);
        }
    }
    // The last n_val documents are held out.
    int64_t n_val = (int64_t)llround(val_fraction * (double)n_docs);
    if (val_fraction > 0 && n_val == 0) n_val = 1;
    if (n_val >= n_docs) {
        die("--val-fraction %g: %lld document(s) are too few to hold some out (%sgive more files, "
            "or use --val-fraction 0)", val_fraction, (long long)n_docs,
            split ? "" : "split them with --split-blank-lines, ");
    }
    int64_t n_train_docs = n_docs - n_val;
    // The output checks come before training, which can take long.
    char err[ERR_LEN], new_dir[4096];
    keep_other_files(out_dir, NULL, 0);
    if (atomic_dir_open(out_dir, new_dir, sizeof new_dir, err) != 0) die("--out-dir %s", err);

    Tokenizer* tok;
    if (vocab_size > 0) tok = train_tokenizer(files, n_inputs, n_train_docs, split, vocab_size);
    else if (tokenizer_path) tok = tokenizer_load(tokenizer_path, err);
    else tok = tokenizer_load_gpt2(gpt2_json, gpt2_bpe, err);
    if (!tok) die("%s", err);
    save_tokenizer(tok, new_dir);
    int V = tokenizer_vocab_size(tok), eot = tokenizer_eot(tok);
    uint64_t fingerprint = tokenizer_fingerprint(tok);

    ShardSink train = {new_dir, "train", V, fingerprint, NULL, 0, (size_t)shard_tokens, 0, 0};
    ShardSink val = {new_dir, "val", V, fingerprint, NULL, 0, (size_t)shard_tokens, 0, 0};
    train.buf = malloc((size_t)shard_tokens * sizeof(int));
    val.buf = malloc((size_t)shard_tokens * sizeof(int));
    int* piece_tokens = malloc(PIECE_BYTES * sizeof(int));
    int64_t* train_counts = calloc((size_t)V, sizeof(int64_t));
    if (!train.buf || !val.buf || !piece_tokens || !train_counts) {
        die("out of memory for shards of %lld tokens (--shard-tokens)", shard_tokens);
    }
    double val_nll = 0;

    int show_progress = total_bytes >= PROGRESS_MIN_BYTES;
    int64_t done_bytes = 0, doc = 0;
    int last_percent = -1;
    for (int i = 0; i < n_inputs; i++) {
        const InputFile* f = &files[i];
        reading = f->path;
        for (size_t pos = 0; pos < f->len; doc++) {
            size_t end = document_end(f, pos, split);
            ShardSink* sink = doc < n_train_docs ? &train : &val;
            add_tokens(sink, &train, train_counts, &val_nll, &eot, 1);
            for (size_t p = pos; p < end;) {
                size_t q = piece_end(f->text, p, end);
                size_t n = tokenizer_encode(tok, f->text + p, q - p, piece_tokens);
                add_tokens(sink, &train, train_counts, &val_nll, piece_tokens, n);
                p = q;
            }
            done_bytes += (int64_t)(end - pos);
            pos = end;
            int percent = (int)(100 * done_bytes / total_bytes);
            if (show_progress && percent != last_percent) {
                fprintf(stderr, "\rprepare_data: encoded %d%% of %lld MB, %lld tokens", percent,
                        (long long)(total_bytes >> 20),
                        (long long)(train.n_tokens + val.n_tokens));
                last_percent = percent;
            }
        }
    }
    if (show_progress) fprintf(stderr, "\n");
    sink_flush(&train);
    sink_flush(&val);
    keep_other_files(out_dir, new_dir, 1);
    if (atomic_dir_close(new_dir, out_dir, 1, err) != 0) die("--out-dir %s", err);
    fprintf(stderr, "prepare_data: wrote %s/tokenizer.bin and the shards\n", out_dir);

    printf("documents: %lld train, %lld val (%s)\n", (long long)n_train_docs, (long long)n_val,
           split ? "paragraphs" : "files");
    printf("vocabulary: %d ids, <|endoftext|> = %d\n", V, eot);
    printf("train: %lld tokens in %d shard(s) %s/train_*.bin\n", (long long)train.n_tokens,
           train.n_shards, out_dir);
    printf("val: %lld tokens in %d shard(s) %s/val_*.bin\n", (long long)val.n_tokens,
           val.n_shards, out_dir);
    printf("bytes per token: %.3f\n",
           (double)total_bytes / (double)(train.n_tokens + val.n_tokens));
    if (val.n_tokens > 0) {
        printf("unigram baseline (add-one, fitted on train): val cross-entropy %.4f nats/token\n",
               val_nll / (double)val.n_tokens);
    }
    tokenizer_free(tok);
    for (int i = 0; i < n_inputs; i++) munmap((void*)files[i].text, files[i].len);
    free(files);
    free(inputs);
    free(train.buf);
    free(val.buf);
    free(piece_tokens);
    free(train_counts);
    return 0;
}
