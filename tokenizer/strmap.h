// tokenizer/strmap.h: a hash map from byte strings to int, open addressing with linear probing.
// Keys are not copied: each key's bytes must stay valid while the map is used. Used for the
// words of a training text, the tokens of encoder.json and the pre-token cache of encoding;
// hash_u64 also serves the maps keyed by token pairs.
#ifndef FLASHGPT_STRMAP_H
#define FLASHGPT_STRMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const unsigned char* key;   // NULL: empty slot
    uint64_t hash;
    size_t len;
    int value;
} StrMapSlot;

typedef struct {
    StrMapSlot* slots;   // (mask + 1)
    size_t mask;
    size_t count;
} StrMap;

// Mixes all bits of x into all bits of the result (the murmur3 finalizer).
static inline uint64_t hash_u64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

uint64_t hash_bytes(const unsigned char* s, size_t n);

// expected: how many keys to size for (the map grows past it). 0 on success, -1 out of memory.
int strmap_init(StrMap* m, size_t expected);
void strmap_free(StrMap* m);

// The value stored for key, or -1.
int strmap_get(const StrMap* m, const unsigned char* key, size_t len, uint64_t hash);

// Stores value for a key that is not in the map yet. 0 on success, -1 out of memory.
int strmap_put(StrMap* m, const unsigned char* key, size_t len, uint64_t hash, int value);

#endif
