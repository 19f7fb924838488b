#include "predicate.h"

#include <ctype.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "headers.h"
#include "netaddr.h"
#include "path.h"
#include "regexp.h"
#include "urlcode.h"
#include "xmalloc.h"

/* Long DNS names stop at 253 characters; anything longer never matches. */
#define HOST_MAX 256
/* Query values up to this size are decoded on the stack. */
#define QUERY_VALUE_STACK 512

static const struct arg_spec path_args[] = {
    {"patterns", false, true},
};
static const struct arg_spec method_args[] = {
    {"methods", false, true},
};
static const struct arg_spec host_args[] = {
    {"patterns", false, true},
};
static const struct arg_spec header_args[] = {
    {"header", false, false},
    {"regexp", true, false},
};
static const struct arg_spec query_args[] = {
    {"param", false, false},
    {"regexp", true, false},
};
static const struct arg_spec remote_addr_args[] = {
    {"sources", false, true},
};

#define SPEC(name, kind, args)                                                 \
    {                                                                          \
        name, kind, args, sizeof(args) / sizeof(args[0])                       \
    }

static const struct kind_spec specs[] = {
    SPEC("Path", PREDICATE_PATH, path_args),
    SPEC("Method", PREDICATE_METHOD, method_args),
    SPEC("Host", PREDICATE_HOST, host_args),
    SPEC("Header", PREDICATE_HEADER, header_args),
    SPEC("Query", PREDICATE_QUERY, query_args),
    SPEC("RemoteAddr", PREDICATE_REMOTE_ADDR, remote_addr_args),
};

const struct kind_spec *
predicate_specs(size_t *n)
{
    *n = sizeof(specs) / sizeof(specs[0]);
    return specs;
}

/* RFC 9110 section 5.6.2. */
static bool
is_token(const char *s)
{
    if (*s == '\0') {
        return false;
    }
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;

        if (!isalnum(c) && strchr("!#$%&'*+-.^_`|~", c) == NULL) {
            return false;
        }
    }
    return true;
}

static char **
copy_values(const char *const *args, size_t nargs)
{
    char **v = xcalloc(nargs, sizeof(*v));

    for (size_t i = 0; i < nargs; i++) {
        v[i] = xstrdup(args[i]);
    }
    return v;
}

/*
 * Patterns go through the same normalisation as request paths, so that
 * "/caf%c3%a9" or "/a//b" in a config matches what the router compares
 * it with, rather than silently never matching.
 */
static int
init_path(struct predicate *p, const char *const *args, size_t nargs, char *err,
          size_t errlen)
{
    p->values = xcalloc(nargs, sizeof(*p->values));
    p->nvalues = nargs;
    for (size_t i = 0; i < nargs; i++) {
        char gerr[128];
        enum path_status st;

        if (args[i][0] != '/') {
            snprintf(err, errlen, "Path: pattern must start with '/': \"%s\"",
                     args[i]);
            return -1;
        }
        st = path_normalize(args[i], strlen(args[i]), &p->values[i]);
        if (st != PATH_OK) {
            snprintf(err, errlen, "Path: pattern \"%s\": %s", args[i],
                     path_status_str(st));
            return -1;
        }
        if (glob_validate(p->values[i], '/', gerr, sizeof(gerr)) != 0) {
            snprintf(err, errlen, "Path: pattern \"%s\": %s", args[i], gerr);
            return -1;
        }
    }
    return 0;
}

static int
init_method(struct predicate *p, const char *const *args, size_t nargs,
            char *err, size_t errlen)
{
    for (size_t i = 0; i < nargs; i++) {
        if (!is_token(args[i])) {
            snprintf(err, errlen, "Method: \"%s\" is not a method name",
                     args[i]);
            return -1;
        }
    }
    /* Methods are case-sensitive on the wire, but "get" in a config is
     * never meant as an extension method. */
    p->values = copy_values(args, nargs);
    p->nvalues = nargs;
    for (size_t i = 0; i < nargs; i++) {
        for (char *c = p->values[i]; *c != '\0'; c++) {
            *c = (char)toupper((unsigned char)*c);
        }
    }
    return 0;
}

static int
init_host(struct predicate *p, const char *const *args, size_t nargs, char *err,
          size_t errlen)
{
    for (size_t i = 0; i < nargs; i++) {
        char gerr[128];

        if (args[i][0] == '\0') {
            snprintf(err, errlen, "Host: empty pattern");
            return -1;
        }
        /* The port is stripped before matching, so a pattern with one
         * could never match; a bracketed IPv6 literal is the exception. */
        if (args[i][0] != '[' && strchr(args[i], ':') != NULL) {
            snprintf(err, errlen,
                     "Host: pattern \"%s\": leave out the port (and write "
                     "IPv6 literals in brackets)",
                     args[i]);
            return -1;
        }
        if (glob_validate(args[i], '.', gerr, sizeof(gerr)) != 0) {
            snprintf(err, errlen, "Host: pattern \"%s\": %s", args[i], gerr);
            return -1;
        }
    }
    p->values = copy_values(args, nargs);
    p->nvalues = nargs;
    return 0;
}

/* Spring treats a blank regexp as "presence only"; so do we. */
static int
init_regexp(struct predicate *p, const struct kind_spec *spec,
            const char *pattern, char *err, size_t errlen)
{
    char rerr[128];

    if (pattern == NULL || pattern[0] == '\0') {
        return 0;
    }
    p->re = regexp_new(pattern, rerr, sizeof(rerr));
    if (p->re == NULL) {
        snprintf(err, errlen, "%s: bad regexp \"%s\": %s", spec->name, pattern,
                 rerr);
        return -1;
    }
    return 0;
}

static int
init_header(struct predicate *p, const struct kind_spec *spec,
            const char *const *args, size_t nargs, char *err, size_t errlen)
{
    if (!is_token(args[0])) {
        snprintf(err, errlen, "Header: \"%s\" is not a header name", args[0]);
        return -1;
    }
    p->name = xstrdup(args[0]);
    return init_regexp(p, spec, nargs > 1 ? args[1] : NULL, err, errlen);
}

static int
init_query(struct predicate *p, const struct kind_spec *spec,
           const char *const *args, size_t nargs, char *err, size_t errlen)
{
    if (args[0][0] == '\0') {
        snprintf(err, errlen, "Query: empty parameter name");
        return -1;
    }
    p->name = xstrdup(args[0]);
    return init_regexp(p, spec, nargs > 1 ? args[1] : NULL, err, errlen);
}

/* netaddr_parse_cidr() only says no; tell the operator which part is off. */
static void
explain_bad_cidr(const char *s, char *err, size_t errlen)
{
    char addr[64];
    const char *slash = strchr(s, '/');
    size_t alen = slash != NULL ? (size_t)(slash - s) : strlen(s);
    struct netaddr a;
    struct cidr widest;
    char *end;
    unsigned long prefix;

    if (alen >= sizeof(addr)) {
        alen = sizeof(addr) - 1;
    }
    memcpy(addr, s, alen);
    addr[alen] = '\0';
    if (slash == NULL || netaddr_parse(addr, &a) != 0) {
        snprintf(err, errlen, "RemoteAddr: \"%s\" is not an IP address", s);
        return;
    }
    prefix = strtoul(slash + 1, &end, 10);
    if (!isdigit((unsigned char)slash[1]) || *end != '\0' ||
        prefix > (a.family == AF_INET ? 32u : 128u)) {
        snprintf(err, errlen, "RemoteAddr: \"%s\": bad prefix length", s);
        return;
    }
    /* Only host bits remain: show the block they probably meant. */
    widest.addr = a;
    widest.prefix = (unsigned)prefix;
    for (unsigned i = widest.prefix; i < 128; i++) {
        widest.addr.bytes[i / 8] &= (uint8_t) ~(0x80u >> (i % 8));
    }
    netaddr_format(&widest.addr, addr, sizeof(addr));
    snprintf(err, errlen,
             "RemoteAddr: \"%s\" has host bits set (did you mean %s/%lu?)", s,
             addr, prefix);
}

static int
init_remote_addr(struct predicate *p, const char *const *args, size_t nargs,
                 char *err, size_t errlen)
{
    p->cidrs = xcalloc(nargs, sizeof(*p->cidrs));
    for (size_t i = 0; i < nargs; i++) {
        if (netaddr_parse_cidr(args[i], &p->cidrs[i]) != 0) {
            explain_bad_cidr(args[i], err, errlen);
            return -1;
        }
        p->ncidrs++;
    }
    return 0;
}

int
predicate_init(struct predicate *p, const struct kind_spec *spec,
               const char *const *args, size_t nargs, char *err, size_t errlen)
{
    int rc = -1;

    memset(p, 0, sizeof(*p));
    if (argspec_check_count(spec, nargs, ARGSPEC_BRIEF, err, errlen) != 0) {
        return -1;
    }
    for (size_t i = 0; i < nargs; i++) {
        if (args[i] == NULL) {
            snprintf(err, errlen, "%s: argument %zu is missing", spec->name,
                     i + 1);
            return -1;
        }
    }
    p->kind = (enum predicate_kind)spec->kind;
    switch (p->kind) {
    case PREDICATE_PATH:
        rc = init_path(p, args, nargs, err, errlen);
        break;
    case PREDICATE_METHOD:
        rc = init_method(p, args, nargs, err, errlen);
        break;
    case PREDICATE_HOST:
        rc = init_host(p, args, nargs, err, errlen);
        break;
    case PREDICATE_HEADER:
        rc = init_header(p, spec, args, nargs, err, errlen);
        break;
    case PREDICATE_QUERY:
        rc = init_query(p, spec, args, nargs, err, errlen);
        break;
    case PREDICATE_REMOTE_ADDR:
        rc = init_remote_addr(p, args, nargs, err, errlen);
        break;
    default:
        snprintf(err, errlen, "%s: unknown predicate kind %d", spec->name,
                 spec->kind);
        break;
    }
    if (rc != 0) {
        predicate_deinit(p);
    }
    return rc;
}

void
predicate_deinit(struct predicate *p)
{
    for (size_t i = 0; i < p->nvalues; i++) {
        free(p->values[i]);
    }
    free(p->values);
    free(p->name);
    regexp_free(p->re);
    free(p->cidrs);
    memset(p, 0, sizeof(*p));
}

/*
 * "example.org:8080" -> "example.org", "[::1]:8080" -> "[::1]"; a trailing
 * dot (an absolute DNS name) is dropped as well. False when the result
 * does not fit or the brackets are unbalanced.
 */
static bool
host_without_port(const char *host, char *buf, size_t buflen)
{
    size_t len;

    if (host[0] == '[') {
        const char *close = strchr(host, ']');

        if (close == NULL) {
            return false;
        }
        len = (size_t)(close - host) + 1;
    } else {
        const char *colon = strchr(host, ':');

        len = colon != NULL ? (size_t)(colon - host) : strlen(host);
        if (len > 0 && host[len - 1] == '.') {
            len--;
        }
    }
    if (len >= buflen) {
        return false;
    }
    memcpy(buf, host, len);
    buf[len] = '\0';
    return true;
}

static bool
test_host(const struct predicate *p, const char *host_header)
{
    char host[HOST_MAX];

    if (host_header == NULL ||
        !host_without_port(host_header, host, sizeof(host))) {
        return false;
    }
    for (size_t i = 0; i < p->nvalues; i++) {
        if (glob_match(p->values[i], host, '.', NULL)) {
            return true;
        }
    }
    return false;
}

static bool
test_header(const struct predicate *p, const struct headers *h)
{
    if (h == NULL) {
        return false;
    }
    for (size_t i = 0; i < h->n; i++) {
        const struct header *f = &h->v[i];

        if (strcasecmp(f->name, p->name) != 0) {
            continue;
        }
        if (p->re == NULL ||
            regexp_full_match(p->re, f->value, strlen(f->value))) {
            return true;
        }
    }
    return false;
}

static bool
value_matches(const struct regexp *re, const char *s, size_t n)
{
    /* Initialised only to quiet -Wmaybe-uninitialized at -O2. */
    char stack[QUERY_VALUE_STACK] = "";
    char *buf = n <= sizeof(stack) ? stack : xmalloc(n);
    size_t len = urlcode_form_decode(s, n, buf);
    bool ok = regexp_full_match(re, buf, len);

    if (buf != stack) {
        free(buf);
    }
    return ok;
}

/* Any of the parameter's values, not only the first, may match. */
static bool
test_query(const struct predicate *p, const char *query)
{
    const char *cursor = query;
    const char *value;
    size_t n;

    while (urlcode_query_next(&cursor, p->name, &value, &n)) {
        if (p->re == NULL || value_matches(p->re, value, n)) {
            return true;
        }
    }
    return false;
}

bool
predicate_test(const struct predicate *p, const struct request_view *req,
               struct glob_vars *vars)
{
    switch (p->kind) {
    case PREDICATE_PATH:
        if (req->path == NULL) {
            return false;
        }
        for (size_t i = 0; i < p->nvalues; i++) {
            if (glob_match(p->values[i], req->path, '/', vars)) {
                return true;
            }
        }
        return false;
    case PREDICATE_METHOD:
        if (req->method == NULL) {
            return false;
        }
        for (size_t i = 0; i < p->nvalues; i++) {
            if (strcmp(p->values[i], req->method) == 0) {
                return true;
            }
        }
        return false;
    case PREDICATE_HOST:
        return test_host(p, req->host);
    case PREDICATE_HEADER:
        return test_header(p, req->headers);
    case PREDICATE_QUERY:
        return test_query(p, req->query);
    case PREDICATE_REMOTE_ADDR:
        if (req->client == NULL) {
            return false;
        }
        for (size_t i = 0; i < p->ncidrs; i++) {
            if (netaddr_in_cidr(&p->cidrs[i], req->client)) {
                return true;
            }
        }
        return false;
    }
    return false;
}
