/*
 * forward.h - the header fields a proxy passes on, both ways (RFC 9110
 * 7.6): hop-by-hop fields dropped, the Connection list read across every
 * Connection field, fields named with '_' dropped, and X-Forwarded-* set
 * for the upstream. Pure:
 * allocates, no I/O. Depends on headers.h and netaddr.h.
 */
#ifndef SLUICE_FORWARD_H
#define SLUICE_FORWARD_H

#include <stdbool.h>
#include <stddef.h>

#include "headers.h"

struct forwarded_identity;
struct netaddr;

/*
 * Every Connection field of 'h' as one comma-separated list (repeated
 * fields are one list, RFC 9110 5.3), so that a field named in a second
 * Connection line counts too; NULL when there is none. The caller frees
 * it.
 */
char *forward_connection_list(const struct headers *h);

/*
 * False when the Connection fields of 'h' name no field that is not
 * hop-by-hop anyway: there are none, or they say only "keep-alive" (in
 * any case, with empty list elements), as most responses do. The list
 * then needs no joining to be obeyed.
 */
bool forward_connection_nominates(const struct headers *h);

/*
 * Removes from a client's fields 'h' those whose name holds '_', unless
 * 'allowed' (server.underscores_in_headers); returns how many went. CGI,
 * WSGI and PHP upstreams read X_User_Id as X-User-Id, so such a name could
 * carry what the gateway refuses to believe (nginx drops them too).
 */
size_t forward_drop_underscored(struct headers *h, bool allowed);

/*
 * Removes from a client's fields 'h' those its Connection fields name
 * (every one of them, forward_connection_list()): they were meant for the
 * gateway's hop alone (RFC 9110 7.6.1). Done before anything reads the
 * request, so that a nominated field is as if never sent: the identity,
 * the router and the limiter never see what the upstream will not, and
 * what the route's filters add later is not nominated. Returns how many
 * went; the Connection fields stay, dropped as hop-by-hop when forwarded.
 */
size_t forward_drop_nominated(struct headers *h);

/*
 * Removes from a client's fields 'h' what other proxies relay of the
 * client (Forwarded, X-Real-IP, X-Forwarded-Port, -Prefix, -Ssl) unless
 * the peer is a trusted proxy ('peer_trusted'), and their '_' spellings
 * from any peer; returns how many went. Done before the route's filters
 * run, so that what a filter adds (AddRequestHeader=X-Forwarded-Prefix,
 * /api) goes upstream whoever the peer is.
 */
size_t forward_drop_relayed(struct headers *h, bool peer_trusted);

/*
 * True when 'name' (in any case, '_' read as '-') is a field the gateway
 * writes itself when it forwards a request: Host, Content-Length,
 * Expect, X-Forwarded-For, -Proto, -Host (forward_request_headers()).
 */
bool forward_sets_field(const char *name);

/*
 * True when 'a' and 'b' are one name to a CGI, WSGI or PHP upstream,
 * which reads both X-User-Id and X_User_Id as HTTP_X_USER_ID: the same
 * letters in any case, '-' and '_' alike. 'b' may be NULL (no match).
 */
bool forward_same_to_cgi(const char *a, const char *b);

/* What the upstream is told of a request; every pointer borrowed. */
struct forward_request {
    const struct headers *in;   /* the request's fields, filters applied */
    const char *host;           /* the Host field to send */
    const struct netaddr *peer; /* the socket peer */
    bool peer_trusted;          /* the peer is a trusted proxy */
    bool tls;                   /* it came over TLS: X-Forwarded-Proto
                                   https, unless a trusted proxy said */
    const char *xff;            /* every X-Forwarded-For field the client
                                   sent, as one list (headers_join()), or
                                   NULL; read only when 'peer_trusted' */
    const char *user_header;    /* identity.user_header, or NULL */
    const char *role_header;    /* identity.role_header, or NULL */
    const struct forwarded_identity *who; /* the identity decided, or NULL:
                                             none */
};

/*
 * Appends to 'out' the fields to send upstream for 'r': those of 'r->in'
 * but the hop-by-hop ones, Host,
 * Content-Length and Expect (the gateway frames the body itself and has
 * read it whole), then Host, and X-Forwarded-For, -Proto and -Host. The
 * X-Forwarded-* a client sent are kept (For extended with the peer) only
 * from a trusted proxy: anyone else could plant an address. Repeated
 * X-Forwarded-For fields are one list, first field first (RFC 9110 5.3),
 * 'r->xff', the list forwarded_client() walks; of the other two the
 * first counts.
 * The other fields proxies tell an upstream of the client with (Forwarded,
 * X-Real-IP, X-Forwarded-Port, -Prefix and -Ssl) pass as they are from a
 * trusted proxy and are left out from anyone else, who could plant them;
 * their '_' spellings are left out from every peer.
 * 'r->in' is what the filters made of the client's fields, so the
 * client's Connection list is not applied again here: it would remove
 * what the gateway added (forward_drop_nominated() applied it before).
 * Every field of 'r->in' called 'r->user_header' or 'r->role_header' is
 * left out, and the identity the gateway decided ('r->who') is written
 * last in those names: the upstream hears of the caller the limiter keyed
 * on, or of none, whatever the client sent or a filter wrote. So are
 * those names and the X-Forwarded-* ones spelt with '_' (allowed by
 * server.underscores_in_headers): a CGI upstream reads X_User_Id as
 * X-User-Id.
 */
void forward_request_headers(struct headers *out,
                             const struct forward_request *r);

/*
 * True when a response field 'name' goes on to the client, given the
 * response's Connection list ('connection', may be NULL): not hop-by-hop,
 * not named by that list, and not Content-Length, which the gateway sets
 * from the body's framing.
 */
bool forward_response_field(const char *name, const char *connection);

#endif
