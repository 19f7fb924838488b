#include "admin.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "config.h"
#include "log.h"
#include "netaddr.h"
#include "problem.h"

#include "regexp.h"
#include "strbuf.h"
#include "xmalloc.h"

struct admin {
    struct evhttp *http;         /* owned */
    const struct admin_ops *ops; /* borrowed */
    void *arg;                   /* for 'ops' */
};

/* ---- GET /routes ---- */

static const char *
kind_name(const struct kind_spec *specs, size_t n, int kind)
{
    for (size_t i = 0; i < n; i++) {
        if (specs[i].kind == kind) {
            return specs[i].name;
        }
    }
    return "?";
}

static void
add_cidr(struct strbuf *b, const struct cidr *c)
{
    char addr[64];

    netaddr_format(&c->addr, addr, sizeof(addr));
    strbuf_addf(b, "\"%s/%u\"", addr, c->prefix);
}

static void
add_predicate(struct strbuf *b, const struct predicate *p)
{
    size_t n;
    const struct kind_spec *specs = predicate_specs(&n);
    const char *sep = "";

    strbuf_adds(b, "{\"name\":");
    strbuf_add_json(b, kind_name(specs, n, (int)p->kind));
    strbuf_adds(b, ",\"args\":[");
    if (p->name != NULL) {
        strbuf_add_json(b, p->name);
        sep = ",";
        if (p->re != NULL) {
            strbuf_adds(b, ",");
            strbuf_add_json(b, regexp_pattern(p->re));
        }
    }
    for (size_t i = 0; i < p->nvalues; i++) {
        strbuf_adds(b, sep);
        strbuf_add_json(b, p->values[i]);
        sep = ",";
    }
    for (size_t i = 0; i < p->ncidrs; i++) {
        strbuf_adds(b, sep);
        add_cidr(b, &p->cidrs[i]);
        sep = ",";
    }
    strbuf_adds(b, "]}");
}

static void
add_rate_limiter(struct strbuf *b, const struct rate_limit_conf *rl)
{
    static const char *const policies[] = {"local", "allow", "deny"};

    strbuf_adds(b, "{\"name\":\"RequestRateLimiter\",\"tiers\":[");
    for (size_t i = 0; i < rl->ntiers; i++) {
        const struct tier *t = &rl->tiers[i];

        strbuf_adds(b, i > 0 ? ",{\"role\":" : "{\"role\":");
        strbuf_add_json(b, t->when_role);
        strbuf_adds(b, ",\"key\":");
        strbuf_add_json(b, t->key.text);
        strbuf_adds(b, ",\"limiter\":");
        strbuf_add_json(b, t->limiter != NULL ? t->limiter->name : "none");
        strbuf_adds(b, "}");
    }
    strbuf_addf(b, "],\"cost\":%llu,\"scope\":", (unsigned long long)rl->cost);
    strbuf_add_json(b, rl->scope);
    strbuf_addf(b,
                ",\"backend\":\"%s\",\"on_redis_error\":\"%s\","
                "\"dry_run\":%s}",
                rl->local ? "local" : "redis", policies[rl->on_redis_error],
                rl->dry_run ? "true" : "false");
}

static void
add_filter(struct strbuf *b, const struct filter *f)
{
    size_t n;
    const struct kind_spec *specs = filter_specs(&n);
    const char *sep = "";

    if (f->kind == FILTER_REQUEST_RATE_LIMITER) {
        add_rate_limiter(b, f->rl);
        return;
    }
    strbuf_adds(b, "{\"name\":");
    strbuf_add_json(b, kind_name(specs, n, (int)f->kind));
    strbuf_adds(b, ",\"args\":[");
    if (f->kind == FILTER_STRIP_PREFIX) {
        strbuf_addf(b, "\"%u\"", f->parts);
    }
    if (f->re != NULL) {
        strbuf_add_json(b, regexp_pattern(f->re));
        sep = ",";
    }
    if (f->name != NULL) {
        strbuf_adds(b, sep);
        strbuf_add_json(b, f->name);
        sep = ",";
    }
    if (f->value != NULL) {
        strbuf_adds(b, sep);
        strbuf_add_json(b, f->value);
    }
    strbuf_adds(b, "]}");
}

static void
add_limiter(struct strbuf *b, const struct limiter_def *d)
{
    strbuf_adds(b, "{\"name\":");
    strbuf_add_json(b, d->name);
    strbuf_addf(b, ",\"algorithm\":\"%s\",\"tag\":\"%s\",\"mode\":\"%s\"",
                limit_algorithm_name(d->algorithm), d->tag,
                d->delay ? "delay" : "deny");
    if (d->delay) {
        strbuf_addf(b, ",\"max_delay_ms\":%llu",
                    (unsigned long long)d->max_delay_ms);
    }
    strbuf_adds(b, ",\"rules\":[");
    for (size_t i = 0; i < d->nrules; i++) {
        strbuf_addf(b, "%s{\"limit\":%llu,\"window_ms\":%llu,\"burst\":%llu}",
                    i > 0 ? "," : "", (unsigned long long)d->rules[i].limit,
                    (unsigned long long)d->rules[i].window_ms,
                    (unsigned long long)d->rules[i].burst);
    }
    strbuf_adds(b, "]}");
}

char *
admin_routes_json(const struct config *cfg)
{
    struct strbuf b = STRBUF_INIT;

    strbuf_adds(&b, "{\"routes\":[");
    for (size_t i = 0; i < cfg->nroutes; i++) {
        const struct route *r = &cfg->routes[i];

        strbuf_adds(&b, i > 0 ? ",{\"id\":" : "{\"id\":");
        strbuf_add_json(&b, r->id);
        strbuf_addf(&b,
                    ",\"uri\":\"http://%s%s\",\"connect_timeout_ms\":"
                    "%llu,\"response_timeout_ms\":%llu,\"predicates\":[",
                    r->uri.authority, r->uri.base_path,
                    (unsigned long long)r->connect_timeout_ms,
                    (unsigned long long)r->response_timeout_ms);
        for (size_t j = 0; j < r->npredicates; j++) {
            strbuf_adds(&b, j > 0 ? "," : "");
            add_predicate(&b, &r->predicates[j]);
        }
        strbuf_adds(&b, "],\"filters\":[");
        for (size_t j = 0; j < r->nfilters; j++) {
            strbuf_adds(&b, j > 0 ? "," : "");
            add_filter(&b, &r->filters[j]);
        }
        strbuf_adds(&b, "]}");
    }
    strbuf_adds(&b, "],\"limiters\":[");
    for (size_t i = 0; i < cfg->nlimiters; i++) {
        strbuf_adds(&b, i > 0 ? "," : "");
        add_limiter(&b, &cfg->limiters[i]);
    }
    strbuf_adds(&b, "]}\n");
    return strbuf_take(&b);
}

/* ---- the listener ---- */

static void
reply(struct evhttp_request *req, int status, const char *type,
      const char *body)
{
    struct evbuffer *buf = evbuffer_new();

    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      type);
    evbuffer_add(buf, body, strlen(body));
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

    if (path == NULL) {
        path = "";
    }
    if (strcmp(path, "/reload") == 0) {
        if (cmd != EVHTTP_REQ_POST) {
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
        char *body = admin_routes_json(cfg);

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
          const struct admin_ops *ops, void *arg)
{
    struct admin *a = xcalloc(1, sizeof(*a));

    a->ops = ops;
    a->arg = arg;
    a->http = evhttp_new(base);
    evhttp_set_default_content_type(a->http, NULL);
    evhttp_set_allowed_methods(a->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD |
                                            EVHTTP_REQ_POST);
    evhttp_set_max_headers_size(a->http, 16 * 1024);
    evhttp_set_max_body_size(a->http, 64 * 1024);
    evhttp_set_gencb(a->http, on_request, a);
    if (evhttp_bind_socket_with_handle(a->http, addr->host, addr->port) ==
        NULL) {
        log_error("admin: listen %s:%u: %s", addr->host, addr->port,
                  strerror(errno));
        admin_free(a);
        return NULL;
    }
    return a;
}

void
admin_free(struct admin *a)
{
    if (a == NULL) {
        return;
    }
    if (a->http != NULL) {
        evhttp_free(a->http);
    }
    free(a);
}
