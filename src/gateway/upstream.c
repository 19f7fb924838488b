#include "upstream.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/event.h>

#include "clock.h"
#include "log.h"
#include "strbuf.h"
#include "tls.h"
#include "xmalloc.h"

/* Response heads, interim responses included, beyond this are a 502. */
#define MAX_HEAD_BYTES (64 * 1024)
/* An idle pooled connection unused this long is closed. */
#define IDLE_TIMEOUT_MS (60 * 1000)
/* Bytes read from an upstream at most per read() (the bufferevent's
   evbuffer_read() took 4096, and asked FIONREAD first). */
#define READ_CHUNK (16 * 1024)
/* Room for the head to resend that a request is made with at least. */
#define RESEND_ROOM 512
/* Freed requests a worker keeps for the next ones (none under ASan). */
#define SPARE_REQUESTS 64

struct pool;

/*
 * One connection to an upstream: in use by 'req', or idle in its pool.
 * The bufferevent connects and writes; reading is ours ('rd'), so that a
 * read is one recv() and goes straight to the parser. Over TLS the
 * bufferevent (OpenSSL's) does it all, reading included.
 */
struct uconn {
    struct bufferevent *bev;  /* owned; never reads, unless 'tls' */
    struct event *rd;         /* reads the socket once connected: for the
                                 request, or to drop an idle connection
                                 that the upstream closes or writes on;
                                 owned, NULL until connected */
    struct pool *pool;        /* borrowed: where it returns */
    struct upstream_req *req; /* the request on it, or NULL when idle */
    unsigned served;          /* responses completed on it */
    bool connected;           /* the TCP connect (and TLS handshake) has
                                 completed */
    bool tls;                 /* a TLS connection */
    bool eof;                 /* TLS: the upstream ended the connection;
                                 acted on once the input is read */
    bool *alive;              /* TLS: cleared when freed, for the read
                                 loop that may free it; or NULL */
    /* Kept with the connection, so that a request allocates none of
     * them: */
    struct resparse *parser; /* its responses' parser; owned */
    struct evbuffer *body;   /* parsed body for on_body; owned */
    struct event *timer;     /* connect, response, body and idle timeouts:
                                the bufferevent times nothing; owned */
    struct strbuf head;      /* the request head, built here; reused */
    size_t corked;           /* 1 + its slot in client->corked while its
                                head waits for the end of the loop turn
                                (write_corked()); 0 otherwise */
    struct upstream_client *client; /* borrowed: the worker's client */
};

/* The idle connections of one worker to one host:port and TLS setting. */
struct pool {
    char *host;    /* owned */
    uint16_t port; /* upstream port */
    char *tls_key; /* the TLS settings (tls_client_key()), or NULL
                      for plain http; owned */
    struct ssl_session_st *session; /* the latest TLS session the upstream
                                       gave, offered by new connections;
                                       owned, or NULL */
    bool tls_warned;     /* a certificate failure has been logged, and
                            none verified since */
    struct uconn **idle; /* LIFO: the warmest is reused first; owned */
    size_t nidle;        /* idle connections */
    size_t cap;          /* slots in 'idle' */
    size_t nconns;       /* connections of the pool, idle or in use */
    int64_t empty_ms;    /* when 'nconns' last fell to 0 */
    struct pool *next;   /* next pool of the client */
};

struct upstream_client {
    struct event_base *base;    /* borrowed */
    struct evdns_base *dns;     /* borrowed, or NULL */
    struct pool *pools;         /* owned list */
    struct timeval idle_tv;     /* idle timeout of pooled connections, a
                                   common timeout of 'base' when possible */
    struct event *flush_ev;     /* made active by the first head corked
                                   in a loop turn: writes the heads
                                   corked by then when the events
                                   already active in the turn have run
                                   (write_corked()); owned */
    struct uconn **corked;      /* connections whose head waits, in the
                                   order sent; a slot is NULL once its
                                   connection is freed; borrowed */
    size_t ncorked;             /* slots used in 'corked' */
    size_t corked_cap;          /* slots in 'corked' */
    struct upstream_req *spare; /* requests freed, kept for the next ones
                                   (linked by 'next_spare'); owned */
    size_t nspare;              /* length of 'spare' */
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
    const char *resend;                  /* the request once more, for the
                                            one retry (in 'resend_buf');
                                            NULL when none */
    size_t resend_len;                   /* bytes at 'resend' */
    struct timeval body_tv;              /* longest pause in the body */
    int64_t t0;                          /* monotonic ms it was sent */
    uint64_t response_timeout_ms;        /* from 'r' */
    uint64_t connect_timeout_ms;         /* from 'r' */
    struct tls_client *tls;              /* from 'r': for a retry */
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
    size_t resend_cap;                   /* bytes 'resend_buf' holds */
    struct upstream_req *next_spare;     /* in client->spare, once freed */
    char resend_buf[];                   /* the head, when it may be
                                            resent; allocated with it */
};

static void on_readable(evutil_socket_t fd, short what, void *arg);
static void on_tls_read(struct bufferevent *bev, void *arg);
static void on_tls_idle_read(struct bufferevent *bev, void *arg);
static void on_conn_event(struct bufferevent *bev, short what, void *arg);
static void on_idle_event(struct bufferevent *bev, short what, void *arg);
static void on_timer(evutil_socket_t fd, short what, void *arg);
static void on_flush(evutil_socket_t fd, short what, void *arg);
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
    case UPSTREAM_TLS:
        return "TLS handshake failed";
    case UPSTREAM_TLS_VERIFY:
        return "certificate not verified";
    }
    return "failed";
}

/* ---- connections and pools ---- */

/* The upstream handed out a TLS session on 'app''s connection. */
static void
on_session(void *app, struct ssl_session_st *session)
{
    struct pool *pl = ((struct uconn *)app)->pool;

    tls_session_free(pl->session);
    pl->session = session;
}

struct upstream_client *
upstream_client_new(struct event_base *base, struct evdns_base *dns)
{
    struct upstream_client *c = xcalloc(1, sizeof(*c));
    struct timeval tv = clock_tv(IDLE_TIMEOUT_MS);
    const struct timeval *common;

    c->base = base;
    c->dns = dns;
    /* Every idle timeout has the same length: a queue, not the heap. */
    common = event_base_init_common_timeout(base, &tv);
    c->idle_tv = common != NULL ? *common : tv;
    c->flush_ev = event_new(base, -1, 0, on_flush, c);
    tls_set_session_cb(on_session);
    return c;
}

/* A head not written yet never will be. */
static void
uncork(struct uconn *uc)
{
    if (uc->corked > 0) {
        uc->client->corked[uc->corked - 1] = NULL;
        uc->corked = 0;
    }
}

static void
conn_free(struct uconn *uc)
{
    /* Safe inside the bufferevent's own callbacks (libevent defers it),
       and inside on_readable(), which touches nothing after. */
    if (uc->rd != NULL) {
        event_free(uc->rd);
    }
    if (uc->alive != NULL) {
        *uc->alive = false;
    }
    uncork(uc);
    if (--uc->pool->nconns == 0) {
        uc->pool->empty_ms = clock_mono_ms();
    }
    if (uc->tls) {
        /* Its SSL may outlive it a moment (libevent finalizes later). */
        tls_client_bev_detach(uc->bev);
    }
    bufferevent_free(uc->bev);
    event_free(uc->timer);
    resparse_free(uc->parser);
    evbuffer_free(uc->body);
    free(uc->head.p);
    free(uc);
}

static void
pool_free(struct pool *pl)
{
    for (size_t i = 0; i < pl->nidle; i++) {
        conn_free(pl->idle[i]);
    }
    free(pl->idle);
    free(pl->host);
    free(pl->tls_key);
    tls_session_free(pl->session);
    free(pl);
}

/*
 * conn_free() for a connection whose last exchange is over: over TLS it
 * says so first (tls_close_notify()), which also keeps its session for
 * the pool's next connection to resume.
 */
static void
conn_end(struct uconn *uc)
{
    if (uc->tls && uc->connected) {
        tls_close_notify(uc->bev);
    }
    conn_free(uc);
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
        pool_free(pl);
    }
    event_free(c->flush_ev);
    free(c->corked);
    while (c->spare != NULL) {
        struct upstream_req *rq = c->spare;

        c->spare = rq->next_spare;
        free(rq);
    }
    free(c);
}

/*
 * The pool of 'host':'port' with TLS settings 'tls_key' (NULL: plain): a
 * plain and a TLS connection, or two with different certificates to
 * check or to show, never share one (tls_client_key()). A pool passed on
 * the way that has had no connection for an idle timeout is freed (one
 * of TLS files since replaced, or of an upstream no route names any
 * more); a pool emptied for less keeps its session to resume and what
 * it has warned of.
 */
static struct pool *
pool_get(struct upstream_client *c, const char *host, uint16_t port,
         const char *tls_key)
{
    struct pool *pl;
    int64_t now = 0;

    for (struct pool **at = &c->pools; (pl = *at) != NULL;) {
        if (pl->port == port && strcmp(pl->host, host) == 0 &&
            (pl->tls_key == NULL
                 ? tls_key == NULL
                 : tls_key != NULL && strcmp(pl->tls_key, tls_key) == 0)) {
            return pl;
        }
        if (pl->nconns == 0) {
            if (now == 0) {
                now = clock_mono_ms();
            }
            if (now - pl->empty_ms >= IDLE_TIMEOUT_MS) {
                *at = pl->next;
                pool_free(pl);
                continue;
            }
        }
        at = &pl->next;
    }
    pl = xcalloc(1, sizeof(*pl));
    pl->host = xstrdup(host);
    pl->port = port;
    pl->tls_key = tls_key != NULL ? xstrdup(tls_key) : NULL;
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
 * An idle connection that the upstream closes, or sends anything on
 * (on_readable), or that stays unused past the idle timeout (on_timer),
 * is dropped: a byte from an upstream that was asked nothing belongs to
 * no request.
 */
static void
idle_drop(struct uconn *uc)
{
    pool_remove(uc->pool, uc);
    conn_end(uc);
}

static void
on_idle_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    (void)what;
    idle_drop(arg);
}

/*
 * True when an idle connection is still fit to carry a request: nothing
 * waiting in the kernel. on_readable() drops an idle connection as soon
 * as it runs, but the upstream's FIN or a stray byte may have arrived
 * this very loop turn, before it ran, or after the loop last polled.
 */
/* The socket of 'uc': its read event knows it without a call. */
static evutil_socket_t
conn_fd(const struct uconn *uc)
{
    return uc->rd != NULL ? event_get_fd(uc->rd) : bufferevent_getfd(uc->bev);
}

static bool
conn_fit(struct uconn *uc)
{
    char c;
    evutil_socket_t fd = conn_fd(uc);

    if (!uc->connected || fd < 0) {
        return false;
    }
    if (uc->tls && evbuffer_get_length(bufferevent_get_input(uc->bev)) > 0) {
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

/* Gives a connection back to its pool: its response is complete, or its
 * request was given up before a byte of it was written. */
static void
pool_release(struct upstream_client *c, struct uconn *uc, unsigned keepalive)
{
    struct pool *pl = uc->pool;

    /* A request given up before its head was written leaves the
       connection as it was: idle (upstream_cancel()). */
    uncork(uc);
    uc->req = NULL;
    if (pl->nidle >= keepalive) {
        conn_end(uc);
        return;
    }
    bufferevent_setcb(uc->bev, uc->tls ? on_tls_idle_read : NULL, NULL,
                      on_idle_event, uc);
    evtimer_add(uc->timer, &c->idle_tv);
    pl->idle = xgrow(pl->idle, &pl->cap, pl->nidle + 1, sizeof(*pl->idle));
    pl->idle[pl->nidle++] = uc;
}

/* A new connection to the upstream of 'pl', over TLS when 'tls'. */
static struct uconn *
conn_new(struct upstream_client *c, struct pool *pl, struct tls_client *tls)
{
    struct uconn *uc = xcalloc(1, sizeof(*uc));

    /*
     * Deferred callbacks: a connect that fails at once (a refused port on
     * loopback) then reports from the loop, never from inside
     * upstream_send(). The TLS bufferevent defers too, and reports
     * "connected" once its handshake is done.
     */
    uc->tls = tls != NULL;
    if (tls != NULL) {
        uc->bev = tls_client_bev_new(tls, c->base, pl->host, pl->session, uc);
    } else {
        uc->bev = bufferevent_socket_new(
            c->base, -1, BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
    }
    if (uc->bev == NULL) {
        free(uc);
        return NULL;
    }
    uc->pool = pl;
    pl->nconns++;
    uc->client = c;
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
    struct upstream_client *c = rq->client;

    if (rq->conn != NULL) {
        conn_free(rq->conn);
    }
    /* Kept for a next request: one allocation fewer per request. */
    if (XMALLOC_REUSE && c->nspare < SPARE_REQUESTS) {
        rq->next_spare = c->spare;
        c->spare = rq;
        c->nspare++;
    } else {
        free(rq);
    }
}

/* A request zeroed, with room for a head of 'resend' bytes to resend. */
static struct upstream_req *
req_new(struct upstream_client *c, size_t resend)
{
    struct upstream_req *rq = c->spare;
    size_t cap;

    if (rq != NULL && rq->resend_cap >= resend) {
        c->spare = rq->next_spare;
        c->nspare--;
        cap = rq->resend_cap;
        memset(rq, 0, sizeof(*rq));
    } else {
        /* Room for a usual head, so that the spare fits the next one. */
        cap = resend > RESEND_ROOM ? resend : RESEND_ROOM;
        rq = xcalloc(1, sizeof(*rq) + cap);
    }
    rq->resend_cap = cap;
    return rq;
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

/*
 * Writing waits for a connect, or for what the socket did not take at
 * once (write_now()). A bufferevent has EV_WRITE on from its start, and
 * adding output then schedules the write by itself: enabling it again
 * would only re-add the event.
 */
static void
schedule_write(struct uconn *uc)
{
    if ((bufferevent_get_enabled(uc->bev) & EV_WRITE) == 0 &&
        (!uc->connected ||
         evbuffer_get_length(bufferevent_get_output(uc->bev)) > 0)) {
        bufferevent_enable(uc->bev, EV_WRITE);
    }
}

/*
 * Starts reading the response to the request whose bytes are on (or
 * already through, or corked for) the connection, and times the wait
 * for its head.
 */
static void
start_on(struct upstream_req *rq, struct uconn *uc, bool reused)
{
    uint64_t wait = rq->response_timeout_ms;

    rq->conn = uc;
    rq->reused = reused;
    uc->req = rq;
    bufferevent_setcb(uc->bev, uc->tls ? on_tls_read : NULL, NULL,
                      on_conn_event, rq);
    schedule_write(uc);
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

/* Appends 'len' bytes, the room made already. */
static char *
put(char *at, const char *p, size_t len)
{
    memcpy(at, p, len);
    return at + len;
}

/* The request head of 'r', in 'b' (emptied first). */
static void
build_head(struct strbuf *b, const struct upstream_request *r)
{
    bool with_length = r->body != NULL || strcmp(r->method, "POST") == 0 ||
                       strcmp(r->method, "PUT") == 0 ||
                       strcmp(r->method, "PATCH") == 0;
    size_t nm = strlen(r->method), nt = strlen(r->target);
    char *at;

    /* Room checked once per line; the last strbuf_add() ends the NUL. */
    b->n = 0;
    b->p = xgrow(b->p, &b->cap, nm + nt + 12, 1);
    at = b->p;
    at = put(at, r->method, nm);
    *at++ = ' ';
    at = put(at, r->target, nt);
    at = put(at, " HTTP/1.1\r\n", 11);
    b->n = (size_t)(at - b->p);
    for (size_t i = 0; i < r->headers->n; i++) {
        const struct header *h = &r->headers->v[i];
        size_t nn = headers_name_len(h->name), nv;

        /* A filter's output is not checked at load: never split a line. */
        if (nn == 0 || (nv = headers_value_len(h->value)) == SIZE_MAX) {
            continue;
        }
        b->p = xgrow(b->p, &b->cap, b->n + nn + nv + 5, 1);
        at = b->p + b->n;
        at = put(at, h->name, nn);
        at = put(at, ": ", 2);
        at = put(at, h->value, nv);
        at = put(at, "\r\n", 2);
        b->n = (size_t)(at - b->p);
    }
    if (with_length) {
        strbuf_add(b, "Content-Length: ", 16);
        strbuf_add_u64(b, r->body != NULL ? evbuffer_get_length(r->body) : 0);
        strbuf_add(b, "\r\n", 2);
    }
    strbuf_add(b, "\r\n", 2);
}

/*
 * Sends the head 'p' ('len' bytes) and then 'body' (may be NULL; drained)
 * on 'uc'. On a connection that is up and has nothing queued, as much as
 * the socket takes goes out now, in one writev(): going through the
 * bufferevent costs a loop turn and two epoll_ctl calls (write interest
 * on, then off). What the socket does not take, and everything on a
 * connection still connecting, is queued for the bufferevent, which also
 * reports a failed write as ever: a failed writev() here queues it all,
 * so that the bufferevent's own attempt meets the error.
 */
static void
write_now(struct uconn *uc, const char *p, size_t len, struct evbuffer *body)
{
    struct evbuffer *out = bufferevent_get_output(uc->bev);
    evutil_socket_t fd = conn_fd(uc);
    struct iovec v[8];
    int nv = 1;
    ssize_t n;

    /* Over TLS, OpenSSL writes: the bufferevent has it all. */
    if (!uc->tls && uc->connected && fd >= 0 && evbuffer_get_length(out) == 0) {
        v[0].iov_base = (void *)p;
        v[0].iov_len = len;
        if (body != NULL) {
            struct evbuffer_iovec bv[7];
            int k = evbuffer_peek(body, -1, NULL, bv, 7);

            for (int i = 0; i < k && i < 7; i++) {
                v[nv].iov_base = bv[i].iov_base;
                v[nv++].iov_len = bv[i].iov_len;
            }
        }
        do {
            n = writev(fd, v, nv);
        } while (n < 0 && errno == EINTR);
        if (n > 0) {
            size_t done = (size_t)n < len ? (size_t)n : len;

            p += done;
            len -= done;
            if (body != NULL && (size_t)n > done) {
                evbuffer_drain(body, (size_t)n - done);
            }
        }
    }
    if (len > 0) {
        evbuffer_add(out, p, len);
    }
    if (body != NULL && evbuffer_get_length(body) > 0) {
        evbuffer_add_buffer(out, body);
    }
}

/*
 * Corks the head built in 'uc' (a plain connection, up and idle, and a
 * request without a body): it is written by an event made active now,
 * which runs after the events already active in this loop turn (those
 * made active later, deferred callbacks among them, may cork again and
 * flush again in the same turn), with every other head corked by then,
 * one write each. An upstream woken
 * by the first then finds the others waiting too, instead of being woken
 * (and the worker preempted) once per request; and a request given up in
 * the turn it was sent (its client gone) never reaches the upstream.
 */
static void
cork(struct upstream_client *c, struct uconn *uc)
{
    /* Already waiting: its buffer holds the head, to be written once. */
    if (uc->corked > 0) {
        return;
    }
    c->corked =
        xgrow(c->corked, &c->corked_cap, c->ncorked + 1, sizeof(*c->corked));
    c->corked[c->ncorked++] = uc;
    uc->corked = c->ncorked;
    if (c->ncorked == 1) {
        event_active(c->flush_ev, EV_TIMEOUT, 1);
    }
}

/* Writes the corked heads, in the order they were sent. */
static void
write_corked(struct upstream_client *c)
{
    /* write_now() calls nothing back: no slot changes under the loop. */
    for (size_t i = 0; i < c->ncorked; i++) {
        struct uconn *uc = c->corked[i];

        if (uc != NULL) {
            uc->corked = 0;
            write_now(uc, uc->head.p, uc->head.n, NULL);
            schedule_write(uc);
        }
    }
    c->ncorked = 0;
}

static void
on_flush(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    write_corked(arg);
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
    struct pool *pl = pool_get(c, r->host, r->port,
                               r->tls != NULL ? tls_client_key(r->tls) : NULL);
    struct upstream_req *rq;
    struct uconn *uc;
    bool reused;
    bool resend;

    uc = pool_take(pl);
    reused = uc != NULL;
    if (uc == NULL && (uc = conn_new(c, pl, r->tls)) == NULL) {
        return NULL;
    }
    build_head(&uc->head, r);
    /*
     * Only an idempotent request without a body, on a connection that
     * had served before, may go out twice: the upstream may have closed
     * that connection just as we wrote to it (RFC 9112 9.3.1). Its head
     * is kept with the request, in the same allocation.
     */
    resend = reused && r->body == NULL && idempotent(r->method);
    rq = req_new(c, resend ? uc->head.n : 0);
    if (resend) {
        memcpy(rq->resend_buf, uc->head.p, uc->head.n);
        rq->resend = rq->resend_buf;
        rq->resend_len = uc->head.n;
    }
    rq->client = c;
    rq->cb = cb;
    rq->arg = arg;
    rq->head_request = strcmp(r->method, "HEAD") == 0;
    resparse_reset(uc->parser, rq->head_request);
    rq->response_timeout_ms = r->response_timeout_ms;
    rq->connect_timeout_ms = r->connect_timeout_ms;
    rq->tls = r->tls;
    rq->keepalive = r->keepalive;
    rq->body_tv = clock_tv(r->response_timeout_ms);
    rq->t0 = clock_mono_ms();
    if (!uc->tls && uc->connected &&
        (r->body == NULL || evbuffer_get_length(r->body) == 0)) {
        cork(c, uc);
    } else {
        write_now(uc, uc->head.p, uc->head.n, r->body);
    }
    start_on(rq, uc, reused);
    return rq;
}

void
upstream_cancel(struct upstream_req *rq)
{
    struct uconn *uc = rq->conn;

    if (rq->in_callback) {
        rq->cancelled = true;
        return;
    }
    /* Nothing of it written yet (corked): its connection stays good. */
    if (uc != NULL && uc->corked > 0) {
        rq->conn = NULL;
        pool_release(rq->client, uc, rq->keepalive);
    }
    req_free(rq);
}

/* Reads of 'uc' on or off (its own event, or the TLS bufferevent's). */
static void
conn_reading(struct uconn *uc, bool on)
{
    if (!uc->tls) {
        if (on) {
            event_add(uc->rd, NULL);
        } else {
            event_del(uc->rd);
        }
        return;
    }
    if (!on) {
        bufferevent_disable(uc->bev, EV_READ);
        return;
    }
    bufferevent_enable(uc->bev, EV_READ);
    /* What was read before the pause gets no new callback by itself. */
    if (evbuffer_get_length(bufferevent_get_input(uc->bev)) > 0 || uc->eof) {
        bufferevent_trigger(uc->bev, EV_READ,
                            BEV_TRIG_IGNORE_WATERMARKS |
                                BEV_TRIG_DEFER_CALLBACKS);
    }
}

void
upstream_pause(struct upstream_req *rq)
{
    if (!rq->paused) {
        rq->paused = true;
        conn_reading(rq->conn, false);
        if (rq->state == REQ_BODY) {
            evtimer_del(rq->conn->timer);
        }
    }
}

void
upstream_resume(struct upstream_req *rq)
{
    if (rq->paused) {
        rq->paused = false;
        conn_reading(rq->conn, true);
        if (rq->state == REQ_BODY) {
            evtimer_add(rq->conn->timer, &rq->body_tv);
        }
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

    /* Between reads of the body: time the reads, not the whole body
       (armed by settle() once this read is handled). */
    evtimer_del(rq->conn->timer);
    rq->state = REQ_BODY;
    rq->keep_alive = head->keep_alive;
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
req_complete(struct upstream_req *rq, bool keep_alive, bool stray)
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
    if (keep_alive && !rq->write_failed && !stray && !uc->eof &&
        evbuffer_get_length(bufferevent_get_output(uc->bev)) == 0) {
        if (rq->paused) {
            /* The idle connection is watched for the upstream's close. */
            conn_reading(uc, true);
        }
        uc->served++;
        pool_release(rq->client, uc, rq->keepalive);
    } else if (!rq->write_failed && !stray) {
        conn_end(uc); /* the upstream's close, or its "Connection: close" */
    } else {
        conn_free(uc);
    }
    req_free(rq);
    cb->on_done(arg);
}

/*
 * Feeds 'n' bytes just read to the parser; '*stray' tells whether bytes
 * followed the end of the response.
 */
static enum resparse_status
feed(struct upstream_req *rq, const char *p, size_t n, bool *stray)
{
    size_t used = 0;
    enum resparse_status st;

    /* A byte came back: the request reached the upstream. */
    rq->resend = NULL;
    st = resparse_feed(rq->conn->parser, p, n, &used);
    *stray = used < n;
    return st;
}

/*
 * Acts on the parser's verdict: a complete response ends the request, a
 * malformed one fails it ('closed': the connection ended first, so the
 * error is UPSTREAM_CLOSED). Body bytes parsed before either reach the
 * caller first.
 */
static void
settle(struct upstream_req *rq, enum resparse_status st, bool closed,
       bool stray)
{
    switch (st) {
    case RESPARSE_MORE:
        if (!deliver_body(rq) || rq->state != REQ_BODY) {
            return;
        }
        if (rq->cb->on_read_end != NULL) {
            rq->in_callback = true;
            rq->cb->on_read_end(rq->arg);
            rq->in_callback = false;
            if (rq->cancelled) {
                req_free(rq);
                return;
            }
        }
        if (!rq->paused) {
            /* The body's clock starts again with every read. */
            evtimer_add(rq->conn->timer, &rq->body_tv);
        }
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
        req_complete(rq, rq->keep_alive && !closed, stray);
        return;
    }
}

/* Sends the request again on a new connection; false if it cannot. */
static bool
retry(struct upstream_req *rq)
{
    struct uconn *old = rq->conn,
                 *uc = conn_new(rq->client, old->pool, rq->tls);
    struct evbuffer *out;

    if (uc == NULL) {
        return false;
    }
    rq->conn = NULL;
    conn_free(old);
    out = bufferevent_get_output(uc->bev);
    evbuffer_add(out, rq->resend, rq->resend_len);
    rq->resend = NULL;
    resparse_reset(uc->parser, rq->head_request);
    start_on(rq, uc, false);
    return true;
}

/*
 * A TLS connection failed before its handshake was done: a connect
 * failure as over plain TCP, or a TLS one. A certificate that does not
 * verify is logged here, once per pool until one verifies again; the
 * proxy answers 502 without a log line of its own.
 */
static void
tls_failed(struct upstream_req *rq, struct bufferevent *bev, int err)
{
    struct pool *pl = rq->conn->pool;
    char why[300], detail[360];

    switch (tls_client_failure(bev, why, sizeof(why))) {
    case TLS_FAILED_CONNECT:
        snprintf(detail, sizeof(detail), "cannot connect: %s",
                 evutil_socket_error_to_string(err));
        req_fail(rq, UPSTREAM_CONNECT, detail);
        return;
    case TLS_FAILED_VERIFY:
        tls_count(TLS_SIDE_UPSTREAM, TLS_VERIFY_FAILED);
        if (!pl->tls_warned) {
            pl->tls_warned = true;
            log_warn("upstream: https://%s:%u: %s (logged once until it "
                     "verifies)",
                     pl->host, pl->port, why);
        }
        req_fail(rq, UPSTREAM_TLS_VERIFY, why);
        return;
    case TLS_FAILED_HANDSHAKE:
        tls_count(TLS_SIDE_UPSTREAM, TLS_FAILED);
        req_fail(rq, UPSTREAM_TLS, why);
        return;
    }
}

static void
on_conn_event(struct bufferevent *bev, short what, void *arg)
{
    struct upstream_req *rq = arg;
    char detail[160], why[120];
    int err = EVUTIL_SOCKET_ERROR();

    if (what & BEV_EVENT_CONNECTED) {
        uint64_t spent = (uint64_t)(clock_mono_ms() - rq->t0);

        rq->conn->connected = true;
        if (rq->conn->tls) {
            int one = 1;

            /* A head and a body are two TLS records, two send()s: the
             * second must not wait for a delayed ACK (clientconn.c). */
            setsockopt(bufferevent_getfd(bev), IPPROTO_TCP, TCP_NODELAY, &one,
                       sizeof(one));
            tls_count(TLS_SIDE_UPSTREAM, TLS_OK);
            rq->conn->pool->tls_warned = false;
            if (!rq->paused) {
                bufferevent_enable(bev, EV_READ);
            }
        } else {
            rq->conn->rd =
                event_new(rq->client->base, bufferevent_getfd(bev),
                          EV_READ | EV_PERSIST, on_readable, rq->conn);
            event_add(rq->conn->rd, NULL);
        }
        rq->state = REQ_WAITING;
        arm_timer(rq, rq->response_timeout_ms > spent
                          ? rq->response_timeout_ms - spent
                          : 0);
        return;
    }
    if (rq->state == REQ_CONNECTING) {
        int dns = bufferevent_socket_get_dns_error(bev);

        if (dns == 0 && rq->conn->tls) {
            tls_failed(rq, bev, err);
            return;
        }
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
    if (rq->conn->tls && (what & BEV_EVENT_EOF)) {
        /* Whatever came before the end is read first. */
        rq->conn->eof = true;
        on_tls_read(bev, rq);
        return;
    }
    if (rq->resend != NULL && (what & BEV_EVENT_ERROR) && retry(rq)) {
        return;
    }
    /* OpenSSL's bufferevent stops reading too after a failed write. */
    if (!rq->conn->tls && (what & BEV_EVENT_WRITING) &&
        (what & BEV_EVENT_ERROR)) {
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
    /* Over TLS errno may say nothing of it ("Success"). */
    snprintf(detail, sizeof(detail), "connection error: %s",
             rq->conn->tls && tls_client_error(bev, why, sizeof(why))
                 ? why
                 : evutil_socket_error_to_string(err));
    req_fail(rq, UPSTREAM_CLOSED, detail);
}

/*
 * The socket has bytes, an end or an error: for the request on it, or
 * for an idle connection, which is then dropped. Nothing of 'uc' is
 * touched once the request has been told: it may be gone.
 */
static void
on_readable(evutil_socket_t fd, short what, void *arg)
{
    struct uconn *uc = arg;
    struct upstream_req *rq = uc->req;
    char buf[READ_CHUNK], detail[160];
    ssize_t n;
    bool stray;

    (void)what;
    do {
        n = recv(fd, buf, sizeof(buf), 0);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return;
    }
    if (rq == NULL) {
        idle_drop(uc);
        return;
    }
    if (n > 0) {
        enum resparse_status st = feed(rq, buf, (size_t)n, &stray);

        settle(rq, st, false, stray);
        return;
    }
    if (rq->resend != NULL && retry(rq)) {
        return;
    }
    if (n == 0) {
        settle(rq, resparse_eof(uc->parser), true, false);
        return;
    }
    snprintf(detail, sizeof(detail), "connection error: %s",
             evutil_socket_error_to_string(errno));
    req_fail(rq, UPSTREAM_CLOSED, detail);
}

/*
 * TLS: the bufferevent has read (or the upstream has ended the
 * connection): what it holds goes to the parser, as on_readable() gives
 * it, until the request ends or pauses. The connection, and the request,
 * may be gone after any step.
 */
static void
on_tls_read(struct bufferevent *bev, void *arg)
{
    struct upstream_req *rq = arg;
    struct uconn *uc = rq->conn;
    struct evbuffer *in = bufferevent_get_input(bev);
    bool alive = true;

    if (uc == NULL || uc->req != rq) {
        return;
    }
    uc->alive = &alive;
    while (alive && uc->req == rq && !rq->paused &&
           evbuffer_get_length(in) > 0) {
        char buf[READ_CHUNK];
        int n = evbuffer_remove(in, buf, sizeof(buf));
        enum resparse_status st;
        bool stray;

        st = feed(rq, buf, (size_t)n, &stray);
        settle(rq, st, false, stray || evbuffer_get_length(in) > 0);
    }
    if (!alive) {
        return;
    }
    uc->alive = NULL;
    if (uc->req != rq || rq->paused || !uc->eof ||
        evbuffer_get_length(in) > 0) {
        return;
    }
    if (rq->resend != NULL && retry(rq)) {
        return;
    }
    settle(rq, resparse_eof(uc->parser), true, false);
}

/* TLS: an idle connection that the upstream sends anything on is dropped. */
static void
on_tls_idle_read(struct bufferevent *bev, void *arg)
{
    (void)bev;
    idle_drop(arg);
}

static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct uconn *uc = arg;
    struct upstream_req *rq = uc->req;
    char detail[128];

    (void)fd;
    (void)what;
    if (rq == NULL) {
        /* Idle in its pool past the idle timeout. */
        idle_drop(uc);
        return;
    }
    if (rq->state == REQ_BODY) {
        req_fail(rq, UPSTREAM_TIMEOUT, "no body bytes within the timeout");
        return;
    }
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
