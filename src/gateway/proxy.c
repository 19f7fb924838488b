#include "proxy.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
/* For the client's HTTP version, which 2.1 has no accessor for. */
#include <event2/http_struct.h>
#include <event2/keyvalq_struct.h>
#include <event2/util.h>

#include "accesslog.h"
#include "claims.h"
#include "clientconn.h"
#include "clock.h"
#include "cookie.h"
#include "config.h"
#include "evreq.h"
#include "filter.h"
#include "forward.h"
#include "forwarded.h"
#include "headers.h"
#include "jwtcache.h"
#include "jwtcheck.h"
#include "log.h"
#include "metrics.h"
#include "netaddr.h"
#include "path.h"
#include "predicate.h"
#include "problem.h"
#include "ratekey.h"
#include "ratelimit.h"
#include "reqcheck.h"
#include "router.h"
#include "strbuf.h"
#include "tls.h"
#include "upstream.h"
#include "xmalloc.h"

/*
 * Client output above this pauses reads from the upstream until the client
 * has drained it: evhttp has no flow control of its own, so without this a
 * slow client makes the gateway buffer the whole response.
 */
#define CLIENT_HIGH_WATER (256 * 1024)
/* Verified tokens a worker remembers (identity.jwt; jwtcache.h). */
#define JWT_CACHE_ENTRIES 1024
/*
 * Retry (filter.h): a request body up to this size is kept for a retry;
 * a larger one is sent once, never retried.
 */
#define RETRY_BODY_MAX (1024 * 1024)
/* A request target up to this long lives in its exchange; longer ones are
 * allocated. */
#define TARGET_INLINE 192
/* Freed exchanges a worker keeps for the next ones: about as many as
 * arrive in one loop turn (none under ASan: xmalloc.h). */
#define SPARE_EXCHANGES 64

/* A field list is kept in a pool only while its block of copies and its
 * slots each take at most this many bytes (a usual request's: 1 KiB). */
#define POOLED_LIST_BYTES (8 * 1024)

/*
 * Emptied field lists whose memory later ones reuse: a request's lists
 * then allocate nothing in the common case. Many are alive at once: one
 * per request waiting for its decision or its response head.
 */
struct field_pool {
    struct headers v[SPARE_EXCHANGES]; /* owned */
    size_t n;                          /* lists in 'v' */
};

static void pool_free(struct field_pool *pool);

struct proxy {
    struct event_base *base;       /* borrowed */
    struct ratelimit *rl;          /* borrowed: this worker's limiters */
    struct upstream_client *up;    /* owned: pools to the upstreams */
    size_t held;                   /* requests held in delay mode */
    struct exchange *live;         /* exchanges alive, newest first */
    struct metrics_shard *metrics; /* borrowed: this worker's shard */
    struct accesslog *log;         /* borrowed: the access log */
    size_t in_flight;              /* length of 'live' */
    bool draining;                 /* responses close their connections */
    struct field_pool in_spare;    /* the lists of a request's fields
                                      that were given back */
    struct field_pool fwd_spare;   /* the lists of fields sent upstream
                                      that were given back */
    struct jwtcache *tokens;       /* verified tokens; owned */
    struct exchange *spare_ex;     /* exchanges freed, kept for the next
                                      ones (linked by 'next'); owned */
    size_t nspare_ex;              /* length of 'spare_ex' */
    struct strbuf head_text;       /* the response head being written;
                                      its memory is reused; owned */
    struct evbuffer *head_spare;   /* hands the head to evhttp, or holds
                                      a whole response for one write
                                      (exchange 'held'); empty between
                                      uses; owned */
    uint64_t draws;                /* state of the Weight draws */
    bool handling_tls;             /* the request proxy_handle() is on
                                      came over the TLS listener */
    struct field_pool rl_spare;    /* the lists of rate-limit fields
                                      that were given back */
};

/*
 * Where an exchange stands. Every callback checks it first; exchange_end()
 * is the only way out of every state.
 */
enum exchange_state {
    EX_LIMITING,  /* waiting for the rate limiter's decision */
    EX_DELAYED,   /* admitted in delay mode, held on 'timer' */
    EX_UPSTREAM,  /* request sent upstream, no response head yet */
    EX_STREAMING, /* response begun to the client, body flowing */
    EX_BACKOFF,   /* Retry: an attempt failed, the next waits on 'timer' */
};

/* How an exchange ends, and so what is done last to the client request. */
enum exchange_end {
    END_REPLY,    /* answered now: 'reply' or a problem (not yet begun) */
    END_COMPLETE, /* the streamed response is complete */
    END_CUT,      /* the streamed response broke: close the connection so
                     that the client sees it truncated, not complete */
    END_ABANDON,  /* the client is gone while we waited: free its
                     connection, nothing will ever answer it */
    END_CLOSED,   /* evhttp is closing the client connection right now
                     (its close callback); it frees the request itself */
};

/* One client request on its way through the proxy. */
struct exchange {
    enum exchange_state state;
    struct proxy *proxy;             /* borrowed */
    struct config *cfg;              /* a reference, dropped at the end */
    const struct route *route;       /* borrowed from cfg */
    struct evhttp_request *creq;     /* client request; evhttp's */
    struct evhttp_connection *cconn; /* client connection; evhttp's */
    struct clientconn *cc;           /* its record, watched; NULL once it
                                        closed */
    enum evhttp_cmd_type method;     /* client method, forwarded as is */
    bool http10;                     /* the client spoke HTTP/1.0 */
    bool tls;                        /* it came over the TLS listener */
    char *target;                    /* origin-form sent upstream: owned,
                                        or 'target_buf' */
    struct headers fwd;              /* request headers to send; owned */
    struct ratelimit_check *check;   /* pending decision, or NULL */
    struct headers rl_headers;       /* rate-limit fields for the
                                        response; owned */
    bool has_body;                   /* send the client's body, with a
                                        Content-Length even if 0 */
    struct upstream_req *ureq;       /* the upstream request, or NULL */
    struct event *timer;             /* delay mode's hold, or NULL */
    bool paused;                     /* upstream reads held back */
    bool chunked;                    /* the gateway frames the response
                                        body to the client in chunks */
    bool close_delimited;            /* the response body ends for the
                                        client when the connection closes
                                        (HTTP/1.0, no length) */
    bool held;                       /* the head, then the body read
                                        with it, wait in the proxy's
                                        head_spare until that read parsed
                                        (on_upstream_head()) */
    const struct headers *refusal;   /* a refusal's fields, which
                                        END_REPLY writes beside evhttp's
                                        list, or NULL; borrowed */
    struct exchange *prev, *next;    /* in proxy->live */
    int64_t t0;                      /* monotonic ms at arrival */
    int64_t wall;                    /* epoch ms at arrival */
    int64_t up_t0_us;                /* monotonic us the upstream request
                                        went out */
    int64_t up_ms;                   /* until its response head; -1 */
    int status;                      /* sent to the client; 499 when the
                                        client left first, 444 when the
                                        gateway closed it unanswered */
    uint64_t bytes;                  /* response body bytes sent */
    const char *decision;            /* rate-limit result, or NULL */
    const char *tier;                /* its tier label, or NULL */
    char client[64];                 /* resolved client address */
    char *user;                      /* the decided user, for the access
                                        log, or NULL; owned */
    char *client_host;               /* the Host routed on, for response
                                        filters, or NULL; owned */
    char *client_path;               /* the path asked for, as sent, for
                                        response filters, or NULL; owned */
    /* Retry (filter.h): */
    const struct retry_conf *retry; /* the route's, or NULL; borrowed */
    struct evbuffer *body_copy;     /* the body kept for a retry, or
                                       NULL; owned */
    unsigned attempt;               /* upstream attempts started */
    int64_t first_t0;               /* monotonic ms the first began */
    uint64_t backoff_ms;            /* the last backoff */
    /* Last: exchange_new() zeroes what comes before. */
    char target_buf[TARGET_INLINE]; /* a short 'target' */
};

struct proxy *
proxy_new(const struct proxy_deps *deps)
{
    struct proxy *p = xcalloc(1, sizeof(*p));

    p->base = deps->base;
    p->rl = deps->rl;
    p->metrics = deps->metrics;
    p->log = deps->log;
    p->up = upstream_client_new(deps->base, deps->dns);
    p->tokens = jwtcache_new(JWT_CACHE_ENTRIES);
    p->head_spare = evbuffer_new();
    /* Only a spread, not a secret: the clock is seed enough when the
     * kernel has none to give. */
    if (getrandom(&p->draws, sizeof(p->draws), GRND_NONBLOCK) !=
        (ssize_t)sizeof(p->draws)) {
        p->draws = (uint64_t)clock_wall_ms() ^ (uint64_t)(uintptr_t)p;
    }
    return p;
}

void
proxy_free(struct proxy *p)
{
    if (p == NULL) {
        return;
    }
    pool_free(&p->in_spare);
    pool_free(&p->fwd_spare);
    pool_free(&p->rl_spare);
    upstream_client_free(p->up);
    jwtcache_free(p->tokens);
    while (p->spare_ex != NULL) {
        struct exchange *next = p->spare_ex->next;

        free(p->spare_ex);
        p->spare_ex = next;
    }
    free(p->head_text.p);
    evbuffer_free(p->head_spare);
    free(p);
}

size_t
proxy_in_flight(const struct proxy *p)
{
    return p->in_flight;
}

void
proxy_drain(struct proxy *p)
{
    p->draining = true;
    for (struct exchange *ex = p->live; ex != NULL; ex = ex->next) {
        if (ex->state != EX_STREAMING) {
            evreq_close_after_reply(ex->creq);
        }
    }
}

bool
proxy_idle(const struct proxy *p)
{
    return p->in_flight == 0;
}

/* ---- field lists ---- */

/* An empty list in '*h', with the memory of one given back to 'pool'. */
static void
pool_take(struct field_pool *pool, struct headers *h)
{
    if (pool->n > 0) {
        *h = pool->v[--pool->n];
    } else {
        headers_init(h);
    }
}

/* 'h' is done with: kept (emptied) in 'pool' if there is room (never
 * under ASan: xmalloc.h); 'h' is left empty. */
static void
pool_give(struct field_pool *pool, struct headers *h)
{
    if (h->v == NULL && h->mem == NULL) {
        return; /* nothing to keep */
    }
    /* A list grown by one large request is not kept: up to 64 of them
       would hold that much memory for good. */
    if (XMALLOC_REUSE && pool->n < SPARE_EXCHANGES &&
        h->mem_cap <= POOLED_LIST_BYTES &&
        h->cap * sizeof(*h->v) <= POOLED_LIST_BYTES) {
        headers_clear(h);
        pool->v[pool->n++] = *h;
    } else {
        headers_deinit(h);
    }
    headers_init(h);
}

static void
pool_free(struct field_pool *pool)
{
    for (size_t i = 0; i < pool->n; i++) {
        headers_deinit(&pool->v[i]);
    }
}

/* ---- the end of an exchange ---- */

static void on_client_drained(struct evhttp_connection *cconn, void *arg);

/* Counts a finished request and writes its access-log line. */
static void
record(struct proxy *p, struct evhttp_request *creq, const char *method,
       const char *route, const char *client, int status, uint64_t bytes,
       int64_t wall, int64_t t0, int64_t up_ms, const char *decision,
       const char *tier, const char *user, bool tls)
{
    char code[8];
    const char *labels[3];
    struct access_entry e;

    /* A status is 100..599 (499 our own); anything else as printf would. */
    if (status >= 100 && status <= 999) {
        code[0] = (char)('0' + status / 100);
        code[1] = (char)('0' + status / 10 % 10);
        code[2] = (char)('0' + status % 10);
        code[3] = '\0';
    } else {
        snprintf(code, sizeof(code), "%d", status);
    }
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
    e.path = evhttp_request_get_uri(creq);
    e.route = route;
    e.status = status;
    e.bytes = bytes;
    e.upstream_ms = up_ms;
    e.total_ms = clock_mono_ms() - t0;
    e.decision = decision;
    e.tier = tier;
    e.user = user;
    e.tls = tls;
    accesslog_write(p->log, &e);
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
 * Ends 'ex' for every reason there is. Everything pending stops (the rate
 * limiter's decision, the hold, the upstream request, the watches on the
 * client), the log line and the metrics are recorded, the exchange is
 * freed, and only then is the client request handed back to evhttp, the
 * very last thing: evhttp may free the request, and the connection with
 * it, inside that call (and run the connection's close callback there).
 * For END_REPLY, 'reply' (taken) is the body of a 'status' answer; for
 * END_ABANDON and END_CLOSED, 'status' is what is logged, or 0 for 499
 * (the client left).
 */
static void
exchange_end(struct exchange *ex, enum exchange_end how, int status,
             struct evbuffer *reply)
{
    struct proxy *p = ex->proxy;
    struct evhttp_request *creq = ex->creq;
    struct evhttp_connection *cconn = ex->cconn;
    /* A client that fell behind is written to by the bufferevent; over
     * TLS, only OpenSSL writes to the socket. */
    bool flush = how == END_COMPLETE && !ex->paused && !ex->tls;
    struct clientconn *tls_cc = ex->tls ? ex->cc : NULL;
    struct clientconn *plain_cc = ex->tls ? NULL : ex->cc;
    bool held = ex->held;
    bool close_delimited = ex->close_delimited;
    bool last_chunk = how == END_COMPLETE && ex->chunked;
    const struct headers *refusal = ex->refusal;

    if (ex->check != NULL) {
        ratelimit_cancel(ex->check);
    }
    if (ex->state == EX_DELAYED) {
        hold(p, -1);
    }
    if (ex->ureq != NULL) {
        upstream_cancel(ex->ureq);
    }
    if (ex->cc != NULL) {
        clientconn_watch(ex->cc, NULL, NULL);
        clientconn_watch_leave(ex->cc, NULL, NULL);
    }
    if (ex->timer != NULL) {
        event_free(ex->timer);
    }
    if (held && how != END_COMPLETE) {
        evbuffer_drain(p->head_spare, evbuffer_get_length(p->head_spare));
    }
    if (how == END_REPLY) {
        evreq_reply_prepare(creq, reply);
        ex->status = status;
        ex->bytes = evbuffer_get_length(reply);
    } else if (how == END_ABANDON || how == END_CLOSED) {
        ex->status = status != 0 ? status : 499;
    }

    record(p, creq, evreq_method_name(ex->method), ex->route->id, ex->client,
           ex->status, ex->bytes, ex->wall, ex->t0, ex->up_ms, ex->decision,
           ex->tier, ex->user, ex->tls);
    if (p->metrics != NULL) {
        metrics_add(p->metrics, M_IN_FLIGHT, NULL, -1);
    }
    pool_give(&p->fwd_spare, &ex->fwd);
    pool_give(&p->rl_spare, &ex->rl_headers);
    if (ex->body_copy != NULL) {
        evbuffer_free(ex->body_copy);
    }
    if (ex->target != ex->target_buf) {
        free(ex->target);
    }
    free(ex->user);
    free(ex->client_host);
    free(ex->client_path);
    config_unref(ex->cfg);
    if (ex->prev != NULL) {
        ex->prev->next = ex->next;
    } else {
        p->live = ex->next;
    }
    if (ex->next != NULL) {
        ex->next->prev = ex->prev;
    }
    p->in_flight--;
    /* Kept for a next exchange: one allocation fewer per request. */
    if (XMALLOC_REUSE && p->nspare_ex < SPARE_EXCHANGES) {
        ex->next = p->spare_ex;
        p->spare_ex = ex;
        p->nspare_ex++;
    } else {
        free(ex);
    }

    /* Nothing of 'ex' past this point; nothing of 'creq' after the call. */
    switch (how) {
    case END_REPLY:
        evreq_send_reply(creq, status, refusal, reply,
                         tls_cc != NULL ? NULL : &p->head_text, p->head_spare);
        evbuffer_free(reply);
        break;
    case END_COMPLETE:
        if (held) {
            /* Head and body in one write (a chunked body's last chunk
             * too); the rest, if the socket would not take it all, waits
             * for the client (on_upstream_head()). */
            if (last_chunk) {
                evbuffer_add(p->head_spare, EVREQ_LAST_CHUNK,
                             sizeof(EVREQ_LAST_CHUNK) - 1);
            }
            if (!evreq_write_out(creq, p->head_spare, on_client_drained,
                                 plain_cc)) {
                clientconn_stream_timeouts(plain_cc);
            }
            evhttp_send_reply_end(creq);
            break;
        }
        /*
         * The last chunk of a chunked body: the gateway's own, or over TLS
         * evhttp's, which goes out now, before the drain wait, not from
         * evhttp_send_reply_end(): a short body whose end came with its
         * head was left waiting for the client's next request.
         */
        if (last_chunk || (tls_cc != NULL && creq->chunked)) {
            struct bufferevent *bev = evhttp_connection_get_bufferevent(cconn);

            evbuffer_add(bufferevent_get_output(bev), EVREQ_LAST_CHUNK,
                         sizeof(EVREQ_LAST_CHUNK) - 1);
            creq->chunked = 0;
        }
        if (tls_cc != NULL) {
            evreq_coalesce(cconn);
            clientconn_end_reply(tls_cc, creq);
            break;
        }
        if (flush) {
            evreq_flush(cconn);
        }
        if (plain_cc != NULL &&
            evbuffer_get_length(bufferevent_get_output(
                evhttp_connection_get_bufferevent(cconn))) > 0) {
            /* The rest waits for the client (on_upstream_head()). */
            clientconn_stream_timeouts(plain_cc);
        }
        evhttp_send_reply_end(creq);
        break;
    case END_CUT:
        if (tls_cc != NULL) {
            clientconn_cut(tls_cc);
        }
        if (close_delimited) {
            /*
             * The close would say "complete" to a body that ends with it;
             * a reset says "cut". evhttp_connection_free() shuts the
             * socket for writing (a FIN) before it is closed, so a reset
             * at the close would come too late: connect() to AF_UNSPEC
             * dissolves the connection now, which for an established TCP
             * one sends the reset, and leaves the descriptor to its owner.
             */
            struct sockaddr unspec = {.sa_family = AF_UNSPEC};
            evutil_socket_t fd =
                bufferevent_getfd(evhttp_connection_get_bufferevent(cconn));

            if (fd >= 0) {
                (void)connect(fd, &unspec, sizeof(unspec));
            }
        }
        evhttp_connection_free(cconn);
        break;
    case END_ABANDON:
        evhttp_connection_free(cconn);
        break;
    case END_CLOSED:
        /*
         * A request whose response had begun is detached from the closing
         * connection, not freed; ending it frees it. One still waiting is
         * freed by evhttp with the connection.
         */
        if (evhttp_request_get_connection(creq) == NULL) {
            evhttp_send_reply_end(creq);
        }
        break;
    }
}

/* Answers a problem before any response byte was sent, and ends. */
static void
fail_exchange(struct exchange *ex, int status, const char *detail)
{
    log_warn("proxy: route %s: %s %s: %d: %s", ex->route->id,
             evreq_method_name(ex->method), evhttp_request_get_uri(ex->creq),
             status, detail);
    exchange_end(ex, END_REPLY, status,
                 evreq_problem_body(ex->creq, status, detail));
}

void
proxy_abort_all(struct proxy *p)
{
    /* The gateway closes them: an unanswered one is nginx's 444, not the
     * client's 499; a response on its way keeps its status, cut. */
    while (p->live != NULL) {
        exchange_end(p->live,
                     p->live->state == EX_STREAMING ? END_CUT : END_ABANDON,
                     444, NULL);
    }
}

/* ---- the client side while waiting ---- */

/* The client closed its connection before any response byte. */
static void
on_client_gone(struct clientconn *cc, void *arg)
{
    struct exchange *ex = arg;

    (void)cc;
    log_debug("proxy: route %s: client left before the response",
              ex->route->id);
    exchange_end(ex, END_ABANDON, 0, NULL);
}

/*
 * evhttp is closing the client connection: the client left mid-response,
 * timed out, or the gateway is stopping.
 */
static void
on_conn_close(struct clientconn *cc, void *arg)
{
    struct exchange *ex = arg;

    (void)cc;
    ex->cc = NULL; /* the record goes with the connection */
    log_debug("proxy: route %s: client connection closed during the "
              "exchange",
              ex->route->id);
    exchange_end(ex, END_CLOSED, 0, NULL);
}

/* ---- the upstream exchange ---- */

static void start_upstream(struct exchange *ex);

/* Delay mode's hold is over, or a retry's backoff. */
static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct exchange *ex = arg;

    (void)fd;
    (void)what;
    if (ex->state == EX_DELAYED) {
        hold(ex->proxy, -1);
    } else if (ex->state != EX_BACKOFF) {
        return;
    }
    start_upstream(ex);
}

/*
 * ---- Retry (filter.h) ----
 * An attempt that ended with 'status' (0: failed with 'failure', 0 to 3
 * as filter_retry_next() counts them) is tried again when the route's
 * Retry allows it: the method is listed, the body was kept (or there is
 * none), attempts and total time are within bounds. Only before the
 * response began, so never after a byte went to the client. The next
 * attempt always starts from the timer, outside the upstream's callback.
 * Returns true when a retry is on its way.
 */
static bool
retried(struct exchange *ex, int status, int failure)
{
    struct proxy *p = ex->proxy;
    const char *method = evreq_method_name(ex->method);
    uint64_t elapsed = (uint64_t)(clock_mono_ms() - ex->first_t0);
    uint64_t bits;
    double unit;
    struct timeval tv;

    if (ex->retry == NULL ||
        (ex->retry->methods & filter_method_bit(method)) == 0 ||
        (ex->has_body && ex->body_copy == NULL)) {
        return false;
    }
    p->draws += 0x9e3779b97f4a7c15ULL;
    bits = p->draws * 0xbf58476d1ce4e5b9ULL;
    unit = (double)(bits >> 11) * 0x1.0p-53;
    if (filter_retry_next(ex->retry, ex->attempt, status, failure, elapsed,
                          ex->backoff_ms, unit, &ex->backoff_ms) != 0) {
        return false;
    }
    if (ex->ureq != NULL) {
        /* Its connection goes: the rest of that response is unwanted. */
        upstream_cancel(ex->ureq);
        ex->ureq = NULL;
    }
    log_debug("proxy: route %s: attempt %u got %d; retrying in %llu ms",
              ex->route->id, ex->attempt, status,
              (unsigned long long)ex->backoff_ms);
    ex->state = EX_BACKOFF;
    if (ex->timer == NULL) {
        ex->timer = evtimer_new(p->base, on_timer, ex);
    }
    tv = clock_tv(ex->backoff_ms);
    evtimer_add(ex->timer, &tv);
    return true;
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

/* True when a filter of 'r' rewrites the path with a regexp. */
static bool
route_rewrites_path(const struct route *r)
{
    for (size_t i = 0; i < r->nfilters; i++) {
        if (r->filters[i].kind == FILTER_REWRITE_PATH) {
            return true;
        }
    }
    return false;
}

/*
 * Where the fields of a response head go: the gateway's own text, or
 * evhttp's list for the head evhttp writes itself: for a HEAD request
 * (evreq_own_head()), and over TLS, where OpenSSL's bufferevent defers
 * its write callbacks and only evhttp's own reply path was proven.
 */
struct head_out {
    struct strbuf *text;      /* the gateway's head, or NULL */
    struct evkeyvalq *fields; /* evhttp's list, when 'text' is NULL */
    bool has_date;            /* a Date field is in */
};

static void
head_field(struct head_out *o, const char *name, const char *value)
{
    if (!o->has_date && (name[0] | 0x20) == 'd' &&
        evutil_ascii_strcasecmp(name, "Date") == 0) {
        o->has_date = true;
    }
    if (o->text != NULL) {
        evreq_head_field(o->text, name, value);
    } else {
        evhttp_add_header(o->fields, name, value);
    }
}

/*
 * Chooses how the response body is framed for this client, adds the field
 * that says so, and returns true when the gateway chunks it. A body of
 * known length keeps its Content-Length. Otherwise an HTTP/1.1 client
 * gets chunks; an HTTP/1.0 client can only be told where the body ends
 * by closing the connection. 'status' is the one the client gets: a
 * body-less 204 or 304 that SetStatus turned into another status must
 * say that it has no body.
 */
static bool
frame_for_client(struct exchange *ex, const struct resparse_head *head,
                 int status, struct head_out *o)
{
    if (head->framing == RESPARSE_LENGTH ||
        (head->framing == RESPARSE_NO_BODY && ex->method == EVHTTP_REQ_HEAD)) {
        const char *cl = headers_get(head->headers, "Content-Length");

        /* The length of what a GET would get; a 204 has none to tell
         * (RFC 9110 8.6). */
        if (cl != NULL && (head->framing == RESPARSE_LENGTH || status != 204)) {
            head_field(o, "Content-Length", cl);
        }
        return false;
    }
    if (head->framing == RESPARSE_NO_BODY) {
        if (status >= 200 && status != 204 && status != 304) {
            head_field(o, "Content-Length", "0");
        }
        return false;
    }
    if (o->text == NULL) {
        /* evhttp chunks for an HTTP/1.1 client by itself; to an HTTP/1.0
         * one it would send "Content-Length: 0" before the body, unless
         * it forgets that the client asked for keep-alive and closes:
         * then the body ends with the connection, as below. */
        if (ex->http10) {
            struct evkeyvalq *in = evhttp_request_get_input_headers(ex->creq);

            /* Every field: evhttp would find a second "keep-alive". */
            while (evhttp_remove_header(in, "Connection") == 0) {
            }
            ex->close_delimited = true;
        }
        return false;
    }
    if (!ex->http10) {
        head_field(o, "Transfer-Encoding", "chunked");
        return true;
    }
    evreq_close_after_reply(ex->creq);
    ex->close_delimited = true;
    return false;
}

static void
on_upstream_head(void *arg, const struct resparse_head *head)
{
    struct exchange *ex = arg;
    struct proxy *p = ex->proxy;
    const struct route *r = ex->route;
    const struct headers *uh = head->headers;
    struct head_out o = {NULL, NULL, false};
    char *connection;
    struct headers resp;
    struct response_edit edit = {head->status, head->reason, &resp, NULL, NULL};
    bool filtered = route_filters_response(r);
    int64_t up_us;

    if (ex->state != EX_UPSTREAM || retried(ex, head->status, 0)) {
        return;
    }
    /* Mostly "keep-alive" alone: nothing to join, nothing to obey. */
    connection =
        forward_connection_nominates(uh) ? forward_connection_list(uh) : NULL;
    if (filtered) {
        /* ---- response filters (filter.h), before the status line:
         * SetStatus changes it ---- */
        headers_init(&resp);
        for (size_t i = 0; i < uh->n; i++) {
            if (forward_response_field(uh->v[i].name, connection)) {
                headers_add(&resp, uh->v[i].name, uh->v[i].value);
            }
        }
        edit.client_host = ex->client_host;
        edit.client_path = ex->client_path;
        for (size_t i = 0; i < r->nfilters; i++) {
            filter_apply_response(&r->filters[i], &edit);
        }
    }
    if (!ex->tls && evreq_own_head(ex->creq)) {
        o.text = &p->head_text;
        evreq_head_begin(o.text, ex->creq, edit.status, edit.reason);
    } else {
        o.fields = evhttp_request_get_output_headers(ex->creq);
    }
    if (!filtered) {
        /* The common case: straight across, no copy in between. */
        for (size_t i = 0; i < uh->n; i++) {
            if (forward_response_field(uh->v[i].name, connection)) {
                head_field(&o, uh->v[i].name, uh->v[i].value);
            }
        }
    } else {
        for (size_t i = 0; i < resp.n; i++) {
            head_field(&o, resp.v[i].name, resp.v[i].value);
        }
        headers_deinit(&resp);
    }
    for (size_t i = 0; i < ex->rl_headers.n; i++) {
        head_field(&o, ex->rl_headers.v[i].name, ex->rl_headers.v[i].value);
    }
    free(connection);
    ex->chunked = frame_for_client(ex, head, edit.status, &o);

    ex->state = EX_STREAMING;
    ex->status = edit.status;
    up_us = clock_mono_us() - ex->up_t0_us;
    ex->up_ms = up_us / 1000;
    if (p->metrics != NULL) {
        const char *labels[1] = {r->id};

        /* In us: from two ms readings, a 300 us answer would be 0 or 1 ms,
         * and the sub-millisecond buckets would mean nothing. */
        metrics_observe(p->metrics, M_UPSTREAM_SECONDS, labels,
                        (double)up_us / 1e6);
    }
    /*
     * Set first: reading and writing are both off here, so nothing is
     * re-added now, and the reply's start enables both with these. A
     * body that came whole with the head is written out within this call
     * and needs none, unless its bytes have to wait in the client's
     * output (exchange_end() sees to that); over TLS they always wait.
     */
    if (ex->tls || !head->body_in_hand) {
        clientconn_stream_timeouts(ex->cc);
    }
    if (o.text == NULL) {
        evreq_add_date(ex->creq);
        evhttp_send_reply_start(ex->creq, edit.status, edit.reason);
        /* evhttp reads again: from here the connection's close callback
         * tells of a leave. */
        clientconn_watch_leave(ex->cc, NULL, NULL);
        return;
    }
    if (!o.has_date) {
        head_field(&o, "Date", evreq_date_now());
    }
    /* What evhttp will do once the reply has gone, said in the head. */
    if (evreq_closes_after(ex->creq)) {
        head_field(&o, "Connection", "close");
    } else if (ex->http10) {
        head_field(&o, "Connection", "keep-alive");
    }
    /*
     * The head waits until the bytes read with it have parsed: a body that
     * came whole goes out with it in one write when the response is
     * complete (exchange_end()), and evhttp's write path never runs for
     * them; one that goes on goes out at the end of the read
     * (on_upstream_read_end()). Until then nothing has reached the
     * client, and a malformed rest of the read is still a 502.
     */
    evreq_head_finish(o.text, p->head_spare);
    ex->held = true;
    clientconn_watch_leave(ex->cc, NULL, NULL); /* as above */
}

/* Backpressure: the client is behind; its drain resumes the upstream. */
static void
pause_if_behind(struct exchange *ex)
{
    struct bufferevent *cbev = evhttp_connection_get_bufferevent(ex->cconn);

    if (!ex->paused &&
        evbuffer_get_length(bufferevent_get_output(cbev)) > CLIENT_HIGH_WATER) {
        ex->paused = true;
        upstream_pause(ex->ureq);
    }
}

/* The read that brought the head parsed well, and the body goes on: the
 * held head, and the body that came with it, go out. */
static void
on_upstream_read_end(void *arg)
{
    struct exchange *ex = arg;

    if (ex->state != EX_STREAMING || !ex->held) {
        return;
    }
    ex->held = false;
    evreq_send_held(ex->creq, ex->proxy->head_spare, on_client_drained, ex->cc);
    pause_if_behind(ex);
}

static void
on_client_drained(struct evhttp_connection *cconn, void *arg)
{
    struct exchange *ex =
        arg != NULL ? clientconn_watch_arg(arg, on_conn_close) : NULL;

    (void)cconn;
    if (ex != NULL && ex->paused && ex->ureq != NULL) {
        ex->paused = false;
        upstream_resume(ex->ureq);
    }
}

static void
on_upstream_body(void *arg, struct evbuffer *buf)
{
    struct exchange *ex = arg;

    if (ex->state != EX_STREAMING) {
        return;
    }
    ex->bytes += evbuffer_get_length(buf);
    if (ex->chunked && evbuffer_get_length(buf) > 0) {
        evreq_chunk_wrap(buf);
    }
    if (ex->held) {
        evbuffer_add_buffer(ex->proxy->head_spare, buf);
        return;
    }
    /* Its argument is the connection's record, not 'ex': over TLS the
     * callback may come after the exchange has ended. */
    evhttp_send_reply_chunk_with_cb(ex->creq, buf, on_client_drained, ex->cc);
    pause_if_behind(ex);
}

static void
on_upstream_done(void *arg)
{
    struct exchange *ex = arg;

    ex->ureq = NULL; /* ended: the upstream module frees it */
    exchange_end(ex, END_COMPLETE, 0, NULL);
}

static void
on_upstream_error(void *arg, enum upstream_error err, const char *detail)
{
    struct exchange *ex = arg;
    const struct route *r = ex->route;
    char msg[512];

    ex->ureq = NULL;
    /* A certificate that does not verify will not verify the next time
     * either: no retry, only the 502 that names why. */
    if (ex->state == EX_UPSTREAM && err != UPSTREAM_TLS_VERIFY &&
        retried(ex, 0,
                err == UPSTREAM_CONNECT           ? 0
                : err == UPSTREAM_CONNECT_TIMEOUT ? 1
                : err == UPSTREAM_TIMEOUT         ? 2
                                                  : 3)) {
        return;
    }
    snprintf(msg, sizeof(msg), "upstream %s:%u: %s", r->uri.host, r->uri.port,
             detail);
    if (ex->state == EX_STREAMING && !ex->held) {
        /*
         * The status line is out: the only honest signal left is to cut
         * the connection, so that the client sees a truncated body rather
         * than a complete-looking one.
         */
        log_warn("proxy: route %s: %s mid-response; cutting the client off",
                 r->id, msg);
        exchange_end(ex, END_CUT, 0, NULL);
        return;
    }
    if (err == UPSTREAM_TLS_VERIFY) {
        /* The upstream client has logged it, once for all requests. */
        log_debug("proxy: route %s: %s", r->id, msg);
        exchange_end(ex, END_REPLY, 502,
                     evreq_problem_body(ex->creq, 502, msg));
        return;
    }
    fail_exchange(
        ex,
        err == UPSTREAM_TIMEOUT || err == UPSTREAM_CONNECT_TIMEOUT ? 504 : 502,
        msg);
}

static const struct upstream_callbacks upstream_callbacks = {
    on_upstream_head, on_upstream_body, on_upstream_done, on_upstream_error,
    on_upstream_read_end};

/* Retry: the route's conf, and the body kept if it is small enough. */
static void
retry_prepare(struct exchange *ex)
{
    const struct route *r = ex->route;
    struct evbuffer *in = evhttp_request_get_input_buffer(ex->creq);
    size_t len = evbuffer_get_length(in);

    ex->first_t0 = ex->up_t0_us / 1000;
    for (size_t i = 0; i < r->nfilters && ex->retry == NULL; i++) {
        ex->retry = r->filters[i].retry;
    }
    if (ex->retry != NULL && ex->has_body && len <= RETRY_BODY_MAX) {
        ex->body_copy = evbuffer_new();
        if (len > 0) {
            evbuffer_add(ex->body_copy, evbuffer_pullup(in, -1), len);
        }
    }
}

static void
start_upstream(struct exchange *ex)
{
    const struct route *r = ex->route;
    struct upstream_request ur;

    ex->state = EX_UPSTREAM;
    ur.host = r->uri.host;
    ur.port = r->uri.port;
    ur.tls = tls_route_client(ex->cfg, (size_t)(r - ex->cfg->routes));
    ur.method = evreq_method_name(ex->method);
    ur.target = ex->target;
    ur.headers = &ex->fwd;
    ur.body = ex->has_body ? evhttp_request_get_input_buffer(ex->creq) : NULL;
    ur.connect_timeout_ms = r->connect_timeout_ms;
    ur.response_timeout_ms = r->response_timeout_ms;
    ur.keepalive = ex->cfg->upstream.keepalive;
    ex->up_t0_us = clock_mono_us();
    if (ex->attempt++ == 0) {
        retry_prepare(ex);
    }
    if (ex->body_copy != NULL) {
        /* upstream_send() drains what it is given: a copy each time. */
        ur.body = evbuffer_new();
        evbuffer_add(ur.body, evbuffer_pullup(ex->body_copy, -1),
                     evbuffer_get_length(ex->body_copy));
    }
    ex->ureq = upstream_send(ex->proxy->up, &ur, &upstream_callbacks, ex);
    if (ex->body_copy != NULL) {
        evbuffer_free(ur.body);
    }
    /* Written out (or copied for the bufferevent): no longer needed,
     * unless a retry sends them again. */
    if (ex->retry == NULL) {
        pool_give(&ex->proxy->fwd_spare, &ex->fwd);
    }
    if (ex->ureq == NULL && !retried(ex, 0, 0)) {
        char detail[160];

        snprintf(detail, sizeof(detail), "upstream %s:%u: cannot connect",
                 r->uri.host, r->uri.port);
        fail_exchange(ex, 502, detail);
    }
}

/* ---- the rate limiter ---- */

/* Answers a refusal of the rate limiter, fields and body included. */
static void
reply_refusal(struct exchange *ex, const struct ratelimit_outcome *o)
{
    struct proxy *p = ex->proxy;
    struct evbuffer *buf = evbuffer_new();
    /* Out of the exchange, which is gone before the reply is written. */
    struct headers fields = ex->rl_headers;

    headers_init(&ex->rl_headers);
    evhttp_add_header(evhttp_request_get_output_headers(ex->creq),
                      "Content-Type", PROBLEM_CONTENT_TYPE);
    evbuffer_add(buf, o->body, strlen(o->body));
    /* Written straight into the head: copying each field into evhttp's
     * list first cost about 600 instructions a field (callgrind). */
    ex->refusal = &fields;
    exchange_end(ex, END_REPLY, o->status, buf);
    pool_give(&p->rl_spare, &fields);
}

static void
on_ratelimit_outcome(struct exchange *ex, struct ratelimit_outcome *o)
{
    struct proxy *p = ex->proxy;
    uint64_t delay = o->delay_ms;
    struct timeval tv = clock_tv(delay);

    ex->check = NULL;
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
        reply_refusal(ex, o);
        ratelimit_outcome_deinit(o);
        return;
    }
    /* The fields (in ex->rl_headers) go on the response once it starts. */
    ratelimit_outcome_deinit(o);
    if (delay == 0) {
        start_upstream(ex);
        return;
    }
    /* Decided while the worker held fewer than server.max_held, it may
     * pass the bound by the decisions in flight, each one request. */
    hold(p, 1);
    ex->state = EX_DELAYED;
    /*
     * libevent counts a timer from the loop's cached time, taken when this
     * turn began. A local decision read the clock later than that, so the
     * hold would end early by as long as this turn has run so far.
     */
    event_base_update_cache_time(p->base);
    /* Made here: most requests are never held. */
    ex->timer = evtimer_new(p->base, on_timer, ex);
    evtimer_add(ex->timer, &tv);
}

static void
on_ratelimit_done(struct ratelimit_outcome *o, void *arg)
{
    on_ratelimit_outcome(arg, o);
}

static char *
build_target(struct exchange *ex, const struct route *r, const char *path,
             const char *query)
{
    size_t nb = strlen(r->uri.base_path), np = strlen(path);
    size_t nq = query != NULL ? strlen(query) + 1 : 0;
    size_t size = nb + np + nq + 1;
    char *t = size <= sizeof(ex->target_buf) ? ex->target_buf : xmalloc(size);

    memcpy(t, r->uri.base_path, nb);
    memcpy(t + nb, path, np);
    if (query != NULL) {
        t[nb + np] = '?';
        memcpy(t + nb + np + 1, query, nq - 1);
    }
    t[nb + np + nq] = '\0';
    return t;
}

/* ---- accepting a request ---- */

/* A new exchange for 'creq', linked into the proxy, watching the client. */
static struct exchange *
exchange_new(struct proxy *p, struct config *cfg, const struct route *route,
             struct evhttp_request *creq, struct clientconn *cc,
             const char *client, int64_t t0, int64_t wall)
{
    struct exchange *ex = p->spare_ex;
    struct evhttp_connection *cconn = evhttp_request_get_connection(creq);
    size_t len;

    if (ex != NULL) {
        p->spare_ex = ex->next;
        p->nspare_ex--;
        /* 'target_buf' is written before it is read. */
        memset(ex, 0, offsetof(struct exchange, target_buf));
    } else {
        ex = xcalloc(1, sizeof(*ex));
    }
    ex->state = EX_LIMITING;
    ex->proxy = p;
    ex->cfg = config_ref(cfg);
    ex->route = route;
    ex->creq = creq;
    ex->cconn = cconn;
    ex->method = evhttp_request_get_command(creq);
    ex->http10 = creq->major == 1 && creq->minor == 0;
    ex->tls = p->handling_tls;
    ex->cc = cc;
    clientconn_watch(cc, on_conn_close, ex);
    ex->t0 = t0;
    ex->wall = wall;
    ex->up_ms = -1;
    len = strlen(client);
    len = len < sizeof(ex->client) ? len : sizeof(ex->client) - 1;
    memcpy(ex->client, client, len);
    ex->client[len] = '\0';
    pool_take(&p->fwd_spare, &ex->fwd);
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
    /*
     * evhttp stops reading while a request is answered, so it would not
     * notice the client leaving: watched until the response begins
     * (TRAPS 2).
     */
    clientconn_watch_leave(cc, on_client_gone, ex);
    return ex;
}

/*
 * Answers before any route or exchange exists. Recorded first: evhttp may
 * free the request inside evreq_send_reply().
 */
static void
early_reply(struct proxy *p, struct evhttp_request *creq, int status,
            const char *detail, const char *client, int64_t t0, int64_t wall)
{
    const char *method = evreq_method_name(evhttp_request_get_command(creq));
    struct evbuffer *body = evreq_problem_body(creq, status, detail);

    evreq_reply_prepare(creq, body);
    record(p, creq, method, NULL, client, status, evbuffer_get_length(body),
           wall, t0, -1, NULL, NULL, NULL, p->handling_tls);
    evreq_send_reply(creq, status, NULL, body,
                     p->handling_tls ? NULL : &p->head_text, p->head_spare);
    evbuffer_free(body);
}

/*
 * Refuses 'creq' when its framing or syntax is ambiguous, before anything
 * of it goes further; the connection is closed after the answer, so that
 * whatever else the client sent on it is never read as a request.
 * Returns true when it has answered; otherwise '*target' holds the
 * request target, split (reqcheck.h).
 */
static bool
refused_or_reply(struct proxy *p, struct evhttp_request *creq,
                 struct clientconn *cc, const struct headers *in,
                 const char *client, int64_t t0, int64_t wall,
                 struct reqcheck_target *target)
{
    struct reqcheck_request rc;
    enum reqcheck_verdict v;
    enum evhttp_cmd_type method = evhttp_request_get_command(creq);
    const char *why = NULL;

    rc.method = evreq_method_name(method);
    rc.target = evhttp_request_get_uri(creq);
    rc.http_major = (unsigned)creq->major;
    rc.http_minor = (unsigned)creq->minor;
    rc.headers = in;
    /* What evhttp 2.1 reads a body for (http.c, method_may_have_body). */
    rc.body_read = method != EVHTTP_REQ_HEAD && method != EVHTTP_REQ_TRACE;
    rc.split = target;
    v = reqcheck_request(&rc, &why);
    if (v == REQCHECK_OK && clientconn_head_has_nul(cc)) {
        v = REQCHECK_BAD_REQUEST;
        why = "NUL byte in the request head";
    }
    if (v == REQCHECK_OK) {
        return false;
    }
    log_debug("proxy: refused %s from %s: %s", rc.method, client, why);
    evreq_close_after_reply(creq);
    clientconn_linger(cc);
    early_reply(p, creq, reqcheck_status(v), why, client, t0, wall);
    return true;
}

/*
 * Decides who the caller is, once: the limiter keys on '*who' and the
 * upstream is told it (forward_request_headers()), so that the two always
 * agree. Today a trusted proxy's assertion in the identity.* fields, and
 * none from any other peer. Refuses, with the connection closed after
 * the answer, a trusted peer's repeated field: which value is meant is
 * ambiguous. Returns true when it has answered.
 */
static bool
identity_or_reply(struct proxy *p, const struct config *cfg,
                  struct evhttp_request *creq, const struct headers *in,
                  bool trusted, const char *client, int64_t t0, int64_t wall,
                  struct forwarded_identity *who)
{
    const struct identity_conf *ic = &cfg->identity;
    char why[160];

    if (forwarded_identity(in, trusted, ic->user_header, ic->role_header,
                           who) == FORWARDED_IDENTITY_OK) {
        return false;
    }
    snprintf(why, sizeof(why), "%s or %s sent more than once",
             ic->user_header != NULL ? ic->user_header : "-",
             ic->role_header != NULL ? ic->role_header : "-");
    log_debug("proxy: refused a request from %s: %s", client, why);
    evreq_close_after_reply(creq);
    early_reply(p, creq, 400, why, client, t0, wall);
    return true;
}

/*
 * identity.jwt: '*claims' is a reference to the claims of the request's
 * token when it is valid, else NULL. A token field (or cookie) repeated
 * or empty is ambiguous: answered 400, the connection closed. Without a
 * valid token and with required: true, answers 401 with a Bearer
 * challenge (RFC 6750); with required: false, a token field that did not
 * verify is removed from 'in', so that the upstream is not handed a
 * credential the caller was not taken for. Returns true when it has
 * answered.
 */
static bool
same_to_cgi(const char *name, const void *want)
{
    return forward_same_to_cgi(name, want);
}

/* Fields of 'in' a CGI upstream reads as 'name' (forward.h). */
static size_t
same_to_cgi_count(const struct headers *in, const char *name)
{
    size_t n = 0;

    for (size_t i = 0; i < in->n; i++) {
        n += forward_same_to_cgi(in->v[i].name, name);
    }
    return n;
}

static bool
jwt_or_reply(struct proxy *p, const struct config *cfg,
             struct evhttp_request *creq, struct headers *in,
             const char *client, int64_t t0, int64_t wall,
             struct claims **claims)
{
    const struct jwtcheck_conf *jc = cfg->identity.jwt;
    enum jwtcheck_found found;
    const char *token = NULL;
    const char *why = NULL;
    size_t len = 0;
    bool hit = false;
    char detail[96];
    char challenge[128];

    *claims = NULL;
    found = jwtcheck_find_token(jc, in, &token, &len);
    /* X_Access_Token beside X-Access-Token (server.underscores_in_headers)
     * is one field twice to a CGI upstream. Without that setting no '_'
     * spelling is left, and jwtcheck_find_token() counted the rest. */
    if (cfg->server.underscores && jc->header != NULL &&
        found == JWTCHECK_TOKEN && same_to_cgi_count(in, jc->header) > 1) {
        found = JWTCHECK_BAD_TOKEN;
    }
    switch (found) {
    case JWTCHECK_NO_TOKEN:
        break;
    case JWTCHECK_BAD_TOKEN:
        /* Which of two tokens is meant? Parsers differ (the first, the
         * last, both): the upstream could take the caller for someone
         * the limiter did not. */
        why = "token field repeated or empty";
        if (p->metrics != NULL) {
            const char *result[1] = {"invalid"};

            metrics_add(p->metrics, M_JWT_TOKENS, result, 1);
        }
        log_debug("proxy: refused a request from %s: %s", client, why);
        evreq_close_after_reply(creq);
        early_reply(p, creq, 400, why, client, t0, wall);
        return true;
    case JWTCHECK_TOKEN:
        if (!jc->cache) {
            int64_t until;

            *claims =
                jwtcheck_verify(jc->verifier, token, len, wall, &until, &why);
            break;
        }
        *claims = jwtcache_verify(p->tokens, jc->verifier, token, len, wall,
                                  &hit, &why);
        if (hit && p->metrics != NULL) {
            metrics_add(p->metrics, M_JWT_CACHE_HITS, NULL, 1);
        }
        break;
    }
    if (p->metrics != NULL) {
        const char *result[1] = {*claims != NULL ? "valid"
                                 : why != NULL   ? "invalid"
                                                 : "missing"};

        metrics_add(p->metrics, M_JWT_TOKENS, result, 1);
    }
    if (*claims != NULL) {
        return false;
    }
    if (why != NULL) {
        log_debug("proxy: invalid token from %s: %s", client, why);
    }
    if (!jc->required) {
        if (why != NULL && jc->header != NULL) {
            headers_remove_if(in, same_to_cgi, jc->header);
        } else if (why != NULL && jc->cookie != NULL) {
            cookie_remove(in, jc->cookie);
        }
        return false;
    }
    snprintf(detail, sizeof(detail), "%s%s",
             why != NULL ? "invalid token: " : "a bearer token is required",
             why != NULL ? why : "");
    if (why != NULL) {
        snprintf(challenge, sizeof(challenge),
                 "Bearer error=\"invalid_token\", error_description=\"%s\"",
                 why);
    } else {
        snprintf(challenge, sizeof(challenge), "Bearer");
    }
    evhttp_add_header(evhttp_request_get_output_headers(creq),
                      "WWW-Authenticate", challenge);
    early_reply(p, creq, 401, detail, client, t0, wall);
    return true;
}

/* A field that names the caller: identity.user_header or role_header,
 * in any spelling a CGI upstream reads as the same (forward.h). */
static bool
is_identity_field(const char *name, const void *arg)
{
    const struct identity_conf *ic = arg;

    return forward_same_to_cgi(name, ic->user_header) ||
           forward_same_to_cgi(name, ic->role_header);
}

/*
 * Makes the identity fields of 'in' say what was decided ('who'): every
 * identity field removed, by the rule forward_request_headers() applies
 * for the upstream, and the decided values added. 'who' may borrow from
 * 'in': the values stay in its blocks until the list is cleared.
 */
static void
decided_fields(struct headers *in, const struct identity_conf *ic,
               const struct forwarded_identity *who)
{
    headers_remove_if(in, is_identity_field, ic);
    if (ic->user_header != NULL && who->user != NULL) {
        headers_add(in, ic->user_header, who->user);
    }
    if (ic->role_header != NULL && who->role != NULL) {
        headers_add(in, ic->role_header, who->role);
    }
}

/*
 * ---- filters that answer (filter.h): RedirectTo, RequestSize,
 * RequestHeaderSize ----
 * Asked in filter order, before the rate limiter: a request the route
 * refuses or redirects costs no tokens. evhttp has read the body by now
 * (server.max_body_bytes bounds it), so RequestSize sees both its
 * Content-Length and what arrived. Returns true when 'ex' has answered.
 */
static bool
route_answered(struct exchange *ex, const struct headers *in, const char *query)
{
    const struct route *r = ex->route;
    struct request_facts rq;
    struct filter_answer a;
    struct evkeyvalq *oh;
    struct evbuffer *body;

    rq.query = query;
    rq.headers = in;
    rq.body_bytes =
        evbuffer_get_length(evhttp_request_get_input_buffer(ex->creq));
    rq.content_length = headers_get(in, "Content-Length");
    for (size_t i = 0; i < r->nfilters; i++) {
        if (!filter_answers(&r->filters[i], &rq, &a)) {
            continue;
        }
        oh = evhttp_request_get_output_headers(ex->creq);
        if (a.location != NULL) {
            evhttp_add_header(oh, "Location", a.location);
        }
        if (a.field != NULL) {
            evhttp_add_header(oh, a.field, a.field_value);
        }
        if (a.detail[0] != '\0') {
            log_debug("proxy: route %s: %d: %s", r->id, a.status, a.detail);
            body = evreq_problem_body(ex->creq, a.status, a.detail);
        } else {
            body = evbuffer_new();
        }
        exchange_end(ex, END_REPLY, a.status, body);
        filter_answer_deinit(&a);
        return true;
    }
    return false;
}

void
proxy_handle(struct proxy *p, struct config *cfg, struct evhttp_request *creq,
             struct clientconn *cc)
{
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(creq);
    const char *query = uri != NULL ? evhttp_uri_get_query(uri) : NULL;
    struct reqcheck_target target;
    struct evhttp_connection *cconn = evhttp_request_get_connection(creq);
    enum evhttp_cmd_type method = evhttp_request_get_command(creq);
    const struct server_conf *sc = &cfg->server;
    struct netaddr peer, client;
    struct headers in;
    struct outgoing out;
    struct forward_request fr;
    struct glob_vars vars;
    struct request_view view;
    const struct route *route;
    struct exchange *ex;
    struct ratelimit_outcome outcome;
    struct forwarded_identity id = {NULL, NULL};
    struct claims *claims = NULL; /* identity.jwt: the token's */
    char *path = NULL;
    char *match = NULL; /* 'path' without ;parameters, or NULL */
    enum path_status st;
    bool trusted, limited;
    char *xff;
    int64_t t0 = clock_mono_ms(), wall = clock_wall_ms();
    char addr[64];

    p->handling_tls = clientconn_tls(cc);
    if (p->draining) {
        evreq_close_after_reply(creq);
    }
    if (!evreq_peer(cconn, &peer)) {
        memset(&peer, 0, sizeof(peer));
        peer.family = AF_INET;
    }
    netaddr_format(&peer, addr, sizeof(addr));
    pool_take(&p->in_spare, &in);
    evreq_headers(&in, creq);
    if (refused_or_reply(p, creq, cc, &in, addr, t0, wall, &target)) {
        pool_give(&p->in_spare, &in);
        return;
    }
    /* The framing was judged on the values as evhttp read them ("\tchunked"
     * is no coding to it); the router, the keys and the upstream read
     * them as any recipient does: evhttp strips the spaces before a
     * value, not its tabs, nor what an obs-fold leaves after it. */
    headers_trim_values(&in);
    if (clientconn_head_bytes(cc) > sc->max_header_bytes) {
        pool_give(&p->in_spare, &in);
        early_reply(p, creq, 431,
                    "request header fields exceed server.max_header_bytes",
                    addr, t0, wall);
        return;
    }
    /* The path from the target as sent (reqcheck split it): evhttp's URI
     * parser reads the "//admin" of "//admin/x" as an authority, and its
     * path as "/x". None for asterisk-form. */
    if (uri == NULL || target.path == NULL) {
        pool_give(&p->in_spare, &in);
        early_reply(p, creq, 400, "request target has no path", addr, t0, wall);
        return;
    }
    if (target.authority != NULL) {
        /* RFC 9112 3.2.2: absolute-form names the host; Host is ignored. */
        headers_remove(&in, "Host");
        headers_add_n(&in, "Host", 4, target.authority, target.authority_len);
    }
    st = path_normalize(target.path, target.path_len, &path);
    if (st != PATH_OK) {
        pool_give(&p->in_spare, &in);
        early_reply(p, creq, 400, path_status_str(st), addr, t0, wall);
        return;
    }
    /* As if never sent: for the router, the limiter and the upstream. */
    forward_drop_underscored(&in, sc->underscores);
    forward_drop_nominated(&in);
    trusted =
        forwarded_is_trusted(&peer, sc->trusted_proxies, sc->ntrusted_proxies);
    /* Nor what only a trusted proxy may relay of the client. */
    forward_drop_relayed(&in, trusted);
    /* Every line of it, read only from a trusted proxy; the upstream is
     * sent the same list (forward_request_headers()). */
    xff = trusted ? headers_join(&in, "X-Forwarded-For") : NULL;
    forwarded_client(&peer, xff, sc->trusted_proxies, sc->ntrusted_proxies,
                     &client);
    /* Most often the peer itself: 'addr' says it already. */
    if (client.family != peer.family ||
        memcmp(client.bytes, peer.bytes, sizeof(peer.bytes)) != 0) {
        netaddr_format(&client, addr, sizeof(addr));
    }
    /* With identity.jwt the token is the source: no field is believed. */
    if (cfg->identity.jwt != NULL
            ? jwt_or_reply(p, cfg, creq, &in, addr, t0, wall, &claims)
            : identity_or_reply(p, cfg, creq, &in, trusted, addr, t0, wall,
                                &id)) {
        pool_give(&p->in_spare, &in);
        free(xff);
        free(path);
        return;
    }
    if (cfg->identity.jwt != NULL) {
        jwtcheck_identity(cfg->identity.jwt, claims, &id.user, &id.role);
    }
    /* The router and the keys read the identity fields as the upstream
     * will get them: the decided identity, or none. */
    decided_fields(&in, &cfg->identity, &id);

    view.method = evreq_method_name(method);
    /* Routes match the path as Spring and servlet containers read it,
     * without the ;parameters of its segments: to a backend, "/admin;x/a"
     * is "/admin/a". The upstream gets them as sent. */
    if (strchr(path, ';') != NULL) {
        match = path_without_params(path);
    }
    view.path = match != NULL ? match : path;
    view.query = query;
    view.host = headers_get(&in, "Host");
    view.headers = &in;
    view.client = &client;
    view.now_ms = wall;
    /* Weyl sequence; predicate.c mixes it per Weight group. */
    view.draw = p->draws += 0x9e3779b97f4a7c15ULL;
    route = router_match(cfg->routes, cfg->nroutes, &view, &vars);
    if (route == NULL) {
        pool_give(&p->in_spare, &in);
        claims_unref(claims);
        free(xff);
        free(path);
        free(match);
        early_reply(p, creq, 404, "no route matches this request", addr, t0,
                    wall);
        return;
    }
    limited = p->rl != NULL && ratelimit_route_limited(route);

    ex = exchange_new(p, cfg, route, creq, cc, addr, t0, wall);
    if (id.user != NULL && p->log != NULL) {
        ex->user = xstrdup(id.user);
    }
    if (route_filters_response(route)) {
        const char *host = headers_get(&in, "Host");

        ex->client_host = host != NULL ? xstrdup(host) : NULL;
        ex->client_path = xstrndup(target.path, target.path_len);
    }
    if (route_answered(ex, &in, query)) {
        pool_give(&p->in_spare, &in);
        claims_unref(claims);
        free(xff);
        free(path);
        free(match);
        return;
    }
    if (limited) {
        struct caller who;

        who.client = &client;
        who.user = id.user;
        who.role = id.role;
        who.claims = claims;
        who.headers = &in;
        who.query = query;
        who.ipv6_prefix = cfg->identity.ipv6_prefix;
        /* Keys are built now, from the request as the client sent it. */
        pool_take(&p->rl_spare, &ex->rl_headers);
        ex->check = ratelimit_check(
            p->rl, cfg, route, &who, p->held < cfg->server.max_held,
            evhttp_request_get_uri(creq), &ex->rl_headers, on_ratelimit_done,
            ex, &outcome);
    }

    /* Filters may replace the path; without any it is read only. A
     * RewritePath's regexp is written for the path the route matched:
     * run on "/files;x/a" it would miss "/files/" and forward the path
     * unrewritten, out of the prefix it confines the route to. So with
     * one, the path loses its ;parameters. */
    if (match != NULL && route_rewrites_path(route)) {
        out.path = xstrdup(match);
    } else {
        out.path = route->nfilters > 0 ? xstrdup(path) : path;
    }
    out.query = query != NULL ? xstrdup(query) : NULL;
    out.headers = in; /* moved: 'in' is not used again */
    out.preserve_host = false;
    out.vars = &vars;
    for (size_t i = 0; i < route->nfilters; i++) {
        filter_apply_request(&route->filters[i], &out);
    }
    ex->target = build_target(ex, route, out.path, out.query);
    ex->has_body =
        evbuffer_get_length(evhttp_request_get_input_buffer(creq)) > 0 ||
        method == EVHTTP_REQ_POST || method == EVHTTP_REQ_PUT ||
        method == EVHTTP_REQ_PATCH;
    fr.in = &out.headers;
    fr.host = out.preserve_host && headers_get(&out.headers, "Host") != NULL
                  ? headers_get(&out.headers, "Host")
                  : route->uri.authority;
    fr.peer = &peer;
    fr.peer_trusted = trusted;
    fr.tls = p->handling_tls;
    fr.xff = xff;
    /* Written last, over whatever the client or a filter put there. */
    fr.user_header = cfg->identity.user_header;
    fr.role_header = cfg->identity.role_header;
    fr.who = &id;
    forward_request_headers(&ex->fwd, &fr);
    pool_give(&p->in_spare, &out.headers);
    claims_unref(claims); /* 'user' and 'role' are copied by now */
    free(xff);
    if (out.path != path) {
        free(out.path);
    }
    free(out.query);
    free(path);
    free(match);
    if (!limited) {
        start_upstream(ex);
    } else if (ex->check == NULL) {
        on_ratelimit_outcome(ex, &outcome);
    }
}
