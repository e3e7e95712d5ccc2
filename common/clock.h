// common/clock.h: wall time for the programs' and tests' timings, from the monotonic clock (a
// change of the system time does not move it).
#ifndef FLASHGPT_CLOCK_H
#define FLASHGPT_CLOCK_H

#include <time.h>

static inline double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

#endif
