// tokenizer/bpe_train.c: learning BPE merges from a text.
// The text is split into pre-tokens and counted once: training works on the distinct words,
// each with its count. Pair counts are kept up to date incrementally: merging a pair only
// touches the words that contain it (found through a pair -> words index), and only the pairs
// next to each merged occurrence change. The most frequent pair comes from a max-heap whose
// stale entries (count changed since the push) are skipped when popped.
// Ties between equally frequent pairs go to the smaller (left id, right id), so training is
// deterministic. Merge r creates id 256 + r; <|endoftext|> is the last id.
#include <stdlib.h>
#include <string.h>
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/strmap.h"

typedef struct {
    uint64_t key;        // left << 32 | right
    int64_t count;       // occurrences in the text
    int* words;          // (n_words) words that contain or once contained the pair; may repeat
    int n_words, cap_words;
    int touched_at;      // last merge step that changed count
} Pair;

typedef struct {
    int64_t count;
    uint64_t key;
} HeapEntry;

typedef struct {
    const unsigned char* text;   // its bytes in the training text
    int64_t count;               // occurrences in the text
    size_t start;                // its symbols are symbols[start .. start + len)
    int len;
    int seen_at;                 // last merge step that visited the word
} Word;

typedef struct {
    Word* words;         // (n_words) the distinct pre-tokens
    int n_words, cap_words;
    int* symbols;
    // Pairs, found through an open-addressing table of indices into pairs (-1: empty).
    Pair* pairs;
    int n_pairs, cap_pairs;
    int* slots;
    uint64_t slot_mask;
    // Pairs changed by the current merge step.
    int* touched;
    int n_touched, cap_touched;
    HeapEntry* heap;
    size_t heap_n, heap_cap;
} Trainer;

static int grow(void** p, int* cap, int need, size_t elem) {
    if (need <= *cap) return 0;
    if (need > INT32_MAX / 2) return -1;
    int cap2 = *cap ? *cap : 8;
    while (cap2 < need) cap2 *= 2;
    void* q = realloc(*p, (size_t)cap2 * elem);
    if (!q) return -1;
    *p = q;
    *cap = cap2;
    return 0;
}

// Index of the pair, created with count 0 if new; -1 out of memory.
static int pair_index(Trainer* tr, uint64_t key) {
    uint64_t i = hash_u64(key) & tr->slot_mask;
    for (; tr->slots[i] >= 0; i = (i + 1) & tr->slot_mask)
        if (tr->pairs[tr->slots[i]].key == key) return tr->slots[i];
    if (2 * (uint64_t)(tr->n_pairs + 1) > tr->slot_mask + 1) {
        uint64_t cap = 2 * (tr->slot_mask + 1);
        int* slots = malloc(cap * sizeof(int));
        if (!slots) return -1;
        memset(slots, 0xFF, cap * sizeof(int));
        for (int p = 0; p < tr->n_pairs; p++) {
            uint64_t j = hash_u64(tr->pairs[p].key) & (cap - 1);
            while (slots[j] >= 0) j = (j + 1) & (cap - 1);
            slots[j] = p;
        }
        free(tr->slots);
        tr->slots = slots;
        tr->slot_mask = cap - 1;
        i = hash_u64(key) & tr->slot_mask;
        while (tr->slots[i] >= 0) i = (i + 1) & tr->slot_mask;
    }
    if (grow((void**)&tr->pairs, &tr->cap_pairs, tr->n_pairs + 1, sizeof(Pair))) return -1;
    tr->pairs[tr->n_pairs] = (Pair){key, 0, NULL, 0, 0, INT32_MIN};
    tr->slots[i] = tr->n_pairs;
    return tr->n_pairs++;
}

// Adds delta to the count of (left, right) as of merge step; a positive delta records that word
// contains the pair. 0 on success, -1 out of memory.
static int add_pair(Trainer* tr, int left, int right, int64_t delta, int word, int step) {
    int p = pair_index(tr, pair_key(left, right));
    if (p < 0) return -1;
    Pair* pr = &tr->pairs[p];
    pr->count += delta;
    if (delta > 0 && (pr->n_words == 0 || pr->words[pr->n_words - 1] != word)) {
        if (grow((void**)&pr->words, &pr->cap_words, pr->n_words + 1, sizeof(int))) return -1;
        pr->words[pr->n_words++] = word;
    }
    if (pr->touched_at != step) {
        pr->touched_at = step;
        if (grow((void**)&tr->touched, &tr->cap_touched, tr->n_touched + 1, sizeof(int))) return -1;
        tr->touched[tr->n_touched++] = p;
    }
    return 0;
}

static int heap_before(HeapEntry a, HeapEntry b) {
    return a.count > b.count || (a.count == b.count && a.key < b.key);
}

static int heap_push(Trainer* tr, HeapEntry e) {
    if (tr->heap_n == tr->heap_cap) {
        size_t cap = tr->heap_cap ? 2 * tr->heap_cap : 1024;
        HeapEntry* h = realloc(tr->heap, cap * sizeof(HeapEntry));
        if (!h) return -1;
        tr->heap = h;
        tr->heap_cap = cap;
    }
    size_t i = tr->heap_n++;
    while (i > 0 && heap_before(e, tr->heap[(i - 1) / 2])) {
        tr->heap[i] = tr->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    tr->heap[i] = e;
    return 0;
}

static HeapEntry heap_pop(Trainer* tr) {
    HeapEntry* h = tr->heap;
    HeapEntry top = h[0], last = h[--tr->heap_n];
    size_t n = tr->heap_n, i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= n) break;
        if (child + 1 < n && heap_before(h[child + 1], h[child])) child++;
        if (!heap_before(h[child], last)) break;
        h[i] = h[child];
        i = child;
    }
    if (n) h[i] = last;
    return top;
}

// Pushes the current count of every pair the step touched; -1 out of memory.
static int push_touched(Trainer* tr) {
    for (int k = 0; k < tr->n_touched; k++) {
        Pair* p = &tr->pairs[tr->touched[k]];
        if (p->count > 0 && heap_push(tr, (HeapEntry){p->count, p->key})) return -1;
    }
    tr->n_touched = 0;
    return 0;
}

// The pair to merge next, or -1 when no pair is left.
static int pop_best(Trainer* tr) {
    while (tr->heap_n) {
        HeapEntry e = heap_pop(tr);
        int p = pair_index(tr, e.key);   // exists: it was pushed
        if (p >= 0 && tr->pairs[p].count == e.count) return p;
    }
    return -1;
}

// Merges every occurrence of (left, right) in word w into new_id, left to right, and updates
// the counts of the pairs around each occurrence. The neighbor on the left is read from the
// already merged part, so back-to-back occurrences are counted right. -1 out of memory.
static int merge_word(Trainer* tr, int w, int left, int right, int new_id, int step) {
    int* s = tr->symbols + tr->words[w].start;
    int len = tr->words[w].len, out = 0;
    int64_t c = tr->words[w].count;
    for (int i = 0; i < len;) {
        if (i + 1 < len && s[i] == left && s[i + 1] == right) {
            if (out > 0 && (add_pair(tr, s[out - 1], left, -c, w, step) ||
                            add_pair(tr, s[out - 1], new_id, c, w, step))) return -1;
            if (i + 2 < len && (add_pair(tr, right, s[i + 2], -c, w, step) ||
                                add_pair(tr, new_id, s[i + 2], c, w, step))) return -1;
            s[out++] = new_id;
            i += 2;
        } else {
            s[out++] = s[i++];
        }
    }
    tr->words[w].len = out;
    return 0;
}

// Splits the text into pre-tokens and fills the distinct words with their counts and bytes as
// symbols. -1 out of memory.
static int count_words(Trainer* tr, const unsigned char* text, size_t len) {
    StrMap map;
    if (strmap_init(&map, 1024)) return -1;
    size_t n_bytes = 0;
    for (size_t pos = 0; pos < len;) {
        const unsigned char* w = text + pos;
        size_t n = pretoken_len(w, len - pos);
        pos += n;
        uint64_t h = hash_bytes(w, n);
        int idx = strmap_get(&map, w, n, h);
        if (idx >= 0) {
            tr->words[idx].count++;
            continue;
        }
        if (n > INT32_MAX || tr->n_words == INT32_MAX ||
            grow((void**)&tr->words, &tr->cap_words, tr->n_words + 1, sizeof(Word)) ||
            strmap_put(&map, w, n, h, tr->n_words)) {
            strmap_free(&map);
            return -1;
        }
        tr->words[tr->n_words++] = (Word){w, 1, n_bytes, (int)n, -1};
        n_bytes += n;
    }
    strmap_free(&map);
    tr->symbols = malloc((n_bytes ? n_bytes : 1) * sizeof(int));
    if (!tr->symbols) return -1;
    for (int w = 0; w < tr->n_words; w++)
        for (int i = 0; i < tr->words[w].len; i++)
            tr->symbols[tr->words[w].start + i] = tr->words[w].text[i];
    return 0;
}

static void trainer_free(Trainer* tr) {
    free(tr->words);
    free(tr->symbols);
    for (int p = 0; p < tr->n_pairs; p++) free(tr->pairs[p].words);
    free(tr->pairs);
    free(tr->slots);
    free(tr->touched);
    free(tr->heap);
}

// Learns up to max_merges merges into merges; returns how many (fewer when the text runs out
// of pairs), or -1 out of memory.
static int learn_merges(Trainer* tr, const unsigned char* text, size_t len, BpeMerge* merges,
                        int max_merges, int verbose) {
    tr->slots = malloc(1024 * sizeof(int));
    if (!tr->slots) return -1;
    memset(tr->slots, 0xFF, 1024 * sizeof(int));
    tr->slot_mask = 1023;
    if (count_words(tr, text, len)) return -1;
    if (verbose) fprintf(stderr, "bpe: %zu bytes, %d distinct words\n", len, tr->n_words);

    for (int w = 0; w < tr->n_words; w++) {
        const int* s = tr->symbols + tr->words[w].start;
        for (int i = 0; i + 1 < tr->words[w].len; i++)
            if (add_pair(tr, s[i], s[i + 1], tr->words[w].count, w, -1)) return -1;
    }
    if (push_touched(tr)) return -1;

    int step = 0;
    for (; step < max_merges; step++) {
        int best = pop_best(tr);
        if (best < 0) break;
        uint64_t key = tr->pairs[best].key;
        int left = (int)(key >> 32), right = (int)(key & 0xFFFFFFFFu), new_id = 256 + step;
        merges[step] = (BpeMerge){left, right, new_id};
        if (verbose && (step % 1000 == 0 || step == max_merges - 1))
            fprintf(stderr, "bpe: merge %d/%d: (%d, %d) -> %d, count %lld\n", step + 1, max_merges,
                    left, right, new_id, (long long)tr->pairs[best].count);
        // The pair's word list is not appended to while it is walked: new pairs hold new_id.
        int* words = tr->pairs[best].words;
        int n_words = tr->pairs[best].n_words;
        for (int k = 0; k < n_words; k++) {
            int w = words[k];
            if (tr->words[w].seen_at == step) continue;
            tr->words[w].seen_at = step;
            if (merge_word(tr, w, left, right, new_id, step)) return -1;
        }
        Pair* merged = &tr->pairs[best];
        free(merged->words);
        merged->words = NULL;
        merged->n_words = merged->cap_words = 0;
        merged->count = 0;   // every occurrence is merged now
        if (push_touched(tr)) return -1;
    }
    return step;
}

Tokenizer* tokenizer_train(const unsigned char* text, size_t len, int vocab_size, int verbose) {
    if (vocab_size < 257 || vocab_size > TOKENIZER_MAX_VOCAB) return NULL;
    int max_merges = vocab_size - 257;
    BpeMerge* merges = malloc((max_merges ? max_merges : 1) * sizeof(BpeMerge));
    if (!merges) return NULL;
    Trainer tr = {0};
    int n_merges = learn_merges(&tr, text, len, merges, max_merges, verbose);
    trainer_free(&tr);
    if (n_merges < 0) {
        free(merges);
        return NULL;
    }

    // Token bytes: the 256 bytes, each merge's left then right, then <|endoftext|>.
    int n_vocab = 256 + n_merges + 1;
    uint32_t* offset = malloc((size_t)(n_vocab + 1) * sizeof(uint32_t));
    size_t total = 256 + strlen(EOT_TEXT);
    uint32_t* token_len = malloc((size_t)n_vocab * sizeof(uint32_t));
    if (!offset || !token_len) goto oom;
    for (int id = 0; id < 256; id++) token_len[id] = 1;
    for (int r = 0; r < n_merges; r++) {
        token_len[256 + r] = token_len[merges[r].left] + token_len[merges[r].right];
        total += token_len[256 + r];
        if (total > TOKENIZER_MAX_TOKEN_BYTES) goto oom;
    }
    token_len[n_vocab - 1] = strlen(EOT_TEXT);
    unsigned char* bytes = malloc(total);
    if (!bytes) goto oom;
    offset[0] = 0;
    for (int id = 0; id < n_vocab; id++) offset[id + 1] = offset[id] + token_len[id];
    for (int id = 0; id < 256; id++) bytes[id] = (unsigned char)id;
    for (int r = 0; r < n_merges; r++) {
        BpeMerge m = merges[r];
        unsigned char* dst = bytes + offset[m.result];
        memcpy(dst, bytes + offset[m.left], token_len[m.left]);
        memcpy(dst + token_len[m.left], bytes + offset[m.right], token_len[m.right]);
    }
    memcpy(bytes + offset[n_vocab - 1], EOT_TEXT, strlen(EOT_TEXT));
    free(token_len);
    if (verbose && n_merges < max_merges)
        fprintf(stderr, "bpe: the text has no pairs left after %d merges: vocabulary of %d\n",
                n_merges, n_vocab);
    char err[ERR_LEN];
    return tokenizer_assemble(n_vocab, offset, bytes, n_vocab - 1, merges, n_merges, "training", err);
oom:
    free(offset);
    free(token_len);
    free(merges);
    return NULL;
}
