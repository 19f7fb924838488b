/*
 * sentinel_parse.h - reads what Redis Sentinel says about a primary's
 * address: the two words of GET-MASTER-ADDR-BY-NAME and the text of a
 * '+switch-master' message. Pure: no I/O, no allocation; (ptr, len)
 * slices in, fixed buffers out. Depends on nothing.
 */
#ifndef SLUICE_SENTINEL_PARSE_H
#define SLUICE_SENTINEL_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Room for a host as Sentinel gives it: an IP address, or a DNS name
 * (at most 253 bytes) with "announce-hostnames"; NUL included. */
#define SENTINEL_HOST_MAX 256

/* A primary's address. */
struct sentinel_addr {
    char host[SENTINEL_HOST_MAX]; /* IP address or host name */
    uint16_t port;                /* 1..65535 */
};

/*
 * A TCP port: decimal digits only (no sign, no space, no "0x"), 1 to
 * 65535. True and '*port' set, or false and '*port' untouched.
 */
bool sentinel_parse_port(const char *s, size_t len, uint16_t *port);

/*
 * The address of a GET-MASTER-ADDR-BY-NAME reply: its host word and its
 * port word. False, '*out' unspecified, when the host is empty, does not
 * fit, or holds a space, a control byte or a NUL, or the port is bad.
 */
bool sentinel_parse_addr(const char *host, size_t host_len, const char *port,
                         size_t port_len, struct sentinel_addr *out);

/*
 * A '+switch-master' message, "<name> <old-host> <old-port> <new-host>
 * <new-port>", words split on single spaces. True when it is well formed
 * and names 'master' (NUL-terminated); then '*from' and '*to' hold the
 * old and the new address. False for another master name or a malformed
 * message; both outputs are then unspecified.
 */
bool sentinel_parse_switch(const char *msg, size_t len, const char *master,
                           struct sentinel_addr *from,
                           struct sentinel_addr *to);

#endif
