/*
 * config.c - the model of gateway.yaml: a config's defaults, its
 * references and its free, and lookups. Loading is in load*.c.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "jwtcheck.h"
#include "load.h"
#include "log.h"
#include "xmalloc.h"

struct config *
config_new(const char *name)
{
    struct config *cfg = xcalloc(1, sizeof(*cfg));

    cfg->refs = 1;
    cfg->path = xstrdup(name);
    cfg->server.listen.host = xstrdup("0.0.0.0");
    cfg->server.listen.port = 8080;
    cfg->server.workers = 0;
    cfg->server.max_header_bytes = 16 * 1024;
    cfg->server.max_body_bytes = 8 * 1024 * 1024;
    cfg->server.client_timeout_ms = 60 * 1000;
    cfg->server.header_timeout_ms = 10 * 1000;
    cfg->server.max_connections = 0;
    cfg->server.drain_timeout_ms = 10 * 1000;
    cfg->server.max_held = 4096;
    cfg->admin.listen.host = xstrdup("127.0.0.1");
    cfg->admin.listen.port = 9090;
    cfg->redis.port = 6379;
    cfg->redis.timeout_ms = 50;
    cfg->redis.key_prefix = xstrdup("sluice:");
    cfg->redis.max_in_flight = 1024;
    cfg->identity.user_header = xstrdup("X-User-Id");
    cfg->identity.role_header = xstrdup("X-User-Role");
    cfg->identity.ipv6_prefix = 64;
    cfg->upstream.connect_timeout_ms = 5 * 1000;
    cfg->upstream.response_timeout_ms = 60 * 1000;
    cfg->upstream.keepalive = 256;
    cfg->upstream.tls.verify = true;
    cfg->server.tls.listen.host = xstrdup("0.0.0.0");
    cfg->server.tls.listen.port = 8443;
    cfg->log_level = LOG_INFO;
    cfg->access_log = xstrdup("-");
    cfg->access_format = ACCESSLOG_TEXT;
    return cfg;
}

static void
upstream_tls_deinit(struct upstream_tls *t)
{
    free(t->ca_file);
    free(t->cert_file);
    free(t->key_file);
}

void
route_deinit(struct route *r)
{
    upstream_tls_deinit(&r->tls);
    free(r->id);
    free(r->uri.host);
    free(r->uri.base_path);
    free(r->uri.authority);
    for (size_t i = 0; i < r->npredicates; i++) {
        predicate_deinit(&r->predicates[i]);
    }
    free(r->predicates);
    for (size_t i = 0; i < r->nfilters; i++) {
        filter_deinit(&r->filters[i]);
    }
    free(r->filters);
    for (size_t i = 0; i < r->nrate_limiters; i++) {
        rate_limit_conf_free(r->rate_limiters[i]);
    }
    free(r->rate_limiters);
}

void
config_free(struct config *cfg)
{
    if (cfg->tls != NULL) {
        cfg->tls_free(cfg->tls);
    }
    free(cfg->path);
    free(cfg->server.listen.host);
    free(cfg->server.tls.listen.host);
    free(cfg->server.tls.cert_file);
    free(cfg->server.tls.key_file);
    upstream_tls_deinit(&cfg->upstream.tls);
    free(cfg->server.trusted_proxies);
    free(cfg->admin.listen.host);
    free(cfg->redis.host);
    free(cfg->redis.user);
    free(cfg->redis.password);
    free(cfg->redis.key_prefix);
    free(cfg->redis.sentinel_master);
    for (size_t i = 0; i < cfg->redis.nsentinels; i++) {
        free(cfg->redis.sentinels[i].host);
    }
    free(cfg->redis.sentinels);
    free(cfg->redis.sentinel_password);
    for (size_t i = 0; i < cfg->redis.ncluster_nodes; i++) {
        free(cfg->redis.cluster_nodes[i].host);
    }
    free(cfg->redis.cluster_nodes);
    free(cfg->identity.user_header);
    free(cfg->identity.role_header);
    jwtcheck_conf_free(cfg->identity.jwt);
    free(cfg->access_log);
    config_errors_deinit(&cfg->warnings);
    /* Routes first: their tiers point into the limiters. */
    for (size_t i = 0; i < cfg->nroutes; i++) {
        route_deinit(&cfg->routes[i]);
    }
    free(cfg->routes);
    for (size_t i = 0; i < cfg->nlimiters; i++) {
        free(cfg->limiters[i].name);
        free(cfg->limiters[i].policy);
    }
    free(cfg->limiters);
    free(cfg);
}

struct config *
config_ref(struct config *cfg)
{
    __atomic_add_fetch(&cfg->refs, 1, __ATOMIC_RELAXED);
    return cfg;
}

void
config_unref(struct config *cfg)
{
    if (cfg == NULL) {
        return;
    }
    /* Release so that this thread's reads happen before the free; acquire
     * so that the freeing thread sees every other thread's. */
    if (__atomic_sub_fetch(&cfg->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        config_free(cfg);
    }
}

const struct route *
config_find_route(const struct config *cfg, const char *id)
{
    for (size_t i = 0; i < cfg->nroutes; i++) {
        if (cfg->routes[i].id != NULL && strcmp(cfg->routes[i].id, id) == 0) {
            return &cfg->routes[i];
        }
    }
    return NULL;
}
