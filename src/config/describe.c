#include "describe.h"

#include <stdlib.h>

#include "config.h"
#include "routes_json.h"
#include "strbuf.h"

/* "token_bucket 10/1000ms burst 20" for one rule of 'd'. */
static void
add_rule(struct strbuf *b, const struct limiter_def *d, size_t i)
{
    const struct limit_rule *r = &d->rules[i];

    strbuf_addf(b, " %llu per %llu ms", (unsigned long long)r->limit,
                (unsigned long long)r->window_ms);
    if (limit_algorithm_is_bucket(d->algorithm)) {
        strbuf_addf(b, ", burst %llu", (unsigned long long)r->burst);
    }
}

static void
add_rate_limiter(struct strbuf *b, const struct route *r,
                 const struct rate_limit_conf *rl)
{
    static const char *const styles[] = {"both", "ietf", "legacy", "none",
                                         "scg"};

    for (size_t i = 0; i < rl->ntiers; i++) {
        const struct tier *t = &rl->tiers[i];
        const struct limiter_def *d = t->limiter;

        strbuf_addf(b, "    limiter %s", d != NULL ? d->name : "none");
        if (d != NULL) {
            strbuf_addf(b, ": %s", limit_algorithm_name(d->algorithm));
            for (size_t j = 0; j < d->nrules; j++) {
                add_rule(b, d, j);
            }
            if (d->delay) {
                strbuf_addf(b, ", delay mode up to %llu ms",
                            (unsigned long long)d->max_delay_ms);
            }
            if (d->refuse_all) {
                strbuf_adds(b, " (refuses every request)");
            }
            strbuf_adds(b, rl->derived == d ? " (from redis-rate-limiter)"
                                            : " (from limiters:)");
        }
        if (t->key.text != NULL) {
            strbuf_addf(b, "; key %s", t->key.text);
        } else {
            strbuf_adds(b, "; no key");
        }
        if (t->when_role != NULL) {
            strbuf_addf(b, "; when role %s", t->when_role);
        }
        strbuf_adds(b, "\n");
    }
    strbuf_addf(b,
                "      cost %llu, scope %s, backend %s, on_redis_error %s, "
                "headers %s, refusal %d, no key %s",
                (unsigned long long)rl->cost, rl->scope,
                rl->local ? "local" : "redis",
                limit_redis_failure_name(rl->on_redis_error),
                (size_t)rl->headers < sizeof(styles) / sizeof(styles[0])
                    ? styles[rl->headers]
                    : "?",
                rl->deny_status, rl->empty_key_allow ? "allowed" : "refused");
    if (!rl->empty_key_allow) {
        strbuf_addf(b, " (%d)",
                    rl->empty_key_status != 0 ? rl->empty_key_status : 403);
    }
    if (rl->dry_run) {
        strbuf_adds(b, ", dry run (counts, never refuses)");
    }
    strbuf_adds(b, "\n");
    (void)r;
}

char *
config_describe(const struct config *cfg)
{
    struct strbuf b = STRBUF_INIT;

    strbuf_addf(&b, "%s, %zu route%s, in the order they are tried:\n",
                cfg->scg_shape ? "Spring Cloud Gateway shape"
                               : "gateway.yaml shape",
                cfg->nroutes, cfg->nroutes == 1 ? "" : "s");
    for (size_t i = 0; i < cfg->nroutes; i++) {
        const struct route *r = &cfg->routes[i];

        strbuf_addf(&b, "  route %s: order %lld, uri %s://%s%s%s\n", r->id,
                    (long long)r->order, r->uri.https ? "https" : "http",
                    r->uri.authority, r->uri.base_path,
                    r->uri.https && !r->tls.verify ? ", tls verify: false"
                                                   : "");
        for (size_t j = 0; j < r->npredicates; j++) {
            strbuf_adds(&b, "    predicate ");
            routes_json_predicate(&b, &r->predicates[j]);
            strbuf_adds(&b, "\n");
        }
        for (size_t j = 0; j < r->nfilters; j++) {
            strbuf_adds(&b, "    filter ");
            routes_json_filter(&b, &r->filters[j]);
            strbuf_adds(&b, "\n");
        }
        for (size_t j = 0; j < r->nrate_limiters; j++) {
            strbuf_adds(&b, "    filter RequestRateLimiter\n");
            add_rate_limiter(&b, r, r->rate_limiters[j]);
        }
    }
    if (cfg->redis.enabled && cfg->redis.cluster_nodes != NULL) {
        strbuf_addf(&b, "redis: cluster, %zu seed node%s, timeout %llu ms\n",
                    cfg->redis.ncluster_nodes,
                    cfg->redis.ncluster_nodes == 1 ? "" : "s",
                    (unsigned long long)cfg->redis.timeout_ms);
    } else if (cfg->redis.enabled && cfg->redis.sentinel_master != NULL) {
        strbuf_addf(&b, "redis: sentinel master %s, %zu sentinel%s, db %u\n",
                    cfg->redis.sentinel_master, cfg->redis.nsentinels,
                    cfg->redis.nsentinels == 1 ? "" : "s", cfg->redis.db);
    } else if (cfg->redis.enabled) {
        strbuf_addf(&b, "redis: %s:%u, db %u, timeout %llu ms\n",
                    cfg->redis.host, (unsigned)cfg->redis.port, cfg->redis.db,
                    (unsigned long long)cfg->redis.timeout_ms);
    }
    if (cfg->server.listen.host != NULL) {
        strbuf_addf(&b, "listen: %s:%u\n", cfg->server.listen.host,
                    (unsigned)cfg->server.listen.port);
    } else {
        strbuf_adds(&b, "listen: off\n");
    }
    if (cfg->server.tls.enabled) {
        strbuf_addf(&b, "tls listen: %s:%u\n", cfg->server.tls.listen.host,
                    (unsigned)cfg->server.tls.listen.port);
    }
    strbuf_addf(&b, "ignored keys: %zu\n", cfg->warnings.n);
    for (size_t i = 0; i < cfg->warnings.n; i++) {
        strbuf_addf(&b, "  %s\n", cfg->warnings.v[i]);
    }
    return strbuf_take(&b);
}
