// tokenizer/strmap.c: the byte-string hash map of strmap.h. Load factor stays at most 1/2.
#include <stdlib.h>
#include <string.h>
#include "tokenizer/strmap.h"

uint64_t hash_bytes(const unsigned char* s, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0x100000001b3ULL;
        h ^= h >> 29;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    return hash_u64(h ^ w);
}

int strmap_init(StrMap* m, size_t expected) {
    size_t cap = 16;
    while (cap < 2 * expected) cap *= 2;
    m->slots = calloc(cap, sizeof(StrMapSlot));
    m->mask = cap - 1;
    m->count = 0;
    return m->slots ? 0 : -1;
}

void strmap_free(StrMap* m) {
    free(m->slots);
    m->slots = NULL;
}

int strmap_get(const StrMap* m, const unsigned char* key, size_t len, uint64_t hash) {
    for (size_t i = hash & m->mask;; i = (i + 1) & m->mask) {
        const StrMapSlot* s = &m->slots[i];
        if (!s->key) return -1;
        if (s->hash == hash && s->len == len && memcmp(s->key, key, len) == 0) return s->value;
    }
}

static void place(StrMapSlot* slots, size_t mask, StrMapSlot slot) {
    size_t i = slot.hash & mask;
    while (slots[i].key) i = (i + 1) & mask;
    slots[i] = slot;
}

int strmap_put(StrMap* m, const unsigned char* key, size_t len, uint64_t hash, int value) {
    if (2 * (m->count + 1) > m->mask + 1) {
        size_t cap = 2 * (m->mask + 1);
        StrMapSlot* slots = calloc(cap, sizeof(StrMapSlot));
        if (!slots) return -1;
        for (size_t i = 0; i <= m->mask; i++)
            if (m->slots[i].key) place(slots, cap - 1, m->slots[i]);
        free(m->slots);
        m->slots = slots;
        m->mask = cap - 1;
    }
    place(m->slots, m->mask, (StrMapSlot){key, hash, len, value});
    m->count++;
    return 0;
}
