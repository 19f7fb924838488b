/*
 * clock.h - the time helpers every module needs: wall-clock and
 * monotonic milliseconds (and monotonic microseconds), and milliseconds
 * as a struct timeval for libevent timers. Reads the clock; no other I/O.
 */
#ifndef SLUICE_CLOCK_H
#define SLUICE_CLOCK_H

#include <stdint.h>
#include <sys/time.h>

/* Milliseconds since the epoch (CLOCK_REALTIME): for logs and limiters. */
int64_t clock_wall_ms(void);
/* Milliseconds on CLOCK_MONOTONIC: for durations and deadlines. */
int64_t clock_mono_ms(void);
/* Microseconds on CLOCK_MONOTONIC: for durations shorter than a few ms
 * (a histogram's sub-millisecond buckets). */
int64_t clock_mono_us(void);
/* 'ms' as a timeval. */
struct timeval clock_tv(uint64_t ms);

#endif
