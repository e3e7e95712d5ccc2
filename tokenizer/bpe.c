// tokenizer/bpe.c: a Tokenizer's construction from checked parts, encoding (GPT-2's merge order)
// and decoding. Encoding splits text into pre-tokens (pretokenize.h) and, inside each, merges the
// adjacent pair of lowest rank until none is left, as GPT-2 does; a cache of pre-token -> ids
// makes each distinct pre-token cost one BPE run per call. Encoding keeps all its state in the
// call, so one tokenizer may encode from several threads at once.
#include <stdlib.h>
#include <string.h>
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/strmap.h"

#define PAIR_EMPTY UINT64_MAX
#define DEAD (-1)
// Pre-tokens longer than this are rare enough not to be worth caching.
#define CACHE_MAX_TOKEN_BYTES 64
#define CACHE_MAX_ENTRIES (1 << 20)

int tokenizer_pair_rank(const Tokenizer* t, int left, int right) {
    uint64_t key = pair_key(left, right);
    for (uint64_t i = hash_u64(key) & t->pair_mask;; i = (i + 1) & t->pair_mask) {
        if (t->pair_slots[i].key == key) return t->pair_slots[i].rank;
        if (t->pair_slots[i].key == PAIR_EMPTY) return -1;
    }
}

static size_t token_len(const Tokenizer* t, int id) {
    return t->token_offset[id + 1] - t->token_offset[id];
}

Tokenizer* tokenizer_assemble(int vocab_size, uint32_t* token_offset, unsigned char* token_bytes,
                              int eot, BpeMerge* merges, int n_merges, const char* source, char* err) {
    Tokenizer* t = calloc(1, sizeof(Tokenizer));
    if (!t) {
        free(token_offset); free(token_bytes); free(merges);
        set_err(err, "%s: out of memory", source);
        return NULL;
    }
    t->vocab_size = vocab_size;
    t->eot = eot;
    t->token_offset = token_offset;
    t->token_bytes = token_bytes;
    t->merges = merges;
    t->n_merges = n_merges;

    if (vocab_size < 257 || vocab_size > TOKENIZER_MAX_VOCAB) {
        set_err(err, "%s: vocabulary size %d outside [257, %d]", source, vocab_size, TOKENIZER_MAX_VOCAB);
        goto fail;
    }
    if (eot < 0 || eot >= vocab_size) {
        set_err(err, "%s: <|endoftext|> id %d outside the vocabulary of %d", source, eot, vocab_size);
        goto fail;
    }
    if (n_merges < 0 || n_merges > vocab_size) {
        set_err(err, "%s: %d merges for a vocabulary of %d", source, n_merges, vocab_size);
        goto fail;
    }
    for (int b = 0; b < 256; b++) t->byte_ids[b] = -1;
    for (int id = 0; id < vocab_size; id++) {
        if (token_offset[id + 1] < token_offset[id]) {
            set_err(err, "%s: token %d has a negative length", source, id);
            goto fail;
        }
        if (token_len(t, id) != 1 || id == eot) continue;
        unsigned char b = token_bytes[token_offset[id]];
        if (t->byte_ids[b] >= 0) {
            set_err(err, "%s: byte 0x%02X is both token %d and token %d", source, b, t->byte_ids[b], id);
            goto fail;
        }
        t->byte_ids[b] = id;
    }
    for (int b = 0; b < 256; b++) {
        if (t->byte_ids[b] < 0) {
            set_err(err, "%s: byte 0x%02X has no token of its own", source, b);
            goto fail;
        }
    }

    uint64_t cap = 16;
    while (cap < 2 * (uint64_t)n_merges) cap *= 2;
    t->pair_slots = malloc(cap * sizeof(PairSlot));
    if (!t->pair_slots) {
        set_err(err, "%s: out of memory", source);
        goto fail;
    }
    t->pair_mask = cap - 1;
    for (uint64_t i = 0; i < cap; i++) t->pair_slots[i].key = PAIR_EMPTY;
    for (int r = 0; r < n_merges; r++) {
        BpeMerge m = merges[r];
        if (m.left < 0 || m.left >= vocab_size || m.right < 0 || m.right >= vocab_size ||
            m.result < 0 || m.result >= vocab_size) {
            set_err(err, "%s: merge %d (%d, %d -> %d) has an id outside the vocabulary of %d",
                    source, r, m.left, m.right, m.result, vocab_size);
            goto fail;
        }
        if (m.left == eot || m.right == eot || m.result == eot) {
            set_err(err, "%s: merge %d uses the <|endoftext|> token", source, r);
            goto fail;
        }
        size_t ll = token_len(t, m.left), lr = token_len(t, m.right);
        if (token_len(t, m.result) != ll + lr ||
            memcmp(token_bytes + token_offset[m.result], token_bytes + token_offset[m.left], ll) != 0 ||
            memcmp(token_bytes + token_offset[m.result] + ll, token_bytes + token_offset[m.right], lr) != 0) {
            set_err(err, "%s: merge %d: token %d is not token %d followed by token %d",
                    source, r, m.result, m.left, m.right);
            goto fail;
        }
        uint64_t key = pair_key(m.left, m.right);
        uint64_t i = hash_u64(key) & t->pair_mask;
        while (t->pair_slots[i].key != PAIR_EMPTY && t->pair_slots[i].key != key) i = (i + 1) & t->pair_mask;
        if (t->pair_slots[i].key == key) {
            set_err(err, "%s: merges %d and %d both merge tokens %d and %d",
                    source, t->pair_slots[i].rank, r, m.left, m.right);
            goto fail;
        }
        t->pair_slots[i] = (PairSlot){key, r};
    }
    return t;
fail:
    tokenizer_free(t);
    return NULL;
}

void tokenizer_free(Tokenizer* t) {
    if (!t) return;
    free(t->token_offset);
    free(t->token_bytes);
    free(t->merges);
    free(t->pair_slots);
    free(t);
}

int tokenizer_vocab_size(const Tokenizer* t) { return t->vocab_size; }
int tokenizer_eot(const Tokenizer* t) { return t->eot; }

const unsigned char* tokenizer_token(const Tokenizer* t, int id, size_t* len) {
    if (id < 0 || id >= t->vocab_size) return NULL;
    *len = token_len(t, id);
    return t->token_bytes + t->token_offset[id];
}

size_t tokenizer_decode(const Tokenizer* t, const int* ids, size_t n, unsigned char* out) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->vocab_size) continue;
        size_t len = token_len(t, ids[i]);
        if (out) memcpy(out + total, t->token_bytes + t->token_offset[ids[i]], len);
        total += len;
    }
    return total;
}

// ---------------------------------------------------------------------------------------------
// Encoding

// A pending merge inside one pre-token: the pair that starts at symbol pos has rank rank.
typedef struct {
    int rank;
    size_t pos;
} Candidate;

// Scratch space of one encode call, sized for its longest pre-token so far.
typedef struct {
    int* id;            // (cap) symbol ids, DEAD once merged into the symbol on its left
    size_t* next;       // (cap) index of the next live symbol; n at the end
    size_t* prev;       // (cap) index of the previous live symbol; SIZE_MAX at the start
    size_t* merged;     // (cap) symbols that took a merge in the current round
    Candidate* heap;    // (3 * cap) min-heap by (rank, pos)
    size_t cap;
} Scratch;

// Pre-token -> where its ids were first written in the output of this call.
typedef struct {
    size_t out_pos;
    size_t n_ids;
} CacheEntry;

typedef struct {
    StrMap map;              // pre-token bytes -> index into entries; map.slots NULL: no cache
    CacheEntry* entries;     // (cap)
    size_t n_entries, cap;
} Cache;

// encode() has no way to report failure; running out of memory is fatal there.
static void* xrealloc(void* p, size_t bytes) {
    void* q = realloc(p, bytes);
    if (!q) die("tokenizer_encode: out of memory (%zu bytes)", bytes);
    return q;
}

static void scratch_reserve(Scratch* s, size_t n) {
    if (n <= s->cap) return;
    size_t cap = s->cap ? s->cap : 64;
    while (cap < n) cap *= 2;
    s->id = xrealloc(s->id, cap * sizeof(int));
    s->next = xrealloc(s->next, cap * sizeof(size_t));
    s->prev = xrealloc(s->prev, cap * sizeof(size_t));
    s->merged = xrealloc(s->merged, cap * sizeof(size_t));
    s->heap = xrealloc(s->heap, 3 * cap * sizeof(Candidate));
    s->cap = cap;
}

static int candidate_less(Candidate a, Candidate b) {
    return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos);
}

static void heap_push(Candidate* h, size_t* n, Candidate c) {
    size_t i = (*n)++;
    while (i > 0 && candidate_less(c, h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = c;
}

static Candidate heap_pop(Candidate* h, size_t* n) {
    Candidate top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= *n) break;
        if (child + 1 < *n && candidate_less(h[child + 1], h[child])) child++;
        if (!candidate_less(h[child], last)) break;
        h[i] = h[child];
        i = child;
    }
    if (*n) h[i] = last;
    return top;
}

static void push_pair(const Tokenizer* t, Scratch* s, size_t* heap_n, size_t pos, size_t n) {
    if (pos >= n || s->next[pos] >= n) return;
    int rank = tokenizer_pair_rank(t, s->id[pos], s->id[s->next[pos]]);
    if (rank >= 0) heap_push(s->heap, heap_n, (Candidate){rank, pos});
}

// BPE on one pre-token of n bytes; writes its ids to out and returns how many.
// GPT-2's order, in rounds: take the lowest rank r among the adjacent pairs, merge every
// occurrence of that pair left to right, repeat. Candidates pop by (rank, position), so a round
// is the run of pops of one rank; the pairs a round creates join the heap only after it ends,
// since one of them may have a lower rank than r (a token reachable by two merges) and must not
// interrupt the round.
static size_t encode_pretoken(const Tokenizer* t, const unsigned char* w, size_t n, int* out, Scratch* s) {
    if (n == 1) {
        out[0] = t->byte_ids[w[0]];
        return 1;
    }
    scratch_reserve(s, n);
    for (size_t i = 0; i < n; i++) {
        s->id[i] = t->byte_ids[w[i]];
        s->next[i] = i + 1;
        s->prev[i] = i - 1;   // wraps to SIZE_MAX for i == 0
    }
    size_t heap_n = 0;
    for (size_t i = 0; i + 1 < n; i++) push_pair(t, s, &heap_n, i, n);
    while (heap_n) {
        int rank = s->heap[0].rank;
        size_t n_merged = 0;
        while (heap_n && s->heap[0].rank == rank) {
            size_t i = heap_pop(s->heap, &heap_n).pos;
            if (s->id[i] == DEAD || s->next[i] >= n) continue;
            size_t j = s->next[i];
            if (tokenizer_pair_rank(t, s->id[i], s->id[j]) != rank) continue;   // stale
            s->id[i] = t->merges[rank].result;
            s->id[j] = DEAD;
            s->next[i] = s->next[j];
            if (s->next[i] < n) s->prev[s->next[i]] = i;
            s->merged[n_merged++] = i;
        }
        for (size_t k = 0; k < n_merged; k++) {
            size_t i = s->merged[k];
            if (s->prev[i] != SIZE_MAX) push_pair(t, s, &heap_n, s->prev[i], n);
            push_pair(t, s, &heap_n, i, n);
        }
    }
    size_t count = 0;
    for (size_t i = 0; i < n; i = s->next[i]) out[count++] = s->id[i];
    return count;
}

static void cache_init(Cache* c, size_t text_len) {
    *c = (Cache){0};
    c->cap = text_len / 32 < CACHE_MAX_ENTRIES ? text_len / 32 + 16 : CACHE_MAX_ENTRIES;
    c->entries = malloc(c->cap * sizeof(CacheEntry));
    if (c->entries && strmap_init(&c->map, c->cap) == 0) return;
    free(c->entries);
    c->entries = NULL;
}

// Remembers that pre-token w's ids are at out_pos; a cache that cannot grow just stops growing.
static void cache_add(Cache* c, const unsigned char* w, size_t n, uint64_t hash, size_t out_pos, size_t n_ids) {
    if (c->n_entries == c->cap) {
        if (c->cap == CACHE_MAX_ENTRIES) return;
        size_t cap = 2 * c->cap < CACHE_MAX_ENTRIES ? 2 * c->cap : CACHE_MAX_ENTRIES;
        CacheEntry* entries = realloc(c->entries, cap * sizeof(CacheEntry));
        if (!entries) return;
        c->entries = entries;
        c->cap = cap;
    }
    if (strmap_put(&c->map, w, n, hash, (int)c->n_entries) == 0)
        c->entries[c->n_entries++] = (CacheEntry){out_pos, n_ids};
}

static void cache_free(Cache* c) {
    if (c->map.slots) strmap_free(&c->map);
    free(c->entries);
}

size_t tokenizer_encode(const Tokenizer* t, const unsigned char* text, size_t len, int* out) {
    Scratch scratch = {0};
    Cache cache;
    cache_init(&cache, len);
    size_t n_out = 0;
    for (size_t pos = 0; pos < len;) {
        const unsigned char* w = text + pos;
        size_t n = pretoken_len(w, len - pos);
        pos += n;
        if (n > CACHE_MAX_TOKEN_BYTES || !cache.map.slots) {
            n_out += encode_pretoken(t, w, n, out + n_out, &scratch);
            continue;
        }
        uint64_t h = hash_bytes(w, n);
        int hit = strmap_get(&cache.map, w, n, h);
        if (hit >= 0) {
            CacheEntry e = cache.entries[hit];
            memcpy(out + n_out, out + e.out_pos, e.n_ids * sizeof(int));
            n_out += e.n_ids;
            continue;
        }
        size_t n_ids = encode_pretoken(t, w, n, out + n_out, &scratch);
        cache_add(&cache, w, n, h, n_out, n_ids);
        n_out += n_ids;
    }
    cache_free(&cache);
    free(scratch.id);
    free(scratch.next);
    free(scratch.prev);
    free(scratch.merged);
    free(scratch.heap);
    return n_out;
}
