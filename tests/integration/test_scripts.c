/*
 * test_scripts.c - the six rate-limit Lua scripts of lua/ (as embedded in
 * the binary, scripts.h) inside a real redis-server, driven over hiredis
 * with EVAL. Time is injected through ARGV[1] wherever a count or a record
 * is asserted, so the clock is stepped, never waited for; only the idle
 * test runs on Redis's own clock. Every expected record below is computed
 * by hand from the semantics in src/limit/algo.h.
 *
 * Redis expires keys on its real clock, whatever time a script was given:
 * a key written 1 ms before its injected window ends lives 1 ms of real
 * time, and a slow run (ASan, a loaded machine) lost it between two calls
 * at the same injected instant. So decide() PERSISTs the keys in the
 * transaction that runs each injected-time call, as the differential test
 * does: algo.h makes a state past its expiry decide exactly like a fresh
 * one, so nothing else changes. Tests about TTLs set 'keep_ttl' and read
 * them at once.
 */
#include "harness.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <hiredis/hiredis.h>

#include "limit.h"
#include "scriptcall.h"
#include "scripts.h"

/* An injected "now": a multiple of 60 s, so windows of 1, 5, 10, 30 and
 * 60 s all start exactly there. */
#define T0 UINT64_C(1700000040000)

#define MAX_WORDS 256

static const char *const all_algos[] = {
    "fixed_window", "sliding_window", "sliding_window_counter",
    "token_bucket", "leaky_bucket",   "gcra",
};
#define NALGOS (sizeof(all_algos) / sizeof(all_algos[0]))

static const char *const bucket_algos[] = {"token_bucket", "leaky_bucket",
                                           "gcra"};

static struct proc redis;
static uint16_t redis_port;
static redisContext *rc;
static unsigned long request_no; /* makes request ids unique */

static void
connect_redis(void)
{
    rc = redisConnect("127.0.0.1", redis_port);
    cr_assert(rc != NULL && rc->err == 0, "cannot connect to redis: %s",
              rc != NULL ? rc->errstr : "out of memory");
}

static void
setup(void)
{
    redis_start(&redis, &redis_port);
    connect_redis();
}

static void
teardown(void)
{
    redisFree(rc);
    rc = NULL;
    cr_assert_eq(proc_stop(&redis, SIGTERM, 10000), 0,
                 "redis-server did not exit cleanly");
}

TestSuite(scripts, .init = setup, .fini = teardown, .timeout = 60);

/* A limiter as the gateway would call it: one key per rule. */
struct lim {
    const char *algo;               /* script name */
    char base[80];                  /* the keys' base (scriptcall.h) */
    char keys[LIMIT_MAX_RULES][96]; /* its keys, to read the state */
    struct limit_rule rules[LIMIT_MAX_RULES]; /* ARGV triples */
    size_t nrules;                            /* 1..LIMIT_MAX_RULES */
    bool delay;                               /* mode 1 */
    uint64_t max_delay;                       /* ARGV[4] */
    bool keep_ttl; /* leave the TTLs as written, even with injected time */
};

/* The reply of one script call, as the contract orders it. */
struct rec {
    long long allowed;   /* 1 or 0 */
    long long remaining; /* units left under the tightest rule */
    long long retry;     /* retry_after_ms */
    long long reset;     /* reset_ms */
    long long delay;     /* delay_ms */
    long long rule;      /* 0-based deciding rule */
};

/* Sets the base of the keys of 'l' and the keys that follow from it. */
static void
set_base(struct lim *l, const char *base)
{
    cr_assert_lt(strlen(base), sizeof(l->base));
    strcpy(l->base, base);
    for (size_t i = 0; i < l->nrules; i++) {
        cr_assert_eq(scriptcall_key(l->keys[i], sizeof(l->keys[i]), l->base, i),
                     0);
    }
}

/* Keys "test:<algo>:{<scope>}:<i>": one hash tag per limiter. */
static struct lim
mk(const char *algo, const char *scope, size_t nrules,
   const struct limit_rule *rules)
{
    struct lim l;
    char base[sizeof(l.base)];

    memset(&l, 0, sizeof(l));
    cr_assert(nrules >= 1 && nrules <= LIMIT_MAX_RULES);
    l.algo = algo;
    l.nrules = nrules;
    for (size_t i = 0; i < nrules; i++) {
        l.rules[i] = rules[i];
    }
    snprintf(base, sizeof(base), "test:%s:{%s}", algo, scope);
    set_base(&l, base);
    return l;
}

static struct lim
mk1(const char *algo, const char *scope, uint64_t limit, uint64_t window,
    uint64_t burst)
{
    struct limit_rule r = {limit, window, burst};

    return mk(algo, scope, 1, &r);
}

/*
 * EVAL of the embedded script 'algo' with 'nkeys' and the 'nwords' words
 * that follow the key count (keys, then arguments). With 'persist', the
 * keys are PERSISTed in the same transaction, before Redis can expire
 * them. Returns the script's reply; never NULL.
 */
static redisReply *
eval_keys(const char *algo, int nkeys, const char *const *words, size_t nwords,
          bool persist)
{
    const struct lua_script *s = scripts_find(algo);
    const char *argv[MAX_WORDS + 3];
    size_t lens[MAX_WORDS + 3];
    char nk[16];
    redisReply *r;

    cr_assert_not_null(s, "no embedded script \"%s\"", algo);
    cr_assert(nwords <= MAX_WORDS);
    snprintf(nk, sizeof(nk), "%d", nkeys);
    argv[0] = "EVAL";
    argv[1] = s->source;
    argv[2] = nk;
    lens[0] = 4;
    lens[1] = s->len;
    lens[2] = strlen(nk);
    for (size_t i = 0; i < nwords; i++) {
        argv[3 + i] = words[i];
        lens[3 + i] = strlen(words[i]);
    }
    if (!persist) {
        r = redisCommandArgv(rc, (int)nwords + 3, argv, lens);
        cr_assert_not_null(r, "redis: %s", rc->errstr);
        return r;
    }
    redisAppendCommand(rc, "MULTI");
    redisAppendCommandArgv(rc, (int)nwords + 3, argv, lens);
    for (int i = 0; i < nkeys; i++) {
        redisAppendCommand(rc, "PERSIST %s", words[i]);
    }
    redisAppendCommand(rc, "EXEC");
    /* +OK, +QUEUED for each command, then EXEC's array. */
    for (int i = 0; i < nkeys + 2; i++) {
        cr_assert_eq(redisGetReply(rc, (void **)&r), REDIS_OK, "redis: %s",
                     rc->errstr);
        freeReplyObject(r);
    }
    cr_assert_eq(redisGetReply(rc, (void **)&r), REDIS_OK, "redis: %s",
                 rc->errstr);
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == (size_t)nkeys + 1,
              "%s: EXEC did not run the transaction", algo);
    {
        redisReply *script = r->element[0];

        r->element[0] = NULL; /* kept; freeReplyObject skips NULL */
        freeReplyObject(r);
        return script;
    }
}

static redisReply *
eval_words(const char *algo, int nkeys, const char *const *words, size_t nwords)
{
    return eval_keys(algo, nkeys, words, nwords, false);
}

/* No lease operation: a plain call. */
#define NO_LEASE (-1)

/* The limiter 'l' stands for, as the gateway's config would hold it. */
static struct limiter_def
def_of(const struct lim *l)
{
    struct limiter_def def;

    memset(&def, 0, sizeof(def));
    cr_assert_eq(limit_algorithm_parse(l->algo, &def.algorithm), 0);
    memcpy(def.rules, l->rules, sizeof(def.rules));
    def.nrules = l->nrules;
    def.delay = l->delay;
    def.max_delay_ms = l->max_delay;
    return def;
}

/* Encodes one call of 'l' at 'now' for 'cost' into 'sc' (a lease take
 * or return of 'units' when 'op' is a scriptcall_lease_op). */
static void
encode_call(struct scriptcall *sc, const struct lim *l, uint64_t now,
            uint64_t cost, int op, uint64_t units, char *reqid, size_t len)
{
    struct limiter_def def = def_of(l);

    snprintf(reqid, len, "req-%lu", ++request_no);
    cr_assert_eq(scriptcall_encode(sc, &def, l->base, cost, reqid, now), 0);
    if (op != NO_LEASE) {
        cr_assert_eq(scriptcall_lease(sc, (enum scriptcall_lease_op)op, units),
                     0);
    }
}

/*
 * One decision of 'l' at 'now' (0: Redis's clock) for 'cost' units: the
 * call encoded, and the reply decoded, by the gateway's codec
 * (scriptcall.h).
 */
static struct rec
decide(const struct lim *l, uint64_t now, uint64_t cost)
{
    struct scriptcall sc;
    struct limiter_def def = def_of(l);
    struct limit_result res;
    char reqid[32];
    const char *words[LIMIT_MAX_RULES + SCRIPTCALL_MAX_ARGS];
    size_t n = 0;
    long long v[6];
    redisReply *r;

    encode_call(&sc, l, now, cost, NO_LEASE, 0, reqid, sizeof(reqid));
    for (size_t i = 0; i < sc.nkeys; i++) {
        words[n++] = sc.keys[i];
    }
    for (size_t i = 0; i < sc.nargs; i++) {
        words[n++] = sc.args[i];
    }
    r = eval_keys(l->algo, (int)sc.nkeys, words, n, now != 0 && !l->keep_ttl);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s: not an array: %s", l->algo,
                 r->type == REDIS_REPLY_ERROR ? r->str : "?");
    cr_assert_eq(r->elements, 6, "%s: %zu elements", l->algo, r->elements);
    for (size_t i = 0; i < 6; i++) {
        cr_assert_eq(r->element[i]->type, REDIS_REPLY_INTEGER,
                     "%s: element %zu is not an integer", l->algo, i);
        v[i] = r->element[i]->integer;
    }
    freeReplyObject(r);
    cr_assert_eq(scriptcall_decode(&def, v, 6, &res), 0,
                 "%s: malformed reply {%lld, %lld, %lld, %lld, %lld, %lld}",
                 l->algo, v[0], v[1], v[2], v[3], v[4], v[5]);
    return (struct rec){res.allowed ? 1 : 0,           res.remaining,
                        (long long)res.retry_after_ms, (long long)res.reset_ms,
                        (long long)res.delay_ms,       (long long)res.rule};
}

static void
assert_rec_at(int line, const char *algo, struct rec got, struct rec want)
{
    cr_assert(got.allowed == want.allowed && got.remaining == want.remaining &&
                  got.retry == want.retry && got.reset == want.reset &&
                  got.delay == want.delay && got.rule == want.rule,
              "line %d, %s: got {allowed %lld, remaining %lld, retry %lld, "
              "reset %lld, delay %lld, rule %lld}, want {%lld, %lld, %lld, "
              "%lld, %lld, %lld}",
              line, algo, got.allowed, got.remaining, got.retry, got.reset,
              got.delay, got.rule, want.allowed, want.remaining, want.retry,
              want.reset, want.delay, want.rule);
}

/* Asserts the whole record: allowed, remaining, retry_after_ms, reset_ms,
 * delay_ms, rule. */
#define EXPECT(l, now, cost, a, rem, retry, reset, delay, rule)                \
    assert_rec_at(__LINE__, (l)->algo, decide((l), (now), (cost)),             \
                  (struct rec){a, rem, retry, reset, delay, rule})

/* Copies the state at 'from' to 'to', TTL included. */
static void
copy_key(const char *from, const char *to)
{
    redisReply *r = redisCommand(rc, "COPY %s %s REPLACE", from, to);

    cr_assert_not_null(r, "redis: %s", rc->errstr);
    cr_assert(r->type == REDIS_REPLY_INTEGER && r->integer == 1,
              "COPY %s %s: %s", from, to,
              r->type == REDIS_REPLY_ERROR ? r->str : "nothing copied");
    freeReplyObject(r);
}

/* How many of 'tries' calls at 'now' for 'cost' units were admitted. */
static int
admit_n(const struct lim *l, uint64_t now, uint64_t cost, int tries)
{
    int admitted = 0;

    for (int i = 0; i < tries; i++) {
        admitted += decide(l, now, cost).allowed ? 1 : 0;
    }
    return admitted;
}

/* A command whose reply is an integer. */
static long long
cmd_int(const char *fmt, const char *key)
{
    redisReply *r = redisCommand(rc, fmt, key);
    long long v;

    cr_assert_not_null(r, "redis: %s", rc->errstr);
    cr_assert_eq(r->type, REDIS_REPLY_INTEGER, "%s %s: not an integer", fmt,
                 key);
    v = r->integer;
    freeReplyObject(r);
    return v;
}

/*
 * One number of the state of rule 0 of 'l', named as lua/README.md names
 * it; -1 if the key is absent. The state is one string: the algorithm's
 * fields (below), in order, as integers joined by ':'. Anything else fails
 * the test.
 */
static long long
state_field(const struct lim *l, const char *field)
{
    static const char *const layouts[][2] = {
        {"fixed_window", "w:n"}, {"sliding_window_counter", "w:cur:prev"},
        {"token_bucket", "s:t"}, {"leaky_bucket", "v:t"},
        {"gcra", "t:f"},
    };
    const char *layout = NULL;
    redisReply *r;
    long long v = -1;

    for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++) {
        if (strcmp(layouts[i][0], l->algo) == 0) {
            layout = layouts[i][1];
        }
    }
    cr_assert_not_null(layout, "%s keeps no string state", l->algo);
    r = redisCommand(rc, "GET %s", l->keys[0]);
    cr_assert_not_null(r, "redis: %s", rc->errstr);
    cr_assert(r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_NIL,
              "GET %s: type %d", l->keys[0], r->type);
    if (r->type == REDIS_REPLY_STRING) {
        const char *p = r->str;
        const char *name = layout;
        bool found = false;

        /* Walk the names of 'layout' and the numbers of the value. */
        for (;;) {
            size_t len = strcspn(name, ":");
            char *end;
            long long n = strtoll(p, &end, 10);

            cr_assert(end != p && (*end == ':' || *end == '\0'),
                      "%s: state \"%s\" does not read as %s", l->keys[0],
                      r->str, layout);
            if (strlen(field) == len && strncmp(name, field, len) == 0) {
                v = n;
                found = true;
            }
            cr_assert_eq(*end == '\0', name[len] == '\0',
                         "%s: state \"%s\" does not read as %s", l->keys[0],
                         r->str, layout);
            if (*end == '\0') {
                break;
            }
            p = end + 1;
            name += len + 1;
        }
        cr_assert(found, "%s has no field %s", layout, field);
    }
    freeReplyObject(r);
    return v;
}

/* Every key matching 'pattern', found with SCAN; returns how many, and
 * copies up to 'max' of them into 'out' (freed by the caller). */
static size_t
scan_keys(const char *pattern, char **out, size_t max)
{
    char cursor[32] = "0";
    size_t n = 0;

    do {
        redisReply *r =
            redisCommand(rc, "SCAN %s MATCH %s COUNT 1000", cursor, pattern);

        cr_assert_not_null(r, "redis: %s", rc->errstr);
        cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
        snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
        for (size_t i = 0; i < r->element[1]->elements; i++) {
            if (n < max) {
                out[n] = strdup(r->element[1]->element[i]->str);
            }
            n++;
        }
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0);
    return n;
}

static bool
is_bucket(const char *algo)
{
    return strcmp(algo, "token_bucket") == 0 ||
           strcmp(algo, "leaky_bucket") == 0 || strcmp(algo, "gcra") == 0;
}

/*
 * The scripts as embedded.
 */

Test(scripts, every_algorithm_is_embedded_with_a_plain_lua_shebang)
{
    cr_assert_eq(lua_script_count, NALGOS);
    for (size_t i = 0; i < NALGOS; i++) {
        const struct lua_script *s = scripts_find(all_algos[i]);

        cr_assert_not_null(s, "%s is not embedded", all_algos[i]);
        cr_assert_eq(strlen(s->source), s->len);
        /* Strict key checking, and no flag such as no-writes. */
        cr_assert(strncmp(s->source, "#!lua\n", 6) == 0,
                  "%s does not start with \"#!lua\\n\"", all_algos[i]);
        /* Built on lib/decide.lua, so the client may send it batches. */
        cr_assert(s->batch, "%s is not marked as taking batches", all_algos[i]);
    }
}

/* The name the client expects from SCRIPT LOAD is the one Redis gives:
 * the client refuses a server that answers any other. */
Test(scripts, each_scripts_sha1_is_what_script_load_answers)
{
    static const struct lua_script one = {"one", "return 1", 8, false};
    char sha[SCRIPTS_SHA1_HEX + 1];

    /* Redis's documented example for SCRIPT LOAD "return 1". */
    cr_assert(scripts_sha1(&one, sha));
    cr_assert_str_eq(sha, "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
    for (size_t i = 0; i < NALGOS; i++) {
        const struct lua_script *s = scripts_find(all_algos[i]);
        redisReply *r = redisCommand(rc, "SCRIPT LOAD %b", s->source, s->len);

        cr_assert(r != NULL && r->type == REDIS_REPLY_STRING,
                  "SCRIPT LOAD %s failed", all_algos[i]);
        cr_assert(scripts_sha1(s, sha));
        cr_assert_str_eq(sha, r->str, "%s", all_algos[i]);
        freeReplyObject(r);
    }
}

/* The shared parts from lua/lib/ are in every embedded script, whole. */
Test(scripts, every_script_carries_the_shared_parts)
{
    static const char *const parts[] = {"-- prelude.lua - ",
                                        "-- decide.lua - "};

    for (size_t i = 0; i < NALGOS; i++) {
        const char *src = scripts_find(all_algos[i])->source;

        for (size_t k = 0; k < 2; k++) {
            cr_assert(strstr(src, parts[k]) != NULL, "%s lacks %s",
                      all_algos[i], parts[k]);
        }
        cr_assert(strstr(src, "\n--#include ") == NULL,
                  "%s: an include was left in place", all_algos[i]);
        cr_assert(strstr(src, "local function parse()") != NULL &&
                      strstr(src, "local function parse()") <
                          strstr(src, "local function evaluate("),
                  "%s: parse() must come before evaluate()", all_algos[i]);
    }
}

/*
 * fixed_window
 */

Test(scripts, fixed_window_admits_the_limit_in_each_aligned_window)
{
    struct lim l = mk1("fixed_window", "a", 5, 1000, 5);

    cr_assert_eq(admit_n(&l, T0, 1, 8), 5);
    cr_assert_eq(admit_n(&l, T0 + 999, 1, 3), 0);
    cr_assert_eq(admit_n(&l, T0 + 1000, 1, 8), 5);
    cr_assert_eq(admit_n(&l, T0 + 1999, 1, 3), 0);
    cr_assert_eq(admit_n(&l, T0 + 3999, 1, 8), 5);
    cr_assert_eq(admit_n(&l, T0 + 4000, 1, 8), 5);
}

Test(scripts, fixed_window_reports_remaining_reset_and_retry)
{
    struct lim l = mk1("fixed_window", "a", 3, 1000, 3);

    EXPECT(&l, T0 + 250, 1, 1, 2, 0, 750, 0, 0);
    EXPECT(&l, T0 + 300, 2, 1, 0, 0, 700, 0, 0);
    EXPECT(&l, T0 + 400, 1, 0, 0, 600, 600, 0, 0);
    cr_assert_eq(state_field(&l, "n"), 3);
    cr_assert_eq(state_field(&l, "w"), (long long)(T0 / 1000));
    EXPECT(&l, T0 + 1000, 3, 1, 0, 0, 1000, 0, 0);
}

Test(scripts, fixed_window_with_two_rules_names_the_tightest_and_the_latest)
{
    struct limit_rule rules[] = {{2, 1000, 2}, {2, 5000, 2}};
    struct lim l = mk("fixed_window", "a", 2, rules);
    struct limit_rule r2[] = {{5, 1000, 5}, {3, 5000, 3}};
    struct lim m = mk("fixed_window", "b", 2, r2);

    /* Equal remaining: the first rule; reset: the longer of the two. */
    EXPECT(&l, T0 + 100, 1, 1, 1, 0, 4900, 0, 0);
    EXPECT(&l, T0 + 100, 1, 1, 0, 0, 4900, 0, 0);
    /* Both deny: the rule with the longest retry decides. */
    EXPECT(&l, T0 + 100, 1, 0, 0, 4900, 4900, 0, 1);
    /* A new 1 s window, but the 5 s window is still full. */
    EXPECT(&l, T0 + 1000, 1, 0, 0, 4000, 4000, 0, 1);
    /* Allowed: the rule with the fewest units left. */
    EXPECT(&m, T0, 1, 1, 2, 0, 5000, 0, 1);

    /* Both deny with the same retry: the first of them. */
    {
        struct limit_rule twins[] = {{1, 1000, 1}, {1, 1000, 1}};
        struct lim t = mk("fixed_window", "c", 2, twins);

        EXPECT(&t, T0 + 100, 1, 1, 0, 0, 900, 0, 0);
        EXPECT(&t, T0 + 100, 1, 0, 0, 900, 900, 0, 0);
    }
}

Test(scripts, fixed_window_key_never_lives_without_a_ttl)
{
    struct lim l = mk1("fixed_window", "a", 3, 1000, 3);

    l.keep_ttl = true;
    for (uint64_t i = 0; i < 60; i++) {
        struct rec r = decide(&l, T0 + 41 * i, 1);
        long long ttl = cmd_int("PTTL %s", l.keys[0]);

        /* -1 would be a key without a TTL; -2 (gone) only if the TTL
         * given was a few ms (41 * i mod 1000 comes as close as 16 ms). */
        cr_assert(ttl != -1, "call %llu: no TTL", (unsigned long long)i);
        cr_assert((ttl >= 1 && ttl <= 1000) || (ttl == -2 && r.reset <= 16),
                  "call %llu (reset %lld): PTTL %lld", (unsigned long long)i,
                  r.reset, ttl);
    }
}

/*
 * sliding_window
 */

Test(scripts, sliding_window_admits_the_limit_in_any_window)
{
    struct lim l = mk1("sliding_window", "a", 3, 1000, 3);

    EXPECT(&l, T0, 1, 1, 2, 0, 1000, 0, 0);
    EXPECT(&l, T0 + 100, 1, 1, 1, 0, 1000, 0, 0);
    EXPECT(&l, T0 + 200, 1, 1, 0, 0, 1000, 0, 0);
    /* Retry when the oldest member leaves; reset when the newest does. */
    EXPECT(&l, T0 + 500, 1, 0, 0, 500, 700, 0, 0);
    EXPECT(&l, T0 + 999, 1, 0, 0, 1, 201, 0, 0);
    /* The member at T0 is out of the window (now - W, now]. */
    EXPECT(&l, T0 + 1000, 1, 1, 0, 0, 1000, 0, 0);
    EXPECT(&l, T0 + 1001, 1, 0, 0, 99, 999, 0, 0);
    cr_assert_eq(admit_n(&l, T0 + 1099, 1, 2), 0);
    cr_assert_eq(admit_n(&l, T0 + 1100, 1, 2), 1);
    cr_assert_eq(cmd_int("ZCARD %s", l.keys[0]), 3);
}

Test(scripts, sliding_window_counts_units_of_cost)
{
    struct lim l = mk1("sliding_window", "a", 10, 1000, 10);
    redisReply *r;

    EXPECT(&l, T0, 4, 1, 6, 0, 1000, 0, 0);
    EXPECT(&l, T0 + 300, 4, 1, 2, 0, 1000, 0, 0);
    /* 8 + 4 > 10: two units must leave, the second of them at T0. */
    EXPECT(&l, T0 + 500, 4, 0, 2, 500, 800, 0, 0);
    EXPECT(&l, T0 + 500, 2, 1, 0, 0, 1000, 0, 0);
    EXPECT(&l, T0 + 999, 1, 0, 0, 1, 501, 0, 0);
    EXPECT(&l, T0 + 1000, 4, 1, 0, 0, 1000, 0, 0);
    cr_assert_eq(cmd_int("ZCARD %s", l.keys[0]), 10);

    /* One member per unit, scored by its time, named "<now>:<id>:<i>". */
    r = redisCommand(rc, "ZRANGE %s 0 -1 WITHSCORES", l.keys[0]);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->elements, 20);
    for (size_t i = 0; i < r->elements; i += 2) {
        const char *member = r->element[i]->str;
        const char *score = r->element[i + 1]->str;
        size_t len = strlen(score);

        cr_assert(strncmp(member, score, len) == 0 && member[len] == ':',
                  "member \"%s\" has score %s", member, score);
    }
    freeReplyObject(r);
}

/* Seed flaw: the timestamp as the member made same-millisecond requests
 * one member, and the limiter over-admitted. */
Test(scripts, sliding_window_admits_exactly_100_of_1000_in_one_millisecond)
{
    struct lim l = mk1("sliding_window", "a", 100, 1000, 100);
    char lo[32];

    cr_assert_eq(admit_n(&l, T0 + 7, 1, 1000), 100);
    cr_assert_eq(cmd_int("ZCARD %s", l.keys[0]), 100);
    /* Seed flaw: score and member swapped. The scores are the time. */
    snprintf(lo, sizeof(lo), "%llu", (unsigned long long)(T0 + 7));
    {
        redisReply *r = redisCommand(rc, "ZCOUNT %s %s %s", l.keys[0], lo, lo);

        cr_assert_eq(r->integer, 100);
        freeReplyObject(r);
    }
}

/*
 * sliding_window_counter
 */

Test(scripts, sliding_window_counter_weighs_the_previous_window)
{
    struct lim l = mk1("sliding_window_counter", "a", 10, 1000, 10);

    cr_assert_eq(admit_n(&l, T0, 1, 12), 10);
    /* Full this window: wait for the next, where 10 * (W - e) / W <= 9,
     * i.e. e >= 100: 1000 + 100 ms. */
    EXPECT(&l, T0, 1, 0, 0, 1100, 2000, 0, 0);
    /* e = 99: 10 * 901 + 1000 > 10 * 1000. */
    EXPECT(&l, T0 + 1099, 1, 0, 0, 1, 901, 0, 0);
    EXPECT(&l, T0 + 1100, 1, 1, 0, 0, 1900, 0, 0);
    /* e = 500: 10 * 500 + 1 * 1000 + 4 * 1000 = 10 * 1000 exactly. */
    EXPECT(&l, T0 + 1500, 4, 1, 0, 0, 1500, 0, 0);
    /* cur 5 + 1 fits: wait until 10 * (W - e) <= 4000, e = 600. */
    EXPECT(&l, T0 + 1500, 1, 0, 0, 100, 1500, 0, 0);
    EXPECT(&l, T0 + 1599, 1, 0, 0, 1, 1401, 0, 0);
    EXPECT(&l, T0 + 1600, 1, 1, 0, 0, 1400, 0, 0);
    cr_assert_eq(state_field(&l, "w"), (long long)(T0 / 1000 + 1));
    cr_assert_eq(state_field(&l, "cur"), 6);
    cr_assert_eq(state_field(&l, "prev"), 10);
    /* Two windows later nothing weighs any more. */
    cr_assert_eq(admit_n(&l, T0 + 3000, 1, 12), 10);
}

/*
 * token_bucket, leaky_bucket, gcra
 */

/* Seed flaw: refill in whole seconds rounded down threw partial refills
 * away. At 7/s a token takes 142.857 ms, and the fraction carries over. */
static void
check_fractional_refill(const char *algo)
{
    struct lim l = mk1(algo, "a", 7, 1000, 7);
    struct lim full = mk1(algo, "b", 7, 1000, 7);
    struct lim almost = mk1(algo, "c", 7, 1000, 7);

    EXPECT(&l, T0, 7, 1, 0, 0, 1000, 0, 0);
    /* 142 ms: 994 of the 1000 unit-ms a token needs. */
    EXPECT(&l, T0 + 142, 1, 0, 0, 1, 858, 0, 0);
    /* 143 ms: 1001; 1 unit-ms stays in the bucket. */
    EXPECT(&l, T0 + 143, 1, 1, 0, 0, 1000, 0, 0);
    /* 1 + 142 * 7 = 995 short of a token; 1 + 143 * 7 = 1002 enough. */
    EXPECT(&l, T0 + 285, 1, 0, 0, 1, 858, 0, 0);
    EXPECT(&l, T0 + 286, 1, 1, 0, 0, 1000, 0, 0);

    cr_assert_eq(admit_n(&full, T0, 7, 1), 1);
    cr_assert_eq(admit_n(&full, T0 + 1000, 1, 9), 7);
    cr_assert_eq(admit_n(&almost, T0, 7, 1), 1);
    cr_assert_eq(admit_n(&almost, T0 + 999, 1, 9), 6);
}

Test(scripts, token_bucket_keeps_fractions_of_a_refill)
{
    struct lim l = mk1("token_bucket", "d", 7, 1000, 7);

    check_fractional_refill("token_bucket");
    /* The level in unit-ms and the time of the last admission. */
    EXPECT(&l, T0, 1, 1, 6, 0, 143, 0, 0);
    cr_assert_eq(state_field(&l, "s"), 6000);
    cr_assert_eq(state_field(&l, "t"), (long long)T0);
}

Test(scripts, gcra_keeps_fractions_of_an_emission_interval)
{
    struct lim l = mk1("gcra", "d", 7, 1000, 7);

    check_fractional_refill("gcra");
    /* tat after 7 units at T0: T0 + 1000; then d = 857 * 7 = 5999 ticks,
     * nd = 6999: tat = T0 + 143 + 999 + 6/7. */
    EXPECT(&l, T0, 7, 1, 0, 0, 1000, 0, 0);
    cr_assert_eq(state_field(&l, "t"), (long long)(T0 + 1000));
    cr_assert_eq(state_field(&l, "f"), 0);
    EXPECT(&l, T0 + 143, 1, 1, 0, 0, 1000, 0, 0);
    cr_assert_eq(state_field(&l, "t"), (long long)(T0 + 1142));
    cr_assert_eq(state_field(&l, "f"), 6);
}

Test(scripts, leaky_bucket_keeps_fractions_of_a_leak)
{
    struct lim l = mk1("leaky_bucket", "a", 7, 1000, 7);

    EXPECT(&l, T0, 1, 1, 6, 0, 143, 0, 0);
    EXPECT(&l, T0, 6, 1, 0, 0, 1000, 0, 0);
    /* 142 ms leak 994 unit-ms: 6006 + 1000 > 7000. */
    EXPECT(&l, T0 + 142, 1, 0, 0, 1, 858, 0, 0);
    EXPECT(&l, T0 + 143, 1, 1, 0, 0, 1000, 0, 0);
    cr_assert_eq(state_field(&l, "v"), 6999);
    cr_assert_eq(state_field(&l, "t"), (long long)(T0 + 143));
    EXPECT(&l, T0 + 285, 1, 0, 0, 1, 858, 0, 0);
    EXPECT(&l, T0 + 286, 1, 1, 0, 0, 1000, 0, 0);
    /* 6999 + 1000 - 7 * 1000 leaked: empty. */
    cr_assert_eq(admit_n(&l, T0 + 1286, 1, 9), 7);
}

/* By design gcra decides exactly like token_bucket, storing a time
 * instead of a level: the same calls must give the same records. */
Test(scripts, gcra_and_token_bucket_decide_alike)
{
    for (int delay = 0; delay <= 1; delay++) {
        struct limit_rule rules[] = {{7, 1000, 5}, {30, 10000, 12}};
        struct lim tb = mk("token_bucket", delay ? "y" : "x", 2, rules);
        struct lim gc = mk("gcra", delay ? "y" : "x", 2, rules);
        uint64_t now = T0, seed = 12345;
        int denied = 0, held = 0;

        tb.delay = gc.delay = delay != 0;
        tb.max_delay = gc.max_delay = 300;
        for (int i = 0; i < 600; i++) {
            uint64_t cost;
            struct rec a, b;

            seed = seed * 6364136223846793005u + 1442695040888963407u;
            now += (seed >> 33) % 120;
            cost = 1 + (seed >> 20) % 3;
            a = decide(&tb, now, cost);
            b = decide(&gc, now, cost);
            /* 'i' stands in for the line: the call that differs. */
            assert_rec_at(i, "gcra vs token_bucket", b, a);
            denied += a.allowed == 0;
            held += a.delay > 0;
        }
        /* The sequence exercises denials, and holds in delay mode. */
        cr_assert_gt(denied, 50, "only %d denials", denied);
        cr_assert(delay == 0 || held > 50, "only %d delays", held);
    }
}

/* A clock that steps back (a failover to a Redis with a slower clock)
 * counts as no time elapsed: it refills nothing. */
Test(scripts, buckets_refill_nothing_when_the_clock_steps_back)
{
    for (size_t i = 0; i < 3; i++) {
        struct lim l = mk1(bucket_algos[i], "a", 1, 1000, 2);

        cr_assert_eq(admit_n(&l, T0 + 1000, 1, 3), 2, "%s", l.algo);
        cr_assert_eq(admit_n(&l, T0, 1, 3), 0, "%s", l.algo);
        cr_assert_eq(admit_n(&l, T0 + 1000, 1, 3), 0, "%s", l.algo);
        cr_assert_eq(admit_n(&l, T0 + 2000, 1, 3), 1, "%s", l.algo);
    }
}

/*
 * Every algorithm
 */

Test(scripts, every_algorithm_counts_cost_in_units)
{
    for (size_t i = 0; i < NALGOS; i++) {
        struct lim l = mk1(all_algos[i], "a", 10, 1000, 10);
        struct rec r;

        for (int k = 1; k <= 3; k++) {
            r = decide(&l, T0, 3);
            cr_assert(r.allowed == 1 && r.remaining == 10 - 3 * k,
                      "%s: call %d: allowed %lld remaining %lld", l.algo, k,
                      r.allowed, r.remaining);
        }
        r = decide(&l, T0, 3);
        cr_assert(r.allowed == 0 && r.remaining == 1 && r.retry > 0,
                  "%s: 3 units with 1 left", l.algo);
        r = decide(&l, T0, 1);
        cr_assert(r.allowed == 1 && r.remaining == 0, "%s: the last unit",
                  l.algo);
        cr_assert_eq(admit_n(&l, T0, 1, 3), 0, "%s", l.algo);
    }
}

/* All-or-nothing: a denial by one rule consumes nothing under the other;
 * proved by what the other rule's key still admits on its own. */
Test(scripts, every_algorithm_denied_by_one_rule_consumes_nothing_under_another)
{
    for (size_t i = 0; i < NALGOS; i++) {
        struct limit_rule tight2[] = {{10, 1000, 10}, {3, 10000, 3}};
        struct limit_rule tight1[] = {{2, 1000, 2}, {10, 10000, 10}};
        struct lim a = mk(all_algos[i], "a", 2, tight2);
        struct lim b = mk(all_algos[i], "b", 2, tight1);
        struct lim a0 = a, b1 = b;
        struct rec r;
        char base[sizeof(b.base)];

        r = decide(&a, T0, 1);
        cr_assert(r.allowed == 1 && r.remaining == 2 && r.rule == 1,
                  "%s: allowed %lld remaining %lld rule %lld", a.algo,
                  r.allowed, r.remaining, r.rule);
        cr_assert_eq(admit_n(&a, T0, 1, 2), 2, "%s", a.algo);
        r = decide(&a, T0, 1);
        cr_assert(r.allowed == 0 && r.rule == 1 && r.remaining == 0,
                  "%s: allowed %lld rule %lld remaining %lld", a.algo,
                  r.allowed, r.rule, r.remaining);
        cr_assert_eq(admit_n(&a, T0, 1, 5), 0, "%s", a.algo);
        /* Rule 0 alone: 3 of 10 used, 7 left. */
        a0.nrules = 1;
        cr_assert_eq(admit_n(&a0, T0, 1, 10), 7, "%s", a.algo);

        cr_assert_eq(admit_n(&b, T0, 1, 2), 2, "%s", b.algo);
        r = decide(&b, T0, 1);
        cr_assert(r.allowed == 0 && r.rule == 0, "%s: rule %lld", b.algo,
                  r.rule);
        cr_assert_eq(admit_n(&b, T0, 1, 5), 0, "%s", b.algo);
        /* Rule 1 alone, on a copy of its state: 2 of 10 used, 8 left. */
        b1.rules[0] = b1.rules[1];
        b1.nrules = 1;
        cr_assert_lt(snprintf(base, sizeof(base), "%s:alone", b.base),
                     (int)sizeof(base));
        set_base(&b1, base);
        copy_key(b.keys[1], b1.keys[0]);
        cr_assert_eq(admit_n(&b1, T0, 1, 10), 8, "%s", b.algo);
    }
}

/* Seed flaw: a multi-rule script passing the request id and the time in
 * KEYS. Every key a script writes is one it was given, and no other. */
Test(scripts, every_algorithm_writes_only_the_keys_it_is_given)
{
    struct limit_rule rules[] = {
        {5, 1000, 5}, {20, 60000, 20}, {100, 60000, 100}};
    char *found[64];
    size_t n;

    for (size_t i = 0; i < NALGOS; i++) {
        struct lim l = mk(all_algos[i], "k", 3, rules);

        cr_assert_eq(admit_n(&l, T0, 1, 2), 2);
    }
    n = scan_keys("*", found, 64);
    cr_assert_eq(n, 3 * NALGOS, "%zu keys", n);
    for (size_t k = 0; k < n; k++) {
        bool known = false;

        for (size_t i = 0; i < NALGOS && !known; i++) {
            struct lim l = mk(all_algos[i], "k", 3, rules);

            for (size_t j = 0; j < 3; j++) {
                known = known || strcmp(found[k], l.keys[j]) == 0;
            }
        }
        cr_assert(known, "unexpected key \"%s\"", found[k]);
        free(found[k]);
    }
}

/* Each TTL is exactly the one algo.h gives. PTTL counts down in real time
 * from the moment the script ran, so it may be below the TTL by the time
 * the call took, never above it. */
Test(scripts, every_algorithm_sets_exactly_the_ttl_the_contract_gives)
{
    static const struct {
        const char *algo;
        struct limit_rule rule;
        uint64_t now;
        uint64_t cost;
        long long ttl;
    } cases[] = {
        /* to the end of the window */
        {"fixed_window", {5, 60000, 5}, T0 + 12345, 1, 47655},
        /* the newest member leaves after W */
        {"sliding_window", {5, 45000, 5}, T0 + 777, 2, 45000},
        /* 2W - e: the current count weighs nothing any more */
        {"sliding_window_counter", {5, 30000, 5}, T0 + 31234, 1, 58766},
        /* refilled: 2 units of 60000 unit-ms at 7 per ms */
        {"token_bucket", {7, 60000, 7}, T0, 2, 17143},
        /* drained: 3 units */
        {"leaky_bucket", {7, 60000, 7}, T0, 3, 25715},
        /* tat reached: 1 unit */
        {"gcra", {7, 60000, 7}, T0, 1, 8572},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct lim l = mk(cases[i].algo, "t", 1, &cases[i].rule);
        int64_t start = harness_now_ms();
        struct rec r;
        long long ttl;
        int64_t took;

        l.keep_ttl = true;
        r = decide(&l, cases[i].now, cases[i].cost);
        ttl = cmd_int("PTTL %s", l.keys[0]);
        took = harness_now_ms() - start;

        cr_assert_eq(r.allowed, 1);
        cr_assert_eq(r.reset, cases[i].ttl, "%s: reset %lld", l.algo, r.reset);
        cr_assert(ttl <= cases[i].ttl && ttl >= cases[i].ttl - took - 1,
                  "%s: PTTL %lld, want %lld (call took %lld ms)", l.algo, ttl,
                  cases[i].ttl, (long long)took);
    }
}

/*
 * The string state of the five other algorithms: a value that does not
 * read as the algorithm's integers counts as no state. The decision is a
 * fresh key's, and the admission writes a well-formed state over it.
 */
Test(scripts, a_state_that_does_not_parse_counts_as_none)
{
    /* Each algorithm, and a field of its state that the admission sets. */
    static const char *const algos[][2] = {
        {"fixed_window", "n"}, {"sliding_window_counter", "cur"},
        {"token_bucket", "s"}, {"leaky_bucket", "v"},
        {"gcra", "t"},
    };
    /* The last ones hold integers no script writes (each stays within
     * 2^50): longer than 16 digits, and past what a double holds. */
    static const char *const junk[] = {
        "",
        "x",
        "1",
        "1:",
        ":1",
        "1:2:3:4",
        "1.5:2:0",
        "1e3:2:0",
        " 1:2:0",
        "-1:-2:-3",
        "0x1:1:1",
        "1::2",
        "99999999999999999999:0",
        "0:99999999999999999999",
        "99999999999999999999:0:0",
        "0:99999999999999999999:0",
        "0:0:99999999999999999999",
        "-99999999999999999999:0",
        "10000000000000000:1",
    };
    char scope[32];

    for (size_t i = 0; i < sizeof(algos) / sizeof(algos[0]); i++) {
        for (size_t j = 0; j < sizeof(junk) / sizeof(junk[0]); j++) {
            struct lim l, fresh;
            struct rec got;
            redisReply *r;

            snprintf(scope, sizeof(scope), "junk%zu", j);
            l = mk1(algos[i][0], scope, 5, 1000, 5);
            snprintf(scope, sizeof(scope), "fresh%zu", j);
            fresh = mk1(algos[i][0], scope, 5, 1000, 5);
            r = redisCommand(rc, "SET %s %s PX 60000", l.keys[0], junk[j]);
            cr_assert(r != NULL && r->type == REDIS_REPLY_STATUS);
            freeReplyObject(r);
            got = decide(&l, T0 + 250, 2);
            assert_rec_at(__LINE__, l.algo, got, decide(&fresh, T0 + 250, 2));
            cr_assert_eq(got.allowed, 1, "%s, \"%s\"", l.algo, junk[j]);
            cr_assert_eq(state_field(&l, algos[i][1]),
                         state_field(&fresh, algos[i][1]), "%s, \"%s\"", l.algo,
                         junk[j]);
        }
    }
}

/* A denial writes nothing: the state and its TTL stay as they were. */
Test(scripts, a_denial_leaves_state_and_ttl_untouched)
{
    struct lim tb = mk1("token_bucket", "a", 7, 60000, 7);
    long long s, t, ttl;

    tb.keep_ttl = true;
    EXPECT(&tb, T0, 2, 1, 5, 0, 17143, 0, 0);
    /* 300000 + 1000 * 7 unit-ms, less 2 units: ceil(233000 / 7). */
    EXPECT(&tb, T0 + 1000, 2, 1, 3, 0, 33286, 0, 0);
    s = state_field(&tb, "s");
    t = state_field(&tb, "t");
    ttl = cmd_int("PTTL %s", tb.keys[0]);
    cr_assert_eq(s, 187000);
    cr_assert_eq(t, (long long)(T0 + 1000));
    /* 187000 + 7000 short of 7 * 60000: ceil(226000 / 7) = 32286. */
    EXPECT(&tb, T0 + 2000, 7, 0, 3, 32286, 32286, 0, 0);
    cr_assert_eq(state_field(&tb, "s"), s);
    cr_assert_eq(state_field(&tb, "t"), t);
    cr_assert_leq(cmd_int("PTTL %s", tb.keys[0]), ttl);
}

/* Seed flaw: hashes without a TTL, one key per client forever. On Redis's
 * own clock, with windows of 100-200 ms, every key of every algorithm is
 * gone soon after the last request. */
static bool
no_idle_keys_left(void *arg)
{
    (void)arg;
    return scan_keys("idle:*", NULL, 0) == 0;
}

Test(scripts, keys_of_every_algorithm_are_gone_after_idling_past_their_ttl)
{
    struct limit_rule rules[] = {{5, 100, 5}, {20, 200, 20}};

    for (size_t i = 0; i < NALGOS; i++) {
        struct lim l = mk(all_algos[i], "idle", 2, rules);
        char base[sizeof(l.base)];

        /* "test:" -> "idle:" */
        cr_assert_lt(snprintf(base, sizeof(base), "idle%s", l.base + 4),
                     (int)sizeof(base));
        set_base(&l, base);
        cr_assert_eq(admit_n(&l, 0, 1, 3), 3, "%s", l.algo);
        for (size_t j = 0; j < 2; j++) {
            long long ttl = cmd_int("PTTL %s", l.keys[j]);

            /* -1 is the flaw; 0 or -2 is a key whose window just ended. */
            cr_assert(ttl != -1 && ttl <= 400, "%s: PTTL %lld", l.keys[j], ttl);
        }
    }
    /* Each key was seen with a TTL, or already gone, just after it was
     * written (a count of all of them here would race the earliest
     * expiries on a slow run). */
    cr_assert(harness_wait_until(no_idle_keys_left, NULL, 3000),
              "keys still there after 3 s");
}

/*
 * Long-run rate: 7/s over 10 simulated seconds, a request every 1 ms.
 */

Test(scripts, buckets_admit_seven_per_second_over_ten_seconds)
{
    static const struct {
        const char *algo;
        uint64_t burst;
    } cases[] = {{"token_bucket", 7}, {"leaky_bucket", 3}, {"gcra", 1}};

    for (size_t i = 0; i < 3; i++) {
        struct lim l = mk1(cases[i].algo, "rate", 7, 1000, cases[i].burst);
        long long admitted = 0, beyond;

        /* T0 .. T0 + 10000 inclusive: the burst, then 10 s of refill. */
        for (uint64_t t = 0; t <= 10000; t++) {
            admitted += decide(&l, T0 + t, 1).allowed;
        }
        beyond = admitted - (long long)cases[i].burst;
        cr_assert(beyond >= 69 && beyond <= 71,
                  "%s: %lld admitted beyond the burst of %llu, want 70 +- 1",
                  l.algo, beyond, (unsigned long long)cases[i].burst);
        /* With room for 2 or more units, no fraction is ever lost: 70
         * exactly. With 1, a full bucket cannot keep the 1/7 ms that
         * arrives after it is full, and the rate is 1000/143 per s. */
        cr_assert_eq(beyond, cases[i].burst >= 2 ? 70 : 69, "%s", l.algo);
    }
}

/*
 * Delay mode
 */

static void
check_delay_reservations(const char *algo)
{
    struct lim l = mk1(algo, "d", 10, 1000, 2);

    l.delay = true;
    l.max_delay = 500;
    EXPECT(&l, T0, 1, 1, 1, 0, 100, 0, 0);
    EXPECT(&l, T0, 1, 1, 0, 0, 200, 0, 0);
    /* Reserved from the future, one unit every 100 ms. */
    EXPECT(&l, T0, 1, 1, 0, 0, 300, 100, 0);
    EXPECT(&l, T0, 1, 1, 0, 0, 400, 200, 0);
    EXPECT(&l, T0, 1, 1, 0, 0, 500, 300, 0);
    EXPECT(&l, T0, 1, 1, 0, 0, 600, 400, 0);
    EXPECT(&l, T0, 1, 1, 0, 0, 700, 500, 0);
    /* 600 ms > max_delay: refused, 100 ms before it would fit. */
    EXPECT(&l, T0, 1, 0, 0, 100, 700, 0, 0);
    EXPECT(&l, T0 + 50, 1, 0, 0, 50, 650, 0, 0);
    /* The refusals reserved nothing: 500 ms, not 600 or 700. */
    EXPECT(&l, T0 + 100, 1, 1, 0, 0, 700, 500, 0);
}

Test(scripts, token_bucket_in_delay_mode_reserves_up_to_max_delay)
{
    check_delay_reservations("token_bucket");
}

Test(scripts, gcra_in_delay_mode_reserves_up_to_max_delay)
{
    check_delay_reservations("gcra");
}

Test(scripts, leaky_bucket_in_delay_mode_queues_up_to_its_capacity)
{
    struct lim l = mk1("leaky_bucket", "d", 10, 1000, 5);

    l.delay = true;
    l.max_delay = 1000;
    EXPECT(&l, T0, 1, 1, 4, 0, 100, 0, 0);
    EXPECT(&l, T0, 1, 1, 3, 0, 200, 100, 0);
    EXPECT(&l, T0, 1, 1, 2, 0, 300, 200, 0);
    EXPECT(&l, T0, 1, 1, 1, 0, 400, 300, 0);
    EXPECT(&l, T0, 1, 1, 0, 0, 500, 400, 0);
    /* The queue is full: one unit leaks in 100 ms. */
    EXPECT(&l, T0, 1, 0, 0, 100, 500, 0, 0);
    EXPECT(&l, T0 + 100, 1, 1, 0, 0, 500, 400, 0);
    EXPECT(&l, T0 + 100, 2, 0, 0, 200, 500, 0, 0);
}

Test(scripts, leaky_bucket_in_delay_mode_refuses_past_max_delay)
{
    struct lim l = mk1("leaky_bucket", "d", 10, 1000, 10);

    l.delay = true;
    l.max_delay = 250;
    EXPECT(&l, T0, 1, 1, 9, 0, 100, 0, 0);
    EXPECT(&l, T0, 1, 1, 8, 0, 200, 100, 0);
    EXPECT(&l, T0, 1, 1, 7, 0, 300, 200, 0);
    /* 300 ms of water ahead: 50 ms more than allowed. */
    EXPECT(&l, T0, 1, 0, 7, 50, 300, 0, 0);
    cr_assert_eq(state_field(&l, "v"), 3000);
    EXPECT(&l, T0 + 50, 1, 1, 6, 0, 350, 250, 0);
}

/*
 * The largest integers the scripts reply, with the largest rules they
 * take (2^50 ms windows): the gateway's decoder takes them all
 * (scriptcall.h: counts up to 2^50, times up to 2^51).
 */
Test(scripts, the_largest_integers_a_script_replies_still_decode)
{
    const long long max = 1LL << 50;
    struct lim swc = mk1("sliding_window_counter", "huge", 1, 1ULL << 50, 1);
    struct lim tb = mk1("token_bucket", "huge", 1, 1ULL << 50, 1);

    /* 2W - e to reset; W - e, then all of the next window, to retry. */
    EXPECT(&swc, T0, 1, 1, 0, 0, 2 * max - (long long)T0, 0, 0);
    EXPECT(&swc, T0, 1, 0, 0, 2 * max - (long long)T0, 2 * max - (long long)T0,
           0, 0);
    /* A full bucket's time to fill plus a backlog of max_delay. */
    tb.delay = true;
    tb.max_delay = 1ULL << 50;
    EXPECT(&tb, T0, 1, 1, 0, 0, max, 0, 0);
    EXPECT(&tb, T0, 1, 1, 0, 0, 2 * max, max, 0);
}

Test(scripts, delay_mode_with_two_rules_holds_for_the_longer_wait)
{
    struct limit_rule rules[] = {{10, 1000, 2}, {2, 1000, 2}};

    for (size_t i = 0; i < 3; i++) {
        struct lim l = mk(bucket_algos[i], "d2", 2, rules);

        l.delay = true;
        l.max_delay = 1000;
        EXPECT(&l, T0, 1, 1, 1, 0, 500, 0, 0);
        if (strcmp(l.algo, "leaky_bucket") == 0) {
            /* The water ahead: 100 ms under rule 0, 500 under rule 1. */
            EXPECT(&l, T0, 1, 1, 0, 0, 1000, 500, 0);
            /* Both queues full: rule 1 drains later and decides. */
            EXPECT(&l, T0, 1, 0, 0, 500, 1000, 0, 1);
        } else {
            EXPECT(&l, T0, 1, 1, 0, 0, 1000, 0, 0);
            /* Rule 0 needs 100 ms, rule 1 500 ms: hold 500. */
            EXPECT(&l, T0, 1, 1, 0, 0, 1500, 500, 0);
        }
    }
}

/*
 * Arguments
 */

#define K1 "v:{a}:0"
#define OK_RULE "5", "1000", "5"

static const struct {
    const char *why;
    int nkeys;
    const char *words[16];
    int only; /* 0: every algorithm; 1: windows only; 2: buckets only */
} bad_args[] = {
    {"no key", 0, {"1000", "1", "0", "0", "r", OK_RULE}, 0},
    {"an argument missing",
     1,
     {K1, "1000", "1", "0", "0", "r", "5", "1000"},
     0},
    {"an argument too many",
     1,
     {K1, "1000", "1", "0", "0", "r", OK_RULE, "5"},
     0},
    {"time not a number", 1, {K1, "soon", "1", "0", "0", "r", OK_RULE}, 0},
    {"negative time", 1, {K1, "-1000", "1", "0", "0", "r", OK_RULE}, 0},
    {"fractional time", 1, {K1, "1000.5", "1", "0", "0", "r", OK_RULE}, 0},
    {"time with exponent", 1, {K1, "1e3", "1", "0", "0", "r", OK_RULE}, 0},
    {"empty time", 1, {K1, "", "1", "0", "0", "r", OK_RULE}, 0},
    {"huge time",
     1,
     {K1, "99999999999999999999", "1", "0", "0", "r", OK_RULE},
     0},
    {"cost 0", 1, {K1, "1000", "0", "0", "0", "r", OK_RULE}, 0},
    {"negative cost", 1, {K1, "1000", "-1", "0", "0", "r", OK_RULE}, 0},
    {"cost above limit and burst",
     1,
     {K1, "1000", "6", "0", "0", "r", OK_RULE},
     0},
    {"mode 2", 1, {K1, "1000", "1", "2", "0", "r", OK_RULE}, 0},
    {"mode empty", 1, {K1, "1000", "1", "", "0", "r", OK_RULE}, 0},
    {"negative max delay", 1, {K1, "1000", "1", "0", "-5", "r", OK_RULE}, 0},
    {"empty request id", 1, {K1, "1000", "1", "0", "0", "", OK_RULE}, 0},
    {"limit 0", 1, {K1, "1000", "1", "0", "0", "r", "0", "1000", "5"}, 0},
    {"window 0", 1, {K1, "1000", "1", "0", "0", "r", "5", "0", "5"}, 0},
    {"burst 0", 1, {K1, "1000", "1", "0", "0", "r", "5", "1000", "0"}, 0},
    {"fractional limit",
     1,
     {K1, "1000", "1", "0", "0", "r", "5.0", "1000", "5"},
     0},
    {"signed window",
     1,
     {K1, "1000", "1", "0", "0", "r", "5", "+1000", "5"},
     0},
    {"limit * window beyond 2^50",
     1,
     {K1, "1000", "1", "0", "0", "r", "1125899906842", "1001", "1125899906842"},
     0},
    {"keys in two hash tags",
     2,
     {K1, "v:{b}:1", "1000", "1", "0", "0", "r", OK_RULE, OK_RULE},
     0},
    {"empty key", 1, {"", "1000", "1", "0", "0", "r", OK_RULE}, 0},
    {"empty second key",
     2,
     {K1, "", "1000", "1", "0", "0", "r", OK_RULE, OK_RULE},
     0},
    {"time of 17 digits",
     1,
     {K1, "00000000000001000", "1", "0", "0", "r", OK_RULE},
     0},
    {"one key twice",
     2,
     {K1, K1, "1000", "1", "0", "0", "r", OK_RULE, OK_RULE},
     0},
    {"delay mode", 1, {K1, "1000", "1", "1", "100", "r", OK_RULE}, 1},
    {"burst other than limit",
     1,
     {K1, "1000", "1", "0", "0", "r", "5", "1000", "6"},
     1},
    {"cost above burst",
     1,
     {K1, "1000", "4", "0", "0", "r", "10", "1000", "3"},
     2},
};

static size_t
count_words(const char *const *words)
{
    size_t n = 0;

    while (n < 16 && words[n] != NULL) {
        n++;
    }
    return n;
}

static void
assert_sluice_error(redisReply *r, const char *algo, const char *why)
{
    cr_assert_eq(r->type, REDIS_REPLY_ERROR, "%s, %s: no error reply", algo,
                 why);
    cr_assert(strstr(r->str, "ERR sluice: ") == r->str,
              "%s, %s: error \"%s\" is not ours", algo, why, r->str);
}

Test(scripts, bad_arguments_are_error_replies)
{
    for (size_t i = 0; i < NALGOS; i++) {
        const char *algo = all_algos[i];
        bool bucket = is_bucket(algo);

        for (size_t c = 0; c < sizeof(bad_args) / sizeof(bad_args[0]); c++) {
            redisReply *r;

            if ((bad_args[c].only == 1 && bucket) ||
                (bad_args[c].only == 2 && !bucket)) {
                continue;
            }
            r = eval_words(algo, bad_args[c].nkeys, bad_args[c].words,
                           count_words(bad_args[c].words));
            assert_sluice_error(r, algo, bad_args[c].why);
            freeReplyObject(r);
        }
    }
    /* Nothing was written by any of them. */
    cr_assert_eq(scan_keys("v:*", NULL, 0), 0);
}

Test(scripts, nine_rules_are_too_many_and_eight_are_fine)
{
    for (size_t i = 0; i < NALGOS; i++) {
        char keys[9][32];
        const char *words[9 + 5 + 27];
        size_t n = 0;
        redisReply *r;

        for (int k = 0; k < 9; k++) {
            snprintf(keys[k], sizeof(keys[k]), "n:{%s}:%d", all_algos[i], k);
            words[n++] = keys[k];
        }
        words[n++] = "1000";
        words[n++] = "1";
        words[n++] = "0";
        words[n++] = "0";
        words[n++] = "r";
        for (int k = 0; k < 9; k++) {
            words[n++] = "5";
            words[n++] = "1000";
            words[n++] = "5";
        }
        r = eval_words(all_algos[i], 9, words, n);
        assert_sluice_error(r, all_algos[i], "nine keys");
        freeReplyObject(r);

        /* Eight: drop the ninth key and its rule. */
        memmove(&words[8], &words[9], (5 + 27) * sizeof(words[0]));
        r = eval_words(all_algos[i], 8, words, 8 + 5 + 24);
        cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s: eight rules: %s",
                     all_algos[i], r->type == REDIS_REPLY_ERROR ? r->str : "?");
        cr_assert_eq(r->element[0]->integer, 1);
        freeReplyObject(r);
    }
}

/* Buckets accept what windows refuse: a burst apart from the rate, and
 * delay mode. */
Test(scripts, buckets_accept_a_burst_and_delay_mode)
{
    for (size_t i = 0; i < 3; i++) {
        struct lim l = mk1(bucket_algos[i], "ok", 5, 1000, 9);

        l.delay = true;
        l.max_delay = 10000; /* leaky_bucket queues: up to 1600 ms */
        cr_assert_eq(admit_n(&l, T0, 1, 9), 9, "%s", l.algo);
    }
}

/* "0" is Redis's clock: seconds * 1000 + microseconds / 1000. */
Test(scripts, time_zero_means_the_clock_of_redis)
{
    struct lim l = mk1("token_bucket", "now", 1, 3600000, 1);
    redisReply *r;
    long long before, after, t;

    r = redisCommand(rc, "TIME");
    before = strtoll(r->element[0]->str, NULL, 10) * 1000 +
             strtoll(r->element[1]->str, NULL, 10) / 1000;
    freeReplyObject(r);
    cr_assert_eq(decide(&l, 0, 1).allowed, 1);
    r = redisCommand(rc, "TIME");
    after = strtoll(r->element[0]->str, NULL, 10) * 1000 +
            strtoll(r->element[1]->str, NULL, 10) / 1000;
    freeReplyObject(r);
    t = state_field(&l, "t");
    cr_assert(t >= before && t <= after, "t %lld not in [%lld, %lld]", t,
              before, after);
}

/*
 * Redis Cluster: a one-node cluster owning every slot. Hash-tagged keys
 * of one limiter share a slot; the #!lua shebang keeps strict key checks.
 */

static bool
cluster_ok(void *arg)
{
    redisReply *r = redisCommand(rc, "CLUSTER INFO");
    bool ok;

    (void)arg;
    cr_assert_not_null(r, "redis: %s", rc->errstr);
    ok = r->type == REDIS_REPLY_STRING &&
         strstr(r->str, "cluster_state:ok") != NULL;
    freeReplyObject(r);
    return ok;
}

/*
 * Batches (lua/README.md, "Batches"): the calls one command carries are
 * decided as they would be one by one.
 */

/* The words of a batch being built: keys, then ARGV. */
struct batch {
    const char *keys[MAX_WORDS]; /* KEYS of every call, in order */
    size_t nkeys;                /* of keys */
    const char *args[MAX_WORDS]; /* "batch", n, then the calls */
    size_t nargs;                /* of args */
    char counts[64][2][8];       /* the calls' <nkeys> <nargs> text */
    char ncalls[8];              /* ARGV[2] */
    size_t n;                    /* calls */
    struct scriptcall sc[64];    /* each call's words (borrowed) */
    struct limiter_def def[64];  /* each call's limiter */
    char reqid[64][32];          /* their request ids */
};

/* Adds one call of 'l' to 'b', as encode_call() encodes it. */
static void
batch_add_call(struct batch *b, const struct lim *l, uint64_t now,
               uint64_t cost, int op, uint64_t units)
{
    struct scriptcall *sc = &b->sc[b->n];

    cr_assert_lt(b->n, 64);
    cr_assert_lt(b->nkeys + b->nargs + LIMIT_MAX_RULES + SCRIPTCALL_MAX_ARGS +
                     4,
                 MAX_WORDS);
    encode_call(sc, l, now, cost, op, units, b->reqid[b->n],
                sizeof(b->reqid[0]));
    b->def[b->n] = def_of(l);
    if (b->nargs == 0) {
        b->args[b->nargs++] = "batch";
        b->args[b->nargs++] = b->ncalls;
    }
    for (size_t i = 0; i < sc->nkeys; i++) {
        b->keys[b->nkeys++] = sc->keys[i];
    }
    snprintf(b->counts[b->n][0], 8, "%zu", sc->nkeys);
    snprintf(b->counts[b->n][1], 8, "%zu", sc->nargs);
    b->args[b->nargs++] = b->counts[b->n][0];
    b->args[b->nargs++] = b->counts[b->n][1];
    for (size_t i = 0; i < sc->nargs; i++) {
        b->args[b->nargs++] = sc->args[i];
    }
    b->n++;
    snprintf(b->ncalls, sizeof(b->ncalls), "%zu", b->n);
    cr_assert_lt(b->nkeys + b->nargs, MAX_WORDS);
}

/* Adds one decision of 'l' at 'now' for 'cost' to 'b'. */
static void
batch_add(struct batch *b, const struct lim *l, uint64_t now, uint64_t cost)
{
    batch_add_call(b, l, now, cost, NO_LEASE, 0);
}

/* Runs the batch ('persist': PERSISTs its keys in the same transaction,
 * as decide() does for injected time). */
static redisReply *
batch_run(const char *algo, const struct batch *b, bool persist)
{
    const char *words[MAX_WORDS];

    memcpy(words, b->keys, b->nkeys * sizeof(words[0]));
    memcpy(words + b->nkeys, b->args, b->nargs * sizeof(words[0]));
    return eval_keys(algo, (int)b->nkeys, words, b->nkeys + b->nargs, persist);
}

/* Element 'i' of the reply 'r' to batch 'b' (six integers joined by
 * ':'), decoded as decide() decodes one. */
static struct rec
batch_rec(const struct batch *b, const redisReply *r, size_t i,
          const char *algo)
{
    const redisReply *e = r->element[i];
    struct limit_result res;
    long long v[6];
    int used = 0;

    cr_assert_eq(e->type, REDIS_REPLY_STRING, "%s: call %zu: %s", algo, i,
                 e->type == REDIS_REPLY_ERROR ? e->str : "not a string");
    cr_assert_eq(sscanf(e->str, "%lld:%lld:%lld:%lld:%lld:%lld%n", &v[0], &v[1],
                        &v[2], &v[3], &v[4], &v[5], &used),
                 6, "%s: call %zu: \"%s\"", algo, i, e->str);
    cr_assert_eq((size_t)used, e->len, "%s: call %zu: \"%s\"", algo, i, e->str);
    cr_assert_eq(scriptcall_decode(&b->def[i], v, 6, &res), 0,
                 "%s: call %zu: malformed reply \"%s\"", algo, i, e->str);
    return (struct rec){res.allowed ? 1 : 0,           res.remaining,
                        (long long)res.retry_after_ms, (long long)res.reset_ms,
                        (long long)res.delay_ms,       (long long)res.rule};
}

/* Runs batch 'b' of 'algo' (its keys persisted) and checks that call i
 * answers want[i], for each of the 'n' calls. */
static void
assert_batch_decides(const char *algo, const struct batch *b,
                     const struct rec *want, size_t n)
{
    redisReply *r = batch_run(algo, b, true);

    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s: %s", algo,
                 r->type == REDIS_REPLY_ERROR ? r->str : "not an array");
    cr_assert_eq(r->elements, n);
    for (size_t i = 0; i < n; i++) {
        assert_rec_at(__LINE__, algo, batch_rec(b, r, i, algo), want[i]);
    }
    freeReplyObject(r);
}

Test(scripts, a_batch_decides_as_its_calls_would_one_by_one)
{
    /* Two keys of one limiter, interleaved, with costs that exhaust them:
     * admissions, refusals and a refusal followed by a smaller cost. */
    static const uint64_t costs[] = {1, 2, 1, 3, 2, 1, 1, 2, 1, 1, 4, 1};
    enum { N = sizeof(costs) / sizeof(costs[0]) };
    struct limit_rule rules[2] = {{5, 10000, 5}, {8, 60000, 8}};

    for (size_t a = 0; a < NALGOS; a++) {
        const char *algo = all_algos[a];
        struct lim one[2], many[2];
        struct batch *b = calloc(1, sizeof(*b));
        struct rec want[N];

        for (int k = 0; k < 2; k++) {
            char scope[32];

            snprintf(scope, sizeof(scope), "one%d", k);
            one[k] = mk(algo, scope, 2, rules);
            snprintf(scope, sizeof(scope), "many%d", k);
            many[k] = mk(algo, scope, 2, rules);
        }
        for (size_t i = 0; i < N; i++) {
            want[i] = decide(&one[i % 2], T0 + 5, costs[i]);
            batch_add(b, &many[i % 2], T0 + 5, costs[i]);
        }
        assert_batch_decides(algo, b, want, N);
        if (strcmp(algo, "sliding_window") != 0) {
            for (int k = 0; k < 2; k++) {
                cr_assert_eq(state_field(&one[k], is_bucket(algo) ? "t" : "w"),
                             state_field(&many[k], is_bucket(algo) ? "t" : "w"),
                             "%s: the states differ", algo);
            }
        }
        /* And the batch's states decide the next call as the single
         * calls' states do. */
        for (int k = 0; k < 2; k++) {
            assert_rec_at(__LINE__, algo, decide(&many[k], T0 + 700, 1),
                          decide(&one[k], T0 + 700, 1));
        }
        free(b);
    }
}

Test(scripts, a_batch_of_repeated_calls_decides_as_they_would_one_by_one)
{
    /* Runs of calls that repeat the previous call word for word but for
     * the request id, which the scripts parse once: the counts must still
     * add up, and each request id must still be its own (sliding_window's
     * members carry it). */
    static const uint64_t costs[] = {1, 1, 1, 2, 2, 1, 1, 1};
    enum { N = sizeof(costs) / sizeof(costs[0]) };
    struct limit_rule rules[2] = {{5, 10000, 5}, {8, 60000, 8}};

    for (size_t a = 0; a < NALGOS; a++) {
        const char *algo = all_algos[a];
        struct lim one = mk(algo, "repeat-one", 2, rules);
        struct lim many = mk(algo, "repeat-many", 2, rules);
        struct batch *b = calloc(1, sizeof(*b));
        struct rec want[N];

        for (size_t i = 0; i < N; i++) {
            want[i] = decide(&one, T0 + 5, costs[i]);
            batch_add(b, &many, T0 + 5, costs[i]);
        }
        assert_batch_decides(algo, b, want, N);
        assert_rec_at(__LINE__, algo, decide(&many, T0 + 700, 1),
                      decide(&one, T0 + 700, 1));
        free(b);
    }
}

struct lease_step {
    int op;
    uint64_t cost, units;
};

/* Runs 'seq' call by call on one key and as one batch on another, for
 * token_bucket and gcra, and checks that each call answers the same. */
static void
assert_lease_batch_answers_as_alone(const struct lease_step *seq, size_t n)
{
    static const char *const algos[] = {"token_bucket", "gcra"};

    cr_assert_leq(n, 16);
    for (size_t a = 0; a < 2; a++) {
        struct lim one = mk1(algos[a], "lease-one", 10, 1000, 40);
        struct lim many = mk1(algos[a], "lease-many", 10, 1000, 40);
        struct batch *b = calloc(1, sizeof(*b));
        char want[16][96];
        redisReply *r;

        for (size_t i = 0; i < n; i++) {
            struct scriptcall sc;
            const char *words[LIMIT_MAX_RULES + SCRIPTCALL_MAX_ARGS];
            char reqid[32];
            size_t nw = 0, used = 0;

            encode_call(&sc, &one, T0 + 5, seq[i].cost, seq[i].op, seq[i].units,
                        reqid, sizeof(reqid));
            for (size_t k = 0; k < sc.nkeys; k++) {
                words[nw++] = sc.keys[k];
            }
            for (size_t k = 0; k < sc.nargs; k++) {
                words[nw++] = sc.args[k];
            }
            r = eval_keys(algos[a], (int)sc.nkeys, words, nw, true);
            cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s: %s", algos[a],
                         r->type == REDIS_REPLY_ERROR ? r->str : "?");
            cr_assert_eq(r->elements, seq[i].op == NO_LEASE ? 6u : 7u);
            want[i][0] = '\0';
            for (size_t k = 0; k < r->elements; k++) {
                used += (size_t)snprintf(want[i] + used, sizeof(want[i]) - used,
                                         "%s%lld", k > 0 ? ":" : "",
                                         r->element[k]->integer);
            }
            freeReplyObject(r);
            batch_add_call(b, &many, T0 + 5, seq[i].cost, seq[i].op,
                           seq[i].units);
        }
        r = batch_run(algos[a], b, true);
        cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s: %s", algos[a],
                     r->type == REDIS_REPLY_ERROR ? r->str : "?");
        cr_assert_eq(r->elements, n);
        for (size_t i = 0; i < n; i++) {
            cr_assert_eq(r->element[i]->type, REDIS_REPLY_STRING);
            cr_assert_str_eq(r->element[i]->str, want[i], "%s: call %zu",
                             algos[a], i);
        }
        freeReplyObject(r);
        free(b);
    }
}

Test(scripts, lease_calls_in_a_batch_answer_as_they_would_alone)
{
    /* A take, a plain call, a return and a take again: seven integers
     * for the lease calls, six for the plain one. */
    static const struct lease_step seq[] = {
        {SCRIPTCALL_LEASE_TAKE, 1, 8},
        {NO_LEASE, 2, 0},
        {SCRIPTCALL_LEASE_RETURN, 1, 3},
        {SCRIPTCALL_LEASE_TAKE, 2, 6},
    };

    assert_lease_batch_answers_as_alone(seq, sizeof(seq) / sizeof(seq[0]));
}

Test(scripts, repeated_lease_takes_in_a_batch_are_granted_as_alone)
{
    /* The same take again and again: each grant raises the call's cost
     * to the units granted, and a repeat starts from its own cost. The
     * grants shrink as the bucket empties (8, 8, 6, 4, 3, ...). */
    static const struct lease_step seq[] = {
        {SCRIPTCALL_LEASE_TAKE, 1, 8},   {SCRIPTCALL_LEASE_TAKE, 1, 8},
        {SCRIPTCALL_LEASE_TAKE, 1, 8},   {SCRIPTCALL_LEASE_TAKE, 1, 8},
        {SCRIPTCALL_LEASE_TAKE, 1, 8},   {SCRIPTCALL_LEASE_TAKE, 1, 8},
        {SCRIPTCALL_LEASE_TAKE, 1, 8},   {SCRIPTCALL_LEASE_TAKE, 1, 8},
        {SCRIPTCALL_LEASE_RETURN, 1, 3}, {SCRIPTCALL_LEASE_RETURN, 1, 3},
    };

    assert_lease_batch_answers_as_alone(seq, sizeof(seq) / sizeof(seq[0]));
}

/* Calls of 'cmd' since the last CONFIG RESETSTAT (0 if none). */
static long long
stat_calls(const char *cmd)
{
    redisReply *r = redisCommand(rc, "INFO commandstats");
    char *field;
    const char *t;
    long long n;

    cr_assert(r != NULL && r->type == REDIS_REPLY_STRING);
    field = harness_strf("cmdstat_%s:calls=", cmd);
    t = strstr(r->str, field);
    n = t != NULL ? atoll(t + strlen(field)) : 0;
    free(field);
    freeReplyObject(r);
    return n;
}

Test(scripts, a_batch_reads_the_clock_and_each_key_once)
{
    struct lim l = mk1("token_bucket", "clock", 100, 1000, 100);
    struct lim other = mk1("token_bucket", "other", 100, 1000, 100);
    struct batch *b = calloc(1, sizeof(*b));
    redisReply *r;

    /* Five calls on one key, one on another, in between. */
    for (int i = 0; i < 5; i++) {
        batch_add(b, &l, 0, 1);
        if (i == 2) {
            batch_add(b, &other, 0, 3);
        }
    }
    r = redisCommand(rc, "CONFIG RESETSTAT");
    freeReplyObject(r);
    r = batch_run("token_bucket", b, false);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->elements, 6);
    for (size_t i = 0, k = 0; i < 6; i++) {
        long long rem = batch_rec(b, r, i, "token_bucket").remaining;

        if (i == 3) {
            cr_assert_eq(rem, 97);
        } else {
            cr_assert_eq(rem, (long long)(99 - k++), "call %zu", i);
        }
    }
    freeReplyObject(r);
    cr_assert_eq(stat_calls("time"), 1);
    /* Each key read once and written once, with the last call's state. */
    cr_assert_eq(stat_calls("get"), 2);
    cr_assert_eq(stat_calls("set"), 2);
    cr_assert_eq(decide(&l, 0, 1).remaining, 94);
    free(b);
}

Test(scripts, a_failing_call_fails_alone_in_its_batch)
{
    for (size_t a = 0; a < NALGOS; a++) {
        const char *algo = all_algos[a];
        struct lim good = mk1(algo, "good", 10, 1000, 10);
        struct lim bad = mk1(algo, "wrongtype", 10, 1000, 10);
        struct lim zero = mk1(algo, "zero", 10, 1000, 10);
        struct batch *b = calloc(1, sizeof(*b));
        redisReply *r;

        /* A key of another type: the script's read of it fails. */
        r = redisCommand(rc, "HSET %s f 1", bad.keys[0]);
        freeReplyObject(r);
        batch_add(b, &good, T0, 1);
        batch_add(b, &bad, T0, 1);
        batch_add(b, &zero, T0, 1);
        for (size_t i = 0; i < b->nargs; i++) {
            if (b->args[i] == b->sc[2].args[1]) {
                b->args[i] = "0"; /* cost 0: an argument error */
            }
        }
        batch_add(b, &good, T0, 1);
        r = batch_run(algo, b, true);
        cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s: %s", algo,
                     r->type == REDIS_REPLY_ERROR ? r->str : "?");
        cr_assert_eq(r->elements, 4);
        cr_assert_eq(batch_rec(b, r, 0, algo).remaining, 9);
        cr_assert_eq(r->element[1]->type, REDIS_REPLY_ERROR, "%s", algo);
        cr_assert(strstr(r->element[1]->str, "WRONGTYPE") != NULL, "%s: %s",
                  algo, r->element[1]->str);
        cr_assert_eq(r->element[2]->type, REDIS_REPLY_ERROR, "%s", algo);
        assert_sluice_error(r->element[2], algo, "cost 0");
        cr_assert_eq(batch_rec(b, r, 3, algo).remaining, 8);
        freeReplyObject(r);
        cr_assert_eq(cmd_int("EXISTS %s", zero.keys[0]), 0);
        free(b);
    }
}

/* GET of 'key' as text ("(nil)" when absent); the caller frees it. */
static char *
get_text(const char *key)
{
    redisReply *r = redisCommand(rc, "GET %s", key);
    char *v;

    cr_assert_not_null(r);
    v = strdup(r->type == REDIS_REPLY_STRING ? r->str : "(nil)");
    freeReplyObject(r);
    return v;
}

Test(scripts, a_call_failing_midway_in_a_batch_writes_nothing_of_its_own)
{
    struct limit_rule rules[2] = {{10, 1000, 40}, {10, 1000, 40}};

    for (size_t a = 0; a < 2; a++) {
        const char *algo = a == 0 ? "token_bucket" : "gcra";
        struct lim l = mk(algo, "midway", 2, rules);
        struct lim ok = mk1(algo, "bystander", 10, 1000, 40);
        struct batch *b = calloc(1, sizeof(*b));
        char *before, *after;
        redisReply *r;

        /* Both rules hold a state; then the second rule's key becomes a
         * list, which a return reads after giving the first its units. */
        cr_assert_eq(decide(&l, T0, 5).allowed, 1);
        r = redisCommand(rc, "DEL %s", l.keys[1]);
        freeReplyObject(r);
        r = redisCommand(rc, "RPUSH %s x", l.keys[1]);
        freeReplyObject(r);
        before = get_text(l.keys[0]);
        batch_add_call(b, &l, T0, 1, SCRIPTCALL_LEASE_RETURN, 3);
        batch_add(b, &ok, T0, 1);
        r = batch_run(algo, b, true);
        cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", algo);
        cr_assert_eq(r->elements, 2);
        cr_assert_eq(r->element[0]->type, REDIS_REPLY_ERROR, "%s", algo);
        cr_assert(strstr(r->element[0]->str, "WRONGTYPE") != NULL, "%s: %s",
                  algo, r->element[0]->str);
        cr_assert_eq(batch_rec(b, r, 1, algo).remaining, 39);
        freeReplyObject(r);
        after = get_text(l.keys[0]);
        cr_assert_str_eq(after, before,
                         "%s: the failed return gave rule 1 its units", algo);
        free(before);
        free(after);
        free(b);
    }
}

Test(scripts, a_failed_call_keeps_what_an_earlier_call_of_its_batch_wrote)
{
    /* Call 1 writes rule 1's key; call 2, a return on both rules, writes
     * it again and then fails on rule 2. Taking call 2 back must leave
     * call 1's state and TTL whole, and the batch must write them. The
     * TTLs are real time: a unit is 6 s of them, so the 3 units of the
     * return would add 18 s, and the test's own run counts for little. */
    struct limit_rule rules[2] = {{10, 60000, 40}, {10, 60000, 40}};

    for (size_t a = 0; a < 2; a++) {
        const char *algo = a == 0 ? "token_bucket" : "gcra";
        struct lim l = mk(algo, "kept", 2, rules);
        struct lim first = mk1(algo, "kept", 10, 60000, 40); /* l's key 1 */
        struct lim twin = mk1(algo, "kept-twin", 10, 60000, 40);
        struct batch *b = calloc(1, sizeof(*b));
        long long ttl_got, ttl_want;
        char *got, *want;
        redisReply *r;

        l.keep_ttl = first.keep_ttl = twin.keep_ttl = true;
        cr_assert_str_eq(first.keys[0], l.keys[0]);
        cr_assert_eq(decide(&l, T0, 5).allowed, 1);
        cr_assert_eq(decide(&twin, T0, 5).allowed, 1);
        r = redisCommand(rc, "DEL %s", l.keys[1]);
        freeReplyObject(r);
        r = redisCommand(rc, "RPUSH %s x", l.keys[1]);
        freeReplyObject(r);
        batch_add(b, &first, T0, 1);
        batch_add_call(b, &l, T0, 1, SCRIPTCALL_LEASE_RETURN, 3);
        r = batch_run(algo, b, false);
        cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", algo);
        cr_assert_eq(r->elements, 2);
        cr_assert_eq(r->element[0]->type, REDIS_REPLY_STRING, "%s", algo);
        cr_assert_eq(r->element[1]->type, REDIS_REPLY_ERROR, "%s", algo);
        freeReplyObject(r);
        cr_assert_eq(decide(&twin, T0, 1).allowed, 1);
        got = get_text(l.keys[0]);
        want = get_text(twin.keys[0]);
        cr_assert_str_eq(got, want, "%s: call 1's write was not kept whole",
                         algo);
        ttl_got = cmd_int("PTTL %s", l.keys[0]);
        ttl_want = cmd_int("PTTL %s", twin.keys[0]);
        cr_assert(ttl_want > 30000 && llabs(ttl_got - ttl_want) < 5000,
                  "%s: PTTL %lld, want about %lld", algo, ttl_got, ttl_want);
        free(got);
        free(want);
        free(b);
    }
}

Test(scripts, a_malformed_batch_is_refused_whole_and_writes_nothing)
{
    struct lim l = mk1("gcra", "malformed", 10, 1000, 10);
    struct batch *b = calloc(1, sizeof(*b));
    redisReply *r;

    batch_add(b, &l, T0, 1);
    batch_add(b, &l, T0, 1);
    /* The second call claims one argument more than the batch holds. */
    snprintf(b->counts[1][1], 8, "%zu", b->sc[1].nargs + 1);
    r = batch_run("gcra", b, false);
    assert_sluice_error(r, "gcra", "a batch that does not add up");
    cr_assert(strstr(r->str, "batch") != NULL, "%s", r->str);
    freeReplyObject(r);
    /* And one argument left over that belongs to no call. */
    snprintf(b->counts[1][1], 8, "%zu", b->sc[1].nargs - 1);
    r = batch_run("gcra", b, false);
    assert_sluice_error(r, "gcra", "a batch with words left over");
    freeReplyObject(r);
    cr_assert_eq(cmd_int("EXISTS %s", l.keys[0]), 0);
    free(b);
}

TestSuite(scripts_cluster, .timeout = 60);

Test(scripts_cluster, hash_tagged_keys_work_on_a_redis_cluster)
{
    const char *bin = getenv("REDIS_SERVER_BIN");
    char *conf = harness_write_temp("");
    char portstr[8], busstr[8];
    /* The cluster bus gets a port of its own: port + 10000, the default,
     * may be taken or beyond 65535. */
    char *argv[] = {(char *)(bin != NULL ? bin : "redis-server"),
                    "--port",
                    portstr,
                    "--cluster-port",
                    busstr,
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--daemonize",
                    "no",
                    "--loglevel",
                    "warning",
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    conf,
                    NULL};
    struct limit_rule rules[] = {{5, 1000, 5}, {50, 60000, 50}};
    redisReply *r;

    unlink(conf); /* Redis writes its own */
    redis_port = harness_free_port();
    snprintf(portstr, sizeof(portstr), "%u", (unsigned)redis_port);
    do {
        snprintf(busstr, sizeof(busstr), "%u", (unsigned)harness_free_port());
    } while (strcmp(busstr, portstr) == 0);
    cr_assert_eq(proc_start(&redis, argv), 0);
    cr_assert(proc_wait_port(&redis, redis_port, 10000), "no cluster node");
    connect_redis();
    r = redisCommand(rc, "CLUSTER ADDSLOTSRANGE 0 16383");
    cr_assert_not_null(r, "redis: %s", rc->errstr);
    cr_assert_eq(r->type, REDIS_REPLY_STATUS, "ADDSLOTSRANGE: %s",
                 r->type == REDIS_REPLY_ERROR ? r->str : "?");
    freeReplyObject(r);
    cr_assert(harness_wait_until(cluster_ok, NULL, 10000), "cluster not ok");

    for (size_t i = 0; i < NALGOS; i++) {
        struct lim l = mk(all_algos[i], "route:ip:10.0.0.1", 2, rules);

        struct lim now = mk(all_algos[i], "route:ip:10.0.0.2", 2, rules);

        cr_assert_eq(admit_n(&l, T0, 1, 7), 5, "%s", l.algo);
        cr_assert_eq(admit_n(&now, 0, 1, 1), 1, "%s on the clock", l.algo);
        /* Two tags, two slots: Redis itself refuses. */
        snprintf(l.keys[1], sizeof(l.keys[1]), "test:%s:{other}:1", l.algo);
        {
            const char *words[] = {l.keys[0], l.keys[1], "0", "1",    "0",
                                   "0",       "r",       "5", "1000", "5",
                                   "50",      "60000",   "50"};

            r = eval_words(l.algo, 2, words, 13);
            cr_assert(r->type == REDIS_REPLY_ERROR &&
                          strstr(r->str, "CROSSSLOT") != NULL,
                      "%s: two slots accepted", l.algo);
            freeReplyObject(r);
        }
    }
    redisFree(rc);
    rc = NULL;
    cr_assert_eq(proc_stop(&redis, SIGTERM, 10000), 0);
    unlink(conf);
    free(conf);
}
