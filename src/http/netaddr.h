/*
 * netaddr.h - IPv4/IPv6 addresses and CIDR blocks, for RemoteAddr and
 * trusted_proxies. Pure: no I/O, no allocation.
 */
#ifndef SLUICE_NETADDR_H
#define SLUICE_NETADDR_H

#include <stdbool.h>
#include <stdint.h>

struct sockaddr;

struct netaddr {
    int family;        /* AF_INET or AF_INET6 */
    uint8_t bytes[16]; /* network order; IPv4 uses the first 4 */
};

struct cidr {
    struct netaddr addr; /* with the host bits cleared */
    unsigned prefix;     /* 0..32 for IPv4, 0..128 for IPv6 */
};

/* Parses an IPv4 or IPv6 literal (no brackets, no zone); 0 or -1. */
int netaddr_parse(const char *s, struct netaddr *out);
/* From a socket address; -1 unless AF_INET or AF_INET6. */
int netaddr_from_sockaddr(const struct sockaddr *sa, struct netaddr *out);
/* Writes the textual form into 'buf' (at least 46 bytes). */
void netaddr_format(const struct netaddr *a, char *buf, unsigned len);

/*
 * Parses "10.0.0.0/8", "2001:db8::/32", or a bare address (a /32 or /128).
 * -1 on a bad address, a prefix out of range, or host bits set beyond the
 * prefix ("10.0.0.1/8" is refused: it is almost always a typo).
 */
int netaddr_parse_cidr(const char *s, struct cidr *out);
/*
 * True when 'a' lies in 'c'. An IPv4-mapped IPv6 address (::ffff:a.b.c.d)
 * matches the IPv4 block that holds a.b.c.d.
 */
bool netaddr_in_cidr(const struct cidr *c, const struct netaddr *a);

#endif
