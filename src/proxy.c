#include "proxy.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "clientconn.h"
#include "clock.h"
#include "config.h"
#include "filter.h"
#include "forwarded.h"
#include "headers.h"
#include "log.h"
#include "netaddr.h"
#include "path.h"
#include "predicate.h"
#include "metrics.h"
#include "accesslog.h"
#include "problem.h"
#include "ratekey.h"
#include "ratelimit.h"
#include "router.h"
#include "xmalloc.h"

/*
 * Client output above this pauses reads from the upstream until the client
 * has drained it: evhttp has no flow control of its own, so without this a
 * slow client makes the gateway buffer the whole response.
 */
#define CLIENT_HIGH_WATER (256 * 1024)
/*
 * Requests a worker may hold in delay mode at once; past it a request that
 * would be held is refused with 429, so a flood cannot pile up timers.
 */
#define MAX_HELD 4096
/* Upstream response headers beyond this are a broken upstream: 502. */
#define UPSTREAM_MAX_HEADERS (256 * 1024)

struct pool;

/* One keep-alive connection to an upstream, owned by its pool. */
struct upstream_conn {
    struct evhttp_connection *evcon;    /* owned */
    struct pool *pool;                  /* borrowed: where it returns */
    unsigned served;                    /* requests completed on it */
    struct upstream_conn *next_surplus; /* in proxy->surplus */
};

/* The connections of one worker to one upstream host:port. */
struct pool {
    char *host;                  /* owned */
    uint16_t port;               /* upstream port */
    struct upstream_conn **idle; /* LIFO of idle connections; owned */
    size_t nidle;                /* idle connections */
    size_t cap;                  /* slots in 'idle' */
    struct pool *next;           /* next pool of the proxy */
};

struct proxy {
    struct event_base *base;       /* borrowed */
    struct ratelimit *rl;          /* borrowed: this worker's limiters */
    size_t held;                   /* requests held in delay mode */
    struct evdns_base *dns;        /* borrowed */
    struct pool *pools;            /* owned list */
    struct upstream_conn *surplus; /* released beyond keepalive; owned */
    struct event *reaper;          /* frees 'surplus' from the loop */
    struct exchange *live;         /* exchanges alive, newest first */
    struct metrics_shard *metrics; /* borrowed: this worker's shard */
    struct accesslog *log;         /* borrowed: the access log */
    size_t in_flight;              /* length of 'live' */
    bool draining;                 /* responses close their connections */
};

enum exchange_state {
    EX_LIMITING,  /* waiting for the rate limiter's decision */
    EX_DELAYED,   /* admitted in delay mode, held on 'timer' */
    EX_WAITING,   /* request sent upstream, no response yet */
    EX_STREAMING, /* response headers sent, body flowing */
};

/* One client request on its way through the proxy. */
struct exchange {
    enum exchange_state state;
    struct proxy *proxy;             /* borrowed */
    struct config *cfg;              /* a reference, dropped at the end */
    const struct route *route;       /* borrowed from cfg */
    struct evhttp_request *creq;     /* client request; evhttp's */
    struct evhttp_connection *cconn; /* client connection; evhttp's */
    enum evhttp_cmd_type method;     /* client method, forwarded as is */
    char *target;                    /* origin-form sent upstream; owned */
    struct headers fwd;              /* request headers to send; owned */
    struct ratelimit_check *check;   /* pending decision, or NULL */
    struct headers rl_headers;       /* rate-limit fields for the
                                        response; owned */
    bool has_body;                   /* the client sent a body */
    struct upstream_conn *uc;        /* connection in use, or NULL */
    bool reused;                     /* uc had served a request before */
    bool retried;                    /* the one retry has been spent */
    struct evhttp_request *ureq;     /* pending upstream request */
    enum evhttp_request_error uerr;  /* last upstream error reported */
    bool uerr_set;                   /* 'uerr' holds something */
    struct event *timer;             /* connect, then response timeout */
    bool connect_phase;              /* 'timer' guards the connect */
    struct event *client_gone;       /* EV_CLOSED watch while waiting */
    bool paused;                     /* upstream reads held back */
    struct exchange *prev, *next;    /* in proxy->live */
    struct clientconn *cc;           /* the client's connection record,
                                        watched; NULL once it closed */
    int64_t t0;                      /* monotonic ms at arrival */
    int64_t wall;                    /* epoch ms at arrival */
    int64_t up_t0;                   /* monotonic ms the upstream request
                                        went out; 0 before */
    int64_t up_ms;                   /* until its response headers; -1 */
    int status;                      /* sent to the client; 499 when the
                                        client left first */
    uint64_t bytes;                  /* response body bytes sent */
    const char *decision;            /* rate-limit result, or NULL */
    const char *tier;                /* its tier label, or NULL */
    char client[64];                 /* resolved client address */
};

static void on_upstream_done(struct evhttp_request *ureq, void *arg);
static int on_upstream_headers(struct evhttp_request *ureq, void *arg);
static void on_upstream_chunk(struct evhttp_request *ureq, void *arg);
static void on_upstream_error(enum evhttp_request_error err, void *arg);

static const struct {
    enum evhttp_cmd_type cmd;
    const char *name;
} method_names[] = {
    {EVHTTP_REQ_GET, "GET"},       {EVHTTP_REQ_POST, "POST"},
    {EVHTTP_REQ_HEAD, "HEAD"},     {EVHTTP_REQ_PUT, "PUT"},
    {EVHTTP_REQ_DELETE, "DELETE"}, {EVHTTP_REQ_OPTIONS, "OPTIONS"},
    {EVHTTP_REQ_TRACE, "TRACE"},   {EVHTTP_REQ_CONNECT, "CONNECT"},
    {EVHTTP_REQ_PATCH, "PATCH"},
};

static const char *
method_name(enum evhttp_cmd_type cmd)
{
    for (size_t i = 0; i < sizeof(method_names) / sizeof(method_names[0]);
         i++) {
        if (method_names[i].cmd == cmd) {
            return method_names[i].name;
        }
    }
    return "GET";
}

static void
conn_free(struct upstream_conn *uc)
{
    evhttp_connection_free(uc->evcon);
    free(uc);
}

static void
free_surplus(struct proxy *p)
{
    while (p->surplus != NULL) {
        struct upstream_conn *uc = p->surplus;

        p->surplus = uc->next_surplus;
        conn_free(uc);
    }
}

static void
on_reap(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    free_surplus(arg);
}

struct proxy *
proxy_new(const struct proxy_deps *deps)
{
    struct proxy *p = xcalloc(1, sizeof(*p));

    p->base = deps->base;
    p->rl = deps->rl;
    p->dns = deps->dns;
    p->metrics = deps->metrics;
    p->log = deps->log;
    p->reaper = evtimer_new(p->base, on_reap, p);
    return p;
}

void
proxy_free(struct proxy *p)
{
    struct pool *next;

    if (p == NULL) {
        return;
    }
    free_surplus(p);
    event_free(p->reaper);
    for (struct pool *pl = p->pools; pl != NULL; pl = next) {
        next = pl->next;
        for (size_t i = 0; i < pl->nidle; i++) {
            conn_free(pl->idle[i]);
        }
        free(pl->idle);
        free(pl->host);
        free(pl);
    }
    free(p);
}

size_t
proxy_in_flight(const struct proxy *p)
{
    return p->in_flight;
}

static void
close_after_reply(struct evhttp_request *creq)
{
    struct evkeyvalq *out = evhttp_request_get_output_headers(creq);

    evhttp_remove_header(out, "Connection");
    evhttp_add_header(out, "Connection", "close");
}

void
proxy_drain(struct proxy *p)
{
    p->draining = true;
    for (struct exchange *ex = p->live; ex != NULL; ex = ex->next) {
        if (ex->state != EX_STREAMING) {
            close_after_reply(ex->creq);
        }
    }
}

bool
proxy_idle(const struct proxy *p)
{
    return p->in_flight == 0;
}

static void stop_waiting(struct exchange *ex);
static void cancel_upstream(struct exchange *ex);
static void exchange_free(struct exchange *ex);

void
proxy_abort_all(struct proxy *p)
{
    while (p->live != NULL) {
        struct exchange *ex = p->live;
        struct evhttp_connection *cconn = ex->cconn;

        stop_waiting(ex);
        cancel_upstream(ex);
        ex->status = 499;
        exchange_free(ex);
        evhttp_connection_free(cconn);
    }
}

/* ---- upstream connection pools ---- */

static struct pool *
pool_get(struct proxy *p, const char *host, uint16_t port)
{
    struct pool *pl;

    for (pl = p->pools; pl != NULL; pl = pl->next) {
        if (pl->port == port && strcmp(pl->host, host) == 0) {
            return pl;
        }
    }
    pl = xcalloc(1, sizeof(*pl));
    pl->host = xstrdup(host);
    pl->port = port;
    pl->next = p->pools;
    p->pools = pl;
    return pl;
}

static struct upstream_conn *
pool_take(struct proxy *p, struct pool *pl)
{
    struct upstream_conn *uc;

    if (pl->nidle > 0) {
        return pl->idle[--pl->nidle];
    }
    uc = xcalloc(1, sizeof(*uc));
    uc->pool = pl;
    uc->evcon = evhttp_connection_base_new(p->base, p->dns, pl->host, pl->port);
    if (uc->evcon == NULL) {
        free(uc);
        return NULL;
    }
    evhttp_connection_set_retries(uc->evcon, 0);
    evhttp_connection_set_max_headers_size(uc->evcon, UPSTREAM_MAX_HEADERS);
    return uc;
}

/*
 * Gives a connection back to its pool, keeping at most 'keepalive' idle.
 * A surplus connection is freed from the event loop, not here: this runs
 * inside evhttp's callbacks for that very connection.
 */
static void
pool_release(struct proxy *p, struct upstream_conn *uc, unsigned keepalive)
{
    struct pool *pl = uc->pool;
    static const struct timeval now = {0, 0};

    uc->served++;
    if (pl->nidle < keepalive) {
        pl->idle = xgrow(pl->idle, &pl->cap, pl->nidle + 1, sizeof(*pl->idle));
        pl->idle[pl->nidle++] = uc;
        return;
    }
    uc->next_surplus = p->surplus;
    p->surplus = uc;
    evtimer_add(p->reaper, &now);
}

static bool
conn_connected(struct evhttp_connection *evcon)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    evutil_socket_t fd =
        bufferevent_getfd(evhttp_connection_get_bufferevent(evcon));

    return fd >= 0 && getpeername(fd, (struct sockaddr *)&ss, &len) == 0;
}

/* ---- answers the gateway makes itself ---- */

/* Returns the length of the body sent. */
static size_t
reply_problem(struct evhttp_request *creq, int status, const char *detail)
{
    struct evbuffer *buf = evbuffer_new();
    char *body = problem_json(status, problem_reason(status), detail,
                              evhttp_request_get_uri(creq));

    evhttp_add_header(evhttp_request_get_output_headers(creq), "Content-Type",
                      PROBLEM_CONTENT_TYPE);
    size_t len = strlen(body);

    evbuffer_add(buf, body, len);
    free(body);
    evhttp_send_reply(creq, status, problem_reason(status), buf);
    evbuffer_free(buf);
    return len;
}

/* ---- exchange lifecycle ---- */

/* Counts a finished request and writes its access-log line. */
static void
record(struct proxy *p, struct evhttp_request *creq, const char *method,
       const char *route, const char *client, int status, uint64_t bytes,
       int64_t wall, int64_t t0, int64_t up_ms, const char *decision,
       const char *tier)
{
    char code[8];
    const char *labels[3];
    struct access_entry e;

    snprintf(code, sizeof(code), "%d", status);
    labels[0] = route != NULL ? route : "-";
    labels[1] = metrics_method_class(method);
    labels[2] = code;
    if (p->metrics != NULL) {
        metrics_add(p->metrics, M_REQUESTS, labels, 1);
    }
    if (p->log == NULL) {
        return;
    }
    e.time_ms = wall;
    e.client = client;
    e.method = method;
    e.path = creq != NULL ? evhttp_request_get_uri(creq) : NULL;
    e.route = route;
    e.status = status;
    e.bytes = bytes;
    e.upstream_ms = up_ms;
    e.total_ms = clock_mono_ms() - t0;
    e.decision = decision;
    e.tier = tier;
    accesslog_write(p->log, &e);
}

static void
exchange_free(struct exchange *ex)
{
    record(ex->proxy, ex->creq, method_name(ex->method), ex->route->id,
           ex->client, ex->status, ex->bytes, ex->wall, ex->t0, ex->up_ms,
           ex->decision, ex->tier);
    if (ex->proxy->metrics != NULL) {
        metrics_add(ex->proxy->metrics, M_IN_FLIGHT, NULL, -1);
    }
    if (ex->cc != NULL) {
        clientconn_watch(ex->cc, NULL, NULL);
    }
    if (ex->timer != NULL) {
        event_free(ex->timer);
    }
    if (ex->client_gone != NULL) {
        event_free(ex->client_gone);
    }
    headers_deinit(&ex->fwd);
    headers_deinit(&ex->rl_headers);
    free(ex->target);
    config_unref(ex->cfg);
    if (ex->prev != NULL) {
        ex->prev->next = ex->next;
    } else {
        ex->proxy->live = ex->next;
    }
    if (ex->next != NULL) {
        ex->next->prev = ex->prev;
    }
    ex->proxy->in_flight--;
    free(ex);
}

static void
release_upstream(struct exchange *ex)
{
    if (ex->uc != NULL) {
        pool_release(ex->proxy, ex->uc, ex->cfg->upstream.keepalive);
        ex->uc = NULL;
    }
}

static void
hold(struct proxy *p, int by)
{
    p->held += (size_t)(ssize_t)by;
    if (p->metrics != NULL) {
        metrics_add(p->metrics, M_HELD, NULL, by);
    }
}

/*
 * Stops watching for the client leaving, stops the timer, and drops a
 * pending rate-limit decision or a delay-mode hold.
 */
static void
stop_waiting(struct exchange *ex)
{
    if (ex->check != NULL) {
        ratelimit_cancel(ex->check);
        ex->check = NULL;
    }
    if (ex->state == EX_DELAYED) {
        hold(ex->proxy, -1);
        ex->state = EX_WAITING;
    }
    if (ex->client_gone != NULL) {
        event_free(ex->client_gone);
        ex->client_gone = NULL;
    }
    if (ex->timer != NULL) {
        evtimer_del(ex->timer);
    }
}

/* Drops the pending upstream request; evhttp then calls no callback. */
static void
cancel_upstream(struct exchange *ex)
{
    if (ex->ureq != NULL) {
        struct evhttp_request *ureq = ex->ureq;

        ex->ureq = NULL;
        evhttp_cancel_request(ureq);
    }
    release_upstream(ex);
}

/* Answers the client with a problem before any response byte was sent. */
static void
fail_exchange(struct exchange *ex, int status, const char *detail)
{
    log_warn("proxy: route %s: %s %s: %d: %s", ex->route->id,
             method_name(ex->method), evhttp_request_get_uri(ex->creq), status,
             detail);
    stop_waiting(ex);
    cancel_upstream(ex);
    ex->status = status;
    ex->bytes = reply_problem(ex->creq, status, detail);
    exchange_free(ex);
}

static const char *
upstream_error_str(const struct exchange *ex)
{
    if (!ex->uerr_set) {
        return "connection refused or unreachable";
    }
    switch (ex->uerr) {
    case EVREQ_HTTP_TIMEOUT:
        return "timed out";
    case EVREQ_HTTP_EOF:
        return "connection closed before a complete response";
    case EVREQ_HTTP_INVALID_HEADER:
        return "invalid response header";
    case EVREQ_HTTP_BUFFER_ERROR:
        return "connection error";
    case EVREQ_HTTP_DATA_TOO_LONG:
        return "response header too large";
    default:
        return "failed";
    }
}

/* ---- waiting for the upstream ---- */

static void
on_client_gone(evutil_socket_t fd, short what, void *arg)
{
    struct exchange *ex = arg;
    struct evhttp_connection *cconn = ex->cconn;

    (void)fd;
    (void)what;
    log_debug("proxy: route %s: client left before the response",
              ex->route->id);
    ex->status = 499;
    stop_waiting(ex);
    cancel_upstream(ex);
    exchange_free(ex);
    /* Frees the client request too; nothing will ever answer it. */
    evhttp_connection_free(cconn);
}

static void
arm_timer(struct exchange *ex, uint64_t ms)
{
    struct timeval tv = clock_tv(ms);

    evtimer_add(ex->timer, &tv);
}

static void start_upstream(struct exchange *ex);

static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct exchange *ex = arg;
    const struct route *r = ex->route;
    char detail[128];

    (void)fd;
    (void)what;
    if (ex->state == EX_DELAYED) {
        hold(ex->proxy, -1);
        start_upstream(ex);
        return;
    }
    if (ex->connect_phase) {
        ex->connect_phase = false;
        if (ex->uc != NULL && conn_connected(ex->uc->evcon)) {
            uint64_t left = r->response_timeout_ms > r->connect_timeout_ms
                                ? r->response_timeout_ms - r->connect_timeout_ms
                                : 0;
            arm_timer(ex, left);
            return;
        }
        snprintf(detail, sizeof(detail),
                 "upstream %s:%u: no connection within %llu ms", r->uri.host,
                 r->uri.port, (unsigned long long)r->connect_timeout_ms);
    } else {
        snprintf(detail, sizeof(detail),
                 "upstream %s:%u: no response within %llu ms", r->uri.host,
                 r->uri.port, (unsigned long long)r->response_timeout_ms);
    }
    fail_exchange(ex, 504, detail);
}

/*
 * Sends the prepared request on a pooled connection and arms the timers.
 * Returns 0, or -1 when no request could be started (the caller answers).
 */
static int
send_upstream(struct exchange *ex)
{
    const struct route *r = ex->route;
    struct evkeyvalq *oh;
    struct evhttp_request *ureq;
    struct timeval tv = clock_tv(r->response_timeout_ms);

    ex->uc =
        pool_take(ex->proxy, pool_get(ex->proxy, r->uri.host, r->uri.port));
    if (ex->uc == NULL) {
        return -1;
    }
    ex->reused = ex->uc->served > 0;
    /* One idle timeout for reads of the body; the timer covers the wait. */
    evhttp_connection_set_timeout_tv(ex->uc->evcon, &tv);

    ureq = evhttp_request_new(on_upstream_done, ex);
    evhttp_request_set_header_cb(ureq, on_upstream_headers);
    evhttp_request_set_chunked_cb(ureq, on_upstream_chunk);
    evhttp_request_set_error_cb(ureq, on_upstream_error);
    oh = evhttp_request_get_output_headers(ureq);
    for (size_t i = 0; i < ex->fwd.n; i++) {
        evhttp_add_header(oh, ex->fwd.v[i].name, ex->fwd.v[i].value);
    }
    if (ex->has_body) {
        struct evbuffer *in = evhttp_request_get_input_buffer(ex->creq);
        char len[32];

        snprintf(len, sizeof(len), "%zu", evbuffer_get_length(in));
        evhttp_add_header(oh, "Content-Length", len);
        evbuffer_add_buffer(evhttp_request_get_output_buffer(ureq), in);
    }
    ex->uerr_set = false;
    ex->up_t0 = clock_mono_ms();
    ex->connect_phase = !conn_connected(ex->uc->evcon);
    if (evhttp_make_request(ex->uc->evcon, ureq, ex->method, ex->target) < 0) {
        /*
         * The connect could not even start; evhttp has unlinked the
         * request but not freed it (its strdup failure, which does free
         * it, is out of memory, and that aborts elsewhere).
         */
        evhttp_request_free(ureq);
        release_upstream(ex);
        return -1;
    }
    ex->ureq = ureq;
    if (ex->connect_phase && r->connect_timeout_ms < r->response_timeout_ms) {
        arm_timer(ex, r->connect_timeout_ms);
    } else {
        ex->connect_phase = false;
        arm_timer(ex, r->response_timeout_ms);
    }
    return 0;
}

static void
on_upstream_error(enum evhttp_request_error err, void *arg)
{
    struct exchange *ex = arg;

    /* evhttp_cancel_request() reports itself here; that is ours, not news. */
    if (err == EVREQ_HTTP_REQUEST_CANCEL) {
        return;
    }
    ex->uerr = err;
    ex->uerr_set = true;
}

/* ---- streaming the response ---- */

static void
on_client_drained(struct evhttp_connection *cconn, void *arg)
{
    struct exchange *ex = arg;

    (void)cconn;
    if (ex->paused && ex->uc != NULL) {
        ex->paused = false;
        bufferevent_enable(evhttp_connection_get_bufferevent(ex->uc->evcon),
                           EV_READ);
    }
}

/* The client went away mid-response; evhttp has detached its request. */
static void
on_client_close(struct exchange *ex)
{
    struct evhttp_request *creq = ex->creq;

    log_debug("proxy: route %s: client left during the response",
              ex->route->id);

    ex->status = 499;
    cancel_upstream(ex);
    /* Recorded first: its log line still reads the request. */
    exchange_free(ex);
    /* A detached request is freed by ending it. */
    evhttp_send_reply_end(creq);
}

static bool
copy_response_header(const char *name, const char *connection)
{
    return !forwarded_is_hop_by_hop(name) &&
           !forwarded_in_connection(connection, name);
}

static bool
route_filters_response(const struct route *r)
{
    for (size_t i = 0; i < r->nfilters; i++) {
        if (filter_is_response(&r->filters[i])) {
            return true;
        }
    }
    return false;
}

static int
on_upstream_headers(struct evhttp_request *ureq, void *arg)
{
    struct exchange *ex = arg;
    const struct route *r = ex->route;
    struct evkeyvalq *uh = evhttp_request_get_input_headers(ureq);
    struct evkeyvalq *ch = evhttp_request_get_output_headers(ex->creq);
    const char *connection = evhttp_find_header(uh, "Connection");
    struct headers resp;
    struct evkeyval *kv;

    if (ex->state != EX_WAITING) {
        return 0;
    }
    stop_waiting(ex);
    headers_deinit(&ex->fwd);
    if (!route_filters_response(r)) {
        /* The common case: straight across, no copy in between. */
        TAILQ_FOREACH (kv, uh, next) {
            if (copy_response_header(kv->key, connection)) {
                evhttp_add_header(ch, kv->key, kv->value);
            }
        }
    } else {
        headers_init(&resp);
        TAILQ_FOREACH (kv, uh, next) {
            if (copy_response_header(kv->key, connection)) {
                headers_add(&resp, kv->key, kv->value);
            }
        }
        for (size_t i = 0; i < r->nfilters; i++) {
            filter_apply_response(&r->filters[i], &resp);
        }
        for (size_t i = 0; i < resp.n; i++) {
            evhttp_add_header(ch, resp.v[i].name, resp.v[i].value);
        }
        headers_deinit(&resp);
    }
    for (size_t i = 0; i < ex->rl_headers.n; i++) {
        evhttp_add_header(ch, ex->rl_headers.v[i].name,
                          ex->rl_headers.v[i].value);
    }

    ex->state = EX_STREAMING;
    ex->status = evhttp_request_get_response_code(ureq);
    ex->up_ms = clock_mono_ms() - ex->up_t0;
    if (ex->proxy->metrics != NULL) {
        const char *labels[1] = {r->id};

        metrics_observe(ex->proxy->metrics, M_UPSTREAM_SECONDS, labels,
                        (double)ex->up_ms / 1000.0);
    }

    evhttp_send_reply_start(ex->creq, evhttp_request_get_response_code(ureq),
                            evhttp_request_get_response_code_line(ureq));
    clientconn_stream_timeouts(ex->cc);
    return 0;
}

static void
on_upstream_chunk(struct evhttp_request *ureq, void *arg)
{
    struct exchange *ex = arg;
    struct bufferevent *cbev;

    if (ex->state != EX_STREAMING) {
        return;
    }
    ex->bytes += evbuffer_get_length(evhttp_request_get_input_buffer(ureq));
    evhttp_send_reply_chunk_with_cb(
        ex->creq, evhttp_request_get_input_buffer(ureq), on_client_drained, ex);
    cbev = evhttp_connection_get_bufferevent(ex->cconn);
    if (!ex->paused &&
        evbuffer_get_length(bufferevent_get_output(cbev)) > CLIENT_HIGH_WATER) {
        ex->paused = true;
        bufferevent_disable(evhttp_connection_get_bufferevent(ex->uc->evcon),
                            EV_READ);
    }
}

static bool
retriable(const struct exchange *ex, const struct evhttp_request *ureq)
{
    /*
     * An idle keep-alive connection that the upstream closed just as the
     * request went out fails with EOF and no response: safe to send once
     * more when the request is idempotent and carries no body.
     */
    return ureq == NULL && ex->reused && !ex->retried && !ex->has_body &&
           (ex->method == EVHTTP_REQ_GET || ex->method == EVHTTP_REQ_HEAD ||
            ex->method == EVHTTP_REQ_OPTIONS);
}

static void
on_upstream_done(struct evhttp_request *ureq, void *arg)
{
    struct exchange *ex = arg;
    bool failed = ureq == NULL || evhttp_request_get_response_code(ureq) == 0;
    char detail[160];

    ex->ureq = NULL;
    release_upstream(ex);
    if (ex->state == EX_WAITING) {
        if (!failed) {
            /* Headers always come first; nothing sensible to forward. */
            fail_exchange(ex, 502, "upstream answered without headers");
            return;
        }
        if (retriable(ex, ureq)) {
            ex->retried = true;
            evtimer_del(ex->timer);
            if (send_upstream(ex) == 0) {
                return;
            }
        }
        if (ex->uerr_set && ex->uerr == EVREQ_HTTP_TIMEOUT) {
            /* evhttp's own idle timeout, equal to ours, fired first. */
            snprintf(detail, sizeof(detail),
                     "upstream %s:%u: no response within %llu ms",
                     ex->route->uri.host, ex->route->uri.port,
                     (unsigned long long)ex->route->response_timeout_ms);
            fail_exchange(ex, 504, detail);
            return;
        }
        snprintf(detail, sizeof(detail), "upstream %s:%u: %s",
                 ex->route->uri.host, ex->route->uri.port,
                 upstream_error_str(ex));
        fail_exchange(ex, 502, detail);
        return;
    }
    if (failed) {
        /*
         * The status line is out: the only honest signal left is to cut
         * the connection, so that the client sees a truncated body rather
         * than a complete-looking one.
         */
        log_warn("proxy: route %s: upstream %s:%u: %s mid-response; "
                 "cutting the client off",
                 ex->route->id, ex->route->uri.host, ex->route->uri.port,
                 upstream_error_str(ex));
        struct evhttp_connection *cconn = ex->cconn;

        exchange_free(ex);
        evhttp_connection_free(cconn);
        return;
    }
    evhttp_send_reply_end(ex->creq);
    exchange_free(ex);
}

/* ---- accepting a request ---- */

/* Copies evhttp's header list into a 'struct headers'. */
static void
headers_from_evkeyvalq(struct headers *h, const struct evkeyvalq *q)
{
    const struct evkeyval *kv;

    TAILQ_FOREACH (kv, q, next) {
        headers_add(h, kv->key, kv->value);
    }
}

static bool
forward_request_header(const char *name, const char *connection)
{
    return !forwarded_is_hop_by_hop(name) &&
           !forwarded_in_connection(connection, name) &&
           strcasecmp(name, "Host") != 0 &&
           strcasecmp(name, "Content-Length") != 0 &&
           strcasecmp(name, "Expect") != 0 &&
           strcasecmp(name, "X-Forwarded-For") != 0 &&
           strcasecmp(name, "X-Forwarded-Proto") != 0 &&
           strcasecmp(name, "X-Forwarded-Host") != 0;
}

/*
 * Builds the headers sent upstream from the filtered request headers:
 * hop-by-hop fields dropped, Host chosen, X-Forwarded-* set. The
 * X-Forwarded-* fields a client sent are kept only from a trusted proxy.
 */
static void
build_forward_headers(struct headers *fwd, const struct outgoing *out,
                      const struct route *r, const struct netaddr *peer,
                      bool peer_trusted)
{
    const char *connection = headers_get(&out->headers, "Connection");
    const char *host = headers_get(&out->headers, "Host");
    const char *xff = headers_get(&out->headers, "X-Forwarded-For");
    const char *xfp = headers_get(&out->headers, "X-Forwarded-Proto");
    const char *xfh = headers_get(&out->headers, "X-Forwarded-Host");
    char addr[64];

    for (size_t i = 0; i < out->headers.n; i++) {
        const struct header *h = &out->headers.v[i];

        if (forward_request_header(h->name, connection)) {
            headers_add(fwd, h->name, h->value);
        }
    }
    headers_add(fwd, "Host",
                out->preserve_host && host != NULL ? host : r->uri.authority);
    netaddr_format(peer, addr, sizeof(addr));
    if (peer_trusted && xff != NULL) {
        char *v = xasprintf("%s, %s", xff, addr);

        headers_add(fwd, "X-Forwarded-For", v);
        free(v);
    } else {
        headers_add(fwd, "X-Forwarded-For", addr);
    }
    headers_add(fwd, "X-Forwarded-Proto",
                peer_trusted && xfp != NULL ? xfp : "http");
    if (peer_trusted && xfh != NULL) {
        headers_add(fwd, "X-Forwarded-Host", xfh);
    } else if (host != NULL) {
        headers_add(fwd, "X-Forwarded-Host", host);
    }
}

static char *
build_target(const struct route *r, const char *path, const char *query)
{
    if (query != NULL) {
        return xasprintf("%s%s?%s", r->uri.base_path, path, query);
    }
    return xasprintf("%s%s", r->uri.base_path, path);
}

static bool
peer_address(struct evhttp_connection *cconn, struct netaddr *out)
{
    const struct sockaddr *sa = evhttp_connection_get_addr(cconn);

    return sa != NULL && netaddr_from_sockaddr(sa, out) == 0;
}

/* Request line plus header fields, as counted against max_header_bytes. */
static uint64_t
header_bytes(struct evhttp_request *creq)
{
    const struct evkeyval *kv;
    uint64_t n = strlen(evhttp_request_get_uri(creq)) + 16;

    TAILQ_FOREACH (kv, evhttp_request_get_input_headers(creq), next) {
        n += strlen(kv->key) + strlen(kv->value) + 4;
    }
    return n;
}

static void
start_upstream(struct exchange *ex)
{
    ex->state = EX_WAITING;
    if (send_upstream(ex) < 0) {
        char detail[128];

        snprintf(detail, sizeof(detail), "upstream %s:%u: cannot connect",
                 ex->route->uri.host, ex->route->uri.port);
        fail_exchange(ex, 502, detail);
    }
}

/* Answers a refusal of the rate limiter, fields and body included. */
static void
reply_refusal(struct exchange *ex, const struct ratelimit_outcome *o)
{
    struct evkeyvalq *oh = evhttp_request_get_output_headers(ex->creq);
    struct evbuffer *buf = evbuffer_new();

    for (size_t i = 0; i < o->headers.n; i++) {
        evhttp_add_header(oh, o->headers.v[i].name, o->headers.v[i].value);
    }
    evhttp_add_header(oh, "Content-Type", PROBLEM_CONTENT_TYPE);
    evbuffer_add(buf, o->body, strlen(o->body));
    ex->status = o->status;
    ex->bytes = strlen(o->body);
    evhttp_send_reply(ex->creq, o->status, problem_reason(o->status), buf);
    evbuffer_free(buf);
}

static void
on_ratelimit_outcome(struct exchange *ex, struct ratelimit_outcome *o)
{
    struct proxy *p = ex->proxy;
    uint64_t delay = o->delay_ms;

    ex->decision = ratelimit_result_name(o);
    ex->tier = o->tier;
    if (ex->decision != NULL && p->metrics != NULL) {
        const char *labels[4] = {ex->route->id,
                                 o->limiter != NULL ? o->limiter : "-",
                                 o->tier != NULL ? o->tier : "-", ex->decision};

        metrics_add(p->metrics, M_RATELIMIT_DECISIONS, labels, 1);
    }

    if (o->verdict == RATELIMIT_DENY) {
        log_debug("proxy: route %s: %d by limiter %s", ex->route->id, o->status,
                  o->limiter != NULL ? o->limiter : "-");
        stop_waiting(ex);
        reply_refusal(ex, o);
        ratelimit_outcome_deinit(o);
        exchange_free(ex);
        return;
    }
    /* The fields go on the response once it starts. */
    ex->rl_headers = o->headers;
    headers_init(&o->headers);
    ratelimit_outcome_deinit(o);
    if (delay == 0) {
        start_upstream(ex);
        return;
    }
    if (p->held >= MAX_HELD) {
        fail_exchange(ex, 429,
                      "too many requests are already held in delay mode");
        return;
    }
    hold(p, 1);
    ex->state = EX_DELAYED;
    /*
     * libevent counts a timer from the loop's cached time, taken when this
     * turn began. A local decision read the clock later than that, so the
     * hold would end early by as long as this turn has run so far.
     */
    event_base_update_cache_time(p->base);
    arm_timer(ex, delay);
}

static void
on_ratelimit_done(struct ratelimit_outcome *o, void *arg)
{
    struct exchange *ex = arg;

    ex->check = NULL;
    on_ratelimit_outcome(ex, o);
}

static const char *
header_or_null(const struct headers *h, const char *name)
{
    return name != NULL ? headers_get(h, name) : NULL;
}

static void on_client_close(struct exchange *ex);

/*
 * The client connection is closing: the client left, timed out, or the
 * reply was the last one. The exchange still on it ends here.
 */
static void
on_conn_close(struct clientconn *cc, void *arg)
{
    struct exchange *ex = arg;

    (void)cc;
    ex->cc = NULL;
    if (ex->state == EX_STREAMING) {
        on_client_close(ex);
    } else {
        /* evhttp frees the request with the connection. */
        ex->status = 499;
        stop_waiting(ex);
        cancel_upstream(ex);

        exchange_free(ex);
    }
}

/* A new exchange for 'creq', linked into the proxy, watching the client. */
static struct exchange *
exchange_new(struct proxy *p, struct config *cfg, const struct route *route,
             struct evhttp_request *creq, struct clientconn *cc,
             enum evhttp_cmd_type method, const char *client, int64_t t0,
             int64_t wall)
{
    struct exchange *ex = xcalloc(1, sizeof(*ex));
    struct evhttp_connection *cconn = evhttp_request_get_connection(creq);

    ex->state = EX_LIMITING;
    ex->proxy = p;
    ex->cfg = config_ref(cfg);
    ex->route = route;
    ex->creq = creq;
    ex->cconn = cconn;
    ex->method = method;
    ex->cc = cc;
    clientconn_watch(cc, on_conn_close, ex);
    ex->t0 = t0;
    ex->wall = wall;
    ex->up_ms = -1;
    snprintf(ex->client, sizeof(ex->client), "%s", client);
    headers_init(&ex->fwd);
    headers_init(&ex->rl_headers);
    if (p->metrics != NULL) {
        metrics_add(p->metrics, M_IN_FLIGHT, NULL, 1);
    }
    ex->next = p->live;
    if (p->live != NULL) {
        p->live->prev = ex;
    }
    p->live = ex;
    p->in_flight++;
    ex->timer = evtimer_new(p->base, on_timer, ex);
    ex->client_gone = event_new(
        p->base, bufferevent_getfd(evhttp_connection_get_bufferevent(cconn)),
        EV_CLOSED, on_client_gone, ex);
    event_add(ex->client_gone, NULL);
    return ex;
}

/* Answers before any route or exchange exists, and records it. */
static void
early_reply(struct proxy *p, struct evhttp_request *creq, int status,
            const char *detail, const char *client, int64_t t0, int64_t wall)
{
    const char *method = method_name(evhttp_request_get_command(creq));
    size_t bytes = reply_problem(creq, status, detail);

    record(p, creq, method, NULL, client, status, bytes, wall, t0, -1, NULL,
           NULL);
}

void
proxy_handle(struct proxy *p, struct config *cfg, struct evhttp_request *creq,
             struct clientconn *cc)
{
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(creq);
    const char *raw_path = uri != NULL ? evhttp_uri_get_path(uri) : NULL;
    const char *query = uri != NULL ? evhttp_uri_get_query(uri) : NULL;
    struct evhttp_connection *cconn = evhttp_request_get_connection(creq);
    enum evhttp_cmd_type method = evhttp_request_get_command(creq);
    const struct server_conf *sc = &cfg->server;
    struct netaddr peer, client;
    struct headers in;
    struct outgoing out;
    struct glob_vars vars;
    struct request_view view;
    const struct route *route;
    struct exchange *ex;
    struct ratelimit_outcome outcome;
    char *path = NULL;
    enum path_status st;
    bool trusted, limited;
    int64_t t0 = clock_mono_ms(), wall = clock_wall_ms();
    char addr[64];

    if (p->draining) {
        close_after_reply(creq);
    }
    if (!peer_address(cconn, &peer)) {
        memset(&peer, 0, sizeof(peer));
        peer.family = AF_INET;
    }
    netaddr_format(&peer, addr, sizeof(addr));
    if (header_bytes(creq) > sc->max_header_bytes) {
        early_reply(p, creq, 431,
                    "request header fields exceed server.max_header_bytes",
                    addr, t0, wall);
        return;
    }
    if (raw_path == NULL || raw_path[0] == '\0') {
        early_reply(p, creq, 400, "request target has no path", addr, t0, wall);
        return;
    }
    st = path_normalize(raw_path, strlen(raw_path), &path);
    if (st != PATH_OK) {
        early_reply(p, creq, 400, path_status_str(st), addr, t0, wall);
        return;
    }
    headers_init(&in);
    headers_from_evkeyvalq(&in, evhttp_request_get_input_headers(creq));
    trusted =
        forwarded_is_trusted(&peer, sc->trusted_proxies, sc->ntrusted_proxies);
    forwarded_client(&peer, headers_get(&in, "X-Forwarded-For"),
                     sc->trusted_proxies, sc->ntrusted_proxies, &client);
    netaddr_format(&client, addr, sizeof(addr));

    view.method = method_name(method);
    view.path = path;
    view.query = query;
    view.host = headers_get(&in, "Host");
    view.headers = &in;
    view.client = &client;
    route = router_match(cfg, &view, &vars);
    if (route == NULL) {
        headers_deinit(&in);
        free(path);
        early_reply(p, creq, 404, "no route matches this request", addr, t0,
                    wall);
        return;
    }
    limited = p->rl != NULL && ratelimit_route_limited(route);

    ex = exchange_new(p, cfg, route, creq, cc, method, addr, t0, wall);
    if (limited) {
        struct caller who;

        who.client = &client;
        who.user =
            trusted ? header_or_null(&in, cfg->identity.user_header) : NULL;
        who.role =
            trusted ? header_or_null(&in, cfg->identity.role_header) : NULL;
        who.headers = &in;
        who.query = query;
        who.ipv6_prefix = cfg->identity.ipv6_prefix;
        /* Keys are built now, from the request as the client sent it. */
        ex->check = ratelimit_check(p->rl, cfg, route, &who,
                                    evhttp_request_get_uri(creq),
                                    on_ratelimit_done, ex, &outcome);
    }

    out.path = xstrdup(path);
    out.headers = in; /* moved: 'in' is not used again */
    out.preserve_host = false;
    out.vars = &vars;
    if (!trusted) {
        /*
         * Not believed here, so not passed on either: an upstream must not
         * take a client's word for who it is. Filters may still set them.
         */
        if (cfg->identity.user_header != NULL) {
            headers_remove(&out.headers, cfg->identity.user_header);
        }
        if (cfg->identity.role_header != NULL) {
            headers_remove(&out.headers, cfg->identity.role_header);
        }
    }
    for (size_t i = 0; i < route->nfilters; i++) {
        filter_apply_request(&route->filters[i], &out);
    }
    ex->target = build_target(route, out.path, query);
    ex->has_body =
        evbuffer_get_length(evhttp_request_get_input_buffer(creq)) > 0 ||
        method == EVHTTP_REQ_POST || method == EVHTTP_REQ_PUT ||
        method == EVHTTP_REQ_PATCH;
    build_forward_headers(&ex->fwd, &out, route, &peer, trusted);
    headers_deinit(&out.headers);
    free(out.path);
    free(path);
    if (!limited) {
        start_upstream(ex);
    } else if (ex->check == NULL) {
        on_ratelimit_outcome(ex, &outcome);
    }
}
