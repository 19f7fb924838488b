#include "ratelimit.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "config.h"
#include "denycache.h"
#include "lease.h"
#include "limit.h"
#include "local_store.h"
#include "log.h"
#include "metrics.h"
#include "ratekey.h"
#include "redis.h"
#include "scriptcall.h"
#include "scripts.h"
#include "strbuf.h"
#include "verdict.h"
#include "xmalloc.h"

struct ratelimit {

    struct redis_client *redis; /* NULL without a redis: section */
    const struct lua_script *scripts[LIMIT_ALGORITHM_COUNT]; /* by
                                   algorithm, looked up once */
    struct local_store *store;     /* borrowed; shared by the workers */
    char id_prefix[40];            /* makes request ids unique across
                                      processes, hosts and workers */
    uint64_t seq;                  /* request ids issued */
    struct metrics_shard *metrics; /* borrowed, or NULL */
    struct redis_stats published;  /* counters already in the metrics */
    struct denycache *denied;      /* refusals Redis gave (denycache.h);
                                      NULL without Redis */
    uint64_t reconnects_seen;      /* the client's reconnects plus
                                      failovers when 'denied' was last
                                      known valid */
    struct lease_table *leases;    /* leases on hot keys (lease.h); NULL
                                      without Redis */
    size_t returns_in_flight;      /* lease returns awaiting Redis */
    size_t takes_in_flight;        /* lease takes awaiting Redis */
    uint64_t timeout_ms;           /* redis.timeout: a decision's time */
    uint64_t wait_max_us;          /* a request that waited this long
                                      for takes makes its own call:
                                      half of redis.timeout */
    int64_t warned_ms;             /* last warn_reply() logged, mono ms */
    uint64_t warnings_held;        /* warn_reply() calls since, unlogged */
    /* Checks ended, kept for the next ones (check_new()): */
    struct ratelimit_check *spare_checks; /* linked by 'next_spare' */
    size_t nspare_checks;                 /* length of 'spare_checks' */
};

/* Ended checks a worker keeps for the next ones: about as many as are
 * decided in one loop turn (none under ASan: xmalloc.h). */
#define SPARE_CHECKS 64
/* Refusals a worker remembers; each entry is 272 bytes (1.1 MiB). */
#define DENY_CACHE_ENTRIES 4096
/* Hot keys a worker may hold leases on; each entry is 872 bytes (436 KiB). */
#define LEASE_ENTRIES 512
/* A lease entry with nothing held is forgotten after this idle time. */
#define LEASE_IDLE_US (10 * 1000000ULL)

struct ratelimit_check;
struct take;

/* One RequestRateLimiter filter's part of a check. */
struct part {
    struct ratelimit_check *check; /* the owner */
    struct verdict_part *v;        /* filter, tier, reason and decision,
                                      in the check's 'vparts';
                                      VERDICT_UNLIMITED until decided */
    struct redis_call *call;       /* pending script call, or NULL */
    struct timespec started;       /* when the script call went out */
    struct take *take;             /* its lease take in flight, or NULL */
    struct lease *lease;           /* the lease whose take it waits for,
                                      or NULL */
    struct part *next;             /* the next waiting for 'lease' */
    uint64_t queued_us;            /* when it first waited for a take;
                                      0: never */
    /* Last: check_new() zeroes what comes before. */
    char key[RATEKEY_MAX]; /* the tier's key, if limited */
};

struct ratelimit_check {
    struct ratelimit *rl;        /* borrowed */
    ratelimit_done_cb *cb;       /* called once when all parts are in */
    void *arg;                   /* for 'cb' */
    const char *instance;        /* borrowed: the request target */
    struct headers *fields;      /* borrowed: where the outcome's fields go */
    size_t pending;              /* parts awaiting Redis */
    bool may_hold;               /* a delay-mode verdict may hold it */
    size_t nparts;               /* entries in 'parts' */
    struct verdict_part *vparts; /* what each part decided, in a row for
                                    verdict_assemble(): after 'parts', in
                                    the same allocation */
    /* Kept for another check after this one (check_new()): */
    size_t cap;                         /* parts the allocation holds */
    struct ratelimit_check *next_spare; /* in the worker's spare checks */
    struct part parts[];                /* one per RequestRateLimiter filter */
};

struct ratelimit *
ratelimit_new(struct event_base *base, const struct config *cfg,
              struct local_store *store, unsigned worker,
              struct metrics_shard *metrics)
{
    struct ratelimit *rl = xcalloc(1, sizeof(*rl));
    uint64_t nonce = 0;

    rl->store = store;
    rl->metrics = metrics;
    if (getrandom(&nonce, sizeof(nonce), 0) != (ssize_t)sizeof(nonce)) {
        nonce =
            (uint64_t)(uint64_t)clock_wall_ms() ^ ((uint64_t)getpid() << 32);
    }
    snprintf(rl->id_prefix, sizeof(rl->id_prefix), "%016" PRIx64 "-%u", nonce,
             worker);
    for (int a = 0; a < LIMIT_ALGORITHM_COUNT; a++) {
        rl->scripts[a] =
            scripts_find(limit_algorithm_name((enum limit_algorithm)a));
    }
    if (cfg->redis.enabled) {
        rl->redis =
            redis_client_new(base, &cfg->redis, lua_scripts, lua_script_count,
                             cfg->redis.max_in_flight);
        rl->denied = denycache_new(DENY_CACHE_ENTRIES);
        rl->leases = lease_table_new(LEASE_ENTRIES);
        rl->timeout_ms = cfg->redis.timeout_ms;
        rl->wait_max_us = cfg->redis.timeout_ms * 1000 / 2;
    }
    return rl;
}

static void publish_gauge(struct ratelimit *rl, const char *state, uint64_t now,
                          uint64_t *seen);

void
ratelimit_free(struct ratelimit *rl)
{
    if (rl == NULL) {
        return;
    }
    if (rl->metrics != NULL) {
        /* This worker's share of the gauges goes with it. */
        publish_gauge(rl, "up", 0, &rl->published.nodes_up);
        publish_gauge(rl, "down", 0, &rl->published.nodes_down);
    }
    /* Returns still in flight are answered DOWN here: lost, counted as
     * used. ratelimit_release() at drain gives them time to land. */
    redis_client_free(rl->redis);
    denycache_free(rl->denied);
    lease_table_free(rl->leases);
    while (rl->spare_checks != NULL) {
        struct ratelimit_check *next = rl->spare_checks->next_spare;

        free(rl->spare_checks);
        rl->spare_checks = next;
    }
    free(rl);
}

bool
ratelimit_ready(const struct ratelimit *rl)
{
    return rl->redis == NULL || redis_client_ready(rl->redis);
}

static void
publish_one(struct ratelimit *rl, const char *kind, uint64_t now,
            uint64_t *seen)
{
    if (now > *seen) {
        metrics_add(rl->metrics, M_REDIS_EVENTS, &kind, (int64_t)(now - *seen));
        *seen = now;
    }
}

/* A gauge of this worker's: its change since the last publication. */
static void
publish_gauge(struct ratelimit *rl, const char *state, uint64_t now,
              uint64_t *seen)
{
    if (now != *seen) {
        metrics_add(rl->metrics, M_REDIS_NODES, &state,
                    (int64_t)now - (int64_t)*seen);
        *seen = now;
    }
}

void
ratelimit_publish(struct ratelimit *rl)
{
    const struct redis_stats *st;

    if (rl->redis == NULL || rl->metrics == NULL) {
        return;
    }
    st = redis_client_stats(rl->redis);
    publish_one(rl, "error", st->errors, &rl->published.errors);
    publish_one(rl, "timeout", st->timeouts, &rl->published.timeouts);
    publish_one(rl, "down", st->down, &rl->published.down);
    publish_one(rl, "reconnect", st->reconnects, &rl->published.reconnects);
    publish_one(rl, "noscript", st->noscript, &rl->published.noscript);
    publish_one(rl, "batch", st->batches, &rl->published.batches);
    publish_one(rl, "failover", st->failovers, &rl->published.failovers);
    publish_one(rl, "moved", st->moved, &rl->published.moved);
    publish_one(rl, "ask", st->ask, &rl->published.ask);
    publish_one(rl, "tryagain", st->tryagain, &rl->published.tryagain);
    publish_one(rl, "clusterdown", st->clusterdown, &rl->published.clusterdown);
    publish_gauge(rl, "up", st->nodes_up, &rl->published.nodes_up);
    publish_gauge(rl, "down", st->nodes_down, &rl->published.nodes_down);
}

const char *
ratelimit_result_name(const struct ratelimit_outcome *o)
{
    return verdict_reason_name(o->reason);
}

bool
ratelimit_route_limited(const struct route *route)
{
    return route->nrate_limiters > 0;
}

void
ratelimit_outcome_deinit(struct ratelimit_outcome *o)
{
    free(o->body);
    o->body = NULL;
}

/* ---- deciding one part ---- */

/*
 * The limiter 'pt' is decided by: its tier's, or for a check that may not
 * hold the request (ratelimit_check()) a copy in '*buf' whose max_delay
 * is 0. The script and the twin then admit only what passes now, and
 * refuse the rest as past max_delay, reserving nothing for it; a leaky
 * bucket's queue is not jumped either, since its wait is the water ahead.
 */
static const struct limiter_def *
decided_by(const struct part *pt, struct limiter_def *buf)
{
    const struct limiter_def *lim = pt->v->tier->limiter;

    if (pt->check->may_hold || !lim->delay) {
        return lim;
    }
    *buf = *lim;
    buf->max_delay_ms = 0;
    return buf;
}

/* 'fallback': the twin stands in for Redis, which failed. */
static void
decide_locally(struct ratelimit *rl, struct part *pt, bool fallback)
{
    struct limiter_def buf;
    const struct limiter_def *lim = decided_by(pt, &buf);

    if (local_store_decide(rl->store, pt->key, lim, pt->v->conf->cost,
                           (uint64_t)clock_wall_ms(), &pt->v->res) == 0) {
        pt->v->reason = verdict_reason_of(&pt->v->res, fallback);
    } else {
        /* Config validation keeps cost within every rule; be safe. */
        log_error("ratelimit: limiter %s: cost %" PRIu64 " is invalid",
                  lim->name, pt->v->conf->cost);
        pt->v->reason = VERDICT_TWIN_FAILED;
    }
}

/* Redis failed for 'pt': the filter's on_redis_error decides. */
static void
apply_failure_policy(struct ratelimit *rl, struct part *pt)
{
    switch (pt->v->conf->on_redis_error) {
    case REDIS_FAILURE_LOCAL:
        decide_locally(rl, pt, true);
        break;
    case REDIS_FAILURE_ALLOW:
        pt->v->reason = VERDICT_POLICY_ALLOWED;
        break;
    case REDIS_FAILURE_DENY:
        pt->v->reason = VERDICT_POLICY_DENIED;
        break;
    }
}

static void assemble(struct ratelimit_check *c, struct ratelimit_outcome *o);

static uint64_t
mono_us(const struct timespec *ts)
{
    return (uint64_t)ts->tv_sec * 1000000u + (uint64_t)ts->tv_nsec / 1000u;
}

/* clock_mono_us(), as the unsigned the deny cache and leases take. */
static uint64_t
now_us(void)
{
    return (uint64_t)clock_mono_us();
}

/*
 * A check of 'n' parts, zeroed but for the parts' keys (written before
 * they are read): a spare one if the newest holds enough parts.
 */
static struct ratelimit_check *
check_new(struct ratelimit *rl, size_t n)
{
    struct ratelimit_check *c = rl->spare_checks;

    _Static_assert(sizeof(struct part) % _Alignof(struct verdict_part) == 0,
                   "the verdict parts follow the parts aligned");
    if (c == NULL || c->cap < n) {
        c = xcalloc(1, sizeof(*c) +
                           n * (sizeof(c->parts[0]) + sizeof(*c->vparts)));
        c->cap = n;
        c->vparts = (struct verdict_part *)&c->parts[n];
        return c;
    }
    rl->spare_checks = c->next_spare;
    rl->nspare_checks--;
    c->next_spare = NULL;
    c->pending = 0;
    c->nparts = 0;
    for (size_t i = 0; i < n; i++) {
        memset(&c->parts[i], 0, offsetof(struct part, key));
    }
    memset(c->vparts, 0, n * sizeof(*c->vparts));
    return c;
}

/* 'c' is over: kept for check_new() if there is room. */
static void
check_free(struct ratelimit *rl, struct ratelimit_check *c)
{
    if (XMALLOC_REUSE && rl->nspare_checks < SPARE_CHECKS) {
        c->next_spare = rl->spare_checks;
        rl->spare_checks = c;
        rl->nspare_checks++;
    } else {
        free(c);
    }
}

/* 'pt' is decided: when it was the last part awaited, answers the check. */
static void
finish_part(struct part *pt)
{
    struct ratelimit_check *c = pt->check;
    struct ratelimit_outcome o;

    if (--c->pending > 0) {
        return;
    }
    assemble(c, &o);
    c->cb(&o, c->arg);
    check_free(c->rl, c);
}

/*
 * A script call's time, for sluice_redis_duration_seconds: only a call
 * Redis answered or let time out. One answered DOWN or OVERLOADED never
 * reached Redis, and its time (about 0) would pull the quantiles down
 * during an outage.
 */
static void
observe_latency(struct ratelimit *rl, const struct timespec *started,
                enum redis_status status)
{
    struct timespec now;

    if (rl->metrics == NULL ||
        (status != REDIS_CALL_OK && status != REDIS_CALL_ERROR &&
         status != REDIS_CALL_TIMEOUT)) {
        return;
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    metrics_observe(rl->metrics, M_REDIS_SECONDS, NULL,
                    (double)(now.tv_sec - started->tv_sec) +
                        (double)(now.tv_nsec - started->tv_nsec) / 1e9);
}

/*
 * Remembers Redis's refusal of 'pt' (denycache.h). With leases, units
 * may come back before retry_after (a lease ends within its lifetime),
 * so a refusal of a limiter with leases is remembered no longer than
 * that.
 */
static void
remember_refusal(struct ratelimit *rl, struct part *pt)
{
    const struct limiter_def *lim = pt->v->tier->limiter;

    if (!pt->check->may_hold && lim->delay) {
        /* Its retry_after is for a request that may not wait: one that
         * may would pass sooner. */
        return;
    }
    denycache_put_for(rl->denied, pt->key, pt->v->conf->cost, &pt->v->res,
                      mono_us(&pt->started),
                      lim->lease > 0 ? lease_lifetime_ms(lim) : UINT64_MAX);
}

/* The most warn_reply() logs, per worker. */
#define WARN_REPLY_EVERY_MS 1000

/*
 * Warns of what Redis answered a call: at most once a second per worker,
 * so that a Redis that answers every call with an error (or a broken
 * script) costs a line a second, not one per request. The line says how
 * many more there were since the last one.
 */
static void warn_reply(struct ratelimit *rl, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
warn_reply(struct ratelimit *rl, const char *fmt, ...)
{
    int64_t now = clock_mono_ms();
    char msg[512];
    va_list ap;

    if (rl->warned_ms != 0 && now - rl->warned_ms < WARN_REPLY_EVERY_MS) {
        rl->warnings_held++;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (rl->warnings_held > 0) {
        log_warn("%s (and %" PRIu64 " more such replies since the last)", msg,
                 rl->warnings_held);
    } else {
        log_warn("%s", msg);
    }
    rl->warned_ms = now;
    rl->warnings_held = 0;
}

static void
on_script_reply(enum redis_status status, const long long *ints, size_t n,
                const char *error, void *arg)
{
    struct part *pt = arg;
    struct ratelimit *rl = pt->check->rl;

    pt->call = NULL;
    observe_latency(rl, &pt->started, status);
    if (status == REDIS_CALL_OK &&
        scriptcall_decode(pt->v->tier->limiter, ints, n, &pt->v->res) == 0) {
        pt->v->reason = verdict_reason_of(&pt->v->res, false);
        if (!pt->v->res.allowed) {
            remember_refusal(rl, pt);
        }
    } else {
        if (status == REDIS_CALL_ERROR || status == REDIS_CALL_OK) {
            warn_reply(rl, "ratelimit: limiter %s: redis: %s",
                       pt->v->tier->limiter->name,
                       error != NULL ? error : "unexpected reply");
        }
        apply_failure_policy(rl, pt);
    }
    finish_part(pt);
}

/*
 * True if Redis refused this key and cost a moment ago and would refuse
 * it still (denycache.h): then 'pt' is decided without a call.
 */
static bool
known_refused(struct ratelimit *rl, struct part *pt)
{
    const struct redis_stats *st = redis_client_stats(rl->redis);
    /* A cluster's promoted replica is a first connection, no reconnect:
     * its failover counts instead. */
    uint64_t reconnects = st->reconnects + st->failovers;

    if (reconnects != rl->reconnects_seen) {
        /* A new connection may be to a server that lost the state. */
        denycache_clear(rl->denied);
        rl->reconnects_seen = reconnects;
        return false;
    }
    if (denycache_size(rl->denied) == 0) {
        return false;
    }
    if (!denycache_get(rl->denied, pt->key, pt->v->conf->cost, now_us(),
                       &pt->v->res)) {
        return false;
    }
    pt->v->reason = verdict_reason_of(&pt->v->res, false);
    if (rl->metrics != NULL) {
        metrics_add(rl->metrics, M_DENY_CACHE_HITS, NULL, 1);
    }
    return true;
}

/* "<id_prefix>-<seq>": unique across processes, hosts and workers. */
static void
request_id(struct ratelimit *rl, char *buf)
{
    size_t n = strlen(rl->id_prefix);
    char digits[U64_DEC_MAX];

    memcpy(buf, rl->id_prefix, n);
    buf[n] = '-';
    strcpy(buf + n + 1, u64_dec(++rl->seq, digits));
}

/* Below this much of its time left, a decision is not sent to Redis. */
#define BUDGET_MIN_MS 2

/*
 * What is left of redis.timeout for 'pt': all of it, unless it has waited
 * behind lease takes, whose time counts against it. 0 when less than
 * BUDGET_MIN_MS is left: a call that would time out still runs in Redis,
 * and would charge units for a request the failure policy decided.
 */
static uint64_t
budget_ms(const struct ratelimit *rl, const struct part *pt)
{
    uint64_t waited;

    if (pt->queued_us == 0) {
        return rl->timeout_ms;
    }
    waited = (now_us() - pt->queued_us) / 1000;
    return waited + BUDGET_MIN_MS <= rl->timeout_ms ? rl->timeout_ms - waited
                                                    : 0;
}

/* The words of 'sc' (borrowed, must outlive the result) for the Redis
 * client, with their lengths. */
static struct redis_words
script_words(const struct scriptcall *sc)
{
    return (struct redis_words){sc->keys, sc->key_lens, sc->nkeys,
                                sc->args, sc->arg_lens, sc->nargs};
}

/*
 * Sends the script call for 'pt'. True if it went out ('pt' is decided
 * in on_script_reply()); false if the failure policy decided it now.
 */
static bool
start_redis(struct ratelimit *rl, struct part *pt)
{
    struct limiter_def buf;
    const struct limiter_def *lim = decided_by(pt, &buf);
    const struct lua_script *script = rl->scripts[lim->algorithm];
    uint64_t budget = budget_ms(rl, pt);
    struct scriptcall sc;
    struct redis_words words;
    char reqid[sizeof(rl->id_prefix) + SCRIPTCALL_ARG_MAX];

    _Static_assert(RATEKEY_MAX + 2 <= SCRIPTCALL_KEY_MAX,
                   "a key and its rule suffix fit a script call");
    if (budget == 0) {
        /* Its time went waiting behind lease takes. */
        apply_failure_policy(rl, pt);
        return false;
    }
    if (script == NULL) {
        log_error("ratelimit: no script for %s",
                  limit_algorithm_name(lim->algorithm));
        apply_failure_policy(rl, pt);
        return false;
    }
    request_id(rl, reqid);
    /* The time override is always 0: only tests inject a time. */
    if (scriptcall_encode(&sc, lim, pt->key, pt->v->conf->cost, reqid, 0) !=
        0) {
        /* ratekey bounds the key and the config the rules; be safe. */
        log_error("ratelimit: limiter %s: cannot encode the script call",
                  lim->name);
        apply_failure_policy(rl, pt);
        return false;
    }
    clock_gettime(CLOCK_MONOTONIC, &pt->started);
    words = script_words(&sc);
    pt->call = redis_client_eval_within(rl->redis, script, &words, budget,
                                        on_script_reply, pt);
    return true;
}

/* ---- leases on hot keys (lease.h) ---- */

/*
 * A take in flight. It outlives the request that sent it if that one is
 * cancelled: the grant must still reach the lease, and the requests
 * queued behind it must still be served.
 */
struct take {
    struct ratelimit *rl;    /* borrowed */
    struct lease *lease;     /* borrowed: stays while it is 'taking' */
    struct part *pt;         /* the request taking, or NULL if it left */
    uint64_t cost;           /* the request's units */
    uint64_t wanted;         /* the units asked for */
    struct timespec started; /* when the call went out */
};

/* A lease return in flight. */
struct giveback {
    struct ratelimit *rl;   /* borrowed */
    uint64_t units;         /* given back */
    struct limiter_def def; /* the lease's limiter, without its name and
                               policy: the lease may be gone before the
                               reply comes */
};

static void
count_units(struct ratelimit *rl, const char *event, uint64_t units)
{
    if (rl->metrics != NULL && units > 0) {
        metrics_add(rl->metrics, M_LEASE_UNITS, &event, (int64_t)units);
    }
}

static void
on_return_reply(enum redis_status status, const long long *ints, size_t n,
                const char *error, void *arg)
{
    struct giveback *g = arg;
    struct limit_result res;
    uint64_t units;

    g->rl->returns_in_flight--;
    if (status == REDIS_CALL_OK &&
        scriptcall_decode_lease(&g->def, ints, n, &res, &units) == 0) {
        count_units(g->rl, "returned", g->units);
    } else {
        /* Lost: they count as used, so nothing is admitted twice. */
        if (status == REDIS_CALL_ERROR || status == REDIS_CALL_OK) {
            warn_reply(g->rl, "ratelimit: lease return: redis: %s",
                       error != NULL ? error : "unexpected reply");
        }
        count_units(g->rl, "lost", g->units);
    }
    free(g);
}

/* Gives the 'units' of 'l' (lease.h: its key and limiter) back to Redis. */
static void
give_back(struct ratelimit *rl, const struct lease *l, uint64_t units)
{
    const struct lua_script *script = rl->scripts[l->def.algorithm];
    struct scriptcall sc;
    char reqid[sizeof(rl->id_prefix) + SCRIPTCALL_ARG_MAX];
    struct giveback *g;

    if (units == 0) {
        return;
    }
    request_id(rl, reqid);
    if (script == NULL ||
        scriptcall_encode(&sc, &l->def, l->key, 1, reqid, 0) != 0 ||
        scriptcall_lease(&sc, SCRIPTCALL_LEASE_RETURN, units) != 0) {
        count_units(rl, "lost", units);
        return;
    }
    g = xmalloc(sizeof(*g));
    g->rl = rl;
    g->units = units;
    g->def = l->def;
    g->def.name = NULL; /* the lease's, which may go before the reply */
    g->def.policy = NULL;
    rl->returns_in_flight++;
    redis_client_eval(rl->redis, script, sc.keys, sc.nkeys, sc.args, sc.nargs,
                      on_return_reply, g);
}

static void
on_lease_end(const struct lease *l, void *arg)
{
    give_back(arg, l, l->units);
}

static void
lease_hit(struct ratelimit *rl, struct part *pt)
{
    pt->v->reason = verdict_reason_of(&pt->v->res, false);
    if (rl->metrics != NULL) {
        metrics_add(rl->metrics, M_LEASE_HITS, NULL, 1);
    }
}

static void
enqueue(struct lease *l, struct part *pt)
{
    pt->lease = l;
    pt->next = NULL;
    if (pt->queued_us == 0) {
        pt->queued_us = now_us();
    }
    if (l->queue_tail != NULL) {
        ((struct part *)l->queue_tail)->next = pt;
    } else {
        l->queue_head = pt;
    }
    l->queue_tail = pt;
}

static void
unqueue(struct lease *l, struct part *pt)
{
    struct part *prev = NULL;

    for (struct part *q = l->queue_head; q != NULL; prev = q, q = q->next) {
        if (q != pt) {
            continue;
        }
        if (prev != NULL) {
            prev->next = q->next;
        } else {
            l->queue_head = q->next;
        }
        if (l->queue_tail == q) {
            l->queue_tail = prev;
        }
        break;
    }
    pt->lease = NULL;
    pt->next = NULL;
}

static void on_take_reply(enum redis_status status, const long long *ints,
                          size_t n, const char *error, void *arg);

/*
 * Sends a take for 'pt' on 'l', asking for enough for 'queued' more
 * units of requests waiting too. True if it went out; false if the
 * failure policy decided 'pt' now ('l' is then not taking).
 */
static bool
start_take(struct ratelimit *rl, struct part *pt, struct lease *l,
           uint64_t queued)
{
    const struct limiter_def *lim = pt->v->tier->limiter;
    const struct lua_script *script = rl->scripts[lim->algorithm];
    uint64_t budget = budget_ms(rl, pt);
    struct scriptcall sc;
    struct redis_words words;
    char reqid[sizeof(rl->id_prefix) + SCRIPTCALL_ARG_MAX];
    struct take *tk;
    struct limiter_def buf;

    if (budget == 0) {
        /* Its time went waiting behind lease takes. */
        apply_failure_policy(rl, pt);
        return false;
    }
    /* What is left is too little for this cost (or out of time): back
     * before the take, which replaces it; from the queue as from a new
     * request. */
    give_back(rl, l, l->units);
    l->units = 0;
    lease_take_started(l, lim, now_us());
    tk = xcalloc(1, sizeof(*tk));
    tk->rl = rl;
    tk->lease = l;
    tk->pt = pt;
    tk->cost = pt->v->conf->cost;
    tk->wanted = lease_want(l, lim, tk->cost, queued);
    request_id(rl, reqid);
    if (script == NULL ||
        scriptcall_encode(&sc, decided_by(pt, &buf), pt->key, tk->cost, reqid,
                          0) != 0 ||
        scriptcall_lease(&sc, SCRIPTCALL_LEASE_TAKE, tk->wanted) != 0) {
        log_error("ratelimit: limiter %s: cannot encode the lease call",
                  lim->name);
        l->taking = false;
        free(tk);
        apply_failure_policy(rl, pt);
        return false;
    }
    clock_gettime(CLOCK_MONOTONIC, &tk->started);
    pt->started = tk->started;
    pt->take = tk;
    rl->takes_in_flight++;
    /* Those who wait behind it came later than 'pt', first in the queue:
     * its budget is within theirs. */
    words = script_words(&sc);
    redis_client_eval_within(rl->redis, script, &words, budget, on_take_reply,
                             tk);
    return true;
}

/*
 * Decides 'pt', a part of a limiter with leases: from the worker's
 * lease when it covers the cost, else behind the take in flight for the
 * key, else by a take of its own. True if pending.
 */
static bool
lease_part(struct ratelimit *rl, struct part *pt)
{
    uint64_t now = now_us();
    struct lease *l = lease_table_find(rl->leases, pt->key);

    if (l != NULL && lease_spend(l, pt->v->conf->cost, now, &pt->v->res)) {
        lease_hit(rl, pt);
        return false;
    }
    if (l != NULL && l->taking) {
        enqueue(l, pt);
        return true;
    }
    if (known_refused(rl, pt)) {
        return false;
    }
    if (l == NULL) {
        struct lease evicted;
        bool did_evict;

        l = lease_table_add(rl->leases, pt->key, now, &evicted, &did_evict);
        if (did_evict) {
            give_back(rl, &evicted, evicted.units);
        }
        if (l == NULL) {
            /* Every neighbour is taking: an exact call, no lease. */
            return start_redis(rl, pt);
        }
    }
    return start_take(rl, pt, l, 0);
}

/* Units the requests in the queue from 'pt' on want. */
static uint64_t
queued_cost(const struct part *pt)
{
    uint64_t n = 0;

    for (; pt != NULL; pt = pt->next) {
        n += pt->v->conf->cost;
    }
    return n;
}

/*
 * The take on 'l' was answered ('answered': by the script; 'granted': it
 * admitted): serves the requests that waited for it. Those the lease
 * covers are admitted from it. When it admitted, the first of the rest
 * takes again, for them all (the script grants what the bucket can
 * spare), and the rest wait again: one call per round trip however many
 * wait. When it refused, each of the rest is refused from the deny cache
 * or makes an exact call of its own (another cost may still fit). A
 * request that has waited half of redis.timeout makes its own call too,
 * within what is left of that timeout (budget_ms()), so that none waits
 * longer than redis.timeout in all. When
 * Redis failed, the failure policy decides them all at once.
 */
static void
serve_queue(struct ratelimit *rl, struct lease *l, bool answered, bool granted)
{
    struct part *w = l->queue_head;
    struct part *taker = NULL;
    struct part *done = NULL; /* decided here, finished after the walk */
    uint64_t now = now_us();

    l->queue_head = NULL;
    l->queue_tail = NULL;
    while (w != NULL) {
        struct part *next = w->next;
        bool pending = false;

        w->next = NULL;
        w->lease = NULL;
        if (!answered) {
            apply_failure_policy(rl, w);
        } else if (lease_spend(l, w->v->conf->cost, now, &w->v->res)) {
            lease_hit(rl, w);
        } else if (now - w->queued_us >= rl->wait_max_us) {
            /* Waited long enough (Redis is slow, or the bucket nearly
             * empty): an exact call of its own, at once. */
            pending = !known_refused(rl, w) && start_redis(rl, w);
        } else if (taker != NULL) {
            enqueue(l, w);
            pending = true;
        } else if (granted) {
            pending = start_take(rl, w, l, queued_cost(next));
            if (pending) {
                taker = w;
            } else {
                granted = false;
            }
        } else if (!known_refused(rl, w)) {
            pending = start_redis(rl, w);
        }
        if (!pending) {
            w->next = done;
            done = w;
        }
        w = next;
    }
    /* Finishing runs the gateway's callback, which may end other checks:
     * none of them may be in the list being walked. */
    while (done != NULL) {
        struct part *next = done->next;

        done->next = NULL;
        finish_part(done);
        done = next;
    }
}

static void
on_take_reply(enum redis_status status, const long long *ints, size_t n,
              const char *error, void *arg)
{
    struct take *tk = arg;
    struct ratelimit *rl = tk->rl;
    struct lease *l = tk->lease;
    struct part *pt = tk->pt;
    struct limit_result res;
    uint64_t granted = 0;
    bool answered;

    rl->takes_in_flight--;
    observe_latency(rl, &tk->started, status);
    answered = status == REDIS_CALL_OK &&
               scriptcall_decode_lease(&l->def, ints, n, &res, &granted) == 0;
    if (!answered && (status == REDIS_CALL_ERROR || status == REDIS_CALL_OK)) {
        warn_reply(rl, "ratelimit: lease take: redis: %s",
                   error != NULL ? error : "unexpected reply");
    }
    if (status == REDIS_CALL_TIMEOUT) {
        /* The script may still run and charge up to what was asked for,
         * which is then never admitted nor returned: count it as used. */
        count_units(rl, "lost", tk->wanted);
    }
    if (answered && granted > tk->wanted) {
        warn_reply(rl,
                   "ratelimit: lease take: %llu units granted of %llu asked",
                   (unsigned long long)granted, (unsigned long long)tk->wanted);
        granted = tk->wanted;
    }
    if (answered && res.allowed) {
        /* A request that left unserved leaves its cost in the lease. */
        lease_take_granted(l, pt != NULL ? tk->cost : 0, granted, &res,
                           mono_us(&tk->started));
        count_units(rl, "taken", granted);
    } else if (answered) {
        l->taking = false; /* refused: the bucket decides the next take */
    } else {
        lease_take_failed(l);
    }
    if (pt != NULL) {
        pt->take = NULL;
        if (answered) {
            pt->v->res = res;
            if (res.allowed) {
                /* Units on lease are the worker's to admit: remaining. */
                pt->v->res.remaining += (int64_t)l->units;
            }
            pt->v->reason = verdict_reason_of(&res, false);
            if (!res.allowed) {
                remember_refusal(rl, pt);
            }
        } else {
            apply_failure_policy(rl, pt);
        }
    }
    serve_queue(rl, l, answered, answered && res.allowed);
    free(tk);
    if (pt != NULL) {
        finish_part(pt);
    }
}

bool
ratelimit_release(struct ratelimit *rl)
{
    if (rl->leases == NULL) {
        return true;
    }
    lease_table_release(rl->leases, on_lease_end, rl);
    return rl->returns_in_flight == 0 && lease_table_held(rl->leases) == 0 &&
           rl->takes_in_flight == 0;
}

void
ratelimit_tick(struct ratelimit *rl)
{
    if (rl->leases != NULL) {
        lease_table_expire(rl->leases, now_us(), LEASE_IDLE_US, on_lease_end,
                           rl);
    }
}

/* ---- the whole check ---- */

/* Combines the parts (verdict.h) into '*o'. */
static void
assemble(struct ratelimit_check *c, struct ratelimit_outcome *o)
{
    struct verdict v;

    verdict_assemble(c->vparts, c->nparts, c->instance, c->fields, &v);
    memset(o, 0, sizeof(*o));
    o->verdict = v.deny ? RATELIMIT_DENY : RATELIMIT_PASS;
    o->status = v.status;
    o->delay_ms = v.delay_ms;
    o->body = v.body; /* moved */
    o->reason = v.reason;
    o->limiter = v.limiter;
    o->tier = v.tier;
    o->dry_run_denied = v.dry_run_denied;
}

struct ratelimit_check *
ratelimit_check(struct ratelimit *rl, const struct config *cfg,
                const struct route *route, const struct caller *who,
                bool may_hold, const char *instance, struct headers *fields,
                ratelimit_done_cb *cb, void *arg, struct ratelimit_outcome *now)
{
    struct ratelimit_check *c;
    size_t n = route->nrate_limiters;

    c = check_new(rl, n);
    c->rl = rl;
    c->may_hold = may_hold;
    c->cb = cb;
    c->arg = arg;
    c->instance = instance;
    c->fields = fields;
    for (size_t i = 0; i < n; i++) {
        const struct rate_limit_conf *conf = route->rate_limiters[i];
        struct part *pt = &c->parts[c->nparts++];

        pt->check = c;
        pt->v = &c->vparts[i];
        pt->v->conf = conf;
        pt->v->tier = ratekey_tier(conf, who);
        if (pt->v->tier == NULL) {
            /* A key sent twice is refused as no key, whatever empty_key
             * says: allowed, it would pass unlimited as either copy. A
             * dry run refuses nothing. */
            bool allow = conf->empty_key_allow &&
                         (conf->dry_run || !ratekey_ambiguous(conf, who));

            pt->v->reason = allow ? VERDICT_UNLIMITED : VERDICT_NO_KEY;
            continue;
        }
        if (pt->v->tier->limiter == NULL) {
            pt->v->reason = VERDICT_UNLIMITED;
            continue;
        }
        if (!ratekey_build(pt->v->tier, who,
                           cfg->redis.key_prefix != NULL ? cfg->redis.key_prefix
                                                         : "sluice:",
                           conf->scope, pt->key)) {
            pt->v->reason =
                conf->empty_key_allow ? VERDICT_UNLIMITED : VERDICT_NO_KEY;
            pt->v->tier = NULL;
            continue;
        }
        if (pt->v->tier->limiter->refuse_all) {
            /* burstCapacity 0: nothing to ask the store. */
            pt->v->res.allowed = false;
            pt->v->reason = VERDICT_DENIED;
        } else if (conf->local || rl->redis == NULL) {
            decide_locally(rl, pt, false);
        } else if (pt->v->tier->limiter->lease > 0) {
            c->pending += lease_part(rl, pt) ? 1 : 0;
        } else if (!known_refused(rl, pt)) {
            c->pending += start_redis(rl, pt) ? 1 : 0;
        }
    }
    if (c->pending > 0) {
        return c;
    }
    assemble(c, now);
    check_free(rl, c);
    return NULL;
}

void
ratelimit_cancel(struct ratelimit_check *c)
{
    for (size_t i = 0; i < c->nparts; i++) {
        struct part *pt = &c->parts[i];

        if (pt->call != NULL) {
            redis_call_cancel(pt->call);
        }
        if (pt->take != NULL) {
            /* The take goes on: its grant goes to the lease. */
            pt->take->pt = NULL;
        }
        if (pt->lease != NULL) {
            unqueue(pt->lease, pt);
        }
    }
    check_free(c->rl, c);
}
