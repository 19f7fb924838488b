/*
 * redis.c - hiredis 0.14 async on libevent, with the timers, reconnects
 * and script caching that hiredis leaves to its user (see TRAPS.md §2).
 *
 * Lifetimes. A hiredis context ('ac') belongs to the client until the
 * client stops pointing at it: every teardown first sets c->ac to NULL,
 * so that whatever callbacks that context still runs (NULL replies, its
 * disconnect callback) recognise it as stale and only release what they
 * hold. redisAsyncFree() is never called from the connect or disconnect
 * callbacks (a SEGV in 0.14; hiredis frees the context itself there), only
 * from our own timers, from redis_client_free(), and from reply callbacks,
 * where hiredis defers the free until the callback returns.
 *
 * A call record lives until both its caller is done with it (answered or
 * cancelled) and hiredis is done with it (it delivered a reply or NULL to
 * on_call_reply): after a timeout hiredis still holds the record as its
 * privdata. The caller is always answered from the record's own event,
 * never from inside hiredis, so that a caller may free the client from its
 * callback.
 *
 * In cluster mode the client holds only the cluster client (rcluster.h),
 * and each call a handle on that client's own record.
 */
#include "redis.h"
#include "backoff.h"
#include "clock.h"
#include "cluster.h"
#include "rcluster.h"
#include "replyguard.h"

#include "config.h"
#include "log.h"
#include "resolve.h"
#include "scriptcall.h"
#include "scripts.h"
#include "sentinel.h"
#include "strbuf.h"
#include "xmalloc.h"

#include <arpa/inet.h>
#include <assert.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <hiredis/adapters/libevent.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#define BACKOFF_MIN_MS 50
/*
 * hiredis writes queued commands when the loop next finds the socket
 * writable, that is after this whole turn. Every this many calls, what is
 * queued is written at once, so that Redis works on a batch while the
 * turn goes on parsing requests. Measured (wrk -c50, a Redis token bucket
 * on every request, one worker): with no early write the gateway waited
 * on Redis and 65% of the machine stayed idle, at 30,300 req/s; writing
 * every 1, 2, 4, 8 or 16 calls gave 39,800 to 41,300, idle 25-31%.
 */
#define FLUSH_EVERY 8
/*
 * Calls of one script made in one loop turn go to Redis as one command, a
 * batch of at most this many (lua/README.md, "Batches"): Redis then
 * parses, looks up and starts the script once for all of them, and reads
 * TIME once. A batch that fills is written at once, as FLUSH_EVERY does;
 * what is left goes at the end of the turn.
 */
#define BATCH_MAX 16
#define BACKOFF_MAX_MS 2000
/* How often a READY connection's unparsed input is looked at
 * (replyguard_overflowing()). */
#define UNREAD_CHECK_MS 1000
/*
 * Up to this many ended call records are kept per client for the next
 * calls (XMALLOC_REUSE), those whose words took at most SPARE_TAIL bytes
 * of RESP: a record is one allocation of under 1 KiB then, and malloc()
 * and free() of it cost more than the rest of its setting up. One key
 * of a few dozen bytes and its arguments take about 200.
 */
#define SPARE_CALLS 64
#define SPARE_TAIL 512
/* Connecting covers the name lookup, TCP and the AUTH / SELECT / SCRIPT
 * LOAD round trip. Nothing waits on it (calls are answered REDIS_CALL_DOWN
 * until the client is ready), so it can be generous; a tight per-command
 * timeout must not make a distant Redis unreachable. */
#define CONNECT_TIMEOUT_MIN_MS 1000
#define ASKING_RESP "*1\r\n$6\r\nASKING\r\n"

enum conn_state {
    CONN_WAITING,    /* nothing open; the retry timer is armed */
    CONN_ASKING,     /* asking the sentinels where the primary is */
    CONN_RESOLVING,  /* host name lookup on the resolver thread */
    CONN_CONNECTING, /* TCP connect in progress */
    CONN_HANDSHAKE,  /* AUTH, ROLE (Sentinel), SELECT and SCRIPT LOAD
                        sent */
    CONN_READY,      /* calls go out */
};

/* What a handshake reply answers; SCRIPT LOAD of script i is
 * STEP_LOAD + i. Passed to hiredis as the privdata. */
enum handshake_step {
    STEP_AUTH,
    STEP_ROLE, /* with Sentinel: is this the primary still? */
    STEP_SELECT,
    STEP_LOAD,
};

struct redis_call {
    TAILQ_ENTRY(redis_call) link;   /* in the client's list */
    struct redis_client *client;    /* borrowed */
    size_t script;                  /* index into client->scripts */
    redis_script_cb *cb;            /* the caller's */
    void *arg;                      /* the caller's; borrowed */
    struct event *ev;               /* the deadline; then the delivery of
                                       the answer; in the record's own
                                       allocation */
    size_t argc;                    /* words of the command */
    char *tail;                     /* the words after the script's (the
                                       key count, keys, args), already in
                                       RESP: sent after EVALSHA and the
                                       SHA, or EVAL and the source; in
                                       the record's own allocation */
    size_t tail_len;                /* bytes of 'tail' */
    bool spare_size;                /* allocated with SPARE_TAIL bytes
                                       for 'tail': may be kept for reuse */
    bool in_hiredis;                /* hiredis owes on_call_reply */
    bool finished;                  /* answered or cancelled: the caller
                                       is done with it */
    bool resent;                    /* NOSCRIPT already answered with EVAL */
    bool asking;                    /* ASKING goes before the script */
    bool queued;                    /* waits in the client's queue for
                                       its batch */
    size_t nkeys;                   /* KEYS of the call */
    size_t nargs;                   /* ARGV of the call */
    size_t keys_at;                 /* where the keys begin in 'tail' */
    size_t args_at;                 /* where the args begin in 'tail' */
    struct rcluster_call *routed;   /* cluster mode: the cluster client's
                                       record; the fields above but
                                       'client', 'cb' and 'arg' unused */
    bool has_result;                /* status..error hold the answer */
    enum redis_status status;       /* the answer, once has_result */
    long long ints[REDIS_MAX_INTS]; /* REDIS_CALL_OK: the script's array */
    size_t nints;                   /* of ints */
    char *error;                    /* REDIS_CALL_ERROR: the text; owned */
};
/* A packed reply of REDIS_MAX_INTS integers of 20 characters ("-" and 19
 * digits) and their separators is read whole by scriptcall_unpack(). */
_Static_assert(REDIS_MAX_INTS * 21 - 1 <= SCRIPTCALL_PACKED_MAX,
               "a packed reply fits scriptcall_unpack()'s buffer");

TAILQ_HEAD(call_list, redis_call);

/* Several calls of one script sent as one command; hiredis's privdata. */
struct redis_batch {
    struct redis_client *client; /* borrowed */
    size_t script;               /* index into client->scripts */
    bool resent;                 /* NOSCRIPT already answered with EVAL */
    size_t n;                    /* of calls */
    struct redis_call *calls[];  /* borrowed: a record stays while
                                    in_hiredis is set */
};

struct redis_client {
    struct event_base *base;            /* borrowed */
    unsigned unflushed;                 /* calls queued since the last early
                                           write (FLUSH_EVERY) */
    char *host;                         /* the url's, or the address the
                                           sentinels gave; owned */
    uint16_t port;                      /* TCP port */
    struct sentinel *sentinel;          /* asks where the primary is, or
                                           NULL: 'host' names the server;
                                           owned */
    char *master;                       /* Sentinel's master name, or NULL;
                                           owned */
    bool addr_known;                    /* with Sentinel: 'host' and 'port'
                                           hold an answer */
    unsigned db;                        /* SELECT index */
    char *user;                         /* ACL user or NULL; owned */
    char *password;                     /* or NULL; owned */
    uint64_t timeout_ms;                /* per command */
    uint64_t connect_timeout_ms;        /* connect, handshake; also how
                                           long a READY connection may go
                                           without answering anything */
    bool numeric_host;                  /* 'host' is an IP address */
    const struct lua_script *scripts;   /* borrowed */
    size_t nscripts;                    /* of scripts */
    char (*shas)[SCRIPTS_SHA1_HEX + 1]; /* per script, its SHA-1
                                           (scripts_sha1()), which SCRIPT
                                           LOAD must answer; "": not
                                           hashed, always EVAL; owned */
    size_t max_in_flight;               /* cap on calls awaiting a reply
                                           or queued for their batch
                                           (a call cancelled in the queue
                                           counts until the turn ends) */
    size_t in_flight;                   /* calls awaiting a reply */
    bool batching;                      /* scripts that take batches get
                                           them (not a cluster node: its
                                           calls may span slots) */
    struct redis_call **queue;          /* per script, BATCH_MAX slots
                                           for the calls waiting for
                                           their batch; owned, the calls
                                           borrowed */
    size_t *nqueued;                    /* per script, of queue[script] */
    size_t queued;                      /* calls in all the queues,
                                           cancelled ones included */
    struct event *flush_ev;             /* sends the queues at the end of
                                           the loop turn; owned */
    bool flush_armed;                   /* flush_ev is active */
    enum conn_state state;              /* of the connection */
    redisAsyncContext *ac;              /* NULL unless CONNECTING,
                                           HANDSHAKE or READY */
    struct replyguard guard;            /* of 'ac' (replyguard.h) */
    char addr[INET6_ADDRSTRLEN];        /* address being connected to */
    size_t handshake_left;              /* replies still due */
    struct event *connect_timer;        /* connect + handshake deadline;
                                           owned */
    struct event *retry_timer;          /* next attempt; owned */
    struct event *stall_timer;          /* on_stall_timer(): pending
                                           whenever READY (armed by
                                           became_ready(), then by
                                           itself); owned */
    uint64_t backoff_ms;                /* next retry delay, before jitter */
    unsigned failures;                  /* attempts failed in a row; picks
                                           the address to try */
    bool failing;                       /* a failure was logged since the
                                           last success: later ones are
                                           debug, not warn */
    int64_t ready_ms;                   /* when the connection became
                                           ready (clock_mono_ms()) */
    bool was_ready;                     /* ready once: the next ready is a
                                           reconnect */
    bool role_unverified_told;          /* the NOPERM on ROLE was logged */
    struct resolve *lookup;             /* name lookup in progress, or
                                           NULL */
    uint64_t rng;                       /* xorshift state for jitter */
    int64_t progress_ms;                /* last reply, or the first send
                                           after an idle spell */
    struct call_list calls;             /* every live record */
    struct call_list spare;             /* ended records kept for reuse,
                                           their events assigned; owned */
    size_t nspare;                      /* records in 'spare' */
    struct redis_stats stats;           /* for /metrics */
    bool freeing;                       /* in redis_client_free() */
    struct rcluster *cluster;           /* cluster mode: the client all
                                           calls go to, the fields above
                                           unused; owned */
    redis_map_cb *map_cb;               /* the map asked for, or NULL */
    void *map_arg;                      /* for map_cb; borrowed */
    unsigned map_gen;                   /* tells the answer to the latest
                                           ask from a late one */
    struct cluster_map *map;            /* the answer to deliver; owned */
    const char *map_why;                /* or why there is none: static,
                                           or 'map_error' */
    char map_error[160];                /* the error CLUSTER SLOTS got */
    struct event *map_ev;               /* the ask's deadline, then the
                                           delivery of its answer; owned */
};

static void on_call_reply(redisAsyncContext *ac, void *r, void *privdata);
static void on_batch_reply(redisAsyncContext *ac, void *r, void *privdata);
static void start_attempt(struct redis_client *c);
static void connect_host(struct redis_client *c);
static bool is_numeric_host(const char *host);
static void arm_stall_check(struct redis_client *c);

/* Gives up a name lookup still running; its answer is never read. */
static void
lookup_abandon(struct redis_client *c)
{
    if (c->lookup != NULL) {
        resolve_cancel(c->lookup);
        c->lookup = NULL;
    }
}

/*
 * Connection state.
 */

static void
schedule_retry(struct redis_client *c)
{
    struct timeval tv;

    c->state = CONN_WAITING;
    evtimer_del(c->connect_timer);
    /* Half the backoff plus up to as much again at random: workers and
     * gateways that lost Redis together do not all come back at once. */
    tv = clock_tv(backoff_jitter(c->backoff_ms, &c->rng));
    evtimer_add(c->retry_timer, &tv);
    c->backoff_ms = backoff_double(c->backoff_ms, BACKOFF_MAX_MS);
}

/* One attempt failed: say why (only the first time in a row, so that a
 * Redis that stays down costs one line, not one per retry) and retry.
 * The caller has already let go of c->ac. */
static void
attempt_failed(struct redis_client *c, const char *what, const char *why)
{
    const char *via = c->numeric_host || c->addr[0] == '\0' ? "" : c->addr;
    char where[300];

    /* With Sentinel, before any answer, 'host' is the master name and
     * there is no port: "mymaster:0" would read as an address. */
    if (c->master != NULL && !c->addr_known) {
        snprintf(where, sizeof(where), "primary of %s (not named yet)",
                 c->master);
    } else {
        snprintf(where, sizeof(where), "%s:%u", c->host, (unsigned)c->port);
    }
    log_msg(c->failing ? LOG_DEBUG : LOG_WARN, "redis: %s %s%s%s%s: %s", what,
            where, *via ? " (" : "", via, *via ? ")" : "", why);
    c->failing = true;
    c->failures++;
    if (c->sentinel != NULL) {
        /* The server the sentinels named failed: the next ask starts at
         * another sentinel, in case this one's answer is stale. */
        sentinel_distrust(c->sentinel);
    }
    schedule_retry(c);
}

/* Lets go of the connection from outside hiredis's connect and
 * disconnect callbacks; its pending calls get NULL replies (REDIS_CALL_DOWN).
 */
static void
drop_connection(struct redis_client *c)
{
    redisAsyncContext *ac = c->ac;

    c->ac = NULL;
    if (ac != NULL) {
        redisAsyncFree(ac);
    }
}

static void
became_ready(struct redis_client *c)
{
    evtimer_del(c->connect_timer);
    c->state = CONN_READY;
    /* The backoff starts again once the server has answered a call
     * (note_role()) or the connection has lasted: one that closes each
     * connection after the handshake gets the backoff, not a storm. */
    c->ready_ms = clock_mono_ms();
    c->failures = 0;
    c->failing = false;
    if (c->was_ready) {
        c->stats.reconnects++;
    }
    c->was_ready = true;
    arm_stall_check(c);
    log_info("redis: connected to %s:%u, db %u", c->host, (unsigned)c->port,
             c->db);
}

static void
on_handshake_reply(redisAsyncContext *ac, void *r, void *privdata)
{
    struct redis_client *c = ac->data;
    redisReply *reply = r;
    uintptr_t step = (uintptr_t)privdata;
    const char *what;
    char why[256];

    /* NULL: the connection is going away, and the disconnect callback or
     * whoever freed it deals with that. */
    if (reply == NULL || ac != c->ac) {
        return;
    }
    if (step == STEP_ROLE && reply->type == REDIS_REPLY_ERROR &&
        strncmp(reply->str, "NOPERM", 6) == 0) {
        /* ROLE is in @admin: a least-privilege ACL user may not run it.
         * The sentinels' word stands alone then; READONLY still catches
         * a replica at the first script. */
        if (!c->role_unverified_told) {
            log_warn("redis: ROLE %s:%u: %s: the primary is not verified "
                     "(grant the user +role)",
                     c->host, (unsigned)c->port, reply->str);
            c->role_unverified_told = true;
        }
    } else if (step == STEP_ROLE && reply->type != REDIS_REPLY_ERROR) {
        /* ROLE: ["master", ...], ["slave", ...], ["sentinel", ...]. A
         * primary just demoted, or a sentinel not yet told: not ours. */
        const redisReply *role =
            reply->type == REDIS_REPLY_ARRAY && reply->elements > 0
                ? reply->element[0]
                : NULL;

        if (role == NULL || role->type != REDIS_REPLY_STRING ||
            role->len != 6 || memcmp(role->str, "master", 6) != 0) {
            snprintf(why, sizeof(why), "not the primary (role %s)",
                     role != NULL && role->type == REDIS_REPLY_STRING
                         ? role->str
                         : "unknown");
            drop_connection(c);
            attempt_failed(c, "ROLE", why);
            return;
        }
    } else if (step >= STEP_LOAD && reply->type == REDIS_REPLY_STRING) {
        /* The script's own hash, or a server that would run something
         * else under that name, or answer NOSCRIPT forever. */
        const char *sha = c->shas[step - STEP_LOAD];

        if (sha[0] != '\0' && (reply->len != SCRIPTS_SHA1_HEX ||
                               memcmp(reply->str, sha, SCRIPTS_SHA1_HEX))) {
            snprintf(why, sizeof(why),
                     "%s: answered \"%.*s\", not the script's SHA-1 %s",
                     c->scripts[step - STEP_LOAD].name,
                     (int)(reply->len < 64 ? reply->len : 64), reply->str, sha);
            drop_connection(c);
            attempt_failed(c, "SCRIPT LOAD", why);
            return;
        }
    } else if (reply->type == REDIS_REPLY_ERROR ||
               (step >= STEP_LOAD && reply->type != REDIS_REPLY_STRING)) {
        /* Wrong password, NOAUTH, a database that does not exist, a
         * server still loading its data, a script that does not compile:
         * this connection cannot serve; a later one may. */
        what = step == STEP_AUTH     ? "AUTH"
               : step == STEP_ROLE   ? "ROLE"
               : step == STEP_SELECT ? "SELECT"
                                     : "SCRIPT LOAD";
        snprintf(why, sizeof(why), "%s%s%s",
                 step >= STEP_LOAD ? c->scripts[step - STEP_LOAD].name : "",
                 step >= STEP_LOAD ? ": " : "",
                 reply->type == REDIS_REPLY_ERROR ? reply->str
                                                  : "unexpected reply");
        drop_connection(c);
        attempt_failed(c, what, why);
        return;
    }
    if (--c->handshake_left == 0) {
        became_ready(c);
    }
}

static bool
send_handshake(struct redis_client *c)
{
    redisAsyncContext *ac = c->ac;
    char db[24];
    const char *argv[3];
    size_t len[3];
    int rc;

    c->handshake_left = 0;
    if (c->password != NULL) {
        int n = 0;

        argv[n++] = "AUTH";
        if (c->user != NULL) {
            argv[n++] = c->user;
        }
        argv[n++] = c->password;
        for (int i = 0; i < n; i++) {
            len[i] = strlen(argv[i]);
        }
        rc = redisAsyncCommandArgv(ac, on_handshake_reply,
                                   (void *)(uintptr_t)STEP_AUTH, n, argv, len);
        if (rc == REDIS_ERR) {
            return false;
        }
        c->handshake_left++;
    }
    if (c->sentinel != NULL) {
        argv[0] = "ROLE";
        len[0] = 4;
        rc = redisAsyncCommandArgv(ac, on_handshake_reply,
                                   (void *)(uintptr_t)STEP_ROLE, 1, argv, len);
        if (rc == REDIS_ERR) {
            return false;
        }
        c->handshake_left++;
    }
    /* SELECT even db 0: a server that wants a password we lack answers
     * NOAUTH here, and the connection never counts as ready. */
    snprintf(db, sizeof(db), "%u", c->db);
    argv[0] = "SELECT";
    argv[1] = db;
    len[0] = 6;
    len[1] = strlen(db);
    rc = redisAsyncCommandArgv(ac, on_handshake_reply,
                               (void *)(uintptr_t)STEP_SELECT, 2, argv, len);
    if (rc == REDIS_ERR) {
        return false;
    }
    c->handshake_left++;
    for (size_t i = 0; i < c->nscripts; i++) {
        argv[0] = "SCRIPT";
        argv[1] = "LOAD";
        argv[2] = c->scripts[i].source;
        len[0] = 6;
        len[1] = 4;
        len[2] = c->scripts[i].len;
        rc = redisAsyncCommandArgv(ac, on_handshake_reply,
                                   (void *)(uintptr_t)(STEP_LOAD + i), 3, argv,
                                   len);
        if (rc == REDIS_ERR) {
            return false;
        }
        c->handshake_left++;
    }
    return true;
}

static void
on_connect(const redisAsyncContext *cac, int status)
{
    struct redis_client *c = cac->data;

    if (cac != c->ac) {
        return;
    }
    if (status == REDIS_ERR) {
        /* hiredis frees the context when this returns; ac->err is not
         * set yet, the reason is in the inner context. */
        c->ac = NULL;
        attempt_failed(c, "connect", cac->c.errstr);
        return;
    }
    c->state = CONN_HANDSHAKE;
    if (!send_handshake(c)) {
        /* Cannot happen on a fresh context; if it does, the connect
         * timer takes the connection down (not from here: see top). */
        log_error("redis: %s:%u: cannot send the handshake", c->host,
                  (unsigned)c->port);
    }
}

static void
on_disconnect(const redisAsyncContext *cac, int status)
{
    struct redis_client *c = cac->data;
    const char *why = cac->errstr != NULL ? cac->errstr : "closed";

    (void)status;
    if (cac != c->ac) {
        return;
    }
    if (c->guard.refused != NULL) {
        why = c->guard.refused;
    }
    c->ac = NULL;
    if (c->state == CONN_READY) {
        log_warn("redis: connection to %s:%u lost: %s", c->host,
                 (unsigned)c->port, why);
        if (clock_mono_ms() - c->ready_ms >= (int64_t)BACKOFF_MAX_MS) {
            c->backoff_ms = BACKOFF_MIN_MS;
        }
        schedule_retry(c);
    } else {
        attempt_failed(c, "connect", why);
    }
}

static void
connect_to(struct redis_client *c, const char *ip)
{
    redisAsyncContext *ac;

    snprintf(c->addr, sizeof(c->addr), "%s", ip);
    c->state = CONN_CONNECTING;
    ac = redisAsyncConnect(ip, c->port);
    if (ac == NULL || ac->err != 0) {
        char why[128];

        snprintf(why, sizeof(why), "%s",
                 ac != NULL ? ac->errstr : "cannot allocate a context");
        if (ac != NULL) {
            redisAsyncFree(ac);
        }
        attempt_failed(c, "connect", why);
        return;
    }
    ac->data = c;
    c->ac = ac;
    /* An idle connection to a host that vanished is noticed before the
     * next call has to find out. */
    redisEnableKeepAlive(&ac->c);
    redisLibeventAttach(ac, c->base);
    replyguard_attach(&c->guard, ac);
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
}

static void
on_resolved(const struct resolve_result *r, void *arg)
{
    struct redis_client *c = arg;
    char ip[INET6_ADDRSTRLEN];

    c->lookup = NULL; /* freed when this returns */
    if (c->state != CONN_RESOLVING) {
        return; /* that attempt timed out; the next one looks up again */
    }
    if (r->naddrs == 0) {
        attempt_failed(c, "resolve",
                       r->err != 0 ? gai_strerror(r->err) : "no address");
        return;
    }
    /* Rotate through the addresses as attempts fail: a name with an
     * IPv6 and an IPv4 address reaches a server on either. */
    memcpy(ip, r->addrs[c->failures % r->naddrs], sizeof(ip));
    connect_to(c, ip);
}

/* 'ip' and 'port' are where the sentinels say the primary is now. */
static void
set_primary(struct redis_client *c, const char *ip, uint16_t port)
{
    if (c->addr_known && (strcmp(ip, c->host) != 0 || port != c->port)) {
        c->stats.failovers++;
        log_info("redis: sentinel: the primary of %s is now %s:%u (was "
                 "%s:%u)",
                 c->master, ip, (unsigned)port, c->host, (unsigned)c->port);
    }
    if (ip != c->host) {
        free(c->host);
        c->host = xstrdup(ip);
    }
    c->port = port;
    c->addr_known = true;
    /* Sentinels configured with "announce-hostnames" give names. */
    c->numeric_host = is_numeric_host(ip);
}

/* The sentinels answered the ask of start_attempt(). */
static void
on_sentinel_answer(const char *ip, uint16_t port, void *arg)
{
    struct redis_client *c = arg;

    if (c->state != CONN_ASKING) {
        return;
    }
    if (ip == NULL) {
        log_msg(c->failing ? LOG_DEBUG : LOG_WARN,
                "redis: sentinel: no sentinel named the primary of %s",
                c->master);
        c->failing = true;
        c->failures++;
        schedule_retry(c);
        return;
    }
    set_primary(c, ip, port);
    connect_host(c);
}

/*
 * A sentinel announced a failover of our master to 'ip':'port'. Unless
 * that is where we are already (a late or repeated message), whatever is
 * open or under way goes: calls in flight are answered REDIS_CALL_DOWN,
 * and the new address is tried at once, ROLE still confirming it. Not
 * asked again first: a sentinel that has not heard yet would name the
 * old primary, which answers ROLE "master" until it is converted.
 */
static void
on_sentinel_switch(const char *ip, uint16_t port, void *arg)
{
    struct redis_client *c = arg;
    bool here = c->addr_known && strcmp(ip, c->host) == 0 && port == c->port;

    if (here && (c->state == CONN_RESOLVING || c->state == CONN_CONNECTING ||
                 c->state == CONN_HANDSHAKE || c->state == CONN_READY)) {
        return;
    }
    if (c->state == CONN_READY) {
        log_warn("redis: %s:%u: the sentinels moved the primary: "
                 "reconnecting",
                 c->host, (unsigned)c->port);
    }
    evtimer_del(c->retry_timer);
    evtimer_del(c->connect_timer);
    drop_connection(c);
    sentinel_cancel(c->sentinel);
    lookup_abandon(c);
    c->addr[0] = '\0';
    c->backoff_ms = BACKOFF_MIN_MS;
    set_primary(c, ip, port);
    connect_host(c);
}

/* The answer to the check of on_sentinel_watching(). */
static void
on_sentinel_check(const char *ip, uint16_t port, void *arg)
{
    struct redis_client *c = arg;

    if (ip == NULL || c->state == CONN_ASKING || c->state == CONN_WAITING) {
        return; /* the next attempt asks anyway */
    }
    on_sentinel_switch(ip, port, c);
}

/*
 * The watch subscribed (again): a +switch-master may have gone by while
 * it was down, so the sentinels are asked, and a new address is followed
 * as a switch would be. An attempt that is asking, or about to, needs no
 * check.
 */
static void
on_sentinel_watching(void *arg)
{
    struct redis_client *c = arg;

    if (c->state == CONN_ASKING || c->state == CONN_WAITING) {
        return;
    }
    sentinel_ask(c->sentinel, on_sentinel_check, c);
}

static void
start_attempt(struct redis_client *c)
{
    c->addr[0] = '\0';
    if (c->sentinel != NULL) {
        /* Asked on every attempt: after a failover, or a ROLE that was
         * not "master", they may name another server. Each sentinel has
         * its own deadline; the connect timer starts with the connect. A
         * lookup left from an earlier answer is not waited for. */
        lookup_abandon(c);
        c->state = CONN_ASKING;
        sentinel_ask(c->sentinel, on_sentinel_answer, c);
        return;
    }
    connect_host(c);
}

/* Connects to c->host, looking it up first unless it is an address. */
static void
connect_host(struct redis_client *c)
{
    struct timeval tv = clock_tv(c->connect_timeout_ms);

    evtimer_add(c->connect_timer, &tv);
    if (c->numeric_host) {
        connect_to(c, c->host);
        return;
    }
    /* Looked up again on every attempt: after a failover the name may
     * point elsewhere. A lookup still running from an attempt that timed
     * out is waited for, not duplicated. */
    c->state = CONN_RESOLVING;
    if (c->lookup != NULL) {
        return;
    }
    c->lookup = resolve_start(c->base, c->host, on_resolved, c);
    if (c->lookup != NULL) {
        return;
    }
    /* No thread: look up in line, blocking this worker for once. */
    connect_to(c, c->host);
}

static void
on_retry_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    start_attempt(arg);
}

static void
on_connect_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct redis_client *c = arg;
    const char *phase = c->state == CONN_RESOLVING ? "resolve" : "connect";

    (void)fd;
    (void)what;
    drop_connection(c);
    attempt_failed(c, phase, "timed out");
}

/*
 * Calls.
 */

/* Neither the caller nor hiredis holds the record any more. */
static bool
call_done(const struct redis_call *call)
{
    return call->finished && !call->in_hiredis && !call->queued &&
           !call->client->freeing;
}

/* Frees a done record, or keeps it for reuse; its event must be neither
 * pending nor active. */
static void
call_drop(struct redis_call *call)
{
    TAILQ_REMOVE(&call->client->calls, call, link);
    free(call->error);
    if (XMALLOC_REUSE && call->spare_size &&
        call->client->nspare < SPARE_CALLS) {
        TAILQ_INSERT_HEAD(&call->client->spare, call, link);
        call->client->nspare++;
        return;
    }
    free(call);
}

/* Frees or keeps the record if it is done. */
static void
call_release(struct redis_call *call)
{
    if (call_done(call)) {
        event_del(call->ev);
        call_drop(call);
    }
}

/* Records the answer; the caller gets it from the event loop. */
static void
call_answer(struct redis_call *call, enum redis_status status,
            const char *error)
{
    struct redis_stats *st = &call->client->stats;

    call->has_result = true;
    call->status = status;
    if (status == REDIS_CALL_ERROR) {
        call->error = xstrdup(error);
        st->errors++;
    } else if (status == REDIS_CALL_DOWN || status == REDIS_CALL_OVERLOADED) {
        st->down++;
    }
    evtimer_del(call->ev);
    event_active(call->ev, EV_TIMEOUT, 1);
}

/* A READY connection that has answered nothing for a long while although
 * commands wait (a partition, a host gone without a RST, a server that
 * sends a reply that never ends) is given up: TCP alone would take
 * minutes to notice. Returns true if it was. */
static bool
check_stall(struct redis_client *c)
{
    int64_t idle = clock_mono_ms() - c->progress_ms;

    if (c->state != CONN_READY || c->in_flight == 0 ||
        idle < (int64_t)c->connect_timeout_ms) {
        return false;
    }
    log_warn("redis: %s:%u: no reply for %lld ms: reconnecting", c->host,
             (unsigned)c->port, (long long)idle);
    schedule_retry(c);
    drop_connection(c);
    return true;
}

/* The next look at a READY connection (on_stall_timer()): within
 * UNREAD_CHECK_MS, and when, owing replies since its last one, it will
 * have gone the connect deadline without another. */
static void
arm_stall_check(struct redis_client *c)
{
    int64_t due = UNREAD_CHECK_MS;
    struct timeval tv;

    if (c->in_flight > 0) {
        int64_t stall =
            c->progress_ms + (int64_t)c->connect_timeout_ms - clock_mono_ms();

        due = stall < due ? stall : due;
    }
    tv = clock_tv(due > 0 ? (uint64_t)due : 0);
    evtimer_add(c->stall_timer, &tv);
}

/* A READY connection, looked at: one that has gone the deadline owing
 * replies, or that holds more unparsed input than any reply, is given
 * up, whether or not a call waits. */
static void
on_stall_timer(evutil_socket_t fd, short what, void *arg)
{
    struct redis_client *c = arg;

    (void)fd;
    (void)what;
    if (c->state != CONN_READY) {
        return;
    }
    if (replyguard_overflowing(&c->guard)) {
        log_warn("redis: %s:%u: %s: reconnecting", c->host, (unsigned)c->port,
                 c->guard.refused);
        schedule_retry(c);
        drop_connection(c);
        return;
    }
    if (c->in_flight > 0 && check_stall(c)) {
        return;
    }
    arm_stall_check(c);
}

static void
on_call_event(evutil_socket_t fd, short what, void *arg)
{
    struct redis_call *call = arg;
    struct redis_client *c = call->client;
    redis_script_cb *cb = call->cb;
    void *cb_arg = call->arg;
    long long ints[REDIS_MAX_INTS];
    size_t nints = call->nints;
    enum redis_status status = call->status;
    char *error = call->error;
    bool timed_out = !call->has_result;

    (void)fd;
    (void)what;
    if (timed_out) {
        status = REDIS_CALL_TIMEOUT;
        nints = 0;
        c->stats.timeouts++;
    }
    memcpy(ints, call->ints, nints * sizeof(ints[0]));
    call->error = NULL;
    call->finished = true;
    /* After this the record may be gone (hiredis may still hold it):
     * only the copies above are used. Its event has just run, so
     * libevent deleted it (it is not persistent), and nothing has added
     * it since: no event_del(). */
    if (call_done(call)) {
        call_drop(call);
    }
    if (timed_out) {
        check_stall(c);
    }
    cb(status, nints > 0 ? ints : NULL, nints,
       status == REDIS_CALL_ERROR ? error : NULL, cb_arg);
    free(error);
}

/* Digits of 'v' in decimal. */
static size_t
dec_len(uint64_t v)
{
    size_t n = 1;

    for (; v >= 100; v /= 100) {
        n += 2;
    }
    return n + (v >= 10);
}

/* Bytes of 's' (of 'len' bytes) as a RESP bulk string. */
static size_t
bulk_size(size_t len)
{
    return 1 + dec_len(len) + 2 + len + 2;
}

/* Writes 's' as a RESP bulk string at 'p'; returns the end. */
static inline char *
put_bulk(char *p, const char *s, size_t len)
{
    *p++ = '$';
    p = u64_put(p, len);
    *p++ = '\r';
    *p++ = '\n';
    memcpy(p, s, len);
    p += len;
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

/* The words every script command starts with: the array header for
 * 'argc' words, then EVALSHA and the SHA, or EVAL and the source. */
struct script_head {
    const char *word; /* "EVALSHA" or "EVAL"; static */
    size_t word_len;  /* of word */
    const char *body; /* the SHA or the source; borrowed */
    size_t body_len;  /* of body */
    size_t argc;      /* words of the whole command */
};

/* The head of a command running script 'idx' ('resent': after NOSCRIPT,
 * by EVAL). */
static struct script_head
script_head(const struct redis_client *c, size_t idx, bool resent, size_t argc)
{
    bool by_sha = !resent && c->shas[idx][0] != '\0';

    return (struct script_head){
        by_sha ? "EVALSHA" : "EVAL",
        by_sha ? 7 : 4,
        by_sha ? c->shas[idx] : c->scripts[idx].source,
        by_sha ? SCRIPTS_SHA1_HEX : c->scripts[idx].len,
        argc,
    };
}

/* Bytes put_head() writes. */
static size_t
head_size(const struct script_head *h)
{
    return 1 + dec_len(h->argc) + 2 + bulk_size(h->word_len) +
           bulk_size(h->body_len);
}

static char *
put_head(char *p, const struct script_head *h)
{
    *p++ = '*';
    p = u64_put(p, h->argc);
    *p++ = '\r';
    *p++ = '\n';
    p = put_bulk(p, h->word, h->word_len);
    return put_bulk(p, h->body, h->body_len);
}

/*
 * The command goes to hiredis already in RESP (the protocol's array of
 * bulk strings): most of it was written once, by call_new(). hiredis's
 * own formatting from an argv costs more than the rest of the call.
 */
static bool
send_call(struct redis_client *c, struct redis_call *call)
{
    struct script_head h =
        script_head(c, call->script, call->resent, call->argc);
    size_t size = head_size(&h) + call->tail_len;
    char *cmd = xmalloc(size);
    char *p = put_head(cmd, &h);
    int rc;

    memcpy(p, call->tail, call->tail_len);
    assert(p + call->tail_len == cmd + size);
    /* Its reply (+OK) is dropped by hiredis: no callback. */
    if (call->asking &&
        redisAsyncFormattedCommand(c->ac, NULL, NULL, ASKING_RESP,
                                   sizeof(ASKING_RESP) - 1) == REDIS_ERR) {
        free(cmd);
        return false;
    }
    rc = redisAsyncFormattedCommand(c->ac, on_call_reply, call, cmd, size);
    free(cmd);
    if (rc == REDIS_ERR) {
        return false;
    }
    if (c->in_flight++ == 0) {
        /* Replies are owed again from now: the stall timer, pending
         * while READY, looks at it even if no call times out. */
        c->progress_ms = clock_mono_ms();
    }
    call->in_hiredis = true;
    return true;
}

/* Bytes of 'v' as a RESP bulk string of its decimal digits. */
static size_t
num_bulk_size(uint64_t v)
{
    return bulk_size(dec_len(v));
}

static char *
put_num(char *p, uint64_t v)
{
    *p++ = '$';
    p = u64_put(p, dec_len(v));
    *p++ = '\r';
    *p++ = '\n';
    p = u64_put(p, v);
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

/*
 * Sends the calls of 'b' as one command (lua/README.md, "Batches"):
 * EVALSHA <sha> <keys> <the calls' keys> batch <n>, then per call
 * <nkeys> <nargs> <its args>. The keys and args are the RESP that
 * call_new() wrote, copied as they are.
 */
static bool
send_batch(struct redis_client *c, struct redis_batch *b)
{
    struct script_head h;
    size_t nkeys = 0, argc = 5, size, i;
    char *cmd, *p;
    int rc;

    size = bulk_size(5) + num_bulk_size(b->n);
    for (i = 0; i < b->n; i++) {
        const struct redis_call *call = b->calls[i];

        nkeys += call->nkeys;
        argc += call->nkeys + 2 + call->nargs;
        size += call->tail_len - call->keys_at + num_bulk_size(call->nkeys) +
                num_bulk_size(call->nargs);
    }
    h = script_head(c, b->script, b->resent, argc);
    size += head_size(&h) + num_bulk_size(nkeys);
    cmd = xmalloc(size);
    p = put_head(cmd, &h);
    p = put_num(p, nkeys);
    for (i = 0; i < b->n; i++) {
        const struct redis_call *call = b->calls[i];

        memcpy(p, call->tail + call->keys_at, call->args_at - call->keys_at);
        p += call->args_at - call->keys_at;
    }
    p = put_bulk(p, "batch", 5);
    p = put_num(p, b->n);
    for (i = 0; i < b->n; i++) {
        const struct redis_call *call = b->calls[i];

        p = put_num(p, call->nkeys);
        p = put_num(p, call->nargs);
        memcpy(p, call->tail + call->args_at, call->tail_len - call->args_at);
        p += call->tail_len - call->args_at;
    }
    assert(p == cmd + size);
    rc = redisAsyncFormattedCommand(c->ac, on_batch_reply, b, cmd, size);
    free(cmd);
    if (rc == REDIS_ERR) {
        return false;
    }
    if (c->in_flight == 0) {
        /* Replies are owed again from now: the stall timer, pending
         * while READY, looks at it even if no call times out. */
        c->progress_ms = clock_mono_ms();
    }
    c->in_flight += b->n;
    c->stats.batches++;
    for (i = 0; i < b->n; i++) {
        b->calls[i]->in_hiredis = true;
    }
    return true;
}

/*
 * Sends what waits in the queue of script 'idx': one call as it is,
 * several as a batch. Calls cancelled or timed out meanwhile are dropped.
 * Returns true if a command went to hiredis.
 */
static bool
flush_queue(struct redis_client *c, size_t idx)
{
    struct redis_call **q = c->queue + idx * BATCH_MAX;
    size_t n = c->nqueued[idx], live = 0;
    struct redis_batch *b;

    c->nqueued[idx] = 0;
    c->queued -= n;
    for (size_t i = 0; i < n; i++) {
        q[i]->queued = false;
        if (q[i]->finished) {
            call_release(q[i]);
        } else {
            q[live++] = q[i];
        }
    }
    if (live == 0) {
        return false;
    }
    if (c->state != CONN_READY) {
        for (size_t i = 0; i < live; i++) {
            call_answer(q[i], REDIS_CALL_DOWN, NULL);
        }
        return false;
    }
    if (live == 1) {
        if (!send_call(c, q[0])) {
            call_answer(q[0], REDIS_CALL_DOWN, NULL);
            return false;
        }
        return true;
    }
    b = xmalloc(sizeof(*b) + live * sizeof(b->calls[0]));
    b->client = c;
    b->script = idx;
    b->resent = false;
    b->n = live;
    memcpy(b->calls, q, live * sizeof(q[0]));
    if (!send_batch(c, b)) {
        free(b);
        for (size_t i = 0; i < live; i++) {
            call_answer(q[i], REDIS_CALL_DOWN, NULL);
        }
        return false;
    }
    return true;
}

/*
 * Writes what hiredis holds now, not when the loop next finds the socket
 * writable. A failure answers the calls DOWN (hiredis hands each record
 * back NULL and runs on_disconnect) before this returns.
 */
static void
write_now(struct redis_client *c)
{
    c->unflushed = 0;
    redisAsyncHandleWrite(c->ac);
}

/* The end of the loop turn: every queue goes out, and is written now. */
static void
on_flush(evutil_socket_t fd, short what, void *arg)
{
    struct redis_client *c = arg;
    bool sent = false;

    (void)fd;
    (void)what;
    c->flush_armed = false;
    for (size_t i = 0; i < c->nscripts; i++) {
        if (c->nqueued[i] > 0) {
            sent = flush_queue(c, i) || sent;
        }
    }
    if (sent && c->ac != NULL) {
        write_now(c);
    }
}

/* 'call' (its deadline armed) waits for its batch. */
static void
queue_call(struct redis_client *c, size_t idx, struct redis_call *call)
{
    c->queue[idx * BATCH_MAX + c->nqueued[idx]++] = call;
    c->queued++;
    call->queued = true;
    if (c->nqueued[idx] == BATCH_MAX) {
        if (flush_queue(c, idx) && c->ac != NULL) {
            write_now(c);
        }
    } else if (!c->flush_armed) {
        c->flush_armed = true;
        /* Run after the events this turn has already found. */
        event_active(c->flush_ev, EV_TIMEOUT, 1);
    }
}

/*
 * A READONLY reply means the server was demoted to a replica (a
 * failover): the name may point at the new primary now. Any other reply
 * means the server writes (again), and that the connection works: the
 * next one lost is retried at the shortest backoff.
 */
static void
note_role(struct redis_client *c, redisAsyncContext *ac,
          const redisReply *reply)
{
    if (reply->type == REDIS_REPLY_ERROR &&
        strncmp(reply->str, "READONLY", 8) == 0 && ac == c->ac) {
        log_warn("redis: %s:%u: READONLY, a replica now: reconnecting", c->host,
                 (unsigned)c->port);
        schedule_retry(c);
        drop_connection(c); /* hiredis frees it once this returns */
    } else if (reply->type != REDIS_REPLY_ERROR) {
        c->backoff_ms = BACKOFF_MIN_MS;
    }
}

/*
 * A reply of a shape no call of this kind is answered with (a batch's
 * array of strings to one call, an array of another length to a batch)
 * is most likely another command's: a reply skipped on the way puts every
 * later one a command late, and only a new connection pairs them again.
 * It is not a sign that the server works, so the backoff goes on.
 */
static void
drop_out_of_step(struct redis_client *c, redisAsyncContext *ac,
                 const char *what)
{
    if (ac != c->ac) {
        return;
    }
    log_warn("redis: %s:%u: %s got a reply of another shape: replies may be "
             "out of step; reconnecting",
             c->host, (unsigned)c->port, what);
    schedule_retry(c);
    drop_connection(c); /* hiredis frees it once this returns */
}

/* A batch's reply to its 'n' calls: an error, or an array of 'n' strings
 * (a call's integers, packed) or errors. */
static bool
fits_batch(const redisReply *reply, size_t n)
{
    if (reply->type == REDIS_REPLY_ERROR) {
        return true;
    }
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != n) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        int t = reply->element[i]->type;

        if (t != REDIS_REPLY_STRING && t != REDIS_REPLY_ERROR) {
            return false;
        }
    }
    return true;
}

/* A script's own reply to one call: an error, or an array of integers. */
static bool
fits_one_call(const redisReply *reply)
{
    if (reply->type == REDIS_REPLY_ERROR) {
        return true;
    }
    if (reply->type != REDIS_REPLY_ARRAY) {
        return false;
    }
    for (size_t i = 0; i < reply->elements; i++) {
        if (reply->element[i]->type != REDIS_REPLY_INTEGER) {
            return false;
        }
    }
    return true;
}

/* Answers 'call' with 'reply', one that fits_one_call(). */
static void
parse_reply(struct redis_call *call, const redisReply *reply)
{
    if (reply->type == REDIS_REPLY_ERROR) {
        call_answer(call, REDIS_CALL_ERROR, reply->str);
        return;
    }
    if (reply->elements > REDIS_MAX_INTS) {
        call_answer(call, REDIS_CALL_ERROR, "unexpected reply");
        return;
    }
    for (size_t i = 0; i < reply->elements; i++) {
        call->ints[i] = reply->element[i]->integer;
    }
    call->nints = reply->elements;
    call_answer(call, REDIS_CALL_OK, NULL);
}

static void
on_call_reply(redisAsyncContext *ac, void *r, void *privdata)
{
    struct redis_call *call = privdata;
    struct redis_client *c = call->client;
    redisReply *reply = r;

    call->in_hiredis = false;
    c->in_flight--;
    if (reply != NULL) {
        c->progress_ms = clock_mono_ms();
    }
    if (reply != NULL && !fits_one_call(reply)) {
        /* Late or not, the replies after it are out of step too. */
        if (call->finished) {
            call_release(call);
        } else {
            call_answer(call, REDIS_CALL_ERROR, "unexpected reply");
        }
        drop_out_of_step(c, ac, "a call");
        return;
    }
    if (call->finished) {
        call_release(call); /* a late reply, or a cancelled call */
        return;
    }
    if (reply == NULL) {
        call_answer(call, REDIS_CALL_DOWN, NULL);
        return;
    }
    if (reply->type == REDIS_REPLY_ERROR && !call->resent &&
        strncmp(reply->str, "NOSCRIPT", 8) == 0) {
        /* The server forgot the script (restart, failover, SCRIPT
         * FLUSH): send it whole, which caches it again. Same deadline. */
        call->resent = true;
        c->stats.noscript++;
        if (ac != c->ac || !send_call(c, call)) {
            call_answer(call, REDIS_CALL_DOWN, NULL);
        }
        return;
    }
    note_role(c, ac, reply);
    parse_reply(call, reply);
}

/*
 * A call's reply in a batch (lua/README.md, "Batches"): its error, or its
 * integers in decimal joined by ':' in one string.
 */
static void
parse_packed(struct redis_call *call, const redisReply *e)
{
    if (e->type == REDIS_REPLY_ERROR) {
        call_answer(call, REDIS_CALL_ERROR, e->str);
        return;
    }
    if (e->type != REDIS_REPLY_STRING) {
        call_answer(call, REDIS_CALL_ERROR, "unexpected reply");
        return;
    }
    call->nints = scriptcall_unpack(e->str, e->len, call->ints, REDIS_MAX_INTS);
    if (call->nints == 0) {
        call_answer(call, REDIS_CALL_ERROR, "unexpected reply");
        return;
    }
    call_answer(call, REDIS_CALL_OK, NULL);
}

/*
 * The reply to a batch: an array with each call's reply, or one error
 * for all of them (NOSCRIPT is answered by sending the batch again with
 * EVAL, as for one call).
 */
static void
on_batch_reply(redisAsyncContext *ac, void *r, void *privdata)
{
    struct redis_batch *b = privdata;
    struct redis_client *c = b->client;
    redisReply *reply = r;
    size_t live = 0;
    bool out_of_step;

    c->in_flight -= b->n;
    if (reply != NULL) {
        c->progress_ms = clock_mono_ms();
    }
    for (size_t i = 0; i < b->n; i++) {
        b->calls[i]->in_hiredis = false;
        live += !b->calls[i]->finished;
    }
    if (live > 0 && reply != NULL && reply->type == REDIS_REPLY_ERROR &&
        !b->resent && strncmp(reply->str, "NOSCRIPT", 8) == 0) {
        size_t n = 0;

        b->resent = true;
        c->stats.noscript++;
        /* Only the calls still awaited go again, as for one call. */
        for (size_t i = 0; i < b->n; i++) {
            if (b->calls[i]->finished) {
                call_release(b->calls[i]);
            } else {
                b->calls[n++] = b->calls[i];
            }
        }
        b->n = n;
        if (ac == c->ac && send_batch(c, b)) {
            return;
        }
        reply = NULL; /* answered DOWN below */
    }
    /* An array of another length, or a reply of another kind (one call's
     * integers among them). */
    out_of_step = reply != NULL && !fits_batch(reply, b->n);
    if (reply != NULL && !out_of_step) {
        note_role(c, ac, reply);
    }
    for (size_t i = 0; i < b->n; i++) {
        struct redis_call *call = b->calls[i];

        if (call->finished) {
            call_release(call); /* a late reply, or a cancelled call */
        } else if (reply == NULL) {
            call_answer(call, REDIS_CALL_DOWN, NULL);
        } else if (reply->type == REDIS_REPLY_ERROR) {
            parse_reply(call, reply);
        } else if (!out_of_step) {
            parse_packed(call, reply->element[i]);
        } else {
            call_answer(call, REDIS_CALL_ERROR, "unexpected reply");
        }
    }
    if (out_of_step) {
        drop_out_of_step(c, ac, "a batch");
    }
    free(b);
}

/* The length of word 'i' of 'words': from 'lens', else measured. */
static size_t
word_len(const char *const *words, const size_t *lens, size_t i)
{
    return lens != NULL ? lens[i] : strlen(words[i]);
}

static struct redis_call *
call_new(struct redis_client *c, size_t script, const struct redis_words *w,
         redis_script_cb *cb, void *arg)
{
    struct redis_call *call;
    size_t nkeys = w->nkeys, nargs = w->nargs;
    size_t size = num_bulk_size(nkeys);
    /* One allocation: the record, its event, then the tail. */
    size_t ev_at = (sizeof(*call) + 15) & ~(size_t)15;
    size_t tail_at = ev_at + event_get_struct_event_size();
    char *p;

    for (size_t i = 0; i < nkeys; i++) {
        size += bulk_size(word_len(w->keys, w->key_lens, i));
    }
    for (size_t i = 0; i < nargs; i++) {
        size += bulk_size(word_len(w->args, w->arg_lens, i));
    }
    if (size <= SPARE_TAIL && (call = TAILQ_FIRST(&c->spare)) != NULL) {
        /* Its event is still assigned to it, on this client's base. */
        TAILQ_REMOVE(&c->spare, call, link);
        c->nspare--;
        memset(call, 0, sizeof(*call));
        call->ev = (struct event *)((char *)call + ev_at);
        call->spare_size = true;
    } else {
        call = xmalloc(tail_at + (size <= SPARE_TAIL ? SPARE_TAIL : size));
        memset(call, 0, sizeof(*call));
        call->ev = (struct event *)((char *)call + ev_at);
        call->spare_size = size <= SPARE_TAIL;
        event_assign(call->ev, c->base, -1, 0, on_call_event, call);
    }
    call->client = c;
    call->script = script;
    call->cb = cb;
    call->arg = arg;
    call->argc = 3 + nkeys + nargs;
    call->nkeys = nkeys;
    call->nargs = nargs;
    call->tail = p = (char *)call + tail_at;
    call->tail_len = size;
    p = put_num(p, nkeys);
    call->keys_at = (size_t)(p - call->tail);
    for (size_t i = 0; i < nkeys; i++) {
        p = put_bulk(p, w->keys[i], word_len(w->keys, w->key_lens, i));
    }
    call->args_at = (size_t)(p - call->tail);
    for (size_t i = 0; i < nargs; i++) {
        p = put_bulk(p, w->args[i], word_len(w->args, w->arg_lens, i));
    }
    assert(p == call->tail + size);
    TAILQ_INSERT_TAIL(&c->calls, call, link);
    return call;
}

static size_t
script_index(const struct redis_client *c, const struct lua_script *s)
{
    if (s >= c->scripts && s < c->scripts + c->nscripts) {
        return (size_t)(s - c->scripts);
    }
    for (size_t i = 0; i < c->nscripts; i++) {
        if (strcmp(c->scripts[i].name, s->name) == 0) {
            return i;
        }
    }
    return c->nscripts;
}

static struct redis_call *
eval_on(struct redis_client *c, const struct lua_script *script,
        const struct redis_words *w, bool asking, uint64_t timeout_ms,
        redis_script_cb *cb, void *arg)
{
    size_t idx = script_index(c, script);
    struct redis_call *call;
    struct timeval tv;

    /* Not from a callback that redis_client_free() is running. */
    assert(!c->freeing);
    c->stats.calls++;
    call = call_new(c, idx < c->nscripts ? idx : 0, w, cb, arg);
    call->asking = asking;
    if (idx == c->nscripts) {
        call_answer(call, REDIS_CALL_ERROR, "unknown script");
        return call;
    }
    if (c->state == CONN_READY &&
        c->in_flight + c->queued >= c->max_in_flight) {
        check_stall(c);
        if (c->state == CONN_READY) {
            call_answer(call, REDIS_CALL_OVERLOADED, NULL);
            return call;
        }
    }
    if (c->state != CONN_READY) {
        call_answer(call, REDIS_CALL_DOWN, NULL);
        return call;
    }
    tv = clock_tv(timeout_ms);
    if (c->batching && c->scripts[idx].batch && !asking) {
        evtimer_add(call->ev, &tv);
        queue_call(c, idx, call);
        return call;
    }
    if (!send_call(c, call)) {
        call_answer(call, REDIS_CALL_DOWN, NULL);
        return call;
    }
    evtimer_add(call->ev, &tv);
    if (++c->unflushed >= FLUSH_EVERY) {
        /* The call is fully recorded: should the write fail, it is
         * answered DOWN from the loop. */
        write_now(c);
    }
    return call;
}

/* Cluster mode: the answer of the cluster client, for the caller. */
static void
on_routed(enum redis_status status, const long long *ints, size_t nints,
          const char *error, void *arg)
{
    struct redis_call *call = arg;
    redis_script_cb *cb = call->cb;
    void *cb_arg = call->arg;

    free(call);
    cb(status, ints, nints, error, cb_arg);
}

struct redis_call *
redis_client_eval(struct redis_client *c, const struct lua_script *script,
                  const char *const *keys, size_t nkeys,
                  const char *const *args, size_t nargs, redis_script_cb *cb,
                  void *arg)
{
    struct redis_words w = {keys, NULL, nkeys, args, NULL, nargs};

    return redis_client_eval_within(c, script, &w, c->timeout_ms, cb, arg);
}

struct redis_call *
redis_client_eval_within(struct redis_client *c,
                         const struct lua_script *script,
                         const struct redis_words *w, uint64_t timeout_ms,
                         redis_script_cb *cb, void *arg)
{
    struct redis_call *call;

    if (timeout_ms > c->timeout_ms) {
        timeout_ms = c->timeout_ms;
    }
    if (c->cluster == NULL) {
        return eval_on(c, script, w, false, timeout_ms, cb, arg);
    }
    call = xcalloc(1, sizeof(*call));
    call->client = c;
    call->cb = cb;
    call->arg = arg;
    call->routed = rcluster_eval(c->cluster, script, w->keys, w->nkeys, w->args,
                                 w->nargs, timeout_ms, on_routed, call);
    return call;
}

struct redis_call *
redis_client_eval_node(struct redis_client *c, const struct lua_script *script,
                       const char *const *keys, size_t nkeys,
                       const char *const *args, size_t nargs, bool asking,
                       uint64_t timeout_ms, redis_script_cb *cb, void *arg)
{
    struct redis_words w = {keys, NULL, nkeys, args, NULL, nargs};

    assert(c->cluster == NULL);
    return eval_on(c, script, &w, asking, timeout_ms, cb, arg);
}

void
redis_call_cancel(struct redis_call *call)
{
    if (call->routed != NULL) {
        rcluster_call_cancel(call->routed);
        free(call);
        return;
    }
    assert(!call->finished);
    call->finished = true;
    event_del(call->ev);
    call_release(call);
}

/*
 * The client.
 */

static bool
is_numeric_host(const char *host)
{
    struct netaddr a;

    return netaddr_parse(host, &a) == 0;
}

static void on_map_event(evutil_socket_t fd, short what, void *arg);

/* A client of 'host':'port', or of the primary Sentinel names when
 * 'host' is NULL. */
static struct redis_client *
client_new(struct event_base *base, const struct redis_conf *conf,
           const char *host, uint16_t port, const struct lua_script *scripts,
           size_t nscripts, size_t max_in_flight)
{
    struct redis_client *c = xcalloc(1, sizeof(*c));

    c->base = base;
    if (host == NULL) {
        c->master = xstrdup(conf->sentinel_master);
        c->host = xstrdup(conf->sentinel_master); /* until an answer */
        c->port = 0;
    } else {
        c->host = xstrdup(host);
        c->port = port;
    }
    c->db = conf->db;
    c->user = conf->user != NULL ? xstrdup(conf->user) : NULL;
    c->password = conf->password != NULL ? xstrdup(conf->password) : NULL;
    c->timeout_ms = conf->timeout_ms;
    c->connect_timeout_ms = conf->timeout_ms > CONNECT_TIMEOUT_MIN_MS
                                ? conf->timeout_ms
                                : CONNECT_TIMEOUT_MIN_MS;
    c->numeric_host = is_numeric_host(c->host);
    c->scripts = scripts;
    c->nscripts = nscripts;
    c->shas = xcalloc(nscripts > 0 ? nscripts : 1, sizeof(*c->shas));
    for (size_t i = 0; i < nscripts; i++) {
        (void)scripts_sha1(&scripts[i], c->shas[i]);
    }
    /* 0 would refuse every call: read it as "no cap". */
    c->max_in_flight = max_in_flight > 0 ? max_in_flight : SIZE_MAX;
    c->connect_timer = evtimer_new(base, on_connect_timeout, c);
    c->retry_timer = evtimer_new(base, on_retry_timer, c);
    c->stall_timer = evtimer_new(base, on_stall_timer, c);
    c->map_ev = evtimer_new(base, on_map_event, c);
    c->backoff_ms = BACKOFF_MIN_MS;
    c->rng =
        backoff_seed((uint64_t)(uintptr_t)c ^ (uint64_t)clock_mono_ms() << 20 ^
                     (uint64_t)getpid() << 40);
    TAILQ_INIT(&c->calls);
    TAILQ_INIT(&c->spare);
    c->batching = true;
    c->queue =
        xcalloc((nscripts > 0 ? nscripts : 1) * BATCH_MAX, sizeof(*c->queue));
    c->nqueued = xcalloc(nscripts > 0 ? nscripts : 1, sizeof(*c->nqueued));
    c->flush_ev = event_new(base, -1, 0, on_flush, c);
    if (c->master != NULL) {
        c->sentinel = sentinel_new(base, conf, c->connect_timeout_ms,
                                   on_sentinel_switch, on_sentinel_watching, c);
    }
    start_attempt(c);
    return c;
}

struct redis_client *
redis_client_new(struct event_base *base, const struct redis_conf *conf,
                 const struct lua_script *scripts, size_t nscripts,
                 size_t max_in_flight)
{
    struct redis_client *c;

    if (conf->ncluster_nodes > 0) {
        c = xcalloc(1, sizeof(*c));
        c->base = base;
        c->timeout_ms = conf->timeout_ms;
        c->cluster = rcluster_new(base, conf, scripts, nscripts, max_in_flight);
        return c;
    }
    if (conf->sentinel_master != NULL) {
        return client_new(base, conf, NULL, 0, scripts, nscripts,
                          max_in_flight);
    }
    return client_new(base, conf, conf->host != NULL ? conf->host : "127.0.0.1",
                      conf->port, scripts, nscripts, max_in_flight);
}

struct redis_client *
redis_client_node_new(struct event_base *base, const struct redis_conf *conf,
                      const char *host, uint16_t port,
                      const struct lua_script *scripts, size_t nscripts,
                      size_t max_in_flight)
{
    struct redis_client *c =
        client_new(base, conf, host, port, scripts, nscripts, max_in_flight);

    /* The cluster client routes each call by its own slot. */
    c->batching = false;
    return c;
}

void
redis_client_free(struct redis_client *c)
{
    struct redis_call *call;

    if (c == NULL) {
        return;
    }
    if (c->cluster != NULL) {
        rcluster_free(c->cluster);
        free(c);
        return;
    }
    c->map_cb = NULL; /* its answer is never delivered */
    /* While set, records are only marked, never freed: the loop below
     * calls out, and a callback may cancel another call. */
    c->freeing = true;
    TAILQ_FOREACH (call, &c->calls, link) {
        if (call->finished) {
            continue;
        }
        call->finished = true;
        event_del(call->ev);
        c->stats.down++;
        call->cb(REDIS_CALL_DOWN, NULL, 0, NULL, call->arg);
    }
    /* Outside any hiredis callback: hiredis hands every record it holds
     * back to on_call_reply (NULL) and runs on_disconnect, which see that
     * c->ac is no longer theirs. */
    drop_connection(c);
    lookup_abandon(c);
    sentinel_free(c->sentinel);
    while ((call = TAILQ_FIRST(&c->calls)) != NULL) {
        TAILQ_REMOVE(&c->calls, call, link);
        event_del(call->ev);
        free(call->error);
        free(call);
    }
    while ((call = TAILQ_FIRST(&c->spare)) != NULL) {
        TAILQ_REMOVE(&c->spare, call, link);
        free(call);
    }
    event_free(c->connect_timer);
    event_free(c->retry_timer);
    event_free(c->stall_timer);
    event_free(c->map_ev);
    event_free(c->flush_ev);
    free(c->queue);
    free(c->nqueued);
    cluster_map_free(c->map);
    free(c->shas);
    free(c->host);
    free(c->master);
    free(c->user);
    free(c->password);
    free(c);
}

bool
redis_client_ready(const struct redis_client *c)
{
    if (c->cluster != NULL) {
        return rcluster_ready(c->cluster);
    }
    return c->state == CONN_READY;
}

const struct redis_stats *
redis_client_stats(const struct redis_client *c)
{
    if (c->cluster != NULL) {
        return rcluster_stats(c->cluster);
    }
    return &c->stats;
}

bool
redis_client_first_attempt(const struct redis_client *c)
{
    return !c->was_ready && !c->failing;
}

/*
 * The slot map.
 */

/* Values in the tree of 'r'. */
static size_t
count_values(const redisReply *r)
{
    size_t n = 1;

    if (r->type == REDIS_REPLY_ARRAY) {
        for (size_t i = 0; i < r->elements; i++) {
            n += count_values(r->element[i]);
        }
    }
    return n;
}

/* 'r' into 'out', its elements taken from '*pool' (borrowing the
 * reply's strings). */
static void
fill_value(const redisReply *r, struct cluster_value *out,
           struct cluster_value **pool)
{
    struct cluster_value *elems;

    memset(out, 0, sizeof(*out));
    switch (r->type) {
    case REDIS_REPLY_INTEGER:
        out->type = CLUSTER_VALUE_INTEGER;
        out->integer = r->integer;
        break;
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
        out->type = CLUSTER_VALUE_STRING;
        out->str = r->str;
        out->len = r->len;
        break;
    case REDIS_REPLY_ARRAY:
        out->type = CLUSTER_VALUE_ARRAY;
        elems = *pool;
        *pool += r->elements;
        for (size_t i = 0; i < r->elements; i++) {
            fill_value(r->element[i], &elems[i], pool);
        }
        out->elems = elems;
        out->n = r->elements;
        break;
    default:
        out->type = CLUSTER_VALUE_OTHER;
        break;
    }
}

static void
on_map_reply(redisAsyncContext *ac, void *r, void *privdata)
{
    struct redis_client *c = ac->data;
    redisReply *reply = r;
    struct cluster_value *values;
    struct cluster_value *pool;

    if (c->map_cb == NULL || (uintptr_t)privdata != c->map_gen ||
        evtimer_pending(c->map_ev, NULL) == 0) {
        return; /* freed, asked again, or the deadline went by */
    }
    if (reply == NULL) {
        c->map_why = "the connection was lost";
    } else if (reply->type == REDIS_REPLY_ERROR) {
        /* "ERR This instance has cluster support disabled", NOAUTH... */
        snprintf(c->map_error, sizeof(c->map_error), "CLUSTER SLOTS: %s",
                 reply->str);
        c->map_why = c->map_error;
    } else {
        values = xcalloc(count_values(reply), sizeof(*values));
        pool = values + 1;
        fill_value(reply, values, &pool);
        c->map = cluster_map_from_slots(values, c->host, &c->map_why);
        free(values);
    }
    evtimer_del(c->map_ev);
    event_active(c->map_ev, EV_TIMEOUT, 1);
}

static void
on_map_event(evutil_socket_t fd, short what, void *arg)
{
    struct redis_client *c = arg;
    redis_map_cb *cb = c->map_cb;
    void *cb_arg = c->map_arg;
    struct cluster_map *map = c->map;
    char why[sizeof(c->map_error)];

    (void)fd;
    (void)what;
    /* A copy: 'cb' may free 'c'. */
    snprintf(why, sizeof(why), "%s",
             c->map_why != NULL ? c->map_why : "timed out");
    c->map_cb = NULL;
    c->map = NULL;
    c->map_why = NULL;
    c->map_gen++; /* a late reply is not this ask's */
    if (cb != NULL) {
        cb(map, map != NULL ? NULL : why, cb_arg); /* may free 'c' */
    } else {
        cluster_map_free(map);
    }
}

bool
redis_client_ask_map(struct redis_client *c, redis_map_cb *cb, void *arg)
{
    const char *argv[] = {"CLUSTER", "SLOTS"};
    static const size_t len[] = {7, 5};
    struct timeval tv = clock_tv(c->connect_timeout_ms);

    if (c->state != CONN_READY || c->map_cb != NULL) {
        return false;
    }
    if (redisAsyncCommandArgv(c->ac, on_map_reply,
                              (void *)(uintptr_t)c->map_gen, 2, argv,
                              len) == REDIS_ERR) {
        return false;
    }
    c->map_cb = cb;
    c->map_arg = arg;
    evtimer_add(c->map_ev, &tv);
    return true;
}
