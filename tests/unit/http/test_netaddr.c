#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "netaddr.h"

static struct netaddr
addr(const char *s)
{
    struct netaddr a;

    cr_assert_eq(netaddr_parse(s, &a), 0, "netaddr_parse(\"%s\")", s);
    return a;
}

static struct cidr
block(const char *s)
{
    struct cidr c;

    cr_assert_eq(netaddr_parse_cidr(s, &c), 0, "netaddr_parse_cidr(\"%s\")", s);
    return c;
}

static bool
in(const char *cidr, const char *address)
{
    struct cidr c = block(cidr);
    struct netaddr a = addr(address);

    return netaddr_in_cidr(&c, &a);
}

Test(netaddr, parses_ipv4_and_ipv6_literals)
{
    struct netaddr a = addr("192.0.2.7");
    static const uint8_t v4[4] = {192, 0, 2, 7};
    static const uint8_t v6[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0,
                                   0,    0,    0,    0,    0, 0, 0, 1};

    cr_assert_eq(a.family, AF_INET);
    cr_assert_arr_eq(a.bytes, v4, 4);
    a = addr("2001:db8::1");
    cr_assert_eq(a.family, AF_INET6);
    cr_assert_arr_eq(a.bytes, v6, 16);
}

Test(netaddr, refuses_what_is_not_a_literal)
{
    struct netaddr a;

    cr_assert_eq(netaddr_parse("", &a), -1);
    cr_assert_eq(netaddr_parse("localhost", &a), -1);
    cr_assert_eq(netaddr_parse("10.1", &a), -1);
    cr_assert_eq(netaddr_parse("256.0.0.1", &a), -1);
    cr_assert_eq(netaddr_parse("[::1]", &a), -1);
    cr_assert_eq(netaddr_parse("fe80::1%eth0", &a), -1);
    cr_assert_eq(netaddr_parse(" 10.0.0.1", &a), -1);
}

Test(netaddr, formats_both_families)
{
    char buf[64];
    struct netaddr a = addr("10.20.30.40");

    netaddr_format(&a, buf, sizeof(buf));
    cr_assert_str_eq(buf, "10.20.30.40");
    a = addr("2001:0db8:0:0::0001");
    netaddr_format(&a, buf, sizeof(buf));
    cr_assert_str_eq(buf, "2001:db8::1");
}

Test(netaddr, converts_socket_addresses)
{
    struct sockaddr_in sin;
    struct sockaddr_in6 sin6;
    struct sockaddr_storage other;
    struct netaddr a;
    char buf[64];

    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_port = htons(80);
    inet_pton(AF_INET, "198.51.100.9", &sin.sin_addr);
    cr_assert_eq(netaddr_from_sockaddr((struct sockaddr *)&sin, &a), 0);
    netaddr_format(&a, buf, sizeof(buf));
    cr_assert_str_eq(buf, "198.51.100.9");

    memset(&sin6, 0, sizeof(sin6));
    sin6.sin6_family = AF_INET6;
    inet_pton(AF_INET6, "::ffff:198.51.100.9", &sin6.sin6_addr);
    cr_assert_eq(netaddr_from_sockaddr((struct sockaddr *)&sin6, &a), 0);
    cr_assert_eq(a.family, AF_INET6);

    memset(&other, 0, sizeof(other));
    other.ss_family = AF_UNIX;
    cr_assert_eq(netaddr_from_sockaddr((struct sockaddr *)&other, &a), -1);
}

Test(netaddr, parses_cidr_blocks)
{
    struct cidr c = block("10.0.0.0/8");

    cr_assert_eq(c.addr.family, AF_INET);
    cr_assert_eq(c.prefix, 8);
    c = block("2001:db8::/32");
    cr_assert_eq(c.addr.family, AF_INET6);
    cr_assert_eq(c.prefix, 32);
    c = block("0.0.0.0/0");
    cr_assert_eq(c.prefix, 0);
}

Test(netaddr, a_bare_address_is_a_single_host_block)
{
    cr_assert_eq(block("192.0.2.1").prefix, 32);
    cr_assert_eq(block("::1").prefix, 128);
}

Test(netaddr, refuses_bad_cidr_blocks)
{
    struct cidr c;

    cr_assert_eq(netaddr_parse_cidr("10.0.0.1/8", &c), -1);
    cr_assert_eq(netaddr_parse_cidr("2001:db8::1/32", &c), -1);
    cr_assert_eq(netaddr_parse_cidr("10.0.0.0/33", &c), -1);
    cr_assert_eq(netaddr_parse_cidr("::/129", &c), -1);
    cr_assert_eq(netaddr_parse_cidr("10.0.0.0/", &c), -1);
    cr_assert_eq(netaddr_parse_cidr("10.0.0.0/-1", &c), -1);
    cr_assert_eq(netaddr_parse_cidr("10.0.0.0/+8", &c), -1);
    cr_assert_eq(netaddr_parse_cidr("10.0.0.0/8x", &c), -1);
    cr_assert_eq(netaddr_parse_cidr("10.0.0.0/0008", &c), -1);
    cr_assert_eq(netaddr_parse_cidr("nonsense/8", &c), -1);
    cr_assert_eq(netaddr_parse_cidr("", &c), -1);
}

Test(netaddr, ipv4_membership)
{
    cr_assert(in("10.0.0.0/8", "10.255.1.2"));
    cr_assert_not(in("10.0.0.0/8", "11.0.0.1"));
    cr_assert(in("192.168.4.0/22", "192.168.7.255"));
    cr_assert_not(in("192.168.4.0/22", "192.168.8.0"));
    cr_assert(in("0.0.0.0/0", "203.0.113.1"));
    cr_assert(in("192.0.2.1", "192.0.2.1"));
    cr_assert_not(in("192.0.2.1", "192.0.2.2"));
}

Test(netaddr, ipv6_membership)
{
    cr_assert(in("2001:db8::/32", "2001:db8:ffff::1"));
    cr_assert_not(in("2001:db8::/32", "2001:db9::1"));
    cr_assert(in("fe80::/10", "febf::1"));
    cr_assert_not(in("fe80::/10", "fec0::1"));
    cr_assert(in("::1", "::1"));
}

Test(netaddr, families_do_not_mix)
{
    cr_assert_not(in("10.0.0.0/8", "::a00:1"));
    cr_assert_not(in("::/0", "10.0.0.1"));
}

Test(netaddr, ipv4_mapped_ipv6_matches_ipv4_blocks)
{
    cr_assert(in("10.0.0.0/8", "::ffff:10.1.2.3"));
    cr_assert_not(in("10.0.0.0/8", "::ffff:11.1.2.3"));
    cr_assert(in("203.0.113.5", "::ffff:203.0.113.5"));
    cr_assert(in("::ffff:0:0/96", "::ffff:10.1.2.3"));
}

Test(netaddr, formats_every_ipv4_byte_as_inet_ntop_does)
{
    char buf[64], want[64];
    struct netaddr a = {.family = AF_INET};

    for (unsigned v = 0; v < 256; v++) {
        for (int pos = 0; pos < 4; pos++) {
            memset(a.bytes, 0, sizeof(a.bytes));
            a.bytes[pos] = (uint8_t)v;
            a.bytes[(pos + 1) % 4] = (uint8_t)(255 - v);
            inet_ntop(AF_INET, a.bytes, want, sizeof(want));
            netaddr_format(&a, buf, sizeof(buf));
            cr_assert_str_eq(buf, want);
        }
    }
    /* Too small a buffer: "?" as far as it fits, as with inet_ntop. */
    memcpy(a.bytes, "\xff\xff\xff\xff", 4);
    netaddr_format(&a, buf, 16);
    cr_assert_str_eq(buf, "255.255.255.255");
    netaddr_format(&a, buf, 15);
    cr_assert_str_eq(buf, "?");
    netaddr_format(&a, buf, 1);
    cr_assert_str_eq(buf, "");
}
