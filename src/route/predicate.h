/*
 * predicate.h - the conditions a route puts on a request: Path, Method,
 * Host, Header, Query and RemoteAddr. Pure: evaluated over a request_view,
 * no I/O. Built once at config load; immutable and shared by threads after.
 */
#ifndef SLUICE_PREDICATE_H
#define SLUICE_PREDICATE_H

#include <stdbool.h>
#include <stddef.h>

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
};

enum predicate_kind {
    PREDICATE_PATH,
    PREDICATE_METHOD,
    PREDICATE_HOST,
    PREDICATE_HEADER,
    PREDICATE_QUERY,
    PREDICATE_REMOTE_ADDR,
};

struct predicate {
    enum predicate_kind kind;
    char **values; /* Path/Host patterns, Method names; owned */
    size_t nvalues;
    char *name;         /* Header/Query: the field or parameter name; owned */
    struct regexp *re;  /* Header/Query: value pattern or NULL; owned */
    struct cidr *cidrs; /* RemoteAddr blocks; owned */
    size_t ncidrs;
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
 */
bool predicate_test(const struct predicate *p, const struct request_view *req,
                    struct glob_vars *vars);

#endif
