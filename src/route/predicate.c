/* strptime(): glibc declares it under _XOPEN_SOURCE. */
#define _XOPEN_SOURCE 700

#include "predicate.h"

#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cookie.h"
#include "errbuf.h"
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
/* A weight beyond this is a typo; Spring's are ints, usually percentages. */
#define WEIGHT_MAX 1000000

static const struct arg_spec path_args[] = {
    {"patterns", false, true, false},
};
static const struct arg_spec method_args[] = {
    {"methods", false, true, false},
};
static const struct arg_spec host_args[] = {
    {"patterns", false, true, false},
};
static const struct arg_spec header_args[] = {
    {"header", false, false, false},
    {"regexp", true, false, false},
};
static const struct arg_spec query_args[] = {
    {"param", false, false, false},
    {"regexp", true, false, false},
};
static const struct arg_spec remote_addr_args[] = {
    {"sources", false, true, false},
};
static const struct arg_spec after_args[] = {
    {"datetime", false, false, false},
};
static const struct arg_spec between_args[] = {
    {"datetime1", false, false, false},
    {"datetime2", false, false, false},
};
static const struct arg_spec cookie_args[] = {
    {"name", false, false, false},
    {"regexp", true, false, false},
};
static const struct arg_spec weight_args[] = {
    {"group", false, false, false},
    {"weight", false, false, false},
};

#define SPEC(name, kind, args)                                                 \
    {                                                                          \
        name, kind, args, sizeof(args) / sizeof(args[0]), false, 0             \
    }

static const struct kind_spec specs[] = {
    SPEC("Path", PREDICATE_PATH, path_args),
    SPEC("Method", PREDICATE_METHOD, method_args),
    SPEC("Host", PREDICATE_HOST, host_args),
    SPEC("Header", PREDICATE_HEADER, header_args),
    SPEC("Query", PREDICATE_QUERY, query_args),
    SPEC("RemoteAddr", PREDICATE_REMOTE_ADDR, remote_addr_args),
    SPEC("After", PREDICATE_AFTER, after_args),
    SPEC("Before", PREDICATE_BEFORE, after_args),
    SPEC("Between", PREDICATE_BETWEEN, between_args),
    SPEC("Cookie", PREDICATE_COOKIE, cookie_args),
    SPEC("Weight", PREDICATE_WEIGHT, weight_args),
    SPEC("XForwardedRemoteAddr", PREDICATE_XFORWARDED_REMOTE_ADDR,
         remote_addr_args),
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
explain_bad_cidr(const char *what, const char *s, char *err, size_t errlen)
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
        snprintf(err, errlen, "%s: \"%s\" is not an IP address", what, s);
        return;
    }
    prefix = strtoul(slash + 1, &end, 10);
    if (!isdigit((unsigned char)slash[1]) || *end != '\0' ||
        prefix > (a.family == AF_INET ? 32u : 128u)) {
        snprintf(err, errlen, "%s: \"%s\": bad prefix length", what, s);
        return;
    }
    /* Only host bits remain: show the block they probably meant. */
    widest.addr = a;
    widest.prefix = (unsigned)prefix;
    for (unsigned i = widest.prefix; i < 128; i++) {
        widest.addr.bytes[i / 8] &= (uint8_t) ~(0x80u >> (i % 8));
    }
    netaddr_format(&widest.addr, addr, sizeof(addr));
    snprintf(err, errlen, "%s: \"%s\" has host bits set (did you mean %s/%lu?)",
             what, s, addr, prefix);
}

static int
init_remote_addr(struct predicate *p, const struct kind_spec *spec,
                 const char *const *args, size_t nargs, char *err,
                 size_t errlen)
{
    p->cidrs = xcalloc(nargs, sizeof(*p->cidrs));
    for (size_t i = 0; i < nargs; i++) {
        if (netaddr_parse_cidr(args[i], &p->cidrs[i]) != 0) {
            explain_bad_cidr(spec->name, args[i], err, errlen);
            return -1;
        }
        p->ncidrs++;
    }
    return 0;
}

/* Digits of a fraction of a second, down to milliseconds. */
static const char *
skip_fraction(const char *p, int64_t *ms)
{
    int64_t scale = 100;

    *ms = 0;
    if (*p != '.' && *p != ',') {
        return p;
    }
    p++;
    if (!isdigit((unsigned char)*p)) {
        return NULL;
    }
    for (; isdigit((unsigned char)*p); p++) {
        *ms += (*p - '0') * scale;
        scale /= 10;
    }
    return p;
}

int
predicate_parse_time(const char *s, int64_t *ms, char *err, size_t errlen)
{
    struct tm tm;
    const char *p;
    char *end;
    int64_t frac;
    int64_t off;
    time_t t;

    /* Spring reads a plain number as epoch milliseconds. */
    errno = 0;
    if (isdigit((unsigned char)s[0]) && strspn(s, "0123456789") == strlen(s)) {
        long long v = strtoll(s, &end, 10);

        if (errno != 0) {
            errbuf_printf(err, errlen, "\"%s\": out of range", s);
            return -1;
        }
        *ms = (int64_t)v;
        return 0;
    }
    memset(&tm, 0, sizeof(tm));
    p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (p == NULL || (p = skip_fraction(p, &frac)) == NULL) {
        errbuf_printf(err, errlen,
                      "\"%s\" is not a date-time like "
                      "2017-01-20T17:42:47.789-07:00[America/Denver]",
                      s);
        return -1;
    }
    if (*p == '\0' || *p == '[') {
        errbuf_printf(err, errlen,
                      "\"%s\": a UTC offset is needed (\"Z\", \"+01:00\"), "
                      "a zone id alone is not read",
                      s);
        return -1;
    }
    /* glibc's %z takes "Z", "+hh", "+hhmm" and "+hh:mm". */
    p = strptime(p, "%z", &tm);
    if (p == NULL || (*p != '\0' && (*p != '[' || p[1] == ']' ||
                                     strchr(p, ']') != p + strlen(p) - 1))) {
        errbuf_printf(err, errlen,
                      "\"%s\": bad UTC offset or zone id after the time", s);
        return -1;
    }
    /* timegm() normalises 'tm', tm_gmtoff included: read it first. */
    off = (int64_t)tm.tm_gmtoff;
    t = timegm(&tm);
    *ms = ((int64_t)t - off) * 1000 + frac;
    return 0;
}

static int
init_time(struct predicate *p, const struct kind_spec *spec,
          const char *const *args, char *err, size_t errlen)
{
    char why[192];
    int64_t v[2];
    size_t n = p->kind == PREDICATE_BETWEEN ? 2 : 1;

    for (size_t i = 0; i < n; i++) {
        if (predicate_parse_time(args[i], &v[i], why, sizeof(why)) != 0) {
            snprintf(err, errlen, "%s: %s: %s", spec->name, spec->args[i].name,
                     why);
            return -1;
        }
    }
    switch (p->kind) {
    case PREDICATE_AFTER:
        p->t0 = v[0];
        break;
    case PREDICATE_BEFORE:
        p->t1 = v[0];
        break;
    default:
        if (v[1] <= v[0]) {
            snprintf(err, errlen,
                     "Between: datetime2 \"%s\" must be after "
                     "datetime1 \"%s\"",
                     args[1], args[0]);
            return -1;
        }
        p->t0 = v[0];
        p->t1 = v[1];
        break;
    }
    return 0;
}

static int
init_cookie(struct predicate *p, const struct kind_spec *spec,
            const char *const *args, size_t nargs, char *err, size_t errlen)
{
    if (!is_token(args[0])) {
        snprintf(err, errlen, "Cookie: \"%s\" is not a cookie name", args[0]);
        return -1;
    }
    p->name = xstrdup(args[0]);
    return init_regexp(p, spec, nargs > 1 ? args[1] : NULL, err, errlen);
}

static int
init_weight(struct predicate *p, const char *const *args, char *err,
            size_t errlen)
{
    unsigned long long w;
    char *end;

    if (args[0][0] == '\0') {
        snprintf(err, errlen, "Weight: empty group name");
        return -1;
    }
    errno = 0;
    w = strtoull(args[1], &end, 10);
    if (!isdigit((unsigned char)args[1][0]) || *end != '\0' || errno != 0 ||
        w > WEIGHT_MAX) {
        snprintf(err, errlen,
                 "Weight: weight must be an integer from 0 to %d, got \"%s\"",
                 WEIGHT_MAX, args[1]);
        return -1;
    }
    p->name = xstrdup(args[0]);
    p->weight = w;
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
    case PREDICATE_XFORWARDED_REMOTE_ADDR:
        rc = init_remote_addr(p, spec, args, nargs, err, errlen);
        break;
    case PREDICATE_AFTER:
    case PREDICATE_BEFORE:
    case PREDICATE_BETWEEN:
        rc = init_time(p, spec, args, err, errlen);
        break;
    case PREDICATE_COOKIE:
        rc = init_cookie(p, spec, args, nargs, err, errlen);
        break;
    case PREDICATE_WEIGHT:
        rc = init_weight(p, args, err, errlen);
        break;
    default:
        snprintf(err, errlen, "%s: unknown predicate kind %d", spec->name,
                 spec->kind);
        break;
    }
    if (rc != 0) {
        predicate_deinit(p);
        return rc;
    }
    argspec_given_init(&p->given, args, nargs);
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
    argspec_given_deinit(&p->given);
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

static bool
cookie_matches(const char *value, size_t len, const void *arg)
{
    const struct predicate *p = arg;

    return p->re == NULL || regexp_full_match(p->re, value, len);
}

/* As Spring's: any cookie of the name whose whole value matches. */
static bool
test_cookie(const struct predicate *p, const struct headers *h)
{
    return cookie_any(h, p->name, cookie_matches, p);
}

/* splitmix64's finaliser: the group's own value from the request's draw. */
static uint64_t
mix(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static bool
test_weight(const struct predicate *p, uint64_t draw)
{
    uint64_t d;

    if (p->total == 0) {
        return false;
    }
    /* Totals are at most WEIGHT_MAX times the routes: the modulo bias on
     * 64 bits is far below anything measurable. */
    d = mix(draw + 0x9e3779b97f4a7c15ULL * (p->group + 1)) % p->total;
    return d >= p->lo && d < p->hi;
}

static bool
test_cidrs(const struct predicate *p, const struct netaddr *client)
{
    if (client == NULL) {
        return false;
    }
    for (size_t i = 0; i < p->ncidrs; i++) {
        if (netaddr_in_cidr(&p->cidrs[i], client)) {
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
    case PREDICATE_XFORWARDED_REMOTE_ADDR:
        return test_cidrs(p, req->client);
    case PREDICATE_AFTER:
        return req->now_ms > p->t0;
    case PREDICATE_BEFORE:
        return req->now_ms < p->t1;
    case PREDICATE_BETWEEN:
        return req->now_ms > p->t0 && req->now_ms < p->t1;
    case PREDICATE_COOKIE:
        return test_cookie(p, req->headers);
    case PREDICATE_WEIGHT:
        return test_weight(p, req->draw);
    }
    return false;
}
