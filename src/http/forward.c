#include "forward.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "forwarded.h"
#include "netaddr.h"
#include "xmalloc.h"

/* True when 'name' is 'want' in any case; 'len' is strlen(want). */
static bool
named(const char *name, const char *want, size_t len)
{
    return (name[0] | 0x20) == (want[0] | 0x20) && strlen(name) == len &&
           strcasecmp(name, want) == 0;
}

char *
forward_connection_list(const struct headers *h)
{
    return headers_join(h, "Connection");
}

bool
forward_connection_nominates(const struct headers *h)
{
    for (size_t i = 0; i < h->n; i++) {
        const char *p = h->v[i].value;

        if (!named(h->v[i].name, "Connection", 10)) {
            continue;
        }
        while (*p != '\0') {
            const char *tok;
            size_t len;

            while (*p == ' ' || *p == '\t' || *p == ',') {
                p++;
            }
            tok = p;
            while (*p != '\0' && *p != ',' && *p != ' ' && *p != '\t') {
                p++;
            }
            len = (size_t)(p - tok);
            /* Keep-Alive is hop-by-hop: naming it adds nothing. */
            if (len > 0 &&
                (len != 10 || strncasecmp(tok, "keep-alive", 10) != 0)) {
                return true;
            }
        }
    }
    return false;
}

static bool
has_underscore(const char *name, const void *arg)
{
    (void)arg;
    return strchr(name, '_') != NULL;
}

size_t
forward_drop_underscored(struct headers *h, bool allowed)
{
    return allowed ? 0 : headers_remove_if(h, has_underscore, NULL);
}

static bool
nominated(const char *name, const void *connection)
{
    return forwarded_in_connection(connection, name);
}

size_t
forward_drop_nominated(struct headers *h)
{
    char *connection = forward_connection_list(h);
    size_t n = 0;

    if (connection != NULL) {
        n = headers_remove_if(h, nominated, connection);
        free(connection);
    }
    return n;
}

/* The request fields the gateway sets itself, not hop-by-hop ones. */
enum own_field {
    OWN_NONE,
    OWN_HOST,
    OWN_CONTENT_LENGTH,
    OWN_EXPECT,
    OWN_XFF,
    OWN_XFP,
    OWN_XFH,
};

/* Which of them 'name' is: one compare at most, chosen by length. */
static enum own_field
own_field(const char *name)
{
    const char *want;
    enum own_field f;

    switch (strlen(name)) {
    case 4:
        want = "Host", f = OWN_HOST;
        break;
    case 6:
        want = "Expect", f = OWN_EXPECT;
        break;
    case 14:
        want = "Content-Length", f = OWN_CONTENT_LENGTH;
        break;
    case 15:
        want = "X-Forwarded-For", f = OWN_XFF;
        break;
    case 16:
        want = "X-Forwarded-Host", f = OWN_XFH;
        break;
    case 17:
        want = "X-Forwarded-Proto", f = OWN_XFP;
        break;
    default:
        return OWN_NONE;
    }
    return strcasecmp(name, want) == 0 ? f : OWN_NONE;
}

bool
forward_sets_field(const char *name)
{
    char cgi[32];
    size_t n = strlen(name);

    if (n >= sizeof(cgi)) {
        return false; /* longer than any of them */
    }
    for (size_t i = 0; i <= n; i++) {
        cgi[i] = name[i] == '_' ? '-' : name[i];
    }
    return own_field(cgi) != OWN_NONE;
}

bool
forward_same_to_cgi(const char *a, const char *b)
{
    if (b == NULL) {
        return false;
    }
    for (; *a != '\0' && *b != '\0'; a++, b++) {
        char x = (char)(*a == '_' ? '-' : *a | 0x20);
        char y = (char)(*b == '_' ? '-' : *b | 0x20);

        if (x != y) {
            return false;
        }
    }
    return *a == *b;
}

/*
 * True when 'name' is where the identity goes (only the decided one
 * does), or, spelt with '_' (server.underscores_in_headers), is a field
 * the gateway sets itself to a CGI upstream: X_User_Id, X_Forwarded_For.
 */
static bool
identity_field(const struct forward_request *r, const char *name)
{
    if (forward_same_to_cgi(name, r->user_header) ||
        forward_same_to_cgi(name, r->role_header)) {
        return true;
    }
    return strchr(name, '_') != NULL &&
           (forward_same_to_cgi(name, "X-Forwarded-For") ||
            forward_same_to_cgi(name, "X-Forwarded-Proto") ||
            forward_same_to_cgi(name, "X-Forwarded-Host"));
}

/*
 * The fields other proxies use to tell an upstream of the client's address,
 * scheme, host or path (RFC 7239 Forwarded, X-Real-IP, the X-Forwarded-*
 * ones the gateway does not set, the client-address fields of CDNs), and
 * those by which a front tells the backend which path to serve
 * (X-Original-URL, X-Rewrite-URL: IIS, Symfony): Spring, Tomcat and
 * others believe them, Spring preferring Forwarded to X-Forwarded-*.
 */
static const char *const relayed_fields[] = {
    "Forwarded",          "X-Real-IP",       "X-Forwarded-Port",
    "X-Forwarded-Prefix", "X-Forwarded-Ssl", "X-Original-URL",
    "X-Rewrite-URL",      "X-Client-IP",     "True-Client-IP",
    "CF-Connecting-IP",
};

/*
 * True when 'name' is one of relayed_fields[] that must not pass: every
 * spelling from a peer that is not a trusted proxy, which could plant
 * them, and the '_' spellings from anyone, as with identity_field(): a CGI
 * upstream would read X_Real_IP beside the X-Real-IP a proxy set.
 */
static bool
relayed_field_dropped(const char *name, const void *arg)
{
    bool peer_trusted = *(const bool *)arg;

    if (strchr("xftc", name[0] | 0x20) == NULL) {
        return false;
    }
    if (peer_trusted && strchr(name, '_') == NULL) {
        return false;
    }
    for (size_t i = 0; i < sizeof(relayed_fields) / sizeof(relayed_fields[0]);
         i++) {
        if (forward_same_to_cgi(name, relayed_fields[i])) {
            return true;
        }
    }
    return false;
}

size_t
forward_drop_relayed(struct headers *h, bool peer_trusted)
{
    return headers_remove_if(h, relayed_field_dropped, &peer_trusted);
}

void
forward_request_headers(struct headers *out, const struct forward_request *r)
{
    const char *host = NULL, *xfp = NULL, *xfh = NULL;
    const char *xff = r->peer_trusted ? r->xff : NULL;
    char addr[64];

    for (size_t i = 0; i < r->in->n; i++) {
        const struct header *h = &r->in->v[i];
        enum own_field f = own_field(h->name);

        /* The first of each, as headers_get() would find it. */
        if (f == OWN_HOST && host == NULL) {
            host = h->value;
        } else if (f == OWN_XFP && xfp == NULL) {
            xfp = h->value;
        } else if (f == OWN_XFH && xfh == NULL) {
            xfh = h->value;
        }
        if (f == OWN_NONE && !forwarded_is_hop_by_hop(h->name) &&
            !identity_field(r, h->name)) {
            headers_add(out, h->name, h->value);
        }
    }
    headers_add(out, "Host", r->host);
    netaddr_format(r->peer, addr, sizeof(addr));
    if (xff != NULL) {
        char *v = xasprintf("%s, %s", xff, addr);

        headers_add(out, "X-Forwarded-For", v);
        free(v);
    } else {
        headers_add(out, "X-Forwarded-For", addr);
    }
    headers_add(out, "X-Forwarded-Proto",
                r->peer_trusted && xfp != NULL ? xfp
                : r->tls                       ? "https"
                                               : "http");
    if (r->peer_trusted && xfh != NULL) {
        headers_add(out, "X-Forwarded-Host", xfh);
    } else if (host != NULL) {
        headers_add(out, "X-Forwarded-Host", host);
    }
    if (r->who != NULL && r->user_header != NULL && r->who->user != NULL) {
        headers_add(out, r->user_header, r->who->user);
    }
    if (r->who != NULL && r->role_header != NULL && r->who->role != NULL) {
        headers_add(out, r->role_header, r->who->role);
    }
}

bool
forward_response_field(const char *name, const char *connection)
{
    return !forwarded_is_hop_by_hop(name) &&
           !forwarded_in_connection(connection, name) &&
           !named(name, "Content-Length", 14);
}
