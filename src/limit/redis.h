/*
 * redis.h - the gateway's Redis client: hiredis async on a worker's
 * event_base, for running the rate-limit scripts. The only module that
 * includes hiredis. One client per worker thread, never shared; does I/O.
 *
 * hiredis 0.14 has no connect or command timeout: both run on event
 * timers here. A command past its timeout is answered REDIS_CALL_TIMEOUT at
 * once; the late reply, when it comes, is swallowed. A lost connection is
 * re-opened from a timer with exponential backoff and jitter, then AUTH,
 * SELECT and SCRIPT LOAD run again. Scripts run by EVALSHA; a NOSCRIPT
 * reply (after a restart, a failover or SCRIPT FLUSH) is answered by
 * resending the script with EVAL, which also caches it, so no caller ever
 * sees NOSCRIPT.
 *
 * With Sentinel (conf->sentinel_master), every attempt first asks the
 * sentinels for the primary's address (sentinel.h), and the handshake
 * starts with ROLE: a server that does not say "master" is dropped and
 * the attempt retried with backoff. A '+switch-master' from the sentinel
 * the client subscribes to, a READONLY reply or a lost connection make it
 * ask again; calls meanwhile get a failure status (DOWN, TIMEOUT, or
 * ERROR for the READONLY itself), never later than the timeout.
 *
 * Calls of a script that takes batches (lua_script.batch) made in one
 * turn of the loop are queued and go as one command of up to 16 calls
 * (lua/README.md, "Batches"), when the batch fills or at the end of the
 * turn; each keeps its own deadline, cancellation and answer. Queued
 * calls count towards max_in_flight.
 *
 * With Redis Cluster (conf->cluster_nodes), the client is a front for the
 * cluster client of rcluster.h, which routes each call by the slot of its
 * first key to a client of this module per primary (made with
 * redis_client_node_new()). The API below is the same in every mode.
 */
#ifndef SLUICE_REDIS_H
#define SLUICE_REDIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cluster_map;
struct event_base;
struct lua_script;
struct redis_conf;
struct redis_client; /* opaque */
struct redis_call;   /* opaque: one pending script call */

enum redis_status {
    REDIS_CALL_OK,         /* the script answered: 'ints' holds its array */
    REDIS_CALL_TIMEOUT,    /* no answer within redis.timeout */
    REDIS_CALL_DOWN,       /* not connected (connecting, or reconnecting) */
    REDIS_CALL_ERROR,      /* an error reply, or a reply of the wrong shape */
    REDIS_CALL_OVERLOADED, /* too many commands already in flight */
};

#define REDIS_MAX_INTS 8

/*
 * The outcome of one script call. 'ints' are the integers of the array
 * the script returned (at most REDIS_MAX_INTS; REDIS_CALL_ERROR if it returned
 * anything else); 'error' is the error text for REDIS_CALL_ERROR, else NULL.
 * Both are valid only during the callback.
 */
typedef void redis_script_cb(enum redis_status status, const long long *ints,
                             size_t nints, const char *error, void *arg);

/* Counters for /metrics; read from the client's own thread. */
struct redis_stats {
    uint64_t calls;      /* script calls started */
    uint64_t errors;     /* REDIS_CALL_ERROR answers */
    uint64_t timeouts;   /* REDIS_CALL_TIMEOUT answers */
    uint64_t down;       /* REDIS_CALL_DOWN and REDIS_CALL_OVERLOADED answers */
    uint64_t reconnects; /* connections re-established */
    uint64_t noscript;   /* NOSCRIPT replies recovered by EVAL */
    uint64_t batches;    /* commands that carried several calls */
    uint64_t failovers;  /* with Sentinel: the primary's address changed;
                            with Cluster: slots left a lost primary */
    /* Redis Cluster only: */
    uint64_t moved;       /* MOVED redirects followed */
    uint64_t ask;         /* ASK redirects followed */
    uint64_t tryagain;    /* TRYAGAIN replies retried */
    uint64_t clusterdown; /* CLUSTERDOWN replies retried */
    uint64_t nodes_up;    /* a gauge: primaries of the slot map that this
                             client is connected to now */
    uint64_t nodes_down;  /* a gauge: primaries of the slot map that it
                             is not connected to now */
};

/*
 * Creates a client on 'base' (borrowed) for 'conf' (copied) and starts
 * connecting; failures are retried forever with backoff. 'scripts' (an
 * array of 'nscripts', borrowed, must outlive the client) are the scripts
 * it may run. 'max_in_flight' caps commands awaiting a reply.
 */
struct redis_client *redis_client_new(struct event_base *base,
                                      const struct redis_conf *conf,
                                      const struct lua_script *scripts,
                                      size_t nscripts, size_t max_in_flight);
/*
 * Disconnects and frees. Calls still pending get their callback with
 * REDIS_CALL_DOWN first. NULL is a no-op.
 */
void redis_client_free(struct redis_client *c);

/* True while connected, authenticated and with the database selected. */
bool redis_client_ready(const struct redis_client *c);

const struct redis_stats *redis_client_stats(const struct redis_client *c);

/*
 * Runs 'script' (one of the client's) with 'keys' and 'args' (borrowed;
 * copied before the call returns). 'cb' runs exactly once, always later
 * from the event loop, never inside this call: with the result, or with a
 * failure status no later than the configured timeout. Returns a handle
 * for redis_call_cancel(), valid until the callback has run.
 */
struct redis_call *redis_client_eval(struct redis_client *c,
                                     const struct lua_script *script,
                                     const char *const *keys, size_t nkeys,
                                     const char *const *args, size_t nargs,
                                     redis_script_cb *cb, void *arg);

/*
 * The words of one script call: its KEYS, then its ARGV, each a
 * NUL-terminated string. A caller that knows their lengths passes them,
 * which spares measuring each word.
 */
struct redis_words {
    const char *const *keys; /* KEYS[1..nkeys]; borrowed */
    const size_t *key_lens;  /* the length of each key, or NULL;
                                borrowed */
    size_t nkeys;            /* of keys */
    const char *const *args; /* ARGV[1..nargs]; borrowed */
    const size_t *arg_lens;  /* the length of each arg, or NULL;
                                borrowed */
    size_t nargs;            /* of args */
};

/*
 * redis_client_eval() of the words 'w' (borrowed; copied before the call
 * returns), answered within 'timeout_ms' instead of the configured
 * timeout (never more than it): for a caller that has already spent part
 * of its decision's time.
 */
struct redis_call *redis_client_eval_within(struct redis_client *c,
                                            const struct lua_script *script,
                                            const struct redis_words *w,
                                            uint64_t timeout_ms,
                                            redis_script_cb *cb, void *arg);

/*
 * The caller has gone: 'cb' will not run. Whatever hiredis still owes
 * for the call is received and dropped. Must not be called once the
 * callback has run: its record may by then be another call's.
 */
void redis_call_cancel(struct redis_call *call);

/*
 * Cluster nodes. The cluster client (rcluster.h) keeps one client of this
 * module per node, made and driven by what follows; nothing else uses it.
 */

/*
 * A client of the one server at 'host':'port' (borrowed), with the
 * user, password and timeout of 'conf' (copied); its url, sentinel and
 * cluster settings are ignored.
 */
struct redis_client *redis_client_node_new(struct event_base *base,
                                           const struct redis_conf *conf,
                                           const char *host, uint16_t port,
                                           const struct lua_script *scripts,
                                           size_t nscripts,
                                           size_t max_in_flight);

/* True while the client's first connection is being made: it has been
 * neither ready nor failed yet. */
bool redis_client_first_attempt(const struct redis_client *c);

/*
 * redis_client_eval() with a timeout of 'timeout_ms' instead of the
 * configured one, and, when 'asking', ASKING sent just before the script
 * (and before its EVAL, should it be resent after NOSCRIPT).
 */
struct redis_call *redis_client_eval_node(struct redis_client *c,
                                          const struct lua_script *script,
                                          const char *const *keys, size_t nkeys,
                                          const char *const *args, size_t nargs,
                                          bool asking, uint64_t timeout_ms,
                                          redis_script_cb *cb, void *arg);

/*
 * The answer to redis_client_ask_map(): a new map the callee owns, or
 * NULL and a sentence saying why (borrowed for the call).
 */
typedef void redis_map_cb(struct cluster_map *map, const char *why, void *arg);

/*
 * Asks the server for the slot map (CLUSTER SLOTS). 'cb' runs exactly
 * once, from the loop, never inside this call, within the connect
 * timeout, unless the client is freed first; it may free the client.
 * Returns false, and 'cb' never runs, if the client is not ready or a
 * map is asked for already.
 */
bool redis_client_ask_map(struct redis_client *c, redis_map_cb *cb, void *arg);

#endif
