#include "evreq.h"

#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/keyvalq_struct.h>
#include <event2/util.h>

#include "clock.h"
#include "headers.h"
#include "netaddr.h"
#include "problem.h"

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

uint64_t
evreq_head_bytes(struct evhttp_request *req)
{
    const struct evkeyval *kv;
    uint64_t n = strlen(evhttp_request_get_uri(req)) + 16;

    TAILQ_FOREACH (kv, evhttp_request_get_input_headers(req), next) {
        n += strlen(kv->key) + strlen(kv->value) + 4;
    }
    return n;
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
    evreq_add_date(req);
}

void
evreq_http_date(time_t sec, char *out)
{
    struct tm tm;

    gmtime_r(&sec, &tm);
    evutil_date_rfc1123(out, EVREQ_DATE_LEN, &tm);
}

void
evreq_add_date(struct evhttp_request *req)
{
    /* This thread's Date text and the second it is for. */
    static _Thread_local time_t cached_sec = -1;
    static _Thread_local char cached[32];
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    time_t now = (time_t)(clock_wall_ms() / 1000);

    if (evhttp_find_header(h, "Date") != NULL) {
        return;
    }
    if (now != cached_sec) {
        evreq_http_date(now, cached);
        cached_sec = now;
    }
    evhttp_add_header(h, "Date", cached);
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
