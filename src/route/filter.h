/*
 * filter.h - what a route changes on the way through: the path
 * (StripPrefix, PrefixPath, RewritePath, SetPath), request headers
 * (Add/Set/RemoveRequestHeader, PreserveHostHeader) and response headers
 * (Add/Set/RemoveResponseHeader). Pure: works on plain structs, no I/O.
 * Filters are built at config load and immutable after.
 */
#ifndef SLUICE_FILTER_H
#define SLUICE_FILTER_H

#include <stdbool.h>
#include <stddef.h>

#include "argspec.h"
#include "glob.h"
#include "headers.h"

struct regexp;

enum filter_kind {
    FILTER_STRIP_PREFIX,           /* parts */
    FILTER_PREFIX_PATH,            /* prefix */
    FILTER_REWRITE_PATH,           /* regexp, replacement */
    FILTER_SET_PATH,               /* template */
    FILTER_ADD_REQUEST_HEADER,     /* name, value */
    FILTER_SET_REQUEST_HEADER,     /* name, value */
    FILTER_REMOVE_REQUEST_HEADER,  /* name */
    FILTER_ADD_RESPONSE_HEADER,    /* name, value */
    FILTER_SET_RESPONSE_HEADER,    /* name, value */
    FILTER_REMOVE_RESPONSE_HEADER, /* name */
    FILTER_PRESERVE_HOST_HEADER,   /* (no arguments) */
};

struct filter {
    enum filter_kind kind;
    unsigned parts;    /* StripPrefix: segments to drop */
    char *name;        /* header name; owned */
    char *value;       /* header value, prefix, template or replacement,
                          may hold {var} URI variables; owned */
    struct regexp *re; /* RewritePath pattern; owned */
};

/* The request as it will be sent upstream; filters edit it in place. */
struct outgoing {
    char *path;                   /* normalised path; owned */
    struct headers headers;       /* request headers to forward */
    bool preserve_host;           /* send the client's Host upstream */
    const struct glob_vars *vars; /* URI variables of the Path match */
};

/* The filter table, in the order the README documents it. */
const struct kind_spec *filter_specs(size_t *n);

/*
 * Builds 'f' like predicate_init(). Refuses header names that are not
 * tokens, values with CR, LF or NUL, paths that do not start with '/',
 * and replacements naming a group the regexp lacks.
 */
int filter_init(struct filter *f, const struct kind_spec *spec,
                const char *const *args, size_t nargs, char *err,
                size_t errlen);
void filter_deinit(struct filter *f);

/* True for the filters that act on the response rather than the request. */
bool filter_is_response(const struct filter *f);

/*
 * Applies a request filter to 'out' (response filters do nothing here).
 *   StripPrefix=N   drops the first N segments ("/a/b/c", 1 -> "/b/c";
 *                   dropping every segment leaves "/")
 *   PrefixPath=/p   "/p" + path
 *   RewritePath     regexp_replace() over the path; a result that is
 *                   empty becomes "/"
 *   SetPath=/t      the template with {var} expanded
 *   header values   {var} expanded from the Path match
 */
void filter_apply_request(const struct filter *f, struct outgoing *out);

/* Applies a response filter to the response headers 'h'. */
void filter_apply_response(const struct filter *f, struct headers *h);

#endif
