// tests/unit/data/test_data.c: token shards and the data loader (CPU).
// Shards are written into FLASHGPT_TMP by the test itself. The loader cases use shards whose
// token at stream position p is p itself, so every batch row tells exactly which tokens it holds;
// those of rows aligned to documents, shards whose documents each start with a document token,
// the other tokens again their positions.
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/read_file.h"
#include "data/dataloader.h"
#include "data/shard.h"
#include "tests/lib/test.h"
#include "tokenizer/tokenizer.h"

static const char* tmp_dir;

static const char* tmp_path(const char* name) {
    static char paths[8][1024];
    static int next = 0;
    char* p = paths[next++ % 8];
    snprintf(p, 1024, "%s/%s", tmp_dir, name);
    return p;
}

static uint64_t rng_state = 12345;
static uint32_t rng_next(void) {   // xorshift64*
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545F4914F6CDD1DULL) >> 32);
}

// A shard file with any header and any payload, for llm.c files and corrupt ones.
static void write_raw_shard(const char* path, int magic, int version, int count, int vocab,
                            const void* data, size_t bytes) {
    int32_t header[SHARD_HEADER_INTS] = {magic, version, count, vocab};
    FILE* f = fopen(path, "wb");
    if (!f) { fprintf(stderr, "cannot write %s\n", path); exit(1); }
    fwrite(header, sizeof(header), 1, f);
    if (bytes) fwrite(data, 1, bytes, f);
    fclose(f);
}

static void read_header(const char* path, int32_t* header) {
    memset(header, 0, SHARD_HEADER_INTS * sizeof(int32_t));
    FILE* f = fopen(path, "rb");
    if (!f) return;
    if (fread(header, sizeof(int32_t), SHARD_HEADER_INTS, f) != SHARD_HEADER_INTS) header[0] = 0;
    fclose(f);
}

static void test_round_trip(const char* name, int vocab, int version) {
    test_begin(name);
    char err[ERR_LEN] = "";
    size_t n = 10007;
    int* tokens = malloc(n * sizeof(int));
    for (size_t i = 0; i < n; i++) tokens[i] = (int)(rng_next() % (uint32_t)vocab);
    tokens[0] = 0;
    tokens[1] = vocab - 1;
    const char* path = tmp_path("round_trip.bin");
    CHECK(shard_write(path, tokens, n, vocab, err) == 0, "write: %s", err);
    int32_t header[SHARD_HEADER_INTS];
    read_header(path, header);
    CHECK(header[0] == SHARD_MAGIC && header[1] == version && header[2] == (int)n &&
          header[3] == vocab, "header %d %d %d %d", header[0], header[1], header[2], header[3]);
    struct stat st;
    size_t tb = version == SHARD_VERSION_U16 ? 2 : 4;
    CHECK(stat(path, &st) == 0 && (size_t)st.st_size == SHARD_HEADER_INTS * 4 + n * tb,
          "file size %lld", (long long)st.st_size);
    size_t m = 0;
    int* back = shard_read(path, &m, vocab, 0, err);
    CHECK(back != NULL, "read: %s", err);
    if (back) {
        CHECK(m == n, "read %zu tokens, wrote %zu", m, n);
        CHECK(m == n && memcmp(back, tokens, n * sizeof(int)) == 0, "tokens differ");
        free(back);
    }
    // No id check asked for: the same tokens.
    back = shard_read(path, &m, 0, 0, err);
    CHECK(back && m == n && memcmp(back, tokens, n * sizeof(int)) == 0, "read without vocab");
    free(back);
    free(tokens);
    test_end();
}

static void test_write_rules(void) {
    test_begin("shard_write_rules");
    char err[ERR_LEN] = "";
    // 65 536 ids still fit uint16.
    int top[2] = {65535, 7};
    const char* path = tmp_path("u16_top.bin");
    CHECK(shard_write(path, top, 2, 65536, err) == 0, "write: %s", err);
    int32_t header[SHARD_HEADER_INTS];
    read_header(path, header);
    CHECK(header[1] == SHARD_VERSION_U16, "version %d for 65536 ids", header[1]);
    size_t m = 0;
    int* back = shard_read(path, &m, 65536, 0, err);
    CHECK(back && m == 2 && back[0] == 65535 && back[1] == 7, "65535 did not survive: %s", err);
    free(back);
    // An id outside the vocabulary is refused and nothing is written.
    const char* bad = tmp_path("refused.bin");
    err[0] = 0;
    int ids[3] = {1, 2, 300};
    CHECK(shard_write(bad, ids, 3, 300, err) != 0, "id 300 of vocabulary 300 accepted");
    CHECK(strstr(err, bad) && strstr(err, "300"), "error does not name file and id: %s", err);
    struct stat st;
    CHECK(stat(bad, &st) != 0, "a refused shard left a file");
    // An empty shard is valid.
    const char* empty = tmp_path("empty.bin");
    CHECK(shard_write(empty, ids, 0, 300, err) == 0, "empty write: %s", err);
    back = shard_read(empty, &m, 300, 0, err);
    CHECK(back && m == 0, "empty read: %s", err);
    free(back);
    test_end();
}

// llm.c writes 0 where this project writes the vocabulary size.
static void test_llmc_header(void) {
    test_begin("shard_llmc_header_loads");
    char err[ERR_LEN] = "";
    uint16_t data[300];
    for (int i = 0; i < 300; i++) data[i] = (uint16_t)(i * 7 % 50257);
    const char* path = tmp_path("llmc_000000.bin");
    write_raw_shard(path, SHARD_MAGIC, 1, 300, 0, data, sizeof(data));
    size_t m = 0;
    int* back = shard_read(path, &m, 50257, 0, err);
    CHECK(back && m == 300, "read: %s", err);
    for (int i = 0; back && i < 300; i++) {
        if (back[i] != data[i]) { CHECK(0, "token %d: %d != %d", i, back[i], data[i]); break; }
    }
    free(back);
    DataLoader* dl = dataloader_open(path, 2, 8, 0, 1, 0, 0, 50257, err);
    CHECK(dl != NULL, "loader: %s", err);
    if (dl) {
        int in[16], tg[16];
        CHECK(dataloader_next(dl, in, tg, err) == 0, "next: %s", err);
        CHECK(in[0] == data[0] && tg[0] == data[1] && in[8] == data[8] && tg[15] == data[16],
              "first batch does not match the file");
        dataloader_close(dl);
    }
    test_end();
}

// Shards of the stream 0, 1, 2, ... with uneven sizes (one empty, one shorter than T) and both
// token widths. Returns the stream length.
static const int stream_shard_sizes[] = {1000, 0, 37, 2501, 5};
static int64_t write_stream_shards(void) {
    char err[ERR_LEN];
    int n_shards = (int)(sizeof(stream_shard_sizes) / sizeof(int));
    int64_t pos = 0;
    for (int s = 0; s < n_shards; s++) {
        int n = stream_shard_sizes[s];
        int* t = malloc((size_t)(n + 1) * sizeof(int));
        for (int i = 0; i < n; i++) t[i] = (int)(pos + i);
        char name[64];
        snprintf(name, sizeof(name), "stream_%06d.bin", s);
        // Even shards uint16, odd ones uint32.
        if (shard_write(tmp_path(name), t, (size_t)n, s % 2 ? 100000 : 4000, err) != 0) {
            fprintf(stderr, "%s\n", err);
            exit(1);
        }
        free(t);
        pos += n;
    }
    return pos;
}
#define STREAM_PATTERN "stream_*.bin"
#define STREAM_VOCAB 100000

// Reads one epoch on every rank; checks each row is a T+1 window of the stream starting at a
// multiple of T, and counts how often each target appears. Returns 0 when something broke.
static int read_epoch(DataLoader** dls, int R, int B, int T, int64_t n_tokens, int* covered) {
    char err[ERR_LEN] = "";
    int* in = malloc((size_t)B * T * sizeof(int));
    int* tg = malloc((size_t)B * T * sizeof(int));
    int ok = 1;
    int64_t nb = dataloader_batches_per_epoch(dls[0]);
    for (int64_t k = 0; ok && k < nb; k++) {
        for (int r = 0; ok && r < R; r++) {
            if (dataloader_next(dls[r], in, tg, err) != 0) {
                CHECK(0, "rank %d batch %lld: %s", r, (long long)k, err);
                ok = 0;
                break;
            }
            for (int b = 0; ok && b < B; b++) {
                int start = in[b * T];
                if (start % T != 0 || start + T >= n_tokens) {
                    CHECK(0, "rank %d batch %lld row %d starts at %d", r, (long long)k, b, start);
                    ok = 0;
                }
                for (int j = 0; ok && j < T; j++) {
                    if (in[b * T + j] != start + j || tg[b * T + j] != start + j + 1) {
                        CHECK(0, "rank %d batch %lld row %d is not a window", r, (long long)k, b);
                        ok = 0;
                    }
                    if (ok) covered[start + j + 1]++;
                }
            }
        }
    }
    free(in);
    free(tg);
    return ok;
}

static void test_coverage(int shuffle) {
    test_begin(shuffle ? "loader_ranks_cover_targets_once_shuffled"
                       : "loader_ranks_cover_targets_once");
    char err[ERR_LEN] = "";
    int64_t N = write_stream_shards();
    int B = 3, T = 16;
    int* covered = calloc((size_t)N, sizeof(int));
    for (int R = 1; R <= 4; R++) {
        DataLoader* dls[4] = {0};
        int opened = 1;
        for (int r = 0; r < R; r++) {
            dls[r] = dataloader_open(tmp_path(STREAM_PATTERN), B, T, r, R, shuffle, 42,
                                     STREAM_VOCAB, err);
            if (!dls[r]) { CHECK(0, "open rank %d of %d: %s", r, R, err); opened = 0; }
        }
        int64_t S = (N - 1) / T, nb = S / (B * R);
        for (int r = 0; opened && r < R; r++) {
            CHECK(dataloader_batches_per_epoch(dls[r]) == nb, "R=%d rank %d: %lld batches, "
                  "expected %lld", R, r, (long long)dataloader_batches_per_epoch(dls[r]),
                  (long long)nb);
        }
        for (int epoch = 0; opened && epoch < 2; epoch++) {
            memset(covered, 0, (size_t)N * sizeof(int));
            if (!read_epoch(dls, R, B, T, N, covered)) break;
            int64_t once = 0, more = 0, first_gap = -1;
            for (int64_t p = 0; p < N; p++) {
                if (covered[p] == 1) once++;
                if (covered[p] > 1) more++;
                if (covered[p] == 0 && first_gap < 0 && p > 0) first_gap = p;
            }
            CHECK(more == 0, "R=%d epoch %d: %lld targets read twice", R, epoch, (long long)more);
            CHECK(once == nb * R * B * T, "R=%d epoch %d: %lld targets read, expected %lld", R,
                  epoch, (long long)once, (long long)(nb * R * B * T));
            // Without shuffling, the dropped tail is the end of the stream.
            if (!shuffle) {
                CHECK(first_gap == nb * R * B * T + 1, "R=%d: first unread target %lld", R,
                      (long long)first_gap);
            }
            DataLoaderState st = dataloader_state(dls[0]);
            CHECK(st.epoch == epoch + 1 && st.step_in_epoch == 0, "R=%d: state %lld/%lld after "
                  "epoch %d", R, (long long)st.epoch, (long long)st.step_in_epoch, epoch);
        }
        for (int r = 0; r < R; r++) dataloader_close(dls[r]);
    }
    free(covered);
    test_end();
}

// The first row starts of n batches; a compact fingerprint of the order of samples.
static void batch_starts(DataLoader* dl, int n, int B, int T, int* starts) {
    char err[ERR_LEN] = "";
    int* in = malloc((size_t)B * T * sizeof(int));
    int* tg = malloc((size_t)B * T * sizeof(int));
    for (int k = 0; k < n; k++) {
        if (dataloader_next(dl, in, tg, err) != 0) {
            CHECK(0, "next: %s", err);
            memset(starts + k * B, 0xff, (size_t)(n - k) * B * sizeof(int));
            break;
        }
        for (int b = 0; b < B; b++) starts[k * B + b] = in[b * T];
    }
    free(in);
    free(tg);
}

static void test_shuffle(void) {
    test_begin("loader_shuffle_per_epoch_from_seed");
    char err[ERR_LEN] = "";
    write_stream_shards();
    int B = 2, T = 8;
    const char* pattern = tmp_path(STREAM_PATTERN);
    DataLoader* a = dataloader_open(pattern, B, T, 1, 2, 1, 7, STREAM_VOCAB, err);
    DataLoader* b = dataloader_open(pattern, B, T, 1, 2, 1, 7, STREAM_VOCAB, err);
    DataLoader* c = dataloader_open(pattern, B, T, 1, 2, 1, 8, STREAM_VOCAB, err);
    DataLoader* plain = dataloader_open(pattern, B, T, 1, 2, 0, 7, STREAM_VOCAB, err);
    CHECK(a && b && c && plain, "open: %s", err);
    if (a && b && c && plain) {
        int nb = (int)dataloader_batches_per_epoch(a);
        size_t per_epoch = (size_t)nb * B;
        int* a_starts = malloc(2 * per_epoch * sizeof(int));
        int* b_starts = malloc(2 * per_epoch * sizeof(int));
        int* c_starts = malloc(per_epoch * sizeof(int));
        int* p_starts = malloc(2 * per_epoch * sizeof(int));
        batch_starts(a, 2 * nb, B, T, a_starts);
        batch_starts(b, 2 * nb, B, T, b_starts);
        batch_starts(c, nb, B, T, c_starts);
        batch_starts(plain, 2 * nb, B, T, p_starts);
        size_t bytes = per_epoch * sizeof(int);
        CHECK(memcmp(a_starts, b_starts, 2 * bytes) == 0, "same seed, different batches");
        CHECK(memcmp(a_starts, a_starts + per_epoch, bytes) != 0, "epochs 0 and 1 alike");
        CHECK(memcmp(a_starts, c_starts, bytes) != 0, "seeds 7 and 8 give the same epoch");
        CHECK(memcmp(a_starts, p_starts, bytes) != 0, "shuffled epoch in stream order");
        CHECK(memcmp(p_starts, p_starts + per_epoch, bytes) == 0, "unshuffled epochs differ");
        // Out of order: a shuffled epoch is not sorted.
        int sorted = 1;
        for (size_t i = 1; i < per_epoch; i++) sorted &= a_starts[i] > a_starts[i - 1];
        CHECK(!sorted, "shuffled epoch is sorted");
        free(a_starts); free(b_starts); free(c_starts); free(p_starts);
    }
    dataloader_close(a); dataloader_close(b); dataloader_close(c); dataloader_close(plain);
    test_end();
}

// Shards of documents: the stream of write_stream_shards (the same sizes and token widths), but
// with DOC_TOKEN at each document start and the position p itself elsewhere, so that a row's
// other tokens tell where it lies. The documents' lengths cycle through document_lengths (a
// document of 1 token, others shorter than T = 16, of T and T+1 tokens, and longer than 3T), after
// a few tokens of text before the first; documents run across shard boundaries. Fills
// is_start[p] (1 at each document start) and stream[p] (the token at p), when not NULL, and
// returns the stream length.
#define DOC_PATTERN "docs_*.bin"
#define DOC_TOKEN 3999
static const int document_lengths[] = {1, 3, 15, 16, 17, 50, 2, 8, 33, 5, 60, 12};
static int64_t write_document_shards(char* is_start, int* stream) {
    char err[ERR_LEN];
    int n_shards = (int)(sizeof(stream_shard_sizes) / sizeof(int)), k = 0;
    int64_t pos = 0, next_start = 4;
    for (int s = 0; s < n_shards; s++) {
        int n = stream_shard_sizes[s];
        int* t = malloc((size_t)(n + 1) * sizeof(int));
        for (int i = 0; i < n; i++, pos++) {
            int start = pos == next_start;
            if (start) next_start += document_lengths[k++ % (int)(sizeof(document_lengths) / sizeof(int))];
            t[i] = start ? DOC_TOKEN : (int)pos;
            if (is_start) is_start[pos] = (char)start;
            if (stream) stream[pos] = t[i];
        }
        char name[64];
        snprintf(name, sizeof(name), "docs_%06d.bin", s);
        if (shard_write(tmp_path(name), t, (size_t)n, s % 2 ? STREAM_VOCAB : DOC_TOKEN + 1, err) != 0) {
            fprintf(stderr, "%s\n", err);
            exit(1);
        }
        free(t);
    }
    return pos;
}

// A loader of the stream shards (write_stream_shards), or with aligned rows of the document shards
// (write_document_shards), each written first; NULL with err on failure.
static DataLoader* open_test_loader(int aligned, int B, int T, int rank, int R, int shuffle, uint64_t seed,
                                    char* err) {
    if (!aligned) {
        write_stream_shards();
        return dataloader_open(tmp_path(STREAM_PATTERN), B, T, rank, R, shuffle, seed, STREAM_VOCAB, err);
    }
    write_document_shards(NULL, NULL);
    DataLoader* dl = dataloader_open(tmp_path(DOC_PATTERN), B, T, rank, R, shuffle, seed, STREAM_VOCAB, err);
    if (dl && dataloader_align_documents(dl, DOC_TOKEN, err) != 0) {
        dataloader_close(dl);
        return NULL;
    }
    return dl;
}

// The samples of an epoch as the alignment's rule gives them, found here by its own walk: each
// document start from which T+1 tokens lie within the stream, at or past the last target of the
// sample before it. Returns their count, their starts in starts (n entries at most).
static int64_t expected_document_samples(const char* is_start, int64_t n, int T, int64_t* starts) {
    int64_t count = 0, targets_end = 0;
    for (int64_t p = 0; p + T < n; p++) {
        if (!is_start[p] || p < targets_end) continue;
        starts[count++] = p;
        targets_end = p + T;
    }
    return count;
}

// Where a row of the document shards starts in the stream: its first token that is not a document
// start holds its own position. -1 when it has none.
static int64_t row_start(const int* row, int T) {
    for (int j = 0; j < T; j++)
        if (row[j] != DOC_TOKEN) return row[j] - j;
    return -1;
}

static void test_resume(int shuffle, int aligned) {
    test_begin(aligned ? (shuffle ? "loader_aligned_resume_exact_shuffled" : "loader_aligned_resume_exact")
                       : (shuffle ? "loader_resume_exact_shuffled" : "loader_resume_exact"));
    char err[ERR_LEN] = "";
    int B = 2, T = 16, R = 3, rank = 1, ahead = 5;
    DataLoader* first = open_test_loader(aligned, B, T, rank, R, shuffle, 3, err);
    DataLoader* second = open_test_loader(aligned, B, T, rank, R, shuffle, 3, err);
    CHECK(first && second, "open: %s", err);
    if (first && second) {
        int nb = (int)dataloader_batches_per_epoch(first);
        int* in = malloc((size_t)B * T * sizeof(int));
        int* tg = malloc((size_t)B * T * sizeof(int));
        int* expected = malloc((size_t)ahead * B * T * sizeof(int));
        int* got = malloc((size_t)ahead * B * T * sizeof(int));
        // Stop two batches before the end of epoch 1 so the next batches cross into epoch 2.
        for (int k = 0; k < nb + nb - 2; k++) dataloader_next(first, in, tg, err);
        DataLoaderState st = dataloader_state(first);
        CHECK(st.epoch == 1 && st.step_in_epoch == nb - 2, "state %lld/%lld",
              (long long)st.epoch, (long long)st.step_in_epoch);
        for (int k = 0; k < ahead; k++) {
            dataloader_next(first, expected + (size_t)k * B * T, tg, err);
        }
        CHECK(dataloader_restore(second, st, err) == 0, "restore: %s", err);
        for (int k = 0; k < ahead; k++) {
            dataloader_next(second, got + (size_t)k * B * T, tg, err);
        }
        CHECK(memcmp(expected, got, (size_t)ahead * B * T * sizeof(int)) == 0,
              "resumed batches differ");
        DataLoaderState a = dataloader_state(first), b = dataloader_state(second);
        CHECK(a.epoch == 2 && a.epoch == b.epoch && a.step_in_epoch == b.step_in_epoch,
              "states after resume differ");
        // Reset goes back to the very first batch.
        DataLoader* fresh = open_test_loader(aligned, B, T, rank, R, shuffle, 3, err);
        dataloader_reset(second);
        dataloader_next(second, got, tg, err);
        if (fresh) dataloader_next(fresh, expected, tg, err);
        CHECK(fresh && memcmp(expected, got, (size_t)B * T * sizeof(int)) == 0,
              "reset does not restart at the first batch");
        dataloader_close(fresh);
        // A position this data does not have is refused.
        DataLoaderState bad = {0, nb};
        err[0] = 0;
        CHECK(dataloader_restore(second, bad, err) != 0 && err[0], "step %d accepted", nb);
        bad.step_in_epoch = -1;
        CHECK(dataloader_restore(second, bad, err) != 0, "step -1 accepted");
        free(in); free(tg); free(expected); free(got);
    }
    dataloader_close(first);
    dataloader_close(second);
    test_end();
}

// Every aligned row starts with the document token and is the stream's T+1 tokens from a sample
// of the rule's (expected_document_samples); over an epoch the ranks read disjoint samples, each
// once, nb * R * B of them (the first ones in order without shuffling), so no target is read
// twice; the count of batches and the coverage (documents, samples, unseen tokens) are the rule's.
static void test_aligned_rows(int shuffle) {
    test_begin(shuffle ? "loader_aligned_rows_start_at_documents_shuffled" : "loader_aligned_rows_start_at_documents");
    char err[ERR_LEN] = "";
    int64_t N = write_document_shards(NULL, NULL);
    char* is_start = calloc((size_t)N, 1);
    int* stream = malloc((size_t)N * sizeof(int));
    int64_t* starts = malloc((size_t)N * sizeof(int64_t));
    int* taken = calloc((size_t)N, sizeof(int));
    write_document_shards(is_start, stream);
    int B = 2, T = 16;
    int64_t S = expected_document_samples(is_start, N, T, starts), documents = 0;
    for (int64_t p = 0; p < N; p++) documents += is_start[p];
    CHECK(S > 50 && S < (N - 1) / T, "the test's documents make %lld samples of %lld tokens", (long long)S,
          (long long)N);
    int* in = malloc((size_t)B * T * sizeof(int));
    int* tg = malloc((size_t)B * T * sizeof(int));
    for (int R = 1; R <= 3; R++) {
        DataLoader* dls[3] = {0};
        int opened = 1;
        for (int r = 0; r < R; r++) {
            dls[r] = open_test_loader(1, B, T, r, R, shuffle, 42, err);
            if (!dls[r]) {
                CHECK(0, "open and align rank %d of %d: %s", r, R, err);
                opened = 0;
            }
        }
        int64_t nb = S / (B * R);
        for (int r = 0; opened && r < R; r++) {
            DataLoaderCoverage c = dataloader_coverage(dls[r]);
            CHECK(dataloader_batches_per_epoch(dls[r]) == nb, "R=%d: %lld batches an epoch, the rule's %lld", R,
                  (long long)dataloader_batches_per_epoch(dls[r]), (long long)nb);
            CHECK(c.tokens == N && c.documents == documents && c.samples == S && c.unseen == N - 1 - S * T,
                  "R=%d: coverage %lld tokens, %lld documents, %lld samples, %lld unseen", R, (long long)c.tokens,
                  (long long)c.documents, (long long)c.samples, (long long)c.unseen);
        }
        for (int epoch = 0; opened && epoch < 2 && !test_case_failures; epoch++) {
            memset(taken, 0, (size_t)N * sizeof(int));
            int64_t read = 0;
            for (int64_t k = 0; k < nb && !test_case_failures; k++) {
                for (int r = 0; r < R && !test_case_failures; r++) {
                    if (dataloader_next(dls[r], in, tg, err) != 0) {
                        CHECK(0, "R=%d rank %d batch %lld: %s", R, r, (long long)k, err);
                        break;
                    }
                    for (int b = 0; b < B; b++) {
                        const int* row = in + b * T;
                        int64_t s = row_start(row, T);
                        int window = s >= 0 && s + T < N && row[0] == DOC_TOKEN;
                        for (int j = 0; window && j < T; j++)
                            window = row[j] == stream[s + j] && tg[b * T + j] == stream[s + j + 1];
                        CHECK(window, "R=%d rank %d batch %lld row %d is no window of the stream from a document",
                              R, r, (long long)k, b);
                        if (!window) break;
                        taken[s]++;
                        // In stream order one rank reads the rule's samples in order.
                        CHECK(shuffle || R > 1 || s == starts[k * B + b], "batch %lld row %d starts at %lld, the "
                              "rule's sample at %lld", (long long)k, b, (long long)s, (long long)starts[k * B + b]);
                        read++;
                    }
                }
            }
            int64_t kept = 0, twice = 0, outside = 0;
            for (int64_t i = 0; i < S; i++) kept += taken[starts[i]] == 1, twice += taken[starts[i]] > 1;
            for (int64_t p = 0; p < N; p++) outside += taken[p] > 0;
            outside -= kept + twice;
            CHECK(read == nb * R * B && kept == read && !twice && !outside, "R=%d epoch %d: %lld rows read, %lld "
                  "samples of the rule once, %lld twice, %lld rows elsewhere", R, epoch, (long long)read,
                  (long long)kept, (long long)twice, (long long)outside);
            DataLoaderState st = dataloader_state(dls[0]);
            CHECK(st.epoch == epoch + 1 && st.step_in_epoch == 0, "R=%d: state %lld/%lld after epoch %d", R,
                  (long long)st.epoch, (long long)st.step_in_epoch, epoch);
        }
        for (int r = 0; r < R; r++) dataloader_close(dls[r]);
    }
    free(is_start); free(stream); free(starts); free(taken); free(in); free(tg);
    test_end();
}

// The row starts of the first n batches of an aligned loader.
static void aligned_batch_starts(DataLoader* dl, int n, int B, int T, int64_t* starts) {
    char err[ERR_LEN] = "";
    int* in = malloc((size_t)B * T * sizeof(int));
    int* tg = malloc((size_t)B * T * sizeof(int));
    for (int k = 0; k < n; k++) {
        int rc = dataloader_next(dl, in, tg, err);
        CHECK(rc == 0, "next: %s", err);
        for (int b = 0; b < B; b++) starts[k * B + b] = rc == 0 ? row_start(in + b * T, T) : -1;
    }
    free(in);
    free(tg);
}

// Aligned rows shuffle every epoch from the seed, as the others do.
static void test_aligned_shuffle(void) {
    test_begin("loader_aligned_shuffle_per_epoch_from_seed");
    char err[ERR_LEN] = "";
    int B = 2, T = 16;
    DataLoader* a = open_test_loader(1, B, T, 1, 2, 1, 7, err);
    DataLoader* b = open_test_loader(1, B, T, 1, 2, 1, 7, err);
    DataLoader* c = open_test_loader(1, B, T, 1, 2, 1, 8, err);
    DataLoader* plain = open_test_loader(1, B, T, 1, 2, 0, 7, err);
    CHECK(a && b && c && plain, "open: %s", err);
    if (a && b && c && plain) {
        int nb = (int)dataloader_batches_per_epoch(a);
        size_t per_epoch = (size_t)nb * B, bytes = per_epoch * sizeof(int64_t);
        int64_t* a_starts = malloc(2 * bytes);
        int64_t* b_starts = malloc(2 * bytes);
        int64_t* c_starts = malloc(bytes);
        int64_t* p_starts = malloc(2 * bytes);
        aligned_batch_starts(a, 2 * nb, B, T, a_starts);
        aligned_batch_starts(b, 2 * nb, B, T, b_starts);
        aligned_batch_starts(c, nb, B, T, c_starts);
        aligned_batch_starts(plain, 2 * nb, B, T, p_starts);
        CHECK(memcmp(a_starts, b_starts, 2 * bytes) == 0, "same seed, different batches");
        CHECK(memcmp(a_starts, a_starts + per_epoch, bytes) != 0, "epochs 0 and 1 alike");
        CHECK(memcmp(a_starts, c_starts, bytes) != 0, "seeds 7 and 8 give the same epoch");
        CHECK(memcmp(a_starts, p_starts, bytes) != 0, "shuffled epoch in stream order");
        CHECK(memcmp(p_starts, p_starts + per_epoch, bytes) == 0, "unshuffled epochs differ");
        int sorted = 1;
        for (size_t i = 1; i < per_epoch; i++) sorted &= a_starts[i] > a_starts[i - 1];
        CHECK(!sorted, "shuffled epoch is sorted");
        free(a_starts); free(b_starts); free(c_starts); free(p_starts);
    }
    dataloader_close(a); dataloader_close(b); dataloader_close(c); dataloader_close(plain);
    test_end();
}

// Aligning is refused, naming the glob, for shards that hold no document token, for too few
// samples for a batch per rank and for a token outside the vocabulary; a token past the
// vocabulary anywhere in the stream is found by the walk, naming its shard and position. A
// refused loader is as it was: its own samples, from its first batch.
static void test_aligned_refusals(void) {
    test_begin("loader_aligned_refuses_shards_without_documents");
    char err[ERR_LEN] = "";
    int T = 16;
    write_stream_shards();
    const char* stream = tmp_path(STREAM_PATTERN);
    DataLoader* dl = dataloader_open(stream, 2, T, 0, 1, 0, 0, STREAM_VOCAB, err);
    CHECK(dl != NULL, "open: %s", err);
    if (dl) {
        int64_t nb = dataloader_batches_per_epoch(dl);
        CHECK(dataloader_align_documents(dl, DOC_TOKEN, err) != 0 && strstr(err, stream) &&
                  strstr(err, "none of its 3543 tokens is 3999, the token that starts a document") && !strchr(err, '\n'),
              "shards without the document token: '%s'", err);
        err[0] = 0;
        CHECK(dataloader_align_documents(dl, STREAM_VOCAB, err) != 0 && strstr(err, "outside the vocabulary"),
              "a document token outside the vocabulary: '%s'", err);
        int in[2 * 16], tg[2 * 16];
        CHECK(dataloader_batches_per_epoch(dl) == nb && dataloader_next(dl, in, tg, err) == 0 && in[0] == 0 &&
                  in[16] == 16, "a refused loader is not as it was: %s", err);
        dataloader_close(dl);
    }
    char* is_start = calloc(4096, 1);
    int64_t N = write_document_shards(is_start, NULL);
    int64_t* starts = malloc((size_t)N * sizeof(int64_t));
    int64_t S = expected_document_samples(is_start, N, T, starts);
    // One batch of the stream's samples per rank, but not of the documents'.
    int B = (int)S + 1;
    const char* docs = tmp_path(DOC_PATTERN);
    dl = dataloader_open(docs, B, T, 0, 1, 0, 0, STREAM_VOCAB, err);
    CHECK(dl != NULL, "open B=%d: %s", B, err);
    if (dl) {
        char words[128];
        snprintf(words, sizeof(words), "make %lld samples of T+1 = 17 tokens starting at a document, fewer than one "
                 "batch of %d", (long long)S, B);
        CHECK(dataloader_align_documents(dl, DOC_TOKEN, err) != 0 && strstr(err, docs) && strstr(err, words),
              "too few samples: '%s'", err);
        dataloader_close(dl);
    }
    free(is_start);
    free(starts);
    // A bad id between the samples the open checks: the walk reads every token.
    uint16_t* data = malloc(20000 * sizeof(uint16_t));
    for (int i = 0; i < 20000; i++) data[i] = (uint16_t)(i % 7 ? i % 400 : 399);
    data[10000] = 450;
    const char* bad = tmp_path("far_docs_000000.bin");
    write_raw_shard(bad, SHARD_MAGIC, 1, 20000, 0, data, 20000 * sizeof(uint16_t));
    free(data);
    dl = dataloader_open(bad, 2, 50, 0, 1, 0, 0, 420, err);
    CHECK(dl != NULL, "open read past the sample: %s", err);
    if (dl) {
        err[0] = 0;
        CHECK(dataloader_align_documents(dl, 399, err) != 0 && strstr(err, bad) && strstr(err, "token 10000 has id 450"),
              "a bad id the walk reads: '%s'", err);
        dataloader_close(dl);
    }
    test_end();
}

// dataloader_open (and shard_read, for a single file) fail with an error naming the file and
// containing the word that says what is wrong.
static void expect_error(const char* what, const char* path, int B, int T, int vocab,
                         const char* word) {
    char err[ERR_LEN] = "";
    DataLoader* dl = dataloader_open(path, B, T, 0, 1, 0, 0, vocab, err);
    CHECK(dl == NULL, "%s: loader opened", what);
    dataloader_close(dl);
    CHECK(strstr(err, path) && strstr(err, word), "%s: loader error '%s' lacks '%s' or '%s'",
          what, err, path, word);
    CHECK(strchr(err, '\n') == NULL, "%s: error is more than one line", what);
}

static void expect_read_error(const char* what, const char* path, int vocab, const char* word) {
    char err[ERR_LEN] = "";
    size_t n;
    int* t = shard_read(path, &n, vocab, 0, err);
    CHECK(t == NULL, "%s: shard_read succeeded", what);
    free(t);
    CHECK(strstr(err, path) && strstr(err, word), "%s: shard_read error '%s' lacks '%s' or '%s'",
          what, err, path, word);
}

static void test_errors(void) {
    test_begin("loader_and_shard_errors_name_the_file");
    char err[ERR_LEN];
    uint16_t data[1000];
    for (int i = 0; i < 1000; i++) data[i] = (uint16_t)(i % 400);

    expect_error("missing", tmp_path("nothing_here_*.bin"), 1, 4, 500, "no file");
    expect_read_error("missing", tmp_path("nothing_here.bin"), 500, "No such file");

    const char* p = tmp_path("bad_magic.bin");
    write_raw_shard(p, 20240326, 1, 1000, 500, data, sizeof(data));
    expect_error("wrong magic", p, 1, 4, 500, "magic");
    expect_read_error("wrong magic", p, 500, "magic");

    p = tmp_path("bad_version.bin");
    write_raw_shard(p, SHARD_MAGIC, 3, 1000, 500, data, sizeof(data));
    expect_error("wrong version", p, 1, 4, 500, "version");
    expect_read_error("wrong version", p, 500, "version");

    p = tmp_path("truncated.bin");
    write_raw_shard(p, SHARD_MAGIC, 1, 1000, 500, data, 500 * sizeof(uint16_t));
    expect_error("truncated", p, 1, 4, 500, "truncated");
    expect_read_error("truncated", p, 500, "truncated");

    p = tmp_path("short_header.bin");
    FILE* f = fopen(p, "wb");
    fwrite(data, 1, 100, f);
    fclose(f);
    expect_error("shorter than a header", p, 1, 4, 500, "truncated");

    p = tmp_path("trailing.bin");
    write_raw_shard(p, SHARD_MAGIC, 1, 500, 500, data, sizeof(data));
    expect_error("bytes after the tokens", p, 1, 4, 500, "unexpected bytes");

    // An id past the vocabulary in an llm.c file (no vocabulary in its header): its last token,
    // which the sample the loader checks at open always holds (test_bad_token_when_read has one
    // outside the sample).
    p = tmp_path("out_of_vocab.bin");
    data[999] = 450;
    write_raw_shard(p, SHARD_MAGIC, 1, 1000, 0, data, sizeof(data));
    expect_error("token out of vocab", p, 1, 4, 420, "token 999 has id 450");
    expect_read_error("token out of vocab", p, 420, "token 999 has id 450");
    data[999] = 999 % 400;
    // A shard whose header says its vocabulary is larger than the model's.
    int ids[3] = {1, 2, 3};
    p = tmp_path("big_vocab.bin");
    CHECK(shard_write(p, ids, 3, 1000, err) == 0, "write: %s", err);
    expect_error("shard vocab larger", p, 1, 1, 500, "vocabulary");

    // 40 tokens: 2 samples of T+1 = 17, not one batch of 4.
    p = tmp_path("small.bin");
    write_raw_shard(p, SHARD_MAGIC, 1, 40, 500, data, 40 * sizeof(uint16_t));
    expect_error("too small", p, 4, 16, 500, "fewer than one batch");
    // Enough for one batch on one rank, not on two.
    DataLoader* dl = dataloader_open(p, 2, 16, 0, 1, 0, 0, 500, err);
    CHECK(dl != NULL, "40 tokens, B=2 T=16, one rank: %s", err);
    dataloader_close(dl);
    err[0] = 0;
    dl = dataloader_open(p, 2, 16, 1, 2, 0, 0, 500, err);
    CHECK(dl == NULL && strstr(err, p), "two ranks accepted: %s", err);
    dataloader_close(dl);

    // One bad shard among good ones is named.
    const char* good = tmp_path("mixed_000000.bin");
    write_raw_shard(good, SHARD_MAGIC, 1, 1000, 500, data, sizeof(data));
    p = tmp_path("mixed_000001.bin");
    write_raw_shard(p, SHARD_MAGIC, 1, 1000, 500, data, 10);
    err[0] = 0;
    dl = dataloader_open(tmp_path("mixed_*.bin"), 1, 4, 0, 1, 0, 0, 500, err);
    CHECK(dl == NULL && strstr(err, p), "bad second shard: %s", err);
    dataloader_close(dl);

    // Bad arguments.
    struct { int B, T, rank, world, vocab; } bad[] = {
        {0, 4, 0, 1, 500}, {1, 0, 0, 1, 500}, {1, 4, 1, 1, 500}, {1, 4, -1, 2, 500},
        {1, 4, 0, 0, 500}, {1, 4, 0, 1, 0}, {1 << 16, 1 << 16, 0, 1, 500},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = 0;
        dl = dataloader_open(good, bad[i].B, bad[i].T, bad[i].rank, bad[i].world, 0, 0,
                             bad[i].vocab, err);
        CHECK(dl == NULL && err[0], "B=%d T=%d rank %d of %d vocab %d accepted", bad[i].B,
              bad[i].T, bad[i].rank, bad[i].world, bad[i].vocab);
        dataloader_close(dl);
    }
    test_end();
}

// An id past the vocabulary outside the sample checked at open is refused by the batch that
// reads it, naming the shard and the token's position in it, and by that batch again when
// retried; the batches before it load, and the loader's position stays at the failed batch.
static void test_bad_token_when_read(void) {
    test_begin("loader_refuses_a_bad_token_when_read");
    char err[ERR_LEN] = "";
    enum { FIRST = 1000, SECOND = 20000, BAD = 10000, B = 2, T = 50, V = 420 };
    uint16_t* data = malloc(SECOND * sizeof(uint16_t));
    for (int i = 0; i < SECOND; i++) data[i] = (uint16_t)(i % 400);
    write_raw_shard(tmp_path("far_000000.bin"), SHARD_MAGIC, 1, FIRST, 0, data,
                    FIRST * sizeof(uint16_t));
    // Token 10000 of 20000 lies between the loader's sample windows (at 8516 and 11355).
    data[BAD] = 450;
    const char* bad = tmp_path("far_000001.bin");
    write_raw_shard(bad, SHARD_MAGIC, 1, SECOND, 0, data, SECOND * sizeof(uint16_t));
    free(data);
    DataLoader* dl = dataloader_open(tmp_path("far_*.bin"), B, T, 0, 1, 0, 0, V, err);
    CHECK(dl != NULL, "open read past the sample: %s", err);
    if (dl) {
        // Sample i holds stream positions i*T .. i*T + T; the first to hold the bad token is
        // (p - 1) / T for its position p in the stream, and batch k holds samples k*B .. k*B+B-1.
        int64_t first_bad = (int64_t)(FIRST + BAD - 1) / T / B;
        int in[B * T], tg[B * T], rc = 0;
        int64_t k = 0;
        for (; k < first_bad && rc == 0; k++) rc = dataloader_next(dl, in, tg, err);
        CHECK(rc == 0, "batch %lld, before the bad token, failed: %s", (long long)k - 1, err);
        err[0] = 0;
        rc = dataloader_next(dl, in, tg, err);
        CHECK(rc != 0, "batch %lld holds the bad token and loaded", (long long)first_bad);
        CHECK(strstr(err, bad) && strstr(err, "token 10000 has id 450") &&
              strstr(err, "vocabulary of 420") && !strchr(err, '\n'),
              "error '%s' does not name the shard, the position and the id in one line", err);
        DataLoaderState st = dataloader_state(dl);
        CHECK(st.epoch == 0 && st.step_in_epoch == first_bad, "a failed batch moved the "
              "position to %lld/%lld", (long long)st.epoch, (long long)st.step_in_epoch);
        err[0] = 0;
        CHECK(dataloader_next(dl, in, tg, err) != 0 && strstr(err, "token 10000"),
              "the failed batch loaded when retried: %s", err);
        dataloader_close(dl);
    }
    test_end();
}

// The bytes this process has read through read and pread (Linux's /proc/self/io), or -1.
static int64_t bytes_read(void) {
    FILE* f = fopen("/proc/self/io", "r");
    long long rchar = -1;
    if (f) {
        if (fscanf(f, "rchar: %lld", &rchar) != 1) rchar = -1;
        fclose(f);
    }
    return rchar;
}

// Opening reads headers and a sample, not the payload: a sparse shard of 2^31 - 1 uint16 tokens
// (4 GiB of zeros, a valid id) opens having read a few KiB.
static void test_open_reads_little(void) {
    const char* name = "loader_open_reads_headers_not_payload";
    const char* path = tmp_path("huge_000000.bin");
    int64_t size = SHARD_HEADER_INTS * 4 + (int64_t)INT32_MAX * 2;
    write_raw_shard(path, SHARD_MAGIC, 1, INT32_MAX, 0, NULL, 0);
    struct stat st;
    if (truncate(path, (off_t)size) != 0 || stat(path, &st) != 0 ||
        (int64_t)st.st_blocks * 512 > (1 << 20)) {
        remove(path);
        test_skip(name, "no sparse file of 4 GiB here");
        return;
    }
    int64_t before = bytes_read();
    if (before < 0) {
        remove(path);
        test_skip(name, "no /proc/self/io to count the bytes read");
        return;
    }
    test_begin(name);
    char err[ERR_LEN] = "";
    DataLoader* dl = dataloader_open(path, 4, 64, 0, 1, 1, 5, 50257, err);
    int64_t got = bytes_read() - before;
    CHECK(dl != NULL, "open: %s", err);
    CHECK(got < (1 << 20), "open read %lld bytes of a %lld-byte shard", (long long)got,
          (long long)size);
    if (dl) {
        int in[4 * 64], tg[4 * 64];
        CHECK(dataloader_next(dl, in, tg, err) == 0 && in[0] == 0 && tg[4 * 64 - 1] == 0,
              "a batch of the sparse shard: %s", err);
        dataloader_close(dl);
    }
    remove(path);
    test_end();
}

// A shard rewritten under an open loader is noticed, not read as garbage.
static void test_changed_shard(void) {
    test_begin("loader_notices_a_changed_shard");
    char err[ERR_LEN] = "";
    int tokens[200];
    for (int i = 0; i < 200; i++) tokens[i] = i;
    const char* second = tmp_path("changing_000001.bin");
    CHECK(shard_write(tmp_path("changing_000000.bin"), tokens, 100, 500, err) == 0, "%s", err);
    CHECK(shard_write(second, tokens + 100, 100, 500, err) == 0, "%s", err);
    // Rank 0 of 2 reads samples 0, 2, 4, ...; sample 12 (tokens 108..117) is the first to need
    // the second shard and needs no other, so a retry of it goes straight to that shard.
    DataLoader* dl = dataloader_open(tmp_path("changing_*.bin"), 1, 9, 0, 2, 0, 0, 500, err);
    CHECK(dl != NULL, "open: %s", err);
    if (dl) {
        CHECK(shard_write(second, tokens, 50, 500, err) == 0, "%s", err);
        int in[9], tg[9], rc = 0;
        for (int k = 0; k < 20 && rc == 0; k++) rc = dataloader_next(dl, in, tg, err);
        CHECK(rc != 0 && strstr(err, second) && strstr(err, "changed"), "error: %s", err);
        // The failed shard is not kept open as if it were fine: the same batch fails again.
        err[0] = 0;
        rc = dataloader_next(dl, in, tg, err);
        CHECK(rc != 0 && strstr(err, "changed"), "the batch read the changed shard: %s", err);
        dataloader_close(dl);
    }
    test_end();
}

// Shards record their tokenizer's fingerprint; the loader and shard_read refuse a mix, and
// shards without one (llm.c's) go with any.
static void test_fingerprints(void) {
    test_begin("shard_fingerprint_mismatch_refused");
    char err[ERR_LEN] = "";
    const uint64_t mine = 0x0123456789abcdefULL, other = 0xfedcba9876543210ULL;
    int ids[64];
    for (int i = 0; i < 64; i++) ids[i] = i % 50;
    CHECK(shard_write_tagged(tmp_path("fp_000000.bin"), ids, 64, 50, mine, err) == 0, "%s", err);
    CHECK(shard_write_tagged(tmp_path("fp_000001.bin"), ids, 64, 50, mine, err) == 0, "%s", err);
    uint16_t llmc[64];
    for (int i = 0; i < 64; i++) llmc[i] = (uint16_t)ids[i];
    write_raw_shard(tmp_path("fp_000002.bin"), SHARD_MAGIC, 1, 64, 0, llmc, sizeof llmc);
    int32_t header[SHARD_HEADER_INTS];
    read_header(tmp_path("fp_000000.bin"), header);
    CHECK((uint32_t)header[4] == 0x89abcdefu && (uint32_t)header[5] == 0x01234567u,
          "header slots 4, 5 hold %08x %08x", (unsigned)header[4], (unsigned)header[5]);

    const char* same = tmp_path("fp_*.bin");
    DataLoader* dl = dataloader_open(same, 2, 8, 0, 1, 0, 0, 50, err);
    CHECK(dl && dataloader_fingerprint(dl) == mine, "one tokenizer and llm.c's: %s", err);
    if (dl) {
        CHECK(dataloader_check_fingerprint(dl, mine, err) == 0 &&
              dataloader_check_fingerprint(dl, 0, err) == 0, "the right tokenizer refused: %s", err);
        err[0] = 0;
        CHECK(dataloader_check_fingerprint(dl, other, err) != 0 && strstr(err, "fp_000000.bin") &&
              strstr(err, "another tokenizer"), "another tokenizer's shards: '%s'", err);
    }
    dataloader_close(dl);

    CHECK(shard_write_tagged(tmp_path("fp_000003.bin"), ids, 64, 50, other, err) == 0, "%s", err);
    err[0] = 0;
    dl = dataloader_open(same, 2, 8, 0, 1, 0, 0, 50, err);
    CHECK(!dl && strstr(err, "fp_000003.bin") && strstr(err, "fp_000000.bin"),
          "shards of two tokenizers: '%s'", err);
    dataloader_close(dl);

    size_t n;
    int* back = shard_read(tmp_path("fp_000003.bin"), &n, 50, mine, err);
    CHECK(!back && strstr(err, "another tokenizer"), "shard_read of a mismatch: '%s'", err);
    free(back);
    back = shard_read(tmp_path("fp_000002.bin"), &n, 50, mine, err);
    CHECK(back && n == 64, "shard_read of an llm.c shard: %s", err);
    free(back);
    test_end();
}

// Text to tokens to shards to batches and back: the loader's stream decodes to the text.
static void test_text_round_trip(void) {
    const char* name = "text_tokenizer_shards_loader_round_trip";
    char err[ERR_LEN] = "";
    size_t len;
    unsigned char* text = test_text(name, &len);
    if (!text) return;
    test_begin(name);
    if (len > 1 << 16) len = 1 << 16;
    Tokenizer* tok = tokenizer_train(text, len, 512, 0);
    CHECK(tok != NULL, "tokenizer_train failed");
    if (tok) {
        int V = tokenizer_vocab_size(tok), eot = tokenizer_eot(tok);
        // Two documents, each opened by <|endoftext|>, cut into shards at an arbitrary token.
        int* stream = malloc((len + 2) * sizeof(int));
        size_t half = len / 2, n = 0;
        stream[n++] = eot;
        n += tokenizer_encode(tok, text, half, stream + n);
        stream[n++] = eot;
        n += tokenizer_encode(tok, text + half, len - half, stream + n);
        CHECK(n < len / 2, "%zu tokens for %zu bytes: no compression", n, len);
        size_t cut = n / 3;
        CHECK(shard_write(tmp_path("text_000000.bin"), stream, cut, V, err) == 0, "%s", err);
        CHECK(shard_write(tmp_path("text_000001.bin"), stream + cut, n - cut, V, err) == 0,
              "%s", err);
        int B = 4, T = 64;
        DataLoader* dl = dataloader_open(tmp_path("text_*.bin"), B, T, 0, 1, 0, 0, V, err);
        CHECK(dl != NULL, "open: %s", err);
        if (dl) {
            // Unshuffled, one rank: the rows of an epoch are the stream in order.
            int64_t nb = dataloader_batches_per_epoch(dl);
            size_t m = (size_t)nb * B * T;
            int* seen = malloc((m + 1) * sizeof(int));
            int* tg = malloc((size_t)B * T * sizeof(int));
            for (int64_t k = 0; k < nb; k++) {
                CHECK(dataloader_next(dl, seen + k * B * T, tg, err) == 0, "next: %s", err);
                seen[(k + 1) * B * T] = tg[B * T - 1];
            }
            CHECK(memcmp(seen, stream, (m + 1) * sizeof(int)) == 0, "batches differ from the "
                  "token stream");
            // Without the <|endoftext|> tokens the stream decodes to the text.
            int* body = malloc(n * sizeof(int));
            size_t nb_body = 0;
            for (size_t i = 0; i < n; i++) if (stream[i] != eot) body[nb_body++] = stream[i];
            unsigned char* back = malloc(len + 1);
            size_t back_len = tokenizer_decode(tok, body, nb_body, back);
            CHECK(back_len == len && memcmp(back, text, len) == 0, "decoded text differs");
            free(seen); free(tg); free(body); free(back);
            dataloader_close(dl);
        }
        free(stream);
        tokenizer_free(tok);
    }
    free(text);
    test_end();
}

// The vocabulary a glob's first shard states: the model's when nothing else gives it.
static void test_vocab_size(void) {
    test_begin("dataloader_vocab_size_of_the_first_shard");
    char err[ERR_LEN] = "";
    int tokens[64] = {0};
    uint16_t data[64] = {0};
    CHECK(shard_write(tmp_path("vocab_a_000.bin"), tokens, 64, 300, err) == 0, "%s", err);
    CHECK(shard_write(tmp_path("vocab_a_001.bin"), tokens, 64, 500, err) == 0, "%s", err);
    write_raw_shard(tmp_path("vocab_b_000.bin"), SHARD_MAGIC, 1, 64, 0, data, sizeof(data));
    write_raw_shard(tmp_path("vocab_c_000.bin"), 1234, 1, 64, 300, data, sizeof(data));
    int v = dataloader_vocab_size(tmp_path("vocab_a_*.bin"), err);
    CHECK(v == 300, "the first of two shards: %d (%s)", v, err);
    v = dataloader_vocab_size(tmp_path("vocab_b_*.bin"), err);
    CHECK(v == 0, "an llm.c shard, which states none: %d (%s)", v, err);
    v = dataloader_vocab_size(tmp_path("vocab_c_*.bin"), err);
    CHECK(v == -1 && strstr(err, "vocab_c_000.bin"), "a bad header: %d, '%s'", v, err);
    v = dataloader_vocab_size(tmp_path("vocab_none_*.bin"), err);
    CHECK(v == -1 && strstr(err, "vocab_none_*.bin: no file matches"), "no shard: %d, '%s'", v, err);
    test_end();
}

// A state saved by 2 ranks restored by 4 and by 1, in their own batches; the shards as a program
// names them; the validation glob beside the training one.
static void test_ranks_names_and_val_pattern(void) {
    test_begin("dataloader_restore_ranks_describe_and_val_pattern");
    char err[ERR_LEN] = "", text[512];
    write_stream_shards();
    const char* pattern = tmp_path(STREAM_PATTERN);
    DataLoader* four = dataloader_open(pattern, 2, 16, 0, 4, 0, 3, STREAM_VOCAB, err);
    DataLoader* one = dataloader_open(pattern, 2, 16, 0, 1, 0, 3, STREAM_VOCAB, err);
    CHECK(four && one, "open: %s", err);
    if (four && one) {
        int again = -1;
        DataLoaderState saved = {1, 3};   // 3 batches of 2 ranks: 6 batches' samples
        CHECK(dataloader_restore_ranks(four, saved, 2, &again, err) == 0, "%s", err);
        CHECK(dataloader_state(four).epoch == 1 && dataloader_state(four).step_in_epoch == 1 && again == 1,
              "4 ranks: epoch %lld step %lld, seen again %d", (long long)dataloader_state(four).epoch,
              (long long)dataloader_state(four).step_in_epoch, again);
        CHECK(dataloader_restore_ranks(one, saved, 2, &again, err) == 0, "%s", err);
        CHECK(dataloader_state(one).step_in_epoch == 6 && again == 0, "1 rank: step %lld, seen again %d",
              (long long)dataloader_state(one).step_in_epoch, again);
        dataloader_describe(one, text, sizeof(text));
        CHECK(!strncmp(text, "5 shards (", 10) && strstr(text, "stream_000000.bin to ") &&
                  strstr(text, "stream_000004.bin)"), "'%s'", text);
    }
    dataloader_close(four);
    dataloader_close(one);
    CHECK(dataloader_val_pattern("data/train_x/train_*.bin", text, sizeof(text), err) == 0 &&
              !strcmp(text, "data/train_x/val_*.bin"), "'%s' (%s)", text, err);
    CHECK(dataloader_val_pattern("data/shards_*.bin", text, sizeof(text), err) != 0 && strstr(err, "no train_"),
          "no train_: '%s'", err);
    test_end();
}

int main(void) {
    tmp_dir = test_env("FLASHGPT_TMP", "/tmp");
    test_round_trip("shard_round_trip_u16", 50257, SHARD_VERSION_U16);
    test_round_trip("shard_round_trip_u32", 100000, SHARD_VERSION_U32);
    test_write_rules();
    test_llmc_header();
    test_coverage(0);
    test_coverage(1);
    test_shuffle();
    test_resume(0, 0);
    test_resume(1, 0);
    test_aligned_rows(0);
    test_aligned_rows(1);
    test_aligned_shuffle();
    test_resume(0, 1);
    test_resume(1, 1);
    test_aligned_refusals();
    test_errors();
    test_bad_token_when_read();
    test_open_reads_little();
    test_changed_shard();
    test_fingerprints();
    test_text_round_trip();
    test_vocab_size();
    test_ranks_names_and_val_pattern();
    return test_exit_code();
}
