#include "acceptrest.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <event2/listener.h>

#include "clock.h"
#include "log.h"
#include "xmalloc.h"

#define PAUSE_MIN_MS 100
#define PAUSE_MAX_MS 1600
/* One log line per this many ms at most. */
#define LOG_EVERY_MS 5000

struct acceptrest {
    struct evconnlistener *lev;       /* borrowed */
    const char *who;                  /* static: log line prefix */
    const char *where;                /* static: after the open count */
    const struct acceptrest_ops *ops; /* borrowed */
    void *arg;                        /* for 'ops' */
    bool resting;                     /* paused after a failed accept() */
    struct event *resume;             /* ends the rest; owned */
    uint64_t pause_ms;                /* length of the next rest */
    int64_t logged_ms;                /* last log line, or 0 */
    unsigned long unlogged;           /* rests since that line */
    struct acceptrest *next;          /* in 'rests' */
};

/*
 * The listener's error callback gets the argument of its accept callback
 * (evhttp's), not ours: it finds its rest here, by listener. Workers and
 * the main thread share the list.
 */
static pthread_mutex_t rests_mu = PTHREAD_MUTEX_INITIALIZER;
static struct acceptrest *rests;

static void
on_resume(evutil_socket_t fd, short what, void *arg)
{
    struct acceptrest *r = arg;

    (void)fd;
    (void)what;
    r->resting = false;
    r->ops->changed(r->arg);
}

static void
log_failure(struct acceptrest *r, int err)
{
    int64_t now = clock_mono_ms();
    char open[64] = "";

    r->unlogged++;
    if (r->logged_ms != 0 && now - r->logged_ms < LOG_EVERY_MS) {
        return;
    }
    if (r->ops->open != NULL) {
        snprintf(open, sizeof(open), " (%zu open %s)", r->ops->open(r->arg),
                 r->where);
    }
    if (r->logged_ms == 0) {
        log_warn("%s: accept: %s; new connections wait %llu ms%s", r->who,
                 strerror(err), (unsigned long long)r->pause_ms, open);
    } else {
        log_warn("%s: accept: %s; new connections paused %lu times in "
                 "%lld s, now for %llu ms%s",
                 r->who, strerror(err), r->unlogged,
                 (long long)((now - r->logged_ms) / 1000),
                 (unsigned long long)r->pause_ms, open);
    }
    r->logged_ms = now;
    r->unlogged = 0;
}

static void
on_accept_error(struct evconnlistener *lev, void *arg)
{
    int err = errno;
    struct acceptrest *r;
    struct timeval tv;

    (void)arg;
    pthread_mutex_lock(&rests_mu);
    for (r = rests; r != NULL && r->lev != lev; r = r->next) {
    }
    pthread_mutex_unlock(&rests_mu);
    if (r == NULL) {
        return;
    }
    /* Whatever the error, retrying at once would spin: rest first. */
    r->resting = true;
    r->ops->changed(r->arg);
    tv = clock_tv(r->pause_ms);
    evtimer_add(r->resume, &tv);
    log_failure(r, err);
    if (r->pause_ms < PAUSE_MAX_MS) {
        r->pause_ms *= 2;
    }
}

struct acceptrest *
acceptrest_new(struct event_base *base, struct evconnlistener *lev,
               const char *who, const char *where,
               const struct acceptrest_ops *ops, void *arg)
{
    struct acceptrest *r = xcalloc(1, sizeof(*r));

    r->lev = lev;
    r->who = who;
    r->where = where;
    r->ops = ops;
    r->arg = arg;
    r->pause_ms = PAUSE_MIN_MS;
    r->resume = evtimer_new(base, on_resume, r);
    pthread_mutex_lock(&rests_mu);
    r->next = rests;
    rests = r;
    pthread_mutex_unlock(&rests_mu);
    evconnlistener_set_error_cb(lev, on_accept_error);
    return r;
}

void
acceptrest_free(struct acceptrest *r)
{
    struct acceptrest **pp;

    if (r == NULL) {
        return;
    }
    evconnlistener_set_error_cb(r->lev, NULL);
    pthread_mutex_lock(&rests_mu);
    for (pp = &rests; *pp != r; pp = &(*pp)->next) {
    }
    *pp = r->next;
    pthread_mutex_unlock(&rests_mu);
    event_free(r->resume);
    free(r);
}

bool
acceptrest_resting(const struct acceptrest *r)
{
    return r != NULL && r->resting;
}

void
acceptrest_accepted(struct acceptrest *r)
{
    if (r != NULL) {
        r->pause_ms = PAUSE_MIN_MS;
    }
}

void
acceptrest_wake(struct acceptrest *r)
{
    if (r != NULL && r->resting) {
        evtimer_del(r->resume);
        r->resting = false;
    }
}
