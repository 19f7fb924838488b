/*
 * load_redis.c - the redis: section of gateway.yaml: the URL (user,
 * password, host, port, database) or, instead, the Sentinel setup that
 * names the primary (master name, sentinels, and the same user, password
 * and database), the timeout and the key prefix. Pure.
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

/* The sentinels: host:port each, at least one. */
static void
parse_sentinel_nodes(struct loader *ld, yaml_node_t *node,
                     const struct field *f, void *base,
                     const struct load_path *path)
{
    struct redis_conf *r = base;
    size_t n;

    (void)f;
    if (!load_expect_sequence(ld, node, path)) {
        return;
    }
    n = load_sequence_length(node);
    if (n == 0) {
        report(ld, node, path, "at least one sentinel, as host:port");
        return;
    }
    r->sentinels = xcalloc(n, sizeof(*r->sentinels));
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *item = load_sequence_item(ld, node, i);
        const struct load_path *sub = PATH_INDEX(path, i);
        struct redis_node *rn = &r->sentinels[r->nsentinels];
        const char *s = load_scalar(ld, item, sub);
        const char *why;

        if (s == NULL) {
            continue;
        }
        why = load_split_host_port(s, strlen(s), true, &rn->host, &rn->port);
        if (why != NULL) {
            report(ld, item, sub, "bad sentinel address \"%s\": %s", s, why);
            continue;
        }
        r->nsentinels++;
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
    for (yaml_node_pair_t *p = node->data.mapping.pairs.start;
         node->type == YAML_MAPPING_NODE && p < node->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = load_node_at(ld, p->key);

        if (k->type == YAML_SCALAR_NODE &&
            strcmp((const char *)k->data.scalar.value, key) == 0) {
            return k;
        }
    }
    return node;
}

/* One way to name the server: the url, or the sentinels. */
static void
check_redis(struct loader *ld, yaml_node_t *node, const struct load_path *path,
            void *base)
{
    struct redis_conf *r = base;

    if (r->host != NULL && r->sentinel_master != NULL) {
        report(ld, key_node(ld, node, "sentinel"), PATH_KEY(path, "sentinel"),
               "url and sentinel are exclusive: with Sentinel, the "
               "sentinels name the primary");
    } else if (r->host == NULL && r->sentinel_master == NULL) {
        report(ld, node, PATH_KEY(path, "url"), "required (or sentinel)");
    }
}

static const struct field redis_fields[] = {
    {.key = "url", .parse = load_redis_url},
    {.key = "sentinel", .parse = parse_sentinel},
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
