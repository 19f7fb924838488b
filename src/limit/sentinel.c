/*
 * sentinel.c - the two conversations the Redis client has with Redis
 * Sentinel, each on a "link" (one connection at a time to one sentinel):
 * the ask (SENTINEL GET-MASTER-ADDR-BY-NAME, sentinel after sentinel until
 * one answers) and the watch (SUBSCRIBE +switch-master, kept open).
 *
 * Lifetimes follow redis.c: a link lets go of its context by setting
 * l->ac to NULL first, so that what the context still runs (NULL replies,
 * its disconnect callback) sees it is stale; redisAsyncFree() is never
 * called from the connect or disconnect callbacks, only from our timers,
 * from sentinel_ask/cancel/free and from reply callbacks (where hiredis
 * defers the free until the callback returns). The ask's answer is
 * delivered from the link's timer, never from inside hiredis.
 */
#include "sentinel.h"
#include "backoff.h"
#include "clock.h"
#include "config.h"
#include "log.h"
#include "replyguard.h"
#include "resolve.h"
#include "sentinel_parse.h"
#include "xmalloc.h"

#include <netdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <hiredis/adapters/libevent.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

/* Before the watch tries again, after a round in which every sentinel
 * failed or after losing a subscription: doubling from the first to the
 * second, half of it plus up to as much again at random (as redis.c's
 * backoff). A subscription that lasted WATCH_PAUSE_MAX_MS resets it. */
#define WATCH_PAUSE_MIN_MS 100
#define WATCH_PAUSE_MAX_MS 2000
/* How often the subscription is looked at: its unparsed input
 * (replyguard_overflowing()), and its heartbeat. A sentinel that hangs,
 * or a link cut without a reset, would otherwise keep a worker deaf to
 * '+switch-master' for as long as TCP takes to notice. Each look sends
 * SUBSCRIBE again unless one is unanswered; Redis confirms a repeated
 * SUBSCRIBE as it did the first (and hiredis keeps one callback per
 * channel, not one per command, as it would for a PING). One unanswered
 * for the link's timeout loses the subscription. */
#define WATCH_CHECK_MS 1000
/* Switches are followed at most this often. Each one costs the client its
 * connection and the calls in flight; a sentinel announcing one after
 * another (a flood, or a bug) would keep it reconnecting. The last one
 * heard meanwhile is followed when the gap is over: failovers of one
 * master are minutes apart (failover-timeout), so a real one waits at
 * most this long. */
#define SWITCH_GAP_MS 1000

enum link_state {
    LINK_IDLE,       /* nothing open, nothing armed */
    LINK_LOOKUP,     /* the node's name is being looked up */
    LINK_OPEN,       /* connecting, or waiting for the answer */
    LINK_SUBSCRIBED, /* the watch: subscribed, waiting for messages */
    LINK_DONE,       /* the ask: answered; delivery is due from the timer */
    LINK_PAUSED,     /* the watch: every node failed, or the subscription
                        was lost; next try on the timer */
};

struct link {
    struct sentinel *s;      /* the owner; borrowed */
    bool watch;              /* the subscription, else the ask */
    enum link_state state;   /* of this link */
    size_t node;             /* index into s->nodes being tried */
    size_t tried;            /* nodes tried in this round, before 'node' */
    redisAsyncContext *ac;   /* NULL unless LINK_OPEN or LINK_SUBSCRIBED */
    struct replyguard guard; /* of 'ac' (replyguard.h) */
    struct resolve *lookup;  /* while LINK_LOOKUP, or NULL */
    struct event *timer;     /* deadline, pause, or delivery; owned */
    bool failing;            /* a failure was logged since the last
                                success: later ones are debug */
    uint64_t pause_ms;       /* the watch: next pause, before jitter */
    int64_t subscribed_ms;   /* the watch: when the subscription began */
    int64_t beat_ms;         /* the watch: when the SUBSCRIBE unanswered
                                was sent, or 0 */
};

struct sentinel {
    struct event_base *base;        /* borrowed */
    char *master;                   /* master name; owned */
    struct redis_node *nodes;       /* the sentinels; owned, hosts too */
    size_t nnodes;                  /* entries in 'nodes' */
    unsigned *node_failures;        /* per node, failures so far: picks which
                                       of a name's addresses to try; owned */
    char *password;                 /* AUTH to the sentinels, or NULL; owned */
    uint64_t timeout_ms;            /* per connection and answer */
    size_t answered;                /* the node that last answered an ask:
                                       the next ask starts there */
    struct link ask;                /* GET-MASTER-ADDR-BY-NAME */
    struct link watch;              /* SUBSCRIBE +switch-master */
    sentinel_addr_cb *ask_cb;       /* the pending ask's, or NULL */
    void *ask_arg;                  /* for ask_cb; borrowed */
    char ip[SENTINEL_HOST_MAX];     /* LINK_DONE: the answer (an address or,
                                       with announce-hostnames, a name), ""
                                       for none */
    uint16_t port;                  /* LINK_DONE: with 'ip' */
    sentinel_addr_cb *on_switch;    /* the owner's */
    int64_t switched_ms;            /* when on_switch was last called, or
                                       INT64_MIN */
    struct sentinel_addr held_from; /* the last switch heard within the
                                       gap, followed when 'switch_timer'
                                       fires: the old address */
    struct sentinel_addr held_to;   /* and the new one */
    struct event *switch_timer;     /* ends the gap; pending only while
                                       a switch is held; owned */
    sentinel_watch_cb *on_watch;    /* the owner's */
    uint64_t rng;                   /* xorshift state for jitter */
    void *switch_arg;               /* for on_switch; borrowed */
};

static void link_open(struct link *l);

/* Lets go of whatever the link has open; not from the connect or
 * disconnect callbacks (there: set l->ac to NULL only). */
static void
link_close(struct link *l)
{
    redisAsyncContext *ac = l->ac;

    l->ac = NULL;
    if (ac != NULL) {
        redisAsyncFree(ac);
    }
    if (l->lookup != NULL) {
        resolve_cancel(l->lookup);
        l->lookup = NULL;
    }
    evtimer_del(l->timer);
    l->state = LINK_IDLE;
}

/* The ask is over: 'ip' NULL if no sentinel answered. Delivered from the
 * timer, so that the owner may ask again or free from its callback. */
static void
ask_finish(struct sentinel *s, const char *ip, uint16_t port)
{
    struct link *l = &s->ask;

    link_close(l);
    snprintf(s->ip, sizeof(s->ip), "%s", ip != NULL ? ip : "");
    s->port = port;
    l->state = LINK_DONE;
    event_active(l->timer, EV_TIMEOUT, 1);
}

/* The watch waits before its next try; see WATCH_PAUSE_MIN_MS. */
static void
watch_pause(struct link *l)
{
    struct sentinel *s = l->s;
    struct timeval tv;

    if (l->pause_ms < WATCH_PAUSE_MIN_MS) {
        l->pause_ms = WATCH_PAUSE_MIN_MS;
    }
    tv = clock_tv(backoff_jitter(l->pause_ms, &s->rng));
    l->pause_ms = backoff_double(l->pause_ms, WATCH_PAUSE_MAX_MS);
    l->state = LINK_PAUSED;
    evtimer_add(l->timer, &tv);
}

/* The node being tried failed ('why'): the next one. The link's context
 * is already let go of. */
static void
link_failed(struct link *l, const char *why)
{
    struct sentinel *s = l->s;
    const struct redis_node *n = &s->nodes[l->node];

    log_msg(l->failing ? LOG_DEBUG : LOG_WARN, "redis: sentinel %s:%u: %s: %s",
            n->host, (unsigned)n->port, l->watch ? "subscribe" : "ask", why);
    l->failing = true;
    l->state = LINK_IDLE;
    s->node_failures[l->node]++;
    l->node = (l->node + 1) % s->nnodes;
    if (++l->tried < s->nnodes) {
        link_open(l);
        return;
    }
    l->tried = 0;
    if (!l->watch) {
        ask_finish(s, NULL, 0);
        return;
    }
    watch_pause(l);
}

static void
on_auth_reply(redisAsyncContext *ac, void *r, void *privdata)
{
    struct link *l = privdata;
    redisReply *reply = r;
    char why[256];

    if (reply == NULL || ac != l->ac || reply->type != REDIS_REPLY_ERROR) {
        return;
    }
    snprintf(why, sizeof(why), "AUTH: %s", reply->str);
    link_close(l); /* hiredis frees it once this returns */
    link_failed(l, why);
}

static void
on_ask_reply(redisAsyncContext *ac, void *r, void *privdata)
{
    struct link *l = privdata;
    redisReply *reply = r;
    struct sentinel_addr addr;

    if (reply == NULL || ac != l->ac) {
        return;
    }
    if (reply->type == REDIS_REPLY_ERROR) {
        link_close(l); /* hiredis frees it once this returns */
        link_failed(l, reply->str);
        return;
    }
    if (reply->type == REDIS_REPLY_NIL) {
        /* This sentinel does not monitor that name. */
        link_close(l);
        link_failed(l, "does not know the master name");
        return;
    }
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
        reply->element[0]->type != REDIS_REPLY_STRING ||
        reply->element[1]->type != REDIS_REPLY_STRING ||
        !sentinel_parse_addr(reply->element[0]->str, reply->element[0]->len,
                             reply->element[1]->str, reply->element[1]->len,
                             &addr)) {
        link_close(l);
        link_failed(l, "unexpected reply");
        return;
    }
    l->failing = false;
    l->s->answered = l->node;
    ask_finish(l->s, addr.host, addr.port);
}

/* Tells the owner of a switch, now. */
static void
switch_follow(struct sentinel *s, const struct sentinel_addr *from,
              const struct sentinel_addr *to)
{
    log_info("redis: sentinel: %s switched from %s:%u to %s:%u", s->master,
             from->host, (unsigned)from->port, to->host, (unsigned)to->port);
    s->switched_ms = clock_mono_ms();
    s->on_switch(to->host, to->port, s->switch_arg);
}

/* The gap after a switch is over: the last one heard in it. */
static void
on_switch_timer(evutil_socket_t fd, short what, void *arg)
{
    struct sentinel *s = arg;

    (void)fd;
    (void)what;
    switch_follow(s, &s->held_from, &s->held_to);
}

/* '+switch-master <name> <old-host> <old-port> <new-host> <new-port>':
 * followed at once, or at the end of the gap (SWITCH_GAP_MS). */
static void
watch_message(struct sentinel *s, const char *text, size_t len)
{
    struct sentinel_addr from, to;
    int64_t since;

    if (!sentinel_parse_switch(text, len, s->master, &from, &to)) {
        return;
    }
    if (s->switched_ms == INT64_MIN ||
        (since = clock_mono_ms() - s->switched_ms) >= SWITCH_GAP_MS) {
        switch_follow(s, &from, &to);
        return;
    }
    log_debug("redis: sentinel: %s switched from %s:%u to %s:%u: followed "
              "in %lld ms (at most one switch a second)",
              s->master, from.host, (unsigned)from.port, to.host,
              (unsigned)to.port, (long long)(SWITCH_GAP_MS - since));
    s->held_from = from;
    s->held_to = to;
    if (!evtimer_pending(s->switch_timer, NULL)) {
        struct timeval tv = clock_tv((uint64_t)(SWITCH_GAP_MS - since));

        evtimer_add(s->switch_timer, &tv);
    }
}

static void
on_watch_reply(redisAsyncContext *ac, void *r, void *privdata)
{
    struct link *l = privdata;
    redisReply *reply = r;
    const redisReply *kind;

    if (reply == NULL || ac != l->ac) {
        return;
    }
    if (reply->type == REDIS_REPLY_ERROR) {
        /* Never in hiredis 0.14.1: SUBSCRIBE's callback is not queued
         * with the others, so hiredis takes an error to it (NOAUTH,
         * NOPERM) as unasked for and disconnects, and on_link_disconnect
         * reports the text. Kept for hiredis versions that deliver it. */
        char why[256];

        snprintf(why, sizeof(why), "%s", reply->str);
        link_close(l);
        link_failed(l, why);
        return;
    }
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 3 ||
        reply->element[0]->type != REDIS_REPLY_STRING) {
        return;
    }
    kind = reply->element[0];
    if (strcmp(kind->str, "subscribe") == 0 && l->state == LINK_SUBSCRIBED) {
        l->beat_ms = 0; /* the heartbeat's answer (WATCH_CHECK_MS) */
    } else if (strcmp(kind->str, "subscribe") == 0) {
        /* Messages may be hours apart: no deadline for them, only the
         * looks of on_watch_timer(). */
        struct timeval tv = clock_tv(WATCH_CHECK_MS);

        evtimer_add(l->timer, &tv);
        l->beat_ms = 0;
        l->state = LINK_SUBSCRIBED;
        l->tried = 0;
        l->subscribed_ms = clock_mono_ms();
        log_debug("redis: sentinel %s:%u: watching %s",
                  l->s->nodes[l->node].host,
                  (unsigned)l->s->nodes[l->node].port, l->s->master);
        /* A switch may have gone by while nobody listened. */
        l->s->on_watch(l->s->switch_arg);
    } else if (strcmp(kind->str, "message") == 0 &&
               reply->element[2]->type == REDIS_REPLY_STRING) {
        watch_message(l->s, reply->element[2]->str, reply->element[2]->len);
    }
}

/* The watch's sentinel answered where our master's primary is: it
 * monitors it, or it does not (nil), or it is no sentinel (an error). */
static void
on_watch_known(redisAsyncContext *ac, void *r, void *privdata)
{
    struct link *l = privdata;
    redisReply *reply = r;
    char why[256];

    if (reply == NULL || ac != l->ac || reply->type == REDIS_REPLY_ARRAY) {
        return;
    }
    snprintf(why, sizeof(why), "%s",
             reply->type == REDIS_REPLY_NIL ? "does not know the master name"
             : reply->type == REDIS_REPLY_ERROR ? reply->str
                                                : "unexpected reply");
    link_close(l); /* hiredis frees it once this returns */
    link_failed(l, why);
}

static void
on_link_connect(const redisAsyncContext *cac, int status)
{
    struct link *l = cac->data;

    if (cac != l->ac || status != REDIS_ERR) {
        return;
    }
    /* hiredis frees the context when this returns; the reason is in the
     * inner context. */
    l->ac = NULL;
    link_failed(l, cac->c.errstr);
}

/*
 * The subscription is gone ('why'), its context let go of. Only one that
 * lasted counts as working: one that a sentinel confirms and then closes
 * at once must not make a busy loop, nor a warning each time. Not from
 * here (see top): the next try is on the timer, on the same node first.
 */
static void
watch_lost(struct link *l, const char *why)
{
    bool lasted =
        clock_mono_ms() - l->subscribed_ms >= (int64_t)WATCH_PAUSE_MAX_MS;

    if (lasted) {
        l->failing = false;
        l->pause_ms = WATCH_PAUSE_MIN_MS;
    }
    log_msg(l->failing ? LOG_DEBUG : LOG_WARN,
            "redis: sentinel %s:%u: subscription lost: %s",
            l->s->nodes[l->node].host, (unsigned)l->s->nodes[l->node].port,
            why);
    l->failing = true;
    l->tried = 0;
    watch_pause(l);
}

static void
on_link_disconnect(const redisAsyncContext *cac, int status)
{
    struct link *l = cac->data;
    const char *why = cac->errstr != NULL ? cac->errstr : "closed";

    (void)status;
    if (cac != l->ac) {
        return;
    }
    if (l->guard.refused != NULL) {
        why = l->guard.refused;
    }
    l->ac = NULL;
    evtimer_del(l->timer);
    if (l->state == LINK_SUBSCRIBED) {
        watch_lost(l, why);
        return;
    }
    link_failed(l, why);
}

/* Connects to 'ip' (the current node's) and queues the link's commands:
 * hiredis sends them once connected. */
static void
link_connect(struct link *l, const char *ip)
{
    struct sentinel *s = l->s;
    redisAsyncContext *ac = redisAsyncConnect(ip, s->nodes[l->node].port);
    const char *argv[3];
    int rc;

    if (ac == NULL || ac->err != 0) {
        char why[128];

        snprintf(why, sizeof(why), "%s",
                 ac != NULL ? ac->errstr : "cannot allocate a context");
        if (ac != NULL) {
            redisAsyncFree(ac);
        }
        link_failed(l, why);
        return;
    }
    ac->data = l;
    l->ac = ac;
    l->state = LINK_OPEN;
    redisEnableKeepAlive(&ac->c);
    redisLibeventAttach(ac, s->base);
    replyguard_attach(&l->guard, ac);
    redisAsyncSetConnectCallback(ac, on_link_connect);
    redisAsyncSetDisconnectCallback(ac, on_link_disconnect);
    rc = REDIS_OK;
    if (s->password != NULL) {
        argv[0] = "AUTH";
        argv[1] = s->password;
        rc = redisAsyncCommandArgv(ac, on_auth_reply, l, 2, argv, NULL);
    }
    if (rc == REDIS_OK && l->watch) {
        /* Asked first, as the ask does: a sentinel that does not monitor
         * our master would never announce its switch. */
        argv[0] = "SENTINEL";
        argv[1] = "GET-MASTER-ADDR-BY-NAME";
        argv[2] = s->master;
        rc = redisAsyncCommandArgv(ac, on_watch_known, l, 3, argv, NULL);
    }
    if (rc == REDIS_OK && l->watch) {
        argv[0] = "SUBSCRIBE";
        argv[1] = "+switch-master";
        rc = redisAsyncCommandArgv(ac, on_watch_reply, l, 2, argv, NULL);
    } else if (rc == REDIS_OK) {
        argv[0] = "SENTINEL";
        argv[1] = "GET-MASTER-ADDR-BY-NAME";
        argv[2] = s->master;
        rc = redisAsyncCommandArgv(ac, on_ask_reply, l, 3, argv, NULL);
    }
    if (rc != REDIS_OK) {
        /* Cannot happen on a fresh context; the deadline takes it down. */
        log_error("redis: sentinel: cannot queue a command");
    }
}

static void
on_link_resolved(const struct resolve_result *r, void *arg)
{
    struct link *l = arg;

    l->lookup = NULL; /* freed when this returns */
    if (r->naddrs == 0) {
        link_failed(l, r->err != 0 ? gai_strerror(r->err) : "no address");
        return;
    }
    /* Rotate through the addresses as attempts fail, as redis.c does: a
     * name with an IPv6 and an IPv4 address reaches a sentinel on
     * either. */
    link_connect(l, r->addrs[l->s->node_failures[l->node] % r->naddrs]);
}

/* Tries the current node, within the deadline. */
static void
link_open(struct link *l)
{
    struct sentinel *s = l->s;
    const char *host = s->nodes[l->node].host;
    struct timeval tv = clock_tv(s->timeout_ms);
    struct netaddr numeric;

    evtimer_add(l->timer, &tv);
    if (netaddr_parse(host, &numeric) == 0) {
        link_connect(l, host);
        return;
    }
    l->state = LINK_LOOKUP;
    l->lookup = resolve_start(s->base, host, on_link_resolved, l);
    if (l->lookup == NULL) {
        /* No thread: look up in line, blocking this worker for once. */
        link_connect(l, host);
    }
}

static void
on_ask_timer(evutil_socket_t fd, short what, void *arg)
{
    struct sentinel *s = arg;
    sentinel_addr_cb *cb = s->ask_cb;
    char ip[SENTINEL_HOST_MAX];

    (void)fd;
    (void)what;
    if (s->ask.state != LINK_DONE) {
        link_close(&s->ask);
        link_failed(&s->ask, "timed out");
        return;
    }
    s->ask.state = LINK_IDLE;
    s->ask_cb = NULL;
    memcpy(ip, s->ip, sizeof(ip));
    if (cb != NULL) {
        cb(ip[0] != '\0' ? ip : NULL, s->port, s->ask_arg);
    }
}

static void
on_watch_timer(evutil_socket_t fd, short what, void *arg)
{
    struct sentinel *s = arg;

    (void)fd;
    (void)what;
    if (s->watch.state == LINK_PAUSED) {
        s->watch.state = LINK_IDLE;
        link_open(&s->watch);
        return;
    }
    if (s->watch.state == LINK_SUBSCRIBED) {
        struct link *l = &s->watch;
        struct timeval tv = clock_tv(WATCH_CHECK_MS);
        int64_t now = clock_mono_ms();
        const char *argv[] = {"SUBSCRIBE", "+switch-master"};

        if (replyguard_overflowing(&l->guard)) {
            link_close(l);
            watch_lost(l, l->guard.refused);
            return;
        }
        if (l->beat_ms != 0 && now - l->beat_ms >= (int64_t)s->timeout_ms) {
            link_close(l);
            watch_lost(l, "no answer to a heartbeat");
            return;
        }
        if (l->beat_ms == 0 &&
            redisAsyncCommandArgv(l->ac, on_watch_reply, l, 2, argv, NULL) ==
                REDIS_OK) {
            l->beat_ms = now;
        }
        evtimer_add(l->timer, &tv);
        return;
    }
    link_close(&s->watch);
    link_failed(&s->watch, "timed out");
}

struct sentinel *
sentinel_new(struct event_base *base, const struct redis_conf *conf,
             uint64_t timeout_ms, sentinel_addr_cb *on_switch,
             sentinel_watch_cb *on_watch, void *arg)
{
    struct sentinel *s = xcalloc(1, sizeof(*s));

    s->base = base;
    s->master = xstrdup(conf->sentinel_master);
    s->nnodes = conf->nsentinels;
    s->nodes = xcalloc(s->nnodes, sizeof(*s->nodes));
    s->node_failures = xcalloc(s->nnodes, sizeof(*s->node_failures));
    for (size_t i = 0; i < s->nnodes; i++) {
        s->nodes[i].host = xstrdup(conf->sentinels[i].host);
        s->nodes[i].port = conf->sentinels[i].port;
    }
    s->password = conf->sentinel_password != NULL
                      ? xstrdup(conf->sentinel_password)
                      : NULL;
    s->timeout_ms = timeout_ms;
    s->on_switch = on_switch;
    s->on_watch = on_watch;
    s->switch_arg = arg;
    s->rng =
        backoff_seed((uint64_t)(uintptr_t)s ^ (uint64_t)clock_mono_ms() << 20);
    s->ask.s = s;
    s->ask.timer = evtimer_new(base, on_ask_timer, s);
    s->watch.s = s;
    s->watch.watch = true;
    s->watch.timer = evtimer_new(base, on_watch_timer, s);
    s->switched_ms = INT64_MIN;
    s->switch_timer = evtimer_new(base, on_switch_timer, s);
    link_open(&s->watch);
    return s;
}

void
sentinel_free(struct sentinel *s)
{
    if (s == NULL) {
        return;
    }
    link_close(&s->ask);
    link_close(&s->watch);
    event_free(s->ask.timer);
    event_free(s->watch.timer);
    event_free(s->switch_timer);
    for (size_t i = 0; i < s->nnodes; i++) {
        free(s->nodes[i].host);
    }
    free(s->nodes);
    free(s->node_failures);
    free(s->master);
    free(s->password);
    free(s);
}

void
sentinel_ask(struct sentinel *s, sentinel_addr_cb *cb, void *arg)
{
    link_close(&s->ask);
    /* A sentinel that answered before was told of the last failover
     * too; the first listed may still be catching up. */
    s->ask.node = s->answered;
    s->ask.tried = 0;
    s->ask_cb = cb;
    s->ask_arg = arg;
    link_open(&s->ask);
}

void
sentinel_distrust(struct sentinel *s)
{
    s->answered = (s->answered + 1) % s->nnodes;
}

void
sentinel_cancel(struct sentinel *s)
{
    link_close(&s->ask);
    s->ask_cb = NULL;
}
