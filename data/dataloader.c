// data/dataloader.c: batches of inputs (B, T) and targets (B, T) from token shards.
// The shards matching the pattern, in sorted order, form one token stream of N tokens. Sample i
// is the T+1 tokens from its start: i*T (so consecutive samples share one token and an epoch
// holds S = (N-1)/T of them), or with rows aligned to documents the i-th document start the
// greedy walk of dataloader_align_documents takes. Its inputs are its first T tokens, its targets
// its last T. The S samples are put in order (or shuffled from seed and epoch); batch k of rank r
// is the B samples at positions (k*R + r)*B ... (k*R + r)*B + B-1 of that order, so the ranks'
// samples are disjoint and together cover every target of the epoch exactly once. The positions
// past batches_per_epoch*R*B, too few for a batch on every rank, are dropped alike on all ranks.
// Shards are read with pread per sample, never held in memory. Opening reads only each shard's
// header and a small sample of its tokens, so its cost grows with the number of shards, not
// their size; every token id is checked against the vocabulary as its batch is read. Aligning
// to documents reads the whole stream once, to find them.
#include "data/dataloader.h"

#include <glob.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/read_file.h"
#include "common/rng.h"
#include "data/shard.h"

struct DataLoader {
    int B, T, rank, world_size, shuffle, vocab_size;
    char* pattern;             // the glob, for errors
    uint64_t seed;
    uint64_t fingerprint;      // the shards' tokenizer; 0: unknown
    int fingerprint_from;      // the first shard that records it
    int n_shards;
    char** paths;              // (n_shards,)
    ShardHeader* headers;      // (n_shards,)
    int64_t* shard_start;      // (n_shards + 1,) stream position of each shard's first token
    int64_t n_tokens;          // N
    int64_t n_samples;         // S
    int64_t* sample_start;     // (S,) stream position of each sample's first token when aligned to
                               // documents; NULL: sample i starts at i*T
    int64_t documents;         // positions holding the document token (aligned); 0 otherwise
    int64_t batches_per_epoch;
    DataLoaderState state;     // the next batch to read
    int fd;                    // the shard open now, -1 if none
    int fd_shard;
    int* sample;               // (T + 1,) scratch
};

// A pseudo-random permutation of [0, n) that needs no memory: a 4-round Feistel network on
// [0, 2^(2*half)) with 2^(2*half) < 4n, walked until the value lands in [0, n).
static int64_t shuffled_position(int64_t pos, int64_t n, uint64_t seed, int64_t epoch) {
    int half = 1;
    while (((int64_t)1 << (2 * half)) < n) half++;
    uint64_t mask = ((uint64_t)1 << half) - 1;
    uint64_t key = splitmix64(seed ^ splitmix64((uint64_t)epoch));
    uint64_t x = (uint64_t)pos;
    do {
        uint64_t left = x >> half, right = x & mask;
        for (int round = 0; round < 4; round++) {
            uint64_t f = splitmix64(right ^ splitmix64(key + (uint64_t)round)) & mask;
            uint64_t next_right = left ^ f;
            left = right;
            right = next_right;
        }
        x = (left << half) | right;
    } while (x >= (uint64_t)n);
    return (int64_t)x;
}

void dataloader_close(DataLoader* dl) {
    if (!dl) return;
    if (dl->fd >= 0) close(dl->fd);
    for (int i = 0; i < dl->n_shards; i++) free(dl->paths[i]);
    free(dl->paths);
    free(dl->pattern);
    free(dl->headers);
    free(dl->shard_start);
    free(dl->sample_start);
    free(dl->sample);
    free(dl);
}

// Makes shard s the open one, checking that its header still says what it said at open. On
// failure no shard is open, so the next call checks again.
static int open_shard(DataLoader* dl, int s, char* err) {
    if (dl->fd >= 0 && dl->fd_shard == s) return 0;
    if (dl->fd >= 0) close(dl->fd);
    dl->fd = open_regular_file(dl->paths[s], err);
    dl->fd_shard = s;
    if (dl->fd < 0) return -1;
    ShardHeader h;
    if (shard_read_header(dl->fd, dl->paths[s], dl->vocab_size, &h, err) == 0) {
        if (h.version == dl->headers[s].version && h.n_tokens == dl->headers[s].n_tokens) return 0;
        set_err(err, "%s: the shard changed since the data loader opened it", dl->paths[s]);
    }
    close(dl->fd);
    dl->fd = -1;
    return -1;
}

// Checks SAMPLE_WINDOWS runs of SAMPLE_TOKENS tokens spread evenly over shard s, the first at
// its start and the last at its end, against the vocabulary: shards of a larger vocabulary fail
// at open, before the model is built, for a few pages read. The rest is checked as it is read.
#define SAMPLE_WINDOWS 8
#define SAMPLE_TOKENS 128
static int check_sample(DataLoader* dl, int s, int fd, char* err) {
    const ShardHeader* h = &dl->headers[s];
    int buf[SAMPLE_TOKENS];
    int64_t w = h->n_tokens < SAMPLE_TOKENS ? h->n_tokens : SAMPLE_TOKENS;
    for (int k = 0; k < SAMPLE_WINDOWS; k++) {
        int64_t start = (h->n_tokens - w) * k / (SAMPLE_WINDOWS - 1);
        if (shard_read_tokens(fd, dl->paths[s], h, start, (size_t)w, buf, dl->vocab_size,
                              err) != 0) {
            return -1;
        }
    }
    return 0;
}

// Shard s must have been made by the same tokenizer as the shards before it.
static int check_fingerprint(DataLoader* dl, int s, char* err) {
    const ShardHeader* h = &dl->headers[s];
    if (!h->fingerprint) return 0;
    if (!dl->fingerprint) {
        dl->fingerprint = h->fingerprint;
        dl->fingerprint_from = s;
        return 0;
    }
    if (h->fingerprint == dl->fingerprint) return 0;
    set_err(err, "%s: made by another tokenizer than %s (fingerprints %016llx and %016llx)",
            dl->paths[s], dl->paths[dl->fingerprint_from], (unsigned long long)h->fingerprint,
            (unsigned long long)dl->fingerprint);
    return -1;
}

// The shards pattern matches, in sorted order, into g (globfree it): 0, or -1 with err naming the
// pattern when none does.
static int glob_shards(const char* pattern, glob_t* g, char* err) {
    int rc = glob(pattern, 0, NULL, g);
    if (rc == 0) return 0;
    if (rc == GLOB_NOMATCH) set_err(err, "%s: no file matches", pattern);
    else set_err(err, "%s: cannot list the files that match", pattern);
    globfree(g);
    return -1;
}

int dataloader_vocab_size(const char* pattern, char* err) {
    glob_t g;
    if (glob_shards(pattern, &g, err) != 0) return -1;
    ShardHeader h;
    int fd = open_regular_file(g.gl_pathv[0], err);
    int rc = fd < 0 ? -1 : shard_read_header(fd, g.gl_pathv[0], 0, &h, err);
    if (fd >= 0) close(fd);
    globfree(&g);
    return rc == 0 ? h.vocab_size : -1;
}

// S = n_samples samples an epoch, and the batches each rank takes of them: 0, or -1 with err when
// they are fewer than one batch per rank (kind: what the samples are beside their size).
static int set_samples(DataLoader* dl, int64_t n_samples, const char* kind, char* err) {
    int64_t batches = n_samples / ((int64_t)dl->B * dl->world_size);
    if (batches == 0) {
        set_err(err, "%s: %lld tokens in %d shard(s) make %lld samples of T+1 = %d tokens%s, fewer than one batch "
                "of %d for each of %d rank(s)", dl->pattern, (long long)dl->n_tokens, dl->n_shards,
                (long long)n_samples, dl->T + 1, kind, dl->B, dl->world_size);
        return -1;
    }
    dl->n_samples = n_samples;
    dl->batches_per_epoch = batches;
    return 0;
}

DataLoader* dataloader_open(const char* pattern, int B, int T, int rank, int world_size,
                            int shuffle, uint64_t seed, int vocab_size, char* err) {
    if (B < 1 || T < 1 || (int64_t)B * T > INT32_MAX - 1) {
        set_err(err, "data loader: bad batch shape B=%d T=%d", B, T);
        return NULL;
    }
    if (world_size < 1 || rank < 0 || rank >= world_size) {
        set_err(err, "data loader: bad rank %d of world size %d", rank, world_size);
        return NULL;
    }
    if (vocab_size < 1) {
        set_err(err, "data loader: bad vocabulary size %d", vocab_size);
        return NULL;
    }
    glob_t g;
    if (glob_shards(pattern, &g, err) != 0) return NULL;
    DataLoader* dl = calloc(1, sizeof(DataLoader));
    if (!dl) {
        globfree(&g);
        set_err(err, "%s: out of memory", pattern);
        return NULL;
    }
    dl->B = B; dl->T = T; dl->rank = rank; dl->world_size = world_size;
    dl->shuffle = shuffle; dl->seed = seed; dl->vocab_size = vocab_size;
    dl->fd = -1;
    dl->fd_shard = -1;
    int n = (int)g.gl_pathc;
    dl->paths = calloc((size_t)n, sizeof(char*));
    dl->headers = calloc((size_t)n, sizeof(ShardHeader));
    dl->shard_start = calloc((size_t)n + 1, sizeof(int64_t));
    dl->sample = malloc(((size_t)T + 1) * sizeof(int));
    dl->pattern = strdup(pattern);
    if (!dl->paths || !dl->headers || !dl->shard_start || !dl->sample || !dl->pattern) {
        globfree(&g);
        dataloader_close(dl);
        set_err(err, "%s: out of memory", pattern);
        return NULL;
    }
    for (int s = 0; s < n; s++) {
        dl->paths[s] = strdup(g.gl_pathv[s]);
        if (!dl->paths[s]) {
            globfree(&g);
            dataloader_close(dl);
            set_err(err, "%s: out of memory", pattern);
            return NULL;
        }
        dl->n_shards = s + 1;
    }
    globfree(&g);

    for (int s = 0; s < n; s++) {
        int fd = open_regular_file(dl->paths[s], err);
        if (fd < 0) {
            dataloader_close(dl);
            return NULL;
        }
        int rc = shard_read_header(fd, dl->paths[s], vocab_size, &dl->headers[s], err);
        if (rc == 0) rc = check_fingerprint(dl, s, err);
        if (rc == 0) rc = check_sample(dl, s, fd, err);
        close(fd);
        if (rc != 0) {
            dataloader_close(dl);
            return NULL;
        }
        dl->shard_start[s + 1] = dl->shard_start[s] + dl->headers[s].n_tokens;
    }
    dl->n_tokens = dl->shard_start[n];
    if (set_samples(dl, dl->n_tokens > 1 ? (dl->n_tokens - 1) / T : 0, "", err) != 0) {
        dataloader_close(dl);
        return NULL;
    }
    return dl;
}

// Reads the T+1 tokens of sample i into dl->sample; they may span several shards.
static int read_sample(DataLoader* dl, int64_t i, char* err) {
    int64_t pos = dl->sample_start ? dl->sample_start[i] : i * dl->T, end = pos + dl->T + 1;
    // The last shard that starts at or before pos (binary search; empty shards are skipped).
    int lo = 0, hi = dl->n_shards - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (dl->shard_start[mid] <= pos) lo = mid;
        else hi = mid - 1;
    }
    int* out = dl->sample;
    for (int s = lo; pos < end; s++) {
        int64_t take = dl->shard_start[s + 1] - pos;
        if (take <= 0) continue;
        if (take > end - pos) take = end - pos;
        if (open_shard(dl, s, err) != 0 ||
            shard_read_tokens(dl->fd, dl->paths[s], &dl->headers[s], pos - dl->shard_start[s],
                              (size_t)take, out, dl->vocab_size, err) != 0) {
            return -1;
        }
        out += take;
        pos += take;
    }
    return 0;
}

// Tokens read at a time by the walk over the whole stream of dataloader_align_documents.
#define SCAN_TOKENS (1 << 16)

int dataloader_align_documents(DataLoader* dl, int document_token, char* err) {
    if (document_token < 0 || document_token >= dl->vocab_size) {
        set_err(err, "%s: the document token %d is outside the vocabulary of %d", dl->pattern, document_token,
                dl->vocab_size);
        return -1;
    }
    // The greedy walk: each document start at or after the end of the sample before it (the token
    // they share) starts a sample, while its T+1 tokens lie within the stream.
    const int64_t last = dl->n_tokens - 1 - dl->T;   // the last position a sample may start at
    int64_t next = 0, documents = 0, count = 0, capacity = 0;
    int64_t* starts = NULL;
    int* tokens = malloc(SCAN_TOKENS * sizeof(int));
    int rc = 0;
    if (!tokens) {
        set_err(err, "%s: out of memory", dl->pattern);
        rc = -1;
    }
    for (int s = 0; rc == 0 && s < dl->n_shards; s++) {
        const int64_t n = dl->headers[s].n_tokens;
        for (int64_t at = 0; rc == 0 && at < n; at += SCAN_TOKENS) {
            size_t m = n - at < SCAN_TOKENS ? (size_t)(n - at) : SCAN_TOKENS;
            rc = open_shard(dl, s, err);
            if (rc == 0)
                rc = shard_read_tokens(dl->fd, dl->paths[s], &dl->headers[s], at, m, tokens, dl->vocab_size, err);
            for (size_t j = 0; rc == 0 && j < m; j++) {
                if (tokens[j] != document_token) continue;
                documents++;
                int64_t pos = dl->shard_start[s] + at + (int64_t)j;
                if (pos < next || pos > last) continue;
                if (count == capacity) {
                    capacity = capacity ? 2 * capacity : 1024;
                    int64_t* grown = realloc(starts, (size_t)capacity * sizeof(int64_t));
                    if (!grown) {
                        set_err(err, "%s: out of memory for the document starts", dl->pattern);
                        rc = -1;
                        break;
                    }
                    starts = grown;
                }
                starts[count++] = pos;
                next = pos + dl->T;
            }
        }
    }
    free(tokens);
    if (rc == 0 && documents == 0) {
        set_err(err, "%s: none of its %lld tokens is %d, the token that starts a document", dl->pattern,
                (long long)dl->n_tokens, document_token);
        rc = -1;
    }
    if (rc == 0) rc = set_samples(dl, count, " starting at a document", err);
    if (rc != 0) {
        free(starts);
        return -1;
    }
    free(dl->sample_start);
    dl->sample_start = starts;
    dl->documents = documents;
    dataloader_reset(dl);
    return 0;
}

DataLoaderCoverage dataloader_coverage(const DataLoader* dl) {
    return (DataLoaderCoverage){.tokens = dl->n_tokens, .documents = dl->documents, .samples = dl->n_samples,
                                .unseen = dl->n_tokens - 1 - dl->n_samples * dl->T};
}

int dataloader_next(DataLoader* dl, int* inputs, int* targets, char* err) {
    int B = dl->B, T = dl->T;
    int64_t first = (dl->state.step_in_epoch * dl->world_size + dl->rank) * B;
    for (int b = 0; b < B; b++) {
        int64_t i = first + b;
        if (dl->shuffle) i = shuffled_position(i, dl->n_samples, dl->seed, dl->state.epoch);
        if (read_sample(dl, i, err) != 0) return -1;
        memcpy(inputs + (size_t)b * T, dl->sample, (size_t)T * sizeof(int));
        memcpy(targets + (size_t)b * T, dl->sample + 1, (size_t)T * sizeof(int));
    }
    if (++dl->state.step_in_epoch == dl->batches_per_epoch) {
        dl->state.step_in_epoch = 0;
        dl->state.epoch++;
    }
    return 0;
}

int64_t dataloader_batches_per_epoch(const DataLoader* dl) { return dl->batches_per_epoch; }

uint64_t dataloader_fingerprint(const DataLoader* dl) { return dl->fingerprint; }

int dataloader_check_fingerprint(const DataLoader* dl, uint64_t expected, char* err) {
    if (!dl->fingerprint) return 0;
    return shard_check_fingerprint(&dl->headers[dl->fingerprint_from],
                                   dl->paths[dl->fingerprint_from], expected, err);
}

void dataloader_reset(DataLoader* dl) {
    dl->state.epoch = 0;
    dl->state.step_in_epoch = 0;
}

DataLoaderState dataloader_state(const DataLoader* dl) { return dl->state; }

int dataloader_restore(DataLoader* dl, DataLoaderState s, char* err) {
    if (s.epoch < 0 || s.step_in_epoch < 0 || s.step_in_epoch >= dl->batches_per_epoch) {
        set_err(err, "data loader: cannot restore epoch %lld step %lld: this data has %lld "
                "batches per epoch for B=%d T=%d and %d rank(s)", (long long)s.epoch,
                (long long)s.step_in_epoch, (long long)dl->batches_per_epoch, dl->B, dl->T,
                dl->world_size);
        return -1;
    }
    dl->state = s;
    return 0;
}

int dataloader_restore_ranks(DataLoader* dl, DataLoaderState s, int saved_ranks, int* seen_again, char* err) {
    // The same samples of the epoch (the caller bounds the product).
    int64_t samples = s.step_in_epoch * saved_ranks;
    s.step_in_epoch = samples / dl->world_size;
    *seen_again = samples % dl->world_size != 0;
    return dataloader_restore(dl, s, err);
}

void dataloader_describe(const DataLoader* dl, char* out, size_t len) {
    int n = dl->n_shards;
    if (n == 1) snprintf(out, len, "1 shard (%s)", dl->paths[0]);
    else snprintf(out, len, "%d shards (%s to %s)", n, dl->paths[0], dl->paths[n - 1]);
}

int dataloader_val_pattern(const char* train_pattern, char* out, size_t len, char* err) {
    const char* slash = strrchr(train_pattern, '/');
    const char* train_at = strstr(slash ? slash + 1 : train_pattern, "train_");
    if (!train_at) {
        set_err(err, "the train shards' file names have no train_ to take val_");
        return -1;
    }
    if (snprintf(out, len, "%.*sval_%s", (int)(train_at - train_pattern), train_pattern, train_at + strlen("train_")) >=
        (int)len) {
        set_err(err, "%s: path too long", train_pattern);
        return -1;
    }
    return 0;
}
