#include <criterion/criterion.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "algo.h"

/* Every expected value below is worked out by hand from algo.h. */

static struct limiter_def
def_one(enum limit_algorithm a, uint64_t limit, uint64_t window_ms,
        uint64_t burst)
{
    struct limiter_def d;

    memset(&d, 0, sizeof(d));
    d.algorithm = a;
    d.rules[0].limit = limit;
    d.rules[0].window_ms = window_ms;
    d.rules[0].burst = burst;
    d.nrules = 1;
    return d;
}

static void
add_rule(struct limiter_def *d, uint64_t limit, uint64_t window_ms,
         uint64_t burst)
{
    d->rules[d->nrules].limit = limit;
    d->rules[d->nrules].window_ms = window_ms;
    d->rules[d->nrules].burst = burst;
    d->nrules++;
}

static void
states_free(struct algo_state *st, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        algo_state_reset(&st[i]);
    }
}

/* One decision that must be valid, checked field by field. */
static void
expect_at(int line, const struct limiter_def *d, struct algo_state *st,
          uint64_t now, uint64_t cost, bool allowed, int64_t remaining,
          uint64_t retry, uint64_t reset, uint64_t delay, unsigned rule)
{
    struct limit_result r;

    cr_assert_eq(algo_decide(d, st, now, cost, &r), 0, "line %d", line);
    cr_assert_eq(r.allowed, allowed, "line %d: allowed %d", line, r.allowed);
    cr_assert_eq(r.remaining, remaining, "line %d: remaining %lld", line,
                 (long long)r.remaining);
    cr_assert_eq(r.retry_after_ms, retry, "line %d: retry %llu", line,
                 (unsigned long long)r.retry_after_ms);
    cr_assert_eq(r.reset_ms, reset, "line %d: reset %llu", line,
                 (unsigned long long)r.reset_ms);
    cr_assert_eq(r.delay_ms, delay, "line %d: delay %llu", line,
                 (unsigned long long)r.delay_ms);
    cr_assert_eq(r.rule, rule, "line %d: rule %u", line, r.rule);
}

#define EXPECT(d, st, now, cost, allowed, rem, retry, reset, delay, rule)      \
    expect_at(__LINE__, d, st, now, cost, allowed, rem, retry, reset, delay,   \
              rule)
#define ALLOW(d, st, now, cost, rem, reset, delay)                             \
    EXPECT(d, st, now, cost, true, rem, 0, reset, delay, 0)
#define DENY(d, st, now, cost, rem, retry, reset)                              \
    EXPECT(d, st, now, cost, false, rem, retry, reset, 0, 0)

/* Admissions of 'cost' at every millisecond in [from, to). */
static unsigned
admitted_between(const struct limiter_def *d, struct algo_state *st,
                 uint64_t from, uint64_t to, uint64_t cost)
{
    unsigned n = 0;

    for (uint64_t t = from; t < to; t++) {
        struct limit_result r;

        cr_assert_eq(algo_decide(d, st, t, cost, &r), 0);
        n += r.allowed;
    }
    return n;
}

/*
 * Validation.
 */

Test(algo, invalid_costs_are_refused_and_change_nothing)
{
    static const enum limit_algorithm all[] = {
        LIMIT_FIXED_WINDOW, LIMIT_SLIDING_WINDOW, LIMIT_SLIDING_WINDOW_COUNTER,
        LIMIT_TOKEN_BUCKET, LIMIT_LEAKY_BUCKET,   LIMIT_GCRA};

    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        /* Windows cap the cost at the limit, buckets at the burst. */
        bool bucket = all[i] >= LIMIT_TOKEN_BUCKET;
        struct limiter_def d = def_one(all[i], 5, 1000, bucket ? 3 : 5);
        struct algo_state st[2];
        struct algo_state before[2];
        struct limit_result r;

        add_rule(&d, 10, 60000, 10);
        memset(st, 0, sizeof(st));
        cr_assert_eq(algo_decide(&d, st, 100, 1, &r), 0);
        cr_assert(r.allowed);
        memcpy(before, st, sizeof(st));
        cr_assert_eq(algo_decide(&d, st, 200, 0, &r), -1, "%zu", i);
        cr_assert_eq(algo_decide(&d, st, 200, bucket ? 4 : 6, &r), -1, "%zu",
                     i);
        cr_assert_eq(memcmp(before, st, sizeof(st)), 0, "%zu", i);
        /* The largest valid cost is accepted. */
        cr_assert_eq(algo_decide(&d, st, 5000, bucket ? 3 : 5, &r), 0);
        states_free(st, 2);
    }
}

/*
 * fixed_window: L = 3 per 1000 ms.
 */

Test(algo, fixed_window_admits_the_limit_per_window_and_resets_at_its_end)
{
    struct limiter_def d = def_one(LIMIT_FIXED_WINDOW, 3, 1000, 3);
    struct algo_state st[1] = {{0}};

    ALLOW(&d, st, 1000, 1, 2, 1000, 0);
    cr_assert_eq(st[0].expires, 2000);
    ALLOW(&d, st, 1500, 1, 1, 500, 0);
    ALLOW(&d, st, 1999, 1, 0, 1, 0);
    cr_assert_eq(st[0].expires, 2000);
    /* Denied: retry and reset are the end of the window. */
    DENY(&d, st, 1999, 1, 0, 1, 1);
    cr_assert_eq(st[0].b, 3, "a denial must not count");
    /* The window boundary: a fresh count. */
    ALLOW(&d, st, 2000, 2, 1, 1000, 0);
    DENY(&d, st, 2000, 2, 1, 1000, 1000);
    ALLOW(&d, st, 2999, 1, 0, 1, 0);
    /* Expired (expires 3000 <= now): fresh, whatever it held. */
    ALLOW(&d, st, 3000, 3, 0, 1000, 0);
    DENY(&d, st, 3400, 1, 0, 600, 600);
    states_free(st, 1);
}

Test(algo, fixed_window_counts_exactly_the_limit_in_every_window)
{
    struct limiter_def d = def_one(LIMIT_FIXED_WINDOW, 7, 250, 7);
    struct algo_state st[1] = {{0}};

    for (uint64_t w = 0; w < 20; w++) {
        cr_assert_eq(admitted_between(&d, st, w * 250, (w + 1) * 250, 1), 7);
    }
    states_free(st, 1);
}

/*
 * sliding_window: L = 3 per 1000 ms, exact log.
 */

Test(algo, sliding_window_retry_is_when_the_blocking_member_leaves)
{
    struct limiter_def d = def_one(LIMIT_SLIDING_WINDOW, 3, 1000, 3);
    struct algo_state st[1] = {{0}};

    ALLOW(&d, st, 0, 1, 2, 1000, 0);
    ALLOW(&d, st, 100, 1, 1, 1000, 0);
    ALLOW(&d, st, 200, 1, 0, 1000, 0);
    cr_assert_eq(st[0].nlog, 3);
    cr_assert_eq(st[0].expires, 1200);
    /* Full: the oldest (0) must leave for cost 1: 0 + 1000 - 300. */
    DENY(&d, st, 300, 1, 0, 700, 900);
    /* Cost 2 needs the second oldest (100) gone too. */
    DENY(&d, st, 300, 2, 0, 800, 900);
    DENY(&d, st, 999, 1, 0, 1, 201);
    cr_assert_eq(st[0].nlog, 3, "a denial must not log");
    /* At 1000 the member at 0 is out (score <= now - W). */
    ALLOW(&d, st, 1000, 1, 0, 1000, 0);
    cr_assert_eq(st[0].nlog, 3);
    cr_assert_eq(st[0].log[0], 100);
    cr_assert_eq(st[0].log[2], 1000);
    DENY(&d, st, 1000, 1, 0, 100, 1000);
    /* 1100 drops 100 only; 200 and 1000 remain: room for exactly 1. */
    DENY(&d, st, 1100, 2, 1, 100, 900);
    ALLOW(&d, st, 1100, 1, 0, 1000, 0);
    /* Expired at 2100: the whole log goes. */
    ALLOW(&d, st, 2100, 3, 0, 1000, 0);
    cr_assert_eq(st[0].nlog, 3);
    states_free(st, 1);
}

Test(algo, sliding_window_admits_exactly_the_limit_within_one_millisecond)
{
    struct limiter_def d = def_one(LIMIT_SLIDING_WINDOW, 100, 1000, 100);
    struct algo_state st[1] = {{0}};
    unsigned n = 0;

    for (int i = 0; i < 1000; i++) {
        struct limit_result r;

        cr_assert_eq(algo_decide(&d, st, 5000, 1, &r), 0);
        n += r.allowed;
    }
    cr_assert_eq(n, 100);
    cr_assert_eq(st[0].nlog, 100);
    states_free(st, 1);
}

Test(algo, sliding_window_never_admits_more_than_the_limit_in_any_window)
{
    struct limiter_def d = def_one(LIMIT_SLIDING_WINDOW, 5, 100, 5);
    struct algo_state st[1] = {{0}};
    uint64_t admitted[4000];
    size_t n = 0;

    for (uint64_t t = 0; t < 4000; t += 3) {
        struct limit_result r;

        cr_assert_eq(algo_decide(&d, st, t, 1, &r), 0);
        if (r.allowed) {
            admitted[n++] = t;
        }
    }
    /* Any 6 consecutive admissions span at least one full window. */
    for (size_t i = 5; i < n; i++) {
        cr_assert_geq(admitted[i] - admitted[i - 5], 100, "at %zu", i);
    }
    /* And the window is used: 5 per 100 ms, rounded to the 3 ms grid. */
    cr_assert_geq(n, 185);
    states_free(st, 1);
}

/*
 * sliding_window_counter: L = 10 per 1000 ms.
 */

Test(algo, sliding_window_counter_weights_the_previous_window)
{
    struct limiter_def d = def_one(LIMIT_SLIDING_WINDOW_COUNTER, 10, 1000, 10);
    struct algo_state st[1] = {{0}};

    /* k = 0, e = 500: used = 4000 of 10000; reset = TTL = 2W - e. */
    ALLOW(&d, st, 500, 4, 6, 1500, 0);
    cr_assert_eq(st[0].expires, 2000);
    /* k = 1, e = 200: prev 4 weighs 4 * 800 = 3200; + 6000 = 9200. */
    ALLOW(&d, st, 1200, 6, 0, 1800, 0);
    /* + 1000 = 10200 > 10000. cur + 1 <= L: wait for prev to slide:
     * e' = 1000 - floor(3 * 1000 / 4) = 250. */
    DENY(&d, st, 1200, 1, 0, 50, 1800);
    DENY(&d, st, 1249, 1, 0, 1, 1751);
    ALLOW(&d, st, 1250, 1, 0, 1750, 0);
    /* cur = 7: cost 4 exceeds L - cur; next window, prev = 7:
     * e'' = 1000 - floor(6 * 1000 / 7) = 143; retry 750 + 143. */
    DENY(&d, st, 1250, 4, 0, 893, 1750);
    DENY(&d, st, 2142, 4, 3, 1, 858);
    ALLOW(&d, st, 2143, 4, 0, 1857, 0);
    cr_assert_eq(st[0].a, 2);
    cr_assert_eq(st[0].b, 4);
    cr_assert_eq(st[0].c, 7);
    /* Two windows on (k = 4): both counters are gone. */
    ALLOW(&d, st, 4000, 10, 0, 2000, 0);
    states_free(st, 1);
}

Test(algo, sliding_window_counter_reset_with_only_a_previous_window)
{
    struct limiter_def d = def_one(LIMIT_SLIDING_WINDOW_COUNTER, 10, 1000, 10);
    struct algo_state st[1] = {{0}};

    ALLOW(&d, st, 0, 10, 0, 2000, 0);
    /* k = 1, e = 100, prev = 10, cur = 0: used 9000, cost 2 -> 11000.
     * reset = W - e; retry: e' = 1000 - floor(8000 / 10) = 200. */
    DENY(&d, st, 1100, 2, 1, 100, 900);
    DENY(&d, st, 1199, 2, 1, 1, 801);
    ALLOW(&d, st, 1200, 2, 0, 1800, 0);
    states_free(st, 1);
}

/*
 * token_bucket.
 */

Test(algo, token_bucket_refills_by_the_millisecond)
{
    /* 1/s, burst 2: S in unit-ms, full = 2000. */
    struct limiter_def d = def_one(LIMIT_TOKEN_BUCKET, 1, 1000, 2);
    struct algo_state st[1] = {{0}};

    ALLOW(&d, st, 0, 1, 1, 1000, 0);
    cr_assert_eq(st[0].expires, 1000);
    ALLOW(&d, st, 0, 1, 0, 2000, 0);
    DENY(&d, st, 0, 1, 0, 1000, 2000);
    DENY(&d, st, 500, 1, 0, 500, 1500);
    DENY(&d, st, 999, 1, 0, 1, 1001);
    ALLOW(&d, st, 1000, 1, 0, 2000, 0);
    /* Full again at 3000 (expires): fresh, both tokens. */
    cr_assert_eq(st[0].expires, 3000);
    DENY(&d, st, 2999, 2, 1, 1, 1);
    ALLOW(&d, st, 3000, 2, 0, 2000, 0);
    states_free(st, 1);
}

Test(algo, token_bucket_keeps_fractions_of_a_token)
{
    /* 3/s, burst 2: a token every 333 1/3 ms; full = 2000 unit-ms. */
    struct limiter_def d = def_one(LIMIT_TOKEN_BUCKET, 3, 1000, 2);
    struct algo_state st[1] = {{0}};

    ALLOW(&d, st, 0, 2, 0, 667, 0);
    DENY(&d, st, 333, 1, 0, 1, 334);
    /* 1002 of 1000 needed: the 2 left over are kept... */
    ALLOW(&d, st, 334, 1, 0, 666, 0);
    cr_assert_eq(st[0].a, 2);
    /* ...so that 333 ms later 2 + 999 suffice: exactly 3 per second. */
    ALLOW(&d, st, 667, 1, 0, 667, 0);
    cr_assert_eq(st[0].a, 1);
    DENY(&d, st, 999, 1, 0, 1, 335);
    ALLOW(&d, st, 1000, 1, 0, 667, 0);
    cr_assert_eq(st[0].a, 0);
    states_free(st, 1);
}

Test(algo, token_bucket_never_holds_more_than_the_burst)
{
    /* 3/s, burst 1: idle time beyond a full bucket is not banked. */
    struct limiter_def d = def_one(LIMIT_TOKEN_BUCKET, 3, 1000, 1);
    struct algo_state st[1] = {{0}};

    ALLOW(&d, st, 0, 1, 0, 334, 0);
    DENY(&d, st, 333, 1, 0, 1, 1);
    ALLOW(&d, st, 334, 1, 0, 334, 0);
    cr_assert_eq(st[0].a, 0);
    DENY(&d, st, 500, 1, 0, 168, 168);
    DENY(&d, st, 667, 1, 0, 1, 1);
    ALLOW(&d, st, 668, 1, 0, 334, 0);
    states_free(st, 1);
}

Test(algo, token_bucket_delay_mode_reserves_future_tokens)
{
    struct limiter_def d = def_one(LIMIT_TOKEN_BUCKET, 1, 1000, 1);
    struct algo_state st[1] = {{0}};

    d.delay = true;
    d.max_delay_ms = 1500;
    ALLOW(&d, st, 0, 1, 0, 1000, 0);
    /* One token owed: hold 1000 ms; S = -1000, full again in 2000. */
    ALLOW(&d, st, 0, 1, 0, 2000, 1000);
    cr_assert_eq(st[0].a, -1000);
    /* Would wait 2000 > 1500: refused, 500 ms early; nothing reserved. */
    DENY(&d, st, 0, 1, 0, 500, 2000);
    cr_assert_eq(st[0].a, -1000);
    ALLOW(&d, st, 500, 1, 0, 2500, 1500);
    DENY(&d, st, 500, 1, 0, 1000, 2500);
    states_free(st, 1);
}

/*
 * leaky_bucket.
 */

Test(algo, leaky_bucket_deny_mode_overflows_at_the_burst)
{
    /* Leaks 1/s, holds 2: V in unit-ms, full = 2000. */
    struct limiter_def d = def_one(LIMIT_LEAKY_BUCKET, 1, 1000, 2);
    struct algo_state st[1] = {{0}};

    ALLOW(&d, st, 0, 1, 1, 1000, 0);
    ALLOW(&d, st, 0, 1, 0, 2000, 0);
    DENY(&d, st, 0, 1, 0, 1000, 2000);
    DENY(&d, st, 250, 1, 0, 750, 1750);
    DENY(&d, st, 250, 2, 0, 1750, 1750);
    ALLOW(&d, st, 1000, 1, 0, 2000, 0);
    cr_assert_eq(st[0].a, 2000);
    cr_assert_eq(st[0].b, 1000);
    /* Empty at 3000: fresh. */
    cr_assert_eq(st[0].expires, 3000);
    ALLOW(&d, st, 3000, 2, 0, 2000, 0);
    states_free(st, 1);
}

Test(algo, leaky_bucket_delay_mode_queues_behind_the_water)
{
    struct limiter_def d = def_one(LIMIT_LEAKY_BUCKET, 1, 1000, 3);
    struct algo_state st[1] = {{0}};

    d.delay = true;
    d.max_delay_ms = 1500;
    ALLOW(&d, st, 0, 1, 2, 1000, 0);
    ALLOW(&d, st, 0, 1, 1, 2000, 1000);
    /* Room in the queue (3000 <= 3000) but a 2000 ms wait. */
    DENY(&d, st, 0, 1, 1, 500, 2000);
    ALLOW(&d, st, 500, 1, 0, 2500, 1500);
    /* No room (3500 > 3000, 500 ms to make it) and a 2500 ms wait
     * (1000 over max_delay): the larger decides. */
    DENY(&d, st, 500, 1, 0, 1000, 2500);
    states_free(st, 1);
}

Test(algo, leaky_bucket_delay_mode_refuses_a_full_queue)
{
    struct limiter_def d = def_one(LIMIT_LEAKY_BUCKET, 1, 1000, 2);
    struct algo_state st[1] = {{0}};

    d.delay = true;
    d.max_delay_ms = 10000;
    ALLOW(&d, st, 0, 1, 1, 1000, 0);
    ALLOW(&d, st, 0, 1, 0, 2000, 1000);
    /* Waits would be fine; the queue is full for 1000 ms. */
    DENY(&d, st, 0, 1, 0, 1000, 2000);
    ALLOW(&d, st, 1000, 1, 0, 2000, 1000);
    states_free(st, 1);
}

/*
 * gcra.
 */

Test(algo, gcra_spaces_requests_by_the_emission_interval)
{
    struct limiter_def d = def_one(LIMIT_GCRA, 1, 1000, 2);
    struct algo_state st[1] = {{0}};

    ALLOW(&d, st, 0, 1, 1, 1000, 0);
    cr_assert_eq(st[0].a, 1000);
    cr_assert_eq(st[0].b, 0);
    ALLOW(&d, st, 0, 1, 0, 2000, 0);
    DENY(&d, st, 0, 1, 0, 1000, 2000);
    DENY(&d, st, 600, 1, 0, 400, 1400);
    ALLOW(&d, st, 1000, 1, 0, 2000, 0);
    cr_assert_eq(st[0].expires, 3000);
    ALLOW(&d, st, 3000, 2, 0, 2000, 0);
    states_free(st, 1);
}

Test(algo, gcra_keeps_the_fraction_of_a_millisecond)
{
    /* 3/s, burst 2: T = 333 1/3 ms; tat kept as (ms, f / 3 ms). */
    struct limiter_def d = def_one(LIMIT_GCRA, 3, 1000, 2);
    struct algo_state st[1] = {{0}};

    ALLOW(&d, st, 0, 2, 0, 667, 0);
    cr_assert_eq(st[0].a, 666);
    cr_assert_eq(st[0].b, 2);
    /* d = 333 * 3 + 2 = 1001 ticks: nd 2001 > 2000, wait ceil(1 / 3). */
    DENY(&d, st, 333, 1, 0, 1, 334);
    ALLOW(&d, st, 334, 1, 0, 666, 0);
    cr_assert_eq(st[0].a, 1000);
    cr_assert_eq(st[0].b, 0);
    ALLOW(&d, st, 667, 1, 0, 667, 0);
    cr_assert_eq(st[0].a, 1333);
    cr_assert_eq(st[0].b, 1);
    DENY(&d, st, 999, 1, 0, 1, 335);
    ALLOW(&d, st, 1000, 1, 0, 667, 0);
    cr_assert_eq(st[0].a, 1666);
    cr_assert_eq(st[0].b, 2);
    states_free(st, 1);
}

Test(algo, gcra_forgets_a_tat_in_the_past)
{
    /* 3/s, burst 1. */
    struct limiter_def d = def_one(LIMIT_GCRA, 3, 1000, 1);
    struct algo_state st[1] = {{0}};

    ALLOW(&d, st, 0, 1, 0, 334, 0);
    cr_assert_eq(st[0].a, 333);
    cr_assert_eq(st[0].b, 1);
    DENY(&d, st, 333, 1, 0, 1, 1);
    ALLOW(&d, st, 334, 1, 0, 334, 0);
    cr_assert_eq(st[0].a, 667);
    cr_assert_eq(st[0].b, 1);
    states_free(st, 1);
}

Test(algo, gcra_delay_mode_matches_the_token_bucket)
{
    struct limiter_def d = def_one(LIMIT_GCRA, 1, 1000, 1);
    struct algo_state st[1] = {{0}};

    d.delay = true;
    d.max_delay_ms = 1500;
    ALLOW(&d, st, 0, 1, 0, 1000, 0);
    ALLOW(&d, st, 0, 1, 0, 2000, 1000);
    DENY(&d, st, 0, 1, 0, 500, 2000);
    ALLOW(&d, st, 500, 1, 0, 2500, 1500);
    DENY(&d, st, 500, 1, 0, 1000, 2500);
    states_free(st, 1);
}

/* A simple LCG: the same sequence on every run. */
static uint64_t
next_rand(uint64_t *s)
{
    *s = *s * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
    return *s >> 33;
}

Test(algo, gcra_and_token_bucket_decide_alike)
{
    for (int delay = 0; delay <= 1; delay++) {
        struct limiter_def tb = def_one(LIMIT_TOKEN_BUCKET, 7, 1000, 5);
        struct limiter_def gc = def_one(LIMIT_GCRA, 7, 1000, 5);
        struct algo_state s1[1] = {{0}};
        struct algo_state s2[1] = {{0}};
        uint64_t seed = 42;
        uint64_t now = 1000000;

        tb.delay = gc.delay = delay;
        tb.max_delay_ms = gc.max_delay_ms = 700;
        for (int i = 0; i < 20000; i++) {
            struct limit_result r1;
            struct limit_result r2;
            uint64_t cost = 1 + next_rand(&seed) % 5;

            now += next_rand(&seed) % 4 == 0 ? next_rand(&seed) % 2000
                                             : next_rand(&seed) % 50;
            cr_assert_eq(algo_decide(&tb, s1, now, cost, &r1), 0);
            cr_assert_eq(algo_decide(&gc, s2, now, cost, &r2), 0);
            cr_assert_eq(memcmp(&r1, &r2, sizeof(r1)), 0, "step %d", i);
            cr_assert_eq(s1[0].expires, s2[0].expires, "step %d", i);
        }
    }
}

/* A deep copy, so that a decision can be tried without committing. */
static void
states_copy(struct algo_state *dst, const struct algo_state *src, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        dst[i] = src[i];
        dst[i].log = NULL;
        dst[i].cap = 0;
        if (src[i].nlog > 0) {
            dst[i].log = malloc(src[i].nlog * sizeof(*src[i].log));
            memcpy(dst[i].log, src[i].log, src[i].nlog * sizeof(*src[i].log));
            dst[i].cap = src[i].nlog;
        }
    }
}

/* Retrying a denied request at now + retry_after_ms - 1 must fail, and at
 * now + retry_after_ms pass: the retry time is exact, never early, never
 * late. */
static void
check_retry_is_exact(const struct limiter_def *d, uint64_t seed)
{
    struct algo_state st[LIMIT_MAX_RULES];
    struct algo_state probe[LIMIT_MAX_RULES];
    uint64_t now = 1700000000000;
    uint64_t cap = UINT64_MAX;
    unsigned denials = 0;

    memset(st, 0, sizeof(st));
    for (size_t i = 0; i < d->nrules; i++) {
        uint64_t c = d->algorithm >= LIMIT_TOKEN_BUCKET ? d->rules[i].burst
                                                        : d->rules[i].limit;

        cap = c < cap ? c : cap;
    }
    for (int i = 0; i < 5000; i++) {
        struct limit_result r;
        struct limit_result again;
        uint64_t cost = 1 + next_rand(&seed) % cap;

        now += next_rand(&seed) % 3 == 0 ? next_rand(&seed) % 700
                                         : next_rand(&seed) % 20;
        cr_assert_eq(algo_decide(d, st, now, cost, &r), 0);
        if (r.allowed) {
            cr_assert_eq(r.retry_after_ms, 0);
            continue;
        }
        denials++;
        cr_assert_geq(r.retry_after_ms, 1, "step %d", i);
        states_copy(probe, st, d->nrules);
        cr_assert_eq(
            algo_decide(d, probe, now + r.retry_after_ms - 1, cost, &again), 0);
        cr_assert(!again.allowed, "alg %d step %d: passed 1 ms early",
                  d->algorithm, i);
        cr_assert_eq(
            algo_decide(d, probe, now + r.retry_after_ms, cost, &again), 0);
        cr_assert(again.allowed, "alg %d step %d: denied at retry_after_ms",
                  d->algorithm, i);
        states_free(probe, d->nrules);
    }
    cr_assert_geq(denials, 500, "alg %d: %u denials", d->algorithm, denials);
    states_free(st, d->nrules);
}

Test(algo, retry_after_is_the_earliest_time_the_same_request_passes)
{
    static const enum limit_algorithm all[] = {
        LIMIT_FIXED_WINDOW, LIMIT_SLIDING_WINDOW, LIMIT_SLIDING_WINDOW_COUNTER,
        LIMIT_TOKEN_BUCKET, LIMIT_LEAKY_BUCKET,   LIMIT_GCRA};

    for (size_t i = 0; i < 6; i++) {
        bool bucket = all[i] >= LIMIT_TOKEN_BUCKET;
        struct limiter_def one = def_one(all[i], 7, 1000, bucket ? 4 : 7);
        struct limiter_def two = def_one(all[i], 3, 100, 3);

        add_rule(&two, 20, 3000, bucket ? 12 : 20);
        check_retry_is_exact(&one, 100 + i);
        check_retry_is_exact(&two, 200 + i);
        if (bucket) {
            one.delay = two.delay = true;
            one.max_delay_ms = 400;
            two.max_delay_ms = 250;
            check_retry_is_exact(&one, 300 + i);
            check_retry_is_exact(&two, 400 + i);
        }
    }
}

/*
 * Several rules: all or nothing.
 */

Test(algo, multi_rule_denial_consumes_nothing_under_any_rule)
{
    /* 2 per second and 3 per 10 seconds. */
    struct limiter_def d = def_one(LIMIT_FIXED_WINDOW, 2, 1000, 2);
    struct algo_state st[2];

    memset(st, 0, sizeof(st));
    add_rule(&d, 3, 10000, 3);
    EXPECT(&d, st, 0, 1, true, 1, 0, 10000, 0, 0);
    EXPECT(&d, st, 0, 1, true, 0, 0, 10000, 0, 0);
    /* Rule 0 says no; rule 1 would admit but must not count. */
    EXPECT(&d, st, 0, 1, false, 0, 1000, 10000, 0, 0);
    cr_assert_eq(st[1].b, 2);
    /* Rule 1 is now the tightest (0 left against rule 0's 1). */
    EXPECT(&d, st, 1000, 1, true, 0, 0, 9000, 0, 1);
    /* Rule 1 denies; rule 0 would admit but must not count. */
    EXPECT(&d, st, 1000, 1, false, 0, 9000, 9000, 0, 1);
    cr_assert_eq(st[0].b, 1);
    EXPECT(&d, st, 10000, 2, true, 0, 0, 10000, 0, 0);
    states_free(st, 2);
}

Test(algo, multi_rule_denial_reports_the_longest_retry)
{
    /* Both rules deny: the larger retry decides, ties to the first. */
    struct limiter_def d = def_one(LIMIT_SLIDING_WINDOW, 1, 1000, 1);
    struct algo_state st[3];

    memset(st, 0, sizeof(st));
    add_rule(&d, 1, 5000, 1);
    add_rule(&d, 1, 5000, 1);
    EXPECT(&d, st, 0, 1, true, 0, 0, 5000, 0, 0);
    EXPECT(&d, st, 10, 1, false, 0, 4990, 4990, 0, 1);
    states_free(st, 3);
}

Test(algo, multi_rule_buckets_refund_nothing_on_denial)
{
    struct limiter_def d = def_one(LIMIT_TOKEN_BUCKET, 10, 1000, 10);
    struct algo_state st[2];

    memset(st, 0, sizeof(st));
    add_rule(&d, 1, 1000, 2);
    /* Rule 0: 10000 - 1000 = 9000 (rem 9, reset 100); rule 1: rem 1. */
    EXPECT(&d, st, 0, 1, true, 1, 0, 1000, 0, 1);
    EXPECT(&d, st, 0, 1, true, 0, 0, 2000, 0, 1);
    EXPECT(&d, st, 0, 1, false, 0, 1000, 2000, 0, 1);
    cr_assert_eq(st[0].a, 8000);
    /* Cost 2: rule 1 holds 1000 of 2000 needed after 1000 ms. */
    EXPECT(&d, st, 1000, 2, false, 1, 1000, 1000, 0, 1);
    EXPECT(&d, st, 2000, 2, true, 0, 0, 2000, 0, 1);
    /* Rule 0: 10000 - 2000 = 8000 after its refill to full. */
    cr_assert_eq(st[0].a, 8000);
    states_free(st, 2);
}

Test(algo, multi_rule_delay_is_the_longest_wait)
{
    struct limiter_def d = def_one(LIMIT_GCRA, 2, 1000, 1);
    struct algo_state st[2];

    memset(st, 0, sizeof(st));
    add_rule(&d, 1, 1000, 1);
    d.delay = true;
    d.max_delay_ms = 900;
    EXPECT(&d, st, 0, 1, true, 0, 0, 1000, 0, 0);
    /* Rule 0 wants 500 ms, rule 1 1000 ms > 900: refused by rule 1. */
    EXPECT(&d, st, 0, 1, false, 0, 100, 1000, 0, 1);
    /* At 100: 400 and 900; both fit; hold for the longer. */
    EXPECT(&d, st, 100, 1, true, 0, 0, 1900, 900, 0);
    states_free(st, 2);
}

/*
 * Long-run rates: 7/s over 10 simulated seconds, a request every ms.
 */

Test(algo, buckets_admit_seven_per_second_over_ten_seconds)
{
    static const enum limit_algorithm buckets[] = {
        LIMIT_TOKEN_BUCKET, LIMIT_LEAKY_BUCKET, LIMIT_GCRA};

    for (size_t i = 0; i < 3; i++) {
        struct limiter_def d = def_one(buckets[i], 7, 1000, 1);
        struct algo_state st[1] = {{0}};
        unsigned n = admitted_between(&d, st, 1700000000000, 1700000010000, 1);

        cr_assert(n >= 69 && n <= 71, "%s: %u admitted",
                  i == 0   ? "token_bucket"
                  : i == 1 ? "leaky_bucket"
                           : "gcra",
                  n);
        states_free(st, 1);
    }
}

Test(algo, buckets_under_pressure_lose_no_fraction_over_a_long_run)
{
    static const enum limit_algorithm buckets[] = {
        LIMIT_TOKEN_BUCKET, LIMIT_LEAKY_BUCKET, LIMIT_GCRA};

    /* Burst 2 keeps the bucket from ever being full or empty under a
     * request every ms, so after the two of the burst the m-th admission
     * comes at ceil(m * 1000 / 7) ms, no fraction lost: over 100 s,
     * floor(99999 * 7 / 1000) = 699 of them. */
    for (size_t i = 0; i < 3; i++) {
        struct limiter_def d = def_one(buckets[i], 7, 1000, 2);
        struct algo_state st[1] = {{0}};

        cr_assert_eq(admitted_between(&d, st, 0, 100000, 1), 701, "%zu", i);
        states_free(st, 1);
    }
}

/*
 * Expiry.
 */

Test(algo, expires_is_now_plus_the_ttl_and_an_expired_state_is_fresh)
{
    static const enum limit_algorithm all[] = {
        LIMIT_FIXED_WINDOW, LIMIT_SLIDING_WINDOW, LIMIT_SLIDING_WINDOW_COUNTER,
        LIMIT_TOKEN_BUCKET, LIMIT_LEAKY_BUCKET,   LIMIT_GCRA};
    /* Admitting 4 of 4 at 1250 with W = 1000; expected TTLs. */
    static const uint64_t ttl[] = {750, 1000, 1750, 1000, 1000, 1000};

    for (size_t i = 0; i < 6; i++) {
        struct limiter_def d = def_one(all[i], 4, 1000, 4);
        struct algo_state st[1] = {{0}};
        struct limit_result r;

        cr_assert_eq(algo_decide(&d, st, 1250, 4, &r), 0);
        cr_assert(r.allowed);
        cr_assert_eq(r.reset_ms, ttl[i], "%zu: %llu", i,
                     (unsigned long long)r.reset_ms);
        cr_assert_eq(st[0].expires, 1250 + ttl[i], "%zu", i);
        /* One ms before: still full. At expiry: fresh, all 4 again. */
        cr_assert_eq(algo_decide(&d, st, 1250 + ttl[i] - 1, 4, &r), 0);
        cr_assert(!r.allowed, "%zu", i);
        cr_assert_eq(algo_decide(&d, st, 1250 + ttl[i], 4, &r), 0);
        cr_assert(r.allowed, "%zu", i);
        cr_assert_eq(r.remaining, 0);
        states_free(st, 1);
    }
}

Test(algo, reset_state_frees_the_log_and_is_fresh)
{
    struct limiter_def d = def_one(LIMIT_SLIDING_WINDOW, 3, 1000, 3);
    struct algo_state st[1] = {{0}};
    struct limit_result r;

    cr_assert_eq(algo_decide(&d, st, 0, 3, &r), 0);
    cr_assert_not_null(st[0].log);
    algo_state_reset(&st[0]);
    cr_assert_null(st[0].log);
    cr_assert(!st[0].present);
    cr_assert_eq(st[0].nlog, 0);
    cr_assert_eq(algo_decide(&d, st, 1, 3, &r), 0);
    cr_assert(r.allowed);
    algo_state_reset(&st[0]);
}
