/*
 * route.h - a route as loaded from the config: where its requests go, the
 * predicates that pick it, the filters it applies and the rate limiters
 * that decide whether it forwards at all (limit.h). Plain data, owned by
 * the config that loaded it. Pure: no functions, no I/O.
 */
#ifndef SLUICE_ROUTE_H
#define SLUICE_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct predicate;
struct filter;
struct rate_limit_conf;

/* Where a route sends its requests: "http[s]://host[:port][/base]". */
struct upstream_uri {
    bool https;      /* scheme https: TLS to the upstream */
    char *host;      /* owned */
    uint16_t port;   /* default 80, or 443 for https */
    char *base_path; /* "" or "/base" without a trailing '/'; owned */
    char *authority; /* Host header to send: "host" or "host:port"; owned */
};

/*
 * TLS to an https upstream: upstream.tls, with a route's own tls: keys
 * over it. File names are as written (relative to the working directory).
 */
/* Where a mapping of the config file begins, 1-based; 0 when the file
 * has none: files it names are read later, by the gateway, whose errors
 * then point there. */
struct conf_pos {
    unsigned line; /* 0: not in the file */
    unsigned col;  /* 1-based column */
};

struct upstream_tls {
    struct conf_pos at; /* the route's tls:, else upstream.tls: */
    bool verify;        /* check the certificate chain and the host name;
                           default true */
    char *ca_file;      /* PEM bundle trusted instead of the system store, or
                           NULL; owned */
    char *cert_file;    /* client certificate chain (PEM) for mutual TLS, or
                           NULL; owned */
    char *key_file;     /* its private key (PEM); set with cert_file; owned */
};

struct route {
    char *id; /* unique; owned */
    struct upstream_uri uri;
    struct predicate *predicates; /* all must hold; owned */
    size_t npredicates;
    struct filter *filters; /* applied in order; owned */
    size_t nfilters;
    struct rate_limit_conf **rate_limiters; /* the RequestRateLimiters
                                               under filters:, in file
                                               order, all decided before
                                               forwarding; each owned */
    size_t nrate_limiters;
    uint64_t connect_timeout_ms;  /* resolved: route's or upstream's */
    uint64_t response_timeout_ms; /* resolved: route's or upstream's */
    int64_t order;                /* Spring Cloud Gateway's order: the
                                     routes are sorted by it; 0 */
    struct upstream_tls tls;      /* resolved: route's keys over
                                     upstream.tls; read for https only */
};

#endif
