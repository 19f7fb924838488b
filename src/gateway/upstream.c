#include "upstream.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/event.h>

#include "clock.h"
#include "xmalloc.h"

/* Response heads, interim responses included, beyond this are a 502. */
#define MAX_HEAD_BYTES (64 * 1024)
/* An idle pooled connection unused this long is closed. */
#define IDLE_TIMEOUT_MS (60 * 1000)

struct pool;

/* One connection to an upstream: in use by 'req', or idle in its pool. */
struct uconn {
    struct bufferevent *bev;  /* owned */
    struct pool *pool;        /* borrowed: where it returns */
    struct upstream_req *req; /* the request on it, or NULL when idle */
    unsigned served;          /* responses completed on it */
    bool connected;           /* the TCP connect has completed */
    /* Kept with the connection, so that a request allocates none of
     * them: */
    struct resparse *parser; /* its responses' parser; owned */
    struct evbuffer *body;   /* parsed body for on_body; owned */
    struct event *timer;     /* connect, then response timeout; owned */
};

/* The idle connections of one worker to one host:port. */
struct pool {
    char *host;          /* owned */
    uint16_t port;       /* upstream port */
    struct uconn **idle; /* LIFO: the warmest is reused first; owned */
    size_t nidle;        /* idle connections */
    size_t cap;          /* slots in 'idle' */
    struct pool *next;   /* next pool of the client */
};

struct upstream_client {
    struct event_base *base; /* borrowed */
    struct evdns_base *dns;  /* borrowed, or NULL */
    struct pool *pools;      /* owned list */
    struct timeval idle_tv;  /* idle timeout of pooled connections */
};

/* Where a request stands; each callback checks it first. */
enum req_state {
    REQ_CONNECTING, /* waiting for the TCP connect */
    REQ_WAITING,    /* request written (or being written), no head yet */
    REQ_BODY,       /* head reported, body flowing */
};

struct upstream_req {
    enum req_state state;
    struct upstream_client *client;      /* borrowed */
    const struct upstream_callbacks *cb; /* borrowed */
    void *arg;                           /* for 'cb'; borrowed */
    struct uconn *conn;                  /* owned while the request runs */
    struct evbuffer *resend;             /* the request once more, for the
                                            one retry; NULL when none */
    struct timeval body_tv;              /* longest pause in the body */
    int64_t t0;                          /* monotonic ms it was sent */
    uint64_t response_timeout_ms;        /* from 'r' */
    uint64_t connect_timeout_ms;         /* from 'r' */
    unsigned keepalive;                  /* from 'r' */
    bool reused;                         /* 'conn' came from the pool */
    bool keep_alive;                     /* the head allows another request
                                            on this connection */
    bool head_request;                   /* HEAD: no body will follow */
    bool paused;                         /* reads held back by the caller */
    bool in_callback;                    /* a caller's callback is running */
    bool write_failed;                   /* the upstream stopped reading our
                                            request; its answer may follow */
    bool cancelled;                      /* upstream_cancel() during one */
};

static void on_conn_read(struct bufferevent *bev, void *arg);
static void on_conn_event(struct bufferevent *bev, short what, void *arg);
static void on_idle_event(struct bufferevent *bev, short what, void *arg);
static void on_idle_read(struct bufferevent *bev, void *arg);
static void on_timer(evutil_socket_t fd, short what, void *arg);
static const struct resparse_callbacks parse_callbacks;

const char *
upstream_error_str(enum upstream_error err)
{
    switch (err) {
    case UPSTREAM_CONNECT:
        return "cannot connect";
    case UPSTREAM_CONNECT_TIMEOUT:
        return "connect timed out";
    case UPSTREAM_TIMEOUT:
        return "timed out";
    case UPSTREAM_CLOSED:
        return "connection closed";
    case UPSTREAM_BAD_RESPONSE:
        return "malformed response";
    }
    return "failed";
}

/* ---- connections and pools ---- */

struct upstream_client *
upstream_client_new(struct event_base *base, struct evdns_base *dns)
{
    struct upstream_client *c = xcalloc(1, sizeof(*c));

    c->base = base;
    c->dns = dns;
    c->idle_tv = clock_tv(IDLE_TIMEOUT_MS);
    return c;
}

static void
conn_free(struct uconn *uc)
{
    /* Safe inside the bufferevent's own callbacks: libevent defers it. */
    bufferevent_free(uc->bev);
    event_free(uc->timer);
    resparse_free(uc->parser);
    evbuffer_free(uc->body);
    free(uc);
}

void
upstream_client_free(struct upstream_client *c)
{
    struct pool *next;

    if (c == NULL) {
        return;
    }
    for (struct pool *pl = c->pools; pl != NULL; pl = next) {
        next = pl->next;
        for (size_t i = 0; i < pl->nidle; i++) {
            conn_free(pl->idle[i]);
        }
        free(pl->idle);
        free(pl->host);
        free(pl);
    }
    free(c);
}

static struct pool *
pool_get(struct upstream_client *c, const char *host, uint16_t port)
{
    struct pool *pl;

    for (pl = c->pools; pl != NULL; pl = pl->next) {
        if (pl->port == port && strcmp(pl->host, host) == 0) {
            return pl;
        }
    }
    pl = xcalloc(1, sizeof(*pl));
    pl->host = xstrdup(host);
    pl->port = port;
    pl->next = c->pools;
    c->pools = pl;
    return pl;
}

static void
pool_remove(struct pool *pl, struct uconn *uc)
{
    for (size_t i = 0; i < pl->nidle; i++) {
        if (pl->idle[i] == uc) {
            memmove(&pl->idle[i], &pl->idle[i + 1],
                    (pl->nidle - i - 1) * sizeof(*pl->idle));
            pl->nidle--;
            return;
        }
    }
}

/*
 * An idle connection that the upstream closes, or sends anything on, or
 * that stays unused past the idle timeout, is dropped: a byte from an
 * upstream that was asked nothing belongs to no request.
 */
static void
on_idle_read(struct bufferevent *bev, void *arg)
{
    struct uconn *uc = arg;

    (void)bev;
    pool_remove(uc->pool, uc);
    conn_free(uc);
}

static void
on_idle_event(struct bufferevent *bev, short what, void *arg)
{
    (void)what;
    on_idle_read(bev, arg);
}

/*
 * True when an idle connection is still fit to carry a request: nothing
 * read on it, and nothing waiting in the kernel either. Callbacks are
 * deferred, so the upstream's FIN or a stray byte may have arrived this
 * very loop turn without on_idle_read() having run yet; libevent turns
 * reading off after an EOF, an error or a timeout.
 */
static bool
conn_fit(struct uconn *uc)
{
    char c;
    evutil_socket_t fd = bufferevent_getfd(uc->bev);

    if (evbuffer_get_length(bufferevent_get_input(uc->bev)) > 0 ||
        (bufferevent_get_enabled(uc->bev) & EV_READ) == 0 || fd < 0) {
        return false;
    }
    return recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) < 0 &&
           (errno == EAGAIN || errno == EWOULDBLOCK);
}

/* The warmest idle connection that is still fit, or NULL. */
static struct uconn *
pool_take(struct pool *pl)
{
    while (pl->nidle > 0) {
        struct uconn *uc = pl->idle[--pl->nidle];

        if (conn_fit(uc)) {
            return uc;
        }
        conn_free(uc);
    }
    return NULL;
}

/* Gives a connection whose response is complete back to its pool. */
static void
pool_release(struct upstream_client *c, struct uconn *uc, unsigned keepalive)
{
    struct pool *pl = uc->pool;

    uc->req = NULL;
    uc->served++;
    evtimer_del(uc->timer);
    if (pl->nidle >= keepalive) {
        conn_free(uc);
        return;
    }
    bufferevent_setcb(uc->bev, on_idle_read, NULL, on_idle_event, uc);
    bufferevent_set_timeouts(uc->bev, &c->idle_tv, NULL);
    bufferevent_enable(uc->bev, EV_READ);
    pl->idle = xgrow(pl->idle, &pl->cap, pl->nidle + 1, sizeof(*pl->idle));
    pl->idle[pl->nidle++] = uc;
}

static struct uconn *
conn_new(struct upstream_client *c, struct pool *pl)
{
    struct uconn *uc = xcalloc(1, sizeof(*uc));

    /*
     * Deferred callbacks: a connect that fails at once (a refused port on
     * loopback) then reports from the loop, never from inside
     * upstream_send().
     */
    uc->bev = bufferevent_socket_new(
        c->base, -1, BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
    if (uc->bev == NULL) {
        free(uc);
        return NULL;
    }
    uc->pool = pl;
    uc->parser = resparse_new(&parse_callbacks, uc, MAX_HEAD_BYTES);
    uc->body = evbuffer_new();
    uc->timer = evtimer_new(c->base, on_timer, uc);
    if (bufferevent_socket_connect_hostname(uc->bev, c->dns, AF_UNSPEC,
                                            pl->host, pl->port) < 0) {
        conn_free(uc);
        return NULL;
    }
    return uc;
}

/* ---- the request's lifecycle ---- */

static void
req_free(struct upstream_req *rq)
{
    if (rq->conn != NULL) {
        conn_free(rq->conn);
    }
    if (rq->resend != NULL) {
        evbuffer_free(rq->resend);
    }
    free(rq);
}

/*
 * Ends 'rq' with an error: the connection is closed, the caller told,
 * the request freed.
 */
static void
req_fail(struct upstream_req *rq, enum upstream_error err, const char *detail)
{
    const struct upstream_callbacks *cb = rq->cb;
    void *arg = rq->arg;

    req_free(rq);
    cb->on_error(arg, err, detail);
}

static void
arm_timer(struct upstream_req *rq, uint64_t ms)
{
    struct timeval tv = clock_tv(ms);

    evtimer_add(rq->conn->timer, &tv);
}

/* Puts the request's bytes on the connection and starts reading. */
static void
start_on(struct upstream_req *rq, struct uconn *uc, bool reused)
{
    uint64_t wait = rq->response_timeout_ms;

    rq->conn = uc;
    rq->reused = reused;
    uc->req = rq;
    bufferevent_setcb(uc->bev, on_conn_read, NULL, on_conn_event, rq);
    /* Our timer covers the wait for the head; the body sets its own. */
    bufferevent_set_timeouts(uc->bev, NULL, NULL);
    bufferevent_enable(uc->bev, EV_READ | EV_WRITE);
    if (!uc->connected) {
        rq->state = REQ_CONNECTING;
        if (rq->connect_timeout_ms < wait) {
            wait = rq->connect_timeout_ms;
        }
    } else {
        rq->state = REQ_WAITING;
    }
    arm_timer(rq, wait);
}

/*
 * Writes the request head, and the body if any, into 'out'. The head is
 * written into 'resend' first when the request may be sent once more.
 */
static void
write_request(struct upstream_req *rq, const struct upstream_request *r,
              struct evbuffer *out)
{
    struct evbuffer *head = rq->resend != NULL ? rq->resend : out;
    size_t body_len = r->body != NULL ? evbuffer_get_length(r->body) : 0;
    bool with_length = r->body != NULL || strcmp(r->method, "POST") == 0 ||
                       strcmp(r->method, "PUT") == 0 ||
                       strcmp(r->method, "PATCH") == 0;

    evbuffer_add_printf(head, "%s %s HTTP/1.1\r\n", r->method, r->target);
    for (size_t i = 0; i < r->headers->n; i++) {
        const struct header *h = &r->headers->v[i];

        /* A filter's output is not checked at load: never split a line. */
        if (!headers_valid_name(h->name) || !headers_valid_value(h->value)) {
            continue;
        }
        evbuffer_add(head, h->name, strlen(h->name));
        evbuffer_add(head, ": ", 2);
        evbuffer_add(head, h->value, strlen(h->value));
        evbuffer_add(head, "\r\n", 2);
    }
    if (with_length) {
        evbuffer_add_printf(head, "Content-Length: %zu\r\n", body_len);
    }
    evbuffer_add(head, "\r\n", 2);
    if (head != out) {
        size_t n = evbuffer_get_length(head);

        evbuffer_add(out, evbuffer_pullup(head, (ev_ssize_t)n), n);
    }
    if (r->body != NULL) {
        evbuffer_add_buffer(out, r->body);
    }
}

static bool
idempotent(const char *method)
{
    return strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0 ||
           strcmp(method, "OPTIONS") == 0;
}

struct upstream_req *
upstream_send(struct upstream_client *c, const struct upstream_request *r,
              const struct upstream_callbacks *cb, void *arg)
{
    struct pool *pl = pool_get(c, r->host, r->port);
    struct upstream_req *rq;
    struct uconn *uc;
    bool reused;

    uc = pool_take(pl);
    reused = uc != NULL;
    if (uc == NULL && (uc = conn_new(c, pl)) == NULL) {
        return NULL;
    }
    rq = xcalloc(1, sizeof(*rq));
    rq->client = c;
    rq->cb = cb;
    rq->arg = arg;
    rq->head_request = strcmp(r->method, "HEAD") == 0;
    resparse_reset(uc->parser, rq->head_request);
    rq->response_timeout_ms = r->response_timeout_ms;
    rq->connect_timeout_ms = r->connect_timeout_ms;
    rq->keepalive = r->keepalive;
    rq->body_tv = clock_tv(r->response_timeout_ms);
    rq->t0 = clock_mono_ms();
    /*
     * Only an idempotent request without a body, on a connection that
     * had served before, may go out twice: the upstream may have closed
     * that connection just as we wrote to it (RFC 9112 9.3.1).
     */
    if (reused && r->body == NULL && idempotent(r->method)) {
        rq->resend = evbuffer_new();
    }
    write_request(rq, r, bufferevent_get_output(uc->bev));
    start_on(rq, uc, reused);
    return rq;
}

void
upstream_cancel(struct upstream_req *rq)
{
    if (rq->in_callback) {
        rq->cancelled = true;
        return;
    }
    req_free(rq);
}

void
upstream_pause(struct upstream_req *rq)
{
    if (!rq->paused) {
        rq->paused = true;
        bufferevent_disable(rq->conn->bev, EV_READ);
    }
}

void
upstream_resume(struct upstream_req *rq)
{
    if (rq->paused) {
        rq->paused = false;
        bufferevent_enable(rq->conn->bev, EV_READ);
    }
}

bool
upstream_reused(const struct upstream_req *rq)
{
    return rq->reused;
}

/* ---- the response ---- */

static int
on_parsed_head(void *arg, const struct resparse_head *head)
{
    struct upstream_req *rq = ((struct uconn *)arg)->req;

    evtimer_del(rq->conn->timer);
    rq->state = REQ_BODY;
    rq->keep_alive = head->keep_alive;
    /* Between reads of the body: time the reads, not the whole body. */
    bufferevent_set_timeouts(rq->conn->bev, &rq->body_tv, NULL);
    rq->in_callback = true;
    rq->cb->on_head(rq->arg, head);
    rq->in_callback = false;
    return rq->cancelled ? -1 : 0;
}

static int
on_parsed_body(void *arg, const char *data, size_t len)
{
    struct uconn *uc = arg;

    evbuffer_add(uc->body, data, len);
    return 0;
}

static int
on_parsed_complete(void *arg)
{
    (void)arg;
    return 0;
}

static const struct resparse_callbacks parse_callbacks = {
    on_parsed_head, on_parsed_body, on_parsed_complete};

/* Hands the body parsed so far to the caller; false if it cancelled. */
static bool
deliver_body(struct upstream_req *rq)
{
    struct evbuffer *body = rq->conn->body;

    if (evbuffer_get_length(body) == 0) {
        return true;
    }
    rq->in_callback = true;
    rq->cb->on_body(rq->arg, body);
    rq->in_callback = false;
    evbuffer_drain(body, evbuffer_get_length(body));
    if (rq->cancelled) {
        req_free(rq);
        return false;
    }
    return true;
}

/*
 * The response is complete: its connection goes back to the pool if the
 * upstream may send another and has sent nothing beyond this one.
 */
static void
req_complete(struct upstream_req *rq, bool keep_alive)
{
    const struct upstream_callbacks *cb = rq->cb;
    void *arg = rq->arg;
    struct uconn *uc = rq->conn;

    if (!deliver_body(rq)) {
        return;
    }
    rq->conn = NULL;
    /*
     * Not if the upstream answered before reading the whole request (a 413
     * before the body): the rest of the body would be read by it as the
     * next request, and its answer sent to another client.
     */
    if (keep_alive && !rq->write_failed &&
        evbuffer_get_length(bufferevent_get_input(uc->bev)) == 0 &&
        evbuffer_get_length(bufferevent_get_output(uc->bev)) == 0) {
        pool_release(rq->client, uc, rq->keepalive);
    } else {
        conn_free(uc);
    }
    req_free(rq);
    cb->on_done(arg);
}

/* Feeds what the connection has read to the parser. */
static enum resparse_status
feed_input(struct upstream_req *rq)
{
    struct evbuffer *in = bufferevent_get_input(rq->conn->bev);
    struct evbuffer_iovec v;
    enum resparse_status st = RESPARSE_MORE;

    if (rq->resend != NULL && evbuffer_get_length(in) > 0) {
        /* A byte came back: the request reached the upstream. */
        evbuffer_free(rq->resend);
        rq->resend = NULL;
    }
    /* An empty buffer may still hold an empty chain: test the length. */
    while (st == RESPARSE_MORE && evbuffer_get_length(in) > 0 &&
           evbuffer_peek(in, -1, NULL, &v, 1) > 0) {
        size_t used;

        st = resparse_feed(rq->conn->parser, v.iov_base, v.iov_len, &used);
        evbuffer_drain(in, used);
    }
    return st;
}

/*
 * Acts on the parser's verdict: a complete response ends the request, a
 * malformed one fails it ('closed': the connection ended first, so the
 * error is UPSTREAM_CLOSED). Body bytes parsed before either reach the
 * caller first.
 */
static void
settle(struct upstream_req *rq, enum resparse_status st, bool closed)
{
    switch (st) {
    case RESPARSE_MORE:
        deliver_body(rq);
        return;
    case RESPARSE_STOPPED:
        /* The caller cancelled from on_head. */
        req_free(rq);
        return;
    case RESPARSE_ERROR:
        if (rq->state == REQ_BODY && !deliver_body(rq)) {
            return;
        }
        req_fail(rq, closed ? UPSTREAM_CLOSED : UPSTREAM_BAD_RESPONSE,
                 resparse_error(rq->conn->parser));
        return;
    case RESPARSE_DONE:
        req_complete(rq, rq->keep_alive && !closed);
        return;
    }
}

static void
on_conn_read(struct bufferevent *bev, void *arg)
{
    struct upstream_req *rq = arg;

    (void)bev;
    settle(rq, feed_input(rq), false);
}

/* Sends the request again on a new connection; false if it cannot. */
static bool
retry(struct upstream_req *rq)
{
    struct uconn *old = rq->conn, *uc = conn_new(rq->client, old->pool);
    struct evbuffer *out;

    if (uc == NULL) {
        return false;
    }
    rq->conn = NULL;
    conn_free(old);
    out = bufferevent_get_output(uc->bev);
    evbuffer_add_buffer(out, rq->resend);
    evbuffer_free(rq->resend);
    rq->resend = NULL;
    resparse_reset(uc->parser, rq->head_request);
    start_on(rq, uc, false);
    return true;
}

static void
on_conn_event(struct bufferevent *bev, short what, void *arg)
{
    struct upstream_req *rq = arg;
    char detail[160];
    int err = EVUTIL_SOCKET_ERROR();

    if (what & BEV_EVENT_CONNECTED) {
        uint64_t spent = (uint64_t)(clock_mono_ms() - rq->t0);

        rq->conn->connected = true;
        rq->state = REQ_WAITING;
        arm_timer(rq, rq->response_timeout_ms > spent
                          ? rq->response_timeout_ms - spent
                          : 0);
        return;
    }
    if (what & BEV_EVENT_TIMEOUT) {
        /* Only the body's reads are timed by the bufferevent. */
        req_fail(rq, UPSTREAM_TIMEOUT, "no body bytes within the timeout");
        return;
    }
    if (rq->state == REQ_CONNECTING) {
        int dns = bufferevent_socket_get_dns_error(bev);

        if (dns != 0) {
            snprintf(detail, sizeof(detail), "cannot resolve: %s",
                     evutil_gai_strerror(dns));
        } else {
            snprintf(detail, sizeof(detail), "cannot connect: %s",
                     evutil_socket_error_to_string(err));
        }
        req_fail(rq, UPSTREAM_CONNECT, detail);
        return;
    }
    if (rq->resend != NULL && (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) &&
        retry(rq)) {
        return;
    }
    if ((what & BEV_EVENT_WRITING) && (what & BEV_EVENT_ERROR)) {
        /*
         * The upstream closed its reading side, maybe after answering
         * early (a 413 before the body): read what it said, but never
         * pool the connection. Reads end in EOF or an error of their own.
         */
        rq->write_failed = true;
        evbuffer_drain(bufferevent_get_output(bev),
                       evbuffer_get_length(bufferevent_get_output(bev)));
        return;
    }
    if (what & BEV_EVENT_EOF) {
        /* Bytes read with the end come first. */
        enum resparse_status st = feed_input(rq);

        if (st == RESPARSE_ERROR || st == RESPARSE_STOPPED) {
            settle(rq, st, false);
            return;
        }
        if (st == RESPARSE_MORE) {
            st = resparse_eof(rq->conn->parser);
        }
        settle(rq, st, true);
        return;
    }
    snprintf(detail, sizeof(detail), "connection error: %s",
             evutil_socket_error_to_string(err));
    req_fail(rq, UPSTREAM_CLOSED, detail);
}

static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct upstream_req *rq = ((struct uconn *)arg)->req;
    char detail[128];

    (void)fd;
    (void)what;
    if (rq->state == REQ_CONNECTING) {
        if (rq->connect_timeout_ms < rq->response_timeout_ms) {
            snprintf(detail, sizeof(detail), "no connection within %llu ms",
                     (unsigned long long)rq->connect_timeout_ms);
            req_fail(rq, UPSTREAM_CONNECT_TIMEOUT, detail);
            return;
        }
    }
    snprintf(detail, sizeof(detail), "no response within %llu ms",
             (unsigned long long)rq->response_timeout_ms);
    req_fail(rq, UPSTREAM_TIMEOUT, detail);
}
