/*
 * forwarded.h - who the client is, and what the gateway tells the upstream
 * about it: the client address behind trusted proxies (X-Forwarded-For)
 * and the identity a trusted proxy asserts in header fields, and the
 * hop-by-hop header rules of RFC 9110 section 7.6.1.
 * Pure: no I/O, no allocation. Depends on headers.h and netaddr.h.
 */
#ifndef SLUICE_FORWARDED_H
#define SLUICE_FORWARDED_H

#include <stdbool.h>
#include <stddef.h>

struct cidr;
struct headers;
struct netaddr;

/* True when 'a' lies in one of the 'n' blocks of 'trusted'. */
bool forwarded_is_trusted(const struct netaddr *a, const struct cidr *trusted,
                          size_t n);

/*
 * The client's address. When the socket 'peer' is a trusted proxy and
 * 'xff' (every X-Forwarded-For field as one list, headers_join(); may be
 * NULL) is present, walks its
 * entries from the right, skipping trusted proxies, and takes the first
 * one that is not trusted (or the leftmost, if all are). An entry that is
 * not an address stops the walk at the last good one. Otherwise the peer.
 */
void forwarded_client(const struct netaddr *peer, const char *xff,
                      const struct cidr *trusted, size_t n,
                      struct netaddr *out);

/*
 * Who the caller is, decided once per request: the limiter keys on it and
 * the upstream is told it (forward_request_headers()), and nothing else.
 */
struct forwarded_identity {
    const char *user; /* user id, or NULL: none; borrowed */
    const char *role; /* role, or NULL: none; borrowed */
};

enum forwarded_identity_status {
    FORWARDED_IDENTITY_OK,       /* '*out' is the identity (maybe none) */
    FORWARDED_IDENTITY_REPEATED, /* a trusted peer sent a field twice */
};

/*
 * The identity a peer asserts in the fields 'h' under the names
 * 'user_header' and 'role_header' (identity.*; either may be NULL: not
 * read). Only a trusted proxy ('trusted') may assert one; any other peer's
 * is none, however many fields it sent. An empty value is none. A trusted
 * peer's field sent twice is FORWARDED_IDENTITY_REPEATED, with no
 * identity: which value is meant is ambiguous, and a limiter reading one
 * while the upstream reads the other is what must not happen. 'out' points
 * into the values of 'h' (valid until its fields are cleared).
 */
enum forwarded_identity_status
forwarded_identity(const struct headers *h, bool trusted,
                   const char *user_header, const char *role_header,
                   struct forwarded_identity *out);

/*
 * True for the header fields that belong to one connection and are never
 * forwarded: Connection, Keep-Alive, Proxy-Connection, TE, Trailer,
 * Transfer-Encoding, Upgrade, Proxy-Authenticate, Proxy-Authorization.
 */
bool forwarded_is_hop_by_hop(const char *name);

/*
 * True when 'name' is listed in the value of a Connection header
 * ('connection', may be NULL): such fields are hop-by-hop too.
 */
bool forwarded_in_connection(const char *connection, const char *name);

#endif
