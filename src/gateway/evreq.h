/*
 * evreq.h - what the gateway reads of, and writes into, an evhttp request
 * as plain values: the method's name, the request's fields, its peer, the
 * size of its head, a problem body, "Connection: close". Does no I/O of
 * its own; a gateway module (<event2/http.h>). Every request borrowed.
 */
#ifndef SLUICE_EVREQ_H
#define SLUICE_EVREQ_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <event2/http.h>

struct evbuffer;
struct headers;
struct netaddr;

/* "GET", "POST", ...; "GET" for a command it does not know. Static. */
const char *evreq_method_name(enum evhttp_cmd_type cmd);

/* Appends every request field of 'req', in order, to 'h'. */
void evreq_headers(struct headers *h, struct evhttp_request *req);

/* The socket peer of 'conn' into '*out'; false if it has none. */
bool evreq_peer(struct evhttp_connection *conn, struct netaddr *out);

/* Request line plus header fields, as counted against max_header_bytes. */
uint64_t evreq_head_bytes(struct evhttp_request *req);

/*
 * Sets Content-Type on 'req' and returns a new problem+json body for
 * 'status' about it; the caller frees it.
 */
struct evbuffer *evreq_problem_body(struct evhttp_request *req, int status,
                                    const char *detail);

/*
 * Readies an answer of the gateway's own for evhttp_send_reply(): empties
 * 'body' when 'req' is a HEAD (evhttp 2.1 sends a body even then, and a
 * keep-alive client would read it as its next response), and adds the
 * Date field (evreq_add_date()).
 */
void evreq_reply_prepare(struct evhttp_request *req, struct evbuffer *body);

/*
 * Writes the IMF-fixdate of RFC 9110 5.6.7 for 'sec' (seconds since the
 * epoch, UTC) into 'out', at least EVREQ_DATE_LEN bytes, NUL included:
 * "Sun, 06 Nov 1994 08:49:37 GMT", in English whatever the locale.
 */
#define EVREQ_DATE_LEN 30
void evreq_http_date(time_t sec, char *out);

/*
 * Adds "Date: <IMF-fixdate>" to the output fields of 'req' unless one is
 * there. The text is kept per thread and remade when the second changes:
 * evhttp would otherwise format it with snprintf on every reply (about
 * 3,000 instructions, measured by callgrind).
 */
void evreq_add_date(struct evhttp_request *req);

/*
 * Writes what the output buffer of 'conn' holds to its socket now, as far
 * as the socket takes it without blocking; the rest, and any error, are
 * left to the bufferevent, which writes (or fails) as it always does.
 * Called just before evhttp_send_reply_end() on a reply whose body is
 * framed by its length: that call then finds the buffer empty and
 * finishes the request at once, instead of a loop turn later from the
 * write event (two epoll_ctl calls, write interest on and off, saved).
 * Plain connections only: on a TLS one it would write clear text.
 */
void evreq_flush(struct evhttp_connection *conn);

/* The answer to 'req' says "Connection: close", and evhttp closes after. */
void evreq_close_after_reply(struct evhttp_request *req);

#endif
