/*
 * load_scg.c - a file in Spring Cloud Gateway's shape (application.yml):
 * spring.cloud.gateway routes and default-filters, spring.redis or
 * spring.data.redis, server.port, sluice's own sections under sluice:,
 * and the keys Spring files hold that mean nothing here, warned about
 * and ignored. Everything is read into the same struct config as
 * gateway.yaml, through the same tables where the words are the same.
 * Pure.
 */
#include <stdlib.h>
#include <string.h>

#include "load.h"
#include "units.h"
#include "xmalloc.h"

/* A Spring duration: "2s", "500ms", or a bare number of milliseconds. */
static void
parse_spring_duration(struct loader *ld, yaml_node_t *node,
                      const struct field *f, void *base,
                      const struct load_path *path)
{
    const char *s = load_scalar(ld, node, path);
    uint64_t v;

    if (s == NULL) {
        return;
    }
    if (load_decimal(s, strlen(s), LOAD_NUMBER_MAX, &v) < 0 &&
        (units_parse_duration(s, &v) < 0 || v > LOAD_NUMBER_MAX)) {
        report(ld, node, path,
               "bad duration \"%s\" (expected milliseconds, or a number and "
               "a unit: ms, s, m, h or d)",
               s);
        return;
    }
    if (v < f->min) {
        report(ld, node, path, "duration must be greater than 0, got \"%s\"",
               s);
        return;
    }
    *(uint64_t *)field_ptr(base, f) = v;
}

/* A port, 1 to 65535, into a uint16_t. */
static void
parse_port(struct loader *ld, yaml_node_t *node, const struct field *f,
           void *base, const struct load_path *path)
{
    const char *s = load_scalar(ld, node, path);
    uint64_t v;

    if (s == NULL) {
        return;
    }
    if (load_decimal(s, strlen(s), 65535, &v) < 0 || v == 0) {
        report(ld, node, path,
               "bad port \"%s\" (expected an integer from 1 to 65535)", s);
        return;
    }
    *(uint16_t *)field_ptr(base, f) = (uint16_t)v;
}

/* A string that Spring files often leave empty ("password:"): empty is
 * the same as absent. */
static void
parse_optional_text(struct loader *ld, yaml_node_t *node, const struct field *f,
                    void *base, const struct load_path *path)
{
    if (load_is_null(node) ||
        (node->type == YAML_SCALAR_NODE && node->data.scalar.length == 0)) {
        return;
    }
    load_text(ld, node, f, base, path);
}

/* A list of host:port being read into a redis_conf. */
struct node_list {
    struct redis_node **v; /* &r->sentinels or &r->cluster_nodes */
    size_t *n;             /* its count */
    const char *what;      /* "sentinel", "cluster node": for messages */
};

/* One "host:port" (n bytes of 's') into the next slot of 'nl'. */
static void
add_node(struct loader *ld, yaml_node_t *node, const struct load_path *path,
         const char *s, size_t n, const struct node_list *nl)
{
    struct redis_node *rn = &(*nl->v)[*nl->n];
    const char *why;

    while (n > 0 && (*s == ' ' || *s == '\t')) {
        s++;
        n--;
    }
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) {
        n--;
    }
    why = load_split_host_port(s, n, true, &rn->host, &rn->port);
    if (why != NULL) {
        report(ld, node, path, "bad %s address \"%.*s\": %s", nl->what, (int)n,
               s, why);
        return;
    }
    (*nl->n)++;
}

/* Spring's nodes: "h1:26379,h2:26379", or a sequence of host:port. */
static void
parse_node_list(struct loader *ld, yaml_node_t *node,
                const struct load_path *path, const struct node_list *nl)
{
    size_t before = ld->ndiags;

    if (node->type == YAML_SEQUENCE_NODE) {
        size_t n = load_sequence_length(node);

        *nl->v = xcalloc(n + 1, sizeof(**nl->v));
        for (size_t i = 0; i < n; i++) {
            yaml_node_t *item = load_sequence_item(ld, node, i);
            const struct load_path *sub = PATH_INDEX(path, i);
            const char *s = load_scalar(ld, item, sub);

            if (s != NULL) {
                add_node(ld, item, sub, s, strlen(s), nl);
            }
        }
    } else {
        const char *s = load_scalar(ld, node, path);
        size_t n = 1;

        if (s == NULL) {
            return;
        }
        for (const char *p = s; *p != '\0'; p++) {
            n += *p == ',';
        }
        *nl->v = xcalloc(n, sizeof(**nl->v));
        for (const char *p = s;;) {
            size_t len = strcspn(p, ",");

            add_node(ld, node, path, p, len, nl);
            if (p[len] == '\0') {
                break;
            }
            p += len + 1;
        }
    }
    if (*nl->n == 0 && ld->ndiags == before) {
        report(ld, node, path, "at least one %s, as host:port", nl->what);
    }
}

static void
parse_sentinel_nodes(struct loader *ld, yaml_node_t *node,
                     const struct field *f, void *base,
                     const struct load_path *path)
{
    struct redis_conf *r = base;
    struct node_list nl = {&r->sentinels, &r->nsentinels, "sentinel"};

    (void)f;
    parse_node_list(ld, node, path, &nl);
}

static void
parse_cluster_nodes(struct loader *ld, yaml_node_t *node, const struct field *f,
                    void *base, const struct load_path *path)
{
    struct redis_conf *r = base;
    struct node_list nl = {&r->cluster_nodes, &r->ncluster_nodes,
                           "cluster node"};

    (void)f;
    parse_node_list(ld, node, path, &nl);
}

static const struct field sentinel_fields[] = {
    {.key = "master",
     .parse = load_master_name,
     .offset = offsetof(struct redis_conf, sentinel_master),
     .required = true},
    {.key = "nodes", .parse = parse_sentinel_nodes, .required = true},
    {.key = "password",
     .parse = parse_optional_text,
     .offset = offsetof(struct redis_conf, sentinel_password)},
    {.key = "username", .parse = load_ignored},
};

static const struct table sentinel_table = TABLE(sentinel_fields);

static void
parse_sentinel(struct loader *ld, yaml_node_t *node, const struct field *f,
               void *base, const struct load_path *path)
{
    (void)f;
    load_fields(ld, node, path, &sentinel_table, base);
}

static const struct field cluster_fields[] = {
    {.key = "nodes", .parse = parse_cluster_nodes, .required = true},
    {.key = "max-redirects", .parse = load_ignored},
};

static const struct table cluster_table = TABLE(cluster_fields);

static void
parse_cluster(struct loader *ld, yaml_node_t *node, const struct field *f,
              void *base, const struct load_path *path)
{
    (void)f;
    load_fields(ld, node, path, &cluster_table, base);
}

/*
 * One way to name the server: host (or url), sentinel or cluster. Spring's
 * host defaults to localhost; with Sentinel or a cluster there is none,
 * and a cluster has database 0 only.
 */
static void
check_spring_redis(struct loader *ld, yaml_node_t *node,
                   const struct load_path *path, void *base)
{
    struct redis_conf *r = base;

    if (r->cluster_nodes != NULL &&
        (r->host != NULL || r->sentinel_master != NULL)) {
        report(ld, node, PATH_KEY(path, "cluster"),
               "%s and cluster are exclusive: in a cluster, the nodes name "
               "the servers",
               r->host != NULL ? "host (or url)" : "sentinel");
    } else if (r->host != NULL && r->sentinel_master != NULL) {
        report(ld, node, PATH_KEY(path, "sentinel"),
               "host (or url) and sentinel are exclusive: with Sentinel, the "
               "sentinels name the primary");
    } else if (r->cluster_nodes != NULL && r->db != 0) {
        report(ld, node, PATH_KEY(path, "database"),
               "a Redis Cluster has database 0 only (got %u)", r->db);
    } else if (r->host == NULL && r->sentinel_master == NULL &&
               r->cluster_nodes == NULL) {
        r->host = xstrdup("localhost");
    }
}

/*
 * As in Spring Boot, the url overrides host, port, username, password and
 * database, given or not: what it leaves out takes the default (port
 * 6379, no user, no password, database 0). Read after those keys.
 */
static void
parse_spring_url(struct loader *ld, yaml_node_t *node, const struct field *f,
                 void *base, const struct load_path *path)
{
    struct redis_conf *r = base;

    free(r->host);
    free(r->user);
    free(r->password);
    r->host = NULL;
    r->user = NULL;
    r->password = NULL;
    r->port = 6379;
    r->db = 0;
    load_redis_url(ld, node, f, base, path);
}

/* spring.redis and spring.data.redis: Spring Boot's names for them. */
static const struct field spring_redis_fields[] = {
    {.key = "host",
     .parse = load_text,
     .offset = offsetof(struct redis_conf, host)},
    {.key = "port",
     .parse = parse_port,
     .offset = offsetof(struct redis_conf, port)},
    {.key = "username",
     .parse = parse_optional_text,
     .offset = offsetof(struct redis_conf, user)},
    {.key = "password",
     .parse = parse_optional_text,
     .offset = offsetof(struct redis_conf, password)},
    {.key = "database",
     .parse = load_uint,
     .offset = offsetof(struct redis_conf, db),
     .max = 1000000},
    {.key = "url", .parse = parse_spring_url},
    {.key = "timeout",
     .parse = parse_spring_duration,
     .offset = offsetof(struct redis_conf, timeout_ms),
     .min = 1},
    {.key = "sentinel", .parse = parse_sentinel},
    {.key = "cluster", .parse = parse_cluster},
    {.key = "connect-timeout", .parse = load_ignored},
    {.key = "client-name", .parse = load_ignored},
    {.key = "client-type", .parse = load_ignored},
    {.key = "lettuce", .parse = load_ignored},
    {.key = "jedis", .parse = load_ignored},
};

static const struct table spring_redis_table = {
    .fields = spring_redis_fields,
    .n = NELEMS(spring_redis_fields),
    .check = check_spring_redis,
};

/* One Redis, named once: sluice.redis, spring.redis or
 * spring.data.redis. */
static void
parse_spring_redis(struct loader *ld, yaml_node_t *node, const struct field *f,
                   void *base, const struct load_path *path)
{
    struct config *cfg = ld->cfg;

    (void)f;
    (void)base;
    if (cfg->redis.enabled) {
        report(ld, node, path,
               "Redis is already set (by sluice.redis, spring.redis or "
               "spring.data.redis): give it once");
        return;
    }
    load_fields(ld, node, path, &spring_redis_table, &cfg->redis);
    cfg->redis.enabled = true;
}

static const struct field spring_data_fields[] = {
    {.key = "redis", .parse = parse_spring_redis},
};

static const struct table spring_data_table = TABLE(spring_data_fields);

/* spring.cloud.gateway.httpclient: the defaults of every route's
 * upstream, as upstream: gives them. */
static const struct field httpclient_fields[] = {
    {.key = "connect-timeout",
     .parse = parse_spring_duration,
     .offset = offsetof(struct upstream_conf, connect_timeout_ms),
     .min = 1},
    {.key = "response-timeout",
     .parse = parse_spring_duration,
     .offset = offsetof(struct upstream_conf, response_timeout_ms),
     .min = 1},
};

static const struct table httpclient_table = TABLE(httpclient_fields);

static void
parse_httpclient(struct loader *ld, yaml_node_t *node, const struct field *f,
                 void *base, const struct load_path *path)
{
    (void)f;
    (void)base;
    load_fields(ld, node, path, &httpclient_table, &ld->cfg->upstream);
}

/* spring.cloud.gateway, or spring.cloud.gateway.server.webflux (the
 * prefix of Spring Cloud Gateway 4.3 on, the older one deprecated): kept
 * as nodes, read together. */
struct gateway_form {
    yaml_node_t *routes;   /* borrowed */
    yaml_node_t *defaults; /* default-filters, or NULL; borrowed */
    yaml_node_t *server;   /* server:, or NULL; borrowed */
};

static const struct field gateway_fields[] = {
    {.key = "routes",
     .parse = load_node,
     .offset = offsetof(struct gateway_form, routes)},
    {.key = "default-filters",
     .parse = load_node,
     .offset = offsetof(struct gateway_form, defaults)},
    {.key = "filter", .parse = load_scg_rrl_defaults},
    {.key = "httpclient", .parse = parse_httpclient},
    {.key = "discovery", .parse = load_ignored},
    {.key = "server",
     .parse = load_node,
     .offset = offsetof(struct gateway_form, server)},
};

static const struct table gateway_table = {
    .fields = gateway_fields,
    .n = NELEMS(gateway_fields),
    .keys_first = true,
};

/* spring.cloud.gateway.server: only webflux (webmvc is the other
 * gateway, whose routes are functions). */
struct server_form {
    yaml_node_t *webflux; /* borrowed */
};

static const struct field gateway_server_fields[] = {
    {.key = "webflux",
     .parse = load_node,
     .offset = offsetof(struct server_form, webflux)},
};

static const struct table gateway_server_table = {
    .fields = gateway_server_fields,
    .n = NELEMS(gateway_server_fields),
    .keys_first = true,
};

/* The first key of 'node' (a mapping) other than 'except', or NULL. */
static yaml_node_t *
other_key(struct loader *ld, yaml_node_t *node, const char *except)
{
    for (yaml_node_pair_t *p = node->data.mapping.pairs.start;
         p < node->data.mapping.pairs.top; p++) {
        yaml_node_t *k = load_node_at(ld, p->key);

        if (k->type != YAML_SCALAR_NODE ||
            strcmp((const char *)k->data.scalar.value, except) != 0) {
            return k;
        }
    }
    return NULL;
}

static void
parse_gateway(struct loader *ld, yaml_node_t *node, const struct field *f,
              void *base, const struct load_path *path)
{
    struct gateway_form gf = {NULL, NULL, NULL};
    struct server_form sf = {NULL};
    const struct load_path server = {path, "server", 0};
    const struct load_path webflux = {&server, "webflux", 0};
    const struct load_path *at = path;

    (void)f;
    (void)base;
    if (load_fields(ld, node, path, &gateway_table, &gf) != LOAD_OK) {
        return;
    }
    if (gf.server != NULL) {
        yaml_node_t *old;

        if (load_fields(ld, gf.server, &server, &gateway_server_table, &sf) !=
            LOAD_OK) {
            return;
        }
        if (sf.webflux == NULL) {
            /* Not a table rule: after a wrong key it would say it too. */
            report(ld, gf.server, &webflux, "required");
            return;
        }
        /* One prefix or the other: both would leave which routes,
         * defaults or timeouts hold to the order of reading. */
        if ((old = other_key(ld, node, "server")) != NULL) {
            report(ld, old, path,
                   "\"%s\" beside server.webflux: give every key under one "
                   "prefix, spring.cloud.gateway.server.webflux (Spring Cloud "
                   "Gateway 4.3 on) or spring.cloud.gateway (before)",
                   old->type == YAML_SCALAR_NODE
                       ? (const char *)old->data.scalar.value
                       : "?");
            return;
        }
        at = &webflux;
        gf.server = NULL;
        if (load_fields(ld, sf.webflux, at, &gateway_table, &gf) != LOAD_OK) {
            return;
        }
        if (gf.server != NULL) {
            report(ld, gf.server, PATH_KEY(at, "server"),
                   "not under server.webflux");
            return;
        }
    }
    if (gf.routes == NULL) {
        report(ld, sf.webflux != NULL ? sf.webflux : node,
               PATH_KEY(at, "routes"), "required");
        return;
    }
    load_scg_routes(ld, gf.routes, PATH_KEY(at, "routes"), gf.defaults,
                    PATH_KEY(at, "default-filters"));
}

static const struct field cloud_fields[] = {
    {.key = "gateway", .parse = parse_gateway, .required = true},
};

static const struct table cloud_table = TABLE(cloud_fields);

static const struct field spring_fields[] = {
    {.key = "redis", .parse = parse_spring_redis},
    {.key = "data", .parse = load_table, .table = &spring_data_table},
    {.key = "cloud",
     .parse = load_table,
     .table = &cloud_table,
     .required = true},
    {.key = "application", .parse = load_ignored},
    {.key = "profiles", .parse = load_ignored},
    {.key = "main", .parse = load_ignored},
};

static const struct table spring_table = TABLE(spring_fields);

/* server.port: sluice listens on every IPv4 address at that port. */
static void
parse_server_port(struct loader *ld, yaml_node_t *node, const struct field *f,
                  void *base, const struct load_path *path)
{
    struct config *cfg = ld->cfg;
    uint16_t port = 0;
    struct field pf = {.offset = 0};

    (void)f;
    (void)base;
    parse_port(ld, node, &pf, &port, path);
    if (port != 0) {
        free(cfg->server.listen.host);
        cfg->server.listen.host = xstrdup("0.0.0.0");
        cfg->server.listen.port = port;
        load_check_listeners(ld, node, path, "server.listen");
    }
}

static const struct field server_fields[] = {
    {.key = "port", .parse = parse_server_port},
};

static const struct table server_table = TABLE(server_fields);

/* sluice: and scg: are read by sluice alone: their plain scalars are
 * text, as in gateway.yaml (log.access: off stays "off"). */
static void
parse_sluice_only(struct loader *ld, yaml_node_t *node, const struct field *f,
                  void *base, const struct load_path *path)
{
    bool spring_reads = ld->spring_reads;

    ld->spring_reads = false;
    if (f->table != NULL) {
        load_table(ld, node, f, base, path);
    } else {
        load_scg_section(ld, node, f, base, path);
    }
    ld->spring_reads = spring_reads;
}

/*
 * The top level. sluice: first, so that identity and limiters are known
 * to the routes, and server.port after it, so that it wins over
 * sluice.server.listen.
 */
static const struct field top_fields[] = {
    {.key = "sluice", .parse = parse_sluice_only, .table = &load_sluice_table},
    {.key = "scg", .parse = parse_sluice_only},
    {.key = "server", .parse = load_table, .table = &server_table},
    {.key = "spring", .parse = load_table, .table = &spring_table},
    {.key = "management", .parse = load_ignored},
    {.key = "eureka", .parse = load_ignored},
    {.key = "logging", .parse = load_ignored},
};

static const struct table top_table = TABLE(top_fields);

/*
 * "${NAME:default}" is a Spring property placeholder, resolved by Spring
 * before the gateway reads the value; read as text it would be a wrong
 * host or port found only later. (A literal "${" is written "$\{" in
 * Spring files, as in RewritePath's replacement.)
 */
static void
check_placeholders(struct loader *ld, yaml_node_t *node,
                   const struct load_path *path, size_t depth)
{
    if (depth == 64) {
        return;
    }
    if (node->type == YAML_SCALAR_NODE) {
        if (strstr((const char *)node->data.scalar.value, "${") != NULL) {
            report(ld, node, path,
                   "property placeholders (\"${...}\") are not supported: "
                   "write the value");
        }
    } else if (node->type == YAML_SEQUENCE_NODE) {
        for (size_t i = 0; i < load_sequence_length(node); i++) {
            check_placeholders(ld, load_sequence_item(ld, node, i),
                               PATH_INDEX(path, i), depth + 1);
        }
    } else if (node->type == YAML_MAPPING_NODE) {
        for (yaml_node_pair_t *p = node->data.mapping.pairs.start;
             p < node->data.mapping.pairs.top; p++) {
            yaml_node_t *k = load_node_at(ld, p->key);
            const char *key = k->type == YAML_SCALAR_NODE
                                  ? (const char *)k->data.scalar.value
                                  : "?";

            check_placeholders(ld, load_node_at(ld, p->value),
                               PATH_KEY(path, key), depth + 1);
        }
    }
}

void
load_scg(struct loader *ld, yaml_node_t *root)
{
    size_t before = ld->ndiags;

    check_placeholders(ld, root, NULL, 0);
    if (ld->ndiags == before) {
        load_fields(ld, root, NULL, &top_table, ld->cfg);
    }
}
