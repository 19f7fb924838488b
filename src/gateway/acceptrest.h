/*
 * acceptrest.h - rests a listener after accept() fails: the pending
 * connection keeps the socket readable, so retrying at once only spins
 * (out of descriptors, libevent would log every try). The rest lasts
 * 100 ms, doubling up to 1.6 s while accept() keeps failing; the owner
 * may end it early when a descriptor comes free. The first failure is
 * logged, then at most one line every 5 s with the number of rests.
 * Does I/O (a timer) on the listener's event_base; a gateway module
 * (<event2/listener.h>). Every call on the listener's thread.
 */
#ifndef SLUICE_ACCEPTREST_H
#define SLUICE_ACCEPTREST_H

#include <stdbool.h>
#include <stddef.h>

struct event_base;
struct evconnlistener;
struct acceptrest; /* opaque; one per listener */

/* What the owner of a listener is asked by its rest; called on its
 * thread, never from inside an acceptrest_*() call but acceptrest_failed()
 * (the listener's error callback). */
struct acceptrest_ops {
    /* A rest began or ended (acceptrest_resting() says which): enable or
     * disable the listener. */
    void (*changed)(void *arg);
    /* How many connections the owner has open, for the log; or NULL. */
    size_t (*open)(void *arg);
};

/*
 * Becomes the error callback of 'lev' (borrowed; it must outlive the
 * rest, or acceptrest_free() must come before it goes). 'who' (static)
 * starts each log line ("clientconn", "admin") and 'where' (static)
 * ends the count of open connections ("in this worker"). 'ops' and 'arg'
 * are borrowed and must outlive the rest.
 */
struct acceptrest *acceptrest_new(struct event_base *base,
                                  struct evconnlistener *lev, const char *who,
                                  const char *where,
                                  const struct acceptrest_ops *ops, void *arg);
/* Stops being the error callback of its listener; NULL is a no-op. */
void acceptrest_free(struct acceptrest *r);

/* True while the listener should not accept. */
bool acceptrest_resting(const struct acceptrest *r);

/* accept() succeeded: the next rest is the shortest again. */
void acceptrest_accepted(struct acceptrest *r);

/* A descriptor came free: the rest, if any, ends now (without calling
 * 'changed': the caller applies it). */
void acceptrest_wake(struct acceptrest *r);

#endif
