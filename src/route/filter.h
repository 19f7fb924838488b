/*
 * filter.h - what a route changes on the way through: the path
 * (StripPrefix, PrefixPath, RewritePath, SetPath), the query
 * (Add/RemoveRequestParameter), request headers (Add/Set/
 * RemoveRequestHeader, MapRequestHeader, PreserveHostHeader,
 * SetRequestHostHeader), the response (Add/Set/RemoveResponseHeader,
 * DedupeResponseHeader, RewriteResponseHeader,
 * RewriteLocationResponseHeader, SecureHeaders, SetStatus), the answers
 * a route gives itself (RedirectTo, RequestSize, RequestHeaderSize) and
 * how it retries (Retry). Pure: works on plain structs, no I/O. Filters
 * are built at config load and immutable after.
 */
#ifndef SLUICE_FILTER_H
#define SLUICE_FILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "argspec.h"
#include "glob.h"
#include "headers.h"

struct regexp;

enum filter_kind {
    FILTER_STRIP_PREFIX,                     /* parts */
    FILTER_PREFIX_PATH,                      /* prefix */
    FILTER_REWRITE_PATH,                     /* regexp, replacement */
    FILTER_SET_PATH,                         /* template */
    FILTER_ADD_REQUEST_HEADER,               /* name, value */
    FILTER_SET_REQUEST_HEADER,               /* name, value */
    FILTER_REMOVE_REQUEST_HEADER,            /* name */
    FILTER_ADD_RESPONSE_HEADER,              /* name, value */
    FILTER_SET_RESPONSE_HEADER,              /* name, value */
    FILTER_REMOVE_RESPONSE_HEADER,           /* name */
    FILTER_PRESERVE_HOST_HEADER,             /* (no arguments) */
    FILTER_ADD_REQUEST_PARAMETER,            /* name, value */
    FILTER_REMOVE_REQUEST_PARAMETER,         /* name */
    FILTER_MAP_REQUEST_HEADER,               /* fromHeader, toHeader */
    FILTER_SET_REQUEST_HOST_HEADER,          /* host */
    FILTER_DEDUPE_RESPONSE_HEADER,           /* name, strategy */
    FILTER_REWRITE_RESPONSE_HEADER,          /* name, regexp, replacement */
    FILTER_REWRITE_LOCATION_RESPONSE_HEADER, /* stripVersion,
                                                locationHeaderName,
                                                hostValue, protocols */
    FILTER_SECURE_HEADERS,                   /* disable */
    FILTER_SET_STATUS,                       /* status */
    FILTER_REDIRECT_TO,         /* status, url, includeRequestParams */
    FILTER_REQUEST_SIZE,        /* maxSize */
    FILTER_REQUEST_HEADER_SIZE, /* maxSize, errorHeaderName */
    FILTER_RETRY,               /* retries, statuses, methods, backoff.*,
                                   jitter.randomFactor, timeout, series,
                                   exceptions */
};

/* DedupeResponseHeader's strategy. */
enum filter_dedupe {
    DEDUPE_RETAIN_FIRST,
    DEDUPE_RETAIN_LAST,
    DEDUPE_RETAIN_UNIQUE,
};

/* RewriteLocationResponseHeader's stripVersion. */
enum filter_strip_version {
    STRIP_AS_IN_REQUEST,
    STRIP_NEVER,
    STRIP_ALWAYS,
};

/* What Retry retries; built by filter_init(). */
struct retry_conf {
    unsigned retries;          /* attempts after the first, 1 to 10 */
    uint64_t statuses[8];      /* bit s - 100 for each status s listed */
    unsigned series;           /* bit n for the nxx series listed */
    unsigned methods;          /* bit per filter_method_bit() */
    bool on_connect;           /* connection refused or unreachable */
    bool on_connect_timeout;   /* no connection in time */
    bool on_timeout;           /* no response head in time */
    bool on_closed;            /* closed or malformed before the head */
    uint64_t first_backoff_ms; /* before the first retry; 0: none */
    uint64_t max_backoff_ms;   /* cap on any backoff; 0: none */
    unsigned factor;           /* each backoff is the last times this */
    bool based_on_previous;    /* from the last backoff, jitter included,
                                  rather than firstBackoff * factor^n */
    double jitter;             /* randomFactor, 0 to 1 */
    uint64_t timeout_ms;       /* no retry starts past this since the
                                  first attempt began; 0: no bound but
                                  retries and the route's timeouts */
};

struct filter {
    enum filter_kind kind;
    unsigned parts;     /* StripPrefix: segments to drop */
    char *name;         /* header or parameter name; owned */
    char *value;        /* header or parameter value, prefix, template,
                           replacement, host or URL; may hold {var} URI
                           variables; owned */
    char *name2;        /* MapRequestHeader's toHeader, RewriteLocation's
                           hostValue, RequestHeaderSize's
                           errorHeaderName; owned */
    struct regexp *re;  /* RewritePath, RewriteResponseHeader pattern;
                           RewriteLocation's host:port; owned */
    struct regexp *re2; /* RewriteLocation's host:port and version */
    char **names;       /* DedupeResponseHeader's names; owned */
    size_t nnames;
    int mode;                   /* enum filter_dedupe or filter_strip_version */
    unsigned secure;            /* SecureHeaders: bit i adds the i-th field */
    int status;                 /* SetStatus, RedirectTo */
    bool include_query;         /* RedirectTo: the query goes to the URL */
    bool keep_existing;         /* AddResponseHeader with override false:
                                   nothing added over the upstream's own */
    uint64_t max_size;          /* RequestSize, RequestHeaderSize: bytes */
    struct retry_conf *retry;   /* Retry; owned */
    struct argspec_given given; /* the arguments as given; owned */
};

/* The request as it will be sent upstream; filters edit it in place. */
struct outgoing {
    char *path;                   /* normalised path; owned */
    char *query;                  /* raw query without '?', or NULL;
                                     owned */
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

/*
 * The response on its way to the client, as response filters see it.
 *   SetStatus         the status and its reason phrase and its reason phrase
 *   Dedupe...         keeps one value of repeated fields: the first, the
 *                     last, or each distinct one (in order)
 *   RewriteResponse.. regexp_replace() over every value of the field
 *   RewriteLocation.. host[:port] of an absolute URL in the field, after
 *                     a scheme the protocols regexp matches, becomes
 *                     hostValue or the client's Host; "/vN" after it
 *                     goes too unless stripVersion keeps it
 *   SecureHeaders     adds each field of filter_secure_fields() not
 *                     disabled, unless the response has it already
 */
struct response_edit {
    int status;              /* to send; filters may change it */
    const char *reason;      /* its reason phrase: SetStatus sets RFC
                                9110's ("" for a code without one) */
    struct headers *headers; /* fields to send; edited; borrowed */
    const char *client_host; /* Host the client sent, or NULL */
    const char *client_path; /* path the client asked for */
};

/* Applies a response filter to 'r' (request filters do nothing). */
void filter_apply_response(const struct filter *f, struct response_edit *r);

/* SecureHeaders' fields and Spring's default values, 'n' of them. */
struct secure_field {
    const char *name;  /* as sent */
    const char *value; /* Spring's default */
};
const struct secure_field *filter_secure_fields(size_t *n);

/* What the answering filters read of a request. All borrowed. */
struct request_facts {
    const char *query;             /* raw, without '?', or NULL */
    const struct headers *headers; /* as received */
    uint64_t body_bytes;           /* body received */
    const char *content_length;    /* its field, or NULL */
};

/* An answer a filter gives in place of the upstream. */
struct filter_answer {
    int status;        /* 3xx, 413 or 431 */
    char *location;    /* RedirectTo's Location; owned, or NULL */
    const char *field; /* a field to add, or NULL: errorMessage */
    char *field_value; /* its value; owned */
    char detail[192];  /* problem detail; "" for a redirect */
};

/*
 * True when 'f' (RedirectTo, RequestSize, RequestHeaderSize) answers
 * the request itself; 'a' then holds the answer (filter_answer_deinit()).
 *   RedirectTo         always: status, Location (with the query when
 *                      includeRequestParams)
 *   RequestSize        413 when Content-Length or the body received
 *                      exceeds maxSize
 *   RequestHeaderSize  431 when a field name plus all its values exceed
 *                      maxSize
 */
bool filter_answers(const struct filter *f, const struct request_facts *rq,
                    struct filter_answer *a);
void filter_answer_deinit(struct filter_answer *a);

/*
 * Retry: the bit of 'method' in retry_conf.methods (0 for a method Retry
 * does not know, never retried).
 */
unsigned filter_method_bit(const char *method);

/*
 * Retry: 0 when a retry may follow attempt 'attempt' (1 for the first)
 * that ended with 'status' (0 when it failed with 'failure' instead, one
 * of the on_* of 'rc' by its index: 0 connect, 1 connect timeout, 2
 * timeout, 3 closed) after 'elapsed_ms' since the first began; otherwise
 * -1. '*backoff_ms' is the wait before it, from 'prev_ms' (the last
 * backoff, 0 before the first) and 'unit' (uniform in [0, 1)) for the
 * jitter.
 */
int filter_retry_next(const struct retry_conf *rc, unsigned attempt, int status,
                      int failure, uint64_t elapsed_ms, uint64_t prev_ms,
                      double unit, uint64_t *backoff_ms);

/* Spring's HttpStatus name ("NOT_FOUND") or a number 100..599; -1. */
int filter_status_code(const char *s);

#endif
