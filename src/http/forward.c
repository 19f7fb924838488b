#include "forward.h"

#include <stdlib.h>
#include <strings.h>

#include "forwarded.h"
#include "netaddr.h"
#include "strbuf.h"
#include "xmalloc.h"

char *
forward_connection_list(const struct headers *h)
{
    struct strbuf b = STRBUF_INIT;

    for (size_t i = 0; i < h->n; i++) {
        if (strcasecmp(h->v[i].name, "Connection") == 0) {
            if (b.n > 0) {
                strbuf_add(&b, ", ", 2);
            }
            strbuf_adds(&b, h->v[i].value);
        }
    }
    return b.p;
}

/* A request field that goes upstream as it came. */
static bool
request_field(const char *name, const char *connection)
{
    return !forwarded_is_hop_by_hop(name) &&
           !forwarded_in_connection(connection, name) &&
           strcasecmp(name, "Host") != 0 &&
           strcasecmp(name, "Content-Length") != 0 &&
           strcasecmp(name, "Expect") != 0 &&
           strcasecmp(name, "X-Forwarded-For") != 0 &&
           strcasecmp(name, "X-Forwarded-Proto") != 0 &&
           strcasecmp(name, "X-Forwarded-Host") != 0;
}

void
forward_request_headers(struct headers *out, const struct forward_request *r)
{
    char *connection = forward_connection_list(r->in);
    const char *host = headers_get(r->in, "Host");
    const char *xff = headers_get(r->in, "X-Forwarded-For");
    const char *xfp = headers_get(r->in, "X-Forwarded-Proto");
    const char *xfh = headers_get(r->in, "X-Forwarded-Host");
    char addr[64];

    for (size_t i = 0; i < r->in->n; i++) {
        const struct header *h = &r->in->v[i];

        if (request_field(h->name, connection)) {
            headers_add(out, h->name, h->value);
        }
    }
    free(connection);
    headers_add(out, "Host", r->host);
    netaddr_format(r->peer, addr, sizeof(addr));
    if (r->peer_trusted && xff != NULL) {
        char *v = xasprintf("%s, %s", xff, addr);

        headers_add(out, "X-Forwarded-For", v);
        free(v);
    } else {
        headers_add(out, "X-Forwarded-For", addr);
    }
    headers_add(out, "X-Forwarded-Proto",
                r->peer_trusted && xfp != NULL ? xfp : "http");
    if (r->peer_trusted && xfh != NULL) {
        headers_add(out, "X-Forwarded-Host", xfh);
    } else if (host != NULL) {
        headers_add(out, "X-Forwarded-Host", host);
    }
}

bool
forward_response_field(const char *name, const char *connection)
{
    return !forwarded_is_hop_by_hop(name) &&
           !forwarded_in_connection(connection, name) &&
           strcasecmp(name, "Content-Length") != 0;
}
