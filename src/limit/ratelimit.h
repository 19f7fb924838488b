/*
 * ratelimit.h - the RequestRateLimiter filters of a route, at request time:
 * pick the tier, build the key, ask Redis (one script call per filter, all
 * at once) or the in-process twin, apply the failure policy, and give each
 * filter's part a reason; verdict.h turns the parts into the outcome. One
 * per worker thread; does I/O through redis.h.
 *
 * A limiter with `lease:` is decided from the worker's lease on the key
 * when it covers the cost (no Redis call), behind the take in flight for
 * the key, or by a take (lease.h; lua/README.md, "Leases"). Refusals of
 * such a limiter stay in the deny cache for at most a lease's lifetime,
 * since units on lease may come back sooner than retry_after says.
 */
#ifndef SLUICE_RATELIMIT_H
#define SLUICE_RATELIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "headers.h"
#include "verdict.h"

struct caller;
struct config;
struct event_base;
struct local_store;
struct metrics_shard;
struct route;
struct ratelimit;       /* opaque */
struct ratelimit_check; /* opaque: one pending decision */

enum ratelimit_verdict {
    RATELIMIT_PASS, /* forward now (or after delay_ms) */
    RATELIMIT_DENY, /* answer 'status' (429, 403 or 503) with 'body' */
};

struct ratelimit_outcome {
    enum ratelimit_verdict verdict;
    int status;                 /* DENY: 429 (or configured), 403, 503 */
    uint64_t delay_ms;          /* PASS: hold this long before forwarding */
    char *body;                 /* DENY: problem+json body; owned */
    enum verdict_reason reason; /* why: for logs and metrics */
    const char *limiter;        /* the deciding limiter's name, or NULL;
                                   borrowed from the config */
    const char *tier;           /* the deciding tier's label, or NULL */
    bool dry_run_denied;        /* a dry-run filter would have refused */
};

void ratelimit_outcome_deinit(struct ratelimit_outcome *o);

/*
 * Called once with the outcome (the callee owns it: deinit it). Never
 * called if the check was cancelled. It must not cancel another check:
 * the answer to one lease take decides many checks in a row.
 */
typedef void ratelimit_done_cb(struct ratelimit_outcome *o, void *arg);

/*
 * A worker's limiter runtime on 'base' (borrowed). Connects to Redis when
 * 'cfg' has a redis: section. 'store' (borrowed, shared by all workers)
 * holds local state. 'worker' numbers request ids. 'metrics' (borrowed,
 * may be NULL) receives Redis latencies and events.
 */
struct ratelimit *ratelimit_new(struct event_base *base,
                                const struct config *cfg,
                                struct local_store *store, unsigned worker,
                                struct metrics_shard *metrics);
/* Pending checks must have been cancelled or completed. NULL: no-op. */
void ratelimit_free(struct ratelimit *rl);

/* True when Redis is connected, or when no limiter of 'cfg' needs it. */
bool ratelimit_ready(const struct ratelimit *rl);

/*
 * Leases on hot keys (lease.h, lua/README.md "Leases"): ends those whose
 * time is up, giving their unused units back to Redis. Call it every few
 * hundred milliseconds: a lease ends at most that much after its
 * lifetime.
 */
void ratelimit_tick(struct ratelimit *rl);

/*
 * Ends every lease now and gives its units back (reload, drain). True
 * once nothing is held and no take or return awaits Redis: call it
 * again until then (or until the drain gives up; what is still out is
 * then counted as used).
 */
bool ratelimit_release(struct ratelimit *rl);

/* Moves the Redis client's event counters into the metrics. */
void ratelimit_publish(struct ratelimit *rl);

/*
 * The result label of an outcome, for metrics and the access log: that of
 * its reason (verdict_reason_name()); NULL when no limiter applied.
 */
const char *ratelimit_result_name(const struct ratelimit_outcome *o);

/*
 * Decides for a request to 'route' (in 'cfg', which must outlive the
 * check) by 'who' (read only during this call). 'instance' (the request
 * target, for problem bodies) must live until the callback. 'fields'
 * (borrowed, empty; an emptied list reuses its memory) receives the
 * outcome's fields for the response, just before the outcome is given:
 * it must live until the callback, or until the check is cancelled
 * (then nothing is written to it). When every filter can decide at once
 * (no Redis call), fills '*now' and 'fields' and returns NULL. Otherwise
 * returns a handle and calls 'cb' later, exactly once, within
 * redis.timeout, unless cancelled. With 'may_hold' false (the caller
 * holds as many requests as it may) delay-mode limiters decide as if
 * their max_delay were 0: a request that would wait is refused, as one
 * that would wait past max_delay is, and nothing is reserved for it.
 */
struct ratelimit_check *
ratelimit_check(struct ratelimit *rl, const struct config *cfg,
                const struct route *route, const struct caller *who,
                bool may_hold, const char *instance, struct headers *fields,
                ratelimit_done_cb *cb, void *arg,
                struct ratelimit_outcome *now);

/* The caller has gone: 'cb' will not run. */
void ratelimit_cancel(struct ratelimit_check *c);

/* True if 'route' has at least one RequestRateLimiter filter. */
bool ratelimit_route_limited(const struct route *route);

#endif
