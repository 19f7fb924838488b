/*
 * test_config_abuse.c - gateway.yaml written to hurt: wrong types,
 * repeated keys and ids, names that do not exist, numbers that are zero,
 * negative or past what the arithmetic holds, deep nesting, aliases that
 * multiply, NUL bytes and bad UTF-8. Each is refused with one error of the
 * form "file:line:col: key.path: what" (a YAML syntax error has "yaml:"
 * where the key path would be), never accepted and never a crash.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "strbuf.h"
#include "xmalloc.h"

/* A route to make a file complete. */
#define ROUTE "routes:\n  - id: a\n    uri: http://h\n"

static struct config *
parse_n(const char *yaml, size_t len, struct config_errors *e)
{
    config_errors_init(e);
    return config_parse(yaml, len, "t.yaml", e);
}

/* The text must be refused with exactly the one message 'want'. */
static void
assert_error_n(const char *yaml, size_t len, const char *want)
{
    struct config_errors e;
    struct config *cfg = parse_n(yaml, len, &e);

    cr_assert_null(cfg, "accepted: %s", yaml);
    cr_assert_eq(e.n, 1, "%zu errors, first: %s", e.n, e.n > 0 ? e.v[0] : "");
    cr_assert_str_eq(e.v[0], want);
    config_errors_deinit(&e);
}

static void
assert_error(const char *yaml, const char *want)
{
    assert_error_n(yaml, strlen(yaml), want);
}

static void
assert_ok(const char *yaml)
{
    struct config_errors e;
    struct config *cfg = parse_n(yaml, strlen(yaml), &e);

    cr_assert_not_null(cfg, "refused: %s", e.n > 0 ? e.v[0] : "(no error)");
    config_unref(cfg);
    config_errors_deinit(&e);
}

/* Wrong types. */

Test(config_abuse, a_mapping_where_a_scalar_is_expected)
{
    assert_error("server:\n  workers: {a: 1}\n" ROUTE,
                 "t.yaml:2:12: server.workers: expected a scalar, got a "
                 "mapping");
    assert_error("redis: {url: [redis://h]}\n" ROUTE,
                 "t.yaml:1:14: redis.url: expected a scalar, got a sequence");
    assert_error("routes:\n  - id: {x: 1}\n    uri: http://h\n",
                 "t.yaml:2:9: routes[0].id: expected a scalar, got a mapping");
}

Test(config_abuse, a_sequence_where_a_mapping_is_expected)
{
    assert_error("upstream: [1, 2]\n" ROUTE,
                 "t.yaml:1:11: upstream: expected a mapping, got a sequence");
    assert_error("limiters: [a, b]\n" ROUTE,
                 "t.yaml:1:11: limiters: expected a mapping, got a sequence");
    assert_error("limiters:\n  l: [gcra]\n" ROUTE,
                 "t.yaml:2:6: limiters.l: expected a mapping, got a sequence");
    assert_error("routes:\n  - id: a\n    uri: http://h\n    filters:\n"
                 "      - name: RequestRateLimiter\n        args: [ip]\n",
                 "t.yaml:6:15: routes[0].filters[0].args: expected a "
                 "mapping, got a sequence");
}

Test(config_abuse, a_string_for_a_number)
{
    assert_error("server:\n  workers: many\n" ROUTE,
                 "t.yaml:2:12: server.workers: bad integer \"many\" "
                 "(expected \"auto\" or an integer from 1 to 256)");
    assert_error("limiters:\n  l: {algorithm: fixed_window, limit: ten, "
                 "window: 1s}\n" ROUTE,
                 "t.yaml:2:39: limiters.l.limit: bad integer \"ten\" "
                 "(expected a whole number of at least 1)");
    /* Quoted, it is a string in YAML even when it reads as a number. */
    assert_error("server:\n  workers: '4'\n" ROUTE,
                 "t.yaml:2:12: server.workers: expected a number, got the "
                 "quoted string \"4\"");
    assert_error("upstream: {keepalive: \"8\"}\n" ROUTE,
                 "t.yaml:1:23: upstream.keepalive: expected a number, got "
                 "the quoted string \"8\"");
    assert_error("limiters:\n  l: {algorithm: gcra, rate: 1/s, burst: '5'}\n"
                 "" ROUTE,
                 "t.yaml:2:42: limiters.l.burst: expected a number, got the "
                 "quoted string \"5\"");
    /* The word is a word either way. */
    assert_ok("server: {workers: 'auto'}\n" ROUTE);
}

Test(config_abuse, a_bool_as_a_string)
{
    assert_error("server:\n  watch: 'true'\n" ROUTE,
                 "t.yaml:2:10: server.watch: expected true or false, got the "
                 "quoted string \"true\"");
    assert_error("server:\n  watch: \"no\"\n" ROUTE,
                 "t.yaml:2:10: server.watch: expected true or false, got the "
                 "quoted string \"no\"");
    assert_error("server:\n  watch: 1\n" ROUTE,
                 "t.yaml:2:10: server.watch: bad boolean \"1\" (expected "
                 "true or false)");
}

/* Repeated keys and ids. */

Test(config_abuse, duplicate_route_id)
{
    assert_error("routes:\n  - {id: a, uri: http://h}\n"
                 "  - {id: b, uri: http://h}\n  - {id: a, uri: http://h}\n",
                 "t.yaml:4:10: routes[2].id: duplicate route id \"a\" (first "
                 "used by routes[0])");
}

/* libyaml keeps both of two equal keys; the loader refuses the second,
 * wherever the mapping is. */
Test(config_abuse, duplicate_yaml_key_in_every_section)
{
    static const struct {
        const char *yaml;
        const char *want;
    } cases[] = {
        {ROUTE "routes: []\n",
         "t.yaml:4:1: duplicate key \"routes\" (first at line 1)"},
        {"server: {listen: 'a:1', listen: 'a:2'}\n" ROUTE,
         "t.yaml:1:25: server: duplicate key \"listen\" (first at line 1)"},
        {"admin:\n  listen: a:1\n  listen: a:2\n" ROUTE,
         "t.yaml:3:3: admin: duplicate key \"listen\" (first at line 2)"},
        {"redis: {url: 'redis://a', url: 'redis://b'}\n" ROUTE,
         "t.yaml:1:27: redis: duplicate key \"url\" (first at line 1)"},
        {"upstream: {keepalive: 1, keepalive: 2}\n" ROUTE,
         "t.yaml:1:26: upstream: duplicate key \"keepalive\" (first at line "
         "1)"},
        {"identity: {user_header: A, user_header: B}\n" ROUTE,
         "t.yaml:1:28: identity: duplicate key \"user_header\" (first at "
         "line 1)"},
        {"log: {level: info, level: debug}\n" ROUTE,
         "t.yaml:1:20: log: duplicate key \"level\" (first at line 1)"},
        {"limiters:\n  l: {algorithm: gcra, rate: 1/s}\n"
         "  l: {algorithm: gcra, rate: 2/s}\n" ROUTE,
         "t.yaml:3:3: limiters: duplicate limiter \"l\" (first at line 2)"},
        {"limiters:\n  l: {algorithm: gcra, rate: 1/s, rate: 2/s}\n" ROUTE,
         "t.yaml:2:35: limiters.l: duplicate key \"rate\" (first at line "
         "2)"},
        {"limiters:\n  l:\n    algorithm: fixed_window\n    rules:\n"
         "      - {limit: 1, window: 1s, window: 2s}\n" ROUTE,
         "t.yaml:5:32: limiters.l.rules[0]: duplicate key \"window\" (first "
         "at line 5)"},
        {"routes:\n  - id: a\n    uri: http://h\n    uri: http://i\n",
         "t.yaml:4:5: routes[0]: duplicate key \"uri\" (first at line 3)"},
        {"routes:\n  - id: a\n    uri: http://h\n    predicates:\n"
         "      - {name: Path, name: Host, args: {patterns: /a}}\n",
         "t.yaml:5:22: routes[0].predicates[0]: duplicate key \"name\" "
         "(first at line 5)"},
        {"routes:\n  - id: a\n    uri: http://h\n    predicates:\n"
         "      - {name: Path, args: {patterns: /a, patterns: /b}}\n",
         "t.yaml:5:43: routes[0].predicates[0].args: duplicate key "
         "\"patterns\" (first at line 5)"},
        /* The second name makes it a RequestRateLimiter: still refused. */
        {"limiters: {l: {algorithm: gcra, rate: 1/s}}\n"
         "routes:\n  - id: a\n    uri: http://h\n    filters:\n"
         "      - name: AddRequestHeader\n"
         "        name: RequestRateLimiter\n"
         "        args: {key: ip, limiter: l}\n",
         "t.yaml:7:9: routes[0].filters[0]: duplicate key \"name\" (first "
         "at line 6)"},
        {"limiters: {l: {algorithm: gcra, rate: 1/s}}\n"
         "routes:\n  - id: a\n    uri: http://h\n    filters:\n"
         "      - name: RequestRateLimiter\n"
         "        args: {key: ip, limiter: l, key: user}\n",
         "t.yaml:7:37: routes[0].filters[0].args: duplicate key \"key\" "
         "(first at line 7)"},
        {"limiters: {l: {algorithm: gcra, rate: 1/s}}\n"
         "routes:\n  - id: a\n    uri: http://h\n    filters:\n"
         "      - name: RequestRateLimiter\n"
         "        args:\n          tiers:\n"
         "            - {key: ip, limiter: l, limiter: none}\n",
         "t.yaml:9:37: routes[0].filters[0].args.tiers[0]: duplicate key "
         "\"limiter\" (first at line 9)"},
        {"limiters: {l: {algorithm: gcra, rate: 1/s}}\n"
         "routes:\n  - id: a\n    uri: http://h\n    filters:\n"
         "      - name: RequestRateLimiter\n"
         "        args:\n          tiers:\n"
         "            - {when: {role: a, role: b}, key: ip, limiter: l}\n",
         "t.yaml:9:32: routes[0].filters[0].args.tiers[0].when: duplicate "
         "key \"role\" (first at line 9)"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_error(cases[i].yaml, cases[i].want);
    }
}

/* Names that do not exist. */

Test(config_abuse, unknown_limiter_name)
{
    assert_error("limiters:\n  per-user: {algorithm: gcra, rate: 1/s}\n"
                 "  per-ip: {algorithm: gcra, rate: 1/s}\n"
                 "routes:\n  - id: a\n    uri: http://h\n    filters:\n"
                 "      - name: RequestRateLimiter\n"
                 "        args: {key: user, limiter: per-usr}\n",
                 "t.yaml:9:36: routes[0].filters[0].args.limiter: unknown "
                 "limiter \"per-usr\" (did you mean \"per-user\"?)");
}

/* Numbers: zero, negative, too large. */

Test(config_abuse, a_rate_of_zero)
{
    assert_error("limiters:\n  l: {algorithm: gcra, rate: 0/s}\n" ROUTE,
                 "t.yaml:2:30: limiters.l.rate: bad rate \"0/s\" (expected a "
                 "count above 0 per period: N/s, N/m, N/h or N/d)");
    assert_error("limiters:\n  l: {algorithm: fixed_window, limit: 0, "
                 "window: 1s}\n" ROUTE,
                 "t.yaml:2:39: limiters.l.limit: bad integer \"0\" (expected "
                 "a whole number of at least 1)");
}

Test(config_abuse, negative_windows_and_durations)
{
    assert_error("limiters:\n  l: {algorithm: fixed_window, limit: 1, "
                 "window: -1s}\n" ROUTE,
                 "t.yaml:2:50: limiters.l.window: bad duration \"-1s\" "
                 "(expected a number and a unit: ms, s, m, h or d)");
    assert_error("server: {drain_timeout: -5s}\n" ROUTE,
                 "t.yaml:1:25: server.drain_timeout: bad duration \"-5s\" "
                 "(expected a number and a unit: ms, s, m, h or d)");
    assert_error("limiters:\n  l: {algorithm: gcra, rate: -3/s}\n" ROUTE,
                 "t.yaml:2:30: limiters.l.rate: bad rate \"-3/s\" (expected "
                 "a count above 0 per period: N/s, N/m, N/h or N/d)");
    assert_error("limiters:\n  l: {algorithm: gcra, rate: 1/s, burst: -1}\n"
                 "" ROUTE,
                 "t.yaml:2:42: limiters.l.burst: bad integer \"-1\" "
                 "(expected a whole number of at least 1)");
}

Test(config_abuse, a_burst_past_2_to_the_53)
{
    assert_error("limiters:\n  l: {algorithm: gcra, rate: 1/s, burst: "
                 "9007199254740993}\n" ROUTE,
                 "t.yaml:2:42: limiters.l.burst: integer "
                 "\"9007199254740993\" is too large (at most 2^53)");
    assert_error("limiters:\n  l: {algorithm: gcra, rate: 1/s, burst: "
                 "18446744073709551616}\n" ROUTE,
                 "t.yaml:2:42: limiters.l.burst: integer "
                 "\"18446744073709551616\" is too large (at most 2^53)");
}

Test(config_abuse, a_cost_past_2_to_the_53)
{
    /* No limiter would ever see it, but a cost is sent to Lua as a
     * double. */
    assert_error("routes:\n  - id: a\n    uri: http://h\n    filters:\n"
                 "      - name: RequestRateLimiter\n"
                 "        args: {key: ip, limiter: none, cost: "
                 "18446744073709551615}\n",
                 "t.yaml:6:46: routes[0].filters[0].args.cost: integer "
                 "\"18446744073709551615\" is too large (at most 2^53)");
}

Test(config_abuse, durations_and_sizes_past_2_to_the_53)
{
    /* 2^64 - 1 ms fit a uint64_t, but not the signed clock arithmetic
     * that timers and the Redis stall check do with them. */
    assert_error("redis: {url: 'redis://h', timeout: 18446744073709551615ms}\n"
                 "" ROUTE,
                 "t.yaml:1:36: redis.timeout: duration "
                 "\"18446744073709551615ms\" is too large (at most 2^53 ms)");
    assert_error("server: {client_timeout: 9007199254741s}\n" ROUTE,
                 "t.yaml:1:26: server.client_timeout: duration "
                 "\"9007199254741s\" is too large (at most 2^53 ms)");
    assert_error("server: {max_header_bytes: 4611686018427387904B}\n" ROUTE,
                 "t.yaml:1:28: server.max_header_bytes: size "
                 "\"4611686018427387904B\" is too large (at most 2^53 B)");
    /* The bound itself is fine. */
    assert_ok("server: {client_timeout: 9007199254740992ms}\n" ROUTE);
}

Test(config_abuse, numbers_that_overflow_64_bits)
{
    assert_error("server: {client_timeout: 213503982334602d}\n" ROUTE,
                 "t.yaml:1:26: server.client_timeout: bad duration "
                 "\"213503982334602d\" (expected a number and a unit: ms, s, "
                 "m, h or d)");
    assert_error("server: {max_body_bytes: 99999999999999999999GiB}\n" ROUTE,
                 "t.yaml:1:26: server.max_body_bytes: bad size "
                 "\"99999999999999999999GiB\" (expected a number and a unit: "
                 "B, KiB, MiB or GiB)");
    assert_error("limiters:\n  l: {algorithm: gcra, rate: "
                 "99999999999999999999/s}\n" ROUTE,
                 "t.yaml:2:30: limiters.l.rate: bad rate "
                 "\"99999999999999999999/s\" (expected a count above 0 per "
                 "period: N/s, N/m, N/h or N/d)");
    assert_error("server: {workers: 4294967297}\n" ROUTE,
                 "t.yaml:1:19: server.workers: bad integer \"4294967297\" "
                 "(expected \"auto\" or an integer from 1 to 256)");
}

Test(config_abuse, an_over_long_key_prefix)
{
    char *yaml = xasprintf("redis:\n  url: redis://h\n  key_prefix: %.65s\n"
                           "" ROUTE,
                           "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                           "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");

    assert_error(yaml, "t.yaml:3:15: redis.key_prefix: key prefix is longer "
                       "than 64 bytes");
    free(yaml);
}

/* The shape of the file. */

Test(config_abuse, deeply_nested_input)
{
    size_t depth = 100000;
    size_t len = strlen("routes: ") + 2 * depth;
    char *yaml = xmalloc(len + 1);
    char *p = yaml;

    /* Flow mappings: libyaml's scanner takes time quadratic in their
     * depth, so the depth is refused before the document is built. */
    p += sprintf(p, "routes: ");
    memset(p, '{', depth);
    memset(p + depth, '}', depth);
    yaml[len] = '\0';
    assert_error(yaml, "t.yaml:1:72: yaml: nested deeper than 64 levels");
    for (size_t i = 0; i < depth; i++) {
        p[i] = '[';
        p[depth + i] = ']';
    }
    assert_error(yaml, "t.yaml:1:72: yaml: nested deeper than 64 levels");
    free(yaml);
}

/* Appends 'n' copies of 'item' (a format taking the copy's index),
 * joined by ", ". */
static void
add_list(struct strbuf *b, const char *item, int n)
{
    for (int i = 0; i < n; i++) {
        if (i > 0) {
            strbuf_adds(b, ", ");
        }
        strbuf_addf(b, item, i);
    }
}

Test(config_abuse, aliases_that_multiply_the_document)
{
    struct strbuf b = STRBUF_INIT;
    char *yaml;

    /* 1000 routes of 1000 filters of 1000 tiers in 12 kilobytes: before
     * the bound, the loader built tiers until it was killed. */
    strbuf_adds(&b, "limiters: {l: {algorithm: gcra, rate: 1/s}}\n"
                    "t: &t {key: ip, limiter: l}\n"
                    "f: &f {name: RequestRateLimiter, args: {tiers: [");
    add_list(&b, "*t", 1000);
    strbuf_adds(&b, "]}}\nr: &r {id: a, uri: 'http://h', filters: [");
    add_list(&b, "*f", 1000);
    strbuf_adds(&b, "]}\nroutes: [");
    add_list(&b, "*r", 1000);
    strbuf_adds(&b, "]\n");
    yaml = strbuf_take(&b);
    /* At the 19th *f, each standing for 5,007 nodes. */
    assert_error(yaml, "t.yaml:4:114: yaml: aliases expand the document to "
                       "more than 100000 nodes");
    free(yaml);
}

Test(config_abuse, too_many_anchors)
{
    struct strbuf b = STRBUF_INIT;
    char *yaml;

    /* Each alias is looked up among the anchors one by one: 30,000 of
     * each took seconds. */
    strbuf_adds(&b, "x: [");
    add_list(&b, "&a%d 1", 1001);
    strbuf_adds(&b, "]\n" ROUTE);
    yaml = strbuf_take(&b);
    assert_error(yaml, "t.yaml:1:8895: yaml: more than 1000 anchors");
    free(yaml);
}

/* An alias inside the node it names: libyaml makes the node contain
 * itself, and the walks over the document never ended (a Spring-shaped
 * file hung the loader, and a reload the gateway's main thread). */
Test(config_abuse, an_alias_inside_its_own_anchor_is_refused, .timeout = 20)
{
    assert_error("spring: {cloud: {gateway: {routes: []}}}\n"
                 "management: &m {a: *m, b: *m}\n",
                 "t.yaml:2:20: yaml: alias *m is inside the node it names");
    assert_error("x: &m [1, [2, *m]]\n" ROUTE,
                 "t.yaml:1:15: yaml: alias *m is inside the node it names");
    /* Redefined: the alias names the open one, defined last. */
    assert_error("a: &m {x: 1}\nb: &m [*m]\n" ROUTE,
                 "t.yaml:2:8: yaml: alias *m is inside the node it names");
}

Test(config_abuse, a_few_aliases_are_fine)
{
    assert_ok("upstream: &u {keepalive: 8}\n"
              "routes:\n  - id: a\n    uri: http://h\n"
              "    predicates: &p [Path=/a/**]\n"
              "  - id: b\n    uri: http://h\n    predicates: *p\n");
}

Test(config_abuse, empty_file)
{
    const char *want = "t.yaml:1:1: the file is empty (expected a mapping "
                       "with at least \"routes\")";

    assert_error("", want);
    assert_error("\n\n   \n", want);
    /* The document's null sits where it ends. */
    assert_error("---\n...\n", "t.yaml:2:1: the file is empty (expected a "
                               "mapping with at least \"routes\")");
}

Test(config_abuse, a_file_that_is_only_a_scalar)
{
    assert_error("routes", "t.yaml:1:1: expected a mapping, got a scalar");
    assert_error("'just text'\n",
                 "t.yaml:1:1: expected a mapping, got a scalar");
    assert_error("42\n", "t.yaml:1:1: expected a mapping, got a scalar");
}

/* Bytes. */

Test(config_abuse, a_nul_byte)
{
    static const char raw[] = "routes:\0 []\n";
    static const char in_key[] = "routes: []\nlog: {\"level\\0x\": info}\n";
    static const char in_name[] =
        "limiters:\n  \"a\\0b\": {algorithm: gcra, rate: 1/s}\n" ROUTE;

    /* A raw NUL is not a YAML character at all. */
    assert_error_n(raw, sizeof(raw) - 1,
                   "t.yaml:1:8: yaml: control characters are not allowed");
    /* An escaped one would cut a C string short: "level\0x" is not
     * "level", and "a\0b" is not "a". */
    assert_error(in_key, "t.yaml:2:7: log: a key contains a NUL character");
    assert_error(in_name,
                 "t.yaml:2:3: limiters: a key contains a NUL character");
    assert_error("routes: [{id: \"a\\0\", uri: http://h}]\n",
                 "t.yaml:1:15: routes[0].id: contains a NUL character");
}

Test(config_abuse, a_nul_byte_in_a_filter_name)
{
    /* Not a RequestRateLimiter, whatever strcmp() would say. */
    assert_error("routes:\n  - id: a\n    uri: http://h\n    filters:\n"
                 "      - name: \"RequestRateLimiter\\0\"\n",
                 "t.yaml:5:15: routes[0].filters[0].name: contains a NUL "
                 "character");
}

Test(config_abuse, invalid_utf8)
{
    assert_error("routes: []\nlog: {level: \xff}\n",
                 "t.yaml:2:14: yaml: invalid leading UTF-8 octet");
    assert_error("routes: [{id: a\xc0\xaf, uri: http://h}]\n",
                 "t.yaml:1:16: yaml: invalid length of a UTF-8 sequence");
    assert_error("routes: [{id: \"a\xed\xa0\x80\", uri: http://h}]\n",
                 "t.yaml:1:17: yaml: invalid Unicode character");
    assert_error("\xc3routes: []\n",
                 "t.yaml:1:2: yaml: invalid trailing UTF-8 octet");
}

/* The position of a bad byte counts characters, as every other position
 * does: not the bytes of what comes before it, nor a BOM; and a CR alone
 * ends a line. */
Test(config_abuse, a_bad_bytes_position_counts_characters_and_lines)
{
    assert_error("routes: []\nlog: {level: \xc3\xa9\xc3\xa9\xff}\n",
                 "t.yaml:2:16: yaml: invalid leading UTF-8 octet");
    assert_error("\xef\xbb\xbfroutes: []\nlog: {level: \xff}\n",
                 "t.yaml:2:14: yaml: invalid leading UTF-8 octet");
    assert_error("\xef\xbb\xbfx: \xff\n",
                 "t.yaml:1:4: yaml: invalid leading UTF-8 octet");
    assert_error("routes: []\rlog: {level: \xff}\r",
                 "t.yaml:2:14: yaml: invalid leading UTF-8 octet");
    assert_error("routes: []\r\nlog: {level: \xff}\r\n",
                 "t.yaml:2:14: yaml: invalid leading UTF-8 octet");
}

/* A duplicate anchor says what it is and where the first one was. */
Test(config_abuse, a_duplicate_anchor_names_both_places)
{
    assert_error("a: &x 1\nb: &x 2\n" ROUTE,
                 "t.yaml:2:4: yaml: found duplicate anchor; first occurrence "
                 "at line 1, column 4; second occurrence");
}

/* Messages are one line each, whatever the file holds. */
Test(config_abuse, control_characters_in_a_message_are_escaped)
{
    assert_error("server: {\"a\\nt.yaml:1:1: forged\": 1}\n" ROUTE,
                 "t.yaml:1:10: server: unknown key \"a\\nt.yaml:1:1: "
                 "forged\" (known: listen, tls, workers, trusted_proxies, "
                 "max_header_bytes, max_body_bytes, client_timeout, "
                 "header_timeout, max_connections, max_held, drain_timeout, "
                 "watch, underscores_in_headers)");
    assert_error("log: {level: \"a\\tb\\e[31m\"}\n" ROUTE,
                 "t.yaml:1:14: log.level: bad log level \"a\\tb\\x1b[31m\" "
                 "(expected debug, info, warn or error)");
    /* A key of the path too (found by fuzz_config). */
    assert_error("scg: {key_resolvers: {\"a\\tb\": }}\n" ROUTE,
                 "t.yaml:1:31: scg.key_resolvers.a\\tb: missing value");
}
