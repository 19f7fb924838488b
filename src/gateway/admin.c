#include "admin.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>

#include "clientconn.h"
#include "clock.h"
#include "config.h"
#include "evreq.h"
#include "routes_json.h"
#include "log.h"
#include "netaddr.h"
#include "problem.h"
#include "strbuf.h"
#include "xmalloc.h"

/* No count of its own: the descriptor limit bounds admin connections. */
#define ADMIN_MAX_CONNECTIONS SIZE_MAX

struct admin {
    struct evhttp *http;         /* owned */
    struct clientconns *conns;   /* its connections, as the gateway's
                                    (clientconn.h); owned, or NULL */
    const struct admin_ops *ops; /* borrowed */
    void *arg;                   /* for 'ops' */
};

/* ---- the listener ---- */

/*
 * Content-Length is set here, not left to evhttp: a HEAD answer says the
 * length the GET would have, while evreq_reply_prepare() empties its body.
 */
static void
reply(struct evhttp_request *req, int status, const char *type,
      const char *body)
{
    struct evkeyvalq *out = evhttp_request_get_output_headers(req);
    struct evbuffer *buf = evbuffer_new();
    char len[24];

    snprintf(len, sizeof(len), "%zu", strlen(body));
    evhttp_add_header(out, "Content-Type", type);
    evhttp_add_header(out, "Content-Length", len);
    evbuffer_add(buf, body, strlen(body));
    evreq_reply_prepare(req, buf);
    evhttp_send_reply(req, status,
                      status == 200 ? "OK" : problem_reason(status), buf);
    evbuffer_free(buf);
}

static void
on_reload(struct admin *a, struct evhttp_request *req)
{
    struct config_errors errs;
    struct strbuf b = STRBUF_INIT;
    char *body;

    config_errors_init(&errs);
    if (a->ops->reload(a->arg, &errs) == 0) {
        struct config *cfg = a->ops->config(a->arg);

        strbuf_addf(&b, "{\"status\":\"reloaded\",\"routes\":%zu}\n",
                    cfg->nroutes);
        config_unref(cfg);
        body = strbuf_take(&b);
        reply(req, 200, "application/json", body);
    } else {
        strbuf_adds(&b, "{\"status\":\"error\",\"errors\":[");
        for (size_t i = 0; i < errs.n; i++) {
            strbuf_adds(&b, i > 0 ? "," : "");
            strbuf_add_json(&b, errs.v[i]);
        }
        strbuf_adds(&b, "]}\n");
        body = strbuf_take(&b);
        reply(req, 400, "application/json", body);
    }
    free(body);
    config_errors_deinit(&errs);
}

static void
on_request(struct evhttp_request *req, void *arg)
{
    struct admin *a = arg;
    const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    bool get = cmd == EVHTTP_REQ_GET || cmd == EVHTTP_REQ_HEAD;

    clientconns_begin_request(a->conns, req);
    if (path == NULL) {
        path = "";
    }
    if (strcmp(path, "/reload") == 0) {
        if (cmd != EVHTTP_REQ_POST) {
            evhttp_add_header(evhttp_request_get_output_headers(req), "Allow",
                              "POST");
            reply(req, 405, "application/json",
                  "{\"error\":\"use POST /reload\"}\n");
            return;
        }
        on_reload(a, req);
        return;
    }
    if (!get &&
        (strcmp(path, "/health") == 0 || strcmp(path, "/ready") == 0 ||
         strcmp(path, "/routes") == 0 || strcmp(path, "/metrics") == 0)) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow",
                          "GET, HEAD");
        reply(req, 405, "application/json", "{\"error\":\"use GET\"}\n");
        return;
    }
    if (strcmp(path, "/health") == 0) {
        reply(req, 200, "application/json", "{\"status\":\"ok\"}\n");
    } else if (strcmp(path, "/ready") == 0) {
        char why[200] = "";
        bool ok = a->ops->ready(a->arg, why, sizeof(why));
        struct strbuf b = STRBUF_INIT;
        char *body;

        strbuf_addf(&b, "{\"ready\":%s", ok ? "true" : "false");
        if (!ok) {
            strbuf_adds(&b, ",\"reason\":");
            strbuf_add_json(&b, why);
        }
        strbuf_adds(&b, "}\n");
        body = strbuf_take(&b);
        reply(req, ok ? 200 : 503, "application/json", body);
        free(body);
    } else if (strcmp(path, "/routes") == 0) {
        struct config *cfg = a->ops->config(a->arg);
        char *body = config_routes_json(cfg);

        config_unref(cfg);
        reply(req, 200, "application/json", body);
        free(body);
    } else if (strcmp(path, "/metrics") == 0) {
        char *body = a->ops->metrics(a->arg);

        reply(req, 200, "text/plain; version=0.0.4; charset=utf-8", body);
        free(body);
    } else {
        reply(req, 404, "application/json", "{\"error\":\"not found\"}\n");
    }
}

struct admin *
admin_new(struct event_base *base, const struct listen_addr *addr,
          uint64_t timeout_ms, const struct admin_ops *ops, void *arg)
{
    struct admin *a = xcalloc(1, sizeof(*a));
    struct evhttp_bound_socket *bound;
    struct timeval tv = clock_tv(timeout_ms);
    struct clientconns_conf conf = {timeout_ms, timeout_ms,
                                    ADMIN_MAX_CONNECTIONS, "admin", ""};

    a->ops = ops;
    a->arg = arg;
    a->http = evhttp_new(base);
    evhttp_set_default_content_type(a->http, NULL);
    evhttp_set_allowed_methods(a->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD |
                                            EVHTTP_REQ_POST);
    evhttp_set_max_headers_size(a->http, 16 * 1024);
    evhttp_set_max_body_size(a->http, 64 * 1024);
    evhttp_set_timeout_tv(a->http, &tv);
    evhttp_set_gencb(a->http, on_request, a);
    bound = evhttp_bind_socket_with_handle(a->http, addr->host, addr->port);
    if (bound == NULL) {
        log_error("admin: listen %s:%u: %s", addr->host, addr->port,
                  strerror(errno));
        admin_free(a);
        return NULL;
    }
    a->conns = clientconns_new(
        base, a->http, evhttp_bound_socket_get_listener(bound), NULL, &conf);
    return a;
}

void
admin_set_timeout(struct admin *a, uint64_t ms)
{
    struct timeval tv = clock_tv(ms);
    struct clientconns_conf conf = {ms, ms, ADMIN_MAX_CONNECTIONS, "admin", ""};

    evhttp_set_timeout_tv(a->http, &tv);
    clientconns_configure(a->conns, &conf);
}

void
admin_free(struct admin *a)
{
    if (a == NULL) {
        return;
    }
    clientconns_free(a->conns);
    if (a->http != NULL) {
        evhttp_free(a->http);
    }
    free(a);
}
