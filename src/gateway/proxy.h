/*
 * proxy.h - the request path of one worker: request checks, route,
 * filters, rate limiter, and a streaming forward to the upstream through
 * the upstream client (upstream.h). Each request is one exchange with an
 * explicit state and one function that ends it, whatever the reason.
 * Does I/O on the worker's event_base; one proxy per worker thread, never
 * shared. A gateway module: includes <event2/http.h>.
 */
#ifndef SLUICE_PROXY_H
#define SLUICE_PROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct clientconn;
struct config;
struct event_base;
struct evdns_base;
struct evhttp_request;
struct proxy; /* opaque */
struct ratelimit;
struct metrics_shard;
struct accesslog;

/* What a worker's proxy works with; every pointer borrowed, outliving it. */
struct proxy_deps {
    struct event_base *base;       /* the worker's loop */
    struct evdns_base *dns;        /* its resolver */
    struct ratelimit *rl;          /* its rate limiters, or NULL */
    struct metrics_shard *metrics; /* its metrics shard, or NULL */
    struct accesslog *log;         /* the access log, or NULL */
};

struct proxy *proxy_new(const struct proxy_deps *deps);
/*
 * Frees the pools and their idle connections. Requests still in flight
 * must have finished first (proxy_in_flight() == 0). NULL is a no-op.
 */
void proxy_free(struct proxy *p);

/*
 * Answers 'req' (owned by evhttp) under 'cfg': 400 or 501, closing the
 * connection, for a request whose framing or syntax is ambiguous
 * (reqcheck.h); 400 for a path that does not normalise, 404 when no route
 * matches, else forwards it and streams the response back (502 on connect
 * failure or a malformed response, 504 past a timeout). Takes a
 * reference to 'cfg' for as long as the request lives. 'cc' (borrowed) is
 * the record of the connection 'req' came on, from
 * clientconns_begin_request(): the exchange watches it for the client
 * leaving and has its read timeout lifted while the response streams.
 */
void proxy_handle(struct proxy *p, struct config *cfg,
                  struct evhttp_request *req, struct clientconn *cc);

/*
 * Ends every request still in flight: upstream requests are cancelled and
 * client connections closed. For the end of a drain that ran out of time,
 * and a worker's end. One not yet answered is logged with status 444
 * (closed by the gateway, unanswered); a response already streaming
 * keeps its status.
 */
void proxy_abort_all(struct proxy *p);

/* Requests accepted and not yet finished. */
size_t proxy_in_flight(const struct proxy *p);

/*
 * Starts a drain: every response not yet begun, and every later one, says
 * "Connection: close", so that clients do not send another request on a
 * connection that is about to end.
 */
void proxy_drain(struct proxy *p);

/*
 * True when nothing is in flight. A response ends for the proxy when it
 * is handed to evhttp and reaches the client only when the connection's
 * output buffer empties: a drain ends when this and clientconns_flushed()
 * both hold, not before.
 */
bool proxy_idle(const struct proxy *p);

#endif
