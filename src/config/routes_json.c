#include "routes_json.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "config.h"
#include "limit.h"
#include "strbuf.h"

static const char *
kind_name(const struct kind_spec *specs, size_t n, int kind)
{
    const char *name = argspec_kind_name(specs, n, kind);

    return name != NULL ? name : "?";
}

/* ,"args":[...]}: the arguments as given, null where a sparse one was
 * left out. */
static void
add_given(struct strbuf *b, const struct argspec_given *g)
{
    strbuf_adds(b, ",\"args\":[");
    for (size_t i = 0; i < g->n; i++) {
        strbuf_adds(b, i > 0 ? "," : "");
        if (g->v[i] != NULL) {
            strbuf_add_json(b, g->v[i]);
        } else {
            strbuf_adds(b, "null");
        }
    }
    strbuf_adds(b, "]}");
}

void
routes_json_predicate(struct strbuf *b, const struct predicate *p)
{
    size_t n;
    const struct kind_spec *specs = predicate_specs(&n);

    strbuf_adds(b, "{\"name\":");
    strbuf_add_json(b, kind_name(specs, n, (int)p->kind));
    add_given(b, &p->given);
}

static void
add_rate_limiter(struct strbuf *b, const struct rate_limit_conf *rl)
{
    strbuf_adds(b, "{\"name\":\"RequestRateLimiter\",\"tiers\":[");
    for (size_t i = 0; i < rl->ntiers; i++) {
        const struct tier *t = &rl->tiers[i];

        strbuf_adds(b, i > 0 ? ",{\"role\":" : "{\"role\":");
        strbuf_add_json(b, t->when_role);
        for (size_t j = 0; j < t->nwhen_claims; j++) {
            strbuf_adds(b, j > 0 ? "," : ",\"claims\":{");
            strbuf_add_json(b, t->when_claims[j].name);
            strbuf_adds(b, ":");
            strbuf_add_json(b, t->when_claims[j].value);
            strbuf_adds(b, j + 1 == t->nwhen_claims ? "}" : "");
        }
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
                rl->local ? "local" : "redis",
                limit_redis_failure_name(rl->on_redis_error),
                rl->dry_run ? "true" : "false");
}

void
routes_json_filter(struct strbuf *b, const struct filter *f)
{
    size_t n;
    const struct kind_spec *specs = filter_specs(&n);

    strbuf_adds(b, "{\"name\":");
    strbuf_add_json(b, kind_name(specs, n, (int)f->kind));
    add_given(b, &f->given);
}

void
routes_json_limiter(struct strbuf *b, const struct limiter_def *d)
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
    if (d->lease > 0) {
        strbuf_addf(b, ",\"lease\":%u", d->lease);
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
config_routes_json(const struct config *cfg)
{
    struct strbuf b = STRBUF_INIT;
    bool first_limiter;

    strbuf_adds(&b, "{\"routes\":[");
    for (size_t i = 0; i < cfg->nroutes; i++) {
        const struct route *r = &cfg->routes[i];

        strbuf_adds(&b, i > 0 ? ",{\"id\":" : "{\"id\":");
        strbuf_add_json(&b, r->id);
        strbuf_addf(&b,
                    ",\"uri\":\"%s://%s%s\",\"connect_timeout_ms\":"
                    "%llu,\"response_timeout_ms\":%llu,\"predicates\":[",
                    r->uri.https ? "https" : "http", r->uri.authority,
                    r->uri.base_path, (unsigned long long)r->connect_timeout_ms,
                    (unsigned long long)r->response_timeout_ms);
        for (size_t j = 0; j < r->npredicates; j++) {
            strbuf_adds(&b, j > 0 ? "," : "");
            routes_json_predicate(&b, &r->predicates[j]);
        }
        strbuf_adds(&b, "],\"filters\":[");
        for (size_t j = 0; j < r->nfilters; j++) {
            strbuf_adds(&b, j > 0 ? "," : "");
            routes_json_filter(&b, &r->filters[j]);
        }
        /* As written under filters:, after the route's other filters. */
        for (size_t j = 0; j < r->nrate_limiters; j++) {
            strbuf_adds(&b, r->nfilters + j > 0 ? "," : "");
            add_rate_limiter(&b, r->rate_limiters[j]);
        }
        strbuf_adds(&b, "]}");
    }
    strbuf_adds(&b, "],\"limiters\":[");
    first_limiter = cfg->nlimiters == 0;
    for (size_t i = 0; i < cfg->nlimiters; i++) {
        strbuf_adds(&b, i > 0 ? "," : "");
        routes_json_limiter(&b, &cfg->limiters[i]);
    }
    /* Those built from Spring's redis-rate-limiter args, route by route. */
    for (size_t i = 0; i < cfg->nroutes; i++) {
        for (size_t j = 0; j < cfg->routes[i].nrate_limiters; j++) {
            const struct rate_limit_conf *rl = cfg->routes[i].rate_limiters[j];

            if (rl->derived != NULL) {
                strbuf_adds(&b, first_limiter ? "" : ",");
                routes_json_limiter(&b, rl->derived);
                first_limiter = false;
            }
        }
    }
    strbuf_adds(&b, "]}\n");
    return strbuf_take(&b);
}
