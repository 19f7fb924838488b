/*
 * backoff.c - doubling, jittered pauses (see backoff.h).
 */
#include "backoff.h"

uint64_t
backoff_seed(uint64_t seed)
{
    return seed != 0 ? seed : 0x9e3779b97f4a7c15ULL;
}

uint64_t
backoff_random(uint64_t *state)
{
    uint64_t x = *state;

    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    return x;
}

uint64_t
backoff_jitter(uint64_t pause_ms, uint64_t *state)
{
    uint64_t half = pause_ms / 2;

    return half + backoff_random(state) % (half + 1);
}

uint64_t
backoff_double(uint64_t pause_ms, uint64_t max_ms)
{
    if (pause_ms > max_ms / 2) {
        return max_ms;
    }
    return pause_ms * 2;
}
