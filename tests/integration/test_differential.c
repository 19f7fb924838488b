/*
 * test_differential.c - every script of lua/ against its C twin (algo.c).
 * One seeded sequence of (time step, cost) goes both to the script, run
 * by EVALSHA in a real redis-server with the time injected through
 * ARGV[1], and to algo_decide() on states the test keeps; the decision
 * records must be identical at every step, and after every admission each
 * key's PTTL must equal the C state's expires - now.
 *
 * Injected time against real time. Redis expires keys on its own clock,
 * which hardly moves while the injected clock jumps whole windows, so a
 * key with a TTL of a few milliseconds could vanish on the real clock
 * before the injected clock reached its expiry. The test therefore
 * PERSISTs every key once it has read its PTTL. That is sound: algo.h
 * makes a state past its expiry decide exactly like a fresh one, and the
 * TTL that the script wrote is what the PTTL check holds to.
 *
 * PTTL is measured on the real clock, which Redis 7.0 freezes neither in
 * a script nor in a MULTI. Each step is one transaction that brackets the
 * script with TIME: when the bracket lies within one millisecond (most
 * steps) the PTTL must be exactly expires - now; otherwise within the
 * bracket's width below it.
 *
 * Besides the random steps, the generator probes every so often the
 * retry_after_ms of a denial: the same cost one millisecond earlier must
 * be denied, and at exactly that time it must pass.
 */
#include <criterion/criterion.h>

#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo.h"
#include "harness.h"
#include "limit.h"
#include "scriptcall.h"
#include "scripts.h"

#define STEPS 3000
#define HISTORY 12
#define START_MS UINT64_C(1700000000000) /* aligned to every window here */

struct dcase {
    const char *name; /* also the keys' hash tag */
    enum limit_algorithm algorithm;
    size_t nrules;
    struct limit_rule rules[3];
    bool delay;            /* mode: delay */
    uint64_t max_delay_ms; /* delay mode */
    uint64_t seed;         /* of the (time step, cost) sequence */
};

/* What the script answered, with the PTTLs and the real-clock bracket. */
struct lua_step {
    struct limit_result r;
    long long pttl[LIMIT_MAX_RULES]; /* -2 absent, -1 no TTL */
    int64_t t0;                      /* Redis clock before the script, ms */
    int64_t t1;                      /* after the PTTLs, ms */
};

struct past {
    unsigned step;
    uint64_t now;
    uint64_t dt;
    uint64_t cost;
    struct limit_result r; /* both sides agreed on it */
};

struct session {
    struct proc redis;
    redisContext *rc;
};

static uint64_t
rng_next(uint64_t *s)
{
    /* splitmix64: every seed gives a good sequence. */
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));

    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static uint64_t
rng_below(uint64_t *s, uint64_t n)
{
    return n == 0 ? 0 : rng_next(s) % n;
}

static void
session_start(struct session *s)
{
    uint16_t port;

    redis_start(&s->redis, &port);
    s->rc = redisConnect("127.0.0.1", port);
    cr_assert(s->rc != NULL && s->rc->err == 0, "connect to redis: %s",
              s->rc != NULL ? s->rc->errstr : "out of memory");
}

static void
session_stop(struct session *s)
{
    redisFree(s->rc);
    cr_assert_eq(proc_stop(&s->redis, SIGTERM, 5000), 0);
}

/* SCRIPT LOADs the embedded script called 'name'; returns its sha1. */
static char *
load_script(redisContext *rc, const char *name)
{
    const struct lua_script *sc = scripts_find(name);
    redisReply *rep;
    char *sha;

    cr_assert_not_null(sc, "lua/%s.lua is not embedded", name);
    rep = redisCommand(rc, "SCRIPT LOAD %b", sc->source, sc->len);
    cr_assert(rep != NULL && rep->type == REDIS_REPLY_STRING,
              "SCRIPT LOAD %s: %s", name,
              rep != NULL && rep->str != NULL ? rep->str : "no reply");
    sha = strdup(rep->str);
    freeReplyObject(rep);
    return sha;
}

static const char *
algorithm_name(enum limit_algorithm a)
{
    switch (a) {
    case LIMIT_FIXED_WINDOW:
        return "fixed_window";
    case LIMIT_SLIDING_WINDOW:
        return "sliding_window";
    case LIMIT_SLIDING_WINDOW_COUNTER:
        return "sliding_window_counter";
    case LIMIT_TOKEN_BUCKET:
        return "token_bucket";
    case LIMIT_LEAKY_BUCKET:
        return "leaky_bucket";
    case LIMIT_GCRA:
        return "gcra";
    }
    return "?";
}

static bool
is_bucket(enum limit_algorithm a)
{
    return a == LIMIT_TOKEN_BUCKET || a == LIMIT_LEAKY_BUCKET ||
           a == LIMIT_GCRA;
}

static struct limiter_def
case_def(const struct dcase *dc)
{
    struct limiter_def d;

    memset(&d, 0, sizeof(d));
    d.algorithm = dc->algorithm;
    d.nrules = dc->nrules;
    for (size_t i = 0; i < dc->nrules; i++) {
        d.rules[i] = dc->rules[i];
        if (!is_bucket(dc->algorithm)) {
            d.rules[i].burst = d.rules[i].limit;
        }
    }
    d.delay = dc->delay;
    d.max_delay_ms = dc->max_delay_ms;
    return d;
}

/* The largest cost every rule accepts. */
static uint64_t
max_cost(const struct limiter_def *d)
{
    uint64_t cap = UINT64_MAX;

    for (size_t i = 0; i < d->nrules; i++) {
        uint64_t c =
            is_bucket(d->algorithm) ? d->rules[i].burst : d->rules[i].limit;

        cap = c < cap ? c : cap;
    }
    return cap;
}

static int64_t
time_ms(const redisReply *t)
{
    if (t->type != REDIS_REPLY_ARRAY || t->elements != 2) {
        return -1;
    }
    return strtoll(t->element[0]->str, NULL, 10) * 1000 +
           strtoll(t->element[1]->str, NULL, 10) / 1000;
}

/*
 * Runs one EVALSHA of 'd' under the keys of 'base' with 'now' and 'cost',
 * encoded as the gateway encodes it (scriptcall.h), as a transaction that
 * also reads the PTTLs and the clock, then PERSISTs the keys. Returns
 * NULL, or an error message (a new string).
 */
static char *
lua_decide(redisContext *rc, const char *sha, const struct limiter_def *d,
           const char *base, uint64_t now, uint64_t cost, unsigned step,
           struct lua_step *out)
{
    struct scriptcall sc;
    char nkeys[24];
    char reqid[24];
    const char *argv[3 + LIMIT_MAX_RULES + SCRIPTCALL_MAX_ARGS];
    size_t n;
    size_t argc = 0;
    size_t nreplies = 0;
    long long ints[SCRIPTCALL_REPLY_LEN];
    redisReply *rep = NULL;
    redisReply *ev;
    char *err = NULL;

    snprintf(reqid, sizeof(reqid), "diff-%u", step);
    if (scriptcall_encode(&sc, d, base, cost, reqid, now) != 0) {
        return strdup("the call does not encode");
    }
    n = sc.nkeys;
    snprintf(nkeys, sizeof(nkeys), "%zu", n);
    argv[argc++] = "EVALSHA";
    argv[argc++] = sha;
    argv[argc++] = nkeys;
    for (size_t i = 0; i < n; i++) {
        argv[argc++] = sc.keys[i];
    }
    for (size_t i = 0; i < sc.nargs; i++) {
        argv[argc++] = sc.args[i];
    }

    redisAppendCommand(rc, "MULTI");
    redisAppendCommand(rc, "TIME");
    redisAppendCommandArgv(rc, (int)argc, argv, NULL);
    for (size_t i = 0; i < n; i++) {
        redisAppendCommand(rc, "PTTL %s", sc.keys[i]);
    }
    redisAppendCommand(rc, "TIME");
    for (size_t i = 0; i < n; i++) {
        redisAppendCommand(rc, "PERSIST %s", sc.keys[i]);
    }
    redisAppendCommand(rc, "EXEC");
    nreplies = 5 + 2 * n;
    for (size_t i = 0; i < nreplies; i++) {
        void *r = NULL;

        if (redisGetReply(rc, &r) != REDIS_OK) {
            return strdup(rc->errstr);
        }
        if (i + 1 < nreplies) {
            freeReplyObject(r);
        } else {
            rep = r;
        }
    }
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 3 + 2 * n) {
        freeReplyObject(rep);
        return strdup("EXEC did not run the transaction");
    }
    ev = rep->element[1];
    if (ev->type == REDIS_REPLY_ERROR) {
        err = strdup(ev->str);
    } else if (ev->type != REDIS_REPLY_ARRAY || ev->elements != 6) {
        err = strdup("the script's reply is not an array of 6");
    } else {
        for (size_t i = 0; i < 6; i++) {
            if (ev->element[i]->type != REDIS_REPLY_INTEGER) {
                err = strdup("the script's reply holds a non-integer");
            }
        }
    }
    if (err == NULL) {
        memset(out, 0, sizeof(*out));
        for (size_t i = 0; i < SCRIPTCALL_REPLY_LEN; i++) {
            ints[i] = ev->element[i]->integer;
        }
        if (scriptcall_decode(d, ints, SCRIPTCALL_REPLY_LEN, &out->r) != 0) {
            err = strdup("the reply does not decode: allowed is neither 0 "
                         "nor 1, an integer is out of range, or a delay "
                         "is not the limiter's to give");
        }
        for (size_t i = 0; i < n; i++) {
            out->pttl[i] = rep->element[2 + i]->integer;
        }
        out->t0 = time_ms(rep->element[0]);
        out->t1 = time_ms(rep->element[2 + n]);
    }
    freeReplyObject(rep);
    return err;
}

static void
print_record(FILE *f, const char *who, const struct limit_result *r)
{
    fprintf(f,
            "  %-4s allowed=%d remaining=%" PRId64 " retry_after_ms=%" PRIu64
            " reset_ms=%" PRIu64 " delay_ms=%" PRIu64 " rule=%u\n",
            who, r->allowed, r->remaining, r->retry_after_ms, r->reset_ms,
            r->delay_ms, r->rule);
}

static bool
same_record(const struct limit_result *a, const struct limit_result *b)
{
    return a->allowed == b->allowed && a->remaining == b->remaining &&
           a->retry_after_ms == b->retry_after_ms &&
           a->reset_ms == b->reset_ms && a->delay_ms == b->delay_ms &&
           a->rule == b->rule;
}

/* Fails the test with everything needed to replay the divergence. */
static void
report(redisContext *rc, const struct dcase *dc, char keys[][64],
       const struct algo_state *st, const struct past *hist, unsigned step,
       const char *what, const struct limit_result *c, const struct lua_step *l)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    unsigned from = step >= HISTORY ? step - HISTORY : 0;
    struct limiter_def d = case_def(dc);

    fprintf(f, "%s: %s at step %u\n", dc->name, what, step);
    fprintf(f,
            "  limiter: %s, %s mode, max_delay_ms %" PRIu64 ", seed %" PRIu64
            "\n",
            algorithm_name(dc->algorithm), dc->delay ? "delay" : "deny",
            dc->max_delay_ms, dc->seed);
    for (size_t i = 0; i < d.nrules; i++) {
        fprintf(f,
                "  rule %zu: limit %" PRIu64 " window_ms %" PRIu64
                " burst %" PRIu64 " (key %s)\n",
                i, d.rules[i].limit, d.rules[i].window_ms, d.rules[i].burst,
                keys[i]);
    }
    fprintf(f, "  steps before (both sides agreed):\n");
    for (unsigned s = from; s < step; s++) {
        const struct past *p = &hist[s % HISTORY];

        fprintf(f, "   #%u now=%" PRIu64 " (+%" PRIu64 ") cost=%" PRIu64 ":",
                p->step, p->now, p->dt, p->cost);
        print_record(f, "", &p->r);
    }
    fprintf(f, "  this step: now=%" PRIu64 " (+%" PRIu64 ") cost=%" PRIu64 "\n",
            hist[step % HISTORY].now, hist[step % HISTORY].dt,
            hist[step % HISTORY].cost);
    if (c != NULL) {
        print_record(f, "C", c);
    }
    if (l != NULL) {
        print_record(f, "Lua", &l->r);
        for (size_t i = 0; i < dc->nrules; i++) {
            fprintf(f, "  Lua PTTL %s = %lld (clock bracket %" PRId64 " ms)\n",
                    keys[i], l->pttl[i], l->t1 - l->t0);
        }
    }
    for (size_t i = 0; i < dc->nrules; i++) {
        redisReply *rep;

        fprintf(f,
                "  C state %zu after: present=%d expires=%" PRIu64
                " (now+%" PRId64 ") a=%" PRId64 " b=%" PRId64 " c=%" PRId64
                " nlog=%zu",
                i, st[i].present, st[i].expires,
                (int64_t)(st[i].expires - hist[step % HISTORY].now), st[i].a,
                st[i].b, st[i].c, st[i].nlog);
        for (size_t j = st[i].nlog > 6 ? st[i].nlog - 6 : 0; j < st[i].nlog;
             j++) {
            fprintf(f, " %" PRIu64, st[i].log[j]);
        }
        fprintf(f, "\n  Redis %s after:", keys[i]);
        if (dc->algorithm == LIMIT_SLIDING_WINDOW) {
            rep = redisCommand(rc, "ZRANGE %s -6 -1 WITHSCORES", keys[i]);
        } else {
            rep = redisCommand(rc, "GET %s", keys[i]);
        }
        if (rep != NULL && rep->type == REDIS_REPLY_STRING) {
            fprintf(f, " %s", rep->str);
        }
        for (size_t j = 0; rep != NULL && j < rep->elements; j++) {
            fprintf(f, " %s", rep->element[j]->str);
        }
        fprintf(f, "\n");
        freeReplyObject(rep);
    }
    fclose(f);
    cr_assert_fail("%s", buf);
}

/* The step's PTTLs against the C states; false on a mismatch. */
static bool
ttl_matches(const struct limiter_def *d, const struct algo_state *st,
            const struct lua_step *l, uint64_t now, bool allowed,
            unsigned *exact, unsigned *checked)
{
    int64_t span = l->t1 - l->t0;

    if (l->t0 < 0 || span < 0) {
        return false;
    }
    for (size_t i = 0; i < d->nrules; i++) {
        bool live = st[i].present && st[i].expires > now;
        long long want = live ? (long long)(st[i].expires - now) : -1;
        long long p = l->pttl[i];

        /* A denial writes nothing, so the key keeps no TTL (persisted)
         * or is gone; if the script did set one, it must be right. */
        if (!allowed && p < 0) {
            continue;
        }
        /* A TTL no longer than the clock bracket may run out in real
         * time before PTTL reads it (a 1 ms TTL, seen on a loaded
         * machine): the key being gone is then what the C state says. */
        if (live && p == -2 && want <= span + 1) {
            (*checked)++;
            continue;
        }
        if (!live || p < 0) {
            return false;
        }
        (*checked)++;
        if (span == 0) {
            (*exact)++;
            if (p != want) {
                return false;
            }
        } else if (p > want || p < want - span) {
            return false;
        }
    }
    return true;
}

/* Expectations a probe step puts on the decision. */
enum probe {
    PROBE_NONE,
    PROBE_DENIED,  /* one ms before retry_after_ms: must be denied */
    PROBE_ALLOWED, /* at retry_after_ms: must pass */
};

struct gen {
    uint64_t seed;       /* PRNG state */
    enum probe pending;  /* what the next step probes */
    uint64_t probe_dt;   /* its time step */
    uint64_t probe_cost; /* its cost */
    uint64_t w_min;      /* smallest window */
    uint64_t w_max;      /* largest window */
    uint64_t cap;        /* largest valid cost */
};

/* The next (time step, cost); sets '*probe' to what it must show. */
static void
gen_next(struct gen *g, uint64_t now, uint64_t *dt, uint64_t *cost,
         enum probe *probe)
{
    uint64_t r = rng_below(&g->seed, 100);
    uint64_t c = rng_below(&g->seed, 10);

    *probe = g->pending;
    if (g->pending != PROBE_NONE) {
        *dt = g->probe_dt;
        *cost = g->probe_cost;
        g->pending = PROBE_NONE;
        return;
    }
    if (r < 25) {
        *dt = 0;
    } else if (r < 55) {
        *dt = rng_below(&g->seed, g->w_min / 8 + 2);
    } else if (r < 75) {
        *dt = rng_below(&g->seed, g->w_min);
    } else if (r < 83) {
        /* The next boundary of the first rule's window, or 1 ms short. */
        *dt = g->w_min - now % g->w_min;
        if (*dt > 1 && rng_below(&g->seed, 2) == 0) {
            (*dt)--;
        }
    } else if (r < 94) {
        *dt = rng_below(&g->seed, g->w_max + 1);
    } else {
        *dt = g->w_max + rng_below(&g->seed, 3 * g->w_max);
    }
    *cost = c < 6 ? 1 : c < 9 ? 1 + rng_below(&g->seed, g->cap) : g->cap;
}

/* After a denial: sometimes probe its retry_after_ms. */
static void
gen_after(struct gen *g, const struct limit_result *r, uint64_t cost)
{
    uint64_t p;

    if (r->allowed || r->retry_after_ms == 0) {
        return;
    }
    p = rng_below(&g->seed, 10);
    if (p < 2 && r->retry_after_ms > 1) {
        g->pending = PROBE_DENIED;
        g->probe_dt = r->retry_after_ms - 1;
    } else if (p < 4) {
        g->pending = PROBE_ALLOWED;
        g->probe_dt = r->retry_after_ms;
    }
    g->probe_cost = cost;
}

static void
run_case(struct session *s, const struct dcase *dc)
{
    struct limiter_def d = case_def(dc);
    struct algo_state st[LIMIT_MAX_RULES];
    char base[48];
    char keys[LIMIT_MAX_RULES][64];
    struct past hist[HISTORY];
    char *sha = load_script(s->rc, algorithm_name(dc->algorithm));
    struct gen g = {.seed = dc->seed, .cap = max_cost(&d)};
    uint64_t now = START_MS;
    unsigned allowed = 0;
    unsigned delayed = 0;
    unsigned probes = 0;
    unsigned exact = 0;
    unsigned checked = 0;
    struct limit_result c;
    struct lua_step l;
    char *err;

    memset(st, 0, sizeof(st));
    cr_assert_lt(snprintf(base, sizeof(base), "sluice:diff:{%s}", dc->name),
                 (int)sizeof(base));
    g.w_min = UINT64_MAX;
    for (size_t i = 0; i < d.nrules; i++) {
        uint64_t w = d.rules[i].window_ms;

        cr_assert_eq(scriptcall_key(keys[i], sizeof(keys[i]), base, i), 0);
        g.w_min = w < g.w_min ? w : g.w_min;
        g.w_max = w > g.w_max ? w : g.w_max;
    }

    for (unsigned step = 0; step < STEPS; step++) {
        struct past *p = &hist[step % HISTORY];
        enum probe probe;
        uint64_t dt;
        uint64_t cost;

        gen_next(&g, now, &dt, &cost, &probe);
        now += dt;
        *p = (struct past){step, now, dt, cost, {0}};
        cr_assert_eq(algo_decide(&d, st, now, cost, &c), 0, "%s step %u",
                     dc->name, step);
        err = lua_decide(s->rc, sha, &d, base, now, cost, step, &l);
        if (err != NULL) {
            report(s->rc, dc, keys, st, hist, step, err, &c, NULL);
        }
        if (!same_record(&c, &l.r)) {
            report(s->rc, dc, keys, st, hist, step, "records differ", &c, &l);
        }
        if (!ttl_matches(&d, st, &l, now, c.allowed, &exact, &checked)) {
            report(s->rc, dc, keys, st, hist, step,
                   "PTTL differs from the C state's expires - now", &c, &l);
        }
        if (probe == PROBE_DENIED && c.allowed) {
            report(s->rc, dc, keys, st, hist, step,
                   "admitted 1 ms before the previous retry_after_ms", &c, &l);
        }
        if (probe == PROBE_ALLOWED && !c.allowed) {
            report(s->rc, dc, keys, st, hist, step,
                   "denied at the previous retry_after_ms", &c, &l);
        }
        probes += probe != PROBE_NONE;
        p->r = c;
        allowed += c.allowed;
        delayed += c.delay_ms > 0;
        if (probe == PROBE_DENIED) {
            /* Then 1 ms later, at the retry time itself: must pass. */
            g.pending = PROBE_ALLOWED;
            g.probe_dt = 1;
            g.probe_cost = cost;
        } else {
            gen_after(&g, &c, cost);
        }
    }

    cr_log_info("%s: %u steps, %u admitted, %u delayed, %u retry probes, "
                "%u of %u PTTLs exact",
                dc->name, STEPS, allowed, delayed, probes, exact, checked);
    /* A sequence that never denies, or never admits, proves little. */
    cr_assert_geq(allowed, STEPS / 10, "%s: only %u of %u admitted", dc->name,
                  allowed, STEPS);
    cr_assert_geq(STEPS - allowed, STEPS / 10, "%s: only %u of %u denied",
                  dc->name, STEPS - allowed, STEPS);
    cr_assert_geq(probes, 50, "%s: %u retry probes", dc->name, probes);
    if (dc->delay) {
        cr_assert_geq(delayed, STEPS / 20, "%s: only %u delayed", dc->name,
                      delayed);
    }
    /* The clock bracket is usually within one millisecond. */
    cr_assert_geq(exact * 2, checked, "%s: %u of %u PTTLs checked exactly",
                  dc->name, exact, checked);

    /* Invalid costs: C refuses with -1, Lua with an error reply. */
    for (int i = 0; i < 2; i++) {
        uint64_t cost = i == 0 ? 0 : g.cap + 1;
        struct lua_step none;

        now += 1;
        cr_assert_eq(algo_decide(&d, st, now, cost, &c), -1);
        err = lua_decide(s->rc, sha, &d, base, now, cost, STEPS + i, &none);
        cr_assert_not_null(err, "%s: cost %" PRIu64 " accepted by Lua",
                           dc->name, cost);
        cr_assert(strstr(err, "cost") != NULL, "%s: %s", dc->name, err);
        free(err);
    }
    for (size_t i = 0; i < d.nrules; i++) {
        algo_state_reset(&st[i]);
    }
    free(sha);
}

static void
run_cases(const struct dcase *cases, size_t n)
{
    struct session s;

    session_start(&s);
    for (size_t i = 0; i < n; i++) {
        run_case(&s, &cases[i]);
    }
    session_stop(&s);
}

#define R(l, w, b)                                                             \
    {                                                                          \
        .limit = (l), .window_ms = (w), .burst = (b)                           \
    }
#define NCASES(a) (sizeof(a) / sizeof((a)[0]))

Test(differential, fixed_window_matches_its_c_twin, .timeout = 120)
{
    static const struct dcase cases[] = {
        {"fw-one", LIMIT_FIXED_WINDOW, 1, {R(10, 1000, 0)}, false, 0, 1},
        {"fw-odd", LIMIT_FIXED_WINDOW, 1, {R(3, 7, 0)}, false, 0, 2},
        {"fw-multi",
         LIMIT_FIXED_WINDOW,
         3,
         {R(5, 1000, 0), R(12, 5000, 0), R(30, 60000, 0)},
         false,
         0,
         3},
    };

    run_cases(cases, NCASES(cases));
}

Test(differential, sliding_window_matches_its_c_twin, .timeout = 120)
{
    static const struct dcase cases[] = {
        {"sw-one", LIMIT_SLIDING_WINDOW, 1, {R(10, 1000, 0)}, false, 0, 11},
        {"sw-odd", LIMIT_SLIDING_WINDOW, 1, {R(4, 13, 0)}, false, 0, 12},
        {"sw-multi",
         LIMIT_SLIDING_WINDOW,
         2,
         {R(3, 100, 0), R(10, 1000, 0)},
         false,
         0,
         13},
    };

    run_cases(cases, NCASES(cases));
}

Test(differential, sliding_window_counter_matches_its_c_twin, .timeout = 120)
{
    static const struct dcase cases[] = {
        {"swc-one",
         LIMIT_SLIDING_WINDOW_COUNTER,
         1,
         {R(10, 1000, 0)},
         false,
         0,
         21},
        {"swc-odd",
         LIMIT_SLIDING_WINDOW_COUNTER,
         1,
         {R(7, 333, 0)},
         false,
         0,
         22},
        {"swc-multi",
         LIMIT_SLIDING_WINDOW_COUNTER,
         2,
         {R(4, 250, 0), R(15, 2000, 0)},
         false,
         0,
         23},
    };

    run_cases(cases, NCASES(cases));
}

Test(differential, token_bucket_matches_its_c_twin, .timeout = 120)
{
    static const struct dcase cases[] = {
        {"tb-one", LIMIT_TOKEN_BUCKET, 1, {R(7, 1000, 5)}, false, 0, 31},
        {"tb-multi",
         LIMIT_TOKEN_BUCKET,
         2,
         {R(10, 1000, 10), R(3, 1000, 4)},
         false,
         0,
         32},
        {"tb-delay", LIMIT_TOKEN_BUCKET, 1, {R(3, 1000, 2)}, true, 1500, 33},
        {"tb-delay-multi",
         LIMIT_TOKEN_BUCKET,
         2,
         {R(7, 1000, 3), R(20, 10000, 20)},
         true,
         500,
         34},
    };

    run_cases(cases, NCASES(cases));
}

Test(differential, leaky_bucket_matches_its_c_twin, .timeout = 120)
{
    static const struct dcase cases[] = {
        {"lb-one", LIMIT_LEAKY_BUCKET, 1, {R(7, 1000, 5)}, false, 0, 41},
        {"lb-multi",
         LIMIT_LEAKY_BUCKET,
         2,
         {R(10, 1000, 10), R(3, 1000, 4)},
         false,
         0,
         42},
        {"lb-delay", LIMIT_LEAKY_BUCKET, 1, {R(2, 1000, 4)}, true, 2000, 43},
        {"lb-delay-multi",
         LIMIT_LEAKY_BUCKET,
         2,
         {R(7, 1000, 3), R(20, 10000, 20)},
         true,
         500,
         44},
    };

    run_cases(cases, NCASES(cases));
}

Test(differential, gcra_matches_its_c_twin, .timeout = 120)
{
    static const struct dcase cases[] = {
        {"gcra-one", LIMIT_GCRA, 1, {R(7, 1000, 5)}, false, 0, 51},
        {"gcra-multi",
         LIMIT_GCRA,
         2,
         {R(10, 1000, 10), R(3, 1000, 4)},
         false,
         0,
         52},
        {"gcra-delay", LIMIT_GCRA, 1, {R(3, 1000, 2)}, true, 1500, 53},
        {"gcra-delay-multi",
         LIMIT_GCRA,
         2,
         {R(7, 1000, 3), R(20, 10000, 20)},
         true,
         500,
         54},
    };

    run_cases(cases, NCASES(cases));
}
