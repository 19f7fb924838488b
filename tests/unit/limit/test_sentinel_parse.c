#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

#include "sentinel_parse.h"

static bool
port_of(const char *s, uint16_t *port)
{
    return sentinel_parse_port(s, strlen(s), port);
}

static bool
switch_of(const char *msg, struct sentinel_addr *from, struct sentinel_addr *to)
{
    return sentinel_parse_switch(msg, strlen(msg), "mymaster", from, to);
}

/* A name of 'n' bytes under "example.": labels of at most 63. */
static void
long_name(char *buf, size_t n)
{
    memset(buf, 'a', n);
    for (size_t i = 60; i < n; i += 61) {
        buf[i] = '.';
    }
    buf[n] = '\0';
}

Test(sentinel_parse, a_port_is_digits_from_1_to_65535)
{
    uint16_t p = 7;

    cr_assert(port_of("6379", &p));
    cr_assert_eq(p, 6379);
    cr_assert(port_of("1", &p));
    cr_assert(port_of("65535", &p));
    cr_assert_eq(p, 65535);
    p = 7;
    cr_assert_not(port_of("", &p));
    cr_assert_not(port_of("0", &p));
    cr_assert_not(port_of("65536", &p));
    cr_assert_not(port_of("000080", &p));
    cr_assert_not(port_of(" 80", &p));
    cr_assert_not(port_of("+80", &p));
    cr_assert_not(port_of("-80", &p));
    cr_assert_not(port_of("80 ", &p));
    cr_assert_not(port_of("0x50", &p));
    cr_assert_eq(p, 7, "a refused port is not stored");
}

Test(sentinel_parse, an_answer_takes_host_names_past_46_bytes)
{
    struct sentinel_addr a;
    char name[SENTINEL_HOST_MAX];

    cr_assert(sentinel_parse_addr("10.0.0.5", 8, "6379", 4, &a));
    cr_assert_str_eq(a.host, "10.0.0.5");
    cr_assert_eq(a.port, 6379);
    long_name(name, 60);
    cr_assert(sentinel_parse_addr(name, 60, "6380", 4, &a));
    cr_assert_str_eq(a.host, name);
    cr_assert_eq(a.port, 6380);
    long_name(name, SENTINEL_HOST_MAX - 1);
    cr_assert(sentinel_parse_addr(name, strlen(name), "1", 1, &a));
    cr_assert_str_eq(a.host, name);
}

Test(sentinel_parse, an_answer_refuses_bad_hosts_and_ports)
{
    struct sentinel_addr a;
    char name[SENTINEL_HOST_MAX + 1];

    long_name(name, SENTINEL_HOST_MAX);
    cr_assert_not(sentinel_parse_addr(name, strlen(name), "1", 1, &a));
    cr_assert_not(sentinel_parse_addr("", 0, "6379", 4, &a));
    cr_assert_not(sentinel_parse_addr("a b", 3, "6379", 4, &a));
    cr_assert_not(sentinel_parse_addr("a\0b", 3, "6379", 4, &a));
    cr_assert_not(sentinel_parse_addr("a\r\n", 3, "6379", 4, &a));
    cr_assert_not(sentinel_parse_addr("h", 1, " 6379", 5, &a));
    cr_assert_not(sentinel_parse_addr("h", 1, "+6379", 5, &a));
}

Test(sentinel_parse, a_switch_gives_the_old_and_the_new_address)
{
    struct sentinel_addr from, to;

    cr_assert(switch_of("mymaster 127.0.0.1 6379 ::1 6380", &from, &to));
    cr_assert_str_eq(from.host, "127.0.0.1");
    cr_assert_eq(from.port, 6379);
    cr_assert_str_eq(to.host, "::1");
    cr_assert_eq(to.port, 6380);
}

Test(sentinel_parse, a_switch_to_a_long_host_name_is_not_ignored)
{
    struct sentinel_addr from, to;
    char name[80];
    char msg[256];

    long_name(name, 60);
    snprintf(msg, sizeof(msg), "mymaster old.example 6379 %s 6380", name);
    cr_assert(switch_of(msg, &from, &to));
    cr_assert_str_eq(from.host, "old.example");
    cr_assert_str_eq(to.host, name);
    cr_assert_eq(to.port, 6380);
}

Test(sentinel_parse, a_switch_of_another_master_or_malformed_is_refused)
{
    struct sentinel_addr from, to;

    cr_assert_not(switch_of("other 10.0.0.1 1 10.0.0.2 2", &from, &to));
    cr_assert_not(switch_of("mymasterx 10.0.0.1 1 10.0.0.2 2", &from, &to));
    cr_assert_not(switch_of("mymaste 10.0.0.1 1 10.0.0.2 2", &from, &to));
    cr_assert_not(switch_of("mymaster 10.0.0.1 1 10.0.0.2", &from, &to));
    cr_assert_not(switch_of("mymaster 10.0.0.1 1 10.0.0.2 2 x", &from, &to));
    cr_assert_not(switch_of("mymaster  10.0.0.1 1 10.0.0.2 2", &from, &to));
    cr_assert_not(switch_of("mymaster 10.0.0.1 1 10.0.0.2 +2", &from, &to));
    cr_assert_not(switch_of("mymaster 10.0.0.1 1 10.0.0.2 0", &from, &to));
    cr_assert_not(switch_of("mymaster 10.0.0.1 1 10.0.0.2 65536", &from, &to));
    cr_assert_not(switch_of("", &from, &to));
}
