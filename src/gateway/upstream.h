/*
 * upstream.h - sluice's HTTP/1.1 client to upstream servers, on libevent
 * (a bufferevent connects and writes; reads are one recv() each, straight
 * into the parser; over TLS, libevent's OpenSSL bufferevent does all of
 * the I/O, tls.h): keep-alive pools per worker, host:port and TLS
 * settings, TLS sessions resumed per pool, connect and
 * response timeouts, one retry of an idempotent request on a pooled
 * connection that turned out closed, and strict response parsing
 * (resparse.h). A connection is pooled again only after a response that
 * was complete, well-formed, kept alive, and followed by no stray byte.
 * Does I/O on the worker's event_base; one client per worker, never
 * shared between threads.
 */
#ifndef SLUICE_UPSTREAM_H
#define SLUICE_UPSTREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "headers.h"
#include "resparse.h"

struct event_base;
struct evdns_base;
struct evbuffer;
struct upstream_client; /* opaque; one per worker */
struct upstream_req;    /* opaque; one request in flight */
struct tls_client;

/* One request to send; every pointer borrowed for upstream_send(). */
struct upstream_request {
    const char *host;              /* name or address literal */
    uint16_t port;                 /* upstream port */
    struct tls_client *tls;        /* https: the TLS context, borrowed
                                      until the request ends; NULL for
                                      plain http */
    const char *method;            /* "GET", "POST", ... */
    const char *target;            /* origin-form: "/path?query" */
    const struct headers *headers; /* sent in order; Host included; no
                                      framing fields (Content-Length,
                                      Transfer-Encoding): added here */
    struct evbuffer *body;         /* NULL, or drained into the request
                                      and sent with its Content-Length */
    uint64_t connect_timeout_ms;   /* TCP connect, 504 beyond */
    uint64_t response_timeout_ms;  /* request out to response head, connect
                                      included; then the longest pause
                                      between reads of the body */
    unsigned keepalive;            /* idle connections kept per host:port */
};

/* Why a request failed. */
enum upstream_error {
    UPSTREAM_CONNECT,         /* refused, unreachable, or not resolved */
    UPSTREAM_CONNECT_TIMEOUT, /* no connection (TLS handshake included)
                                 within connect_timeout */
    UPSTREAM_TIMEOUT,         /* no head, or a pause in the body, past
                                 response_timeout */
    UPSTREAM_CLOSED,          /* connection closed or reset before the
                                 response was complete */
    UPSTREAM_BAD_RESPONSE,    /* the response was malformed (resparse) */
    UPSTREAM_TLS,             /* the TLS handshake failed */
    UPSTREAM_TLS_VERIFY,      /* the upstream's certificate did not verify
                                 (logged here, once per upstream until it
                                 verifies again) */
};

/*
 * What the caller hears of one request, in this order: on_head once, then
 * on_body zero or more times, then on_done; or on_error at any point
 * (after on_head too: the response was cut). Exactly one of on_done and
 * on_error is called, unless upstream_cancel() came first; after it, or
 * after upstream_cancel(), nothing more, and the request is gone.
 */
struct upstream_callbacks {
    /* The final response's head (interim 1xx responses are consumed). */
    void (*on_head)(void *arg, const struct resparse_head *head);
    /*
     * Body bytes, de-chunked, in 'buf' (the client's): move out what you
     * keep (evbuffer_add_buffer); whatever is left is discarded.
     */
    void (*on_body)(void *arg, struct evbuffer *buf);
    void (*on_done)(void *arg);
    /* 'detail' is a sentence for logs and problem bodies; borrowed. */
    void (*on_error)(void *arg, enum upstream_error err, const char *detail);
    /*
     * After on_head, at the end of each read whose bytes all parsed well
     * (their body passed to on_body first) while the response goes on:
     * what was held back until the read was known good may go out. May
     * be NULL.
     */
    void (*on_read_end)(void *arg);
};

/*
 * A client on 'base' resolving names with 'dns' (both borrowed; 'dns' may
 * be NULL for address literals only).
 */
struct upstream_client *upstream_client_new(struct event_base *base,
                                            struct evdns_base *dns);
/*
 * Closes the idle connections. Every request must have ended (or been
 * cancelled) first. NULL is a no-op.
 */
void upstream_client_free(struct upstream_client *c);

/*
 * Sends 'r' on an idle pooled connection, or a new one. 'cb' and 'arg'
 * are borrowed until the request ends. Callbacks never run from inside
 * this call. Returns NULL, having called nothing, when no connection
 * could even be started (the caller answers 502). On a pooled plain
 * connection, a request without a body is written when the loop turn
 * ends, with the others sent in the turn (a request cancelled before
 * then is never written); anything else is written at once, or once
 * connected.
 */
struct upstream_req *upstream_send(struct upstream_client *c,
                                   const struct upstream_request *r,
                                   const struct upstream_callbacks *cb,
                                   void *arg);

/*
 * Abandons 'req': no callback runs after this, and its connection is
 * closed (a response cut short cannot be pooled), unless nothing of the
 * request was written yet (see upstream_send()): that connection goes
 * back to its pool. Safe from inside the request's own callbacks.
 */
void upstream_cancel(struct upstream_req *req);

/*
 * Backpressure: stop reading the response body (the client is behind),
 * and read again. No timeout runs while paused.
 */
void upstream_pause(struct upstream_req *req);
void upstream_resume(struct upstream_req *req);

/* The connection had served a request before this one. */
bool upstream_reused(const struct upstream_req *req);

/* Human-readable name of 'err', for logs. */
const char *upstream_error_str(enum upstream_error err);

#endif
