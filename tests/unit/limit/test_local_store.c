#include <criterion/criterion.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "algo.h"
#include "local_store.h"

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

Test(local_store, decides_exactly_as_the_algorithm_does)
{
    struct local_store *st = local_store_new(4);
    struct limiter_def d = def_one(LIMIT_SLIDING_WINDOW_COUNTER, 5, 1000, 5);
    struct algo_state twin[1] = {{0}};
    uint64_t now = 1000000;

    for (int i = 0; i < 3000; i++) {
        struct limit_result a;
        struct limit_result b;
        uint64_t cost = 1 + (uint64_t)(i * 7 % 3);

        now += (uint64_t)(i * 37 % 101);
        cr_assert_eq(local_store_decide(st, "rl:{r:ip:1}", &d, cost, now, &a),
                     0);
        cr_assert_eq(algo_decide(&d, twin, now, cost, &b), 0);
        cr_assert_eq(memcmp(&a, &b, sizeof(a)), 0, "step %d", i);
    }
    algo_state_reset(&twin[0]);
    local_store_free(st);
}

Test(local_store, keys_are_independent)
{
    struct local_store *st = local_store_new(1);
    struct limiter_def d = def_one(LIMIT_FIXED_WINDOW, 2, 1000, 2);
    struct limit_result r;

    for (int i = 0; i < 2; i++) {
        cr_assert_eq(local_store_decide(st, "a", &d, 1, 10, &r), 0);
        cr_assert(r.allowed);
    }
    cr_assert_eq(local_store_decide(st, "a", &d, 1, 10, &r), 0);
    cr_assert(!r.allowed);
    cr_assert_eq(local_store_decide(st, "b", &d, 2, 10, &r), 0);
    cr_assert(r.allowed);
    cr_assert_eq(local_store_size(st), 2);
    local_store_free(st);
}

Test(local_store, invalid_cost_is_refused_and_stores_nothing)
{
    struct local_store *st = local_store_new(2);
    struct limiter_def d = def_one(LIMIT_TOKEN_BUCKET, 10, 1000, 3);
    struct limit_result r;

    cr_assert_eq(local_store_decide(st, "k", &d, 0, 10, &r), -1);
    cr_assert_eq(local_store_decide(st, "k", &d, 4, 10, &r), -1);
    cr_assert_eq(local_store_size(st), 0);
    cr_assert_eq(local_store_decide(st, "k", &d, 3, 10, &r), 0);
    cr_assert(r.allowed);
    cr_assert_eq(local_store_size(st), 1);
    cr_assert_eq(local_store_decide(st, "k", &d, 4, 10, &r), -1);
    cr_assert_eq(local_store_decide(st, "k", &d, 1, 10, &r), 0);
    cr_assert(!r.allowed, "the refused call must not have reset the key");
    local_store_free(st);
}

Test(local_store, an_entry_under_other_rules_starts_fresh)
{
    struct local_store *st = local_store_new(1);
    struct limiter_def one = def_one(LIMIT_FIXED_WINDOW, 1, 1000, 1);
    struct limiter_def two = def_one(LIMIT_FIXED_WINDOW, 1, 1000, 1);
    struct limit_result r;

    two.rules[1] = two.rules[0];
    two.nrules = 2;
    cr_assert_eq(local_store_decide(st, "k", &one, 1, 10, &r), 0);
    cr_assert(r.allowed);
    cr_assert_eq(local_store_decide(st, "k", &one, 1, 10, &r), 0);
    cr_assert(!r.allowed);
    cr_assert_eq(local_store_decide(st, "k", &two, 1, 10, &r), 0);
    cr_assert(r.allowed);
    cr_assert_eq(local_store_size(st), 1);
    local_store_free(st);
}

Test(local_store, expired_entries_are_dropped_when_met_and_by_sweep)
{
    struct local_store *st = local_store_new(8);
    /* TTL after one admission: 1000 ms for every key. */
    struct limiter_def d = def_one(LIMIT_SLIDING_WINDOW, 3, 1000, 3);
    struct limit_result r;
    char key[32];
    size_t size;

    for (int i = 0; i < 500; i++) {
        snprintf(key, sizeof(key), "sw:{r:ip:%d}", i);
        cr_assert_eq(local_store_decide(st, key, &d, 1, 5000 + i, &r), 0);
        cr_assert(r.allowed);
    }
    cr_assert_eq(local_store_size(st), 500);
    /* Key i expires at 6000 + i. */
    cr_assert_eq(local_store_sweep(st, 5999), 0);
    cr_assert_eq(local_store_sweep(st, 6100), 101);
    cr_assert_eq(local_store_size(st), 399);
    /* Met again after expiry: replaced by a fresh entry. */
    cr_assert_eq(local_store_decide(st, "sw:{r:ip:450}", &d, 3, 7000, &r), 0);
    cr_assert(r.allowed);
    cr_assert_eq(r.remaining, 0);
    /* That lookup may have dropped expired neighbours in its chain. */
    size = local_store_size(st);
    cr_assert_leq(size, 399);
    cr_assert_eq(local_store_sweep(st, 7999), size - 1);
    cr_assert_eq(local_store_size(st), 1);
    cr_assert_eq(local_store_sweep(st, 8000), 1);
    cr_assert_eq(local_store_size(st), 0);
    local_store_free(st);
}

Test(local_store, a_lookup_drops_the_expired_entries_it_walks_past)
{
    /* One shard: after growing to 4096 entries, a chain holds several. */
    struct local_store *st = local_store_new(1);
    struct limiter_def d = def_one(LIMIT_GCRA, 1, 1000, 1);
    struct limit_result r;
    char key[32];
    size_t size;

    for (int i = 0; i < 4096; i++) {
        snprintf(key, sizeof(key), "g:%d", i);
        cr_assert_eq(local_store_decide(st, key, &d, 1, 0, &r), 0);
    }
    cr_assert_eq(local_store_size(st), 4096);
    /* All expired at 1000: new keys' lookups take some of them away. */
    for (int i = 0; i < 4096; i++) {
        snprintf(key, sizeof(key), "h:%d", i);
        cr_assert_eq(local_store_decide(st, key, &d, 1, 1000, &r), 0);
    }
    size = local_store_size(st);
    cr_assert_lt(size, 8192 - 1000);
    cr_assert_eq(local_store_sweep(st, 1000), size - 4096);
    cr_assert_eq(local_store_size(st), 4096);
    local_store_free(st);
}

Test(local_store, many_keys_each_keep_their_own_budget)
{
    struct local_store *st = local_store_new(16);
    struct limiter_def d = def_one(LIMIT_TOKEN_BUCKET, 1, 1000, 2);
    struct limit_result r;
    char key[32];

    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 20000; i++) {
            snprintf(key, sizeof(key), "tb:{x:%d}", i);
            cr_assert_eq(local_store_decide(st, key, &d, 1, 100, &r), 0);
            cr_assert_eq(r.allowed, round < 2, "key %d round %d", i, round);
        }
    }
    cr_assert_eq(local_store_size(st), 20000);
    local_store_free(st);
}

Test(local_store, free_of_null_is_a_no_op)
{
    local_store_free(NULL);
}

struct hammer {
    struct local_store *st;        /* borrowed */
    const struct limiter_def *def; /* borrowed */
    const char *key;               /* borrowed */
    unsigned admitted;             /* out */
};

static void *
hammer_run(void *arg)
{
    struct hammer *h = arg;

    for (int i = 0; i < 10000; i++) {
        struct limit_result r;

        if (local_store_decide(h->st, h->key, h->def, 1, 123456, &r) != 0) {
            return NULL;
        }
        h->admitted += r.allowed;
    }
    return NULL;
}

static unsigned
hammer(struct local_store *st, const struct limiter_def *def, const char *key)
{
    pthread_t th[4];
    struct hammer h[4];
    unsigned total = 0;

    for (int i = 0; i < 4; i++) {
        h[i] = (struct hammer){st, def, key, 0};
        cr_assert_eq(pthread_create(&th[i], NULL, hammer_run, &h[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        total += h[i].admitted;
    }
    return total;
}

Test(local_store, four_threads_on_one_key_admit_exactly_the_limit)
{
    struct local_store *st = local_store_new(8);
    struct limiter_def fixed = def_one(LIMIT_FIXED_WINDOW, 1000, 60000, 1000);
    struct limiter_def log = def_one(LIMIT_SLIDING_WINDOW, 1000, 60000, 1000);
    struct limiter_def tb = def_one(LIMIT_TOKEN_BUCKET, 1, 60000, 1000);

    cr_assert_eq(hammer(st, &fixed, "fw:{r:route:}"), 1000);
    cr_assert_eq(hammer(st, &log, "sw:{r:route:}"), 1000);
    cr_assert_eq(hammer(st, &tb, "tb:{r:route:}"), 1000);
    cr_assert_eq(local_store_size(st), 3);
    local_store_free(st);
}
