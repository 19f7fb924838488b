/*
 * clientconn.h - the client connections of one worker, from accept to
 * close: counted, each with a deadline for its request head, the listener
 * paused past server.max_connections or when accept() runs out of
 * descriptors, and one watcher per connection told when it closes. Does
 * I/O on the worker's event_base; a gateway module (<event2/http.h>).
 *
 * evhttp has one close callback per connection and no user pointer; this
 * module owns that callback and each request's on-complete callback, so
 * that nothing else in the gateway sets either. It also owns the evhttp's
 * bufferevent callback (evhttp_set_bevcb) and, through acceptrest.h, the
 * listener's error callback.
 *
 * The head deadline. evhttp does not tell when it has read a request
 * head, so this module reads along: it scans the bytes arriving on a
 * connection with evhttp's own rule (lines end in LF or CRLF; the first
 * empty line after the request line ends the head). The first byte of a
 * request arms the deadline, the end of its head disarms it; past the
 * deadline the connection is closed without an answer (logged at debug).
 * A connection waiting for its first or next request is not timed by it,
 * nor is a request body, nor anything that arrives while a request is
 * being answered: those are left to client_timeout, evhttp's idle
 * timeout. Bytes that arrived during an answer and begin the next
 * request arm the deadline when that answer is done.
 *
 * The linger. When evhttp closes a connection whose client may still be
 * sending (in the middle of a request, as after a 413 at the end of a
 * head; with bytes sent past what was read; after a refusal,
 * clientconn_linger()), this module keeps its socket, shut for writing,
 * for up to 5 s, and what the client still sends is read and dropped: a
 * close with bytes unread would answer them with a reset, which can
 * erase the reply before the client has read it (RFC 9112 9.6). It ends
 * when the client closes or resets, and at clientconns_free(). A
 * connection closed between requests with nothing unread (an idle
 * timeout, "Connection: close") or cut by the head deadline does not
 * linger. A lingering socket counts against max_connections.
 *
 * CONNECT. evhttp keeps a connection open after any answer to a CONNECT
 * (libevent 2.1.12 never closes after one, whatever the answer says),
 * its own included (a 413, a 400), and would read what the client sent
 * next, the tunnel's first bytes, as a request. So evhttp never sees a
 * CONNECT: the scan reads the request line's method as evhttp does (up
 * to the first space, case-sensitive), and for CONNECT drops every byte
 * of the connection from there on, answers 501 itself and closes. The
 * refusal is logged at debug, not in the access log.
 */
#ifndef SLUICE_CLIENTCONN_H
#define SLUICE_CLIENTCONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct evhttp;
struct evhttp_connection;
struct evhttp_request;
struct evconnlistener;
struct metrics_shard;
struct tls_server;
struct clientconns; /* opaque; one per worker and listener */
struct clientconn;  /* opaque; one per client connection */

/* What the connections of one worker are held to. */
struct clientconns_conf {
    uint64_t header_timeout_ms; /* first byte of a request head to its
                                   end; the connection is cut past it */
    uint64_t client_timeout_ms; /* idle read/write timeout (evhttp's) */
    size_t max_connections;     /* open at once in this worker; past it
                                   the listener stops accepting */
    const char *who;            /* static: starts the listener's log
                                   lines ("clientconn", "admin"); read by
                                   clientconns_new() only */
    const char *where;          /* static: ends their count of open
                                   connections ("in this worker"), or "" */
};

/*
 * Tracks every connection that 'http' (borrowed) accepts from 'lev'
 * (borrowed; the listener bound to 'http'), from now on: call it before
 * the loop runs. Both must outlive the result, or
 * clientconns_forget_listener() must be called before 'lev' goes.
 * 'metrics' (borrowed, or NULL) gets the connections-open gauge.
 */
struct clientconns *clientconns_new(struct event_base *base,
                                    struct evhttp *http,
                                    struct evconnlistener *lev,
                                    struct metrics_shard *metrics,
                                    const struct clientconns_conf *conf);
/*
 * Stops tracking; connections still open no longer call back. NULL is a
 * no-op. Call it before evhttp_free().
 */
void clientconns_free(struct clientconns *cs);

/*
 * 'a' and 'b' (borrowed; the same worker's plain and TLS listeners) count
 * their connections together against one max_connections: each stops
 * accepting when the two hold that many. Freeing either undoes it.
 */
void clientconns_pair(struct clientconns *a, struct clientconns *b);

/*
 * New limits (a reload): a new max_connections applies at once, new
 * timeouts from each connection's next request on.
 */
void clientconns_configure(struct clientconns *cs,
                           const struct clientconns_conf *conf);

/*
 * Connections accepted from now on speak TLS with 'tls' (borrowed; it
 * must outlive them, or the next call), or plain HTTP when NULL (the
 * default). Connections open keep what they started with.
 */
void clientconns_set_tls(struct clientconns *cs, struct tls_server *tls);

/* The connection came over TLS. */
bool clientconn_tls(const struct clientconn *cc);

/*
 * The connection is about to be cut (a reply that cannot be finished):
 * over TLS it closes without close_notify, which it otherwise sends at
 * a close that comes between replies (tls_close_notify()), so that the
 * client never reads a cut as an end.
 */
void clientconn_cut(struct clientconn *cc);

/*
 * Ends the streamed reply to 'req' (evhttp_send_reply_end()) on a TLS
 * connection, once its output is written. OpenSSL's bufferevent defers
 * its write callback; one left over from an earlier write would make
 * evhttp take an end called with bytes still queued for done, stop
 * writing and strand them. So the end waits until the output is empty
 * and a loop turn has passed. If the connection fails first, evhttp
 * detaches 'req' (its reply has begun and not ended) and the close ends
 * it, which frees it; if the gateway closes the connection, evhttp frees
 * 'req' with it. Nothing is called either way.
 */
void clientconn_end_reply(struct clientconn *cc, struct evhttp_request *req);

/* The listener is going away (a drain): never enable or disable it again. */
void clientconns_forget_listener(struct clientconns *cs);

/*
 * The record of the connection a complete request arrived on, for the
 * server's request callback; never NULL. Marks the connection as
 * answering a request: its head deadline is off until the reply is done.
 */
struct clientconn *clientconns_begin_request(struct clientconns *cs,
                                             struct evhttp_request *req);

/*
 * Called once when the connection closes for any reason (client gone,
 * timeout, last reply sent, evhttp_connection_free() by anyone), before
 * evhttp frees the request on it. One watcher at a time; 'cb' NULL
 * clears it. Cleared again automatically once called.
 */
typedef void (*clientconn_close_cb)(struct clientconn *cc, void *arg);
void clientconn_watch(struct clientconn *cc, clientconn_close_cb cb, void *arg);

/*
 * The 'arg' of the watcher of 'cc' if that watcher is 'cb', else NULL:
 * for a callback that may come late, when the watcher is gone (a write
 * callback deferred past the end of the reply it was for).
 */
void *clientconn_watch_arg(const struct clientconn *cc, clientconn_close_cb cb);

/*
 * The leave watch. evhttp stops reading a connection while its request
 * is answered, until the reply begins, so it would not see the client
 * leave meanwhile; this watch does, and calls 'cb' once (unless cleared
 * first) when the client closed or reset the connection. 'cb' NULL
 * clears it; call that once the reply has begun, or before answering.
 * The reply's end clears it too. 'cb' may close the connection.
 *
 * The watch is a read event on the socket, armed at the end of a
 * request head, before evhttp stops reading, and left armed while evhttp
 * reads the connection itself (it then ignores what it sees): the
 * descriptor stays registered for reading throughout, and a request
 * costs no epoll_ctl and no event_add for it. When the socket turns
 * readable while 'cb' waits, a peek tells: end of file or an error is a
 * leave; data is more from the client (a pipelined next request, or over
 * TLS any record, a close_notify among them), which evhttp reads after
 * this reply. For the rest of this request the descriptor then has no
 * event in the loop, and a timer asks the kernel every 100 ms whether
 * the connection is still established (TCP_INFO): a FIN or a reset is a
 * leave. (libevent 2.1 reports a socket error to read and write events
 * only: a watch of the half-close flag, EV_CLOSED, misses a reset.) The
 * next head arms the read watch again.
 *
 * Once the reply has begun, evhttp reads the connection and sees the
 * client go, up to the 64 KiB it holds for a connection while answering.
 * A client that sends more than that is polled the same way until the
 * answer is done, and its connection closed if it goes.
 */
typedef void (*clientconn_leave_cb)(struct clientconn *cc, void *arg);
void clientconn_watch_leave(struct clientconn *cc, clientconn_leave_cb cb,
                            void *arg);

/*
 * The request being answered is refused, and the connection closes
 * after the answer while the client may still be sending (its body,
 * unread for a framing that is refused): its socket lingers then,
 * whatever it shows at the close.
 */
void clientconn_linger(struct clientconn *cc);

/*
 * The head of the request being answered held a NUL byte. evhttp keeps
 * field values as C strings, so it has cut a value there
 * ("Transfer-Encoding: chunked\0junk" reads as chunked): the request
 * cannot be checked as sent, and is refused.
 */
bool clientconn_head_has_nul(const struct clientconn *cc);

/*
 * The size of the head of the request being answered, as the client sent
 * it: the request line and every field line, each with its line end; the
 * empty line that ends the head not counted.
 */
uint64_t clientconn_head_bytes(const struct clientconn *cc);

/*
 * While a response streams, time only the writes (a slow download is not
 * an idle client); the read timeout comes back when the reply is done.
 */
void clientconn_stream_timeouts(struct clientconn *cc);

/* Connections open now. */
size_t clientconns_count(const struct clientconns *cs);

/* True when every open connection has been written all it was sent,
 * and no reply waits for its end (clientconn_end_reply()). */
bool clientconns_flushed(const struct clientconns *cs);

/* Closes every open connection (the end of a drain that ran out). */
void clientconns_close_all(struct clientconns *cs);

#endif
