/*
 * evreq.h - what the gateway reads of, and writes into, an evhttp request
 * as plain values: the method's name, the request's fields, its peer, a
 * problem body, "Connection: close". Does no I/O of
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
struct strbuf;

/* "GET", "POST", ...; "GET" for a command it does not know. Static. */
const char *evreq_method_name(enum evhttp_cmd_type cmd);

/* Appends every request field of 'req', in order, to 'h'. */
void evreq_headers(struct headers *h, struct evhttp_request *req);

/* The socket peer of 'conn' into '*out'; false if it has none. */
bool evreq_peer(struct evhttp_connection *conn, struct netaddr *out);

/*
 * Sets Content-Type on 'req' and returns a new problem+json body for
 * 'status' about it; the caller frees it.
 */
struct evbuffer *evreq_problem_body(struct evhttp_request *req, int status,
                                    const char *detail);

/*
 * Readies an answer of the gateway's own for evreq_send_reply(): empties
 * 'body' when 'req' is a HEAD (evhttp 2.1 sends a body even then, and a
 * keep-alive client would read it as its next response).
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

/* The Date text of this second, as evreq_add_date() adds it; this
 * thread's, valid until its next call. */
const char *evreq_date_now(void);

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

/*
 * Joins what the output buffer of 'conn' holds into one piece when it is
 * at most 16 KiB, the plaintext of one TLS record. For TLS connections:
 * OpenSSL's bufferevent makes one record, and one write(), of each piece
 * it finds in its output, and a reply is two pieces at least, its head
 * and its body. Call it once the reply is all in the output, in the same
 * loop turn: the bufferevent writes on its next write event. Copies at
 * most 16 KiB; NULL is a no-op.
 */
void evreq_coalesce(struct evhttp_connection *conn);

/* The answer to 'req' says "Connection: close", and evhttp closes after. */
void evreq_close_after_reply(struct evhttp_request *req);

/*
 * True when evhttp will close the connection of 'req' once its reply has
 * gone: the reply's fields say "Connection: close" (as
 * evreq_close_after_reply() makes them), the request said so, or it is
 * HTTP/1.0 without "Connection: keep-alive". The same test as libevent
 * 2.1.12's evhttp_send_done(), so that a head written by the gateway says
 * what evhttp then does.
 */
bool evreq_closes_after(struct evhttp_request *req);

/*
 * The head of a streamed reply, written by the gateway instead of
 * evhttp_send_reply_start(), which formats each field with printf and
 * copies each into its list first: writing the head here took a plain
 * proxied request from 55,700 to 43,300 instructions (callgrind). The text goes
 * to the client as the first bytes of the reply, through
 * evhttp_send_reply_chunk_with_cb(); evhttp, which then frames nothing itself,
 * sends them and the body as they are and ends the request as ever with
 * evhttp_send_reply_end(). The body's framing is the caller's: a Content-Length
 * field, or chunks (evreq_chunk_wrap(), EVREQ_LAST_CHUNK). This rests on
 * libevent 2.1.12's evhttp: a reply never started has no chunking and no
 * status, which evhttp_send_reply_chunk_with_cb() takes for a body to pass on
 * as it is.
 *
 * Only for a request evreq_own_head() accepts: evhttp drops every byte
 * of a reply to a HEAD request, its own head apart.
 */
bool evreq_own_head(struct evhttp_request *req);

/* Starts 'text' (emptied first) with the status line of a reply to 'req',
 * in the request's HTTP version, as evhttp writes it. 'reason' has no
 * control character. */
void evreq_head_begin(struct strbuf *text, struct evhttp_request *req,
                      int status, const char *reason);

/* Appends one field; 'name' and 'value' are valid (headers.h). */
void evreq_head_field(struct strbuf *text, const char *name, const char *value);

/* Ends the head in 'text' and appends it to 'out'. */
void evreq_head_finish(struct strbuf *text, struct evbuffer *out);

/*
 * Sends 'buf' (drained), a head evreq_head_finish() ended and what
 * follows it, to the client of 'req' through evhttp, which writes it as
 * it is; 'cb' runs with 'arg' whenever the client has taken everything
 * written so far, as for evhttp_send_reply_chunk_with_cb().
 */
void evreq_send_held(struct evhttp_request *req, struct evbuffer *buf,
                     void (*cb)(struct evhttp_connection *, void *), void *arg);

/*
 * Writes 'buf' (drained) as the next bytes of the reply to 'req', on a
 * plain connection whose reply has no evhttp_send_reply_start(): straight
 * to the socket, as far as it takes them without blocking, when nothing
 * is queued before them; whatever is left goes to evhttp, which writes
 * it and calls 'cb' with 'arg' once the output has drained, as for
 * evhttp_send_reply_chunk_with_cb(). True when all went out at once:
 * evhttp_send_reply_end() then finishes the request inside the call,
 * without evhttp's write path (enabling and disabling its events) ever
 * running for it.
 */
bool evreq_write_out(struct evhttp_request *req, struct evbuffer *buf,
                     void (*cb)(struct evhttp_connection *, void *), void *arg);

/*
 * Sends a whole answer of the gateway's own, as evhttp_send_reply() does:
 * 'status' with the reason problem_reason() gives, the output fields of
 * 'req', then those of 'fields' (may be NULL; borrowed), Content-Length,
 * Date unless a field gives it, and the Connection field
 * evreq_closes_after() decides; then 'body' (drained). The head is
 * written by the gateway, through 'text' and 'spare', for a
 * request evreq_own_head() accepts; by evhttp otherwise, and when 'text'
 * is NULL (a TLS connection: nothing but OpenSSL may write to its
 * socket; the answer queued is then joined into one piece,
 * evreq_coalesce()). Nothing of 'req' after the call: evhttp may free
 * it inside.
 */
void evreq_send_reply(struct evhttp_request *req, int status,
                      const struct headers *fields, struct evbuffer *body,
                      struct strbuf *text, struct evbuffer *spare);

/* Frames the bytes of 'buf' (not empty) as one chunk of a chunked body. */
void evreq_chunk_wrap(struct evbuffer *buf);

/* The last chunk of a chunked body, with no trailer field. */
#define EVREQ_LAST_CHUNK "0\r\n\r\n"

#endif
