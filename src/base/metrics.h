/*
 * metrics.h - the gateway's counters, gauges and histograms, and their
 * Prometheus text exposition. Each worker thread records into its own
 * shard with relaxed atomics and takes no lock shared with other workers;
 * a scrape sums the shards. No I/O.
 *
 * Label values come from the config (route ids, limiter names, tier
 * labels) or from small fixed sets (method class, status code, result):
 * never a client's address, user id or any other unbounded value.
 */
#ifndef SLUICE_METRICS_H
#define SLUICE_METRICS_H

#include <stddef.h>
#include <stdint.h>

/* Every metric the gateway exports; the table in metrics.c names them. */
enum metric_id {
    /* counter {route, method, status}: requests answered */
    M_REQUESTS,
    /* counter {route, limiter, tier, result}: rate-limit decisions;
       result: allowed, denied, delayed, dry_run_denied, fallback_allowed,
       fallback_denied, policy_allowed, policy_denied, no_key */
    M_RATELIMIT_DECISIONS,
    /* histogram {route}: seconds from the upstream request to its
       response headers */
    M_UPSTREAM_SECONDS,
    /* histogram {}: seconds a Redis script call took */
    M_REDIS_SECONDS,
    /* counter {kind}: Redis trouble; kind: error, timeout, down,
       overloaded, reconnect, noscript, failover, and with Redis Cluster
       moved, ask, tryagain, clusterdown */
    M_REDIS_EVENTS,
    /* gauge {state}: Redis Cluster primaries of the slot map by the state
       of each worker's connection (up, down), summed over workers */
    M_REDIS_NODES,
    /* counter {}: refusals answered from the over-limit cache, without
       a Redis call */
    M_DENY_CACHE_HITS,
    /* counter {}: requests admitted from a worker's lease on a hot key,
       without a Redis call */
    M_LEASE_HITS,
    /* counter {event}: units of leases; event: taken (granted by Redis,
       the taking request's own cost included), returned (given back
       unused), lost (a return that failed: counted as used) */
    M_LEASE_UNITS,
    /* counter {}: tokens found valid in the token cache (identity.jwt),
       without a signature check */
    M_JWT_CACHE_HITS,
    /* counter {result}: tokens looked at (identity.jwt); result: valid,
       invalid, missing */
    M_JWT_TOKENS,
    /* gauge {}: client connections open */
    M_CONNECTIONS,
    /* gauge {}: requests in flight */
    M_IN_FLIGHT,
    /* gauge {}: requests held in delay mode */
    M_HELD,
    /* counter {result}: config reloads; result: ok, error */
    M_RELOADS,
    /* gauge {}: generation of the config in force (1 at start) */
    M_CONFIG_GENERATION,
    /* TLS handshakes, by side (client, upstream) and result */
    M_TLS_HANDSHAKES,
    M_COUNT
};

#define METRICS_MAX_LABELS 4

struct metrics;       /* opaque: the process-wide registry */
struct metrics_shard; /* opaque: one worker's part */

struct metrics *metrics_new(void);
/* Frees the registry and every shard. NULL is a no-op. */
void metrics_free(struct metrics *m);

/* A shard for one thread; owned by the registry. Thread-safe. */
struct metrics_shard *metrics_shard(struct metrics *m);

/*
 * Adds 'by' to the counter or gauge 'id' with label values 'labels' (as
 * many as the metric has, in the order of the table; borrowed, copied
 * the first time a combination is seen). Only the shard's thread may
 * call this. Gauges may go down: pass a negative 'by'.
 */
void metrics_add(struct metrics_shard *s, enum metric_id id,
                 const char *const *labels, int64_t by);

/* Records one observation of 'seconds' in histogram 'id'. */
void metrics_observe(struct metrics_shard *s, enum metric_id id,
                     const char *const *labels, double seconds);

/* Sets a process-wide gauge (no labels), from any thread. */
void metrics_set(struct metrics *m, enum metric_id id, int64_t value);

/*
 * The Prometheus text exposition format (version 0.0.4) of everything
 * recorded so far, every metric with HELP and TYPE lines even before it
 * has a sample. A new string the caller frees. Thread-safe.
 */
char *metrics_render(struct metrics *m);

/* "GET" etc. for the standard methods, else "OTHER". */
const char *metrics_method_class(const char *method);

#endif
