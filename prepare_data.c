// prepare_data.c: the prepare_data program: text files in, train and val token shards out.
// Each document (an input file, or with --split-blank-lines each paragraph ending in a blank
// line) becomes <|endoftext|> followed by its tokens, as llm.c prepares tinyshakespeare. The
// last documents, about --val-fraction of them, are held out for validation. The tokenizer is
// trained on the training documents or loaded, and saved beside the shards as tokenizer.bin;
// every shard records its fingerprint. The dataset is built in a temporary sibling folder that
// replaces --out-dir in one step once complete, so a failed or interrupted run leaves the old
// dataset as it was, and a new folder only appears finished. Of the old folder only the files a
// dataset has go; everything that could stop the replacement is found before the long work.
// Input files are mapped, not read into memory, and encoded a piece at a time, so memory stays
// bounded by the shard size.
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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
        "other than tokenizer.bin, train_NNNNNN.bin and val_NNNNNN.bin are kept.\n"
        "  --out-dir DIR          where the shards and the tokenizer used (DIR/tokenizer.bin)\n"
        "                         go; made if missing; not a mount point nor the current folder\n"
        "                         (neither can be replaced: give a folder inside it)\n"
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

// Dies unless st, the stat of the input path, is of a non-empty regular file.
static void require_text_file(const char* path, const struct stat* st) {
    if (S_ISDIR(st->st_mode)) die("%s: is a directory", path);
    if (!S_ISREG(st->st_mode)) die("%s: not a regular file", path);
    if (st->st_size == 0) die("%s: empty file", path);
}

// Checks the input by its stat, before anything opens it: opening a FIFO would wait for a
// writer.
static void check_input(const char* path) {
    struct stat st;
    if (stat(path, &st) != 0) die("%s: cannot read: %s", path, strerror(errno));
    require_text_file(path, &st);
}

static InputFile map_input(const char* path) {
    // Non-blocking: should a FIFO have taken the file's place since check_input, open returns
    // at once and fstat refuses it.
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) die("%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) die("%s: cannot stat: %s", path, strerror(errno));
    require_text_file(path, &st);
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

#define SHARD_NAME "%s_%06d.bin"   // split, index

static void shard_name(char* out, size_t size, const ShardSink* s, int index) {
    if (snprintf(out, size, "%s/" SHARD_NAME, s->dir, s->split, index) >= (int)size) {
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

// Whether name is exactly the name of one of a dataset's files, as this program writes them.
static int dataset_file(const char* name) {
    if (!strcmp(name, "tokenizer.bin")) return 1;
    const char* split = !strncmp(name, "train_", 6) ? "train" : !strncmp(name, "val_", 4) ? "val"
                      : NULL;
    if (!split) return 0;
    const char* digits = name + strlen(split) + 1;
    if (*digits < '0' || *digits > '9') return 0;
    long index = strtol(digits, NULL, 10);
    char expected[64];
    if (index > INT32_MAX) return 0;
    snprintf(expected, sizeof expected, SHARD_NAME, split, (int)index);
    return !strcmp(name, expected);
}

static void entry_path(char* out, size_t size, const char* dir, const char* name) {
    if (snprintf(out, size, "%s/%s", dir, name) >= (int)size) {
        die("%s/%s: path too long", dir, name);
    }
}

// Whether the entry name of out_dir goes with the old dataset (1) or moves on to the new one
// (0). Dies on one that the replacement would lose: a folder (only files move on), or under a
// dataset file's name something other than a file (this program writes only files).
static int replaced(const char* out_dir, const char* name, struct stat* st) {
    char path[4096];
    entry_path(path, sizeof path, out_dir, name);
    if (lstat(path, st) != 0) {
        die("--out-dir %s: cannot look at %s: %s", out_dir, name, strerror(errno));
    }
    if (S_ISDIR(st->st_mode)) {
        die("--out-dir %s holds the folder %s, which replacing the dataset would remove; "
            "give the dataset a folder of its own", out_dir, name);
    }
    if (!dataset_file(name)) return 0;
    if (!S_ISREG(st->st_mode)) {
        die("--out-dir %s: %s is not a regular file, so not this program's, and replacing the "
            "dataset would remove it; move it out first", out_dir, name);
    }
    return 1;
}

// Checks, before the long work, that replacing out_dir loses nothing: no folder, no unknown
// entry under a dataset file's name, and none of the inputs among the files that go.
// (--tokenizer DIR/tokenizer.bin may go: the new dataset's tokenizer.bin has the same bytes.)
static void check_replacement(const char* out_dir, const char* const* inputs, int n_inputs) {
    DIR* d = opendir(out_dir);
    if (!d) return;   // a new dataset
    struct stat* input_st = calloc((size_t)n_inputs, sizeof(struct stat));
    if (!input_st) die("out of memory");
    for (int i = 0; i < n_inputs; i++) stat(inputs[i], &input_st[i]);   // st_ino 0: none
    struct dirent* e;
    while ((e = readdir(d))) {
        struct stat st;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
            !replaced(out_dir, e->d_name, &st)) {
            continue;
        }
        for (int i = 0; i < n_inputs; i++) {
            if (input_st[i].st_ino == st.st_ino && input_st[i].st_dev == st.st_dev) {
                die("%s: an input, but also the dataset's file %s in --out-dir %s, which the "
                    "new dataset replaces; move it out of --out-dir first", inputs[i], e->d_name,
                    out_dir);
            }
        }
    }
    closedir(d);
    free(input_st);
}

// The files in the existing out_dir that are not the dataset's move on with it: linked into the
// new folder. With trial, each link is made and removed at once: done before the long work, it
// finds a file the kernel will not link (another's file under fs.protected_hardlinks, one
// mounted on) then, rather than after it.
static void keep_other_files(const char* out_dir, const char* new_dir, int trial) {
    DIR* d = opendir(out_dir);
    if (!d) return;   // a new dataset
    struct dirent* e;
    while ((e = readdir(d))) {
        struct stat st;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
            replaced(out_dir, e->d_name, &st)) {
            continue;
        }
        char from[4096], to[4096];
        entry_path(from, sizeof from, out_dir, e->d_name);
        entry_path(to, sizeof to, new_dir, e->d_name);
        if (link(from, to) != 0) {
            die("--out-dir %s: cannot keep %s in the new dataset: %s", out_dir, e->d_name,
                strerror(errno));
        }
        if (trial && unlink(to) != 0) die("%s: cannot remove: %s", to, strerror(errno));
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

// The value of flag, a file's or folder's name: refused when empty.
static char* path_value(const char* flag, char* value) {
    if (!*value) die("%s: empty path", flag);
    return value;
}

int main(int argc, char** argv) {
    char* out_dir = NULL;
    const char* tokenizer_path = NULL;
    const char* gpt2_json = NULL;
    const char* gpt2_bpe = NULL;
    int vocab_size = 0, split = 0;
    double val_fraction = 0.1;
    long long shard_tokens = 100000000;
    const char** inputs = malloc((size_t)(argc + 2) * sizeof(char*));   // the --gpt2 files too
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
        else if (!strcmp(a, "--out-dir")) out_dir = path_value(a, argv[++i]);
        else if (!strcmp(a, "--vocab-size")) {
            vocab_size = (int)parse_int(a, argv[++i], 257, TOKENIZER_MAX_VOCAB);
        } else if (!strcmp(a, "--tokenizer")) tokenizer_path = path_value(a, argv[++i]);
        else if (!strcmp(a, "--gpt2")) {
            gpt2_json = path_value(a, argv[++i]);
            gpt2_bpe = path_value(a, argv[++i]);
        }
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
        else if (!*a) die("an input file's name is empty");
        else inputs[n_inputs++] = a;
    }
    if (!out_dir) die("--out-dir is required; see --help");
    if ((vocab_size > 0) + (tokenizer_path != NULL) + (gpt2_json != NULL) != 1) {
        die("give exactly one of --vocab-size, --tokenizer, --gpt2; see --help");
    }
    if (n_inputs == 0) die("no input text file; see --help");
    // "DIR/" is DIR, in the messages too.
    for (size_t n = strlen(out_dir); n > 1 && out_dir[n - 1] == '/'; n--) out_dir[n - 1] = 0;
    signal(SIGBUS, on_sigbus);

    // Every check of the inputs and the output comes before the long work (reading the inputs
    // through, training) and before any folder is made, but one: that the old folder's other
    // files can be kept is tried once the new folder is made, still before the training.
    for (int i = 0; i < n_inputs; i++) check_input(inputs[i]);
    char err[ERR_LEN], new_dir[4096];
    if (atomic_dir_check(out_dir, err) != 0) die("--out-dir %s", err);
    if (gpt2_json) {
        inputs[n_inputs] = gpt2_json;
        inputs[n_inputs + 1] = gpt2_bpe;
    }
    check_replacement(out_dir, inputs, n_inputs + (gpt2_json ? 2 : 0));

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

    // A saved tokenizer is loaded before the new folder is made, a new one trained after.
    Tokenizer* tok = NULL;
    if (tokenizer_path) tok = tokenizer_load(tokenizer_path, err);
    else if (gpt2_json) tok = tokenizer_load_gpt2(gpt2_json, gpt2_bpe, err);
    if (!tok && vocab_size == 0) die("%s", err);
    if (atomic_dir_open(out_dir, new_dir, sizeof new_dir, err) != 0) die("--out-dir %s", err);
    keep_other_files(out_dir, new_dir, 1);
    if (!tok) tok = train_tokenizer(files, n_inputs, n_train_docs, split, vocab_size);
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
    keep_other_files(out_dir, new_dir, 0);
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
