#include "diff.h"

#include <stdbool.h>
#include <string.h>

#include "config.h"

static bool
same_str(const char *a, const char *b)
{
    return (a == NULL && b == NULL) ||
           (a != NULL && b != NULL && strcmp(a, b) == 0);
}

static bool
same_listen(const struct listen_addr *a, const struct listen_addr *b)
{
    return same_str(a->host, b->host) && a->port == b->port;
}

static bool
same_nodes(const struct redis_node *a, size_t na, const struct redis_node *b,
           size_t nb)
{
    if (na != nb) {
        return false;
    }
    for (size_t i = 0; i < na; i++) {
        if (!same_str(a[i].host, b[i].host) || a[i].port != b[i].port) {
            return false;
        }
    }
    return true;
}

static bool
same_sentinel(const struct redis_conf *a, const struct redis_conf *b)
{
    return same_str(a->sentinel_master, b->sentinel_master) &&
           same_str(a->sentinel_password, b->sentinel_password) &&
           same_nodes(a->sentinels, a->nsentinels, b->sentinels, b->nsentinels);
}

unsigned
config_restart_only(const struct config *cur, const struct config *next)
{
    const struct redis_conf *a = &cur->redis, *b = &next->redis;
    unsigned groups = 0;

    if (!same_listen(&cur->server.listen, &next->server.listen) ||
        cur->server.workers != next->server.workers ||
        cur->server.watch != next->server.watch ||
        cur->server.tls.enabled != next->server.tls.enabled ||
        (cur->server.tls.enabled &&
         !same_listen(&cur->server.tls.listen, &next->server.tls.listen))) {
        groups |= CONFIG_RESTART_LISTEN;
    }
    /* The workers' Redis connections are made once; the prefix is read
     * per request. */
    if (a->enabled != b->enabled || !same_str(a->host, b->host) ||
        a->port != b->port || a->db != b->db || !same_str(a->user, b->user) ||
        !same_str(a->password, b->password) || a->timeout_ms != b->timeout_ms ||
        a->max_in_flight != b->max_in_flight || !same_sentinel(a, b) ||
        !same_nodes(a->cluster_nodes, a->ncluster_nodes, b->cluster_nodes,
                    b->ncluster_nodes)) {
        groups |= CONFIG_RESTART_REDIS;
    }
    if (cur->admin.enabled != next->admin.enabled ||
        !same_listen(&cur->admin.listen, &next->admin.listen)) {
        groups |= CONFIG_RESTART_ADMIN;
    }
    if (!same_str(cur->access_log, next->access_log) ||
        cur->access_format != next->access_format ||
        cur->log_level != next->log_level) {
        groups |= CONFIG_RESTART_LOG;
    }
    return groups;
}

const char *
config_restart_only_str(enum config_restart_only group)
{
    switch (group) {
    case CONFIG_RESTART_LISTEN:
        return "server.listen, server.workers, server.watch and server.tls "
               "(but for its certificate, re-read now) take effect on "
               "restart only";
    case CONFIG_RESTART_REDIS:
        return "the redis: connection settings take effect on restart only "
               "(key_prefix applies now)";
    case CONFIG_RESTART_ADMIN:
        return "admin: takes effect on restart only";
    case CONFIG_RESTART_LOG:
        return "log: takes effect on restart only";
    }
    return "?";
}
