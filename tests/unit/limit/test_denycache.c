#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

#include "denycache.h"

static struct limit_result
refusal(uint64_t retry_ms, uint64_t reset_ms)
{
    struct limit_result r = {0};

    r.allowed = false;
    r.remaining = 0;
    r.retry_after_ms = retry_ms;
    r.reset_ms = reset_ms;
    r.rule = 1;
    return r;
}

#define MS 1000ULL /* microseconds */

Test(denycache, refuses_until_retry_after_less_one_ms)
{
    struct denycache *dc = denycache_new(64);
    struct limit_result r = refusal(500, 900), got;

    denycache_put(dc, "k", 1, &r, 10000 * MS);
    cr_assert(denycache_get(dc, "k", 1, 10000 * MS, &got));
    cr_assert_eq(got.retry_after_ms, 500);
    cr_assert_eq(got.reset_ms, 900);
    cr_assert_eq(got.rule, 1);
    cr_assert(!got.allowed);
    /* Counted down with the time that passed since the call went out. */
    cr_assert(denycache_get(dc, "k", 1, 10200 * MS + 999, &got));
    cr_assert_eq(got.retry_after_ms, 300);
    cr_assert_eq(got.reset_ms, 700);
    /* The last refused instant: 498.999 ms after the call. */
    cr_assert(denycache_get(dc, "k", 1, 10499 * MS - 1, &got));
    cr_assert_eq(got.retry_after_ms, 2);
    /* From 499 ms on Redis decides again (its clock counts whole ms). */
    cr_assert(!denycache_get(dc, "k", 1, 10499 * MS, &got));
    cr_assert_eq(denycache_size(dc), 0, "an expired entry is dropped");
    denycache_free(dc);
}

Test(denycache, key_and_cost_both_identify)
{
    struct denycache *dc = denycache_new(64);
    struct limit_result r = refusal(1000, 1000), got;

    denycache_put(dc, "sluice:a:{r:ip:1.2.3.4}", 2, &r, 0);
    cr_assert(denycache_get(dc, "sluice:a:{r:ip:1.2.3.4}", 2, MS, &got));
    /* A smaller cost may pass sooner: not known refused. */
    cr_assert(!denycache_get(dc, "sluice:a:{r:ip:1.2.3.4}", 1, MS, &got));
    cr_assert(!denycache_get(dc, "sluice:a:{r:ip:1.2.3.5}", 2, MS, &got));
    cr_assert(!denycache_get(dc, "sluice:a:{r:ip:1.2.3.4", 2, MS, &got));
    cr_assert(!denycache_get(dc, "sluice:a:{r:ip:1.2.3.4}x", 2, MS, &got));
    denycache_free(dc);
}

Test(denycache, admissions_and_short_refusals_are_not_kept)
{
    struct denycache *dc = denycache_new(64);
    struct limit_result r = refusal(1, 10), got;
    struct limit_result ok = {0};

    denycache_put(dc, "short", 1, &r, 0);
    cr_assert(!denycache_get(dc, "short", 1, 0, &got));
    ok.allowed = true;
    ok.remaining = 3;
    denycache_put(dc, "ok", 1, &ok, 0);
    cr_assert(!denycache_get(dc, "ok", 1, 0, &got));
    cr_assert_eq(denycache_size(dc), 0);
    denycache_free(dc);
}

Test(denycache, a_later_refusal_replaces_the_earlier)
{
    struct denycache *dc = denycache_new(64);
    struct limit_result a = refusal(100, 100), b = refusal(5000, 5000), got;

    denycache_put(dc, "k", 1, &a, 0);
    denycache_put(dc, "k", 1, &b, 50 * MS);
    cr_assert_eq(denycache_size(dc), 1);
    cr_assert(denycache_get(dc, "k", 1, 2000 * MS, &got));
    cr_assert_eq(got.retry_after_ms, 5000 - 1950);
    denycache_free(dc);
}

Test(denycache, full_neighbourhood_gives_up_the_soonest_expiring)
{
    /* 8 slots: every key shares the one neighbourhood. */
    struct denycache *dc = denycache_new(8);
    char key[32];
    struct limit_result got;

    for (unsigned i = 0; i < 8; i++) {
        struct limit_result r = refusal(1000 + i * 100, 2000);

        snprintf(key, sizeof(key), "key%u", i);
        denycache_put(dc, key, 1, &r, 0);
    }
    cr_assert_eq(denycache_size(dc), 8);
    {
        struct limit_result r = refusal(9000, 9000);

        denycache_put(dc, "newcomer", 1, &r, 0);
    }
    cr_assert_eq(denycache_size(dc), 8);
    cr_assert(denycache_get(dc, "newcomer", 1, MS, &got));
    cr_assert(!denycache_get(dc, "key0", 1, MS, &got),
              "key0 expired first, so it gave way");
    for (unsigned i = 1; i < 8; i++) {
        snprintf(key, sizeof(key), "key%u", i);
        cr_assert(denycache_get(dc, key, 1, MS, &got), "%s kept", key);
    }
    denycache_free(dc);
}

Test(denycache, clear_forgets_and_long_keys_are_not_kept)
{
    struct denycache *dc = denycache_new(64);
    struct limit_result r = refusal(1000, 1000), got;
    char long_key[300];

    memset(long_key, 'x', sizeof(long_key) - 1);
    long_key[sizeof(long_key) - 1] = '\0';
    denycache_put(dc, long_key, 1, &r, 0);
    cr_assert(!denycache_get(dc, long_key, 1, 0, &got));
    denycache_put(dc, "k", 1, &r, 0);
    cr_assert(denycache_get(dc, "k", 1, 0, &got));
    denycache_clear(dc);
    cr_assert(!denycache_get(dc, "k", 1, 0, &got));
    cr_assert_eq(denycache_size(dc), 0);
    denycache_free(dc);
}

Test(denycache, a_hold_shorter_than_retry_after_ends_the_refusal_sooner)
{
    struct denycache *dc = denycache_new(64);
    struct limit_result r = refusal(60000, 90000), got;

    denycache_put_for(dc, "k", 1, &r, 10000 * MS, 1000);
    /* The answer still reads as the refusal Redis gave, counted down. */
    cr_assert(denycache_get(dc, "k", 1, 10500 * MS, &got));
    cr_assert_eq(got.retry_after_ms, 59500);
    cr_assert_eq(got.reset_ms, 89500);
    cr_assert(denycache_get(dc, "k", 1, 10999 * MS - 1, &got));
    /* Held for 1 s less 1 ms, not 60 s. */
    cr_assert_not(denycache_get(dc, "k", 1, 10999 * MS, &got));
    /* A hold too short to keep anything keeps nothing. */
    denycache_put_for(dc, "j", 1, &r, 10000 * MS, 1);
    cr_assert_eq(denycache_size(dc), 0);
    denycache_free(dc);
}
