/*
 * test_lease_scripts.c - the lease calls of token_bucket and gcra
 * (lua/README.md, "Leases") inside a real redis-server: what a take
 * grants, how the grant shrinks as the bucket empties, and that a return
 * gives back exactly the unused units, refill or not. Time is injected
 * through ARGV[1]; every rule refills slowly enough that the keys' TTLs
 * (counted on Redis's real clock) outlive the test.
 */
#include "harness.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <hiredis/hiredis.h>

#include "limit.h"
#include "scriptcall.h"
#include "scripts.h"

#define T0 UINT64_C(1700000040000)

static struct proc redis;
static uint16_t redis_port;
static redisContext *rc;
static unsigned long request_no; /* makes request ids unique */

static void
setup(void)
{
    redis_start(&redis, &redis_port);
    rc = redisConnect("127.0.0.1", redis_port);
    cr_assert(rc != NULL && rc->err == 0, "cannot connect to redis");
}

static void
teardown(void)
{
    redisFree(rc);
    rc = NULL;
    cr_assert_eq(proc_stop(&redis, SIGTERM, 10000), 0,
                 "redis-server did not exit cleanly");
}

TestSuite(lease_scripts, .init = setup, .fini = teardown, .timeout = 60);

static const char *const lease_algos[] = {"token_bucket", "gcra"};

/* What one call answered. */
struct answer {
    bool error;              /* an error reply; 'text' says which */
    char text[160];          /* the error's text */
    struct limit_result res; /* the decision */
    uint64_t units;          /* lease calls: granted or given back */
};

/*
 * EVAL of the embedded 'algo' for 'def' on keys "<base>:<i>" at 'now'
 * for 'cost'. 'op' < 0: a plain decision; else a lease call of 'op' for
 * 'units' (encoded with the gateway's codec). 'extra' (or NULL) replaces
 * the words the codec wrote for the lease, to send bad ones.
 */
static struct answer
call(const char *algo, const struct limiter_def *def, const char *base,
     uint64_t now, uint64_t cost, int op, uint64_t units,
     const char *const extra[2])
{
    const struct lua_script *s = scripts_find(algo);
    struct scriptcall sc;
    char reqid[32];
    char nk[8];
    const char *argv[3 + LIMIT_MAX_RULES + SCRIPTCALL_MAX_ARGS];
    size_t lens[3 + LIMIT_MAX_RULES + SCRIPTCALL_MAX_ARGS];
    size_t n = 0;
    long long v[8];
    struct answer a;
    redisReply *r;

    memset(&a, 0, sizeof(a));
    cr_assert_not_null(s);
    snprintf(reqid, sizeof(reqid), "lease-%lu", ++request_no);
    cr_assert_eq(scriptcall_encode(&sc, def, base, cost, reqid, now), 0);
    if (op >= 0) {
        cr_assert_eq(scriptcall_lease(&sc, (enum scriptcall_lease_op)op, units),
                     0);
        if (extra != NULL) {
            sc.args[sc.nargs - 2] = extra[0];
            sc.args[sc.nargs - 1] = extra[1];
        }
    }
    snprintf(nk, sizeof(nk), "%zu", sc.nkeys);
    argv[n++] = "EVAL";
    argv[n++] = s->source;
    argv[n++] = nk;
    for (size_t i = 0; i < sc.nkeys; i++) {
        argv[n++] = sc.keys[i];
    }
    for (size_t i = 0; i < sc.nargs; i++) {
        argv[n++] = sc.args[i];
    }
    for (size_t i = 0; i < n; i++) {
        lens[i] = i == 1 ? s->len : strlen(argv[i]);
    }
    r = redisCommandArgv(rc, (int)n, argv, lens);
    cr_assert_not_null(r, "redis: %s", rc->errstr);
    if (r->type == REDIS_REPLY_ERROR) {
        a.error = true;
        snprintf(a.text, sizeof(a.text), "%s", r->str);
        freeReplyObject(r);
        return a;
    }
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->elements, op >= 0 ? 7u : 6u, "%s: %zu elements", algo,
                 r->elements);
    for (size_t i = 0; i < r->elements; i++) {
        cr_assert_eq(r->element[i]->type, REDIS_REPLY_INTEGER);
        v[i] = r->element[i]->integer;
    }
    if (op >= 0) {
        cr_assert_eq(
            scriptcall_decode_lease(def, v, r->elements, &a.res, &a.units), 0);
    } else {
        cr_assert_eq(scriptcall_decode(def, v, r->elements, &a.res), 0);
    }
    freeReplyObject(r);
    return a;
}

static struct limiter_def
def_of(const char *algo, size_t nrules, const struct limit_rule *rules)
{
    struct limiter_def d;

    memset(&d, 0, sizeof(d));
    cr_assert_eq(limit_algorithm_parse(algo, &d.algorithm), 0);
    memcpy(d.rules, rules, nrules * sizeof(rules[0]));
    d.nrules = nrules;
    return d;
}

static struct answer
take(const char *algo, const struct limiter_def *d, const char *base,
     uint64_t now, uint64_t cost, uint64_t want)
{
    return call(algo, d, base, now, cost, SCRIPTCALL_LEASE_TAKE, want, NULL);
}

static struct answer
give_back(const char *algo, const struct limiter_def *d, const char *base,
          uint64_t now, uint64_t units)
{
    return call(algo, d, base, now, 1, SCRIPTCALL_LEASE_RETURN, units, NULL);
}

/* Plain decisions of one unit at 'now' until one is refused. */
static uint64_t
admit_all(const char *algo, const struct limiter_def *d, const char *base,
          uint64_t now)
{
    uint64_t n = 0;

    for (;;) {
        struct answer a = call(algo, d, base, now, 1, -1, 0, NULL);

        cr_assert(!a.error, "%s", a.text);
        if (!a.res.allowed) {
            return n;
        }
        n++;
        cr_assert_lt(n, 100000);
    }
}

Test(lease_scripts, a_take_grants_a_quarter_of_what_is_left_up_to_want)
{
    for (size_t k = 0; k < 2; k++) {
        const char *algo = lease_algos[k];
        struct limit_rule rule = {100, 3600000, 100};
        struct limiter_def d = def_of(algo, 1, &rule);
        char base[64];
        struct answer a;

        snprintf(base, sizeof(base), "quarter:{%s}", algo);
        a = take(algo, &d, base, T0, 1, 50);
        cr_assert(!a.error, "%s: %s", algo, a.text);
        cr_assert(a.res.allowed);
        cr_assert_eq(a.units, 25, "%s: granted %llu", algo,
                     (unsigned long long)a.units);
        cr_assert_eq(a.res.remaining, 75);
        /* Want caps the grant. */
        a = take(algo, &d, base, T0, 1, 10);
        cr_assert_eq(a.units, 10);
        cr_assert_eq(a.res.remaining, 65);
    }
}

Test(lease_scripts, grants_shrink_to_one_unit_and_add_up_to_the_burst)
{
    for (size_t k = 0; k < 2; k++) {
        const char *algo = lease_algos[k];
        struct limit_rule rule = {100, 3600000, 100};
        struct limiter_def d = def_of(algo, 1, &rule);
        char base[64];
        uint64_t total = 0, last = 100, calls = 0;
        uint64_t left = 100;

        snprintf(base, sizeof(base), "shrink:{%s}", algo);
        for (;;) {
            struct answer a = take(algo, &d, base, T0, 1, 100);
            uint64_t expect = left / 4 > 1 ? left / 4 : 1;

            cr_assert(!a.error, "%s", a.text);
            if (left == 0) {
                cr_assert(!a.res.allowed, "%s: granted past the burst", algo);
                cr_assert_eq(a.units, 0);
                break;
            }
            cr_assert(a.res.allowed);
            cr_assert_eq(a.units, expect, "%s: %llu left, granted %llu", algo,
                         (unsigned long long)left, (unsigned long long)a.units);
            cr_assert_leq(a.units, last, "grants never grow as it empties");
            last = a.units;
            total += a.units;
            left -= a.units;
            calls++;
        }
        cr_assert_eq(total, 100, "%s: %llu units granted in all", algo,
                     (unsigned long long)total);
        cr_assert_eq(last, 1, "the last grants are single units");
        /* 100 units in far fewer calls than 100. */
        cr_assert_lt(calls, 20, "%s: %llu calls", algo,
                     (unsigned long long)calls);
    }
}

Test(lease_scripts, a_return_gives_back_exactly_the_unused_units)
{
    for (size_t k = 0; k < 2; k++) {
        const char *algo = lease_algos[k];
        struct limit_rule rule = {100, 3600000, 100};
        struct limiter_def d = def_of(algo, 1, &rule);
        char base[64];
        struct answer a;

        snprintf(base, sizeof(base), "back:{%s}", algo);
        a = take(algo, &d, base, T0, 1, 25);
        cr_assert_eq(a.units, 25);
        /* 5 used, 20 back: as if only 5 had been taken. */
        a = give_back(algo, &d, base, T0, 20);
        cr_assert(!a.error, "%s: %s", algo, a.text);
        cr_assert(a.res.allowed);
        cr_assert_eq(a.units, 20);
        cr_assert_eq(a.res.remaining, 95, "%s: %lld left", algo,
                     (long long)a.res.remaining);
        cr_assert_eq(admit_all(algo, &d, base, T0), 95);
    }
}

/*
 * Refill meanwhile: the level after a return is the level the bucket
 * would have had, had the lease taken only the units it used; and never
 * more than the burst, which refill obeys too.
 */
Test(lease_scripts, a_return_after_refill_is_as_if_only_the_used_units_went)
{
    for (size_t k = 0; k < 2; k++) {
        const char *algo = lease_algos[k];
        /* One unit a second. */
        struct limit_rule rule = {3600, 3600000, 100};
        struct limiter_def d = def_of(algo, 1, &rule);
        char base[64];
        struct answer a;

        snprintf(base, sizeof(base), "refill:{%s}", algo);
        a = take(algo, &d, base, T0, 1, 25);
        cr_assert_eq(a.units, 25);
        /* 3 s later: 75 + 3 = 78; 20 back gives 98, as 95 + 3 would. */
        a = give_back(algo, &d, base, T0 + 3000, 20);
        cr_assert_eq(a.res.remaining, 98, "%s: %lld left", algo,
                     (long long)a.res.remaining);
        cr_assert_eq(admit_all(algo, &d, base, T0 + 3000), 98);

        snprintf(base, sizeof(base), "full:{%s}", algo);
        a = take(algo, &d, base, T0, 1, 25);
        cr_assert_eq(a.units, 25);
        /* 10 s later: 75 + 10 = 85; 20 back would be 105: capped at 100,
         * where 95 + 10 is capped too. */
        a = give_back(algo, &d, base, T0 + 10000, 20);
        cr_assert_eq(a.res.remaining, 100);
        cr_assert_eq(admit_all(algo, &d, base, T0 + 10000), 100);
    }
}

Test(lease_scripts, every_rule_grants_and_gets_the_units_back)
{
    for (size_t k = 0; k < 2; k++) {
        const char *algo = lease_algos[k];
        struct limit_rule rules[2] = {{100, 3600000, 100}, {40, 3600000, 40}};
        struct limiter_def d = def_of(algo, 2, rules);
        char base[64];
        struct answer a;

        snprintf(base, sizeof(base), "two:{%s}", algo);
        /* The tightest rule has 40 left: a quarter is 10. */
        a = take(algo, &d, base, T0, 1, 40);
        cr_assert(!a.error, "%s", a.text);
        cr_assert_eq(a.units, 10, "%s: granted %llu", algo,
                     (unsigned long long)a.units);
        cr_assert_eq(a.res.remaining, 30);
        cr_assert_eq(a.res.rule, 1);
        a = give_back(algo, &d, base, T0, 10);
        cr_assert_eq(a.res.remaining, 40);
        /* Both rules got their units back: 40 under the tight one. */
        cr_assert_eq(admit_all(algo, &d, base, T0), 40);
    }
}

Test(lease_scripts, a_take_in_delay_mode_that_must_wait_grants_only_the_cost)
{
    for (size_t k = 0; k < 2; k++) {
        const char *algo = lease_algos[k];
        struct limit_rule rule = {3600, 3600000, 4};
        struct limiter_def d = def_of(algo, 1, &rule);
        char base[64];
        struct answer a;

        d.delay = true;
        d.max_delay_ms = 10000;
        snprintf(base, sizeof(base), "delay:{%s}", algo);
        cr_assert_eq(admit_all(algo, &d, base, T0), 4 + 10);
        a = take(algo, &d, base, T0 + 10000, 1, 4);
        cr_assert(a.res.allowed);
        cr_assert_gt(a.res.delay_ms, 0);
        cr_assert_eq(a.units, 1, "%s: granted %llu with a wait", algo,
                     (unsigned long long)a.units);
    }
}

Test(lease_scripts, bad_lease_arguments_are_error_replies)
{
    struct limit_rule rule = {100, 3600000, 100};
    struct limiter_def d = def_of("token_bucket", 1, &rule);
    struct limiter_def lb = def_of("leaky_bucket", 1, &rule);
    const char *lend[2] = {"lend", "5"};
    const char *zero[2] = {"take", "0"};
    const char *sign[2] = {"return", "-3"};
    struct answer a;

    a = call("token_bucket", &d, "bad:{x}", T0, 1, 0, 5, lend);
    cr_assert(a.error);
    cr_assert(strstr(a.text, "must be take or return") != NULL, "%s", a.text);
    a = call("token_bucket", &d, "bad:{x}", T0, 1, 0, 5, zero);
    cr_assert(a.error);
    cr_assert(strstr(a.text, "integer >= 1") != NULL, "%s", a.text);
    a = call("token_bucket", &d, "bad:{x}", T0, 1, 1, 5, sign);
    cr_assert(a.error);
    a = take("token_bucket", &d, "bad:{x}", T0, 3, 2);
    cr_assert(a.error);
    cr_assert(strstr(a.text, "at least the cost") != NULL, "%s", a.text);
    a = take("token_bucket", &d, "bad:{x}", T0, 1, 101);
    cr_assert(a.error);
    cr_assert(strstr(a.text, "exceed burst 100") != NULL, "%s", a.text);
    /* Only token_bucket and gcra lease. */
    a = take("leaky_bucket", &lb, "bad:{x}", T0, 1, 5);
    cr_assert(a.error);
    cr_assert(strstr(a.text, "expected 8 arguments") != NULL, "%s", a.text);
    /* Nothing was written by any of them. */
    {
        redisReply *r = redisCommand(rc, "EXISTS bad:{x}:0");

        cr_assert_eq(r->integer, 0);
        freeReplyObject(r);
    }
}
