// common/rng.h: splitmix64, the one random generator of the project: the model's init, the
// sampler, the data loader's shuffle and the tests' inputs. Its state is one integer, so a
// training state saves it whole.
#ifndef FLASHGPT_RNG_H
#define FLASHGPT_RNG_H

#include <math.h>
#include <stdint.h>

// The mixing function: a well-spread 64-bit value of x.
static inline uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

typedef struct { uint64_t state; } Rng;

static inline uint64_t rng_next(Rng* r) {
    uint64_t x = splitmix64(r->state);
    r->state += 0x9e3779b97f4a7c15ULL;
    return x;
}
// Uniform in (0, 1].
static inline double rng_uniform(Rng* r) { return ((rng_next(r) >> 11) + 1) * (1.0 / 9007199254740992.0); }
// Standard normal (Box-Muller).
static inline double rng_normal(Rng* r) {
    double u1 = rng_uniform(r), u2 = rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

#endif
