#include "evreq.h"

#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http_struct.h>
#include <event2/keyvalq_struct.h>
#include <event2/util.h>

#include "clock.h"
#include "headers.h"
#include "netaddr.h"
#include "problem.h"
#include "strbuf.h"

static const struct {
    enum evhttp_cmd_type cmd;
    const char *name;
} method_names[] = {
    {EVHTTP_REQ_GET, "GET"},       {EVHTTP_REQ_POST, "POST"},
    {EVHTTP_REQ_HEAD, "HEAD"},     {EVHTTP_REQ_PUT, "PUT"},
    {EVHTTP_REQ_DELETE, "DELETE"}, {EVHTTP_REQ_OPTIONS, "OPTIONS"},
    {EVHTTP_REQ_TRACE, "TRACE"},   {EVHTTP_REQ_CONNECT, "CONNECT"},
    {EVHTTP_REQ_PATCH, "PATCH"},
};

const char *
evreq_method_name(enum evhttp_cmd_type cmd)
{
    for (size_t i = 0; i < sizeof(method_names) / sizeof(method_names[0]);
         i++) {
        if (method_names[i].cmd == cmd) {
            return method_names[i].name;
        }
    }
    return "GET";
}

void
evreq_headers(struct headers *h, struct evhttp_request *req)
{
    const struct evkeyval *kv;

    TAILQ_FOREACH (kv, evhttp_request_get_input_headers(req), next) {
        headers_add(h, kv->key, kv->value);
    }
}

bool
evreq_peer(struct evhttp_connection *conn, struct netaddr *out)
{
    const struct sockaddr *sa = evhttp_connection_get_addr(conn);

    return sa != NULL && netaddr_from_sockaddr(sa, out) == 0;
}

struct evbuffer *
evreq_problem_body(struct evhttp_request *req, int status, const char *detail)
{
    struct evbuffer *buf = evbuffer_new();
    char *body;

    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      PROBLEM_CONTENT_TYPE);
    body = problem_json(status, problem_reason(status), detail,
                        evhttp_request_get_uri(req));
    evbuffer_add(buf, body, strlen(body));
    free(body);
    return buf;
}

void
evreq_reply_prepare(struct evhttp_request *req, struct evbuffer *body)
{
    if (evhttp_request_get_command(req) == EVHTTP_REQ_HEAD) {
        evbuffer_drain(body, evbuffer_get_length(body));
    }
}

void
evreq_http_date(time_t sec, char *out)
{
    struct tm tm;

    gmtime_r(&sec, &tm);
    evutil_date_rfc1123(out, EVREQ_DATE_LEN, &tm);
}

const char *
evreq_date_now(void)
{
    /* This thread's Date text and the second it is for. */
    static _Thread_local time_t cached_sec = -1;
    static _Thread_local char cached[EVREQ_DATE_LEN];
    time_t now = (time_t)(clock_wall_ms() / 1000);

    if (now != cached_sec) {
        evreq_http_date(now, cached);
        cached_sec = now;
    }
    return cached;
}

void
evreq_add_date(struct evhttp_request *req)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);

    if (evhttp_find_header(h, "Date") == NULL) {
        evhttp_add_header(h, "Date", evreq_date_now());
    }
}

/* The most plaintext one TLS record carries (RFC 8446 5.1). */
#define TLS_RECORD_MAX 16384

void
evreq_coalesce(struct evhttp_connection *conn)
{
    struct evbuffer *out;

    if (conn == NULL) {
        return;
    }
    out = bufferevent_get_output(evhttp_connection_get_bufferevent(conn));
    if (evbuffer_get_length(out) <= TLS_RECORD_MAX) {
        evbuffer_pullup(out, -1);
    }
}

void
evreq_flush(struct evhttp_connection *conn)
{
    struct bufferevent *bev = evhttp_connection_get_bufferevent(conn);
    struct evbuffer *out = bufferevent_get_output(bev);
    evutil_socket_t fd = bufferevent_getfd(bev);

    if (fd < 0 || evbuffer_get_length(out) == 0) {
        return;
    }
    /* A bufferevent thaws the front of its output only while it writes
       (bufferevent_sock.c); this writes the same way. */
    evbuffer_unfreeze(out, 1);
    (void)evbuffer_write(out, fd);
    evbuffer_freeze(out, 1);
}

void
evreq_close_after_reply(struct evhttp_request *req)
{
    struct evkeyvalq *out = evhttp_request_get_output_headers(req);

    evhttp_remove_header(out, "Connection");
    evhttp_add_header(out, "Connection", "close");
}

/* evhttp_is_connection_close() of libevent 2.1.12: a request in absolute
 * form for a host evhttp does not serve is a proxy request, kept open only
 * by "Proxy-Connection: keep-alive". */
static bool
says_close(int flags, struct evkeyvalq *fields)
{
    const char *v;

    if (flags & EVHTTP_PROXY_REQUEST) {
        v = evhttp_find_header(fields, "Proxy-Connection");
        return v == NULL || evutil_ascii_strcasecmp(v, "keep-alive") != 0;
    }
    v = evhttp_find_header(fields, "Connection");
    return v != NULL && evutil_ascii_strcasecmp(v, "close") == 0;
}

bool
evreq_closes_after(struct evhttp_request *req)
{
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    bool before_11 = req->major < 1 || (req->major == 1 && req->minor < 1);

    if (before_11) {
        const char *v = evhttp_find_header(in, "Connection");

        if (v == NULL || evutil_ascii_strncasecmp(v, "keep-alive", 10) != 0) {
            return true;
        }
    }
    if (evhttp_request_get_command(req) == EVHTTP_REQ_CONNECT) {
        return false;
    }
    return says_close(req->flags, in) ||
           says_close(req->flags, evhttp_request_get_output_headers(req));
}

/*
 * Hands 'buf' to evhttp as the next bytes of the reply to 'req', to send
 * as they are. With no evhttp_send_reply_start() before it, evhttp
 * neither frames nor holds back what it is given, once its chunked flag
 * is off: evhttp sets that flag for a request that came with a chunked
 * body, and clears it only in evhttp_send_reply_start(). The connection
 * is then set to write, and to call 'cb' whenever its output drained.
 */
static void
pass_through(struct evhttp_request *req, struct evbuffer *buf,
             void (*cb)(struct evhttp_connection *, void *), void *arg)
{
    req->chunked = 0;
    evhttp_send_reply_chunk_with_cb(req, buf, cb, arg);
}

bool
evreq_own_head(struct evhttp_request *req)
{
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);

    return cmd != EVHTTP_REQ_HEAD && cmd != EVHTTP_REQ_CONNECT;
}

void
evreq_head_begin(struct strbuf *text, struct evhttp_request *req, int status,
                 const char *reason)
{
    char line[16] = "HTTP/1.1 000 ";

    /* HTTP/1.0 to a 1.0 client, as evhttp answers; 1.1 to any other,
     * also to the versions the gateway refuses. */
    if (req->major == 1 && req->minor == 0) {
        line[7] = '0';
    }
    line[9] = (char)('0' + status / 100 % 10);
    line[10] = (char)('0' + status / 10 % 10);
    line[11] = (char)('0' + status % 10);
    strbuf_reset(text);
    strbuf_add(text, line, 13);
    strbuf_adds(text, reason);
    strbuf_add(text, "\r\n", 2);
}

void
evreq_head_field(struct strbuf *text, const char *name, const char *value)
{
    size_t nl = strlen(name), vl = strlen(value);
    char *p = strbuf_append(text, nl + vl + 4);

    /* One growth check for the line, not four. */
    memcpy(p, name, nl);
    p += nl;
    *p++ = ':';
    *p++ = ' ';
    memcpy(p, value, vl);
    p += vl;
    *p++ = '\r';
    *p = '\n';
}

void
evreq_head_finish(struct strbuf *text, struct evbuffer *out)
{
    strbuf_add(text, "\r\n", 2);
    evbuffer_add(out, text->p, text->n);
}

void
evreq_send_held(struct evhttp_request *req, struct evbuffer *buf,
                void (*cb)(struct evhttp_connection *, void *), void *arg)
{
    pass_through(req, buf, cb, arg);
}

bool
evreq_write_out(struct evhttp_request *req, struct evbuffer *buf,
                void (*cb)(struct evhttp_connection *, void *), void *arg)
{
    struct bufferevent *bev =
        evhttp_connection_get_bufferevent(evhttp_request_get_connection(req));
    evutil_socket_t fd = bufferevent_getfd(bev);

    /* Behind bytes already queued, only the bufferevent may write. */
    if (fd >= 0 && evbuffer_get_length(bufferevent_get_output(bev)) == 0) {
        while (evbuffer_get_length(buf) > 0 && evbuffer_write(buf, fd) > 0) {
        }
    }
    if (evbuffer_get_length(buf) == 0) {
        /* As pass_through(): evhttp_send_reply_end() must not add a last
         * chunk for a request that came with a chunked body. */
        req->chunked = 0;
        return true;
    }
    pass_through(req, buf, cb, arg);
    return false;
}

void
evreq_chunk_wrap(struct evbuffer *buf)
{
    static const char hex[] = "0123456789abcdef";
    size_t len = evbuffer_get_length(buf);
    char size[2 * sizeof(size_t) + 2];
    char *p = size + sizeof(size);

    *--p = '\n';
    *--p = '\r';
    do {
        *--p = hex[len & 0xf];
        len >>= 4;
    } while (len != 0);
    evbuffer_prepend(buf, p, (size_t)(size + sizeof(size) - p));
    evbuffer_add(buf, "\r\n", 2);
}

/* 'name' is "Connection" or "Content-Length": fields whose say is
 * evreq_send_reply()'s own. */
static bool
is_framing_field(const char *name)
{
    return evutil_ascii_strcasecmp(name, "Connection") == 0 ||
           evutil_ascii_strcasecmp(name, "Content-Length") == 0;
}

/* Appends a field of an answer unless its say is evreq_send_reply()'s
 * own; notes a Date field in '*has_date'. */
static void
reply_field(struct strbuf *text, const char *name, const char *value,
            bool *has_date)
{
    if (is_framing_field(name)) {
        return;
    }
    if (!*has_date && evutil_ascii_strcasecmp(name, "Date") == 0) {
        *has_date = true;
    }
    evreq_head_field(text, name, value);
}

void
evreq_send_reply(struct evhttp_request *req, int status,
                 const struct headers *fields, struct evbuffer *body,
                 struct strbuf *text, struct evbuffer *spare)
{
    struct evkeyvalq *out = evhttp_request_get_output_headers(req);
    size_t nfields = fields != NULL ? fields->n : 0;
    const struct evkeyval *kv;
    char len[U64_DEC_MAX];
    bool has_date = false;

    if (text == NULL || !evreq_own_head(req)) {
        /* evhttp frees the request, never the connection, in the call,
           and writes on the next write event: the answer waits whole. */
        struct evhttp_connection *conn =
            text == NULL ? evhttp_request_get_connection(req) : NULL;

        for (size_t i = 0; i < nfields; i++) {
            evhttp_add_header(out, fields->v[i].name, fields->v[i].value);
        }
        evreq_add_date(req);
        evhttp_send_reply(req, status, problem_reason(status), body);
        evreq_coalesce(conn);
        return;
    }
    evreq_head_begin(text, req, status, problem_reason(status));
    TAILQ_FOREACH (kv, out, next) {
        reply_field(text, kv->key, kv->value, &has_date);
    }
    for (size_t i = 0; i < nfields; i++) {
        reply_field(text, fields->v[i].name, fields->v[i].value, &has_date);
    }
    evreq_head_field(text, "Content-Length",
                     u64_dec(evbuffer_get_length(body), len));
    if (!has_date) {
        evreq_head_field(text, "Date", evreq_date_now());
    }
    if (evreq_closes_after(req)) {
        evreq_head_field(text, "Connection", "close");
    } else if (req->major == 1 && req->minor == 0) {
        evreq_head_field(text, "Connection", "keep-alive");
    }
    evreq_head_finish(text, spare);
    evbuffer_add_buffer(spare, body);
    evreq_write_out(req, spare, NULL, NULL);
    evhttp_send_reply_end(req);
}
