/*
 * config.h - the gateway's configuration: the model of gateway.yaml
 * (config.c) and its loader (load*.c; config/ is the only folder that
 * includes <yaml.h>). A loaded config is plain data, immutable after
 * config_load(), and refcounted so that a request in flight keeps the
 * config it started with across a reload.
 */
#ifndef SLUICE_CONFIG_H
#define SLUICE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "filter.h"
#include "limit.h"
#include "netaddr.h"
#include "predicate.h"
#include "route.h"

/* host:port to listen on; 'host' is a literal or a name to resolve. */
struct listen_addr {
    char *host;    /* "0.0.0.0", "::", "localhost"; owned */
    uint16_t port; /* 1..65535 */
};

/* server.tls: a second listener that speaks TLS (1.2 and 1.3 only). */
struct server_tls_conf {
    bool enabled;              /* the key is present */
    struct conf_pos at;        /* where server.tls: is */
    struct listen_addr listen; /* default 0.0.0.0:8443 */
    char *cert_file;           /* certificate chain (PEM); required; owned;
                                  re-read on every reload */
    char *key_file;            /* its private key (PEM); required; owned */
};

struct server_conf {
    struct listen_addr listen;    /* host NULL: "off", server.tls only */
    struct server_tls_conf tls;   /* the TLS listener, if enabled */
    unsigned workers;             /* threads; 0 = one per core */
    struct cidr *trusted_proxies; /* peers whose X-Forwarded-For is
                                     believed; owned */
    size_t ntrusted_proxies;
    uint64_t max_header_bytes;  /* request line + headers; 431 beyond */
    uint64_t max_body_bytes;    /* request body; 413 beyond */
    uint64_t client_timeout_ms; /* idle client read/write timeout */
    uint64_t header_timeout_ms; /* first byte of a request to the end of
                                   its head; the connection is cut past it */
    unsigned max_connections;   /* client connections open at once in the
                                   process, shared out among the workers;
                                   0 (auto): sized at start from the
                                   descriptor limit (server.c) */
    uint64_t drain_timeout_ms;  /* SIGTERM: how long in-flight may run */
    unsigned max_held;          /* requests a worker holds in delay mode
                                   at once; past it a request that would
                                   wait is refused */
    bool watch;                 /* reload when the file changes on disk */
    bool underscores;           /* underscores_in_headers: pass on request
                                   fields named with '_'; default false */
};

struct admin_conf {
    bool enabled;              /* false when the key is absent */
    struct listen_addr listen; /* default 127.0.0.1:9090 */
};

/* One host:port of redis.sentinel.nodes or redis.cluster.nodes. */
struct redis_node {
    char *host;    /* a name or an address; owned */
    uint16_t port; /* TCP port */
};

struct redis_conf {
    bool enabled;           /* false when the section is absent */
    char *host;             /* from the url; NULL with Sentinel; owned */
    uint16_t port;          /* default 6379 */
    unsigned db;            /* SELECT index; default 0 */
    char *user;             /* ACL user or NULL; owned */
    char *password;         /* or NULL; owned */
    uint64_t timeout_ms;    /* connect and per-command; default 50 */
    char *key_prefix;       /* before every key; default "sluice:"; owned */
    unsigned max_in_flight; /* commands awaiting a reply, per worker;
                               default 1024 */
    char *sentinel_master;  /* redis.sentinel.master, or NULL: no
                               Sentinel, host and port name the server;
                               owned */
    struct redis_node *sentinels;     /* redis.sentinel.nodes, asked in this
                                         order; owned */
    size_t nsentinels;                /* entries in 'sentinels' */
    char *sentinel_password;          /* AUTH to the sentinels, or NULL;
                                         owned */
    struct redis_node *cluster_nodes; /* redis.cluster.nodes: seeds asked
                                         for the slot map, in this order,
                                         or NULL: not a cluster; owned */
    size_t ncluster_nodes;            /* entries in 'cluster_nodes' */
};

struct jwtcheck_conf;

/* Who the caller is, beyond the socket. */
struct identity_conf {
    char *user_header;         /* default "X-User-Id"; owned */
    char *role_header;         /* default "X-User-Role"; owned */
    unsigned ipv6_prefix;      /* IPv6 clients share a key per prefix; 64 */
    struct jwtcheck_conf *jwt; /* identity.jwt, or NULL: the source of
                                  user and role when set; owned */
};

/* Defaults for every route's upstream, each overridable per route. */
struct upstream_conf {
    uint64_t connect_timeout_ms;  /* TCP connect; 504 beyond */
    uint64_t response_timeout_ms; /* request sent to first response byte,
                                     and the longest pause between reads
                                     of the body; 504 / cut beyond */
    unsigned keepalive;           /* idle connections kept per worker and
                                     upstream */
    struct upstream_tls tls;      /* upstream.tls: defaults of the https
                                     routes' tls: */
};

/*
 * Every error found in one file, in file order, each one line
 * "file:line:col: key.path: what" (control characters escaped).
 */
struct config_errors {
    char **v; /* owned */
    size_t n;
    size_t cap;
};

/* How access-log lines are written. */
enum accesslog_format { ACCESSLOG_TEXT, ACCESSLOG_JSON };

struct tls_set;

struct config {
    int refs;   /* atomic; see config_ref() */
    char *path; /* the file it was loaded from; owned */
    struct server_conf server;
    struct admin_conf admin;
    struct redis_conf redis;
    struct upstream_conf upstream;
    struct identity_conf identity;
    struct limiter_def *limiters; /* the named limiters; owned */
    size_t nlimiters;
    int log_level;        /* enum log_level */
    char *access_log;     /* "-" stdout (default), "off", or a file
                             path; owned */
    int access_format;    /* enum accesslog_format; default text */
    struct route *routes; /* in file order (Spring Cloud Gateway shape:
                             by order, then file order); owned */
    size_t nroutes;
    bool scg_shape;                /* the file is Spring Cloud Gateway's
                                      application.yml (top key spring:) */
    struct config_errors warnings; /* keys read and ignored, one line each
                                      "file:line:col: key: ignored ..." */
    /* Built by the gateway for this config before any worker reads it
     * (the TLS contexts of its listener and https routes, tls.h), then
     * as constant as the rest; freed with the config by 'tls_free'. */
    struct tls_set *tls;                   /* or NULL; owned */
    void (*tls_free)(struct tls_set *tls); /* frees 'tls' */
};

void config_errors_init(struct config_errors *e);
void config_errors_deinit(struct config_errors *e);
/* Appends 's' (takes ownership); 'e' NULL frees it. */
void config_errors_add(struct config_errors *e, char *s);

/*
 * Reads and validates 'path'. Returns a config with one reference, or NULL
 * with every problem found appended to 'errs' (an unreadable file is one
 * error, "path: cannot read: why"; so is anything but a regular file,
 * followed through symlinks, and a file over CONFIG_FILE_MAX bytes: a
 * FIFO or a device is never read, so that a reload cannot block or eat
 * memory). Unknown keys are errors; a misspelled
 * key or name gets a suggestion. A file whose top level holds spring: is
 * read as Spring Cloud Gateway's application.yml (README, Migrating from
 * Spring Cloud Gateway); the keys it ignores are in cfg->warnings.
 */
#define CONFIG_FILE_MAX (16 * 1024 * 1024)
struct config *config_load(const char *path, struct config_errors *errs);

/*
 * Same, from 'len' bytes of text in memory (any bytes; borrowed); 'name'
 * stands for the file in messages. Nesting past 64 levels, more than
 * 1,000 anchors and aliases that expand the document past 100,000 nodes
 * are refused.
 */
struct config *config_parse(const char *text, size_t len, const char *name,
                            struct config_errors *errs);

/* Takes another reference; thread-safe. Returns 'cfg'. */
struct config *config_ref(struct config *cfg);
/* Drops a reference; the last one frees everything. NULL is a no-op. */
void config_unref(struct config *cfg);

/* Frees what 'r' owns (not 'r'); the loader's scratch routes too. */
void route_deinit(struct route *r);

/* The route called 'id', or NULL. */
const struct route *config_find_route(const struct config *cfg, const char *id);

#endif
