#include "ratelimit.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "config.h"
#include "denycache.h"
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
    uint64_t reconnects_seen;      /* the client's reconnect count when
                                      'denied' was last known valid */
};

/* Refusals a worker remembers; each entry is 272 bytes (1.1 MiB). */
#define DENY_CACHE_ENTRIES 4096

struct ratelimit_check;

/* One RequestRateLimiter filter's part of a check. */
struct part {
    struct ratelimit_check *check; /* the owner */
    struct verdict_part v;         /* filter, tier, reason and decision;
                                      VERDICT_UNLIMITED until decided */
    char key[RATEKEY_MAX];         /* the tier's key, if limited */
    struct redis_call *call;       /* pending script call, or NULL */
    struct timespec started;       /* when the script call went out */
};

struct ratelimit_check {
    struct ratelimit *rl;  /* borrowed */
    ratelimit_done_cb *cb; /* called once when all parts are in */
    void *arg;             /* for 'cb' */
    const char *instance;  /* borrowed: the request target */
    size_t pending;        /* parts awaiting Redis */
    size_t nparts;         /* entries in 'parts' */
    struct part parts[];   /* one per RequestRateLimiter filter */
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
    }
    return rl;
}

void
ratelimit_free(struct ratelimit *rl)
{
    if (rl == NULL) {
        return;
    }
    redis_client_free(rl->redis);
    denycache_free(rl->denied);
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
    publish_one(rl, "failover", st->failovers, &rl->published.failovers);
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
    headers_deinit(&o->headers);
    free(o->body);
    o->body = NULL;
}

/* ---- deciding one part ---- */

/* 'fallback': the twin stands in for Redis, which failed. */
static void
decide_locally(struct ratelimit *rl, struct part *pt, bool fallback)
{
    const struct limiter_def *lim = pt->v.tier->limiter;

    if (local_store_decide(rl->store, pt->key, lim, pt->v.conf->cost,
                           (uint64_t)clock_wall_ms(), &pt->v.res) == 0) {
        pt->v.reason = verdict_reason_of(&pt->v.res, fallback);
    } else {
        /* Config validation keeps cost within every rule; be safe. */
        log_error("ratelimit: limiter %s: cost %" PRIu64 " is invalid",
                  lim->name, pt->v.conf->cost);
        pt->v.reason = VERDICT_TWIN_FAILED;
    }
}

/* Redis failed for 'pt': the filter's on_redis_error decides. */
static void
apply_failure_policy(struct ratelimit *rl, struct part *pt)
{
    switch (pt->v.conf->on_redis_error) {
    case REDIS_FAILURE_LOCAL:
        decide_locally(rl, pt, true);
        break;
    case REDIS_FAILURE_ALLOW:
        pt->v.reason = VERDICT_POLICY_ALLOWED;
        break;
    case REDIS_FAILURE_DENY:
        pt->v.reason = VERDICT_POLICY_DENIED;
        break;
    }
}

static void assemble(struct ratelimit_check *c, struct ratelimit_outcome *o);

static uint64_t
mono_us(const struct timespec *ts)
{
    return (uint64_t)ts->tv_sec * 1000000u + (uint64_t)ts->tv_nsec / 1000u;
}

static void
on_script_reply(enum redis_status status, const long long *ints, size_t n,
                const char *error, void *arg)
{
    struct part *pt = arg;
    struct ratelimit_check *c = pt->check;
    struct ratelimit_outcome o;

    pt->call = NULL;
    if (c->rl->metrics != NULL) {
        struct timespec now;

        clock_gettime(CLOCK_MONOTONIC, &now);
        metrics_observe(c->rl->metrics, M_REDIS_SECONDS, NULL,
                        (double)(now.tv_sec - pt->started.tv_sec) +
                            (double)(now.tv_nsec - pt->started.tv_nsec) / 1e9);
    }
    if (status == REDIS_CALL_OK &&
        scriptcall_decode(ints, n, &pt->v.res) == 0) {
        pt->v.reason = verdict_reason_of(&pt->v.res, false);
        if (!pt->v.res.allowed) {
            denycache_put(c->rl->denied, pt->key, pt->v.conf->cost, &pt->v.res,
                          mono_us(&pt->started));
        }
    } else {
        if (status == REDIS_CALL_ERROR || status == REDIS_CALL_OK) {
            log_warn("ratelimit: limiter %s: redis: %s",
                     pt->v.tier->limiter->name,
                     error != NULL ? error : "unexpected reply");
        }
        apply_failure_policy(c->rl, pt);
    }
    if (--c->pending > 0) {
        return;
    }
    assemble(c, &o);
    c->cb(&o, c->arg);
    free(c);
}

/*
 * True if Redis refused this key and cost a moment ago and would refuse
 * it still (denycache.h): then 'pt' is decided without a call.
 */
static bool
known_refused(struct ratelimit *rl, struct part *pt)
{
    uint64_t reconnects = redis_client_stats(rl->redis)->reconnects;
    struct timespec now;

    if (reconnects != rl->reconnects_seen) {
        /* A new connection may be to a server that lost the state. */
        denycache_clear(rl->denied);
        rl->reconnects_seen = reconnects;
        return false;
    }
    if (denycache_size(rl->denied) == 0) {
        return false;
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (!denycache_get(rl->denied, pt->key, pt->v.conf->cost, mono_us(&now),
                       &pt->v.res)) {
        return false;
    }
    pt->v.reason = verdict_reason_of(&pt->v.res, false);
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

/* Sends the script call for 'pt'; on failure the policy decides now. */
static void
start_redis(struct ratelimit *rl, struct part *pt)
{
    const struct limiter_def *lim = pt->v.tier->limiter;
    const struct lua_script *script = rl->scripts[lim->algorithm];
    struct scriptcall sc;
    char reqid[sizeof(rl->id_prefix) + SCRIPTCALL_ARG_MAX];

    _Static_assert(RATEKEY_MAX + 2 <= SCRIPTCALL_KEY_MAX,
                   "a key and its rule suffix fit a script call");
    if (script == NULL) {
        log_error("ratelimit: no script for %s",
                  limit_algorithm_name(lim->algorithm));
        apply_failure_policy(rl, pt);
        return;
    }
    request_id(rl, reqid);
    /* The time override is always 0: only tests inject a time. */
    if (scriptcall_encode(&sc, lim, pt->key, pt->v.conf->cost, reqid, 0) != 0) {
        /* ratekey bounds the key and the config the rules; be safe. */
        log_error("ratelimit: limiter %s: cannot encode the script call",
                  lim->name);
        apply_failure_policy(rl, pt);
        return;
    }
    clock_gettime(CLOCK_MONOTONIC, &pt->started);
    pt->call = redis_client_eval(rl->redis, script, sc.keys, sc.nkeys, sc.args,
                                 sc.nargs, on_script_reply, pt);
    pt->check->pending++;
}

/* ---- the whole check ---- */

/* Combines the parts (verdict.h) into '*o'. */
static void
assemble(struct ratelimit_check *c, struct ratelimit_outcome *o)
{
    /* + 1: never a zero-size allocation */
    struct verdict_part *vp = xcalloc(c->nparts + 1, sizeof(*vp));
    struct verdict v;

    for (size_t i = 0; i < c->nparts; i++) {
        vp[i] = c->parts[i].v;
    }
    verdict_assemble(vp, c->nparts, c->instance, &v);
    free(vp);
    memset(o, 0, sizeof(*o));
    o->verdict = v.deny ? RATELIMIT_DENY : RATELIMIT_PASS;
    o->status = v.status;
    o->delay_ms = v.delay_ms;
    o->headers = v.headers; /* moved */
    o->body = v.body;       /* moved */
    o->reason = v.reason;
    o->limiter = v.limiter;
    o->tier = v.tier;
    o->dry_run_denied = v.dry_run_denied;
}

struct ratelimit_check *
ratelimit_check(struct ratelimit *rl, const struct config *cfg,
                const struct route *route, const struct caller *who,
                const char *instance, ratelimit_done_cb *cb, void *arg,
                struct ratelimit_outcome *now)
{
    struct ratelimit_check *c;
    size_t n = route->nrate_limiters;

    c = xcalloc(1, sizeof(*c) + n * sizeof(c->parts[0]));
    c->rl = rl;
    c->cb = cb;
    c->arg = arg;
    c->instance = instance;
    for (size_t i = 0; i < n; i++) {
        const struct rate_limit_conf *conf = route->rate_limiters[i];
        struct part *pt = &c->parts[c->nparts++];

        pt->check = c;
        pt->v.conf = conf;
        pt->v.tier = ratekey_tier(conf, who);
        if (pt->v.tier == NULL) {
            pt->v.reason =
                conf->empty_key_allow ? VERDICT_UNLIMITED : VERDICT_NO_KEY;
            continue;
        }
        if (pt->v.tier->limiter == NULL) {
            pt->v.reason = VERDICT_UNLIMITED;
            continue;
        }
        if (!ratekey_build(pt->v.tier, who,
                           cfg->redis.key_prefix != NULL ? cfg->redis.key_prefix
                                                         : "sluice:",
                           conf->scope, pt->key)) {
            pt->v.reason =
                conf->empty_key_allow ? VERDICT_UNLIMITED : VERDICT_NO_KEY;
            pt->v.tier = NULL;
            continue;
        }
        if (pt->v.tier->limiter->refuse_all) {
            /* burstCapacity 0: nothing to ask the store. */
            pt->v.res.allowed = false;
            pt->v.reason = VERDICT_DENIED;
        } else if (conf->local || rl->redis == NULL) {
            decide_locally(rl, pt, false);
        } else if (!known_refused(rl, pt)) {
            start_redis(rl, pt);
        }
    }
    if (c->pending > 0) {
        return c;
    }
    assemble(c, now);
    free(c);
    return NULL;
}

void
ratelimit_cancel(struct ratelimit_check *c)
{
    for (size_t i = 0; i < c->nparts; i++) {
        if (c->parts[i].call != NULL) {
            redis_call_cancel(c->parts[i].call);
        }
    }
    free(c);
}
