#include "clientconn.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>

#include "acceptrest.h"
#include "clock.h"
#include "evreq.h"
#include "log.h"
#include "metrics.h"
#include "problem.h"
#include "tls.h"
#include "xmalloc.h"

/* One "full" log line per this many ms at most. */
#define FULL_LOG_EVERY_MS 60000
/* Segments of a buffer looked at per peek. */
#define SCAN_VECS 8
/*
 * Input held at most for a connection while its request is answered: the
 * start of a pipelined next request fits; a flood stops being read.
 */
#define ANSWERING_INPUT_MAX (64 * 1024)
/*
 * How often the connection of a client that sent more than is read (while
 * its request waits, or past ANSWERING_INPUT_MAX during the answer) is
 * asked whether the client is still there (on_leave_poll()).
 */
#define LEAVE_POLL_MS 100
/*
 * A socket the gateway closed is read, and what comes discarded, until
 * the client closes its side or this long has passed (nginx's
 * lingering_timeout, by default).
 */
#define LINGER_MS 5000
/* Alignment of the leave watch stored after a record (any object's). */
#define EVENT_ALIGN _Alignof(max_align_t)

enum conn_state {
    CONN_WAITING,   /* no byte of the next request yet */
    CONN_HEAD,      /* reading a request head; the deadline runs */
    CONN_BODY,      /* head read; evhttp reads the body, if any */
    CONN_ANSWERING, /* handed to the server; the reply is not done */
    CONN_REFUSING,  /* a CONNECT: answered here, then closed; nothing
                       more is read (refuse_tunnel()) */
};

/* What a scan of request bytes found. */
enum scan_result {
    SCAN_MORE,     /* the head goes on past them */
    SCAN_HEAD_END, /* the end of the head */
    SCAN_TUNNEL,   /* a request line with the method CONNECT */
};

/* Whether the socket lingers when evhttp closes it (linger_begin()). */
enum linger_wish {
    LINGER_IF_SENDING, /* if the client may still be sending */
    LINGER_ALWAYS,     /* its request was refused (clientconn_linger()) */
    LINGER_NEVER,      /* cut by the head deadline: nothing was answered */
};

/* What the leave watch ('leave' of a record) is assigned as. */
enum leave_kind {
    LEAVE_UNSET, /* nothing yet */
    LEAVE_READ,  /* the read watch (on_leave_ready()) */
    LEAVE_POLL,  /* the poll timer: the client sent more than is read
                    (leave_poll()) */
};

struct clientconn {
    struct clientconns *cs;            /* the owner */
    struct bufferevent *bev;           /* evhttp's; also ours while pending */
    struct evhttp_connection *evcon;   /* evhttp's; NULL while pending */
    struct evbuffer_cb_entry *reading; /* our callback on bev's input */
    struct event *deadline;            /* the head deadline, or NULL */
    bool deadline_armed;               /* 'deadline' is added */
    bool stream_tv;                    /* only writes are timed, until the
                                          reply is done */
    struct evhttp_request *req;        /* being answered, or NULL */
    evutil_socket_t fd;                /* index in cs->by_fd, or -1 */
    enum conn_state state;             /* where its current request is */
    size_t line_bytes;                 /* head scan: bytes of the line so far */
    bool line_cr;                      /* head scan: its last byte is CR */
    bool seen_line;                    /* head scan: request line seen */
    bool head_nul;                     /* head scan: a NUL byte in it */
    bool lingering;                    /* its socket went to a lingerer */
    enum linger_wish linger;           /* at the close */
    uint64_t head_bytes;               /* head scan: its lines so far, line
                                          ends included */
    bool pending;                      /* not attached to its evcon yet */
    char method[8];                    /* head scan: the request line's
                                          first bytes, up to 8 */
    struct event *refuse;              /* answers a CONNECT, or NULL */
    bool tls;                          /* speaks TLS */
    bool cut;                          /* clientconn_cut(): no close_notify */
    bool watching_reads;               /* tls_server_watch_reads() is on */
    struct evhttp_request *tail_req;   /* clientconn_end_reply(): its
                                          reply to end, or NULL */
    struct event *tail_timer;          /* ends it a loop turn on, or NULL */
    struct evbuffer_cb_entry *tail_cb; /* on the output: drained, or NULL */
    clientconn_close_cb watch;         /* told of the close, or NULL */
    void *watch_arg;                   /* for 'watch' */
    struct event *leave;               /* the leave watch (see
                                          clientconn_watch_leave()), stored
                                          after the record, in its
                                          allocation; set up on first use */
    enum leave_kind leave_kind;        /* what 'leave' is assigned as */
    bool leave_armed;                  /* 'leave' is added */
    bool leave_skip;                   /* its next firing may be for bytes
                                          evhttp has read since: ignore it */
    clientconn_leave_cb leave_cb;      /* told of a leave, or NULL */
    void *leave_arg;                   /* for 'leave_cb' */
    struct clientconn *prev, *next;    /* in cs->all */
    struct clientconn *next_pending;   /* in cs->pending */
};

/*
 * A closed connection's socket, still read (linger_begin()): the client
 * may be sending when the gateway closes (a body after its 413, a
 * pipelined request after a refusal), and a close with bytes unread
 * would answer them with a reset, which can erase the reply before the
 * client reads it (RFC 9112 9.6).
 */
struct lingerer {
    struct clientconns *cs;       /* the owner */
    evutil_socket_t fd;           /* the connection's socket, which evhttp
                                     has shut for writing; owned */
    struct event *ev;             /* reads 'fd' */
    int64_t until_ms;             /* closed at the latest then */
    struct lingerer *prev, *next; /* in cs->lingering */
};

struct clientconns {
    struct event_base *base;       /* borrowed */
    struct evhttp *http;           /* borrowed */
    struct evconnlistener *lev;    /* borrowed; NULL once forgotten */
    struct metrics_shard *metrics; /* borrowed, or NULL */
    struct clientconns_conf conf;  /* in force */
    struct tls_server *tls;        /* new connections' TLS, or NULL;
                                      borrowed */
    struct timeval client_tv;      /* conf.client_timeout_ms */
    struct timeval header_tv;      /* conf.header_timeout_ms, as a common
                                      timeout of 'base' when possible */
    struct clientconn *all;        /* every open connection; owned */
    size_t n;                      /* length of 'all' */
    struct clientconn *pending;    /* accepted, not attached yet */
    struct event *attach;          /* attaches 'pending' from the loop */
    struct clientconn **by_fd;     /* attached records by descriptor */
    size_t nby_fd;                 /* slots in 'by_fd' */
    struct clientconn *closing;    /* being closed by conn_close() */
    bool listening;                /* the listener is enabled */
    struct clientconns *twin;      /* the worker's other listener's
                                      set, whose connections count
                                      against the same share, or NULL;
                                      borrowed */
    bool full;                     /* open_count() >= max_connections */
    struct acceptrest *rest;       /* pauses 'lev' after a failed
                                      accept() (a connection closing
                                      ends the pause early); owned, or
                                      NULL with no listener */
    int64_t full_logged_ms;        /* last "full" log line, or 0 */
    struct lingerer *lingering;    /* closed sockets still read; owned */
    size_t nlingering;             /* length of 'lingering' */
};

static void conn_closed(struct clientconn *cc);
static void linger_begin(struct clientconn *cc);

/* ---- the listener ---- */

static void
listener_apply(struct clientconns *cs)
{
    bool want = !cs->full && !acceptrest_resting(cs->rest);

    if (cs->lev == NULL || want == cs->listening) {
        return;
    }
    if (want) {
        evconnlistener_enable(cs->lev);
    } else {
        evconnlistener_disable(cs->lev);
    }
    cs->listening = want;
}

/* The worker's connections on this listener and on its twin. */
static size_t
open_count(const struct clientconns *cs)
{
    size_t n = cs->n + cs->nlingering;

    if (cs->twin != NULL) {
        n += cs->twin->n + cs->twin->nlingering;
    }
    return n;
}

static void
update_full(struct clientconns *cs)
{
    size_t n = open_count(cs);
    bool full = n >= cs->conf.max_connections;

    if (full && !cs->full && cs->lev != NULL) {
        int64_t now = clock_mono_ms();

        if (cs->full_logged_ms == 0 ||
            now - cs->full_logged_ms >= FULL_LOG_EVERY_MS) {
            log_warn("clientconn: %zu connections open, "
                     "server.max_connections reached in this worker: new "
                     "connections wait in the listen backlog",
                     n);
            cs->full_logged_ms = now;
        }
    }
    cs->full = full;
    listener_apply(cs);
}

/* A connection opened or closed: both listeners of the worker see it. */
static void
count_changed(struct clientconns *cs)
{
    update_full(cs);
    if (cs->twin != NULL) {
        update_full(cs->twin);
    }
}

void
clientconns_pair(struct clientconns *a, struct clientconns *b)
{
    a->twin = b;
    b->twin = a;
    count_changed(a);
}

static void
on_rest_changed(void *arg)
{
    listener_apply(arg);
}

static size_t
rest_open(void *arg)
{
    return ((struct clientconns *)arg)->n;
}

static const struct acceptrest_ops rest_ops = {on_rest_changed, rest_open};

/* ---- records ---- */

static void on_input(struct evbuffer *buf, const struct evbuffer_cb_info *info,
                     void *arg);

static struct clientconn *
record_new(struct clientconns *cs, struct bufferevent *bev)
{
    /* The leave watch's event lives in the same allocation. */
    size_t size = (sizeof(struct clientconn) + EVENT_ALIGN - 1) / EVENT_ALIGN *
                  EVENT_ALIGN;
    struct clientconn *cc = xcalloc(1, size + event_get_struct_event_size());

    cc->leave = (struct event *)((char *)cc + size);
    cc->cs = cs;
    cc->bev = bev;
    cc->fd = -1;
    cc->state = CONN_WAITING;
    cc->reading = evbuffer_add_cb(bufferevent_get_input(bev), on_input, cc);
    cc->next = cs->all;
    if (cs->all != NULL) {
        cs->all->prev = cc;
    }
    cs->all = cc;
    cs->n++;
    if (cs->metrics != NULL) {
        metrics_add(cs->metrics, M_CONNECTIONS, NULL, 1);
    }
    count_changed(cs);
    return cc;
}

static void
unlink_pending(struct clientconn *cc)
{
    struct clientconn **pp = &cc->cs->pending;

    while (*pp != cc) {
        pp = &(*pp)->next_pending;
    }
    *pp = cc->next_pending;
    cc->next_pending = NULL;
    cc->pending = false;
    /* The reference bevcb took; evhttp holds its own while it lives. */
    bufferevent_decref(cc->bev);
}

/* Forgets 'cc' without a word to anyone: no watcher, no evhttp call. */
static void
record_free(struct clientconn *cc)
{
    struct clientconns *cs = cc->cs;

    if (cs->closing == cc) {
        cs->closing = NULL;
    }
    if (cc->reading != NULL) {
        evbuffer_remove_cb_entry(bufferevent_get_input(cc->bev), cc->reading);
        if (cc->watching_reads) {
            /* The bufferevent is still there (its input was). */
            tls_server_watch_reads(cc->bev, NULL, NULL);
        }
    }
    if (cc->deadline != NULL) {
        event_free(cc->deadline);
    }
    if (cc->leave_armed) {
        event_del(cc->leave);
    }
    if (cc->tail_timer != NULL) {
        event_free(cc->tail_timer);
    }
    if (cc->refuse != NULL) {
        event_free(cc->refuse);
    }
    if (cc->tail_cb != NULL) {
        evbuffer_remove_cb_entry(bufferevent_get_output(cc->bev), cc->tail_cb);
    }
    if (cc->fd >= 0 && (size_t)cc->fd < cs->nby_fd && cs->by_fd[cc->fd] == cc) {
        cs->by_fd[cc->fd] = NULL;
    }
    if (cc->pending) {
        unlink_pending(cc);
    }
    if (cc->prev != NULL) {
        cc->prev->next = cc->next;
    } else {
        cs->all = cc->next;
    }
    if (cc->next != NULL) {
        cc->next->prev = cc->prev;
    }
    cs->n--;
    if (cs->metrics != NULL) {
        metrics_add(cs->metrics, M_CONNECTIONS, NULL, -1);
    }
    if (!cc->lingering) {
        /* A descriptor came free: worth one accept() now. */
        acceptrest_wake(cs->rest);
    }
    free(cc);
    count_changed(cs);
}

/*
 * The client spoke plain HTTP to the TLS listener: it is told so in
 * plain HTTP, as nginx tells it, before the close (whose linger keeps
 * the rest of its request from resetting the answer away).
 */
static void
answer_plain_http(struct clientconn *cc)
{
    evutil_socket_t fd = bufferevent_getfd(cc->bev);
    char *body = problem_json(400, problem_reason(400),
                              "a plain HTTP request to the TLS listener: "
                              "use https",
                              NULL);
    char head[256];
    int n;

    if (fd >= 0) {
        n = snprintf(head, sizeof(head),
                     "HTTP/1.1 400 %s\r\nContent-Type: %s\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                     problem_reason(400), PROBLEM_CONTENT_TYPE, strlen(body));
        if (n > 0 && (size_t)n < sizeof(head) &&
            send(fd, head, (size_t)n, MSG_NOSIGNAL | MSG_MORE) == n) {
            (void)send(fd, body, strlen(body), MSG_NOSIGNAL);
        }
    }
    free(body);
    cc->linger = LINGER_ALWAYS;
    log_debug("clientconn: plain HTTP on the TLS listener: answered 400");
}

static void
on_close(struct evhttp_connection *evcon, void *arg)
{
    struct clientconn *cc = arg;

    (void)evcon;
    if (cc->tls && tls_server_got_plain_http(cc->bev)) {
        answer_plain_http(cc);
    } else if (cc->tls && !cc->cut && cc->state != CONN_ANSWERING) {
        /* Not in the middle of a reply (evhttp tells the reply's end
         * before it closes after it): that would be a cut. Before the
         * linger's shutdown() and evhttp's free. */
        tls_close_notify(cc->bev);
    }
    linger_begin(cc);
    conn_closed(cc);
}

static void head_begin(struct clientconn *cc);
static void head_scanned(struct clientconn *cc, bool complete);

/*
 * Bytes came on a TLS connection's socket: the handshake's, or a record's
 * that holds nothing decrypted yet. Between requests they start the
 * head's clock, as a plain request's first byte does: a handshake or a
 * record sent a byte at a time is then cut at server.header_timeout, as
 * a plain head would be, where before only client_timeout's idle time
 * applied, which each byte started again.
 */
static void
on_tls_bytes(void *arg)
{
    struct clientconn *cc = arg;

    if (cc->state == CONN_WAITING && cc->evcon != NULL) {
        head_begin(cc);
        head_scanned(cc, false);
    }
}

/* From now on evhttp tells 'cc' when 'evcon' closes. */
static void
attach(struct clientconn *cc, struct evhttp_connection *evcon)
{
    struct clientconns *cs = cc->cs;
    evutil_socket_t fd = bufferevent_getfd(cc->bev);

    cc->evcon = evcon;
    evhttp_connection_set_closecb(evcon, on_close, cc);
    if (cc->pending) {
        unlink_pending(cc);
    }
    if (fd < 0) {
        return;
    }
    if (cc->tls) {
        int one = 1;

        /* OpenSSL writes a reply's head and body as two records, two
         * send()s: with Nagle the second waits for the client's delayed
         * ACK, 40 ms a request (measured: 1,053 req/s). */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        tls_server_watch_reads(cc->bev, on_tls_bytes, cc);
        cc->watching_reads = true;
    }
    if ((size_t)fd >= cs->nby_fd) {
        size_t old = cs->nby_fd;

        cs->by_fd =
            xgrow(cs->by_fd, &cs->nby_fd, (size_t)fd + 1, sizeof(*cs->by_fd));
        memset(cs->by_fd + old, 0, (cs->nby_fd - old) * sizeof(*cs->by_fd));
    }
    if (cs->by_fd[fd] != NULL) {
        /* Its descriptor was closed without a close callback, so its
           bufferevent is gone too, and our callback with it. */
        log_debug("clientconn: descriptor %d reused; dropping a stale "
                  "record",
                  (int)fd);
        cs->by_fd[fd]->reading = NULL;
        record_free(cs->by_fd[fd]);
    }
    cc->fd = fd;
    cs->by_fd[fd] = cc;
}

/*
 * Attaches a pending record, or frees it when evhttp has already freed
 * its connection (bufferevent_free() clears the callbacks).
 */
static struct clientconn *
attach_or_drop(struct clientconn *cc)
{
    bufferevent_event_cb eventcb;
    void *evcon;

    bufferevent_getcb(cc->bev, NULL, NULL, &eventcb, &evcon);
    if (eventcb == NULL || evcon == NULL) {
        /* evhttp dropped the connection, and closed its descriptor
         * itself (evhttp_get_request()): the bufferevent must not close
         * it again, a loop turn later, when the number may be another
         * connection's. (When evhttp drops it for want of memory for its
         * first request, it closes nothing, and the descriptor leaks:
         * better than closing another connection's.) */
        bufferevent_setfd(cc->bev, -1);
        record_free(cc);
        return NULL;
    }
    attach(cc, evcon);
    return cc;
}

static void
on_attach(evutil_socket_t fd, short what, void *arg)
{
    struct clientconns *cs = arg;

    (void)fd;
    (void)what;
    while (cs->pending != NULL) {
        attach_or_drop(cs->pending);
    }
}

/*
 * evhttp asks for the bufferevent of a connection it has just accepted;
 * it creates the evhttp_connection around it right after this returns,
 * so the record is attached to it from the loop, at once.
 */
static struct bufferevent *
on_new_bev(struct event_base *base, void *arg)
{
    struct clientconns *cs = arg;
    struct bufferevent *bev;
    struct clientconn *cc;

    if (cs->tls != NULL) {
        bev = tls_server_bev_new(cs->tls, base);
    } else {
        /* The bufferevent closes the descriptor when freed, and evhttp
         * only shuts it (evhttp_connection_free()): linger_begin() can
         * take it first. */
        bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    }
    acceptrest_accepted(cs->rest);
    if (bev == NULL) {
        return NULL;
    }
    cc = record_new(cs, bev);
    cc->tls = cs->tls != NULL;
    /* Kept alive until attached, even should evhttp free it first. */
    bufferevent_incref(bev);
    cc->pending = true;
    cc->next_pending = cs->pending;
    cs->pending = cc;
    event_active(cs->attach, EV_TIMEOUT, 0);
    return bev;
}

/* ---- the linger of a closed connection ---- */

static void
linger_end(struct lingerer *l)
{
    struct clientconns *cs = l->cs;

    event_free(l->ev);
    evutil_closesocket(l->fd);
    if (l->prev != NULL) {
        l->prev->next = l->next;
    } else {
        cs->lingering = l->next;
    }
    if (l->next != NULL) {
        l->next->prev = l->prev;
    }
    cs->nlingering--;
    free(l);
    acceptrest_wake(cs->rest);
    count_changed(cs);
}

static void
on_linger(evutil_socket_t fd, short what, void *arg)
{
    struct lingerer *l = arg;
    char sink[16384];
    int64_t left = l->until_ms - clock_mono_ms();
    struct timeval tv;
    ssize_t n;

    if ((what & EV_TIMEOUT) || left <= 0) {
        linger_end(l);
        return;
    }
    do {
        n = recv(fd, sink, sizeof(sink), 0);
    } while (n > 0 || (n < 0 && errno == EINTR));
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
        linger_end(l); /* the client closed its side, or reset */
        return;
    }
    tv.tv_sec = left / 1000;
    tv.tv_usec = (left % 1000) * 1000;
    event_add(l->ev, &tv); /* what is left of LINGER_MS, not all of it */
}

/*
 * evhttp is about to close the connection of 'cc'. When the client may
 * still be sending (it was in the middle of a request, as after a 413 at
 * the end of a head; or it sent bytes that were not read, as after a
 * refusal), this takes the socket
 * from the bufferevent (whose events are removed while the descriptor is
 * still open, as the epoll changelist needs), so that freeing the
 * bufferevent does not close it; evhttp then shuts it for writing, which
 * sends what was written and the end of the stream. The socket is read
 * for up to LINGER_MS, what arrives dropped, and closed. A connection
 * closed between requests with nothing unread (an idle timeout, an
 * answer with "Connection: close") is not kept, unless the gateway
 * refused its last request (clientconn_linger()): the body of a request
 * refused for its framing may still be on its way. One cut by the head
 * deadline is not kept either: no answer went to it.
 *
 * On the OpenSSL bufferevent, setting the descriptor to -1 gives it a
 * socket BIO on -1, and its destructor closes the descriptor of that BIO
 * (libevent 2.1.12, be_openssl_destruct()): so it closes nothing.
 */
static void
linger_begin(struct clientconn *cc)
{
    struct clientconns *cs = cc->cs;
    evutil_socket_t fd = bufferevent_getfd(cc->bev);
    struct timeval tv = {LINGER_MS / 1000, (LINGER_MS % 1000) * 1000};
    struct lingerer *l;
    char c;
    ssize_t n;

    if (fd < 0) {
        return;
    }
    n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
        return; /* the client has closed its side, or reset */
    }
    if (cc->linger == LINGER_NEVER ||
        (n < 0 && cc->linger == LINGER_IF_SENDING &&
         evbuffer_get_length(bufferevent_get_input(cc->bev)) == 0 &&
         (cc->state == CONN_WAITING || cc->state == CONN_ANSWERING))) {
        return; /* between requests, nothing sent past the last: idle */
    }
    bufferevent_disable(cc->bev, EV_READ | EV_WRITE);
    bufferevent_setfd(cc->bev, -1);
    cc->lingering = true;
    l = xcalloc(1, sizeof(*l));
    l->fd = fd;
    l->cs = cs;
    l->until_ms = clock_mono_ms() + LINGER_MS;
    l->ev = event_new(cs->base, l->fd, EV_READ | EV_PERSIST, on_linger, l);
    event_add(l->ev, &tv);
    l->next = cs->lingering;
    if (l->next != NULL) {
        l->next->prev = l;
    }
    cs->lingering = l;
    cs->nlingering++;
    /* Counted by record_free(), which follows: the connection it was
     * goes from the count as the lingerer comes in. */
}

/* ---- connections ---- */

/*
 * The connection is closing (evhttp's close callback, or conn_close()):
 * tell the watcher, then forget it.
 */
static void
conn_closed(struct clientconn *cc)
{
    clientconn_close_cb cb = cc->watch;
    void *arg = cc->watch_arg;

    if (cc->evcon != NULL) {
        evhttp_connection_set_closecb(cc->evcon, NULL, NULL);
    }
    cc->watch = NULL;
    cc->watch_arg = NULL;
    if (cb != NULL) {
        cb(cc, arg);
    }
    /*
     * A reply whose end waited (clientconn_end_reply()) on a connection
     * that failed: evhttp has detached its request, as it does any
     * request whose reply has begun and not ended, and left it to be
     * ended, which frees it. One still attached goes with the connection.
     */
    if (cc->tail_req != NULL &&
        evhttp_request_get_connection(cc->tail_req) == NULL) {
        struct evhttp_request *req = cc->tail_req;

        cc->tail_req = NULL;
        evhttp_send_reply_end(req);
    }
    record_free(cc);
}

/* Closes the connection of an attached record; 'cc' is gone after. */
static void
conn_close(struct clientconn *cc)
{
    struct clientconns *cs = cc->cs;
    struct evhttp_connection *evcon = cc->evcon;

    cs->closing = cc;
    evhttp_connection_free(evcon); /* calls on_close, which frees 'cc' */
    if (cs->closing != NULL) {
        /* evhttp skips the close callback of a connection it thinks
           unconnected; not seen with server connections, but never
           leave the record behind. */
        cs->closing = NULL;
        cc->evcon = NULL;
        cc->reading = NULL;  /* went with the bufferevent */
        cc->tail_req = NULL; /* went with the connection */
        conn_closed(cc);
    }
}

/* ---- the head deadline ---- */

static void
on_deadline(evutil_socket_t fd, short what, void *arg)
{
    struct clientconn *cc = arg;
    char *addr = NULL;
    ev_uint16_t port = 0;

    (void)fd;
    (void)what;
    cc->deadline_armed = false;
    if (cc->state != CONN_HEAD || cc->evcon == NULL) {
        return;
    }
    evhttp_connection_get_peer(cc->evcon, &addr, &port);
    log_debug("clientconn: %s:%u: request head not complete within "
              "server.header_timeout (%llu ms); closing",
              addr != NULL ? addr : "?", (unsigned)port,
              (unsigned long long)cc->cs->conf.header_timeout_ms);
    cc->linger = LINGER_NEVER;
    conn_close(cc);
}

static void
head_begin(struct clientconn *cc)
{
    cc->state = CONN_HEAD;
    cc->line_bytes = 0;
    cc->line_cr = false;
    cc->seen_line = false;
    cc->head_nul = false;
    cc->head_bytes = 0;
    cc->linger = LINGER_IF_SENDING;
}

static void
deadline_disarm(struct clientconn *cc)
{
    if (cc->deadline_armed) {
        evtimer_del(cc->deadline);
        cc->deadline_armed = false;
    }
}

/* ---- the leave watch ---- */

static void on_leave_ready(evutil_socket_t fd, short what, void *arg);

static void leave_disarm(struct clientconn *cc);

static void
leave_arm(struct clientconn *cc)
{
    if (cc->leave_kind != LEAVE_READ) {
        /* First use, or back to the read watch after a pipelined request. */
        evutil_socket_t fd = bufferevent_getfd(cc->bev);

        leave_disarm(cc);
        if (fd < 0) {
            return;
        }
        event_assign(cc->leave, cc->cs->base, fd, EV_READ | EV_PERSIST,
                     on_leave_ready, cc);
        cc->leave_kind = LEAVE_READ;
    }
    if (cc->leave_armed) {
        return;
    }
    event_add(cc->leave, NULL);
    cc->leave_armed = true;
}

static void
leave_disarm(struct clientconn *cc)
{
    if (cc->leave_armed) {
        event_del(cc->leave);
        cc->leave_armed = false;
    }
}

/* The client is gone: 'cb' is told, once. */
static void
leave_seen(struct clientconn *cc)
{
    clientconn_leave_cb cb = cc->leave_cb;
    void *cb_arg = cc->leave_arg;

    leave_disarm(cc);
    cc->leave_cb = NULL;
    cc->leave_arg = NULL;
    cb(cc, cb_arg); /* may close the connection, and free 'cc' */
}

/*
 * The poll of a connection that no event of the loop watches (see
 * leave_poll()): the kernel's view of it, every LEAVE_POLL_MS.
 * Established is still there; a FIN (close-wait) or a reset (closed) is
 * the client gone. While its request waits, 'leave_cb' is told; once the
 * reply has begun, the connection is closed, as evhttp closes it when it
 * reads the end itself.
 */
static void
on_leave_poll(evutil_socket_t fd, short what, void *arg)
{
    struct clientconn *cc = arg;
    struct timeval tv = clock_tv(LEAVE_POLL_MS);
    struct tcp_info ti;
    socklen_t len = sizeof(ti);

    (void)fd;
    (void)what;
    cc->leave_armed = false;
    if (cc->leave_cb == NULL && (cc->state != CONN_ANSWERING ||
                                 evbuffer_get_length(bufferevent_get_input(
                                     cc->bev)) < ANSWERING_INPUT_MAX)) {
        /* The reply has begun and evhttp reads the client again, or the
         * answer is done: the next head arms the read watch. */
        return;
    }
    fd = bufferevent_getfd(cc->bev);
    if (fd >= 0 && getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 &&
        ti.tcpi_state == TCP_ESTABLISHED) {
        evtimer_add(cc->leave, &tv);
        cc->leave_armed = true;
        return;
    }
    if (cc->leave_cb != NULL) {
        leave_seen(cc);
        return;
    }
    log_debug("clientconn: the client of descriptor %d left during its "
              "answer; closing",
              (int)fd);
    conn_close(cc); /* frees 'cc' */
}

/*
 * The descriptor has no event of its own left that would see the client
 * go, and must have none: the client sent more than is read now (while
 * its request waits, or past ANSWERING_INPUT_MAX during the answer), so
 * the socket stays readable, and a read watch would wake every turn.
 * libevent 2.1 reports a socket error (a reset) to read and write events
 * only: an EV_CLOSED watch missed it, and the error woke the loop at
 * every turn. So no event of the descriptor stays, and a timer asks the
 * kernel instead (on_leave_poll()), until the next head arms the read
 * watch again.
 */
static void
leave_poll(struct clientconn *cc)
{
    struct timeval tv = clock_tv(LEAVE_POLL_MS);

    if (cc->leave_kind == LEAVE_POLL && cc->leave_armed) {
        return;
    }
    leave_disarm(cc);
    event_assign(cc->leave, cc->cs->base, -1, 0, on_leave_poll, cc);
    cc->leave_kind = LEAVE_POLL;
    evtimer_add(cc->leave, &tv);
    cc->leave_armed = true;
}

/*
 * The socket is readable. With no watcher, evhttp reads it itself (the
 * next request, a request body) and this is a no-op: the watch stays
 * armed from one request to the next, so that neither it nor the
 * descriptor's registration changes per request. It goes when nothing
 * would read the socket (readiness would then repeat every loop turn), or
 * while an answer is written (evhttp may have stopped reading at the input
 * bound); the next head arms it again.
 */
static void
on_leave_ready(evutil_socket_t fd, short what, void *arg)
{
    struct clientconn *cc = arg;
    bool skip = cc->leave_skip;
    char byte;
    ssize_t n;

    (void)what;
    cc->leave_skip = false;
    if (cc->leave_cb == NULL) {
        if (cc->state == CONN_ANSWERING ||
            (bufferevent_get_enabled(cc->bev) & EV_READ) == 0) {
            leave_disarm(cc);
        }
        return;
    }
    if (skip) {
        /*
         * Likely the readiness that brought the request, reported in the
         * loop turn the request was read, after evhttp's read: a peek
         * would find nothing. A leave shows again next turn.
         */
        return;
    }
    n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) {
        /* The client sent more while it waits: a pipelined request (over
         * TLS, any record: a close_notify is one too), which evhttp reads
         * once this answer is done. */
        leave_poll(cc);
        return;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        return;
    }
    /* End of file or an error: the client is gone. */
    leave_seen(cc);
}

/*
 * The end of a head: evhttp stops reading when it hands the request over,
 * in this loop turn or a later one (after a body). Armed first, the watch
 * keeps the descriptor's registration for reading as it is: no epoll_ctl.
 */
static void
head_end(struct clientconn *cc)
{
    cc->state = CONN_BODY;
    deadline_disarm(cc);
    leave_arm(cc);
    cc->leave_skip = true;
}

/*
 * After a scan of the bytes in: the end of the head, or the deadline of a
 * head that goes on past them. It is armed by the scan of the head's first
 * bytes, in the loop turn they came in; a head that arrives whole, as
 * most do, never needs the timer.
 */
static void
head_scanned(struct clientconn *cc, bool complete)
{
    if (complete) {
        head_end(cc);
        return;
    }
    if (!cc->deadline_armed) {
        if (cc->deadline == NULL) {
            cc->deadline = evtimer_new(cc->cs->base, on_deadline, cc);
        }
        evtimer_add(cc->deadline, &cc->cs->header_tv);
        cc->deadline_armed = true;
    }
}

/* The method of a request line as evhttp reads it: up to the first
 * space, compared as it is. */
#define TUNNEL_METHOD "CONNECT "

/*
 * Reads 'n' more bytes of a request head the way evhttp does
 * (evbuffer_readln with EVBUFFER_EOL_CRLF): a line ends at LF, a CR just
 * before it is not part of the line, and an empty line after the request
 * line ends the head. Keeps the request line's first bytes, to tell a
 * CONNECT as soon as its method has come.
 */
static enum scan_result
scan_bytes(struct clientconn *cc, const char *p, size_t n)
{
    _Static_assert(sizeof(TUNNEL_METHOD) - 1 == sizeof(cc->method),
                   "the method buffer holds CONNECT and its space");
    while (n > 0) {
        const char *lf = memchr(p, '\n', n);
        size_t k = lf != NULL ? (size_t)(lf - p) : n;
        bool empty;

        if (k > 0) {
            /* evhttp keeps values as C strings: a NUL would cut one. */
            if (memchr(p, '\0', k) != NULL) {
                cc->head_nul = true;
            }
            if (!cc->seen_line && cc->line_bytes < sizeof(cc->method)) {
                size_t room = sizeof(cc->method) - cc->line_bytes;

                memcpy(cc->method + cc->line_bytes, p, k < room ? k : room);
                if (cc->line_bytes + k >= sizeof(cc->method) &&
                    memcmp(cc->method, TUNNEL_METHOD, sizeof(cc->method)) ==
                        0) {
                    return SCAN_TUNNEL;
                }
            }
            cc->line_bytes += k;
            cc->line_cr = p[k - 1] == '\r';
        }
        if (lf == NULL) {
            return SCAN_MORE;
        }
        empty = cc->line_bytes == 0 || (cc->line_bytes == 1 && cc->line_cr);
        p = lf + 1;
        n -= k + 1;
        if (empty && cc->seen_line) {
            cc->line_bytes = 0;
            cc->line_cr = false;
            return SCAN_HEAD_END;
        }
        cc->head_bytes += cc->line_bytes + 1;
        cc->line_bytes = 0;
        cc->line_cr = false;
        /* An empty request line: evhttp refuses it with a 400. */
        cc->seen_line = true;
    }
    return SCAN_MORE;
}

/* Scans 'buf' from offset 'from' to its end, or to what ends the scan. */
static enum scan_result
scan_buffer(struct clientconn *cc, struct evbuffer *buf, size_t from)
{
    size_t end = evbuffer_get_length(buf);

    while (from < end) {
        struct evbuffer_iovec v[SCAN_VECS];
        struct evbuffer_ptr pos;
        int n;

        if (evbuffer_ptr_set(buf, &pos, from, EVBUFFER_PTR_SET) < 0) {
            return SCAN_MORE;
        }
        n = evbuffer_peek(buf, (ev_ssize_t)(end - from), &pos, v, SCAN_VECS);
        if (n <= 0) {
            return SCAN_MORE;
        }
        for (int i = 0; i < n && i < SCAN_VECS && from < end; i++) {
            size_t k = v[i].iov_len < end - from ? v[i].iov_len : end - from;
            enum scan_result r = scan_bytes(cc, v[i].iov_base, k);

            if (r != SCAN_MORE) {
                return r;
            }
            from += k;
        }
    }
    return SCAN_MORE;
}

/* ---- CONNECT ---- */

/* The answer is written, or the connection failed: close it. */
static void
on_refusal_written(struct bufferevent *bev, void *arg)
{
    (void)bev;
    conn_close(arg);
}

static void
on_refusal_failed(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    (void)what;
    conn_close(arg);
}

/*
 * Takes the connection from evhttp, which waits for a request head that
 * never comes (its input stays empty), and writes the 501 itself; the
 * connection closes once it is written, or fails.
 */
static void
on_refuse(evutil_socket_t fd, short what, void *arg)
{
    struct clientconn *cc = arg;
    char *body = problem_json(501, problem_reason(501),
                              "CONNECT: the gateway makes no tunnels", NULL);

    (void)fd;
    (void)what;
    log_debug("clientconn: refused a CONNECT");
    bufferevent_setcb(cc->bev, NULL, on_refusal_written, on_refusal_failed, cc);
    evbuffer_add_printf(bufferevent_get_output(cc->bev),
                        "HTTP/1.1 501 %s\r\nContent-Type: %s\r\n"
                        "Content-Length: %zu\r\nDate: %s\r\n"
                        "Connection: close\r\n\r\n%s",
                        problem_reason(501), PROBLEM_CONTENT_TYPE, strlen(body),
                        evreq_date_now(), body);
    free(body);
    bufferevent_enable(cc->bev, EV_READ | EV_WRITE);
}

/*
 * A request line with the method CONNECT: from here on every byte that
 * comes in is dropped, so evhttp reads nothing of it nor of what follows,
 * and the answer is made in the next step of this loop pass (on_refuse()),
 * out of the read callback this runs in.
 */
static void
refuse_tunnel(struct clientconn *cc, struct evbuffer *in)
{
    cc->state = CONN_REFUSING;
    deadline_disarm(cc);
    leave_disarm(cc);
    evbuffer_drain(in, evbuffer_get_length(in));
    if (cc->refuse == NULL) {
        cc->refuse = event_new(cc->cs->base, -1, 0, on_refuse, cc);
    }
    event_active(cc->refuse, EV_TIMEOUT, 0);
}

/* Bytes came in (or were consumed) on a connection's input buffer. */
static void
on_input(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    struct clientconn *cc = arg;
    size_t len = evbuffer_get_length(buf);
    enum scan_result r;

    if (info->n_added == 0) {
        return;
    }
    if (cc->state == CONN_REFUSING) {
        evbuffer_drain(buf, len);
        return;
    }
    if (cc->state == CONN_ANSWERING && len >= ANSWERING_INPUT_MAX) {
        /* evhttp stops reading at the bound: nothing else would see the
         * client go while the reply waits for the upstream. */
        leave_poll(cc);
        return;
    }
    if (cc->state != CONN_WAITING && cc->state != CONN_HEAD) {
        return;
    }
    if (cc->pending && attach_or_drop(cc) == NULL) {
        return;
    }
    if (cc->state == CONN_WAITING) {
        head_begin(cc);
    }
    /* New bytes go at the end; evhttp takes whole lines from the front. */
    r = scan_buffer(cc, buf, len > info->n_added ? len - info->n_added : 0);
    if (r == SCAN_TUNNEL) {
        refuse_tunnel(cc, buf);
        return;
    }
    head_scanned(cc, r == SCAN_HEAD_END);
}

/* ---- requests ---- */

static void
on_reply_done(struct evhttp_request *req, void *arg)
{
    struct clientconn *cc = arg;
    struct evbuffer *in = bufferevent_get_input(cc->bev);

    (void)req;
    cc->req = NULL;
    /* A plain watch stays for the next request (on_leave_ready()). */
    cc->leave_cb = NULL;
    cc->leave_arg = NULL;
    bufferevent_setwatermark(cc->bev, EV_READ, 0, 0);
    if (cc->tls) {
        /*
         * What a pipelining client sent past the answer's input bound may
         * wait inside OpenSSL (tls_take_pending()): into the input with
         * it, which evhttp reads for the next request once this callback
         * returns. Scanned below, as any input of the answer's time.
         */
        tls_take_pending(cc->bev);
        /*
         * Between requests OpenSSL's bufferevent may stop watching a
         * readable socket (a read that must first write: set_rbow() in
         * libevent 2.1) while reading stays enabled: a watch of ours
         * would then wake every turn. No epoll_ctl: evhttp's read keeps
         * the descriptor's registration as it is.
         */
        leave_disarm(cc);
    }
    if (cc->stream_tv) {
        bufferevent_set_timeouts(cc->bev, &cc->cs->client_tv,
                                 &cc->cs->client_tv);
        cc->stream_tv = false;
    }
    cc->state = CONN_WAITING;
    if (evbuffer_get_length(in) > 0) {
        /* The next request began during the answer: its clock starts. */
        enum scan_result r;

        head_begin(cc);
        r = scan_buffer(cc, in, 0);
        if (r == SCAN_TUNNEL) {
            refuse_tunnel(cc, in);
        } else {
            head_scanned(cc, r == SCAN_HEAD_END);
        }
    }
}

static struct clientconn *
find(struct clientconns *cs, struct evhttp_connection *evcon)
{
    struct bufferevent *bev = evhttp_connection_get_bufferevent(evcon);
    evutil_socket_t fd = bufferevent_getfd(bev);
    struct clientconn *cc;

    if (fd >= 0 && (size_t)fd < cs->nby_fd && cs->by_fd[fd] != NULL &&
        cs->by_fd[fd]->evcon == evcon) {
        return cs->by_fd[fd];
    }
    for (cc = cs->pending; cc != NULL; cc = cc->next_pending) {
        if (cc->bev == bev) {
            attach(cc, evcon);
            return cc;
        }
    }
    /* Never seen (no bufferevent of ours): tracked from now on. */
    cc = record_new(cs, bev);
    cc->tls = cs->tls != NULL;
    attach(cc, evcon);
    return cc;
}

struct clientconn *
clientconns_begin_request(struct clientconns *cs, struct evhttp_request *req)
{
    struct clientconn *cc = find(cs, evhttp_request_get_connection(req));

    deadline_disarm(cc);
    cc->state = CONN_ANSWERING;
    cc->req = req;
    evhttp_request_set_on_complete_cb(req, on_reply_done, cc);
    /*
     * evhttp reads on while it answers (to see the client leave) and
     * never drains what comes: without a bound, a client streaming junk
     * during a long response grew the gateway by hundreds of MiB.
     */
    bufferevent_setwatermark(cc->bev, EV_READ, 0, ANSWERING_INPUT_MAX);
    return cc;
}

void
clientconn_watch(struct clientconn *cc, clientconn_close_cb cb, void *arg)
{
    cc->watch = cb;
    cc->watch_arg = cb != NULL ? arg : NULL;
}

void
clientconn_watch_leave(struct clientconn *cc, clientconn_leave_cb cb, void *arg)
{
    cc->leave_cb = cb;
    cc->leave_arg = cb != NULL ? arg : NULL;
    if (cb != NULL) {
        leave_arm(cc);
    }
    /* The watch stays, for the next request (on_leave_ready()). */
}

void
clientconn_linger(struct clientconn *cc)
{
    cc->linger = LINGER_ALWAYS;
}

bool
clientconn_head_has_nul(const struct clientconn *cc)
{
    return cc->head_nul;
}

uint64_t
clientconn_head_bytes(const struct clientconn *cc)
{
    return cc->head_bytes;
}

void
clientconn_stream_timeouts(struct clientconn *cc)
{
    if (!cc->stream_tv) {
        bufferevent_set_timeouts(cc->bev, NULL, &cc->cs->client_tv);
        cc->stream_tv = true;
    }
}

/* ---- the set ---- */

void
clientconns_configure(struct clientconns *cs,
                      const struct clientconns_conf *conf)
{
    struct timeval tv = clock_tv(conf->header_timeout_ms);
    const struct timeval *common;

    cs->conf = *conf;
    if (cs->conf.max_connections == 0) {
        cs->conf.max_connections = 1;
    }
    cs->client_tv = clock_tv(conf->client_timeout_ms);
    /* Every deadline has the same length: libevent keeps them in a queue
       rather than its heap. */
    common = event_base_init_common_timeout(cs->base, &tv);
    cs->header_tv = common != NULL ? *common : tv;
    count_changed(cs);
}

struct clientconns *
clientconns_new(struct event_base *base, struct evhttp *http,
                struct evconnlistener *lev, struct metrics_shard *metrics,
                const struct clientconns_conf *conf)
{
    struct clientconns *cs = xcalloc(1, sizeof(*cs));

    cs->base = base;
    cs->http = http;
    cs->lev = lev;
    cs->metrics = metrics;
    cs->listening = true;
    cs->attach = event_new(base, -1, 0, on_attach, cs);
    clientconns_configure(cs, conf);
    evhttp_set_bevcb(http, on_new_bev, cs);
    if (lev != NULL) {
        cs->rest =
            acceptrest_new(base, lev, conf->who, conf->where, &rest_ops, cs);
    }
    return cs;
}

static void on_tail_drained(struct evbuffer *buf,
                            const struct evbuffer_cb_info *info, void *arg);

/*
 * The reply's end, a loop turn after the output was last seen empty: by
 * then every write callback that OpenSSL's bufferevent deferred from an
 * earlier write has run, and evhttp's cannot take the end for done while
 * bytes wait.
 */
static void
on_tail_timer(evutil_socket_t fd, short what, void *arg)
{
    struct clientconn *cc = arg;
    struct evbuffer *out = bufferevent_get_output(cc->bev);
    struct evhttp_request *req = cc->tail_req;

    (void)fd;
    (void)what;
    if (evbuffer_get_length(out) > 0) {
        if (cc->tail_cb == NULL) {
            cc->tail_cb = evbuffer_add_cb(out, on_tail_drained, cc);
        }
        return;
    }
    if (cc->tail_cb != NULL) {
        evbuffer_remove_cb_entry(out, cc->tail_cb);
        cc->tail_cb = NULL;
    }
    cc->tail_req = NULL;
    /* May free the connection, and 'cc' with it. */
    evhttp_send_reply_end(req);
}

static void
on_tail_drained(struct evbuffer *buf, const struct evbuffer_cb_info *info,
                void *arg)
{
    struct clientconn *cc = arg;
    struct timeval zero = {0, 0};

    (void)info;
    if (evbuffer_get_length(buf) == 0 && cc->tail_req != NULL) {
        evtimer_add(cc->tail_timer, &zero);
    }
}

void
clientconn_end_reply(struct clientconn *cc, struct evhttp_request *req)
{
    struct timeval zero = {0, 0};

    if (cc->tail_timer == NULL) {
        cc->tail_timer = evtimer_new(cc->cs->base, on_tail_timer, cc);
    }
    cc->tail_req = req;
    evtimer_add(cc->tail_timer, &zero);
}

void *
clientconn_watch_arg(const struct clientconn *cc, clientconn_close_cb cb)
{
    return cc->watch == cb ? cc->watch_arg : NULL;
}

void
clientconns_set_tls(struct clientconns *cs, struct tls_server *tls)
{
    cs->tls = tls;
}

void
clientconn_cut(struct clientconn *cc)
{
    cc->cut = true;
}

bool
clientconn_tls(const struct clientconn *cc)
{
    return cc->tls;
}

void
clientconns_forget_listener(struct clientconns *cs)
{
    if (cs->lev == NULL) {
        return;
    }
    acceptrest_free(cs->rest);
    cs->rest = NULL;
    cs->lev = NULL;
}

void
clientconns_free(struct clientconns *cs)
{
    if (cs == NULL) {
        return;
    }
    if (cs->twin != NULL) {
        cs->twin->twin = NULL;
    }
    clientconns_forget_listener(cs);
    evhttp_set_bevcb(cs->http, NULL, NULL);
    while (cs->all != NULL) {
        struct clientconn *cc = cs->all;

        if (cc->evcon != NULL) {
            evhttp_connection_set_closecb(cc->evcon, NULL, NULL);
        }
        if (cc->req != NULL) {
            evhttp_request_set_on_complete_cb(cc->req, NULL, NULL);
        }
        if (cc->tls && cc->reading != NULL && cc->state == CONN_WAITING) {
            /* Idle between replies: evhttp_free() closes it next, and
             * its close callback, which would say so, is gone. */
            tls_close_notify(cc->bev);
        }
        record_free(cc);
    }
    while (cs->lingering != NULL) {
        linger_end(cs->lingering);
    }
    event_free(cs->attach);
    free(cs->by_fd);
    free(cs);
}

size_t
clientconns_count(const struct clientconns *cs)
{
    return cs->n;
}

bool
clientconns_flushed(const struct clientconns *cs)
{
    for (const struct clientconn *cc = cs->all; cc != NULL; cc = cc->next) {
        /* A reply whose end waits (clientconn_end_reply()) has yet to
         * write its last chunk, and to finish. */
        if (evbuffer_get_length(bufferevent_get_output(cc->bev)) > 0 ||
            cc->tail_req != NULL) {
            return false;
        }
    }
    return true;
}

void
clientconns_close_all(struct clientconns *cs)
{
    on_attach(-1, 0, cs);
    while (cs->all != NULL) {
        conn_close(cs->all);
    }
}
