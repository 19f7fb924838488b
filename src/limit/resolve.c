#include "resolve.h"

#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "xmalloc.h"

/*
 * Shared by the thread and the loop; whoever lets go last frees it, so
 * the loop can give a lookup up without waiting for it.
 */
struct resolve {
    atomic_int refs;           /* 2 while both the thread and the loop
                                  hold it */
    atomic_bool done;          /* 'res' is written */
    int fds[2];                /* pipe: the thread writes one byte */
    char *host;                /* owned */
    struct resolve_result res; /* the answer */
    struct event *ev;          /* reads fds[0] on the loop; owned */
    resolve_cb cb;             /* the caller's */
    void *arg;                 /* for 'cb'; borrowed */
};

static void
release(struct resolve *r)
{
    if (atomic_fetch_sub(&r->refs, 1) != 1) {
        return;
    }
    close(r->fds[0]);
    close(r->fds[1]);
    free(r->host);
    free(r);
}

static void *
resolve_main(void *arg)
{
    struct resolve *r = arg;
    struct resolve_result *res = &r->res;
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM};
    struct addrinfo *ais = NULL;
    char one = 1;

    res->err = getaddrinfo(r->host, NULL, &hints, &ais);
    for (struct addrinfo *ai = ais;
         ai != NULL && res->naddrs < RESOLVE_MAX_ADDRS; ai = ai->ai_next) {
        char *dst = res->addrs[res->naddrs];
        bool dup = false;

        if (getnameinfo(ai->ai_addr, ai->ai_addrlen, dst, INET6_ADDRSTRLEN,
                        NULL, 0, NI_NUMERICHOST) != 0) {
            continue;
        }
        for (size_t i = 0; i < res->naddrs; i++) {
            dup = dup || strcmp(res->addrs[i], dst) == 0;
        }
        if (!dup) {
            res->naddrs++;
        }
    }
    if (ais != NULL) {
        freeaddrinfo(ais);
    }
    atomic_store(&r->done, true);
    /* The pipe outlives this write: the lookup holds both ends until the
     * last reference goes. A failed write leaves the caller to its own
     * timeout. */
    if (write(r->fds[1], &one, 1) < 0) {
        (void)0;
    }
    release(r);
    return NULL;
}

static void
on_answer(evutil_socket_t fd, short what, void *arg)
{
    struct resolve *r = arg;
    char byte;

    (void)fd;
    (void)what;
    if (!atomic_load(&r->done)) {
        return; /* a spurious wakeup: wait for the byte */
    }
    if (read(r->fds[0], &byte, 1) < 0) {
        (void)0;
    }
    event_free(r->ev);
    r->ev = NULL;
    r->cb(&r->res, r->arg);
    release(r);
}

struct resolve *
resolve_start(struct event_base *base, const char *host, resolve_cb cb,
              void *arg)
{
    struct resolve *r = xcalloc(1, sizeof(*r));
    pthread_attr_t attr;
    pthread_t tid;
    int rc;

    if (pipe(r->fds) < 0) {
        free(r);
        return NULL;
    }
    fcntl(r->fds[0], F_SETFD, FD_CLOEXEC);
    fcntl(r->fds[1], F_SETFD, FD_CLOEXEC);
    r->host = xstrdup(host);
    r->cb = cb;
    r->arg = arg;
    atomic_init(&r->refs, 2);
    atomic_init(&r->done, false);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&tid, &attr, resolve_main, r);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        atomic_store(&r->refs, 1);
        release(r);
        return NULL;
    }
    r->ev = event_new(base, r->fds[0], EV_READ | EV_PERSIST, on_answer, r);
    event_add(r->ev, NULL);
    return r;
}

void
resolve_cancel(struct resolve *r)
{
    event_free(r->ev);
    release(r);
}
