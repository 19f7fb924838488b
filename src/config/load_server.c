/*
 * load_server.c - the sections server:, admin:, upstream:, identity: and
 * log: of gateway.yaml: listen addresses, the TLS listener's files,
 * upstream TLS settings, trusted proxies, header names, the log level and
 * the access log. Pure: tables over load.h's engine.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "forward.h"
#include "forwarded.h"
#include "load.h"
#include "log.h"
#include "xmalloc.h"

/* The value of 'key' in the mapping 'node', or 'node' itself. */
static yaml_node_t *
value_of(struct loader *ld, yaml_node_t *node, const char *key)
{
    const yaml_node_pair_t *p = load_mapping_pair(ld, node, key);

    return p != NULL ? load_node_at(ld, p->value) : node;
}

static void
parse_listen(struct loader *ld, yaml_node_t *node, const struct field *f,
             void *base, const struct load_path *path)
{
    struct listen_addr *la = field_ptr(base, f);
    const char *s = load_scalar(ld, node, path);
    const char *why;
    char *host = NULL;
    uint16_t port = 0;

    if (s == NULL) {
        return;
    }
    why = load_split_host_port(s, strlen(s), true, &host, &port);
    if (why != NULL) {
        report(ld, node, path, "bad listen address \"%s\": %s", s, why);
        return;
    }
    free(la->host);
    la->host = host;
    la->port = port;
}

/* server.listen: an address, or "off" when the TLS listener is the only one. */
static void
parse_server_listen(struct loader *ld, yaml_node_t *node, const struct field *f,
                    void *base, const struct load_path *path)
{
    struct listen_addr *la = field_ptr(base, f);
    const char *s = load_scalar(ld, node, path);

    if (s == NULL) {
        return;
    }
    if (strcmp(s, "off") == 0) {
        free(la->host);
        la->host = NULL;
        la->port = 0;
        return;
    }
    parse_listen(ld, node, f, base, path);
}

/*
 * True when binding 'a' and 'b' would collide: one port, and one host or
 * a wildcard covering the other ("::" takes IPv4 too, dual-stack).
 * Names are not resolved: "localhost" beside "127.0.0.1" is not caught.
 */
static bool
listeners_collide(const struct listen_addr *a, const struct listen_addr *b)
{
    bool v6a;
    bool v6b;

    if (a->host == NULL || b->host == NULL || a->port != b->port) {
        return false;
    }
    if (strcasecmp(a->host, b->host) == 0 || strcmp(a->host, "::") == 0 ||
        strcmp(b->host, "::") == 0) {
        return true;
    }
    v6a = strchr(a->host, ':') != NULL;
    v6b = strchr(b->host, ':') != NULL;
    return (strcmp(a->host, "0.0.0.0") == 0 && !v6b) ||
           (strcmp(b->host, "0.0.0.0") == 0 && !v6a);
}

void
load_check_listeners(struct loader *ld, yaml_node_t *node,
                     const struct load_path *path, const char *which)
{
    const struct config *cfg = ld->cfg;
    const struct {
        const char *key;              /* for messages */
        const struct listen_addr *la; /* NULL: not on */
    } l[] = {
        {"server.listen", &cfg->server.listen},
        {"server.tls.listen",
         cfg->server.tls.enabled ? &cfg->server.tls.listen : NULL},
        {"admin.listen", cfg->admin.enabled ? &cfg->admin.listen : NULL},
    };

    for (size_t i = 0; i < NELEMS(l); i++) {
        for (size_t j = i + 1; j < NELEMS(l); j++) {
            if (l[i].la == NULL || l[j].la == NULL ||
                (strcmp(l[i].key, which) != 0 &&
                 strcmp(l[j].key, which) != 0) ||
                !listeners_collide(l[i].la, l[j].la)) {
                continue;
            }
            report(ld, node, path,
                   "%s and %s would both bind port %u (%s, %s): give them "
                   "different ports",
                   l[i].key, l[j].key, (unsigned)l[i].la->port, l[i].la->host,
                   l[j].la->host);
            return;
        }
    }
}

/* With server.listen off, server.tls is the only way in. */
static void
check_server(struct loader *ld, yaml_node_t *node, const struct load_path *path,
             void *base)
{
    const struct server_conf *sc = base;

    if (sc->listen.host == NULL && !sc->tls.enabled) {
        report(ld, node, path,
               "listen: off needs server.tls: there would be no listener");
    } else if (sc->tls.enabled) {
        load_check_listeners(ld, value_of(ld, node, "tls"),
                             PATH_KEY(path, "tls"), "server.tls.listen");
    }
}

/* admin: is read after server: (load.c, sections). */
static void
check_admin(struct loader *ld, yaml_node_t *node, const struct load_path *path,
            void *base)
{
    (void)base;
    load_check_listeners(ld, value_of(ld, node, "listen"),
                         PATH_KEY(path, "listen"), "admin.listen");
}

static void
parse_trusted_proxies(struct loader *ld, yaml_node_t *node,
                      const struct field *f, void *base,
                      const struct load_path *path)
{
    struct server_conf *server = base;
    size_t n = load_sequence_length(node);

    (void)f;
    if (!load_expect_sequence(ld, node, path)) {
        return;
    }
    server->trusted_proxies = xcalloc(n, sizeof(struct cidr));
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *item = load_sequence_item(ld, node, i);
        const struct load_path *sub = PATH_INDEX(path, i);
        const char *s = load_scalar(ld, item, sub);

        if (s != NULL &&
            netaddr_parse_cidr(s, &server->trusted_proxies[i]) < 0) {
            report(ld, item, sub,
                   "bad CIDR \"%s\" (expected an address, or address/prefix "
                   "with no bits set past the prefix)",
                   s);
        }
    }
    server->ntrusted_proxies = n;
}

/* log.access: where access-log lines go. */
static void
parse_access_log(struct loader *ld, yaml_node_t *node, const struct field *f,
                 void *base, const struct load_path *path)
{
    char **out = field_ptr(base, f);
    const char *s = load_scalar(ld, node, path);

    if (s == NULL) {
        return;
    }
    if (s[0] == '\0') {
        report(ld, node, path,
               "empty access log (expected stdout, -, off or a file path)");
        return;
    }
    free(*out);
    /* One spelling of stdout, so that readers of the field check one. */
    *out = xstrdup(strcmp(s, "stdout") == 0 ? "-" : s);
}

/* As log.h spells them (log_parse_level()). */
static const struct choice log_level_words[] = {
    {"debug", LOG_DEBUG},
    {"info", LOG_INFO},
    {"warn", LOG_WARN},
    {"error", LOG_ERROR},
};

static const struct choices log_level_choices =
    CHOICES("log level", log_level_words, CHOICE_EXPECTED);

static const struct choice access_format_words[] = {
    {"text", ACCESSLOG_TEXT},
    {"json", ACCESSLOG_JSON},
};

/* A near miss ("jsn") gets a suggestion. */
static const struct choices access_format_choices =
    CHOICES("access format", access_format_words, CHOICE_SUGGEST);

static const struct field server_tls_fields[] = {
    {.key = "listen",
     .parse = parse_listen,
     .offset = offsetof(struct server_tls_conf, listen)},
    {.key = "cert_file",
     .parse = load_text,
     .offset = offsetof(struct server_tls_conf, cert_file),
     .required = true},
    {.key = "key_file",
     .parse = load_text,
     .offset = offsetof(struct server_tls_conf, key_file),
     .required = true},
};

/* "tls:" turns the TLS listener on; its files are read by the gateway. */
static const struct table server_tls_table = {
    .fields = server_tls_fields,
    .n = NELEMS(server_tls_fields),
    .flag_given = true,
    .given = offsetof(struct server_tls_conf, enabled),
    .flag_pos = true,
    .pos = offsetof(struct server_tls_conf, at),
};

static const struct field server_fields[] = {
    {.key = "listen",
     .parse = parse_server_listen,
     .offset = offsetof(struct server_conf, listen)},
    {.key = "tls",
     .parse = load_table,
     .offset = offsetof(struct server_conf, tls),
     .table = &server_tls_table},
    {.key = "workers",
     .parse = load_uint_or_auto,
     .offset = offsetof(struct server_conf, workers),
     .min = 1,
     .max = 256},
    {.key = "trusted_proxies", .parse = parse_trusted_proxies},
    {.key = "max_header_bytes",
     .parse = load_size,
     .offset = offsetof(struct server_conf, max_header_bytes),
     .min = 1024},
    {.key = "max_body_bytes",
     .parse = load_size,
     .offset = offsetof(struct server_conf, max_body_bytes)},
    {.key = "client_timeout",
     .parse = load_duration,
     .offset = offsetof(struct server_conf, client_timeout_ms),
     .min = 1},
    {.key = "header_timeout",
     .parse = load_duration,
     .offset = offsetof(struct server_conf, header_timeout_ms),
     .min = 1},
    {.key = "max_connections",
     .parse = load_uint_or_auto,
     .offset = offsetof(struct server_conf, max_connections),
     .min = 1,
     .max = 100000000},
    {.key = "max_held",
     .parse = load_uint,
     .offset = offsetof(struct server_conf, max_held),
     .min = 1,
     .max = 100000000},
    {.key = "drain_timeout",
     .parse = load_duration,
     .offset = offsetof(struct server_conf, drain_timeout_ms)},
    {.key = "watch",
     .parse = load_bool,
     .offset = offsetof(struct server_conf, watch)},
    {.key = "underscores_in_headers",
     .parse = load_bool,
     .offset = offsetof(struct server_conf, underscores)},
};

static const struct field admin_fields[] = {
    {.key = "listen",
     .parse = parse_listen,
     .offset = offsetof(struct admin_conf, listen)},
};

/* The request fields the gateway writes itself (forward.h,
 * forward_request_headers()), hop-by-hop ones and Host aside. */
enum load_field_owner
load_request_field(const char *name)
{
    if (forward_same_to_cgi(name, "Host")) {
        return LOAD_FIELD_HOST;
    }
    if (forward_sets_field(name)) {
        return LOAD_FIELD_SET;
    }
    return forwarded_is_hop_by_hop(name) ? LOAD_FIELD_HOP : LOAD_FIELD_FREE;
}

/* A field the gateway writes or drops could carry no identity. */
static bool
check_identity_name(struct loader *ld, yaml_node_t *node,
                    const struct load_path *path, const char *key,
                    const char *name)
{
    const char *why = NULL;

    if (name == NULL) {
        return false;
    }
    switch (load_request_field(name)) {
    case LOAD_FIELD_FREE:
        return true;
    case LOAD_FIELD_HOST:
    case LOAD_FIELD_SET:
        why = "the gateway writes it when it forwards the request";
        break;
    case LOAD_FIELD_HOP:
        why = "it is hop-by-hop, never forwarded";
        break;
    }
    report(ld, value_of(ld, node, key), PATH_KEY(path, key),
           "%s cannot carry the identity: %s", name, why);
    return false;
}

/*
 * user_header and role_header are two fields, each the gateway's alone
 * to write upstream (forward_request_headers()): one name for both would
 * make user and role one value, and CGI upstreams read '_' as '-'.
 */
static void
check_identity(struct loader *ld, yaml_node_t *node,
               const struct load_path *path, void *base)
{
    const struct identity_conf *ic = base;
    /* Both checked, whatever the first says: either may be unset. */
    bool user_ok =
        check_identity_name(ld, node, path, "user_header", ic->user_header);
    bool role_ok =
        check_identity_name(ld, node, path, "role_header", ic->role_header);

    if (!user_ok || !role_ok) {
        return;
    }
    if (forward_same_to_cgi(ic->user_header, ic->role_header)) {
        report(ld, value_of(ld, node, "role_header"),
               PATH_KEY(path, "role_header"),
               "%s is user_header's field too (%s): user and role need two "
               "fields (names differing in more than case and '_' for '-')",
               ic->role_header, ic->user_header);
    }
}

static const struct field identity_fields[] = {
    {.key = "user_header",
     .parse = load_token,
     .offset = offsetof(struct identity_conf, user_header)},
    {.key = "role_header",
     .parse = load_token,
     .offset = offsetof(struct identity_conf, role_header)},
    {.key = "ipv6_prefix",
     .parse = load_uint,
     .offset = offsetof(struct identity_conf, ipv6_prefix),
     .min = 1,
     .max = 128},
    {.key = "jwt", .parse = load_identity_jwt},
};

/* A client certificate comes with its key. */
static void
check_upstream_tls(struct loader *ld, yaml_node_t *node,
                   const struct load_path *path, void *base)
{
    const struct upstream_tls *t = base;

    if ((t->cert_file == NULL) != (t->key_file == NULL)) {
        report(ld, node, path,
               "cert_file and key_file go together (mutual TLS needs both)");
    }
}

static const struct field upstream_tls_fields[] = {
    {.key = "verify",
     .parse = load_bool,
     .offset = offsetof(struct upstream_tls, verify)},
    {.key = "ca_file",
     .parse = load_text,
     .offset = offsetof(struct upstream_tls, ca_file)},
    {.key = "cert_file",
     .parse = load_text,
     .offset = offsetof(struct upstream_tls, cert_file)},
    {.key = "key_file",
     .parse = load_text,
     .offset = offsetof(struct upstream_tls, key_file)},
};

const struct table load_upstream_tls_table = {
    .fields = upstream_tls_fields,
    .n = NELEMS(upstream_tls_fields),
    .check = check_upstream_tls,
    .flag_pos = true,
    .pos = offsetof(struct upstream_tls, at),
};

static const struct field upstream_fields[] = {
    {.key = "connect_timeout",
     .parse = load_duration,
     .offset = offsetof(struct upstream_conf, connect_timeout_ms),
     .min = 1},
    {.key = "response_timeout",
     .parse = load_duration,
     .offset = offsetof(struct upstream_conf, response_timeout_ms),
     .min = 1},
    {.key = "keepalive",
     .parse = load_uint,
     .offset = offsetof(struct upstream_conf, keepalive),
     .max = 100000},
    {.key = "tls",
     .parse = load_table,
     .offset = offsetof(struct upstream_conf, tls),
     .table = &load_upstream_tls_table},
};

static const struct field log_fields[] = {
    {.key = "level",
     .parse = load_enum,
     .offset = offsetof(struct config, log_level),
     .choices = &log_level_choices},
    {.key = "access",
     .parse = parse_access_log,
     .offset = offsetof(struct config, access_log)},
    {.key = "access_format",
     .parse = load_enum,
     .offset = offsetof(struct config, access_format),
     .choices = &access_format_choices},
};

const struct table load_server_table = {
    .fields = server_fields,
    .n = NELEMS(server_fields),
    .check = check_server,
};

/* "admin:" alone turns the admin listener on, with its defaults. */
const struct table load_admin_table = {
    .fields = admin_fields,
    .n = NELEMS(admin_fields),
    .check = check_admin,
    .flag_given = true,
    .given = offsetof(struct admin_conf, enabled),
};

const struct table load_upstream_table = TABLE(upstream_fields);

const struct table load_identity_table = {
    .fields = identity_fields,
    .n = NELEMS(identity_fields),
    .check = check_identity,
};

/* Its keys are fields of struct config itself. */
const struct table load_log_table = TABLE(log_fields);
