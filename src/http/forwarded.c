#include "forwarded.h"

#include <string.h>
#include <strings.h>

#include "headers.h"
#include "netaddr.h"

bool
forwarded_is_trusted(const struct netaddr *a, const struct cidr *trusted,
                     size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (netaddr_in_cidr(&trusted[i], a)) {
            return true;
        }
    }
    return false;
}

/* Parses the entry xff[start, end) with surrounding blanks removed. */
static int
parse_entry(const char *xff, size_t start, size_t end, struct netaddr *out)
{
    char tmp[64];
    const char *p = xff + start;
    size_t len = end - start;

    headers_trim_ows(&p, &len);
    if (len == 0 || len >= sizeof(tmp)) {
        return -1;
    }
    memcpy(tmp, p, len);
    tmp[len] = '\0';
    return netaddr_parse(tmp, out);
}

void
forwarded_client(const struct netaddr *peer, const char *xff,
                 const struct cidr *trusted, size_t n, struct netaddr *out)
{
    size_t end;

    *out = *peer;
    if (xff == NULL || !forwarded_is_trusted(peer, trusted, n)) {
        return;
    }
    end = strlen(xff);
    for (;;) {
        size_t start = end;
        struct netaddr a;

        while (start > 0 && xff[start - 1] != ',') {
            start--;
        }
        if (parse_entry(xff, start, end, &a) < 0) {
            return;
        }
        *out = a;
        if (!forwarded_is_trusted(&a, trusted, n) || start == 0) {
            return;
        }
        end = start - 1;
    }
}

/*
 * The one field called 'name' in 'h' into '*out' (NULL when there is none,
 * it is empty, or 'name' is NULL); -1 when there are several, empty or not.
 */
static int
single_field(const struct headers *h, const char *name, const char **out)
{
    const char *found = NULL;

    *out = NULL;
    if (name == NULL) {
        return 0;
    }
    for (size_t i = 0; i < h->n; i++) {
        if (strcasecmp(h->v[i].name, name) == 0) {
            if (found != NULL) {
                return -1;
            }
            found = h->v[i].value;
        }
    }
    *out = found != NULL && found[0] != '\0' ? found : NULL;
    return 0;
}

enum forwarded_identity_status
forwarded_identity(const struct headers *h, bool trusted,
                   const char *user_header, const char *role_header,
                   struct forwarded_identity *out)
{
    out->user = NULL;
    out->role = NULL;
    if (!trusted) {
        return FORWARDED_IDENTITY_OK;
    }
    if (single_field(h, user_header, &out->user) < 0 ||
        single_field(h, role_header, &out->role) < 0) {
        out->user = NULL;
        out->role = NULL;
        return FORWARDED_IDENTITY_REPEATED;
    }
    return FORWARDED_IDENTITY_OK;
}

bool
forwarded_is_hop_by_hop(const char *name)
{
    const char *hop;

    /* One candidate at most, by length (and first letter): one compare. */
    switch (strlen(name)) {
    case 2:
        hop = "TE";
        break;
    case 7:
        hop = (name[0] | 0x20) == 'u' ? "Upgrade" : "Trailer";
        break;
    case 10:
        hop = (name[0] | 0x20) == 'c' ? "Connection" : "Keep-Alive";
        break;
    case 16:
        hop = "Proxy-Connection";
        break;
    case 17:
        hop = "Transfer-Encoding";
        break;
    case 18:
        hop = "Proxy-Authenticate";
        break;
    case 19:
        hop = "Proxy-Authorization";
        break;
    default:
        return false;
    }
    return strcasecmp(name, hop) == 0;
}

bool
forwarded_in_connection(const char *connection, const char *name)
{
    const char *p = connection;
    size_t nlen;

    if (p == NULL) {
        return false;
    }
    nlen = strlen(name);
    while (*p) {
        const char *tok;
        size_t len;

        while (*p == ' ' || *p == '\t' || *p == ',') {
            p++;
        }
        tok = p;
        while (*p && *p != ',' && *p != ' ' && *p != '\t') {
            p++;
        }
        len = (size_t)(p - tok);
        if (len == nlen && len > 0 && strncasecmp(tok, name, len) == 0) {
            return true;
        }
    }
    return false;
}
