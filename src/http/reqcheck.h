/*
 * reqcheck.h - refuses a client request whose framing or syntax is
 * ambiguous, before anything of it is forwarded: a request that one
 * parser reads one way and the next parser another is how requests are
 * smuggled past a gateway. Pure: no I/O; the request as the server side
 * parsed it, in, a verdict out.
 *
 * Refused with REQCHECK_BAD_REQUEST: an empty target, or one holding a
 * space or a control byte; a field name that is not a token, a field
 * value with a control character but HTAB; a Content-Length that is not
 * 1*DIGIT (a list "5, 5" included) or beyond 2^63-1, or Content-Length
 * fields that differ; Transfer-Encoding with Content-Length, in HTTP/1.0,
 * in more than one field, or listing chunked twice; a Content-Length
 * other than 0 or any Transfer-Encoding when no body is read; more than
 * one Host, or none in HTTP/1.1, or one that is not uri-host [":" port];
 * a target in neither origin-form nor http(s) absolute-form (with a valid
 * host and no userinfo). With REQCHECK_NOT_IMPLEMENTED: the method
 * TRACE; a Transfer-Encoding other than exactly one "chunked".
 */
#ifndef SLUICE_REQCHECK_H
#define SLUICE_REQCHECK_H

#include <stdbool.h>
#include <stddef.h>

#include "headers.h"

/* A request target in the forms the gateway serves (RFC 9112 3.2);
 * borrows from the target. */
struct reqcheck_target {
    const char *path;      /* origin-form: the target up to '?' or '#';
                              absolute-form: what follows the authority,
                              or "/" */
    size_t path_len;       /* bytes of 'path' */
    const char *authority; /* absolute-form: host [":" port]; else NULL */
    size_t authority_len;  /* bytes of 'authority' */
};

/* The request as the server side (evhttp) parsed it; all borrowed. */
struct reqcheck_request {
    const char *method;            /* "GET", "HEAD", ... */
    const char *target;            /* request target as received */
    unsigned http_major;           /* 1 */
    unsigned http_minor;           /* 0 or 1 */
    const struct headers *headers; /* every field as received, in order */
    bool body_read;                /* the server side read a body for this
                                      method (evhttp reads none for HEAD
                                      and TRACE, whatever the fields say) */
    struct reqcheck_target *split; /* out, or NULL: the target split as
                                      reqcheck_target_split() does (all
                                      NULL for asterisk-form "*"); to be
                                      read on REQCHECK_OK only */
};

/* What to do with a request. */
enum reqcheck_verdict {
    REQCHECK_OK,              /* forward it */
    REQCHECK_BAD_REQUEST,     /* 400 and close the connection */
    REQCHECK_NOT_IMPLEMENTED, /* 501 (TRACE, a transfer coding we do
                                 not know), and close the connection */
};

/*
 * Checks 'r'. On a refusal '*why' (not NULL) gets a static sentence for
 * the problem body and the log; on REQCHECK_OK it is left alone.
 */
enum reqcheck_verdict reqcheck_request(const struct reqcheck_request *r,
                                       const char **why);

/*
 * Splits 'target': origin-form ("/..."; "//x/y" is the path "//x/y", not
 * the authority "x") or absolute-form ("http://" or "https://", any case,
 * then a valid host and no userinfo). False for any other form.
 */
bool reqcheck_target_split(const char *target, struct reqcheck_target *out);

/*
 * True when the 'len' bytes at 'v' are a Host value: uri-host [":" port]
 * (RFC 9110 7.2, RFC 3986 3.2.2), where uri-host is a bracketed IPv6
 * address or a reg-name (an IPv4 address is one), and port up to 65535;
 * or empty.
 */
bool reqcheck_host_ok(const char *v, size_t len);

/* The HTTP status of a refusal: 400 or 501; 0 for REQCHECK_OK. */
int reqcheck_status(enum reqcheck_verdict v);

#endif
