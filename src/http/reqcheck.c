#include "reqcheck.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/*
 * Every rule here refuses a request that two HTTP parsers could read
 * differently (RFC 9112 6.1-6.3, 11.2): the gateway's own server side,
 * which is lenient, and the next hop, which we do not know.
 */

/* The target of the request line: no SP, CTL or DEL (RFC 9112 3.2). */
static bool
target_ok(const char *target)
{
    for (const unsigned char *p = (const unsigned char *)target; *p; p++) {
        /* Bytes >= 0x80 are left to the router: they split nothing. */
        if (*p <= 0x20 || *p == 0x7f) {
            return false;
        }
    }
    return true;
}

/* The characters of a reg-name (RFC 3986 3.2.2) but '%': unreserved and
 * sub-delims, as two bitmaps of the ASCII range (a Host is checked on
 * every request; a strchr() per character cost 400 instructions). */
#define BIT(c) (UINT64_C(1) << ((unsigned)(c)&63))
#define RANGE(a, b) ((BIT(b) - BIT(a)) | BIT(b))
static const uint64_t regname_lo = /* 0x00-0x3f */
    BIT('!') | BIT('$') | BIT('&') | BIT('\'') | BIT('(') | BIT(')') |
    BIT('*') | BIT('+') | BIT(',') | BIT('-') | BIT('.') | RANGE('0', '9') |
    BIT(';') | BIT('=');
static const uint64_t regname_hi = /* 0x40-0x7f */
    RANGE('A', 'Z') | BIT('_') | RANGE('a', 'z') | BIT('~');

static bool
regname_char(unsigned char c)
{
    return c < 64    ? (regname_lo >> c) & 1
           : c < 128 ? (regname_hi >> (c - 64)) & 1
                     : false;
}

static bool
hex_digit(unsigned char c)
{
    return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
}

bool
reqcheck_host_ok(const char *v, size_t len)
{
    const char *end = v + len, *p = v;
    unsigned port;

    if (len == 0) {
        return true; /* RFC 9110 7.2: a target URI without authority */
    }
    if (*p == '[') {
        /* IP-literal: an IPv6 address, as inet_pton() reads one. IPvFuture
         * and zone identifiers name nothing a gateway connects to. */
        const char *close = memchr(p, ']', len);
        char addr[INET6_ADDRSTRLEN];
        struct in6_addr a6;

        if (close == NULL || (size_t)(close - p - 1) >= sizeof(addr)) {
            return false;
        }
        memcpy(addr, p + 1, (size_t)(close - p - 1));
        addr[close - p - 1] = '\0';
        if (inet_pton(AF_INET6, addr, &a6) != 1) {
            return false;
        }
        p = close + 1;
    } else {
        /* reg-name, which IPv4address is a case of. */
        while (p < end && *p != ':') {
            if (*p == '%') {
                if (end - p < 3 || !hex_digit((unsigned char)p[1]) ||
                    !hex_digit((unsigned char)p[2])) {
                    return false;
                }
                p += 3;
            } else if (regname_char((unsigned char)*p)) {
                p++;
            } else {
                return false;
            }
        }
        if (p == v) {
            return false; /* a port with no host */
        }
    }
    if (p == end) {
        return true;
    }
    if (*p != ':') {
        return false;
    }
    /* port = *DIGIT, read within the slice (it need not end in NUL) */
    port = 0;
    for (p++; p < end; p++) {
        if (*p < '0' || *p > '9' ||
            (port = port * 10 + (unsigned)(*p - '0')) > 65535) {
            return false;
        }
    }
    return true;
}

bool
reqcheck_target_split(const char *target, struct reqcheck_target *out)
{
    size_t scheme;

    memset(out, 0, sizeof(*out));
    if (target[0] == '/') {
        /* origin-form, "//x" included: all of it is the path, never an
         * authority (a URI reference parser would take "x" for one). */
        out->path = target;
        out->path_len = strcspn(target, "?#");
        return true;
    }
    if (strncasecmp(target, "http://", 7) == 0) {
        scheme = 7;
    } else if (strncasecmp(target, "https://", 8) == 0) {
        scheme = 8;
    } else {
        return false; /* asterisk-form, authority-form, other schemes */
    }
    /* absolute-form: the authority, then the path (or none: "/"). */
    out->authority = target + scheme;
    out->authority_len = strcspn(out->authority, "/?#");
    if (memchr(out->authority, '@', out->authority_len) != NULL ||
        !reqcheck_host_ok(out->authority, out->authority_len) ||
        out->authority_len == 0) {
        return false;
    }
    out->path = out->authority + out->authority_len;
    out->path_len = strcspn(out->path, "?#");
    if (out->path_len == 0 || out->path[0] != '/') {
        out->path = "/";
        out->path_len = 1;
    }
    return true;
}

/*
 * Every Content-Length field must be 1*DIGIT and all must agree; '*len'
 * gets the value (0 when there is no field). Returns NULL or why not.
 *
 * A list such as "5, 5" is refused, although RFC 9110 8.6 lets a
 * recipient read it as 5: evhttp reads the field as one number and fails
 * on the comma, so the body it read (or did not) would not be the one the
 * field announces, and no real client sends a list. Several fields of the
 * same value are accepted: evhttp reads the first, and the others say
 * the same.
 */
static const char *
check_content_length(const struct headers *h, uint64_t *len)
{
    bool seen = false;

    *len = 0;
    for (size_t i = 0; i < h->n; i++) {
        const char *v = h->v[i].value;
        size_t n = strlen(v);
        unsigned long long value;

        if (strcasecmp(h->v[i].name, "Content-Length") != 0) {
            continue;
        }
        headers_trim_ows(&v, &n);
        if (n == 0 || strspn(v, "0123456789") != n) {
            return "Content-Length is not a number";
        }
        errno = 0;
        value = strtoull(v, NULL, 10);
        /* evhttp reads it as a signed 64-bit number. */
        if (errno == ERANGE || value > INT64_MAX) {
            return "Content-Length out of range";
        }
        if (seen && value != *len) {
            return "conflicting Content-Length fields";
        }
        seen = true;
        *len = value;
    }
    return NULL;
}

/*
 * The codings of one Transfer-Encoding value: REQCHECK_OK when they are
 * exactly "chunked" (any case, OWS around it), 400 when chunked is listed
 * twice (RFC 9112 6.1 forbids it), 501 for anything else: a coding we do
 * not know leaves the body's end to be guessed.
 */
static enum reqcheck_verdict
check_codings(const char *value, const char **why)
{
    size_t chunked = 0;
    size_t others = 0;
    const char *p = value;

    for (;;) {
        const char *comma = strchr(p, ',');
        size_t n = comma != NULL ? (size_t)(comma - p) : strlen(p);
        const char *c = p;

        headers_trim_ows(&c, &n);
        if (n == 7 && strncasecmp(c, "chunked", 7) == 0) {
            chunked++;
        } else {
            /* Empty list elements count too: say exactly "chunked". */
            others++;
        }
        if (comma == NULL) {
            break;
        }
        p = comma + 1;
    }
    if (chunked > 1) {
        *why = "chunked listed more than once in Transfer-Encoding";
        return REQCHECK_BAD_REQUEST;
    }
    if (chunked != 1 || others > 0) {
        *why = "a transfer coding other than chunked";
        return REQCHECK_NOT_IMPLEMENTED;
    }
    /*
     * evhttp reads the body as chunked only when the whole value is
     * "chunked" (its parser strips leading spaces but not tabs): anything
     * else, "\tchunked" included, would leave the body unread and parsed
     * as the next request while we forwarded it as chunked.
     */
    if (strcasecmp(value, "chunked") != 0) {
        *why = "Transfer-Encoding is not exactly chunked";
        return REQCHECK_NOT_IMPLEMENTED;
    }
    return REQCHECK_OK;
}

/* A refusal with 'sentence' as the reason. */
static enum reqcheck_verdict
refuse(const char **why, const char *sentence)
{
    *why = sentence;
    return REQCHECK_BAD_REQUEST;
}

enum reqcheck_verdict
reqcheck_request(const struct reqcheck_request *r, const char **why)
{
    const struct headers *h = r->headers;
    bool http11 = r->http_minor == 1;
    const char *te;
    const char *bad;
    size_t nhost = 0;
    const char *host = NULL;
    struct reqcheck_target target;
    uint64_t content_length;
    bool has_cl;

    assert(why != NULL && h != NULL);
    /*
     * evhttp takes any HTTP/x.y with x <= 1 and keeps the numbers in a
     * char; its framing and ours would then disagree (HTTP/1.255 went back
     * as "HTTP/1.-1" with "Content-Length: 0" before the body).
     */
    if (r->http_major != 1 || r->http_minor > 1) {
        return refuse(why, "an HTTP version other than 1.0 or 1.1");
    }
    /*
     * A request is not echoed back: TRACE would hand a page's script the
     * credentials the browser sent with it (cross-site tracing). CONNECT
     * never gets here: the connection layer refuses it (clientconn.h).
     */
    if (strcmp(r->method, "TRACE") == 0) {
        *why = "TRACE is not served";
        return REQCHECK_NOT_IMPLEMENTED;
    }
    if (r->target == NULL || r->target[0] == '\0') {
        return refuse(why, "empty request target");
    }
    if (!target_ok(r->target)) {
        return refuse(why, "space or control character in the request "
                           "target");
    }
    /* asterisk-form ("OPTIONS *") passes here; with no path to route on,
     * the proxy answers it 400 */
    memset(&target, 0, sizeof(target));
    if (strcmp(r->target, "*") != 0 &&
        !reqcheck_target_split(r->target, &target)) {
        return refuse(why, "request target is neither a path nor an "
                           "http(s) URI with a valid host");
    }
    if (r->split != NULL) {
        *r->split = target;
    }
    for (size_t i = 0; i < h->n; i++) {
        if (!headers_valid_name(h->v[i].name)) {
            return refuse(why, "a header name is not a token");
        }
        if (!headers_valid_value(h->v[i].value)) {
            return refuse(why, "control character in a header value");
        }
        /* Counted in the same pass: the names are read already. */
        if (strcasecmp(h->v[i].name, "Host") == 0 && nhost++ == 0) {
            host = h->v[i].value;
        }
    }

    /* RFC 9112 3.2: the authority must not be left to be guessed. */
    if (nhost > 1) {
        return refuse(why, "more than one Host field");
    }
    if (nhost == 0 && http11) {
        return refuse(why, "HTTP/1.1 request without Host");
    }
    if (nhost == 1) {
        const char *v = host;
        size_t n = strlen(v);

        headers_trim_ows(&v, &n);
        if (!reqcheck_host_ok(v, n)) {
            return refuse(why, "Host is not a host name or address with an "
                               "optional port");
        }
    }

    if ((bad = check_content_length(h, &content_length)) != NULL) {
        return refuse(why, bad);
    }
    has_cl = headers_count(h, "Content-Length") > 0;

    switch (headers_count(h, "Transfer-Encoding")) {
    case 0:
        break;
    case 1:
        te = headers_get(h, "Transfer-Encoding");
        /* RFC 9112 6.1: a 1.0 recipient may not know chunked at all. */
        if (!http11) {
            return refuse(why, "Transfer-Encoding in an HTTP/1.0 request");
        }
        /* RFC 9112 6.3: the classic smuggling request; refuse, not pick. */
        if (has_cl) {
            return refuse(why, "both Transfer-Encoding and Content-Length");
        }
        if (!r->body_read) {
            return refuse(why, "a body announced on a request that takes none");
        }
        return check_codings(te, why);
    default:
        return refuse(why, "more than one Transfer-Encoding field");
    }

    /*
     * The server side read no body (HEAD, TRACE): the bytes announced
     * would be read as the next request.
     */
    if (!r->body_read && content_length != 0) {
        return refuse(why, "a body announced on a request that takes none");
    }
    return REQCHECK_OK;
}

int
reqcheck_status(enum reqcheck_verdict v)
{
    switch (v) {
    case REQCHECK_OK:
        return 0;
    case REQCHECK_BAD_REQUEST:
        return 400;
    case REQCHECK_NOT_IMPLEMENTED:
        return 501;
    }
    return 0;
}
