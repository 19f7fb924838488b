#include "server.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/dns.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <event2/thread.h>

#include "accesslog.h"
#include "admin.h"
#include "clientconn.h"
#include "clock.h"
#include "config.h"
#include "diff.h"
#include "local_store.h"
#include "log.h"
#include "metrics.h"
#include "proxy.h"
#include "ratelimit.h"
#include "tls.h"
#include "xmalloc.h"

/*
 * evhttp answers a header block past its own limit with a bare 400 before
 * any handler runs; it gets this much headroom over max_header_bytes so
 * that the handler can give the proper 431 to all but abusive requests.
 */
#define HEADER_HEADROOM_FACTOR 4
#define HEADER_HEADROOM_MIN (64 * 1024)
#define DRAIN_POLL_MS 10
#define SWEEP_INTERVAL_MS 5000
#define TICK_INTERVAL_MS 200
/* Editors write a file in several steps; reload once they are done. */
#define WATCH_SETTLE_MS 100
/*
 * server.max_connections: auto keeps these descriptors back from clients
 * (listeners, Redis, logs, event loops), then halves the rest, since each
 * proxied client may hold an upstream connection too.
 */
#define FD_RESERVE 32
#define FD_RESERVE_PER_WORKER 8
/* The descriptor limit auto assumes when there is none. */
#define FD_UNLIMITED (1024 * 1024)

struct server;

/* Which file a path leads to, and whether it has changed. */
struct file_id {
    bool present;          /* stat() succeeded */
    dev_t dev;             /* st_dev */
    ino_t ino;             /* st_ino */
    off_t size;            /* st_size */
    struct timespec mtime; /* st_mtim */
};

struct worker {
    struct server *srv;                /* borrowed: the owner */
    unsigned index;                    /* 0-based, for log lines */
    pthread_t thread;                  /* runs event_base_dispatch */
    struct event_base *base;           /* owned */
    struct evdns_base *dns;            /* owned */
    struct evhttp *http;               /* owned, or NULL: server.listen off */
    struct evhttp_bound_socket *bound; /* the listener; owned by 'http', or
                                          NULL (off, or stopped) */
    struct clientconns *conns;         /* its connections; owned, or NULL */
    bool stopped;                      /* a stop has come: draining */
    /* The TLS listener (server.tls), on an evhttp of its own: evhttp
     * makes every connection of one evhttp with one bufferevent hook. */
    struct evhttp *https;                  /* owned, or NULL */
    struct evhttp_bound_socket *tls_bound; /* owned by 'https', or NULL */
    struct clientconns *tls_conns;         /* its connections; owned */
    struct config *tls_cfg;                /* a reference to the newest
                                              config with a TLS listener:
                                              its context is in use */
    struct proxy *proxy;                   /* owned */
    struct ratelimit *rl;                  /* owned: Redis client, limiters */
    struct config *cfg;                    /* this worker's reference */
    pthread_mutex_t mu;                    /* guards 'next_cfg' */
    struct config *next_cfg;       /* handed over by a reload, or NULL */
    int wake[2];                   /* pipe: the main thread writes a
                                      byte after setting a flag below;
                                      -1 when not open */
    struct event *wake_ev;         /* reads wake[0] */
    atomic_bool reload_due;        /* set by the main thread */
    atomic_bool stop_due;          /* set by the main thread */
    struct event *drain_timer;     /* polls in-flight while draining */
    uint64_t drain_left_ms;        /* drain time remaining */
    atomic_bool done;              /* the loop has returned */
    atomic_bool redis_ok;          /* Redis connected (or unneeded) */
    struct metrics_shard *metrics; /* owned by the registry */
    struct event *tick;            /* publishes readiness, counters */
};

struct server {
    struct config *cfg;                 /* reference to the newest config */
    struct config *started;             /* reference to the config started
                                           with: its restart-only settings
                                           are the ones in force */
    struct event_base *base;            /* main thread: signals; owned */
    struct worker *workers;             /* owned */
    struct local_store *store;          /* local limiter state, all workers */
    struct event *sweep;                /* drops expired local state */
    unsigned nworkers;                  /* threads */
    struct event *signals[5];           /* TERM INT HUP PIPE USR1; owned */
    int stopping;                       /* signals of the stopping kind seen */
    struct metrics *metrics;            /* the registry; owned */
    struct metrics_shard *main_metrics; /* this thread's shard */
    struct accesslog *log;              /* owned */
    struct admin *admin;                /* the admin listener, or NULL; owned */
    int64_t generation;                 /* configs loaded so far */
    int watch_fd;                       /* inotify, or -1 */
    struct event *watch_ev;             /* reads 'watch_fd' */
    struct event *watch_timer;          /* reloads once the file settles */
    int watch_dir_wd;                   /* the path's directory */
    int watch_target_wd;                /* the directory of the file a
                                           symlinked path leads to, when
                                           not the path's own; or -1 */
    struct file_id watch_loaded;        /* the file as last read */
};

/* ---- worker thread ---- */

static void
on_request(struct evhttp_request *req, void *arg)
{
    struct worker *w = arg;
    struct clientconn *cc = clientconns_begin_request(w->conns, req);

    proxy_handle(w->proxy, w->cfg, req, cc);
}

static void
on_tls_request(struct evhttp_request *req, void *arg)
{
    struct worker *w = arg;
    struct clientconn *cc = clientconns_begin_request(w->tls_conns, req);

    proxy_handle(w->proxy, w->cfg, req, cc);
}

/* The soft RLIMIT_NOFILE, or FD_UNLIMITED when there is none. */
static uint64_t
fd_limit(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY ||
        rl.rlim_cur > FD_UNLIMITED) {
        return FD_UNLIMITED;
    }
    return rl.rlim_cur;
}

/* What server.max_connections: auto stands for, in the whole process. */
static uint64_t
auto_max_connections(unsigned nworkers)
{
    uint64_t limit = fd_limit();
    uint64_t reserve = FD_RESERVE + (uint64_t)FD_RESERVE_PER_WORKER * nworkers;

    return limit > reserve ? (limit - reserve) / 2 : 1;
}

/* Each worker enforces its share of server.max_connections. */
static void
clientconns_conf_of(const struct server_conf *sc, unsigned nworkers,
                    struct clientconns_conf *out)
{
    uint64_t total = sc->max_connections > 0 ? sc->max_connections
                                             : auto_max_connections(nworkers);
    uint64_t share = total / nworkers;

    out->header_timeout_ms = sc->header_timeout_ms;
    out->client_timeout_ms = sc->client_timeout_ms;
    out->max_connections = share > 0 ? (size_t)share : 1;
    out->who = "clientconn";
    out->where = "in this worker";
}

static void
apply_http_limits(struct evhttp *http, const struct server_conf *sc)
{
    uint64_t hdr = sc->max_header_bytes * HEADER_HEADROOM_FACTOR;
    struct timeval tv = clock_tv(sc->client_timeout_ms);

    if (hdr < HEADER_HEADROOM_MIN) {
        hdr = HEADER_HEADROOM_MIN;
    }
    evhttp_set_max_headers_size(http, (ev_ssize_t)hdr);
    evhttp_set_max_body_size(http, (ev_ssize_t)sc->max_body_bytes);
    evhttp_set_timeout_tv(http, &tv);
}

static void
on_reload(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;
    struct config *next;

    (void)fd;
    (void)what;
    pthread_mutex_lock(&w->mu);
    next = w->next_cfg;
    w->next_cfg = NULL;
    pthread_mutex_unlock(&w->mu);
    if (next == NULL) {
        return;
    }
    /* Requests in flight hold their own reference to the old config. */
    config_unref(w->cfg);
    w->cfg = next;
    /* Leases were sized by the old limiters: give them back. */
    ratelimit_release(w->rl);
    {
        struct clientconns_conf cc;

        clientconns_conf_of(&next->server, w->srv->nworkers, &cc);
        if (w->http != NULL) {
            apply_http_limits(w->http, &next->server);
            clientconns_configure(w->conns, &cc);
        }
        if (w->https != NULL) {
            apply_http_limits(w->https, &next->server);
            clientconns_configure(w->tls_conns, &cc);
        }
    }
    /* A new certificate for the connections accepted from now on; those
     * open keep theirs (each SSL holds its context). */
    if (w->tls_conns != NULL && tls_listener(next) != NULL) {
        config_unref(w->tls_cfg);
        w->tls_cfg = config_ref(next);
        clientconns_set_tls(w->tls_conns, tls_listener(next));
    }
}

static void
on_drain_tick(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;
    struct timeval tv = clock_tv(DRAIN_POLL_MS);
    bool idle = proxy_idle(w->proxy) &&
                (w->conns == NULL || clientconns_flushed(w->conns)) &&
                (w->tls_conns == NULL || clientconns_flushed(w->tls_conns));
    /* Once no request can take another lease, the leases go back; the
     * loop waits for Redis to have them (ratelimit.h). */
    bool released = idle && ratelimit_release(w->rl);

    (void)fd;
    (void)what;
    if (released || w->drain_left_ms == 0) {
        if (!idle) {
            log_warn("server: worker %u: drain timeout; aborting %zu "
                     "requests and unsent responses",
                     w->index, proxy_in_flight(w->proxy));
            proxy_abort_all(w->proxy);
            if (w->conns != NULL) {
                clientconns_close_all(w->conns);
            }
            if (w->tls_conns != NULL) {
                clientconns_close_all(w->tls_conns);
            }
        }
        event_base_loopexit(w->base, NULL);
        return;
    }
    w->drain_left_ms =
        w->drain_left_ms > DRAIN_POLL_MS ? w->drain_left_ms - DRAIN_POLL_MS : 0;
    evtimer_add(w->drain_timer, &tv);
}

static void
on_stop(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;

    (void)fd;
    (void)what;
    if (!w->stopped) {
        w->stopped = true;
        if (w->bound != NULL) {
            clientconns_forget_listener(w->conns);
            evhttp_del_accept_socket(w->http, w->bound);
            w->bound = NULL;
        }
        if (w->tls_bound != NULL) {
            clientconns_forget_listener(w->tls_conns);
            evhttp_del_accept_socket(w->https, w->tls_bound);
            w->tls_bound = NULL;
        }
        proxy_drain(w->proxy);
        w->drain_left_ms = w->cfg->server.drain_timeout_ms;
        on_drain_tick(-1, 0, w);
        return;
    }
    /* A second stop: no more waiting. */
    w->drain_left_ms = 0;
}

/*
 * The main thread asked for something: each flag set since the last
 * time is acted on once, however many bytes came, as event_active() on
 * an event already active would have.
 */
static void
on_wake(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;
    char buf[64];

    (void)what;
    while (read(fd, buf, sizeof(buf)) > 0) {
    }
    if (atomic_exchange(&w->reload_due, false)) {
        on_reload(-1, 0, w);
    }
    if (atomic_exchange(&w->stop_due, false)) {
        on_stop(-1, 0, w);
    }
}

/* Sets 'flag' of worker 'w' and wakes it (any thread). */
static void
worker_wake(struct worker *w, atomic_bool *flag)
{
    char b = 1;
    ssize_t n;

    atomic_store(flag, true);
    /* A failure is a full pipe: a byte is waiting already, and the flag
     * is set, so the worker acts on it all the same. */
    n = write(w->wake[1], &b, 1);
    (void)n;
}

/* Publishes what other threads read of this worker. */
static void
on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;

    (void)fd;
    (void)what;
    atomic_store(&w->redis_ok, ratelimit_ready(w->rl));
    ratelimit_tick(w->rl);
    ratelimit_publish(w->rl);
}

static void *
worker_main(void *arg)
{
    struct worker *w = arg;

    tls_thread_metrics(w->metrics);
    event_base_dispatch(w->base);
    atomic_store(&w->done, true);
    return NULL;
}

/*
 * A worker's event base, used by its own thread only (the main thread
 * asks for things through the worker's pipe), hence without a lock:
 * every event_add() and event_del() took and released a mutex, about 45
 * times per proxied request. With the changelist, the many enable/disable
 * pairs that evhttp and bufferevents make within one loop turn (reading
 * off while a request is answered, writing on until the reply is out)
 * reach the kernel as one epoll_ctl per descriptor at most, at the next
 * dispatch: measured, 8 epoll_ctl per proxied request fell to 5. The
 * flag's one caveat, descriptors cloned with dup(), does not apply: none
 * is ever dup()ed here.
 */
static struct event_base *
worker_base_new(void)
{
    struct event_config *ec = event_config_new();
    struct event_base *base;

    if (ec == NULL) {
        return NULL;
    }
    event_config_set_flag(ec, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
    event_config_set_flag(ec, EVENT_BASE_FLAG_NOLOCK);
    /* libevent times events by CLOCK_MONOTONIC_COARSE unless told
     * otherwise: one tick of the kernel (4 ms here), so a delay mode hold
     * could end up to that much early, and requests pass faster than the
     * rate. The precise clock costs a few nanoseconds a loop turn. */
    event_config_set_flag(ec, EVENT_BASE_FLAG_PRECISE_TIMER);
    base = event_base_new_with_config(ec);
    event_config_free(ec);
    return base;
}

/* An evhttp of worker 'w', set up as every listener of it is. */
static struct evhttp *
worker_http_new(struct worker *w, void (*cb)(struct evhttp_request *, void *))
{
    struct evhttp *http = evhttp_new(w->base);

    evhttp_set_gencb(http, cb, w);
    /* TRACE too, for the gateway to refuse (reqcheck.h) and log. evhttp
     * never sees a CONNECT: clientconn refuses it (clientconn.h). */
    evhttp_set_allowed_methods(
        http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
                  EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS |
                  EVHTTP_REQ_PATCH | EVHTTP_REQ_TRACE);
    evhttp_set_default_content_type(http, NULL);
    /*
     * No EVHTTP_SERVER_LINGERING_CLOSE: with it evhttp reads a body
     * declared over max_body_bytes to its end before its 413. Without it
     * the 413 goes at the end of the head, and clientconn's linger lets
     * a client still sending see it (clientconn.h).
     */
    apply_http_limits(http, &w->srv->cfg->server);
    return http;
}

/* Binds 'http' to a listener of its own on 'la'; NULL after logging. */
static struct evhttp_bound_socket *
worker_listen(struct worker *w, struct evhttp *http,
              const struct listen_addr *la, const struct addrinfo *ai)
{
    struct evconnlistener *lev;

    lev = evconnlistener_new_bind(w->base, NULL, NULL,
                                  LEV_OPT_REUSEABLE | LEV_OPT_REUSEABLE_PORT |
                                      LEV_OPT_CLOSE_ON_FREE |
                                      LEV_OPT_CLOSE_ON_EXEC,
                                  1024, ai->ai_addr, (int)ai->ai_addrlen);
    if (lev == NULL) {
        log_error("server: listen %s:%u: %s", la->host, la->port,
                  strerror(errno));
        return NULL;
    }
    return evhttp_bind_listener(http, lev);
}

static int
worker_init(struct worker *w, struct server *s, unsigned index,
            const struct addrinfo *ai, const struct addrinfo *tls_ai)
{
    const struct server_conf *sc = &s->cfg->server;

    w->srv = s;
    w->wake[0] = w->wake[1] = -1;
    w->index = index;
    w->cfg = config_ref(s->cfg);
    pthread_mutex_init(&w->mu, NULL);
    w->base = worker_base_new();
    if (w->base == NULL) {
        log_error("server: worker %u: cannot create an event base", index);
        return -1;
    }
    w->dns = evdns_base_new(w->base, EVDNS_BASE_INITIALIZE_NAMESERVERS);
    if (w->dns == NULL) {
        /* No resolv.conf: literal upstream addresses still work. */
        w->dns = evdns_base_new(w->base, 0);
    }
    w->metrics = metrics_shard(s->metrics);
    {
        struct clientconns_conf cc;

        clientconns_conf_of(sc, s->nworkers, &cc);
        if (ai != NULL) {
            w->http = worker_http_new(w, on_request);
            w->bound = worker_listen(w, w->http, &sc->listen, ai);
            if (w->bound == NULL) {
                return -1;
            }
            w->conns = clientconns_new(
                w->base, w->http, evhttp_bound_socket_get_listener(w->bound),
                w->metrics, &cc);
        }
        if (tls_ai != NULL) {
            w->https = worker_http_new(w, on_tls_request);
            w->tls_bound = worker_listen(w, w->https, &sc->tls.listen, tls_ai);
            if (w->tls_bound == NULL) {
                return -1;
            }
            w->tls_conns =
                clientconns_new(w->base, w->https,
                                evhttp_bound_socket_get_listener(w->tls_bound),
                                w->metrics, &cc);
            w->tls_cfg = config_ref(s->cfg);
            clientconns_set_tls(w->tls_conns, tls_listener(s->cfg));
        }
        if (w->conns != NULL && w->tls_conns != NULL) {
            /* One share of max_connections for both listeners. */
            clientconns_pair(w->conns, w->tls_conns);
        }
    }
    w->rl = ratelimit_new(w->base, s->cfg, s->store, index, w->metrics);
    {
        struct proxy_deps deps = {w->base, w->dns, w->rl, w->metrics, s->log};

        w->proxy = proxy_new(&deps);
    }
    w->tick = event_new(w->base, -1, EV_PERSIST, on_tick, w);
    {
        struct timeval tv = clock_tv(TICK_INTERVAL_MS);

        event_add(w->tick, &tv);
    }
    on_tick(-1, 0, w);
    w->drain_timer = evtimer_new(w->base, on_drain_tick, w);
    if (pipe(w->wake) < 0) {
        log_error("server: worker %u: pipe: %s", index, strerror(errno));
        w->wake[0] = w->wake[1] = -1;
        return -1;
    }
    for (int i = 0; i < 2; i++) {
        fcntl(w->wake[i], F_SETFL, fcntl(w->wake[i], F_GETFL) | O_NONBLOCK);
        fcntl(w->wake[i], F_SETFD, FD_CLOEXEC);
    }
    w->wake_ev =
        event_new(w->base, w->wake[0], EV_READ | EV_PERSIST, on_wake, w);
    event_add(w->wake_ev, NULL);
    return 0;
}

static void
worker_deinit(struct worker *w)
{
    if (w->srv == NULL) {
        return;
    }
    config_unref(w->cfg);
    config_unref(w->next_cfg);
    pthread_mutex_destroy(&w->mu);
    if (w->base == NULL) {
        return;
    }
    if (w->proxy != NULL) {
        proxy_abort_all(w->proxy);
    }
    /* Before evhttp_free(): its connections must not call back. */
    clientconns_free(w->conns);
    clientconns_free(w->tls_conns);
    if (w->http != NULL) {
        evhttp_free(w->http);
    }
    if (w->https != NULL) {
        evhttp_free(w->https);
    }
    /* Its connections are gone: the context may go too. */
    config_unref(w->tls_cfg);
    proxy_free(w->proxy);
    ratelimit_free(w->rl);
    if (w->tick != NULL) {
        event_free(w->tick);
    }
    if (w->drain_timer != NULL) {
        event_free(w->drain_timer);
    }
    if (w->wake_ev != NULL) {
        event_free(w->wake_ev);
    }
    if (w->wake[0] >= 0) {
        close(w->wake[0]);
        close(w->wake[1]);
    }
    if (w->dns != NULL) {
        evdns_base_free(w->dns, 0);
    }
    event_base_free(w->base);
}

/* ---- main thread ---- */

/*
 * SO_REUSEPORT lets a second gateway bind the same port without an error,
 * so probe with a plain socket first: a port in use fails the start.
 */
static int
probe_port(const struct sockaddr *sa, socklen_t salen)
{
    int one = 1;
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int rc;

    if (fd < 0) {
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    rc = bind(fd, sa, salen);
    close(fd);
    return rc;
}

/* Says which settings of 'next' differ from those in force ('cur', the
 * config started with) and wait for a restart. */
static void
warn_restart_only(const struct config *cur, const struct config *next)
{
    const char *names[CONFIG_RESTART_MAX];
    size_t n = config_restart_only(cur, next, names);

    for (size_t i = 0; i < n; i++) {
        log_warn("server: %s takes effect on restart only; the running "
                 "value stays%s",
                 names[i], config_restart_note(names[i]));
    }
}

static void watch_note(struct server *s);

/*
 * Re-reads the config file and hands it to every worker. On errors the
 * running config stays; they are logged and appended to 'errs'.
 */
static int
reload(struct server *s, struct config_errors *errs)
{
    static const char *const ok[] = {"ok"}, *const bad[] = {"error"};
    size_t before = errs->n;
    struct config *next;
    const char *why;

    if (s->watch_fd >= 0) {
        watch_note(s);
    }
    next = config_load(s->cfg->path, errs);
    if (next != NULL && (why = config_reload_refusal(s->started, next))) {
        config_errors_add(errs, xasprintf("%s: %s", next->path, why));
        config_unref(next);
        next = NULL;
    }
    if (next != NULL && tls_attach(next, errs) < 0) {
        /* A certificate or key that will not load: as a config error,
         * the running config, and its certificates, stay. */
        config_unref(next);
        next = NULL;
    }
    if (next == NULL) {
        for (size_t i = before; i < errs->n; i++) {
            log_error("config: %s", errs->v[i]);
        }
        log_error("server: reload of %s failed; the running config stays",
                  s->cfg->path);
        metrics_add(s->main_metrics, M_RELOADS, bad, 1);
        return -1;
    }
    warn_restart_only(s->started, next);
    for (size_t i = 0; i < next->warnings.n; i++) {
        log_warn("config: %s", next->warnings.v[i]);
    }
    for (unsigned i = 0; i < s->nworkers; i++) {
        struct worker *w = &s->workers[i];

        pthread_mutex_lock(&w->mu);
        config_unref(w->next_cfg);
        w->next_cfg = config_ref(next);
        pthread_mutex_unlock(&w->mu);
        worker_wake(w, &w->reload_due);
    }
    config_unref(s->cfg);
    s->cfg = next;
    if (s->admin != NULL) {
        admin_set_timeout(s->admin, next->server.header_timeout_ms);
    }
    s->generation++;
    metrics_set(s->metrics, M_CONFIG_GENERATION, s->generation);
    metrics_add(s->main_metrics, M_RELOADS, ok, 1);
    log_info("server: reloaded %s: %zu routes", next->path, next->nroutes);
    return 0;
}

static void
reload_and_log(struct server *s)
{
    struct config_errors errs;

    config_errors_init(&errs);
    reload(s, &errs);
    config_errors_deinit(&errs);
}

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
    struct server *s = arg;

    (void)what;
    if (sig == SIGHUP) {
        reload_and_log(s);
        return;
    }
    if (sig == SIGUSR1) {
        if (accesslog_reopen(s->log) == 0) {
            log_info("server: access log reopened");
        }
        return;
    }
    if (sig == SIGPIPE) {
        return;
    }
    if (s->stopping++ == 0) {
        log_info("server: %s: draining for up to %llu ms",
                 sig == SIGTERM ? "SIGTERM" : "SIGINT",
                 (unsigned long long)s->cfg->server.drain_timeout_ms);
    } else {
        log_info("server: second signal: stopping now");
    }
    for (unsigned i = 0; i < s->nworkers; i++) {
        worker_wake(&s->workers[i], &s->workers[i].stop_due);
    }
}

static void
on_sweep(evutil_socket_t fd, short what, void *arg)
{
    struct server *s = arg;

    (void)fd;
    (void)what;
    local_store_sweep(s->store, (uint64_t)clock_wall_ms());
}

static unsigned
worker_count(const struct server_conf *sc)
{
    long n;

    if (sc->workers > 0) {
        return sc->workers;
    }
    n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1;
}

/* ---- admin listener ---- */

/* True when some RequestRateLimiter would refuse or pass without Redis. */
static bool
needs_redis(const struct config *cfg)
{
    for (size_t i = 0; i < cfg->nroutes; i++) {
        const struct route *r = &cfg->routes[i];

        for (size_t j = 0; j < r->nrate_limiters; j++) {
            const struct rate_limit_conf *rl = r->rate_limiters[j];

            if (!rl->local && rl->on_redis_error != REDIS_FAILURE_LOCAL) {
                return true;
            }
        }
    }
    return false;
}

static bool
admin_ready(void *arg, char *why, size_t len)
{
    struct server *s = arg;

    if (s->stopping > 0) {
        snprintf(why, len, "draining");
        return false;
    }
    if (!needs_redis(s->cfg)) {
        return true;
    }
    for (unsigned i = 0; i < s->nworkers; i++) {
        if (!atomic_load(&s->workers[i].redis_ok)) {
            snprintf(why, len, "worker %u is not connected to Redis", i);
            return false;
        }
    }
    return true;
}

static int
admin_reload(void *arg, struct config_errors *errs)
{
    return reload(arg, errs);
}

static struct config *
admin_config(void *arg)
{
    struct server *s = arg;

    return config_ref(s->cfg);
}

static char *
admin_metrics(void *arg)
{
    struct server *s = arg;

    return metrics_render(s->metrics);
}

static const struct admin_ops admin_ops = {admin_ready, admin_reload,
                                           admin_config, admin_metrics};

/* ---- watching the config file ---- */

static void
file_id_of(const char *path, struct file_id *out)
{
    struct stat st;

    memset(out, 0, sizeof(*out));
    if (stat(path, &st) == 0) {
        out->present = true;
        out->dev = st.st_dev;
        out->ino = st.st_ino;
        out->size = st.st_size;
        out->mtime = st.st_mtim;
    }
}

static bool
file_id_same(const struct file_id *a, const struct file_id *b)
{
    return a->present == b->present && a->dev == b->dev && a->ino == b->ino &&
           a->size == b->size && a->mtime.tv_sec == b->mtime.tv_sec &&
           a->mtime.tv_nsec == b->mtime.tv_nsec;
}

/* The directory part of 'path' into 'dir' ("." for none, "/" for the
 * root). */
static void
dir_of(const char *path, char *dir, size_t len)
{
    const char *slash = strrchr(path, '/');

    if (slash == NULL) {
        snprintf(dir, len, ".");
    } else if (slash == path) {
        snprintf(dir, len, "/");
    } else {
        snprintf(dir, len, "%.*s", (int)(slash - path), path);
    }
}

#define WATCH_EVENTS                                                           \
    (IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE |    \
     IN_ATTRIB)

/*
 * A path that is a symlink (a Kubernetes ConfigMap's gw.yaml ->
 * ..data/gw.yaml, ..data -> ..2024_01_01...) leads to a file elsewhere,
 * whose edits show in its own directory: that one is watched too, and
 * found again on every reload, since the link may have moved on.
 */
static void
watch_target(struct server *s)
{
    struct stat st;
    char *real;
    char dir[4096];
    int wd;

    if (s->watch_target_wd >= 0) {
        /* EINVAL when the directory is gone, which removed the watch. */
        inotify_rm_watch(s->watch_fd, s->watch_target_wd);
        s->watch_target_wd = -1;
    }
    if (lstat(s->cfg->path, &st) < 0 || !S_ISLNK(st.st_mode) ||
        (real = realpath(s->cfg->path, NULL)) == NULL) {
        return;
    }
    dir_of(real, dir, sizeof(dir));
    free(real);
    wd = inotify_add_watch(s->watch_fd, dir, WATCH_EVENTS);
    if (wd < 0) {
        log_warn("server: cannot watch %s: %s", dir, strerror(errno));
    } else if (wd != s->watch_dir_wd) {
        s->watch_target_wd = wd;
    }
}

/* What the path leads to now, read or about to be: later events are
 * compared with it. */
static void
watch_note(struct server *s)
{
    file_id_of(s->cfg->path, &s->watch_loaded);
    watch_target(s);
}

static void
on_watch_settled(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    log_info("server: %s changed on disk", ((struct server *)arg)->cfg->path);
    reload_and_log(arg);
}

/*
 * Any event in a watched directory: whatever its name (a renamed
 * symlink, ..data, changes the file without naming it), the file the
 * path leads to is compared with the one last read. A path that leads
 * nowhere for now (a file being replaced) waits for the next event.
 */
static void
on_watch(evutil_socket_t fd, short what, void *arg)
{
    struct server *s = arg;
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    struct file_id now;

    (void)what;
    while (read(fd, buf, sizeof(buf)) > 0) {
    }
    file_id_of(s->cfg->path, &now);
    if (now.present && !file_id_same(&now, &s->watch_loaded)) {
        struct timeval tv = clock_tv(WATCH_SETTLE_MS);

        evtimer_add(s->watch_timer, &tv);
    }
}

/*
 * Watches the file's directory rather than the file: editors and config
 * management replace the file by renaming, which a watch on the old inode
 * would miss.
 */
static void
start_watch(struct server *s)
{
    char dir[4096];

    dir_of(s->cfg->path, dir, sizeof(dir));
    s->watch_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (s->watch_fd < 0 || (s->watch_dir_wd = inotify_add_watch(
                                s->watch_fd, dir, WATCH_EVENTS)) < 0) {
        log_warn("server: cannot watch %s: %s", s->cfg->path, strerror(errno));
        if (s->watch_fd >= 0) {
            close(s->watch_fd);
            s->watch_fd = -1;
        }
        return;
    }
    watch_note(s);
    s->watch_ev =
        event_new(s->base, s->watch_fd, EV_READ | EV_PERSIST, on_watch, s);
    event_add(s->watch_ev, NULL);
    s->watch_timer = evtimer_new(s->base, on_watch_settled, s);
    log_info("server: watching %s for changes", s->cfg->path);
}

/* Says what server.max_connections comes to, and whether it can. */
static void
log_connection_limit(const struct server_conf *sc, unsigned nworkers)
{
    struct clientconns_conf cc;
    uint64_t fit = auto_max_connections(nworkers);
    char how[96];

    clientconns_conf_of(sc, nworkers, &cc);
    if (sc->max_connections == 0) {
        snprintf(how, sizeof(how), "auto, from a descriptor limit of %llu",
                 (unsigned long long)fd_limit());
    } else {
        snprintf(how, sizeof(how), "%u", sc->max_connections);
    }
    log_info("server: up to %zu client connections per worker, %llu in all "
             "(max_connections: %s)",
             cc.max_connections,
             (unsigned long long)cc.max_connections * nworkers, how);
    if (sc->max_connections > fit) {
        log_warn("server: server.max_connections %u is more than a "
                 "descriptor limit of %llu allows (about %llu); accept() "
                 "will run out of descriptors first",
                 sc->max_connections, (unsigned long long)fd_limit(),
                 (unsigned long long)fit);
    }
}

/* The address to bind for 'la', its port checked free; NULL after logging. */
static struct addrinfo *
resolve_listen(const struct listen_addr *la)
{
    struct addrinfo hints, *ai = NULL;
    char port[8];
    int rc;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    snprintf(port, sizeof(port), "%u", la->port);
    rc = getaddrinfo(la->host, port, &hints, &ai);
    if (rc != 0) {
        log_error("server: listen %s:%u: %s", la->host, la->port,
                  gai_strerror(rc));
        return NULL;
    }
    if (probe_port(ai->ai_addr, ai->ai_addrlen) < 0) {
        log_error("server: listen %s:%u: %s", la->host, la->port,
                  strerror(errno));
        freeaddrinfo(ai);
        return NULL;
    }
    return ai;
}

struct server *
server_new(struct config *cfg, bool watch)
{
    static const int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGUSR1};
    const struct server_conf *sc = &cfg->server;
    struct addrinfo *ai = NULL, *tls_ai = NULL;
    struct server *s;

    if (evthread_use_pthreads() < 0) {
        log_error("server: libevent has no pthreads support");
        return NULL;
    }
    if (sc->tls.enabled && tls_listener(cfg) == NULL) {
        log_error("server: server.tls: no TLS context (tls_attach)");
        return NULL;
    }
    /* server.listen: off leaves the TLS listener alone (the loader
     * insists on one). */
    if (sc->listen.host != NULL && (ai = resolve_listen(&sc->listen)) == NULL) {
        return NULL;
    }
    if (sc->tls.enabled && (tls_ai = resolve_listen(&sc->tls.listen)) == NULL) {
        if (ai != NULL) {
            freeaddrinfo(ai);
        }
        return NULL;
    }

    s = xcalloc(1, sizeof(*s));
    s->cfg = config_ref(cfg);
    s->started = config_ref(cfg);
    s->watch_fd = -1;
    s->watch_target_wd = -1;
    s->base = event_base_new();
    s->metrics = metrics_new();
    s->main_metrics = metrics_shard(s->metrics);
    s->generation = 1;
    metrics_set(s->metrics, M_CONFIG_GENERATION, 1);
    {
        char err[256];

        s->log = accesslog_open(cfg->access_log,
                                (enum accesslog_format)cfg->access_format, err,
                                sizeof(err));
        if (s->log == NULL) {
            log_error("server: access log: %s", err);
            if (ai != NULL) {
                freeaddrinfo(ai);
            }
            if (tls_ai != NULL) {
                freeaddrinfo(tls_ai);
            }
            server_free(s);
            return NULL;
        }
    }
    s->nworkers = worker_count(sc);
    s->store = local_store_new(64);
    s->workers = xcalloc(s->nworkers, sizeof(*s->workers));
    for (unsigned i = 0; i < s->nworkers; i++) {
        if (worker_init(&s->workers[i], s, i, ai, tls_ai) < 0) {
            if (ai != NULL) {
                freeaddrinfo(ai);
            }
            if (tls_ai != NULL) {
                freeaddrinfo(tls_ai);
            }
            server_free(s);
            return NULL;
        }
    }
    if (ai != NULL) {
        freeaddrinfo(ai);
    }
    if (tls_ai != NULL) {
        freeaddrinfo(tls_ai);
    }
    log_connection_limit(sc, s->nworkers);
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
        s->signals[i] = evsignal_new(s->base, sigs[i], on_signal, s);
        event_add(s->signals[i], NULL);
    }
    if (cfg->admin.enabled) {
        /* An admin request is a few lines: its head's time is enough. */
        s->admin = admin_new(s->base, &cfg->admin.listen, sc->header_timeout_ms,
                             &admin_ops, s);
        if (s->admin == NULL) {
            server_free(s);
            return NULL;
        }
    }
    if (watch || cfg->server.watch) {
        start_watch(s);
    }
    s->sweep = event_new(s->base, -1, EV_PERSIST, on_sweep, s);
    {
        struct timeval tv = clock_tv(SWEEP_INTERVAL_MS);

        event_add(s->sweep, &tv);
    }
    return s;
}

int
server_run(struct server *s)
{
    const struct server_conf *sc = &s->cfg->server;

    for (unsigned i = 0; i < s->nworkers; i++) {
        pthread_create(&s->workers[i].thread, NULL, worker_main,
                       &s->workers[i]);
    }
    if (sc->listen.host != NULL) {
        log_info("server: listening on %s:%u with %u workers, %zu routes",
                 sc->listen.host, sc->listen.port, s->nworkers,
                 s->cfg->nroutes);
    } else {
        log_info("server: %u workers, %zu routes, TLS listener only",
                 s->nworkers, s->cfg->nroutes);
    }
    if (sc->tls.enabled) {
        log_info("server: TLS listening on %s:%u", sc->tls.listen.host,
                 sc->tls.listen.port);
    }
    /* The signal events keep this loop alive until the workers are done. */
    while (s->stopping == 0) {
        event_base_loop(s->base, EVLOOP_ONCE);
    }
    for (unsigned i = 0; i < s->nworkers; i++) {
        /* Keep serving signals: a second one must reach the workers. */
        while (!atomic_load(&s->workers[i].done)) {
            struct timeval tv = clock_tv(DRAIN_POLL_MS);

            event_base_loopexit(s->base, &tv);
            event_base_loop(s->base, EVLOOP_ONCE);
        }
        pthread_join(s->workers[i].thread, NULL);
    }
    log_info("server: stopped");
    return 0;
}

void
server_free(struct server *s)
{
    if (s == NULL) {
        return;
    }
    for (unsigned i = 0; i < s->nworkers; i++) {
        worker_deinit(&s->workers[i]);
    }
    free(s->workers);
    local_store_free(s->store);
    for (size_t i = 0; i < sizeof(s->signals) / sizeof(s->signals[0]); i++) {
        if (s->signals[i] != NULL) {
            event_free(s->signals[i]);
        }
    }
    if (s->sweep != NULL) {
        event_free(s->sweep);
    }
    if (s->watch_ev != NULL) {
        event_free(s->watch_ev);
    }
    if (s->watch_timer != NULL) {
        event_free(s->watch_timer);
    }
    if (s->watch_fd >= 0) {
        close(s->watch_fd);
    }
    admin_free(s->admin);
    if (s->base != NULL) {
        event_base_free(s->base);
    }
    accesslog_close(s->log);
    metrics_free(s->metrics);
    config_unref(s->cfg);
    config_unref(s->started);
    free(s);
}
