/*
 * predicate.h - the conditions a route puts on a request: Path, Method,
 * Host, Header, Query, RemoteAddr, After, Before, Between, Cookie, Weight
 * and XForwardedRemoteAddr. Pure: evaluated over a request_view, no I/O
 * (the time and the random draw come in the view). Built once at config
 * load; immutable and shared by threads after.
 */
#ifndef SLUICE_PREDICATE_H
#define SLUICE_PREDICATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "argspec.h"
#include "glob.h"

struct headers;
struct netaddr;
struct regexp;
struct cidr;

/* What the router and predicates may read of a request. All borrowed. */
struct request_view {
    const char *method;            /* "GET", upper case */
    const char *path;              /* normalised (path.h), no query */
    const char *query;             /* raw query without '?', or NULL */
    const char *host;              /* Host header as sent, or NULL */
    const struct headers *headers; /* request headers as received */
    const struct netaddr *client;  /* resolved client address */
    int64_t now_ms;                /* wall clock, epoch ms: After, Before,
                                      Between */
    uint64_t draw;                 /* the request's random draw, one per
                                      request; Weight derives one value
                                      per group from it */
};

enum predicate_kind {
    PREDICATE_PATH,
    PREDICATE_METHOD,
    PREDICATE_HOST,
    PREDICATE_HEADER,
    PREDICATE_QUERY,
    PREDICATE_REMOTE_ADDR,
    PREDICATE_AFTER,
    PREDICATE_BEFORE,
    PREDICATE_BETWEEN,
    PREDICATE_COOKIE,
    PREDICATE_WEIGHT,
    PREDICATE_XFORWARDED_REMOTE_ADDR,
};

struct predicate {
    enum predicate_kind kind;
    char **values; /* Path/Host patterns, Method names; owned */
    size_t nvalues;
    char *name;         /* Header/Query: the field or parameter name; owned */
    struct regexp *re;  /* Header/Query: value pattern or NULL; owned */
    struct cidr *cidrs; /* RemoteAddr, XForwardedRemoteAddr blocks; owned */
    size_t ncidrs;
    int64_t t0;      /* After, Between: epoch ms the window opens */
    int64_t t1;      /* Before, Between: epoch ms it closes */
    uint64_t weight; /* Weight: this route's share of its group */
    size_t group;    /* Weight: index of the group (router_weigh()) */
    uint64_t lo;     /* Weight: this route's draws are lo <= d < hi */
    uint64_t hi;     /* Weight: see lo */
    uint64_t total;  /* Weight: the group's weights summed; 0 until
                        router_weigh(), and then never matches */
    struct argspec_given given; /* the arguments as given; owned */
};

/* The predicate table, in the order the README documents it. */
const struct kind_spec *predicate_specs(size_t *n);

/*
 * Builds 'p' from the kind 'spec' (an entry of predicate_specs()) and its
 * arguments in shortcut order, a gather argument spread over the last
 * slots. Validates every argument (patterns, method names, regexes,
 * CIDRs). Returns 0, or -1 with a message in 'err' and 'p' left empty.
 */
int predicate_init(struct predicate *p, const struct kind_spec *spec,
                   const char *const *args, size_t nargs, char *err,
                   size_t errlen);
void predicate_deinit(struct predicate *p);

/*
 * "2017-01-20T17:42:47.789-07:00[America/Denver]" (Spring's ZonedDateTime,
 * ISO 8601 with a UTC offset, or 'Z'; fraction optional; a bracketed zone
 * id is accepted and ignored, the offset decides), or epoch milliseconds
 * as Spring also reads them. 0 and the time in '*ms', or -1 with the
 * reason in 'err'.
 */
int predicate_parse_time(const char *s, int64_t *ms, char *err, size_t errlen);

/*
 * True when the request satisfies 'p'. A Path predicate that matches
 * stores its URI variables in 'vars' when 'vars' is not NULL.
 *   Path:       any pattern matches the path (glob.h, '/')
 *   Method:     the method is one of the names
 *   Host:       any pattern matches the Host header without its port
 *   Header:     a field with that name exists and, with a regexp, the
 *               whole value of one such field matches
 *   Query:      the parameter is present and, with a regexp, the whole
 *               percent-decoded value of one occurrence matches
 *   RemoteAddr: the client address lies in one of the blocks
 *   After:      now_ms > t0;  Before: now_ms < t1;  Between: both
 *   Cookie:     the first cookie with that name exists and, with a regexp,
 *               its whole value matches
 *   Weight:     the group's value derived from 'draw' falls in this
 *               route's range: routes of a group share the draws in
 *               proportion to their weights, one outcome per request
 *   XForwardedRemoteAddr: as RemoteAddr; the client address is the one
 *               resolved from X-Forwarded-For behind server.trusted_proxies
 */
bool predicate_test(const struct predicate *p, const struct request_view *req,
                    struct glob_vars *vars);

#endif
