#include "filter.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "errbuf.h"
#include "regexp.h"
#include "units.h"
#include "urlcode.h"
#include "xmalloc.h"

/* Spring Cloud Gateway rejects nothing here; 64 is far beyond any path. */
#define STRIP_PREFIX_MAX 64
/* Spring's defaults for RequestSize and RequestHeaderSize. */
#define REQUEST_SIZE_DEFAULT (5u * 1024 * 1024)
#define REQUEST_HEADER_SIZE_DEFAULT 16000u
/* Retry: more than this many retries is a typo, or a storm. */
#define RETRY_MAX 10

static const struct arg_spec strip_prefix_args[] = {
    /* Optional like Spring's, where "StripPrefix" alone drops one. */
    {"parts", true, false, false},
};
static const struct arg_spec prefix_path_args[] = {
    {"prefix", false, false, false},
};
static const struct arg_spec rewrite_path_args[] = {
    {"regexp", false, false, false},
    {"replacement", false, false, false},
};
static const struct arg_spec set_path_args[] = {
    {"template", false, false, false},
};
static const struct arg_spec name_value_args[] = {
    {"name", false, false, false},
    {"value", false, false, false},
};
/* Spring's override (4.3 on): false adds nothing when the response
 * has the field already. */
static const struct arg_spec add_response_header_args[] = {
    {"name", false, false, false},
    {"value", false, false, false},
    {"override", true, false, false},
};
static const struct arg_spec name_args[] = {
    {"name", false, false, false},
};
static const struct arg_spec map_header_args[] = {
    {"fromHeader", false, false, false},
    {"toHeader", false, false, false},
};
static const struct arg_spec host_args[] = {
    {"host", false, false, false},
};
static const struct arg_spec dedupe_args[] = {
    {"name", false, false, false},
    {"strategy", true, false, false},
};
static const struct arg_spec rewrite_header_args[] = {
    {"name", false, false, false},
    {"regexp", false, false, false},
    {"replacement", false, false, false},
};
static const struct arg_spec rewrite_location_args[] = {
    {"stripVersion", true, false, false},
    {"locationHeaderName", true, false, false},
    {"hostValue", true, false, false},
    {"protocols", true, false, false},
};
static const struct arg_spec secure_args[] = {
    {"disable", true, true, false},
};
static const struct arg_spec status_args[] = {
    {"status", false, false, false},
};
static const struct arg_spec redirect_args[] = {
    {"status", false, false, false},
    {"url", false, false, false},
    {"includeRequestParams", true, false, false},
};
static const struct arg_spec size_args[] = {
    {"maxSize", true, false, false},
};
static const struct arg_spec header_size_args[] = {
    {"maxSize", true, false, false},
    {"errorHeaderName", true, false, false},
};
/* Spring's shortcut order, then the keys only the long form has. */
static const struct arg_spec retry_args[] = {
    {"retries", true, false, false},
    {"statuses", true, false, true},
    {"methods", true, false, true},
    {"backoff.firstBackoff", true, false, false},
    {"backoff.maxBackoff", true, false, false},
    {"backoff.factor", true, false, false},
    {"backoff.basedOnPreviousValue", true, false, false},
    {"jitter.randomFactor", true, false, false},
    {"timeout", true, false, false},
    {"series", true, false, true},
    {"exceptions", true, false, true},
};
enum retry_arg {
    RA_RETRIES,
    RA_STATUSES,
    RA_METHODS,
    RA_FIRST_BACKOFF,
    RA_MAX_BACKOFF,
    RA_FACTOR,
    RA_BASED_ON_PREVIOUS,
    RA_JITTER,
    RA_TIMEOUT,
    RA_SERIES,
    RA_EXCEPTIONS,
};

#define ARGS(a) (a), (sizeof(a) / sizeof((a)[0]))

static const struct kind_spec filter_table[] = {
    {"StripPrefix", FILTER_STRIP_PREFIX, ARGS(strip_prefix_args), false, 0},
    {"PrefixPath", FILTER_PREFIX_PATH, ARGS(prefix_path_args), false, 0},
    {"RewritePath", FILTER_REWRITE_PATH, ARGS(rewrite_path_args), false, 0},
    {"SetPath", FILTER_SET_PATH, ARGS(set_path_args), false, 0},
    {"AddRequestHeader", FILTER_ADD_REQUEST_HEADER, ARGS(name_value_args),
     false, 0},
    {"SetRequestHeader", FILTER_SET_REQUEST_HEADER, ARGS(name_value_args),
     false, 0},
    {"RemoveRequestHeader", FILTER_REMOVE_REQUEST_HEADER, ARGS(name_args),
     false, 0},
    /* "AddResponseHeader=Cache-Control, no-cache, no-store" keeps its
     * value whole in gateway.yaml, as before override existed. */
    {"AddResponseHeader", FILTER_ADD_RESPONSE_HEADER,
     ARGS(add_response_header_args), false, 2},
    {"SetResponseHeader", FILTER_SET_RESPONSE_HEADER, ARGS(name_value_args),
     false, 0},
    {"RemoveResponseHeader", FILTER_REMOVE_RESPONSE_HEADER, ARGS(name_args),
     false, 0},
    {"PreserveHostHeader", FILTER_PRESERVE_HOST_HEADER, NULL, 0, false, 0},
    {"AddRequestParameter", FILTER_ADD_REQUEST_PARAMETER, ARGS(name_value_args),
     false, 0},
    {"RemoveRequestParameter", FILTER_REMOVE_REQUEST_PARAMETER, ARGS(name_args),
     false, 0},
    {"MapRequestHeader", FILTER_MAP_REQUEST_HEADER, ARGS(map_header_args),
     false, 0},
    {"SetRequestHostHeader", FILTER_SET_REQUEST_HOST_HEADER, ARGS(host_args),
     false, 0},
    {"DedupeResponseHeader", FILTER_DEDUPE_RESPONSE_HEADER, ARGS(dedupe_args),
     false, 0},
    {"RewriteResponseHeader", FILTER_REWRITE_RESPONSE_HEADER,
     ARGS(rewrite_header_args), false, 0},
    {"RewriteLocationResponseHeader", FILTER_REWRITE_LOCATION_RESPONSE_HEADER,
     ARGS(rewrite_location_args), true, 0},
    {"SecureHeaders", FILTER_SECURE_HEADERS, ARGS(secure_args), false, 0},
    {"SetStatus", FILTER_SET_STATUS, ARGS(status_args), false, 0},
    {"RedirectTo", FILTER_REDIRECT_TO, ARGS(redirect_args), false, 0},
    {"RequestSize", FILTER_REQUEST_SIZE, ARGS(size_args), false, 0},
    {"RequestHeaderSize", FILTER_REQUEST_HEADER_SIZE, ARGS(header_size_args),
     true, 0},
    {"Retry", FILTER_RETRY, ARGS(retry_args), true, 0},
};

static const struct secure_field secure_fields[] = {
    {"X-Xss-Protection", "1 ; mode=block"},
    {"Strict-Transport-Security", "max-age=631138519"},
    {"X-Frame-Options", "DENY"},
    {"X-Content-Type-Options", "nosniff"},
    {"Referrer-Policy", "no-referrer"},
    {"Content-Security-Policy",
     "default-src 'self' https:; font-src 'self' https: data:; img-src "
     "'self' https: data:; object-src 'none'; script-src https:; style-src "
     "'self' https: 'unsafe-inline'"},
    {"X-Download-Options", "noopen"},
    {"X-Permitted-Cross-Domain-Policies", "none"},
};

#define NSECURE (sizeof(secure_fields) / sizeof(secure_fields[0]))

/* Spring's HttpStatus names. */
static const struct {
    const char *name; /* Spring's */
    int code;
    const char *phrase; /* RFC 9110's reason phrase */
} status_names[] = {
    {"CONTINUE", 100, "Continue"},
    {"SWITCHING_PROTOCOLS", 101, "Switching Protocols"},
    {"PROCESSING", 102, "Processing"},
    {"EARLY_HINTS", 103, "Early Hints"},
    {"OK", 200, "OK"},
    {"CREATED", 201, "Created"},
    {"ACCEPTED", 202, "Accepted"},
    {"NON_AUTHORITATIVE_INFORMATION", 203, "Non-Authoritative Information"},
    {"NO_CONTENT", 204, "No Content"},
    {"RESET_CONTENT", 205, "Reset Content"},
    {"PARTIAL_CONTENT", 206, "Partial Content"},
    {"MULTI_STATUS", 207, "Multi-Status"},
    {"ALREADY_REPORTED", 208, "Already Reported"},
    {"IM_USED", 226, "IM Used"},
    {"MULTIPLE_CHOICES", 300, "Multiple Choices"},
    {"MOVED_PERMANENTLY", 301, "Moved Permanently"},
    {"FOUND", 302, "Found"},
    {"SEE_OTHER", 303, "See Other"},
    {"NOT_MODIFIED", 304, "Not Modified"},
    {"TEMPORARY_REDIRECT", 307, "Temporary Redirect"},
    {"PERMANENT_REDIRECT", 308, "Permanent Redirect"},
    {"BAD_REQUEST", 400, "Bad Request"},
    {"UNAUTHORIZED", 401, "Unauthorized"},
    {"PAYMENT_REQUIRED", 402, "Payment Required"},
    {"FORBIDDEN", 403, "Forbidden"},
    {"NOT_FOUND", 404, "Not Found"},
    {"METHOD_NOT_ALLOWED", 405, "Method Not Allowed"},
    {"NOT_ACCEPTABLE", 406, "Not Acceptable"},
    {"PROXY_AUTHENTICATION_REQUIRED", 407, "Proxy Authentication Required"},
    {"REQUEST_TIMEOUT", 408, "Request Timeout"},
    {"CONFLICT", 409, "Conflict"},
    {"GONE", 410, "Gone"},
    {"LENGTH_REQUIRED", 411, "Length Required"},
    {"PRECONDITION_FAILED", 412, "Precondition Failed"},
    {"PAYLOAD_TOO_LARGE", 413, "Content Too Large"},
    {"CONTENT_TOO_LARGE", 413, "Content Too Large"},
    {"URI_TOO_LONG", 414, "URI Too Long"},
    {"UNSUPPORTED_MEDIA_TYPE", 415, "Unsupported Media Type"},
    {"REQUESTED_RANGE_NOT_SATISFIABLE", 416, "Range Not Satisfiable"},
    {"EXPECTATION_FAILED", 417, "Expectation Failed"},
    {"I_AM_A_TEAPOT", 418, "I'm a teapot"},
    {"UNPROCESSABLE_ENTITY", 422, "Unprocessable Content"},
    {"UNPROCESSABLE_CONTENT", 422, "Unprocessable Content"},
    {"LOCKED", 423, "Locked"},
    {"FAILED_DEPENDENCY", 424, "Failed Dependency"},
    {"TOO_EARLY", 425, "Too Early"},
    {"UPGRADE_REQUIRED", 426, "Upgrade Required"},
    {"PRECONDITION_REQUIRED", 428, "Precondition Required"},
    {"TOO_MANY_REQUESTS", 429, "Too Many Requests"},
    {"REQUEST_HEADER_FIELDS_TOO_LARGE", 431, "Request Header Fields Too Large"},
    {"UNAVAILABLE_FOR_LEGAL_REASONS", 451, "Unavailable For Legal Reasons"},
    {"INTERNAL_SERVER_ERROR", 500, "Internal Server Error"},
    {"NOT_IMPLEMENTED", 501, "Not Implemented"},
    {"BAD_GATEWAY", 502, "Bad Gateway"},
    {"SERVICE_UNAVAILABLE", 503, "Service Unavailable"},
    {"GATEWAY_TIMEOUT", 504, "Gateway Timeout"},
    {"HTTP_VERSION_NOT_SUPPORTED", 505, "HTTP Version Not Supported"},
    {"VARIANT_ALSO_NEGOTIATES", 506, "Variant Also Negotiates"},
    {"INSUFFICIENT_STORAGE", 507, "Insufficient Storage"},
    {"LOOP_DETECTED", 508, "Loop Detected"},
    {"BANDWIDTH_LIMIT_EXCEEDED", 509, "Bandwidth Limit Exceeded"},
    {"NOT_EXTENDED", 510, "Not Extended"},
    {"NETWORK_AUTHENTICATION_REQUIRED", 511, "Network Authentication Required"},
};

/* Spring's HttpStatus.Series, by the hundreds digit. */
static const char *const series_names[] = {
    NULL,          "INFORMATIONAL", "SUCCESSFUL",
    "REDIRECTION", "CLIENT_ERROR",  "SERVER_ERROR",
};

/* The methods Retry knows, by their bit. */
static const char *const retry_methods[] = {
    "GET",    "HEAD",    "POST",  "PUT",     "PATCH",
    "DELETE", "OPTIONS", "TRACE", "CONNECT",
};

#define NFILTERS (sizeof(filter_table) / sizeof(filter_table[0]))

const struct kind_spec *
filter_specs(size_t *n)
{
    *n = NFILTERS;
    return filter_table;
}

const struct secure_field *
filter_secure_fields(size_t *n)
{
    *n = NSECURE;
    return secure_fields;
}

int
filter_status_code(const char *s)
{
    char *end;
    long v;

    if (isdigit((unsigned char)s[0])) {
        errno = 0;
        v = strtol(s, &end, 10);
        return *end == '\0' && errno == 0 && v >= 100 && v <= 599 ? (int)v : -1;
    }
    for (size_t i = 0; i < sizeof(status_names) / sizeof(status_names[0]);
         i++) {
        if (strcmp(status_names[i].name, s) == 0) {
            return status_names[i].code;
        }
    }
    return -1;
}

/* The phrase of the first entry with that code; "" for another code. */
static const char *
status_phrase(int code)
{
    for (size_t i = 0; i < sizeof(status_names) / sizeof(status_names[0]);
         i++) {
        if (status_names[i].code == code) {
            return status_names[i].phrase;
        }
    }
    return "";
}

unsigned
filter_method_bit(const char *method)
{
    for (size_t i = 0; i < sizeof(retry_methods) / sizeof(retry_methods[0]);
         i++) {
        if (strcmp(retry_methods[i], method) == 0) {
            return 1u << i;
        }
    }
    return 0;
}

/* Digits only: "+1", "-1", " 1" and "1.0" are refused, not guessed at. */
static int
init_strip_prefix(struct filter *f, const char *name, const char *arg,
                  char *err, size_t errlen)
{
    unsigned v = 0;
    const char *p = arg;

    if (arg == NULL) {
        f->parts = 1;
        return 0;
    }
    for (; *p >= '0' && *p <= '9'; p++) {
        v = v * 10 + (unsigned)(*p - '0');
        if (v > STRIP_PREFIX_MAX) {
            break;
        }
    }
    if (p == arg || *p != '\0' || v > STRIP_PREFIX_MAX) {
        errbuf_printf(err, errlen,
                      "%s: parts must be an integer from 0 to %d, got \"%s\"",
                      name, STRIP_PREFIX_MAX, arg);
        return -1;
    }
    f->parts = v;
    return 0;
}

/*
 * Path pieces go into the request line verbatim, where a space or a
 * control character would split or corrupt it.
 */
static bool
valid_path_text(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p <= 0x20 || *p == 0x7f) {
            return false;
        }
    }
    return true;
}

static int
init_path(struct filter *f, const char *name, const char *what, const char *arg,
          char *err, size_t errlen)
{
    if (arg[0] != '/') {
        errbuf_printf(err, errlen, "%s: %s must start with '/', got \"%s\"",
                      name, what, arg);
        return -1;
    }
    if (!valid_path_text(arg)) {
        errbuf_printf(err, errlen,
                      "%s: %s contains a space or control character", name,
                      what);
        return -1;
    }
    /* A '{' in a path is a URI variable or a mistake: it would go
       upstream as it is. */
    for (const char *open = strchr(arg, '{'); open != NULL;
         open = strchr(open + 1, '{')) {
        size_t len;

        if (glob_next_ref(open, &len) != open) {
            errbuf_printf(err, errlen,
                          "%s: %s: '{' does not open a {name} (a name of "
                          "letters, digits, '_' and '-', then '}')",
                          name, what);
            return -1;
        }
    }
    f->value = xstrdup(arg);
    return 0;
}

static int
init_rewrite_path(struct filter *f, const char *name, const char *pattern,
                  const char *replacement, char *err, size_t errlen)
{
    char why[256];
    char *probe;

    f->re = regexp_new(pattern, why, sizeof(why));
    if (f->re == NULL) {
        errbuf_printf(err, errlen, "%s: regexp: %s", name, why);
        return -1;
    }
    if (!valid_path_text(replacement)) {
        errbuf_printf(err, errlen,
                      "%s: replacement contains a space or control character",
                      name);
        return -1;
    }
    /* regexp_replace() checks every group reference even when nothing
       matches, so one dry run catches a misspelt group at load time. */
    probe = regexp_replace(f->re, "", replacement, why, sizeof(why));
    if (probe == NULL) {
        errbuf_printf(err, errlen, "%s: replacement: %s", name, why);
        return -1;
    }
    free(probe);
    f->value = xstrdup(replacement);
    return 0;
}

static int
init_header(struct filter *f, const char *name, const char *hname,
            const char *value, char *err, size_t errlen)
{
    if (!headers_valid_name(hname)) {
        errbuf_printf(err, errlen, "%s: \"%s\" is not a valid header name",
                      name, hname);
        return -1;
    }
    if (value != NULL && !headers_valid_value(value)) {
        if (strpbrk(value, "\r\n") != NULL) {
            errbuf_printf(err, errlen, "%s: value contains a line break", name);
        } else {
            errbuf_printf(err, errlen, "%s: value contains a control character",
                          name);
        }
        return -1;
    }
    f->name = xstrdup(hname);
    if (value != NULL) {
        f->value = xstrdup(value);
    }
    return 0;
}

/* Cuts 's' at commas (and, with 'spaces', at blanks) into trimmed,
 * non-empty pieces; calls 'each' on each until it returns -1. */
static int
each_piece(const char *s, bool spaces, int (*each)(const char *, void *),
           void *arg)
{
    const char *seps = spaces ? ", \t" : ",";
    char *copy = xstrdup(s);
    char *save = NULL;
    int rc = 0;

    for (char *t = strtok_r(copy, seps, &save); t != NULL && rc == 0;
         t = strtok_r(NULL, seps, &save)) {
        while (*t == ' ' || *t == '\t') {
            t++;
        }
        for (size_t n = strlen(t);
             n > 0 && (t[n - 1] == ' ' || t[n - 1] == '\t'); n--) {
            t[n - 1] = '\0';
        }
        if (*t != '\0') {
            rc = each(t, arg);
        }
    }
    free(copy);
    return rc;
}

static int
bad_value(const char *name, const char *what, const char *value, char *err,
          size_t errlen)
{
    if (strpbrk(value, "\r\n") != NULL) {
        errbuf_printf(err, errlen, "%s: %s contains a line break", name, what);
    } else {
        errbuf_printf(err, errlen, "%s: %s contains a control character", name,
                      what);
    }
    return -1;
}

static int
init_parameter(struct filter *f, const char *name, const char *pname,
               const char *value, char *err, size_t errlen)
{
    if (pname[0] == '\0') {
        errbuf_printf(err, errlen, "%s: empty parameter name", name);
        return -1;
    }
    f->name = xstrdup(pname);
    if (value != NULL) {
        f->value = xstrdup(value);
    }
    return 0;
}

static int
init_map_header(struct filter *f, const char *name, const char *from,
                const char *to, char *err, size_t errlen)
{
    const char *bad = !headers_valid_name(from) ? from
                      : !headers_valid_name(to) ? to
                                                : NULL;

    if (bad != NULL) {
        errbuf_printf(err, errlen, "%s: \"%s\" is not a valid header name",
                      name, bad);
        return -1;
    }
    f->name = xstrdup(from);
    f->name2 = xstrdup(to);
    return 0;
}

static int
init_host(struct filter *f, const char *name, const char *host, char *err,
          size_t errlen)
{
    if (host[0] == '\0' || strpbrk(host, " /?#@") != NULL) {
        errbuf_printf(err, errlen,
                      "%s: \"%s\" is not a host (name or address, optional "
                      ":port)",
                      name, host);
        return -1;
    }
    if (!headers_valid_value(host)) {
        return bad_value(name, "host", host, err, errlen);
    }
    f->value = xstrdup(host);
    return 0;
}

struct names_ctx {
    struct filter *f;
    const char *name;
    char *err;
    size_t errlen;
};

static int
on_dedupe_name(const char *piece, void *arg)
{
    struct names_ctx *c = arg;
    struct filter *f = c->f;

    if (!headers_valid_name(piece)) {
        errbuf_printf(c->err, c->errlen,
                      "%s: \"%s\" is not a valid header name", c->name, piece);
        return -1;
    }
    f->names = xrealloc(f->names, (f->nnames + 1) * sizeof(*f->names));
    f->names[f->nnames++] = xstrdup(piece);
    return 0;
}

static int
init_dedupe(struct filter *f, const char *name, const char *names,
            const char *strategy, char *err, size_t errlen)
{
    static const char *const strategies[] = {"RETAIN_FIRST", "RETAIN_LAST",
                                             "RETAIN_UNIQUE"};
    struct names_ctx c = {f, name, err, errlen};

    /* Spring separates the names by spaces; commas read as well. */
    if (each_piece(names, true, on_dedupe_name, &c) != 0) {
        return -1;
    }
    if (f->nnames == 0) {
        errbuf_printf(err, errlen, "%s: no header name", name);
        return -1;
    }
    f->mode = DEDUPE_RETAIN_FIRST;
    if (strategy == NULL) {
        return 0;
    }
    for (int i = 0; i < 3; i++) {
        if (strcmp(strategy, strategies[i]) == 0) {
            f->mode = i;
            return 0;
        }
    }
    errbuf_printf(err, errlen,
                  "%s: strategy must be RETAIN_FIRST, RETAIN_LAST or "
                  "RETAIN_UNIQUE, got \"%s\"",
                  name, strategy);
    return -1;
}

/* Compiles 'pattern' and checks that 'replacement' names only its groups. */
static int
init_replacement(struct filter *f, const char *name, const char *pattern,
                 const char *replacement, char *err, size_t errlen)
{
    char why[256];
    char *probe;

    f->re = regexp_new(pattern, why, sizeof(why));
    if (f->re == NULL) {
        errbuf_printf(err, errlen, "%s: regexp: %s", name, why);
        return -1;
    }
    probe = regexp_replace(f->re, "", replacement, why, sizeof(why));
    if (probe == NULL) {
        errbuf_printf(err, errlen, "%s: replacement: %s", name, why);
        return -1;
    }
    free(probe);
    f->value = xstrdup(replacement);
    return 0;
}

static int
init_rewrite_header(struct filter *f, const char *name, const char *const *args,
                    char *err, size_t errlen)
{
    if (!headers_valid_name(args[0])) {
        errbuf_printf(err, errlen, "%s: \"%s\" is not a valid header name",
                      name, args[0]);
        return -1;
    }
    if (!headers_valid_value(args[2])) {
        return bad_value(name, "replacement", args[2], err, errlen);
    }
    f->name = xstrdup(args[0]);
    return init_replacement(f, name, args[1], args[2], err, errlen);
}

static int
init_rewrite_location(struct filter *f, const char *name,
                      const char *const *args, size_t nargs, char *err,
                      size_t errlen)
{
    static const char *const modes[] = {"AS_IN_REQUEST", "NEVER_STRIP",
                                        "ALWAYS_STRIP"};
    const char *mode = nargs > 0 ? args[0] : NULL;
    const char *field = nargs > 1 && args[1] != NULL ? args[1] : "Location";
    const char *host = nargs > 2 ? args[2] : NULL;
    const char *protocols =
        nargs > 3 && args[3] != NULL ? args[3] : "https?|ftps?";
    char why[256];
    char *pattern;

    f->mode = STRIP_AS_IN_REQUEST;
    if (mode != NULL) {
        int i = 0;

        while (i < 3 && strcmp(mode, modes[i]) != 0) {
            i++;
        }
        if (i == 3) {
            errbuf_printf(err, errlen,
                          "%s: stripVersion must be AS_IN_REQUEST, "
                          "NEVER_STRIP or ALWAYS_STRIP, got \"%s\"",
                          name, mode);
            return -1;
        }
        f->mode = i;
    }
    if (!headers_valid_name(field)) {
        errbuf_printf(err, errlen, "%s: \"%s\" is not a valid header name",
                      name, field);
        return -1;
    }
    f->name = xstrdup(field);
    if (host != NULL) {
        if (strpbrk(host, " /?#@$") != NULL || !headers_valid_value(host)) {
            errbuf_printf(err, errlen, "%s: hostValue \"%s\" is not a host",
                          name, host);
            return -1;
        }
        f->name2 = xstrdup(host);
    }
    /* Group 1 is what stays; the host and port (and the version) go. */
    pattern = xasprintf("^((?:%s)://)[^:/]+(?::\\d+)?(?=/)", protocols);
    f->re = regexp_new(pattern, why, sizeof(why));
    free(pattern);
    if (f->re == NULL) {
        errbuf_printf(err, errlen, "%s: protocols: %s", name, why);
        return -1;
    }
    pattern =
        xasprintf("^((?:%s)://)[^:/]+(?::\\d+)?(?:/v\\d+)?(?=/)", protocols);
    f->re2 = regexp_new(pattern, why, sizeof(why));
    free(pattern);
    return f->re2 != NULL ? 0 : -1;
}

static int
on_secure_disable(const char *piece, void *arg)
{
    struct names_ctx *c = arg;

    for (size_t i = 0; i < NSECURE; i++) {
        if (strcasecmp(piece, secure_fields[i].name) == 0) {
            c->f->secure &= ~(1u << i);
            return 0;
        }
    }
    errbuf_printf(c->err, c->errlen,
                  "%s: cannot disable \"%s\" (known: x-xss-protection, "
                  "strict-transport-security, x-frame-options, "
                  "x-content-type-options, referrer-policy, "
                  "content-security-policy, x-download-options, "
                  "x-permitted-cross-domain-policies)",
                  c->name, piece);
    return -1;
}

static int
init_secure(struct filter *f, const char *name, const char *const *args,
            size_t nargs, char *err, size_t errlen)
{
    struct names_ctx c = {f, name, err, errlen};

    f->secure = (1u << NSECURE) - 1;
    for (size_t i = 0; i < nargs; i++) {
        if (each_piece(args[i], false, on_secure_disable, &c) != 0) {
            return -1;
        }
    }
    return 0;
}

static int
init_set_status(struct filter *f, const char *name, const char *arg, char *err,
                size_t errlen)
{
    int code = filter_status_code(arg);

    if (code < 0) {
        errbuf_printf(err, errlen,
                      "%s: status must be a number from 100 to 599 or a name "
                      "like NOT_FOUND, got \"%s\"",
                      name, arg);
        return -1;
    }
    /* The upstream's body goes on; these three cannot carry one. */
    if (code < 200 || code == 204 || code == 304) {
        errbuf_printf(err, errlen,
                      "%s: status %d cannot carry the upstream's body", name,
                      code);
        return -1;
    }
    f->status = code;
    return 0;
}

static int
parse_bool(const char *s, bool *out)
{
    if (strcasecmp(s, "true") == 0) {
        *out = true;
        return 0;
    }
    if (strcasecmp(s, "false") == 0) {
        *out = false;
        return 0;
    }
    return -1;
}

static int
init_add_response_header(struct filter *f, const char *name,
                         const char *const *args, size_t nargs, char *err,
                         size_t errlen)
{
    bool override = true;

    if (nargs > 2 && parse_bool(args[2], &override) != 0) {
        errbuf_printf(err, errlen,
                      "%s: override must be true or false, got \"%s\"", name,
                      args[2]);
        return -1;
    }
    f->keep_existing = !override;
    return init_header(f, name, args[0], args[1], err, errlen);
}

static int
init_redirect(struct filter *f, const char *name, const char *const *args,
              size_t nargs, char *err, size_t errlen)
{
    int code = filter_status_code(args[0]);

    if (code < 300 || code > 399) {
        errbuf_printf(err, errlen,
                      "%s: status must be a 3xx redirect code, got \"%s\"",
                      name, args[0]);
        return -1;
    }
    if (strpbrk(args[1], " \t") != NULL || !headers_valid_value(args[1])) {
        errbuf_printf(err, errlen, "%s: url \"%s\" is not a URL", name,
                      args[1]);
        return -1;
    }
    if (nargs > 2 && parse_bool(args[2], &f->include_query) != 0) {
        errbuf_printf(err, errlen,
                      "%s: includeRequestParams must be true or false, got "
                      "\"%s\"",
                      name, args[2]);
        return -1;
    }
    f->status = code;
    f->value = xstrdup(args[1]);
    return 0;
}

/*
 * The largest size (bytes) or duration (ms) a filter takes: 2^53, as
 * everywhere in gateway.yaml (LOAD_NUMBER_MAX in the config loader), so
 * that each is exact in JSON (GET /routes) and sums of them with a clock
 * stay within 64 bits.
 */
#define FILTER_NUMBER_MAX (1ULL << 53)

/* What parse_data_size() and parse_ms() found wrong. */
enum {
    NUMBER_BAD = -1,   /* not a number with a unit */
    NUMBER_LARGE = -2, /* above FILTER_NUMBER_MAX */
};

/*
 * Spring's DataSize: a number of bytes with an optional unit B, KB, MB,
 * GB or TB (powers of 1024); sluice's own KiB, MiB and GiB read too.
 * 0, NUMBER_BAD or NUMBER_LARGE.
 */
static int
parse_data_size(const char *s, uint64_t *out)
{
    static const char *const units[] = {"B", "KB", "MB", "GB", "TB"};
    unsigned long long v;
    char *end;

    if (units_parse_size(s, out) == 0) {
        return *out > FILTER_NUMBER_MAX ? NUMBER_LARGE : 0;
    }
    if (!isdigit((unsigned char)s[0])) {
        return NUMBER_BAD;
    }
    errno = 0;
    v = strtoull(s, &end, 10);
    for (unsigned i = 0; i < 5 && *end != '\0'; i++) {
        if (strcasecmp(end, units[i]) == 0) {
            end += strlen(end);
            v = v > (FILTER_NUMBER_MAX >> (10 * i)) ? FILTER_NUMBER_MAX + 1
                                                    : v << (10 * i);
        }
    }
    if (*end != '\0' && strcmp(end, "KiB") != 0 && strcmp(end, "MiB") != 0 &&
        strcmp(end, "GiB") != 0) {
        return NUMBER_BAD;
    }
    /* A well-formed number units_parse_size() could not hold. */
    if (errno != 0 || *end != '\0' || v > FILTER_NUMBER_MAX) {
        return NUMBER_LARGE;
    }
    *out = v;
    return 0;
}

static int
init_size(struct filter *f, const char *name, const char *const *args,
          size_t nargs, uint64_t dflt, char *err, size_t errlen)
{
    f->max_size = dflt;
    if (nargs > 0 && args[0] != NULL) {
        int rc = parse_data_size(args[0], &f->max_size);

        if (rc == NUMBER_LARGE) {
            errbuf_printf(err, errlen,
                          "%s: maxSize \"%s\" is too large (at most 2^53 B)",
                          name, args[0]);
            return -1;
        }
        if (rc != 0 || f->max_size == 0) {
            errbuf_printf(err, errlen,
                          "%s: maxSize must be a size above 0 like 5000000, "
                          "1000B or 5MB, got \"%s\"",
                          name, args[0]);
            return -1;
        }
    }
    if (nargs > 1 && args[1] != NULL) {
        if (!headers_valid_name(args[1])) {
            errbuf_printf(err, errlen, "%s: \"%s\" is not a valid header name",
                          name, args[1]);
            return -1;
        }
        f->name2 = xstrdup(args[1]);
    }
    return 0;
}

/* ---- Retry ---- */

struct retry_ctx {
    struct retry_conf *rc;
    const char *name;
    char *err;
    size_t errlen;
};

static int
on_retry_status(const char *piece, void *arg)
{
    struct retry_ctx *c = arg;
    int code = filter_status_code(piece);

    if (code < 0) {
        errbuf_printf(c->err, c->errlen,
                      "%s: statuses: \"%s\" is not a status (a number or a "
                      "name like BAD_GATEWAY)",
                      c->name, piece);
        return -1;
    }
    c->rc->statuses[(code - 100) / 64] |= (uint64_t)1 << ((code - 100) % 64);
    return 0;
}

static int
on_retry_method(const char *piece, void *arg)
{
    struct retry_ctx *c = arg;
    unsigned bit = filter_method_bit(piece);

    if (bit == 0) {
        errbuf_printf(c->err, c->errlen,
                      "%s: methods: \"%s\" is not a method (GET, HEAD, POST, "
                      "PUT, PATCH, DELETE, OPTIONS, TRACE)",
                      c->name, piece);
        return -1;
    }
    c->rc->methods |= bit;
    return 0;
}

static int
on_retry_series(const char *piece, void *arg)
{
    struct retry_ctx *c = arg;

    for (unsigned i = 1; i <= 5; i++) {
        if (strcmp(piece, series_names[i]) == 0 ||
            (piece[0] == (char)('0' + i) && piece[1] == '\0')) {
            c->rc->series |= 1u << i;
            return 0;
        }
    }
    errbuf_printf(c->err, c->errlen,
                  "%s: series: \"%s\" is not one of INFORMATIONAL, "
                  "SUCCESSFUL, REDIRECTION, CLIENT_ERROR, SERVER_ERROR",
                  c->name, piece);
    return -1;
}

/* Java's exception classes, read as the failures sluice can tell apart. */
static int
on_retry_exception(const char *piece, void *arg)
{
    struct retry_ctx *c = arg;
    const char *dot = strrchr(piece, '.');
    const char *cls = dot != NULL ? dot + 1 : piece;
    struct retry_conf *rc = c->rc;

    if (strcmp(cls, "IOException") == 0) {
        rc->on_connect = rc->on_connect_timeout = rc->on_closed = true;
    } else if (strcmp(cls, "TimeoutException") == 0) {
        rc->on_connect_timeout = rc->on_timeout = true;
    } else if (strcmp(cls, "ConnectException") == 0) {
        rc->on_connect = true;
    } else if (strcmp(cls, "ConnectTimeoutException") == 0) {
        rc->on_connect_timeout = true;
    } else {
        errbuf_printf(c->err, c->errlen,
                      "%s: exceptions: \"%s\" is not one sluice can tell "
                      "(IOException, TimeoutException, ConnectException, "
                      "ConnectTimeoutException)",
                      c->name, piece);
        return -1;
    }
    return 0;
}

/*
 * Spring's Duration as written in YAML: "10ms", "2s", or milliseconds.
 * 0, NUMBER_BAD or NUMBER_LARGE.
 */
static int
parse_ms(const char *s, uint64_t *ms)
{
    static const char *const units[] = {"ms", "s", "m", "h", "d"};
    char *end;
    unsigned long long v;

    if (units_parse_duration(s, ms) == 0) {
        return *ms > FILTER_NUMBER_MAX ? NUMBER_LARGE : 0;
    }
    if (!isdigit((unsigned char)s[0])) {
        return NUMBER_BAD;
    }
    errno = 0;
    v = strtoull(s, &end, 10);
    if (*end == '\0' && errno == 0 && v <= FILTER_NUMBER_MAX) {
        *ms = v;
        return 0;
    }
    for (size_t i = 0; *end != '\0' && i < sizeof(units) / sizeof(units[0]);
         i++) {
        if (strcmp(end, units[i]) == 0) {
            end += strlen(end);
        }
    }
    /* A well-formed number units_parse_duration() could not hold. */
    return *end == '\0' ? NUMBER_LARGE : NUMBER_BAD;
}

/* "backoff.firstBackoff \"x\" is too large", or the message 'what'. */
static int
retry_duration(const struct retry_ctx *c, const char *arg, const char *key,
               uint64_t *ms, const char *what)
{
    int rc = parse_ms(arg, ms);

    if (rc == NUMBER_LARGE) {
        errbuf_printf(c->err, c->errlen,
                      "%s: %s \"%s\" is too large (at most 2^53 ms)", c->name,
                      key, arg);
        return -1;
    }
    if (rc != 0) {
        errbuf_printf(c->err, c->errlen, "%s: %s, got \"%s\"", c->name, what,
                      arg);
        return -1;
    }
    return 0;
}

static int
init_retry(struct filter *f, const char *name, const char *const *args,
           size_t nargs, char *err, size_t errlen)
{
    struct retry_conf *rc = xcalloc(1, sizeof(*rc));
    struct retry_ctx c = {rc, name, err, errlen};
    const char *a[sizeof(retry_args) / sizeof(retry_args[0])] = {NULL};
    bool backoff = false;
    bool based = true;
    char *end;

    f->retry = rc;
    for (size_t i = 0; i < nargs && i < sizeof(a) / sizeof(a[0]); i++) {
        a[i] = args[i];
    }
    rc->retries = 3;
    if (a[RA_RETRIES] != NULL) {
        unsigned long v;

        errno = 0;
        v = strtoul(a[RA_RETRIES], &end, 10);
        if (!isdigit((unsigned char)a[RA_RETRIES][0]) || *end != '\0' ||
            errno != 0 || v < 1 || v > RETRY_MAX) {
            errbuf_printf(err, errlen,
                          "%s: retries must be an integer from 1 to %d, got "
                          "\"%s\"",
                          name, RETRY_MAX, a[RA_RETRIES]);
            return -1;
        }
        rc->retries = (unsigned)v;
    }
    if (a[RA_STATUSES] != NULL &&
        each_piece(a[RA_STATUSES], false, on_retry_status, &c) != 0) {
        return -1;
    }
    /* Spring's defaults: GET only, the 5xx series, every I/O failure. */
    if (a[RA_METHODS] != NULL) {
        if (each_piece(a[RA_METHODS], false, on_retry_method, &c) != 0) {
            return -1;
        }
    } else {
        rc->methods = filter_method_bit("GET");
    }
    if (a[RA_SERIES] != NULL) {
        if (each_piece(a[RA_SERIES], false, on_retry_series, &c) != 0) {
            return -1;
        }
    } else {
        rc->series = 1u << 5;
    }
    if (a[RA_EXCEPTIONS] != NULL) {
        if (each_piece(a[RA_EXCEPTIONS], false, on_retry_exception, &c) != 0) {
            return -1;
        }
    } else {
        rc->on_connect = rc->on_connect_timeout = true;
        rc->on_timeout = rc->on_closed = true;
    }
    /* Spring's backoff defaults, once any of its keys is given. */
    for (int i = RA_FIRST_BACKOFF; i <= RA_BASED_ON_PREVIOUS; i++) {
        backoff = backoff || a[i] != NULL;
    }
    if (backoff) {
        rc->first_backoff_ms = 5;
        rc->factor = 2;
    }
    if (a[RA_FIRST_BACKOFF] != NULL &&
        retry_duration(&c, a[RA_FIRST_BACKOFF], "backoff.firstBackoff",
                       &rc->first_backoff_ms,
                       "backoff.firstBackoff must be a duration above 0 like "
                       "10ms") != 0) {
        return -1;
    }
    if (a[RA_FIRST_BACKOFF] != NULL && rc->first_backoff_ms == 0) {
        errbuf_printf(err, errlen,
                      "%s: backoff.firstBackoff must be a duration above 0 "
                      "like 10ms, got \"%s\"",
                      name, a[RA_FIRST_BACKOFF]);
        return -1;
    }
    if (a[RA_MAX_BACKOFF] != NULL &&
        retry_duration(&c, a[RA_MAX_BACKOFF], "backoff.maxBackoff",
                       &rc->max_backoff_ms,
                       "backoff.maxBackoff must be a duration no shorter than "
                       "firstBackoff") != 0) {
        return -1;
    }
    if (a[RA_MAX_BACKOFF] != NULL &&
        rc->max_backoff_ms < rc->first_backoff_ms) {
        errbuf_printf(err, errlen,
                      "%s: backoff.maxBackoff must be a duration no shorter "
                      "than firstBackoff, got \"%s\"",
                      name, a[RA_MAX_BACKOFF]);
        return -1;
    }
    if (a[RA_FACTOR] != NULL) {
        unsigned long v;

        errno = 0;
        v = strtoul(a[RA_FACTOR], &end, 10);
        if (!isdigit((unsigned char)a[RA_FACTOR][0]) || *end != '\0' ||
            errno != 0 || v < 1 || v > 100) {
            errbuf_printf(err, errlen,
                          "%s: backoff.factor must be an integer from 1 to "
                          "100, got \"%s\"",
                          name, a[RA_FACTOR]);
            return -1;
        }
        rc->factor = (unsigned)v;
    }
    if (a[RA_BASED_ON_PREVIOUS] != NULL &&
        parse_bool(a[RA_BASED_ON_PREVIOUS], &based) != 0) {
        errbuf_printf(err, errlen,
                      "%s: backoff.basedOnPreviousValue must be true or "
                      "false, got \"%s\"",
                      name, a[RA_BASED_ON_PREVIOUS]);
        return -1;
    }
    rc->based_on_previous = based;
    if (a[RA_JITTER] != NULL) {
        errno = 0;
        rc->jitter = strtod(a[RA_JITTER], &end);
        if (*end != '\0' || errno != 0 || !(rc->jitter >= 0.0) ||
            rc->jitter > 1.0) {
            errbuf_printf(err, errlen,
                          "%s: jitter.randomFactor must be a number from 0 "
                          "to 1, got \"%s\"",
                          name, a[RA_JITTER]);
            return -1;
        }
    }
    if (a[RA_TIMEOUT] != NULL &&
        retry_duration(&c, a[RA_TIMEOUT], "timeout", &rc->timeout_ms,
                       "timeout must be a duration above 0 like 100ms") != 0) {
        return -1;
    }
    if (a[RA_TIMEOUT] != NULL && rc->timeout_ms == 0) {
        errbuf_printf(err, errlen,
                      "%s: timeout must be a duration above 0 like 100ms, got "
                      "\"%s\"",
                      name, a[RA_TIMEOUT]);
        return -1;
    }
    return 0;
}

int
filter_retry_next(const struct retry_conf *rc, unsigned attempt, int status,
                  int failure, uint64_t elapsed_ms, uint64_t prev_ms,
                  double unit, uint64_t *backoff_ms)
{
    bool again;
    double b;

    *backoff_ms = 0;
    if (attempt > rc->retries) {
        return -1;
    }
    if (status != 0) {
        again =
            status >= 100 && status <= 599 &&
            ((rc->statuses[(status - 100) / 64] >> ((status - 100) % 64)) & 1);
        again = again || (rc->series >> (status / 100) & 1);
    } else {
        again = (failure == 0 && rc->on_connect) ||
                (failure == 1 && rc->on_connect_timeout) ||
                (failure == 2 && rc->on_timeout) ||
                (failure == 3 && rc->on_closed);
    }
    if (!again) {
        return -1;
    }
    if (rc->first_backoff_ms > 0) {
        if (rc->based_on_previous && prev_ms > 0) {
            b = (double)prev_ms * rc->factor;
        } else {
            b = (double)rc->first_backoff_ms *
                pow((double)rc->factor, (double)(attempt - 1));
        }
        if (rc->max_backoff_ms > 0 && b > (double)rc->max_backoff_ms) {
            b = (double)rc->max_backoff_ms;
        }
        b += b * rc->jitter * (2.0 * unit - 1.0);
        /* No cap given: an hour stands in for one. */
        *backoff_ms = b < 0 ? 0 : b > 3600000.0 ? 3600000 : (uint64_t)b;
    }
    if (rc->timeout_ms > 0 && elapsed_ms + *backoff_ms >= rc->timeout_ms) {
        return -1;
    }
    return 0;
}

int
filter_init(struct filter *f, const struct kind_spec *spec,
            const char *const *args, size_t nargs, char *err, size_t errlen)
{
    const char *name = spec->name;
    int rc = 0;

    memset(f, 0, sizeof(*f));
    f->kind = (enum filter_kind)spec->kind;
    if (argspec_check_count(spec, nargs, ARGSPEC_WITH_NAMES, err, errlen) < 0) {
        return -1;
    }
    for (size_t i = 0; i < nargs && !spec->sparse; i++) {
        if (args[i] == NULL) {
            errbuf_printf(err, errlen, "%s: %s is missing", name,
                          spec->args[i].name);
            return -1;
        }
    }
    switch (f->kind) {
    case FILTER_STRIP_PREFIX:
        rc =
            init_strip_prefix(f, name, nargs > 0 ? args[0] : NULL, err, errlen);
        break;
    case FILTER_PREFIX_PATH:
        rc = init_path(f, name, "prefix", args[0], err, errlen);
        break;
    case FILTER_REWRITE_PATH:
        rc = init_rewrite_path(f, name, args[0], args[1], err, errlen);
        break;
    case FILTER_SET_PATH:
        rc = init_path(f, name, "template", args[0], err, errlen);
        break;
    case FILTER_ADD_REQUEST_HEADER:
    case FILTER_SET_REQUEST_HEADER:
    case FILTER_SET_RESPONSE_HEADER:
        rc = init_header(f, name, args[0], args[1], err, errlen);
        break;
    case FILTER_ADD_RESPONSE_HEADER:
        rc = init_add_response_header(f, name, args, nargs, err, errlen);
        break;
    case FILTER_REMOVE_REQUEST_HEADER:
    case FILTER_REMOVE_RESPONSE_HEADER:
        rc = init_header(f, name, args[0], NULL, err, errlen);
        break;
    case FILTER_PRESERVE_HOST_HEADER:
        break;
    case FILTER_ADD_REQUEST_PARAMETER:
        rc = init_parameter(f, name, args[0], args[1], err, errlen);
        break;
    case FILTER_REMOVE_REQUEST_PARAMETER:
        rc = init_parameter(f, name, args[0], NULL, err, errlen);
        break;
    case FILTER_MAP_REQUEST_HEADER:
        rc = init_map_header(f, name, args[0], args[1], err, errlen);
        break;
    case FILTER_SET_REQUEST_HOST_HEADER:
        rc = init_host(f, name, args[0], err, errlen);
        break;
    case FILTER_DEDUPE_RESPONSE_HEADER:
        rc = init_dedupe(f, name, args[0], nargs > 1 ? args[1] : NULL, err,
                         errlen);
        break;
    case FILTER_REWRITE_RESPONSE_HEADER:
        rc = init_rewrite_header(f, name, args, err, errlen);
        break;
    case FILTER_REWRITE_LOCATION_RESPONSE_HEADER:
        rc = init_rewrite_location(f, name, args, nargs, err, errlen);
        break;
    case FILTER_SECURE_HEADERS:
        rc = init_secure(f, name, args, nargs, err, errlen);
        break;
    case FILTER_SET_STATUS:
        rc = init_set_status(f, name, args[0], err, errlen);
        break;
    case FILTER_REDIRECT_TO:
        rc = init_redirect(f, name, args, nargs, err, errlen);
        break;
    case FILTER_REQUEST_SIZE:
        rc = init_size(f, name, args, nargs, REQUEST_SIZE_DEFAULT, err, errlen);
        break;
    case FILTER_REQUEST_HEADER_SIZE:
        rc = init_size(f, name, args, nargs, REQUEST_HEADER_SIZE_DEFAULT, err,
                       errlen);
        break;
    case FILTER_RETRY:
        rc = init_retry(f, name, args, nargs, err, errlen);
        break;
    default:
        assert(!"kind_spec not from filter_specs()");
        rc = -1;
    }
    if (rc < 0) {
        filter_deinit(f);
        f->kind = (enum filter_kind)spec->kind;
        return rc;
    }
    argspec_given_init(&f->given, args, nargs);
    return rc;
}

void
filter_deinit(struct filter *f)
{
    free(f->name);
    free(f->value);
    free(f->name2);
    for (size_t i = 0; i < f->nnames; i++) {
        free(f->names[i]);
    }
    free(f->names);
    free(f->retry);
    regexp_free(f->re2);
    regexp_free(f->re);
    argspec_given_deinit(&f->given);
    memset(f, 0, sizeof(*f));
}

bool
filter_is_response(const struct filter *f)
{
    switch (f->kind) {
    case FILTER_ADD_RESPONSE_HEADER:
    case FILTER_SET_RESPONSE_HEADER:
    case FILTER_REMOVE_RESPONSE_HEADER:
    case FILTER_DEDUPE_RESPONSE_HEADER:
    case FILTER_REWRITE_RESPONSE_HEADER:
    case FILTER_REWRITE_LOCATION_RESPONSE_HEADER:
    case FILTER_SECURE_HEADERS:
    case FILTER_SET_STATUS:
        return true;
    default:
        return false;
    }
}

/* Templates without a '{' are the common case: no expansion pass. */
static char *
expand(const char *tmpl, const struct glob_vars *vars)
{
    static const struct glob_vars none = {.n = 0};

    if (strchr(tmpl, '{') == NULL) {
        return xstrdup(tmpl);
    }
    return glob_expand(tmpl, vars != NULL ? vars : &none);
}

static void
replace_path(struct outgoing *out, char *path)
{
    free(out->path);
    out->path = path;
}

/*
 * Spring's rule: segments are the non-empty pieces between slashes; a
 * trailing slash survives unless nothing is left but "/".
 */
static char *
strip_prefix(const char *path, unsigned parts)
{
    const char *p = path;

    for (unsigned i = 0; i < parts; i++) {
        while (*p == '/') {
            p++;
        }
        if (*p == '\0') {
            break;
        }
        while (*p != '\0' && *p != '/') {
            p++;
        }
    }
    if (*p == '\0') {
        return xstrdup("/");
    }
    return xstrdup(p);
}

static char *
prefix_path(const char *prefix, const char *path)
{
    size_t plen = strlen(prefix);

    /* "/api/" + "/x" would otherwise make an empty segment. */
    if (plen > 0 && prefix[plen - 1] == '/' && path[0] == '/') {
        plen--;
    }
    return xasprintf("%.*s%s", (int)plen, prefix, path);
}

static char *
rewrite_path(const struct filter *f, const char *path)
{
    char why[256];
    char *r;

    r = regexp_replace(f->re, path, f->value, why, sizeof(why));
    if (r == NULL) {
        /* Group references were checked at load; what is left is a
           matcher limit on a hostile path. The path stays as it was. */
        return NULL;
    }
    if (r[0] != '/') {
        char *slashed = xasprintf("/%s", r);

        free(r);
        r = slashed;
    }
    return r;
}

static void
apply_header(const struct filter *f, struct headers *h,
             const struct glob_vars *vars)
{
    char *value = f->value != NULL ? expand(f->value, vars) : NULL;

    /* A URI variable comes from the normalised path and cannot hold a
       line break, but a header is the wrong place to find out. */
    if (value != NULL && !headers_valid_value(value)) {
        free(value);
        return;
    }
    switch (f->kind) {
    case FILTER_ADD_REQUEST_HEADER:
    case FILTER_ADD_RESPONSE_HEADER:
        headers_add(h, f->name, value);
        break;
    case FILTER_SET_REQUEST_HEADER:
    case FILTER_SET_RESPONSE_HEADER:
        headers_set(h, f->name, value);
        break;
    case FILTER_REMOVE_REQUEST_HEADER:
    case FILTER_REMOVE_RESPONSE_HEADER:
        headers_remove(h, f->name);
        break;
    default:
        break;
    }
    free(value);
}

/* RFC 3986's unreserved characters stay; every other byte is escaped. */
static void
encode_into(char **dst, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    char *d = *dst;

    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        if (isalnum(*p) || strchr("-._~", *p) != NULL) {
            *d++ = (char)*p;
        } else {
            *d++ = '%';
            *d++ = hex[*p >> 4];
            *d++ = hex[*p & 15];
        }
    }
    *dst = d;
}

static void
add_parameter(const struct filter *f, struct outgoing *out)
{
    char *value = expand(f->value, out->vars);
    size_t qlen = out->query != NULL ? strlen(out->query) : 0;
    char *q = xmalloc(qlen + 1 + 3 * (strlen(f->name) + strlen(value)) + 2);
    char *d = q;

    if (qlen > 0) {
        memcpy(d, out->query, qlen);
        d += qlen;
        if (out->query[qlen - 1] != '&') {
            *d++ = '&';
        }
    }
    encode_into(&d, f->name);
    *d++ = '=';
    encode_into(&d, value);
    *d = '\0';
    free(value);
    free(out->query);
    out->query = q;
}

/* Keeps the pieces whose form-decoded name is not 'name'. */
static void
remove_parameter(const struct filter *f, struct outgoing *out)
{
    const char *p = out->query;
    size_t want = strlen(f->name);
    char *q;
    char *d;

    if (p == NULL) {
        return;
    }
    q = xmalloc(strlen(p) + 1);
    d = q;
    while (*p != '\0') {
        size_t len = strcspn(p, "&");
        size_t nlen = strcspn(p, "=&");
        char *name = xmalloc(nlen + 1);
        size_t dn = urlcode_form_decode(p, nlen, name);

        if (!(dn == want && memcmp(name, f->name, want) == 0) && len > 0) {
            if (d != q) {
                *d++ = '&';
            }
            memcpy(d, p, len);
            d += len;
        }
        free(name);
        p += len + (p[len] == '&');
    }
    *d = '\0';
    free(out->query);
    out->query = q;
    if (q[0] == '\0') {
        free(q);
        out->query = NULL;
    }
}

/* Every value of fromHeader, added under toHeader. */
static void
map_header(const struct filter *f, struct headers *h)
{
    size_t n = h->n;

    for (size_t i = 0; i < n; i++) {
        if (strcasecmp(h->v[i].name, f->name) == 0) {
            headers_add(h, f->name2, h->v[i].value);
        }
    }
}

void
filter_apply_request(const struct filter *f, struct outgoing *out)
{
    char *s;

    switch (f->kind) {
    case FILTER_STRIP_PREFIX:
        replace_path(out, strip_prefix(out->path, f->parts));
        break;
    case FILTER_PREFIX_PATH:
        s = expand(f->value, out->vars);
        replace_path(out, prefix_path(s, out->path));
        free(s);
        break;
    case FILTER_REWRITE_PATH:
        s = rewrite_path(f, out->path);
        if (s != NULL) {
            replace_path(out, s);
        }
        break;
    case FILTER_SET_PATH:
        replace_path(out, expand(f->value, out->vars));
        break;
    case FILTER_ADD_REQUEST_HEADER:
    case FILTER_SET_REQUEST_HEADER:
    case FILTER_REMOVE_REQUEST_HEADER:
        apply_header(f, &out->headers, out->vars);
        break;
    case FILTER_PRESERVE_HOST_HEADER:
        out->preserve_host = true;
        break;
    case FILTER_ADD_REQUEST_PARAMETER:
        add_parameter(f, out);
        break;
    case FILTER_REMOVE_REQUEST_PARAMETER:
        remove_parameter(f, out);
        break;
    case FILTER_MAP_REQUEST_HEADER:
        map_header(f, &out->headers);
        break;
    case FILTER_SET_REQUEST_HOST_HEADER:
        /* Spring's way: the Host field, sent as if preserved. */
        headers_set(&out->headers, "Host", f->value);
        out->preserve_host = true;
        break;
    default:
        break;
    }
}

/* One value of each repeated field 'name' stays, as 'mode' says. */
static void
dedupe(struct headers *h, const char *name, int mode)
{
    size_t n = headers_count(h, name);
    const char **keep;
    size_t nkeep = 0;
    struct headers copy;

    if (n < 2) {
        return;
    }
    keep = xcalloc(n, sizeof(*keep));
    for (size_t i = 0; i < h->n; i++) {
        const char *v = h->v[i].value;
        bool seen = false;

        if (strcasecmp(h->v[i].name, name) != 0) {
            continue;
        }
        if (mode == DEDUPE_RETAIN_LAST) {
            nkeep = 0;
        }
        for (size_t k = 0; k < nkeep && !seen; k++) {
            seen = strcmp(keep[k], v) == 0;
        }
        if (!seen && (mode != DEDUPE_RETAIN_FIRST || nkeep == 0)) {
            keep[nkeep++] = v;
        }
    }
    /* The kept values live in the list being edited: copy them first. */
    headers_init(&copy);
    for (size_t k = 0; k < nkeep; k++) {
        headers_add(&copy, name, keep[k]);
    }
    headers_remove(h, name);
    for (size_t k = 0; k < copy.n; k++) {
        headers_add(h, copy.v[k].name, copy.v[k].value);
    }
    headers_deinit(&copy);
    free(keep);
}

static void
rewrite_values(const struct regexp *re, const char *replacement,
               struct headers *h, const char *name)
{
    struct headers out;

    if (headers_get(h, name) == NULL) {
        return;
    }
    /* Rebuilt in order: a list's values cannot be replaced in place. */
    headers_init(&out);
    for (size_t i = 0; i < h->n; i++) {
        const char *value = h->v[i].value;
        char why[64];
        char *v = NULL;

        if (strcasecmp(h->v[i].name, name) == 0) {
            v = regexp_replace(re, value, replacement, why, sizeof(why));
        }
        /* A result with a line break is not sent; the value stays. */
        headers_add(&out, h->v[i].name,
                    v != NULL && headers_valid_value(v) ? v : value);
        free(v);
    }
    headers_deinit(h);
    *h = out;
}

/* "/v1/..." asks for a version; "/v1" alone or "/vx/" does not. */
static bool
versioned(const char *path)
{
    size_t d;

    if (path == NULL || path[0] != '/' || path[1] != 'v') {
        return false;
    }
    d = strspn(path + 2, "0123456789");
    return d > 0 && path[2 + d] == '/';
}

static void
rewrite_location(const struct filter *f, struct response_edit *r)
{
    const char *loc = headers_get(r->headers, f->name);
    const char *host = f->name2 != NULL ? f->name2 : r->client_host;
    bool strip = f->mode == STRIP_ALWAYS ||
                 (f->mode == STRIP_AS_IN_REQUEST && !versioned(r->client_path));
    char *replacement;
    char *v;
    char why[64];

    if (loc == NULL || host == NULL || strchr(host, '$') != NULL ||
        !headers_valid_value(host)) {
        return;
    }
    replacement = xasprintf("${1}%s", host);
    v = regexp_replace(strip ? f->re2 : f->re, loc, replacement, why,
                       sizeof(why));
    if (v != NULL && headers_valid_value(v)) {
        headers_set(r->headers, f->name, v);
    }
    free(v);
    free(replacement);
}

static void
secure_headers(const struct filter *f, struct headers *h)
{
    for (size_t i = 0; i < NSECURE; i++) {
        if ((f->secure >> i & 1) &&
            headers_get(h, secure_fields[i].name) == NULL) {
            headers_add(h, secure_fields[i].name, secure_fields[i].value);
        }
    }
}

void
filter_apply_response(const struct filter *f, struct response_edit *r)
{
    struct headers *h = r->headers;

    /* Response values are literal: the response has no Path match. */
    switch (f->kind) {
    case FILTER_ADD_RESPONSE_HEADER:
        if (!f->keep_existing || headers_get(h, f->name) == NULL) {
            headers_add(h, f->name, f->value);
        }
        break;
    case FILTER_SET_RESPONSE_HEADER:
        headers_set(h, f->name, f->value);
        break;
    case FILTER_REMOVE_RESPONSE_HEADER:
        headers_remove(h, f->name);
        break;
    case FILTER_DEDUPE_RESPONSE_HEADER:
        for (size_t i = 0; i < f->nnames; i++) {
            dedupe(h, f->names[i], f->mode);
        }
        break;
    case FILTER_REWRITE_RESPONSE_HEADER:
        rewrite_values(f->re, f->value, h, f->name);
        break;
    case FILTER_REWRITE_LOCATION_RESPONSE_HEADER:
        rewrite_location(f, r);
        break;
    case FILTER_SECURE_HEADERS:
        secure_headers(f, h);
        break;
    case FILTER_SET_STATUS:
        r->status = f->status;
        r->reason = status_phrase(f->status);
        break;
    default:
        break;
    }
}

/* Spring's DataSize as its messages print it: "6.0 MB", "512 B". */
static void
format_size(uint64_t n, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KB", "MB", "GB", "TB"};
    double v = (double)n;
    unsigned u = 0;

    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (u == 0) {
        snprintf(buf, len, "%llu B", (unsigned long long)n);
    } else {
        snprintf(buf, len, "%.1f %s", v, units[u]);
    }
}

static bool
answer_redirect(const struct filter *f, const struct request_facts *rq,
                struct filter_answer *a)
{
    a->status = f->status;
    if (f->include_query && rq->query != NULL && rq->query[0] != '\0') {
        a->location =
            xasprintf("%s%c%s", f->value,
                      strchr(f->value, '?') != NULL ? '&' : '?', rq->query);
    } else {
        a->location = xstrdup(f->value);
    }
    return true;
}

static bool
answer_size(const struct filter *f, const struct request_facts *rq,
            struct filter_answer *a)
{
    uint64_t size = rq->body_bytes;
    char have[32], limit[32];

    if (rq->content_length != NULL) {
        char *end;
        unsigned long long cl;

        errno = 0;
        cl = strtoull(rq->content_length, &end, 10);
        if (errno == 0 && *end == '\0' && cl > size) {
            size = cl;
        }
    }
    if (size <= f->max_size) {
        return false;
    }
    format_size(size, have, sizeof(have));
    format_size(f->max_size, limit, sizeof(limit));
    a->status = 413;
    a->field = "errorMessage";
    a->field_value = xasprintf("Request size is larger than permissible "
                               "limit. Request size is %s where permissible "
                               "limit is %s",
                               have, limit);
    snprintf(a->detail, sizeof(a->detail),
             "request body of %llu bytes exceeds this route's RequestSize "
             "of %llu",
             (unsigned long long)size, (unsigned long long)f->max_size);
    return true;
}

static bool
answer_header_size(const struct filter *f, const struct request_facts *rq,
                   struct filter_answer *a)
{
    const struct headers *h = rq->headers;
    char limit[32], got[32];

    for (size_t i = 0; h != NULL && i < h->n; i++) {
        uint64_t size = strlen(h->v[i].name);
        bool first = true;

        /* Each name once: counted at its first field, all values summed. */
        for (size_t k = 0; k < h->n && first; k++) {
            first = k >= i || strcasecmp(h->v[k].name, h->v[i].name) != 0;
        }
        if (!first) {
            continue;
        }
        for (size_t k = i; k < h->n; k++) {
            if (strcasecmp(h->v[k].name, h->v[i].name) == 0) {
                size += strlen(h->v[k].value);
            }
        }
        if (size <= f->max_size) {
            continue;
        }
        format_size(f->max_size, limit, sizeof(limit));
        format_size(size, got, sizeof(got));
        a->status = 431;
        a->field = f->name2 != NULL ? f->name2 : "errorMessage";
        a->field_value =
            xasprintf("Request Header/s size is larger than permissible "
                      "limit (%s). Request Header/s size for '%s' is %s.",
                      limit, h->v[i].name, got);
        snprintf(a->detail, sizeof(a->detail),
                 "header field %.64s is %llu bytes, over this route's "
                 "RequestHeaderSize of %llu",
                 h->v[i].name, (unsigned long long)size,
                 (unsigned long long)f->max_size);
        return true;
    }
    return false;
}

bool
filter_answers(const struct filter *f, const struct request_facts *rq,
               struct filter_answer *a)
{
    memset(a, 0, sizeof(*a));
    switch (f->kind) {
    case FILTER_REDIRECT_TO:
        return answer_redirect(f, rq, a);
    case FILTER_REQUEST_SIZE:
        return answer_size(f, rq, a);
    case FILTER_REQUEST_HEADER_SIZE:
        return answer_header_size(f, rq, a);
    default:
        return false;
    }
}

void
filter_answer_deinit(struct filter_answer *a)
{
    free(a->location);
    free(a->field_value);
    memset(a, 0, sizeof(*a));
}
