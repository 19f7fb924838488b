/*
 * resparse.h - strict parsing of one HTTP/1.x response from an upstream,
 * over libhttp_parser. Pure: no I/O, no event loop; bytes in, callbacks
 * out, so that it can be unit-tested and fuzzed on its own.
 *
 * Refused (RESPARSE_ERROR, resparse_error() names why): anything
 * http_parser refuses (bad status line, bad header syntax, a Content-Length
 * together with Transfer-Encoding, a second Content-Length even when
 * identical, bad chunk sizes); a status outside 100-599; a control
 * character in the reason phrase or in a field value; a field name that is
 * not a token; a CR not followed by LF anywhere outside the body's data,
 * and chunk data not followed by CRLF (Debian builds http_parser without
 * its strict mode, which would check these); a Transfer-Encoding other
 * than a single "chunked"; 101 Switching Protocols (nothing was asked to
 * switch); a head larger than the limit.
 * Interim responses (1xx but 101) are consumed and never reported: only
 * the final response's head reaches on_head.
 */
#ifndef SLUICE_RESPARSE_H
#define SLUICE_RESPARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "headers.h"

struct resparse; /* opaque */

/* How the body of the final response is delimited. */
enum resparse_framing {
    RESPARSE_NO_BODY, /* HEAD request, 204, 304: nothing follows */
    RESPARSE_LENGTH,  /* Content-Length bytes */
    RESPARSE_CHUNKED, /* chunked transfer coding */
    RESPARSE_CLOSE,   /* until the upstream closes the connection */
};

/* The final response's head; every pointer borrowed for the callback. */
struct resparse_head {
    int status;                    /* 100..599, not 1xx */
    const char *reason;            /* reason phrase, maybe ""; no CTLs */
    unsigned http_minor;           /* 0 or 1 (HTTP/1.x) */
    const struct headers *headers; /* every field as received, in order */
    enum resparse_framing framing;
    uint64_t content_length; /* with RESPARSE_LENGTH */
    bool keep_alive;         /* the connection may carry another
                                request once this one is done */
    bool body_in_hand;       /* the whole body (or its absence) came in
                                the same resparse_feed() call as the
                                head: the response ends within that call,
                                unless a callback stops it */
};

/*
 * Called from inside resparse_feed()/resparse_eof(), in this order:
 * on_head once, on_body zero or more times, on_complete once. A callback
 * returning -1 stops the parse: the call returns RESPARSE_STOPPED and the
 * parser must not be fed again before resparse_reset().
 */
struct resparse_callbacks {
    int (*on_head)(void *arg, const struct resparse_head *head);
    /* 'len' > 0 bytes of body, de-chunked; 'data' borrowed. */
    int (*on_body)(void *arg, const char *data, size_t len);
    int (*on_complete)(void *arg);
};

enum resparse_status {
    RESPARSE_MORE,    /* all bytes consumed; the response is not over */
    RESPARSE_DONE,    /* the response is complete */
    RESPARSE_ERROR,   /* malformed: see resparse_error() */
    RESPARSE_STOPPED, /* a callback returned -1 */
};

/*
 * A parser whose callbacks get 'arg' (borrowed). A response head (status
 * line and fields, interim responses included) longer than
 * 'max_head_bytes' is an error.
 */
struct resparse *resparse_new(const struct resparse_callbacks *cb, void *arg,
                              size_t max_head_bytes);
void resparse_free(struct resparse *rp); /* NULL is a no-op */

/*
 * Makes the parser ready for the response to a new request; 'head_request'
 * says that request was a HEAD, whose response has no body whatever its
 * fields say.
 */
void resparse_reset(struct resparse *rp, bool head_request);

/*
 * Parses 'len' bytes of 'data' (borrowed). '*used' gets how many were
 * consumed: all of them with RESPARSE_MORE, up to the response's last byte
 * with RESPARSE_DONE (bytes after it are not part of this response: a
 * well-behaved upstream sends none before the next request), the position
 * reached otherwise. After RESPARSE_DONE, RESPARSE_ERROR or
 * RESPARSE_STOPPED, nothing more may be fed before resparse_reset().
 */
enum resparse_status resparse_feed(struct resparse *rp, const char *data,
                                   size_t len, size_t *used);

/*
 * The upstream closed the connection: RESPARSE_DONE (on_complete called)
 * when that ends a close-delimited body, RESPARSE_ERROR anywhere else
 * (before or inside a response).
 */
enum resparse_status resparse_eof(struct resparse *rp);

/* Why the last call returned RESPARSE_ERROR; a static string. */
const char *resparse_error(const struct resparse *rp);

/* True once the final response's head has been reported. */
bool resparse_head_seen(const struct resparse *rp);

/* Bytes of the current response consumed so far (head and body). */
uint64_t resparse_consumed(const struct resparse *rp);

#endif
