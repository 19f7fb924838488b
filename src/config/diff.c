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

/* The way to the Redis server: how it is found, and who logs in. */
static bool
same_redis_server(const struct redis_conf *a, const struct redis_conf *b)
{
    return a->enabled == b->enabled && same_str(a->host, b->host) &&
           a->port == b->port && a->db == b->db && same_str(a->user, b->user) &&
           same_str(a->password, b->password) && same_sentinel(a, b) &&
           same_nodes(a->cluster_nodes, a->ncluster_nodes, b->cluster_nodes,
                      b->ncluster_nodes);
}

size_t
config_restart_only(const struct config *cur, const struct config *next,
                    const char *out[CONFIG_RESTART_MAX])
{
    const struct server_conf *sa = &cur->server, *sb = &next->server;
    const struct redis_conf *a = &cur->redis, *b = &next->redis;
    struct {
        const char *name;
        bool changed;
    } settings[] = {
        {"server.listen", !same_listen(&sa->listen, &sb->listen)},
        {"server.workers", sa->workers != sb->workers},
        {"server.watch", sa->watch != sb->watch},
        {"server.tls", sa->tls.enabled != sb->tls.enabled},
        {"server.tls.listen",
         sa->tls.enabled && sb->tls.enabled &&
             !same_listen(&sa->tls.listen, &sb->tls.listen)},
        /* The workers' Redis connections are made once; the prefix is
         * read per request. */
        {"redis", !same_redis_server(a, b)},
        {"redis.timeout", a->timeout_ms != b->timeout_ms},
        {"redis.max_in_flight", a->max_in_flight != b->max_in_flight},
        {"admin", cur->admin.enabled != next->admin.enabled},
        {"admin.listen",
         cur->admin.enabled && next->admin.enabled &&
             !same_listen(&cur->admin.listen, &next->admin.listen)},
        {"log.level", cur->log_level != next->log_level},
        {"log.access", !same_str(cur->access_log, next->access_log)},
        {"log.access_format", cur->access_format != next->access_format},
    };
    size_t n = 0;

    _Static_assert(sizeof(settings) / sizeof(settings[0]) <= CONFIG_RESTART_MAX,
                   "every setting fits the caller's array");
    for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++) {
        if (settings[i].changed) {
            out[n++] = settings[i].name;
        }
    }
    return n;
}

const char *
config_restart_note(const char *name)
{
    if (strcmp(name, "server.tls.listen") == 0) {
        return "; its certificate and key are read again now";
    }
    if (strcmp(name, "redis") == 0) {
        return "; redis.key_prefix applies now";
    }
    return "";
}

const char *
config_reload_refusal(const struct config *cur, const struct config *next)
{
    if (cur->redis.enabled && !next->redis.enabled) {
        return "redis: the section was removed, which would move the "
               "limiters from Redis to a bucket in this process; that takes "
               "a restart";
    }
    if (!cur->redis.enabled && next->redis.enabled) {
        return "redis: the section was added, which would move the limiters "
               "from buckets in this process to Redis; that takes a restart";
    }
    return NULL;
}
