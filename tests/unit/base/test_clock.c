/*
 * The clocks: microseconds resolve below a millisecond, and the clocks
 * agree with each other.
 */
#include <criterion/criterion.h>
#include <stdint.h>

#include "clock.h"

/* The first change of clock_mono_us() is far less than a millisecond:
 * a duration read with it keeps its sub-millisecond part. The least of
 * 100 first changes: one preemption between two reads must not decide
 * it. A millisecond clock would give 1000 each time. */
Test(clock, mono_us_resolves_below_a_millisecond)
{
    int64_t step = INT64_MAX;

    for (int i = 0; i < 100; i++) {
        int64_t a = clock_mono_us(), b;

        do {
            b = clock_mono_us();
        } while (b == a);
        cr_assert_gt(b - a, 0);
        step = b - a < step ? b - a : step;
    }
    cr_assert_lt(step, 1000, "the clock moves by %lld us", (long long)step);
}

/* Both monotonic clocks count the same time. */
Test(clock, mono_us_and_mono_ms_agree)
{
    int64_t us = clock_mono_us(), ms = clock_mono_ms(), us2 = clock_mono_us();

    cr_assert_geq(ms, us / 1000);
    cr_assert_leq(ms, us2 / 1000);
}
