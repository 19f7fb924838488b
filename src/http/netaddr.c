#include "netaddr.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

/* ::ffff:0:0/96, RFC 4291 section 2.5.5.2. */
static const uint8_t v4_mapped_prefix[12] = {0, 0, 0, 0, 0,    0,
                                             0, 0, 0, 0, 0xff, 0xff};

int
netaddr_parse(const char *s, struct netaddr *out)
{
    struct netaddr a;

    memset(&a, 0, sizeof(a));
    /* inet_pton refuses brackets, zones and the shorthand forms that
     * inet_aton would take ("10.1", "0x0a.0.0.1"), which is what a
     * config should be held to. */
    if (inet_pton(AF_INET, s, a.bytes) == 1) {
        a.family = AF_INET;
    } else if (inet_pton(AF_INET6, s, a.bytes) == 1) {
        a.family = AF_INET6;
    } else {
        return -1;
    }
    *out = a;
    return 0;
}

int
netaddr_from_sockaddr(const struct sockaddr *sa, struct netaddr *out)
{
    memset(out, 0, sizeof(*out));
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;

        out->family = AF_INET;
        memcpy(out->bytes, &sin->sin_addr, 4);
        return 0;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;

        out->family = AF_INET6;
        memcpy(out->bytes, &sin6->sin6_addr, 16);
        return 0;
    }
    return -1;
}

void
netaddr_format(const struct netaddr *a, char *buf, unsigned len)
{
    if (len == 0) {
        return;
    }
    if (a->family == AF_INET) {
        /* By hand: inet_ntop() formats IPv4 through sprintf(). */
        char tmp[16];
        unsigned n = 0;

        for (int i = 0; i < 4; i++) {
            unsigned v = a->bytes[i];

            if (i > 0) {
                tmp[n++] = '.';
            }
            if (v >= 100) {
                tmp[n++] = (char)('0' + v / 100);
            }
            if (v >= 10) {
                tmp[n++] = (char)('0' + v / 10 % 10);
            }
            tmp[n++] = (char)('0' + v % 10);
        }
        if (n < len) {
            memcpy(buf, tmp, n);
            buf[n] = '\0';
            return;
        }
        snprintf(buf, len, "?");
        return;
    }
    if (a->family != AF_INET6 ||
        inet_ntop(a->family, a->bytes, buf, (socklen_t)len) == NULL) {
        snprintf(buf, len, "?");
    }
}

static unsigned
max_prefix(int family)
{
    return family == AF_INET ? 32 : 128;
}

/* True when the first 'prefix' bits of 'a' and 'b' are equal. */
static bool
prefix_equal(const uint8_t *a, const uint8_t *b, unsigned prefix)
{
    unsigned whole = prefix / 8;
    unsigned rest = prefix % 8;
    uint8_t mask;

    if (memcmp(a, b, whole) != 0) {
        return false;
    }
    if (rest == 0) {
        return true;
    }
    mask = (uint8_t)(0xff << (8 - rest));
    return (a[whole] & mask) == (b[whole] & mask);
}

/* True when no bit past 'prefix' is set. */
static bool
host_bits_clear(const uint8_t *a, unsigned prefix, unsigned bits)
{
    for (unsigned i = prefix; i < bits; i++) {
        if (a[i / 8] & (0x80 >> (i % 8))) {
            return false;
        }
    }
    return true;
}

int
netaddr_parse_cidr(const char *s, struct cidr *out)
{
    char addr[INET6_ADDRSTRLEN];
    const char *slash = strchr(s, '/');
    size_t alen = slash != NULL ? (size_t)(slash - s) : strlen(s);
    struct cidr c;
    unsigned prefix = 0;

    if (alen >= sizeof(addr)) {
        return -1;
    }
    memcpy(addr, s, alen);
    addr[alen] = '\0';
    if (netaddr_parse(addr, &c.addr) != 0) {
        return -1;
    }
    if (slash == NULL) {
        c.prefix = max_prefix(c.addr.family);
        *out = c;
        return 0;
    }
    /* Plain decimal only: no sign, no spaces, at most three digits. */
    for (const char *d = slash + 1; *d != '\0'; d++) {
        if (*d < '0' || *d > '9' || d - slash > 3) {
            return -1;
        }
        prefix = prefix * 10 + (unsigned)(*d - '0');
    }
    if (slash[1] == '\0' || prefix > max_prefix(c.addr.family)) {
        return -1;
    }
    if (!host_bits_clear(c.addr.bytes, prefix, max_prefix(c.addr.family))) {
        return -1;
    }
    c.prefix = prefix;
    *out = c;
    return 0;
}

bool
netaddr_in_cidr(const struct cidr *c, const struct netaddr *a)
{
    if (c->addr.family == a->family) {
        return prefix_equal(c->addr.bytes, a->bytes, c->prefix);
    }
    /* A dual-stack socket shows IPv4 clients as ::ffff:a.b.c.d; they must
     * still match the IPv4 blocks an operator wrote. */
    if (c->addr.family == AF_INET && a->family == AF_INET6 &&
        memcmp(a->bytes, v4_mapped_prefix, sizeof(v4_mapped_prefix)) == 0) {
        return prefix_equal(c->addr.bytes, a->bytes + 12, c->prefix);
    }
    return false;
}
