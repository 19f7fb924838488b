#include "resparse.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <http_parser.h>

#include "strbuf.h"
#include "xmalloc.h"

/* Where the field being read stands: its name, or its value. */
enum field_part {
    PART_NONE,  /* no field started yet */
    PART_NAME,  /* inside a field name */
    PART_VALUE, /* inside a field value */
};

struct resparse {
    http_parser parser;                  /* libhttp_parser's state */
    const struct resparse_callbacks *cb; /* borrowed */
    void *arg;                           /* for the callbacks; borrowed */
    size_t max_head_bytes;               /* per response, interim included */
    bool head_request;                   /* the request was a HEAD */
    bool head_seen;                      /* on_head has been called */
    bool stopped;                        /* a callback returned -1 */
    bool done;                           /* on_complete has been called */
    bool started;                        /* a byte of this response came */
    const char *error;                   /* why the last call failed */
    uint64_t consumed;                   /* bytes of this response parsed */
    uint64_t head_bytes;                 /* bytes before the final head */
    struct strbuf reason;                /* reason phrase being read */
    struct strbuf name;                  /* field name being read */
    struct strbuf value;                 /* field value being read */
    const char *name_at;                 /* or the name in the bytes being
                                            parsed, not copied, or NULL */
    size_t name_len;                     /* bytes at 'name_at' */
    const char *value_at;                /* the same for the value */
    size_t value_len;                    /* bytes at 'value_at' */
    enum field_part part;                /* what 'name'/'value' hold */
    struct headers headers;              /* fields of the current message */
    struct resparse_head head;           /* the final head, held from the
                                            parser's callback until its
                                            bytes are checked */
    bool head_ready;                     /* 'head' waits to be reported */
    const char *scan_from;               /* framing bytes of this feed not
                                            yet checked start here */
    bool cr_pending;                     /* the last framing byte checked
                                            was CR: an LF must follow */
    int crlf_due;                        /* bytes of the CRLF that must
                                            end the chunk just read */
    bool in_body;                        /* past the final head: its
                                            framing lines end in CRLF */
    bool conn_close;                     /* a Connection field of this
                                            message lists "close" */
    bool conn_keep_alive;                /* ... "keep-alive" */
};

static int on_message_begin(http_parser *hp);
static int on_status(http_parser *hp, const char *at, size_t len);
static int on_header_field(http_parser *hp, const char *at, size_t len);
static int on_header_value(http_parser *hp, const char *at, size_t len);
static int on_headers_complete(http_parser *hp);
static int on_body(http_parser *hp, const char *at, size_t len);
static int on_message_complete(http_parser *hp);

static const http_parser_settings settings = {
    .on_message_begin = on_message_begin,
    .on_status = on_status,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* Makes the parser stop where it is, with 'why' as the error. */
static int
fail(struct resparse *rp, const char *why)
{
    rp->error = why;
    return -1;
}

static void
reset_message(struct resparse *rp)
{
    /* The buffers are kept for the next message; only emptied. */
    headers_clear(&rp->headers);
    rp->reason.n = 0;
    rp->name.n = 0;
    rp->value.n = 0;
    rp->name_at = NULL;
    rp->value_at = NULL;
    rp->part = PART_NONE;
    rp->conn_close = false;
    rp->conn_keep_alive = false;
}

struct resparse *
resparse_new(const struct resparse_callbacks *cb, void *arg,
             size_t max_head_bytes)
{
    struct resparse *rp = xcalloc(1, sizeof(*rp));

    rp->cb = cb;
    rp->arg = arg;
    rp->max_head_bytes = max_head_bytes;
    headers_init(&rp->headers);
    resparse_reset(rp, false);
    return rp;
}

void
resparse_free(struct resparse *rp)
{
    if (rp == NULL) {
        return;
    }
    headers_deinit(&rp->headers);
    free(rp->reason.p);
    free(rp->name.p);
    free(rp->value.p);
    free(rp);
}

void
resparse_reset(struct resparse *rp, bool head_request)
{
    http_parser_init(&rp->parser, HTTP_RESPONSE);
    rp->parser.data = rp;
    rp->head_request = head_request;
    rp->head_seen = false;
    rp->stopped = false;
    rp->done = false;
    rp->started = false;
    rp->error = NULL;
    rp->consumed = 0;
    rp->head_bytes = 0;
    rp->head_ready = false;
    rp->cr_pending = false;
    rp->crlf_due = 0;
    rp->in_body = false;
    reset_message(rp);
}

/*
 * Debian builds libhttp_parser without HTTP_PARSER_STRICT, and then it
 * takes any byte after a CR for the LF that ends a line (so that "200
 * OK\rSet-Cookie: a=1" becomes a field "et-Cookie"), and any two bytes for
 * the CRLF after chunk data. Every byte outside the body's data (the head,
 * and the chunk framing) goes through here: a CR must be followed by LF,
 * and chunk data by CRLF. Past the head, an LF must follow a CR too: the
 * parser reads an LF inside a chunk extension as part of it, where a
 * recipient that ends lines at a bare LF would read the chunk's data.
 * Returns 0, or -1 with rp->error set.
 */
static int
check_framing(struct resparse *rp, const char *p, const char *end)
{
    while (p < end) {
        const char *next;

        if (rp->crlf_due > 0) {
            if (*p != (rp->crlf_due == 2 ? '\r' : '\n')) {
                rp->error = "chunk data not followed by CRLF";
                return -1;
            }
            rp->crlf_due--;
        }
        if (rp->cr_pending && *p != '\n') {
            rp->error = "CR not followed by LF";
            return -1;
        }
        if (!rp->cr_pending && *p == '\n' && rp->in_body) {
            rp->error = "LF without CR in the chunk framing";
            return -1;
        }
        rp->cr_pending = *p == '\r';
        p++;
        if (rp->crlf_due > 0 || rp->cr_pending) {
            continue;
        }
        /* Up to the next CR (or LF, past the head), no byte can fail:
         * skip them at once. */
        next = memchr(p, '\r', (size_t)(end - p));
        if (rp->in_body) {
            const char *lf =
                memchr(p, '\n', (size_t)((next != NULL ? next : end) - p));

            next = lf != NULL ? lf : next;
        }
        p = next != NULL ? next : end;
    }
    return 0;
}

/* True when 'len' bytes at 'p' hold no control character but HTAB. */
static bool
no_controls(const char *p, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)p[i];

        if ((c < 0x20 && c != '\t') || c == 0x7f) {
            return false;
        }
    }
    return true;
}

static int
on_message_begin(http_parser *hp)
{
    struct resparse *rp = hp->data;

    reset_message(rp);
    return 0;
}

static int
on_status(http_parser *hp, const char *at, size_t len)
{
    struct resparse *rp = hp->data;

    if (!no_controls(at, len)) {
        return fail(rp, "control character in the reason phrase");
    }
    strbuf_add(&rp->reason, at, len);
    return 0;
}

/*
 * A piece of a field's name or value. The parser hands over a name or a
 * value in one piece unless it spans two feeds: the first piece is only
 * pointed at, in the bytes being parsed ('*at'), and copied into 'buf'
 * only when a second piece comes, or when the feed ends before the field
 * does (keep_pieces()).
 */
static void
add_piece(struct strbuf *buf, const char **at, size_t *at_len, const char *data,
          size_t len)
{
    if (buf->n == 0 && *at == NULL) {
        *at = data;
        *at_len = len;
        return;
    }
    if (*at != NULL) {
        strbuf_add(buf, *at, *at_len);
        *at = NULL;
    }
    strbuf_add(buf, data, len);
}

/* The bytes being parsed are about to go: copy what points into them. */
static void
keep_pieces(struct resparse *rp)
{
    if (rp->name_at != NULL) {
        strbuf_add(&rp->name, rp->name_at, rp->name_len);
        rp->name_at = NULL;
    }
    if (rp->value_at != NULL) {
        strbuf_add(&rp->value, rp->value_at, rp->value_len);
        rp->value_at = NULL;
    }
}

/* Files the field read so far, if any. */
static int
end_field(struct resparse *rp)
{
    const char *name = rp->name_at != NULL ? rp->name_at : rp->name.p;
    size_t name_len = rp->name_at != NULL ? rp->name_len : rp->name.n;
    const char *value = rp->value_at != NULL ? rp->value_at : rp->value.p;
    size_t value_len = rp->value_at != NULL ? rp->value_len : rp->value.n;
    int rc = 0;

    if (rp->part == PART_NONE) {
        return 0;
    }
    /* A NUL among the bytes fails either test. */
    if (!headers_name_ok_n(name, name_len)) {
        rc = fail(rp, "invalid field name");
    } else if (!headers_value_ok_n(value, value_len)) {
        rc = fail(rp, "control character in a field value");
    } else {
        headers_add_n(&rp->headers, name, name_len, value != NULL ? value : "",
                      value_len);
        /* Its options read here, not from http_parser's flags, which miss
         * "close" followed by a tab. */
        if (name_len == 10 && strncasecmp(name, "Connection", 10) == 0 &&
            value != NULL) {
            rp->conn_close =
                rp->conn_close || headers_list_has(value, value_len, "close");
            rp->conn_keep_alive =
                rp->conn_keep_alive ||
                headers_list_has(value, value_len, "keep-alive");
        }
    }
    rp->name.n = 0;
    rp->value.n = 0;
    rp->name_at = NULL;
    rp->value_at = NULL;
    rp->part = PART_NONE;
    return rc;
}

static int
on_header_field(http_parser *hp, const char *at, size_t len)
{
    struct resparse *rp = hp->data;

    if (rp->part == PART_VALUE && end_field(rp) < 0) {
        return -1;
    }
    rp->part = PART_NAME;
    add_piece(&rp->name, &rp->name_at, &rp->name_len, at, len);
    return 0;
}

static int
on_header_value(http_parser *hp, const char *at, size_t len)
{
    struct resparse *rp = hp->data;

    rp->part = PART_VALUE;
    add_piece(&rp->value, &rp->value_at, &rp->value_len, at, len);
    return 0;
}

/*
 * Transfer-Encoding may only say "chunked", once: any other coding would
 * leave the body's end to be guessed (http_parser reads such a response
 * until the connection closes), and forwarding a coding that we did not
 * undo would need us to understand it.
 */
static const char *
check_transfer_encoding(const struct headers *h, bool *chunked)
{
    size_t n = 0;

    for (size_t i = 0; i < h->n; i++) {
        const char *v = h->v[i].value;
        size_t len = strlen(v);

        if (strcasecmp(h->v[i].name, "Transfer-Encoding") != 0) {
            continue;
        }
        if (++n > 1) {
            return "more than one Transfer-Encoding field";
        }
        headers_trim_ows(&v, &len);
        if (len != 7 || strncasecmp(v, "chunked", 7) != 0) {
            return "a transfer coding other than chunked";
        }
    }
    *chunked = n == 1;
    return NULL;
}

static int
on_headers_complete(http_parser *hp)
{
    struct resparse *rp = hp->data;
    struct resparse_head head;
    const char *why;
    int status = (int)hp->status_code;
    bool no_body;
    bool chunked = false;
    bool close;

    if (end_field(rp) < 0) {
        return -1;
    }
    if (status < 100 || status > 599) {
        return fail(rp, "status code out of range");
    }
    if (hp->http_major != 1 || hp->http_minor > 1) {
        return fail(rp, "not an HTTP/1.x response");
    }
    if ((why = check_transfer_encoding(&rp->headers, &chunked)) != NULL) {
        return fail(rp, why);
    }
    /* http_parser reads "chunked" only when spaces alone follow it, and
     * not across an obs-fold: where it read no chunked framing, it would
     * read the chunks as data until the connection closes. */
    if (chunked && (hp->flags & F_CHUNKED) == 0) {
        return fail(rp, "Transfer-Encoding: chunked that the parser cannot "
                        "frame (a control character or line fold after it)");
    }
    if (status == 101) {
        /* Nothing was asked to switch; what follows is not HTTP. */
        return fail(rp, "101 Switching Protocols without an upgrade request");
    }
    /* RFC 9112 6.3: these end at the empty line, whatever fields say. */
    no_body =
        status < 200 || status == 204 || status == 304 || rp->head_request;
    if (status < 200) {
        /* An interim response: consumed here, never reported. */
        return 1;
    }

    rp->head_seen = true;
    strbuf_add(&rp->reason, "", 0);
    memset(&head, 0, sizeof(head));
    head.status = status;
    head.reason = rp->reason.p;
    head.http_minor = hp->http_minor;
    head.headers = &rp->headers;
    head.content_length = 0;
    if (no_body) {
        head.framing = RESPARSE_NO_BODY;
    } else if (hp->flags & F_CHUNKED) {
        head.framing = RESPARSE_CHUNKED;
    } else if (hp->content_length != ULLONG_MAX) {
        head.framing = RESPARSE_LENGTH;
        head.content_length = hp->content_length;
    } else {
        head.framing = RESPARSE_CLOSE;
    }
    /* Connection's options as end_field() read them. HTTP/1.0 with
     * Transfer-Encoding is faulty framing, whose connection closes after
     * it (RFC 9112 6.1). */
    close = (hp->flags & F_CONNECTION_CLOSE) != 0 || rp->conn_close;
    head.keep_alive =
        head.framing != RESPARSE_CLOSE && !close &&
        (hp->http_minor >= 1 || (!chunked && rp->conn_keep_alive));
    /*
     * Reported once the head's last bytes are checked (see resparse_feed):
     * the parser stops here, right after the head.
     */
    rp->head = head;
    rp->head_ready = true;
    http_parser_pause(hp, 1);
    return no_body ? 1 : 0;
}

static int
on_body(http_parser *hp, const char *at, size_t len)
{
    struct resparse *rp = hp->data;

    if (check_framing(rp, rp->scan_from, at) < 0) {
        return -1;
    }
    rp->scan_from = at + len;
    if ((hp->flags & F_CHUNKED) && hp->content_length == 0) {
        rp->crlf_due = 2;
    }
    if (len > 0 && rp->cb->on_body(rp->arg, at, len) < 0) {
        rp->stopped = true;
        return -1;
    }
    return 0;
}

static int
on_message_complete(http_parser *hp)
{
    struct resparse *rp = hp->data;

    if (!rp->head_seen) {
        /* An interim response ended: the final one is still to come. */
        return 0;
    }
    /*
     * Whatever follows is not part of this response: stop before it.
     * on_complete is called once the last bytes are checked.
     */
    rp->done = true;
    http_parser_pause(hp, 1);
    return 0;
}

/* The outcome of an http_parser_execute() call. */
static enum resparse_status
outcome(struct resparse *rp)
{
    enum http_errno err = HTTP_PARSER_ERRNO(&rp->parser);

    if (rp->stopped) {
        return RESPARSE_STOPPED;
    }
    if (rp->done) {
        return RESPARSE_DONE;
    }
    if (err == HPE_PAUSED && rp->head_ready) {
        return RESPARSE_MORE;
    }
    if (err != HPE_OK) {
        if (rp->error == NULL) {
            rp->error = http_errno_description(err);
        }
        return RESPARSE_ERROR;
    }
    return RESPARSE_MORE;
}

/* One run of the parser over 'len' bytes of 'data'. */
static enum resparse_status
execute(struct resparse *rp, const char *data, size_t len, size_t *used)
{
    enum resparse_status st;
    size_t n;

    rp->scan_from = data;
    n = http_parser_execute(&rp->parser, &settings, data, len);
    keep_pieces(rp);
    *used = n;
    rp->consumed += n;
    if (!rp->head_seen || rp->head_ready) {
        rp->head_bytes += n;
    }
    st = outcome(rp);
    if (st != RESPARSE_ERROR && st != RESPARSE_STOPPED &&
        check_framing(rp, rp->scan_from, data + n) < 0) {
        rp->done = false;
        return RESPARSE_ERROR;
    }
    if (st == RESPARSE_DONE && rp->cb->on_complete(rp->arg) < 0) {
        rp->stopped = true;
        return RESPARSE_STOPPED;
    }
    if (rp->head_ready && st == RESPARSE_MORE) {
        /*
         * Paused right after the head: the byte the parser stopped on is
         * the one it took for the head's final LF.
         */
        if (n >= len || data[n] != '\n') {
            rp->error = "CR not followed by LF";
            return RESPARSE_ERROR;
        }
        /* That LF is checked again with what follows: expected. */
        rp->cr_pending = true;
        rp->head_ready = false;
        rp->in_body = true;
        rp->head.body_in_hand = rp->head.framing == RESPARSE_NO_BODY ||
                                (rp->head.framing == RESPARSE_LENGTH &&
                                 len - n - 1 >= rp->head.content_length);
        if (rp->cb->on_head(rp->arg, &rp->head) < 0) {
            rp->stopped = true;
            return RESPARSE_STOPPED;
        }
        http_parser_pause(&rp->parser, 0);
        return RESPARSE_MORE;
    }
    if (st == RESPARSE_MORE && n < len) {
        rp->error = "parser stopped short";
        return RESPARSE_ERROR;
    }
    return st;
}

enum resparse_status
resparse_feed(struct resparse *rp, const char *data, size_t len, size_t *used)
{
    enum resparse_status st = RESPARSE_MORE;

    *used = 0;
    if (rp->done || rp->stopped || rp->error != NULL) {
        rp->error = rp->error != NULL ? rp->error : "fed after the end";
        return rp->stopped ? RESPARSE_STOPPED : RESPARSE_ERROR;
    }
    if (len > 0) {
        rp->started = true;
    }
    while (*used < len && st == RESPARSE_MORE) {
        size_t take = len - *used, n;
        bool had_head = resparse_head_seen(rp);

        if (!rp->head_seen) {
            /*
             * Feed no more than the head may still take, so that the
             * limit holds however the bytes are split.
             */
            size_t room = rp->max_head_bytes - rp->head_bytes;

            if (room == 0) {
                rp->error = "response head too large";
                return RESPARSE_ERROR;
            }
            take = take < room ? take : room;
        }
        st = execute(rp, data + *used, take, &n);
        *used += n;
        /* Only the stop after the head may consume nothing. */
        if (st == RESPARSE_MORE && n == 0 && had_head) {
            rp->error = "parser made no progress";
            return RESPARSE_ERROR;
        }
    }
    return st;
}

enum resparse_status
resparse_eof(struct resparse *rp)
{
    if (rp->done || rp->stopped || rp->error != NULL) {
        return outcome(rp);
    }
    if (!rp->head_seen) {
        rp->error = rp->started ? "connection closed inside the response head"
                                : "connection closed before a response";
        return RESPARSE_ERROR;
    }
    http_parser_execute(&rp->parser, &settings, NULL, 0);
    if (rp->done) {
        if (rp->cb->on_complete(rp->arg) < 0) {
            rp->stopped = true;
        }
        return outcome(rp);
    }
    if (rp->error == NULL) {
        rp->error = "connection closed inside the response body";
    }
    return RESPARSE_ERROR;
}

const char *
resparse_error(const struct resparse *rp)
{
    return rp->error != NULL ? rp->error : "no error";
}

bool
resparse_head_seen(const struct resparse *rp)
{
    /* A head still being checked has not been reported. */
    return rp->head_seen && !rp->head_ready;
}

uint64_t
resparse_consumed(const struct resparse *rp)
{
    return rp->consumed;
}
