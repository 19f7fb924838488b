/*
 * rcluster.c - the Redis Cluster client (design in rcluster.h).
 *
 * Lifetimes. A call record lives until its caller is answered (from the
 * record's own event, never from inside a node client's callback chain
 * that could still touch it) or cancels. The attempt on the wire, if any,
 * is a node client's call: cancelled when the record goes, and answered
 * REDIS_CALL_DOWN by the node client when that is freed. Node clients are
 * freed only where no node client is running a callback of its own that
 * would touch it afterwards: when a map is installed (from the map
 * event, which redis.c delivers last thing) and in rcluster_free().
 */
#include "rcluster.h"

#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <unistd.h>

#include <event2/event.h>

#include "backoff.h"
#include "clock.h"
#include "cluster.h"
#include "config.h"
#include "log.h"
#include "xmalloc.h"

/* Between refreshes while all is well, before jitter (up to as much
 * again). */
#define REFRESH_MS 5000
/* Between refreshes while a slot has no connected primary, or no map. */
#define REFRESH_DEGRADED_MS 250
/* Between looks for a connected seed before the first map. */
#define REFRESH_FIRST_MS 50
/* The least time between two refreshes asked for by events. */
#define REFRESH_MIN_GAP_MS 100
/* The pause before resending after TRYAGAIN and the like, doubled each
 * time up to RETRY_MAX_MS, then jittered (half plus up to as much
 * again). */
#define RETRY_MIN_MS 5
#define RETRY_MAX_MS 100

/* A node the client talks to: a primary of the map, or a seed while there
 * is no map to say which are primaries. */
struct rnode {
    char *host;                  /* owned */
    uint16_t port;               /* TCP port */
    struct redis_client *client; /* owned */
    bool in_map;                 /* a primary of the current map */
};

struct rcluster_call {
    TAILQ_ENTRY(rcluster_call) link; /* in the client's list */
    struct rcluster *cl;             /* borrowed */
    const struct lua_script *script; /* borrowed (the caller's) */
    char **words;                    /* keys, then args; the strings in
                                        the same block; owned */
    size_t nkeys;                    /* first words */
    size_t nargs;                    /* the rest */
    unsigned slot;                   /* of the first key */
    redis_script_cb *cb;             /* the caller's */
    void *arg;                       /* the caller's; borrowed */
    struct event *ev;                /* the deadline, then the delivery
                                        of the answer; owned */
    struct event *retry;             /* the next attempt: NULL until the
                                        first pause; owned */
    int64_t deadline_ms;             /* monotonic */
    uint64_t backoff_ms;             /* the next pause before a resend */
    unsigned redirects;              /* MOVED and ASK followed */
    struct redis_call *sub;          /* the attempt on the wire, or NULL */
    struct rnode *sent_to;           /* its node, while 'sub' is set */
    bool asking;                     /* the next attempt goes to 'ask',
                                        after ASKING */
    struct cluster_redirect ask;     /* the target of the last ASK */
    bool finished;                   /* answered or cancelled */
    bool has_result;                 /* status..error hold the answer */
    enum redis_status status;        /* the answer, once has_result */
    long long ints[REDIS_MAX_INTS];  /* REDIS_CALL_OK: the script's array */
    size_t nints;                    /* of ints */
    char *error;                     /* REDIS_CALL_ERROR: the text; owned */
};

TAILQ_HEAD(rcall_list, rcluster_call);

struct rcluster {
    struct event_base *base;          /* borrowed */
    struct redis_conf node_conf;      /* what node clients are made with:
                                         user, password, timeout; its
                                         strings owned */
    struct redis_node *seeds;         /* redis.cluster.nodes; owned */
    size_t nseeds;                    /* of seeds */
    const struct lua_script *scripts; /* borrowed */
    size_t nscripts;                  /* of scripts */
    size_t max_in_flight;             /* per node client */
    struct cluster_map *map;          /* or NULL before the first; owned */
    struct rnode **by_index;          /* per node index of 'map', its
                                         rnode; owned array */
    size_t by_index_cap;              /* allocated in by_index */
    struct rnode **nodes;             /* every node; owned */
    size_t nnodes;                    /* in use */
    size_t nodes_cap;                 /* allocated */
    size_t next_ask;                  /* where the next refresh starts
                                         looking for a connected node */
    bool asking_map;                  /* a refresh awaits its answer */
    uint64_t moved_gen;               /* MOVED applied to the map */
    uint64_t asked_gen;               /* moved_gen when the refresh
                                         awaited went out */
    bool map_failing;                 /* a failed refresh was logged */
    size_t uncovered_told;            /* slots without a primary last
                                         warned of: warned again only
                                         when the count changes */
    int64_t last_refresh_ms;          /* when the refresh timer last
                                         fired */
    int64_t refresh_due_ms;           /* when it fires next, while
                                         pending */
    struct event *refresh_timer;      /* the next refresh; owned */
    uint64_t rng;                     /* xorshift state for jitter */
    struct rcall_list calls;          /* every live record */
    struct redis_stats stats;         /* for /metrics */
    uint64_t gone_reconnects;         /* of node clients closed */
    uint64_t gone_noscript;           /* likewise */
    bool freeing;                     /* in rcluster_free() */
};

static void attempt(struct rcluster_call *call);
static void refresh_soon(struct rcluster *cl);

/*
 * Nodes.
 */

static struct rnode *
node_find(const struct rcluster *cl, const char *host, uint16_t port)
{
    for (size_t i = 0; i < cl->nnodes; i++) {
        struct rnode *n = cl->nodes[i];

        if (n->port == port && strcmp(n->host, host) == 0) {
            return n;
        }
    }
    return NULL;
}

/* The node host:port, made (and its connection started) if new. */
static struct rnode *
node_get(struct rcluster *cl, const char *host, uint16_t port)
{
    struct rnode *n = node_find(cl, host, port);

    if (n != NULL) {
        return n;
    }
    n = xcalloc(1, sizeof(*n));
    n->host = xstrdup(host);
    n->port = port;
    n->client =
        redis_client_node_new(cl->base, &cl->node_conf, host, port, cl->scripts,
                              cl->nscripts, cl->max_in_flight);
    cl->nodes =
        xgrow(cl->nodes, &cl->nodes_cap, cl->nnodes + 1, sizeof(*cl->nodes));
    cl->nodes[cl->nnodes++] = n;
    return n;
}

/* Closes node 'i': its calls on the wire are answered REDIS_CALL_DOWN
 * (from inside this, by the node client). */
static void
node_close(struct rcluster *cl, size_t i)
{
    struct rnode *n = cl->nodes[i];
    const struct redis_stats *st = redis_client_stats(n->client);

    cl->gone_reconnects += st->reconnects;
    cl->gone_noscript += st->noscript;
    cl->nodes[i] = cl->nodes[--cl->nnodes];
    redis_client_free(n->client);
    free(n->host);
    free(n);
}

/* The seeds, as nodes, so that there is someone to ask for the map. */
static void
add_seeds(struct rcluster *cl)
{
    for (size_t i = 0; i < cl->nseeds; i++) {
        node_get(cl, cl->seeds[i].host, cl->seeds[i].port);
    }
}

/* Index 'idx' of the map now names its node's rnode. */
static struct rnode *
index_node(struct rcluster *cl, int idx)
{
    const struct cluster_node *cn = cluster_map_node_at(cl->map, (size_t)idx);
    size_t n = cluster_map_nnodes(cl->map);
    struct rnode *node;

    if (n > cl->by_index_cap) {
        size_t old = cl->by_index_cap;

        cl->by_index =
            xgrow(cl->by_index, &cl->by_index_cap, n, sizeof(*cl->by_index));
        memset(cl->by_index + old, 0,
               (cl->by_index_cap - old) * sizeof(*cl->by_index));
    }
    node = node_get(cl, cn->host, cn->port);
    node->in_map = true;
    cl->by_index[idx] = node;
    return node;
}

/* The primary serving 'slot', or NULL if none does (or no map). */
static struct rnode *
slot_node(const struct rcluster *cl, unsigned slot)
{
    int idx = cl->map != NULL ? cluster_map_node(cl->map, slot) : -1;

    return idx >= 0 ? cl->by_index[idx] : NULL;
}

/* True if the map covers every slot and each of its primaries is
 * connected. */
static bool
healthy(const struct rcluster *cl)
{
    unsigned first, last;

    if (cl->map == NULL || cluster_map_uncovered(cl->map, &first, &last) > 0) {
        return false;
    }
    for (size_t i = 0; i < cluster_map_nnodes(cl->map); i++) {
        if (cl->by_index[i] != NULL &&
            !redis_client_ready(cl->by_index[i]->client)) {
            return false;
        }
    }
    return true;
}

/*
 * The map.
 */

static void
schedule_refresh(struct rcluster *cl, uint64_t delay_ms)
{
    struct timeval tv = clock_tv(delay_ms);

    evtimer_del(cl->refresh_timer);
    evtimer_add(cl->refresh_timer, &tv);
    cl->refresh_due_ms = clock_mono_ms() + (int64_t)delay_ms;
}

/* The next periodic refresh: soon while degraded. */
static void
schedule_next_refresh(struct rcluster *cl)
{
    if (healthy(cl)) {
        schedule_refresh(cl,
                         REFRESH_MS + backoff_random(&cl->rng) % REFRESH_MS);
    } else {
        schedule_refresh(cl, REFRESH_DEGRADED_MS + backoff_random(&cl->rng) %
                                                       REFRESH_DEGRADED_MS);
    }
}

/* Something suggests the map is stale: refresh as soon as allowed. */
static void
refresh_soon(struct rcluster *cl)
{
    int64_t now = clock_mono_ms();
    int64_t since = now - cl->last_refresh_ms;
    uint64_t delay = since >= REFRESH_MIN_GAP_MS
                         ? 0
                         : (uint64_t)(REFRESH_MIN_GAP_MS - since);

    if (cl->asking_map || cl->freeing) {
        return; /* the answer on its way may tell already */
    }
    if (evtimer_pending(cl->refresh_timer, NULL) &&
        cl->refresh_due_ms <= now + (int64_t)delay) {
        return; /* due sooner already */
    }
    schedule_refresh(cl, delay);
}

/* Did slots leave a primary that is not connected (a failover)? */
static bool
primary_replaced(const struct rcluster *cl, const struct cluster_map *next)
{
    for (unsigned s = 0; s < CLUSTER_SLOTS; s++) {
        int was = cluster_map_node(cl->map, s);
        int now = cluster_map_node(next, s);
        const struct cluster_node *a, *b;

        if (was < 0 || now < 0 || cl->by_index[was] == NULL ||
            redis_client_ready(cl->by_index[was]->client)) {
            continue;
        }
        a = cluster_map_node_at(cl->map, (size_t)was);
        b = cluster_map_node_at(next, (size_t)now);
        if (a->port != b->port || strcmp(a->host, b->host) != 0) {
            return true;
        }
    }
    return false;
}

/* True while a call of 'cl' is on the wire to 'n', or is to be resent
 * there after an ASK: closing 'n' would answer it REDIS_CALL_DOWN. */
static bool
node_busy(const struct rcluster *cl, const struct rnode *n)
{
    const struct rcluster_call *call;

    TAILQ_FOREACH (call, &cl->calls, link) {
        if (call->finished || call->has_result) {
            continue;
        }
        if (call->sub != NULL && call->sent_to == n) {
            return true;
        }
        if (call->asking && call->ask.port == n->port &&
            strcmp(call->ask.host, n->host) == 0) {
            return true;
        }
    }
    return false;
}

/* 'map' (owned now) replaces the client's; nodes that are no primary of
 * it are closed, unless busy (an ASK target while a slot is imported by
 * a primary that holds none yet), or unless no primary of it is
 * connected: a seed closed then would be opened again for the next
 * refresh, every refresh, for as long as the primaries are out of
 * reach. Those go at a later install. */
static void
install(struct rcluster *cl, struct cluster_map *map)
{
    size_t n = cluster_map_nnodes(map);
    unsigned first, last;
    size_t uncovered = cluster_map_uncovered(map, &first, &last);
    bool primary_ready = false;

    if (uncovered == CLUSTER_SLOTS && cl->map != NULL) {
        /* A node that knows no slots (just started, or cut off) says
         * nothing about the cluster. */
        cluster_map_free(map);
        return;
    }
    if (cl->map != NULL && primary_replaced(cl, map)) {
        cl->stats.failovers++;
        log_info("redis: cluster: a lost primary's slots have a new "
                 "primary");
    }
    if (uncovered > 0 && uncovered != cl->uncovered_told) {
        log_warn("redis: cluster: %zu slots have no primary (first %u-%u)",
                 uncovered, first, last);
    } else if (uncovered == 0 && cl->uncovered_told > 0) {
        log_info("redis: cluster: every slot has a primary again");
    }
    cl->uncovered_told = uncovered;
    cluster_map_free(cl->map);
    cl->map = map;
    for (size_t i = 0; i < cl->nnodes; i++) {
        cl->nodes[i]->in_map = false;
    }
    if (cl->by_index != NULL) {
        memset(cl->by_index, 0, cl->by_index_cap * sizeof(*cl->by_index));
    }
    for (size_t i = 0; i < n; i++) {
        primary_ready |= redis_client_ready(index_node(cl, (int)i)->client);
    }
    for (size_t i = cl->nnodes; primary_ready && i-- > 0;) {
        if (!cl->nodes[i]->in_map && !node_busy(cl, cl->nodes[i])) {
            node_close(cl, i);
        }
    }
}

static void
on_map(struct cluster_map *map, const char *why, void *arg)
{
    struct rcluster *cl = arg;

    cl->asking_map = false;
    if (map == NULL) {
        log_msg(cl->map_failing ? LOG_DEBUG : LOG_WARN,
                "redis: cluster: no slot map: %s", why);
        cl->map_failing = true;
    } else {
        if (cl->map_failing || cl->map == NULL) {
            log_info("redis: cluster: slot map of %zu primaries",
                     cluster_map_nnodes(map));
        }
        cl->map_failing = false;
        install(cl, map);
    }
    schedule_next_refresh(cl);
    if (map != NULL && cl->moved_gen != cl->asked_gen) {
        /* A MOVED came after the question: the answer may be older than
         * what it taught, and has just undone it. */
        refresh_soon(cl);
    }
}

/* Asks the next connected node for the map. */
static void
on_refresh_timer(evutil_socket_t fd, short what, void *arg)
{
    struct rcluster *cl = arg;

    (void)fd;
    (void)what;
    /* Whether or not a question goes out: with no node connected,
     * events must not fire this more often than REFRESH_MIN_GAP_MS. */
    cl->last_refresh_ms = clock_mono_ms();
    if (cl->asking_map) {
        return;
    }
    for (size_t k = 0; k < cl->nnodes; k++) {
        size_t i = (cl->next_ask + k) % cl->nnodes;

        if (redis_client_ask_map(cl->nodes[i]->client, on_map, cl)) {
            cl->next_ask = i + 1;
            cl->asking_map = true;
            cl->asked_gen = cl->moved_gen;
            return;
        }
    }
    /* No node is connected: the seeds may know better than a map whose
     * primaries are all gone. */
    add_seeds(cl);
    schedule_refresh(cl,
                     cl->map == NULL ? REFRESH_FIRST_MS : REFRESH_DEGRADED_MS);
}

/*
 * Calls.
 */

static void
call_free(struct rcluster_call *call)
{
    TAILQ_REMOVE(&call->cl->calls, call, link);
    event_free(call->ev);
    if (call->retry != NULL) {
        event_free(call->retry);
    }
    free(call->words);
    free(call->error);
    free(call);
}

/* Records the answer; the caller gets it from the event loop. */
static void
call_answer(struct rcluster_call *call, enum redis_status status,
            const long long *ints, size_t nints, const char *error)
{
    struct redis_stats *st = &call->cl->stats;

    if (call->has_result) {
        return;
    }
    call->has_result = true;
    call->status = status;
    if (status == REDIS_CALL_OK) {
        memcpy(call->ints, ints, nints * sizeof(ints[0]));
        call->nints = nints;
    } else if (status == REDIS_CALL_ERROR) {
        call->error = xstrdup(error != NULL ? error : "error");
        st->errors++;
    } else if (status == REDIS_CALL_DOWN || status == REDIS_CALL_OVERLOADED) {
        st->down++;
    } else if (status == REDIS_CALL_TIMEOUT) {
        st->timeouts++;
    }
    if (call->retry != NULL) {
        evtimer_del(call->retry);
    }
    evtimer_del(call->ev);
    event_active(call->ev, EV_TIMEOUT, 1);
}

/* Drops the attempt on the wire, if any. */
static void
drop_attempt(struct rcluster_call *call)
{
    if (call->sub != NULL) {
        redis_call_cancel(call->sub);
        call->sub = NULL;
        call->sent_to = NULL;
    }
}

/* The deadline passed (no answer yet), or the answer is ready. */
static void
on_call_event(evutil_socket_t fd, short what, void *arg)
{
    struct rcluster_call *call = arg;
    redis_script_cb *cb = call->cb;
    void *cb_arg = call->arg;
    long long ints[REDIS_MAX_INTS];
    size_t nints;
    enum redis_status status;
    char *error;

    (void)fd;
    (void)what;
    if (!call->has_result) {
        drop_attempt(call);
        call_answer(call, REDIS_CALL_TIMEOUT, NULL, 0, NULL);
        evtimer_del(call->ev); /* delivered now, not on the next turn */
    }
    status = call->status;
    nints = call->nints;
    memcpy(ints, call->ints, nints * sizeof(ints[0]));
    error = call->error;
    call->error = NULL;
    call->finished = true;
    call_free(call);
    cb(status, nints > 0 ? ints : NULL, nints,
       status == REDIS_CALL_ERROR ? error : NULL, cb_arg);
    free(error);
}

static void
on_retry(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    attempt(arg);
}

/* Attempts again after a jittered pause (backoff.h), if that ends before
 * the deadline; if not, answers REDIS_CALL_TIMEOUT now rather than wait
 * for a deadline that no attempt can beat. */
static void
retry_later(struct rcluster_call *call)
{
    int64_t left = call->deadline_ms - clock_mono_ms();
    uint64_t pause = backoff_jitter(call->backoff_ms, &call->cl->rng);
    struct timeval tv;

    if ((int64_t)pause >= left) {
        call_answer(call, REDIS_CALL_TIMEOUT, NULL, 0, NULL);
        return;
    }
    tv = clock_tv(pause);
    if (call->retry == NULL) {
        call->retry = evtimer_new(call->cl->base, on_retry, call);
    }
    evtimer_add(call->retry, &tv);
    call->backoff_ms = backoff_double(call->backoff_ms, RETRY_MAX_MS);
}

static void on_attempt_reply(enum redis_status status, const long long *ints,
                             size_t nints, const char *error, void *arg);

static void
attempt(struct rcluster_call *call)
{
    struct rcluster *cl = call->cl;
    int64_t left = call->deadline_ms - clock_mono_ms();
    struct rnode *node;

    if (left <= 0) {
        return; /* the deadline event is due */
    }
    node = call->asking ? node_get(cl, call->ask.host, call->ask.port)
                        : slot_node(cl, call->slot);
    if (node == NULL) {
        refresh_soon(cl);
        call_answer(call, REDIS_CALL_DOWN, NULL, 0, NULL);
        return;
    }
    if (!redis_client_ready(node->client)) {
        if (redis_client_first_attempt(node->client)) {
            retry_later(call);
            return;
        }
        refresh_soon(cl);
        call_answer(call, REDIS_CALL_DOWN, NULL, 0, NULL);
        return;
    }
    call->sent_to = node;
    call->sub = redis_client_eval_node(
        node->client, call->script, (const char *const *)call->words,
        call->nkeys, (const char *const *)call->words + call->nkeys,
        call->nargs, call->asking, (uint64_t)left, on_attempt_reply, call);
}

/* A redirect that names no host means the host that answered. */
static void
redirect_target(struct cluster_redirect *r, const struct rnode *from)
{
    if (r->host[0] == '\0') {
        snprintf(r->host, sizeof(r->host), "%s", from->host);
    }
}

static void
on_attempt_reply(enum redis_status status, const long long *ints, size_t nints,
                 const char *error, void *arg)
{
    struct rcluster_call *call = arg;
    struct rcluster *cl = call->cl;
    struct rnode *from = call->sent_to;
    struct cluster_redirect r;
    enum cluster_reply kind;

    call->sub = NULL;
    call->sent_to = NULL;
    if (call->has_result) {
        return; /* the deadline came first and is being delivered */
    }
    if (status != REDIS_CALL_ERROR) {
        if (status == REDIS_CALL_DOWN) {
            refresh_soon(cl); /* a lost connection: failover? */
        }
        /* The node client's own timeout: same deadline as ours. */
        call_answer(call, status, ints, nints, NULL);
        return;
    }
    kind = cluster_redirect_parse(error, strlen(error), &r);
    if ((kind == CLUSTER_REPLY_MOVED || kind == CLUSTER_REPLY_ASK) &&
        (++call->redirects > RCLUSTER_MAX_REDIRECTS ||
         strcmp(r.host, "?") == 0 || from == NULL)) {
        call_answer(call, REDIS_CALL_ERROR, NULL, 0, error);
        return;
    }
    switch (kind) {
    case CLUSTER_REPLY_MOVED:
        cl->stats.moved++;
        redirect_target(&r, from);
        call->asking = false;
        if (cl->map != NULL) {
            /* On failure (a full map) the refresh sets things right. */
            int idx = cluster_map_moved(cl->map, r.slot, r.host, r.port);

            if (idx >= 0) {
                index_node(cl, idx);
            }
            cl->moved_gen++;
        }
        refresh_soon(cl);
        attempt(call);
        return;
    case CLUSTER_REPLY_ASK:
        cl->stats.ask++;
        redirect_target(&r, from);
        call->asking = true;
        call->ask = r;
        attempt(call);
        return;
    case CLUSTER_REPLY_TRYAGAIN:
        cl->stats.tryagain++;
        call->asking = false;
        retry_later(call);
        return;
    case CLUSTER_REPLY_CLUSTERDOWN:
        cl->stats.clusterdown++;
        call->asking = false;
        refresh_soon(cl);
        retry_later(call);
        return;
    case CLUSTER_REPLY_READONLY:
        log_warn("redis: cluster: %s:%u is a replica now", from->host,
                 (unsigned)from->port);
        call->asking = false;
        refresh_soon(cl);
        retry_later(call);
        return;
    default:
        call_answer(call, REDIS_CALL_ERROR, NULL, 0, error);
        return;
    }
}

struct rcluster_call *
rcluster_eval(struct rcluster *cl, const struct lua_script *script,
              const char *const *keys, size_t nkeys, const char *const *args,
              size_t nargs, uint64_t timeout_ms, redis_script_cb *cb, void *arg)
{
    struct rcluster_call *call = xcalloc(1, sizeof(*call));
    struct timeval tv;

    size_t nwords = nkeys + nargs;
    size_t size = nwords * sizeof(char *);
    char *p;

    assert(!cl->freeing);
    if (timeout_ms > cl->node_conf.timeout_ms) {
        timeout_ms = cl->node_conf.timeout_ms;
    }
    tv = clock_tv(timeout_ms);
    cl->stats.calls++;
    call->cl = cl;
    call->script = script;
    call->nkeys = nkeys;
    call->nargs = nargs;
    /* Kept for resends: the pointers, then the strings, in one block. */
    for (size_t i = 0; i < nwords; i++) {
        size += strlen(i < nkeys ? keys[i] : args[i - nkeys]) + 1;
    }
    call->words = xmalloc(size > 0 ? size : 1);
    p = (char *)(call->words + nwords);
    for (size_t i = 0; i < nwords; i++) {
        const char *w = i < nkeys ? keys[i] : args[i - nkeys];
        size_t len = strlen(w) + 1;

        memcpy(p, w, len);
        call->words[i] = p;
        p += len;
    }
    call->slot = nkeys > 0 ? cluster_slot(keys[0], strlen(keys[0])) : 0;
    call->cb = cb;
    call->arg = arg;
    call->ev = evtimer_new(cl->base, on_call_event, call);
    call->deadline_ms = clock_mono_ms() + (int64_t)timeout_ms;
    call->backoff_ms = RETRY_MIN_MS;
    TAILQ_INSERT_TAIL(&cl->calls, call, link);
    evtimer_add(call->ev, &tv);
    attempt(call);
    return call;
}

void
rcluster_call_cancel(struct rcluster_call *call)
{
    assert(!call->finished);
    call->finished = true;
    drop_attempt(call);
    if (call->cl->freeing) {
        return; /* rcluster_free() frees it */
    }
    call_free(call);
}

/*
 * The client.
 */

struct rcluster *
rcluster_new(struct event_base *base, const struct redis_conf *conf,
             const struct lua_script *scripts, size_t nscripts,
             size_t max_in_flight)
{
    struct rcluster *cl = xcalloc(1, sizeof(*cl));

    cl->base = base;
    cl->node_conf.user = conf->user != NULL ? xstrdup(conf->user) : NULL;
    cl->node_conf.password =
        conf->password != NULL ? xstrdup(conf->password) : NULL;
    cl->node_conf.timeout_ms = conf->timeout_ms;
    cl->nseeds = conf->ncluster_nodes;
    cl->seeds = xcalloc(cl->nseeds, sizeof(*cl->seeds));
    for (size_t i = 0; i < cl->nseeds; i++) {
        cl->seeds[i].host = xstrdup(conf->cluster_nodes[i].host);
        cl->seeds[i].port = conf->cluster_nodes[i].port;
    }
    cl->scripts = scripts;
    cl->nscripts = nscripts;
    cl->max_in_flight = max_in_flight;
    cl->refresh_timer = evtimer_new(base, on_refresh_timer, cl);
    cl->rng =
        backoff_seed((uint64_t)(uintptr_t)cl ^ (uint64_t)clock_mono_ms() << 20 ^
                     (uint64_t)getpid() << 40);
    TAILQ_INIT(&cl->calls);
    add_seeds(cl);
    /* The seeds' first connections take a moment: ask as soon as one is
     * up (the refresh timer looks for one). */
    schedule_refresh(cl, 0);
    return cl;
}

void
rcluster_free(struct rcluster *cl)
{
    struct rcluster_call *call;

    if (cl == NULL) {
        return;
    }
    cl->freeing = true;
    TAILQ_FOREACH (call, &cl->calls, link) {
        if (call->finished) {
            continue;
        }
        call->finished = true;
        drop_attempt(call);
        evtimer_del(call->ev);
        if (call->retry != NULL) {
            evtimer_del(call->retry);
        }
        cl->stats.down++;
        call->cb(REDIS_CALL_DOWN, NULL, 0, NULL, call->arg);
    }
    while ((call = TAILQ_FIRST(&cl->calls)) != NULL) {
        call_free(call);
    }
    while (cl->nnodes > 0) {
        node_close(cl, cl->nnodes - 1);
    }
    event_free(cl->refresh_timer);
    cluster_map_free(cl->map);
    free(cl->by_index);
    free(cl->nodes);
    for (size_t i = 0; i < cl->nseeds; i++) {
        free(cl->seeds[i].host);
    }
    free(cl->seeds);
    free(cl->node_conf.user);
    free(cl->node_conf.password);
    free(cl);
}

bool
rcluster_ready(const struct rcluster *cl)
{
    return healthy(cl);
}

const struct redis_stats *
rcluster_stats(struct rcluster *cl)
{
    struct redis_stats *st = &cl->stats;

    st->reconnects = cl->gone_reconnects;
    st->noscript = cl->gone_noscript;
    st->nodes_up = 0;
    st->nodes_down = 0;
    for (size_t i = 0; i < cl->nnodes; i++) {
        const struct redis_stats *ns = redis_client_stats(cl->nodes[i]->client);

        st->reconnects += ns->reconnects;
        st->noscript += ns->noscript;
        if (!cl->nodes[i]->in_map) {
            continue;
        }
        if (redis_client_ready(cl->nodes[i]->client)) {
            st->nodes_up++;
        } else {
            st->nodes_down++;
        }
    }
    return st;
}
