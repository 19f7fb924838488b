/*
 * load_redis.c - the redis: section of gateway.yaml: the URL (user,
 * password, host, port, database) or, instead, the Sentinel setup that
 * names the primary (master name, sentinels, and the same user, password
 * and database) or the seed nodes of a Redis Cluster (with user and
 * password), the timeout and the key prefix. Pure.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "load.h"
#include "urlcode.h"
#include "xmalloc.h"

/* Longest key prefix: it goes into every Redis key (ratekey.h, and
 * KEY_FIXED_MAX in load_ratelimiter.c). */
#define KEY_PREFIX_MAX 64

/*
 * Every Redis key starts with the prefix. A '{' in it would become the
 * Redis Cluster hash tag of every key, and a space or control character
 * has no business in a key name.
 */
static void
parse_key_prefix(struct loader *ld, yaml_node_t *node, const struct field *f,
                 void *base, const struct load_path *path)
{
    char **out = field_ptr(base, f);
    const char *s = load_scalar(ld, node, path);

    if (s == NULL) {
        return;
    }
    if (strlen(s) > KEY_PREFIX_MAX) {
        report(ld, node, path, "key prefix is longer than %d bytes",
               KEY_PREFIX_MAX);
        return;
    }
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p <= 0x20 || *p == 0x7f || *p == '{' || *p == '}') {
            report(ld, node, path,
                   "bad key prefix \"%s\" (no braces, spaces or control "
                   "characters)",
                   s);
            return;
        }
    }
    free(*out);
    *out = xstrdup(s);
}

/*
 * redis://[user[:password]@]host[:port][/db]. The URL is not quoted in
 * messages: it may hold a password, and errors end up in logs.
 */
static const char *
split_redis_url(const char *s, struct redis_conf *r)
{
    const char *hp;
    const char *at;
    const char *slash;
    const char *why;
    uint64_t db = 0;

    if (strncasecmp(s, "rediss://", 9) == 0) {
        return "TLS (rediss://) is not supported";
    }
    if (strncasecmp(s, "redis://", 8) != 0) {
        return "expected redis://[user[:password]@]host[:port][/db]";
    }
    hp = s + 8;
    /* The last '@': a password with a raw '@' or '/' still works. */
    at = strrchr(hp, '@');
    if (at != NULL) {
        const char *colon = memchr(hp, ':', (size_t)(at - hp));
        size_t ulen = colon != NULL ? (size_t)(colon - hp) : (size_t)(at - hp);

        if (ulen > 0) {
            r->user = urlcode_percent_decode(hp, ulen);
            if (r->user == NULL) {
                return "bad percent-encoding in the user name";
            }
        }
        if (colon != NULL && colon + 1 < at) {
            r->password =
                urlcode_percent_decode(colon + 1, (size_t)(at - colon - 1));
            if (r->password == NULL) {
                return "bad percent-encoding in the password";
            }
        }
        hp = at + 1;
    }
    slash = strchr(hp, '/');
    r->port = 6379;
    why = load_split_host_port(
        hp, slash != NULL ? (size_t)(slash - hp) : strlen(hp), false, &r->host,
        &r->port);
    if (why != NULL) {
        return why;
    }
    if (slash != NULL && slash[1] != '\0' &&
        load_decimal(slash + 1, strlen(slash + 1), 1000000, &db) < 0) {
        return "bad database number";
    }
    r->db = (unsigned)db;
    return NULL;
}

void
load_redis_url(struct loader *ld, yaml_node_t *node, const struct field *f,
               void *base, const struct load_path *path)
{
    struct redis_conf *r = base;
    const char *s = load_scalar(ld, node, path);
    const char *why;

    (void)f;
    if (s == NULL) {
        return;
    }
    why = split_redis_url(s, r);
    if (why != NULL) {
        report(ld, node, path, "bad redis url: %s", why);
    }
}

/* Sentinel's name of the primary: it comes back as the first word of
 * '+switch-master', so one word, and at most MASTER_NAME_MAX bytes. */
#define MASTER_NAME_MAX 255

void
load_master_name(struct loader *ld, yaml_node_t *node, const struct field *f,
                 void *base, const struct load_path *path)
{
    const char *s = load_scalar(ld, node, path);

    if (s == NULL) {
        return;
    }
    if (strlen(s) > MASTER_NAME_MAX) {
        report(ld, node, path, "master name longer than %d bytes",
               MASTER_NAME_MAX);
        return;
    }
    for (const char *p = s; *p != '\0'; p++) {
        if ((unsigned char)*p <= ' ' || *p == 0x7f) {
            report(ld, node, path,
                   "master name with a space or control character");
            return;
        }
    }
    load_text(ld, node, f, base, path);
}

/* host:port each, at least one, into 'out' and 'n'; 'what' names them. */
static void
parse_nodes(struct loader *ld, yaml_node_t *node, const struct load_path *path,
            const char *what, struct redis_node **out, size_t *n)
{
    size_t len;

    if (!load_expect_sequence(ld, node, path)) {
        return;
    }
    len = load_sequence_length(node);
    if (len == 0) {
        report(ld, node, path, "at least one %s, as host:port", what);
        return;
    }
    *out = xcalloc(len, sizeof(**out));
    for (size_t i = 0; i < len; i++) {
        yaml_node_t *item = load_sequence_item(ld, node, i);
        const struct load_path *sub = PATH_INDEX(path, i);
        struct redis_node *rn = &(*out)[*n];
        const char *s = load_scalar(ld, item, sub);
        const char *why;

        if (s == NULL) {
            continue;
        }
        why = load_split_host_port(s, strlen(s), true, &rn->host, &rn->port);
        if (why != NULL) {
            report(ld, item, sub, "bad %s address \"%s\": %s", what, s, why);
            continue;
        }
        (*n)++;
    }
}

static void
parse_sentinel_nodes(struct loader *ld, yaml_node_t *node,
                     const struct field *f, void *base,
                     const struct load_path *path)
{
    struct redis_conf *r = base;

    (void)f;
    parse_nodes(ld, node, path, "sentinel", &r->sentinels, &r->nsentinels);
}

static void
parse_cluster_nodes(struct loader *ld, yaml_node_t *node, const struct field *f,
                    void *base, const struct load_path *path)
{
    struct redis_conf *r = base;

    (void)f;
    parse_nodes(ld, node, path, "cluster node", &r->cluster_nodes,
                &r->ncluster_nodes);
}

/* A cluster serves database 0 only: SELECT of any other fails. */
static void
parse_cluster_db(struct loader *ld, yaml_node_t *node, const struct field *f,
                 void *base, const struct load_path *path)
{
    unsigned *db = field_ptr(base, f);

    load_uint(ld, node, f, base, path);
    if (*db != 0) {
        report(ld, node, path, "a Redis Cluster has database 0 only (got %u)",
               *db);
        *db = 0;
    }
}

static const struct field sentinel_fields[] = {
    {.key = "master",
     .parse = load_master_name,
     .offset = offsetof(struct redis_conf, sentinel_master),
     .required = true},
    {.key = "nodes", .parse = parse_sentinel_nodes, .required = true},
    {.key = "db",
     .parse = load_uint,
     .offset = offsetof(struct redis_conf, db),
     .max = 1000000},
    {.key = "user",
     .parse = load_text,
     .offset = offsetof(struct redis_conf, user)},
    {.key = "password",
     .parse = load_text,
     .offset = offsetof(struct redis_conf, password)},
    {.key = "sentinel_password",
     .parse = load_text,
     .offset = offsetof(struct redis_conf, sentinel_password)},
};

static const struct table sentinel_table = TABLE(sentinel_fields);

static const struct field cluster_fields[] = {
    {.key = "nodes", .parse = parse_cluster_nodes, .required = true},
    {.key = "db",
     .parse = parse_cluster_db,
     .offset = offsetof(struct redis_conf, db),
     .max = 1000000},
    {.key = "user",
     .parse = load_text,
     .offset = offsetof(struct redis_conf, user)},
    {.key = "password",
     .parse = load_text,
     .offset = offsetof(struct redis_conf, password)},
};

static const struct table cluster_table = TABLE(cluster_fields);

/* The cluster: mapping fills the redis_conf itself. */
static void
parse_cluster(struct loader *ld, yaml_node_t *node, const struct field *f,
              void *base, const struct load_path *path)
{
    (void)f;
    load_fields(ld, node, path, &cluster_table, base);
}

/* The sentinel: mapping fills the redis_conf itself. */
static void
parse_sentinel(struct loader *ld, yaml_node_t *node, const struct field *f,
               void *base, const struct load_path *path)
{
    (void)f;
    load_fields(ld, node, path, &sentinel_table, base);
}

/* The key node 'key' of the mapping 'node', or 'node' if absent. */
static yaml_node_t *
key_node(struct loader *ld, yaml_node_t *node, const char *key)
{
    const yaml_node_pair_t *p = load_mapping_pair(ld, node, key);

    return p != NULL ? load_node_at(ld, p->key) : node;
}

/* One way to name the server: the url, the sentinels, or the cluster. */
static void
check_redis(struct loader *ld, yaml_node_t *node, const struct load_path *path,
            void *base)
{
    struct redis_conf *r = base;

    if (r->cluster_nodes != NULL &&
        (r->host != NULL || r->sentinel_master != NULL)) {
        report(ld, key_node(ld, node, "cluster"), PATH_KEY(path, "cluster"),
               "%s and cluster are exclusive: in a cluster, the nodes name "
               "the primaries",
               r->host != NULL ? "url" : "sentinel");
    } else if (r->host != NULL && r->sentinel_master != NULL) {
        report(ld, key_node(ld, node, "sentinel"), PATH_KEY(path, "sentinel"),
               "url and sentinel are exclusive: with Sentinel, the "
               "sentinels name the primary");
    } else if (r->host == NULL && r->sentinel_master == NULL &&
               r->cluster_nodes == NULL) {
        report(ld, node, PATH_KEY(path, "url"),
               "required (or sentinel, or cluster)");
    }
}

static const struct field redis_fields[] = {
    {.key = "url", .parse = load_redis_url},
    {.key = "sentinel", .parse = parse_sentinel},
    {.key = "cluster", .parse = parse_cluster},
    {.key = "timeout",
     .parse = load_duration,
     .offset = offsetof(struct redis_conf, timeout_ms),
     .min = 1},
    {.key = "key_prefix",
     .parse = parse_key_prefix,
     .offset = offsetof(struct redis_conf, key_prefix)},
    {.key = "max_in_flight",
     .parse = load_uint,
     .offset = offsetof(struct redis_conf, max_in_flight),
     .min = 1,
     .max = 1000000},
};

const struct table load_redis_table = {
    .fields = redis_fields,
    .n = NELEMS(redis_fields),
    .flag_given = true,
    .given = offsetof(struct redis_conf, enabled),
    .check = check_redis,
};
