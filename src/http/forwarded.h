/*
 * forwarded.h - who the client is, and what the gateway tells the upstream
 * about it: the client address behind trusted proxies (X-Forwarded-For)
 * and the hop-by-hop header rules of RFC 9110 section 7.6.1.
 * Pure: no I/O, no allocation.
 */
#ifndef SLUICE_FORWARDED_H
#define SLUICE_FORWARDED_H

#include <stdbool.h>
#include <stddef.h>

struct cidr;
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
