/*
 * limit.h - what a rate limiter is: its algorithm, its rules, its mode,
 * and the record every decision returns. Plain data shared by the config,
 * the Lua scripts' caller, and the in-process twins. Pure: no I/O.
 */
#ifndef SLUICE_LIMIT_H
#define SLUICE_LIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum limit_algorithm {
    LIMIT_FIXED_WINDOW,
    LIMIT_SLIDING_WINDOW,         /* exact log in a sorted set */
    LIMIT_SLIDING_WINDOW_COUNTER, /* two weighted counters */
    LIMIT_TOKEN_BUCKET,
    LIMIT_LEAKY_BUCKET,
    LIMIT_GCRA,
};

#define LIMIT_ALGORITHM_COUNT 6
#define LIMIT_MAX_RULES 8

/*
 * One rule. Window algorithms admit at most 'limit' units per 'window_ms'.
 * Bucket algorithms (token_bucket, leaky_bucket, gcra) refill or leak
 * 'limit' units per 'window_ms' (the rate "10/s" is limit 10, window 1000)
 * and hold at most 'burst' units.
 */
struct limit_rule {
    uint64_t limit;     /* units per window; > 0 */
    uint64_t window_ms; /* > 0 */
    uint64_t burst;     /* buckets: capacity, >= 1; windows: = limit */
};

struct limiter_def {
    char *name;                     /* as in gateway.yaml; owned */
    char tag[9];                    /* 8 hex digits hashing the algorithm,
                                       rules, mode and state layout: part
                                       of every key, so state written
                                       under other rules or in another
                                       layout is never read under these */
    enum limit_algorithm algorithm; /* which script / twin */
    struct limit_rule rules[LIMIT_MAX_RULES]; /* all must admit */
    size_t nrules;                            /* 1..LIMIT_MAX_RULES */
    bool delay;                               /* mode: delay (buckets only) */
    uint64_t max_delay_ms;                    /* delay mode: longest hold */
    unsigned lease;  /* lease: most units a worker takes from Redis
                        at once (lease.h); 0: no leases */
    bool refuse_all; /* Spring Cloud Gateway's burstCapacity 0: every
                        request is refused without asking the store;
                        rules[0].burst is then 0 */
    char *policy;    /* its RateLimit-Policy items (rlheaders_policy()),
                        built once when the config is loaded; owned by
                        whoever owns 'name'; NULL: built for each use */
};

/* The largest lease: gateway.yaml refuses more. */
#define LIMIT_LEASE_MAX 100000

/* The record of one decision; identical from Lua and from C. */
struct limit_result {
    bool allowed;            /* all rules admitted 'cost' */
    int64_t remaining;       /* units left under the tightest rule, >= 0 */
    uint64_t retry_after_ms; /* denied: earliest retry of the same cost
                                can pass; 0 when allowed */
    uint64_t reset_ms;       /* until every rule is back to full */
    uint64_t delay_ms;       /* delay mode: hold this long, then forward */
    unsigned rule;           /* 0-based: denied, the rule that decided
                                (largest retry); allowed, the tightest */
};

/* What identifies a caller in a key: "ip", "user", "header:X-Api-Key"... */
enum key_kind {
    KEY_IP,     /* the client address (IPv6 grouped by prefix) */
    KEY_USER,   /* identity.user_header, from a trusted proxy only */
    KEY_ROLE,   /* identity.role_header, from a trusted proxy only */
    KEY_HEADER, /* a request header */
    KEY_QUERY,  /* a query parameter */
    KEY_COOKIE, /* a cookie */
    KEY_CLAIM,  /* a claim of the verified token (identity.jwt) */
    KEY_ROUTE,  /* nothing: one budget for everyone in the scope */
};

#define KEY_MAX_PARTS 4

struct key_part {
    enum key_kind kind;
    char *name; /* header, query, cookie or claim name, else NULL;
                   owned */
};

/* A key as written: parts joined with '+', e.g. "ip+header:X-Api-Key". */
struct key_spec {
    struct key_part parts[KEY_MAX_PARTS];
    size_t nparts; /* 1..KEY_MAX_PARTS */
    char *text;    /* as written, normalised; owned */
};

/* when: { claim: { NAME: VALUE } }: the claim must be that string. */
struct claim_match {
    char *name;  /* owned */
    char *value; /* owned */
};

/* One tier of a RequestRateLimiter: who it is for and how they are keyed. */
struct tier {
    char *when_role;                 /* applies only to callers with this
                                        role; NULL: to everyone; owned */
    struct claim_match *when_claims; /* and only when every one of these
                                        holds; owned */
    size_t nwhen_claims;
    struct key_spec key;
    const struct limiter_def *limiter; /* NULL: "none", never limited;
                                          borrowed from the config */
    char *label; /* for logs and metrics: "0", "1"... or the role;
                    owned */
};

enum redis_failure {
    REDIS_FAILURE_LOCAL, /* decide with the in-process twin (default) */
    REDIS_FAILURE_ALLOW, /* let the request through */
    REDIS_FAILURE_DENY,  /* answer 503 */
};

/* "local", "allow" or "deny": the name gateway.yaml uses; static. */
const char *limit_redis_failure_name(enum redis_failure f);

enum rl_headers {
    RL_HEADERS_BOTH, /* IETF RateLimit-* and legacy X-RateLimit-* */
    RL_HEADERS_IETF,
    RL_HEADERS_LEGACY,
    RL_HEADERS_NONE,
    RL_HEADERS_SCG, /* Spring Cloud Gateway's X-RateLimit-Remaining,
                       -Burst-Capacity, -Replenish-Rate,
                       -Requested-Tokens */
};

/* The arguments of one RequestRateLimiter filter. */
struct rate_limit_conf {
    struct tier *tiers; /* tried in order; owned */
    size_t ntiers;
    uint64_t cost;                     /* units per request; default 1 */
    enum redis_failure on_redis_error; /* default local */
    bool dry_run;                      /* decide and count, never refuse */
    bool empty_key_allow;              /* no tier applies: allow (else
                                          403, the default) */
    char *scope;                       /* the route id, or a shared scope
                                          name; owned */
    bool local;                        /* backend: local (the default when
                                          there is no redis: section) */
    enum rl_headers headers;           /* default both */
    int deny_status;                   /* default 429 */
    int empty_key_status;              /* no key and empty_key deny:
                                          0 stands for 403 */
    struct limiter_def *derived;       /* the limiter built from Spring
                                          Cloud Gateway's
                                          redis-rate-limiter args, that
                                          tiers[0] uses; or NULL; owned */
};

void rate_limit_conf_free(struct rate_limit_conf *rl); /* NULL: no-op */

/* "token_bucket" and so on; NULL for an unknown value. */
const char *limit_algorithm_name(enum limit_algorithm a);
/* -1 if 'name' names no algorithm. */
int limit_algorithm_parse(const char *name, enum limit_algorithm *out);
/* True for token_bucket, leaky_bucket and gcra, the ones with a burst
 * and a delay mode. */
bool limit_algorithm_is_bucket(enum limit_algorithm a);

#endif
