/*
 * backoff.h - pauses before a retry: doubled after each failure up to a
 * cap, and jittered (half the pause plus up to as much again at random),
 * so that workers and gateways that failed together do not all retry at
 * once. Pure: no I/O, no clock; the caller keeps the random state (one
 * per client, never shared between threads).
 */
#ifndef SLUICE_BACKOFF_H
#define SLUICE_BACKOFF_H

#include <stdint.h>

/* A random state from 'seed' (any value: the state is never 0). */
uint64_t backoff_seed(uint64_t seed);

/* The next number of the xorshift generator of '*state' (not 0). */
uint64_t backoff_random(uint64_t *state);

/* The pause to wait for a backoff of 'pause_ms': from half of it to
 * half of it plus half again (rounded down), at random. */
uint64_t backoff_jitter(uint64_t pause_ms, uint64_t *state);

/* The backoff after 'pause_ms': doubled, at most 'max_ms'. */
uint64_t backoff_double(uint64_t pause_ms, uint64_t max_ms);

#endif
