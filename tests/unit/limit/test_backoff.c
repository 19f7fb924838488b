#include <criterion/criterion.h>

#include <stdbool.h>

#include "backoff.h"

Test(backoff, jitter_stays_between_half_and_the_whole_and_spreads)
{
    uint64_t st = backoff_seed(12345);
    bool low = false, high = false;

    for (int i = 0; i < 10000; i++) {
        uint64_t p = backoff_jitter(100, &st);

        cr_assert(p >= 50 && p <= 100, "%llu", (unsigned long long)p);
        low = low || p < 60;
        high = high || p > 90;
    }
    cr_assert(low && high, "no spread");
}

Test(backoff, jitter_of_nothing_is_nothing_and_of_one_is_zero_or_one)
{
    uint64_t st = backoff_seed(7);

    cr_assert_eq(backoff_jitter(0, &st), 0);
    for (int i = 0; i < 100; i++) {
        cr_assert_leq(backoff_jitter(1, &st), 1);
    }
}

Test(backoff, a_zero_seed_still_gives_numbers)
{
    uint64_t st = backoff_seed(0);

    cr_assert_neq(st, 0);
    for (int i = 0; i < 1000; i++) {
        cr_assert_neq(backoff_random(&st), 0);
    }
}

Test(backoff, doubles_up_to_the_cap_and_never_overflows)
{
    cr_assert_eq(backoff_double(5, 100), 10);
    cr_assert_eq(backoff_double(40, 100), 80);
    cr_assert_eq(backoff_double(80, 100), 100);
    cr_assert_eq(backoff_double(100, 100), 100);
    cr_assert_eq(backoff_double(UINT64_MAX / 2 + 1, UINT64_MAX), UINT64_MAX);
}
