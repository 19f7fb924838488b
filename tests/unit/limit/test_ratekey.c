#include <criterion/criterion.h>

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "claims.h"
#include "config.h"
#include "headers.h"
#include "netaddr.h"
#include "ratekey.h"
#include "xmalloc.h"

/*
 * Tiers come from real config text, so that the keys tested are the ones
 * a user writes. Route "r", limiter "l" (its tag is read back).
 */
static struct config *cfg;
static const struct rate_limit_conf *rl;

static void
load(const char *args)
{
    struct config_errors e;
    char *yaml = xasprintf("limiters: {l: {algorithm: gcra, rate: 1/s}}\n"
                           "routes:\n"
                           "  - id: r\n"
                           "    uri: http://x\n"
                           "    filters:\n"
                           "      - name: RequestRateLimiter\n"
                           "        args: %s\n",
                           args);

    config_errors_init(&e);
    config_unref(cfg); /* a test may load twice */
    cfg = config_parse(yaml, strlen(yaml), "t.yaml", &e);
    cr_assert_not_null(cfg, "%s", e.n > 0 ? e.v[0] : "");
    config_errors_deinit(&e);
    free(yaml);
    rl = cfg->routes[0].rate_limiters[0];
}

static void
teardown(void)
{
    config_unref(cfg);
    cfg = NULL;
}

TestSuite(ratekey, .fini = teardown);

struct request {
    struct netaddr addr;
    struct headers headers;
    struct caller who;
};

static void
request_init(struct request *r, const char *ip)
{
    memset(r, 0, sizeof(*r));
    headers_init(&r->headers);
    r->who.headers = &r->headers;
    r->who.ipv6_prefix = 64;
    if (ip != NULL) {
        cr_assert_eq(netaddr_parse(ip, &r->addr), 0, "%s", ip);
        r->who.client = &r->addr;
    }
}

/* The key of the only tier of the loaded filter, or "" when none. */
static void
key_of(struct request *r, char *buf)
{
    cr_assert_eq(rl->ntiers, 1);
    if (!ratekey_build(&rl->tiers[0], &r->who, "sluice:", "r", buf)) {
        cr_assert_str_eq(buf, "", "a failed build leaves an empty key");
    }
}

/* "sluice:l:<tag>:{r:<kind>:<value>}". */
static void
assert_key(const char *key, const char *kind, const char *value)
{
    char want[RATEKEY_MAX + 64];

    snprintf(want, sizeof(want), "sluice:l:%s:{r:%s:%s}", cfg->limiters[0].tag,
             kind, value);
    cr_assert_str_eq(key, want);
}

Test(ratekey, ipv4_client_is_its_address)
{
    struct request r;
    char key[RATEKEY_MAX];

    load("{key: ip, limiter: l}");
    request_init(&r, "192.0.2.1");
    key_of(&r, key);
    assert_key(key, "ip", "192.0.2.1");
    cr_assert_lt(strlen(key), RATEKEY_MAX);
    headers_deinit(&r.headers);
}

Test(ratekey, ipv4_mapped_ipv6_client_is_the_ipv4_client)
{
    struct request r;
    char key[RATEKEY_MAX];

    load("{key: ip, limiter: l}");
    request_init(&r, "::ffff:192.0.2.1");
    key_of(&r, key);
    assert_key(key, "ip", "192.0.2.1");
    headers_deinit(&r.headers);
}

Test(ratekey, ipv6_clients_are_grouped_by_prefix)
{
    struct request r;
    char key[RATEKEY_MAX];
    char other[RATEKEY_MAX];

    load("{key: ip, limiter: l}");
    request_init(&r, "2001:db8:1:2:3:4:5:6");
    key_of(&r, key);
    /* "2001:db8:1:2::/64", escaped. */
    assert_key(key, "ip", "2001%3Adb8%3A1%3A2%3A%3A%2F64");
    request_init(&r, "2001:db8:1:2:ffff::1");
    key_of(&r, other);
    cr_assert_str_eq(other, key, "same /64, same bucket");
    request_init(&r, "2001:db8:1:3::1");
    key_of(&r, other);
    cr_assert_str_neq(other, key, "another /64, another bucket");

    request_init(&r, "2001:db8:1:2:3:4:5:6");
    r.who.ipv6_prefix = 48;
    key_of(&r, key);
    assert_key(key, "ip", "2001%3Adb8%3A1%3A%3A%2F48");
    r.who.ipv6_prefix = 128;
    key_of(&r, key);
    assert_key(key, "ip", "2001%3Adb8%3A1%3A2%3A3%3A4%3A5%3A6%2F128");
    r.who.ipv6_prefix = 1;
    key_of(&r, key);
    assert_key(key, "ip", "%3A%3A%2F1");
    /* A caller built without a config gets the default, /64. */
    r.who.ipv6_prefix = 0;
    key_of(&r, key);
    assert_key(key, "ip", "2001%3Adb8%3A1%3A2%3A%3A%2F64");
    headers_deinit(&r.headers);
}

Test(ratekey, user_and_role_come_from_the_caller)
{
    struct request r;
    char key[RATEKEY_MAX];

    load("{key: user, limiter: l}");
    request_init(&r, "192.0.2.1");
    r.who.user = "alice";
    /* The header is not read: the proxy decides what is believed. */
    headers_add(&r.headers, "X-User-Id", "mallory");
    key_of(&r, key);
    assert_key(key, "user", "alice");
    teardown();

    load("{key: role, limiter: l}");
    r.who.role = "admin";
    key_of(&r, key);
    assert_key(key, "role", "admin");
    headers_deinit(&r.headers);
}

Test(ratekey, header_is_its_one_field_and_a_repeated_one_names_no_one)
{
    struct request r;
    char key[RATEKEY_MAX];

    load("{key: 'header:X-Api-Key', limiter: l}");
    request_init(&r, NULL);
    headers_add(&r.headers, "x-api-key", "k1");
    key_of(&r, key);
    assert_key(key, "header:x-api-key", "k1");
    /* The upstream gets both and may read the second: a junk first one
     * must not buy a fresh bucket. */
    headers_add(&r.headers, "X-Api-Key", "k2");
    key_of(&r, key);
    cr_assert_str_eq(key, "");
    headers_deinit(&r.headers);
}

/* With server.underscores_in_headers, X_Api_Key reaches the upstream;
 * a CGI upstream reads it as X-Api-Key. */
Test(ratekey, an_underscore_spelling_is_the_same_field)
{
    struct request r;
    char key[RATEKEY_MAX];

    load("{key: 'header:X-Api-Key', limiter: l}");
    request_init(&r, NULL);
    headers_add(&r.headers, "X-Api-Key", "junk1");
    headers_add(&r.headers, "X_Api_Key", "victim");
    key_of(&r, key);
    cr_assert_str_eq(key, "", "a junk value bought a bucket: %s", key);
    headers_deinit(&r.headers);
    request_init(&r, NULL);
    headers_add(&r.headers, "X_API_KEY", "k1");
    key_of(&r, key);
    assert_key(key, "header:x-api-key", "k1");
    headers_deinit(&r.headers);
}

Test(ratekey, a_repeated_cookie_names_no_one)
{
    struct request r;
    char key[RATEKEY_MAX];

    load("{key: 'cookie:sid', limiter: l}");
    request_init(&r, NULL);
    headers_add(&r.headers, "Cookie", "sid=junk");
    headers_add(&r.headers, "Cookie", "sid=s1");
    key_of(&r, key);
    cr_assert_str_eq(key, "");
    headers_deinit(&r.headers);
}

/* A key named twice is ambiguous, which a key named nowhere is not: the
 * proxy refuses the one even where empty_key lets the other pass. */
Test(ratekey, a_key_named_twice_is_ambiguous_and_one_named_nowhere_is_not)
{
    static const char *const kinds[] = {"'header:X-Api-Key'", "'cookie:sid'",
                                        "'query:k'"};

    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        char args[96];
        struct request r;

        snprintf(args, sizeof(args), "{key: %s, limiter: l}", kinds[i]);
        load(args);
        request_init(&r, "192.0.2.1");
        cr_assert_null(ratekey_tier(rl, &r.who));
        cr_assert_not(ratekey_ambiguous(rl, &r.who), "%s absent", kinds[i]);
        headers_add(&r.headers, "X-Api-Key", "a");
        headers_add(&r.headers, "Cookie", "sid=a");
        r.who.query = "k=a";
        cr_assert_not_null(ratekey_tier(rl, &r.who), "%s", kinds[i]);
        cr_assert_not(ratekey_ambiguous(rl, &r.who), "%s once", kinds[i]);
        headers_add(&r.headers, "X-Api-Key", "b");
        headers_add(&r.headers, "Cookie", "sid=b");
        r.who.query = "k=a&k=b";
        cr_assert_null(ratekey_tier(rl, &r.who));
        cr_assert(ratekey_ambiguous(rl, &r.who), "%s twice", kinds[i]);
        headers_deinit(&r.headers);
        teardown();
    }
}

/* A tier whose key misses another part, or that does not limit, would
 * not have applied with the field sent once: no ambiguity to refuse. */
Test(ratekey, a_repeated_part_is_ambiguous_only_where_the_tier_would_apply)
{
    struct request r;

    load("{key: 'header:X-A+header:X-B', limiter: l}");
    request_init(&r, NULL);
    headers_add(&r.headers, "X-B", "1");
    headers_add(&r.headers, "X-B", "2");
    cr_assert_not(ratekey_ambiguous(rl, &r.who), "X-A is absent");
    headers_add(&r.headers, "X-A", "a");
    cr_assert(ratekey_ambiguous(rl, &r.who), "X-A present, X-B twice");
    headers_deinit(&r.headers);
    teardown();

    load("{key: 'header:X-B', limiter: none}");
    request_init(&r, NULL);
    headers_add(&r.headers, "X-B", "1");
    headers_add(&r.headers, "X-B", "2");
    cr_assert_not(ratekey_ambiguous(rl, &r.who), "limiter: none limits none");
    headers_deinit(&r.headers);
}

/* Rack 2, Python before 3.9.2 and Go before 1.17 split a query on ';'
 * too: where they would read the parameter otherwise, it names no one. */
Test(ratekey, a_query_read_otherwise_by_a_semicolon_splitter_names_no_one)
{
    static const char *const ambiguous[] = {
        "k=junk;k=victim", "x=1;k=victim", "k=victim;junk",
        "k=a&x=1;k=b",     "k=v;x=1",
    };
    static const char *const plain[] = {"k=v&x=1;y=2", "k=v%3Bw", "x=a;b&k=v"};
    struct request r;
    char key[RATEKEY_MAX];

    load("{key: 'query:k', limiter: l}");
    request_init(&r, NULL);
    for (size_t i = 0; i < sizeof(ambiguous) / sizeof(ambiguous[0]); i++) {
        r.who.query = ambiguous[i];
        key_of(&r, key);
        cr_assert_str_eq(key, "", "%s gave the key %s", ambiguous[i], key);
    }
    for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
        r.who.query = plain[i];
        key_of(&r, key);
        cr_assert_neq(key[0], '\0', "%s gave no key", plain[i]);
    }
    headers_deinit(&r.headers);
}

Test(ratekey, query_parameter_is_decoded_then_escaped)
{
    struct request r;
    char key[RATEKEY_MAX];

    load("{key: 'query:api_key', limiter: l}");
    request_init(&r, NULL);
    r.who.query = "a=1&api_keyx=no&api_key=x%41+y%2";
    key_of(&r, key);
    /* "%41" is 'A', '+' a space, a stray '%' itself. */
    assert_key(key, "query:api_key", "xA%20y%252");
    /* Sent twice, it names no one: the upstream may read the second. */
    r.who.query = "api_key=junk&api_key=k1";
    key_of(&r, key);
    cr_assert_str_eq(key, "");
    r.who.query = "api_key=k1&api%5Fkey=k1";
    key_of(&r, key);
    cr_assert_str_eq(key, "");
    /* The name is compared decoded too. */
    r.who.query = "api%5Fkey=v";
    key_of(&r, key);
    assert_key(key, "query:api_key", "v");
    /* The same value however it is encoded: one bucket. */
    r.who.query = "api_key=a%20b";
    key_of(&r, key);
    assert_key(key, "query:api_key", "a%20b");
    r.who.query = "api_key=a+b";
    key_of(&r, key);
    assert_key(key, "query:api_key", "a%20b");
    headers_deinit(&r.headers);
}

Test(ratekey, cookie_is_found_in_any_cookie_field)
{
    struct request r;
    char key[RATEKEY_MAX];

    load("{key: 'cookie:sid', limiter: l}");
    request_init(&r, NULL);
    headers_add(&r.headers, "Cookie", "a=b; xsid=no;sid= s1 ; c=d");
    key_of(&r, key);
    assert_key(key, "cookie:sid", "s1");
    headers_deinit(&r.headers);

    request_init(&r, NULL);
    headers_add(&r.headers, "Cookie", "a=b");
    headers_add(&r.headers, "cookie", "SID=upper; sid=s2");
    key_of(&r, key);
    assert_key(key, "cookie:sid", "s2");
    headers_deinit(&r.headers);
}

/*
 * RFC 6265 lets a cookie's value be wrapped in double quotes, and servers
 * such as Netty (Spring Cloud Gateway's) read "s1" and s1 as one value:
 * the two spellings are one key, or each would have a budget of its own.
 */
Test(ratekey, a_quoted_cookie_value_is_the_same_key)
{
    static const char *const spellings[] = {"sid=s1", "sid=\"s1\"",
                                            "sid= \"s1\" "};
    struct request r;
    char key[RATEKEY_MAX];

    load("{key: 'cookie:sid', limiter: l}");
    for (size_t i = 0; i < 3; i++) {
        request_init(&r, NULL);
        headers_add(&r.headers, "Cookie", spellings[i]);
        key_of(&r, key);
        assert_key(key, "cookie:sid", "s1");
        headers_deinit(&r.headers);
    }
}

/*
 * PHP, Rack and Express URL-decode a cookie's value: each spelling of one
 * value ("%6Dine", "m%69ne") bought a fresh bucket while the upstream
 * read the same session. It is read as they read it: one key.
 */
Test(ratekey, a_cookie_value_however_encoded_is_one_key)
{
    static const char *const spellings[] = {"sid=mine", "sid=%6Dine",
                                            "sid=m%69ne", "sid=%6d%69ne",
                                            "sid=\"%6Dine\""};
    struct request r;
    char key[RATEKEY_MAX];

    load("{key: 'cookie:sid', limiter: l}");
    for (size_t i = 0; i < sizeof(spellings) / sizeof(spellings[0]); i++) {
        request_init(&r, NULL);
        headers_add(&r.headers, "Cookie", spellings[i]);
        key_of(&r, key);
        assert_key(key, "cookie:sid", "mine");
        headers_deinit(&r.headers);
    }
}

/*
 * Quotes and backslashes that servers read differently: Python's
 * http.cookies and Werkzeug read "\155ine" as "mine" and a quoted value
 * across ';' (so 'x="; sid=victim; y="' holds no sid for them), others
 * keep the backslash and split at every ';'. Each spelling was a fresh
 * bucket; such fields now name no one.
 */
Test(ratekey, cookies_whose_quoting_servers_read_differently_name_no_one)
{
    static const char *const ambiguous[] = {
        "sid=\"\\155ine\"",     "sid=\"m\\ine\"",
        "sid=\"\\m\\i\\n\\e\"", "x=\"; sid=victim; y=\"",
        "sid=\"mine",           "sid=mi\"ne",
        "sid=\"mi\"ne\"",       "a=\"b\\\"c\"; sid=mine",
    };
    static const char *const plain[] = {
        "sid=\"mine\"; a=\"b\"", "sid=mi\\ne", "a=\"\"; sid=mine",
        /* After it, or inside an unquoted value: nothing hidden. */
        "sid=mine; prefs={\"theme\":\"dark\"}", "j={\"a\":1}; sid=mine",
        "ab=x\"y; sid=mine", "sid=mine; x=\"; y=\""};
    struct request r;
    char key[RATEKEY_MAX];

    load("{key: 'cookie:sid', limiter: l}");
    for (size_t i = 0; i < sizeof(ambiguous) / sizeof(ambiguous[0]); i++) {
        request_init(&r, NULL);
        headers_add(&r.headers, "Cookie", ambiguous[i]);
        key_of(&r, key);
        cr_assert_str_eq(key, "", "%s gave the key %s", ambiguous[i], key);
        headers_deinit(&r.headers);
    }
    for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
        request_init(&r, NULL);
        headers_add(&r.headers, "Cookie", plain[i]);
        key_of(&r, key);
        cr_assert_neq(key[0], '\0', "%s gave no key", plain[i]);
        headers_deinit(&r.headers);
    }
}

/*
 * PHP reads "api.key", "api key", "api[key" and "api_key[]" as "api_key"
 * (Rack the last too), and a cookie's name decoded: beside the key's own
 * name each is the key sent twice, and alone it is the key.
 */
Test(ratekey, names_php_reads_as_the_key_count_as_the_key)
{
    static const char *const twice[] = {
        "api_key=junk&api.key=mine",     "api_key=junk&api+key=mine",
        "api_key=junk&api%20key=mine",   "api_key=junk&api[key=mine",
        "api_key[]=mine&api_key=junk",   "api_key=junk&+api_key=mine",
        "api_key=junk&api_key%00x=mine", "api_key=junk&api_key[a]=mine",
    };
    static const char *const alone[] = {"api.key=mine", "api_key[]=mine",
                                        "api[key=mine"};
    static const char *const others[] = {"api_key=mine&api_keyx=1",
                                         "api_key=mine&api[key]=1",
                                         "api_key=mine&xapi.key=1"};
    struct request r;
    char key[RATEKEY_MAX];

    load("{key: 'query:api_key', limiter: l}");
    request_init(&r, NULL);
    for (size_t i = 0; i < sizeof(twice) / sizeof(twice[0]); i++) {
        r.who.query = twice[i];
        key_of(&r, key);
        cr_assert_str_eq(key, "", "%s gave the key %s", twice[i], key);
    }
    for (size_t i = 0; i < sizeof(alone) / sizeof(alone[0]); i++) {
        r.who.query = alone[i];
        key_of(&r, key);
        assert_key(key, "query:api_key", "mine");
    }
    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
        r.who.query = others[i];
        key_of(&r, key);
        assert_key(key, "query:api_key", "mine");
    }
    headers_deinit(&r.headers);

    load("{key: 'cookie:sid', limiter: l}");
    request_init(&r, NULL);
    headers_add(&r.headers, "Cookie", "s%69d=mine; sid=junk");
    key_of(&r, key);
    cr_assert_str_eq(key, "", "a decoded name twice gave the key %s", key);
    headers_deinit(&r.headers);
}

Test(ratekey, route_key_is_one_bucket_for_everyone)
{
    struct request r;
    char key[RATEKEY_MAX];

    load("{key: route, limiter: l}");
    request_init(&r, NULL);
    key_of(&r, key);
    assert_key(key, "route", "-");
    headers_deinit(&r.headers);
}

Test(ratekey, combined_parts_are_joined_with_plus)
{
    struct request r;
    char key[RATEKEY_MAX];

    load("{key: 'ip+header:X-Api-Key+user+cookie:s', limiter: l}");
    request_init(&r, "10.0.0.7");
    headers_add(&r.headers, "X-Api-Key", "k+1");
    headers_add(&r.headers, "Cookie", "s=c");
    r.who.user = "bob";
    key_of(&r, key);
    /* A '+' inside a value is escaped, so the join stays unambiguous. */
    assert_key(key, "ip+header:x-api-key+user+cookie:s",
               "10.0.0.7+k%2B1+bob+c");
    headers_deinit(&r.headers);
}

Test(ratekey, empty_or_missing_part_builds_no_key)
{
    struct request r;
    char key[RATEKEY_MAX];

    load("{key: 'ip+header:X-Api-Key', limiter: l}");
    request_init(&r, "10.0.0.7");
    cr_assert_not(ratekey_build(&rl->tiers[0], &r.who, "p:", "r", key));
    cr_assert_str_eq(key, "");
    headers_add(&r.headers, "X-Api-Key", "");
    cr_assert_not(ratekey_build(&rl->tiers[0], &r.who, "p:", "r", key));
    headers_deinit(&r.headers);
    request_init(&r, NULL);
    headers_add(&r.headers, "X-Api-Key", "k");
    cr_assert_not(ratekey_build(&rl->tiers[0], &r.who, "p:", "r", key));
    headers_deinit(&r.headers);
    teardown();

    request_init(&r, NULL);
    load("{key: user, limiter: l}");
    cr_assert_not(ratekey_build(&rl->tiers[0], &r.who, "p:", "r", key));
    r.who.user = "";
    cr_assert_not(ratekey_build(&rl->tiers[0], &r.who, "p:", "r", key));
    teardown();

    load("{key: 'query:q', limiter: l}");
    cr_assert_not(ratekey_build(&rl->tiers[0], &r.who, "p:", "r", key));
    r.who.query = "q&x=1";
    cr_assert_not(ratekey_build(&rl->tiers[0], &r.who, "p:", "r", key));
    r.who.query = "q=";
    cr_assert_not(ratekey_build(&rl->tiers[0], &r.who, "p:", "r", key));
    r.who.query = "";
    cr_assert_not(ratekey_build(&rl->tiers[0], &r.who, "p:", "r", key));
    teardown();

    load("{key: 'cookie:c', limiter: l}");
    headers_add(&r.headers, "Cookie", "c; d=1; c =");
    cr_assert_not(ratekey_build(&rl->tiers[0], &r.who, "p:", "r", key));
    headers_deinit(&r.headers);
}

Test(ratekey, tiers_are_tried_in_order_by_role_then_key)
{
    struct request r;
    const struct tier *t;

    load("{tiers: [{when: {role: superadmin}, limiter: none},"
         " {when: {role: admin}, key: ip, limiter: l},"
         " {key: user, limiter: l},"
         " {key: ip, limiter: l}]}");
    request_init(&r, "192.0.2.1");

    r.who.role = "superadmin";
    r.who.user = "root";
    t = ratekey_tier(rl, &r.who);
    cr_assert_eq(t, &rl->tiers[0]);
    cr_assert_null(t->limiter);

    r.who.role = "admin";
    cr_assert_eq(ratekey_tier(rl, &r.who), &rl->tiers[1]);
    /* Roles compare exactly. */
    r.who.role = "Admin";
    cr_assert_eq(ratekey_tier(rl, &r.who), &rl->tiers[2]);
    r.who.role = NULL;
    cr_assert_eq(ratekey_tier(rl, &r.who), &rl->tiers[2]);
    /* Anonymous callers fall through to the address. */
    r.who.user = NULL;
    cr_assert_eq(ratekey_tier(rl, &r.who), &rl->tiers[3]);
    /* An admin whose key cannot be built falls through as well. */
    r.who.role = "admin";
    r.who.client = NULL;
    r.who.user = "ann";
    cr_assert_eq(ratekey_tier(rl, &r.who), &rl->tiers[2]);
    r.who.user = NULL;
    cr_assert_null(ratekey_tier(rl, &r.who));
    headers_deinit(&r.headers);
}

Test(ratekey, none_tier_with_a_key_applies_only_when_it_resolves)
{
    struct request r;

    load("{tiers: [{key: 'header:X-Internal', limiter: none},"
         " {key: ip, limiter: l}]}");
    request_init(&r, "192.0.2.1");
    cr_assert_eq(ratekey_tier(rl, &r.who), &rl->tiers[1]);
    headers_add(&r.headers, "X-Internal", "1");
    cr_assert_eq(ratekey_tier(rl, &r.who), &rl->tiers[0]);
    headers_deinit(&r.headers);
}

Test(ratekey, hostile_bytes_are_escaped_out_of_the_hash_tag)
{
    struct request r;
    char key[RATEKEY_MAX];
    const char *open;

    load("{key: user, limiter: l}");
    request_init(&r, NULL);
    r.who.user = "a{b}:c d+\xc3\xa9#%~@._-Z9";
    key_of(&r, key);
    assert_key(key, "user", "a%7Bb%7D%3Ac%20d%2B%C3%A9%23%25~@._-Z9");
    /* One tag, closed at the very end. */
    open = strchr(key, '{');
    cr_assert_not_null(open);
    cr_assert_null(strchr(open + 1, '{'));
    cr_assert_eq(strchr(key, '}'), key + strlen(key) - 1);
    r.who.user = "\x01\x7f\xff";
    key_of(&r, key);
    assert_key(key, "user", "%01%7F%FF");
    headers_deinit(&r.headers);
}

Test(ratekey, long_values_are_hashed_with_sha256)
{
    struct request r;
    char key[RATEKEY_MAX];
    char again[RATEKEY_MAX];
    char value[10001];

    load("{key: user, limiter: l}");
    request_init(&r, NULL);
    /* 64 bytes after escaping: kept as is. */
    memset(value, 'a', 64);
    value[64] = '\0';
    r.who.user = value;
    key_of(&r, key);
    assert_key(key, "user", value);
    /* 65: "#" and the first 128 bits of SHA-256("a" x 65). */
    value[64] = 'a';
    value[65] = '\0';
    key_of(&r, key);
    assert_key(key, "user", "#635361c48bb9eab14198e76ea8ab7f1a");
    key_of(&r, again);
    cr_assert_str_eq(again, key, "deterministic");
    value[0] = 'b';
    key_of(&r, again);
    cr_assert_str_neq(again, key, "another value, another hash");
    /* 22 spaces are 66 bytes escaped: the escaped form is hashed. */
    memset(value, ' ', 22);
    value[22] = '\0';
    key_of(&r, key);
    assert_key(key, "user", "#4df1c00910e4fb7ce6020c03238725c4");
    /* However long the value, the key stays short. */
    memset(value, 'x', 10000);
    value[10000] = '\0';
    key_of(&r, key);
    assert_key(key, "user", "#e4ee97ec252749d2096447e849628d0d");
    headers_deinit(&r.headers);
}

Test(ratekey, longest_key_the_config_allows_fits)
{
    struct request r;
    char key[RATEKEY_MAX];
    char name[200];
    char *args;
    char big[65];
    char query[67];

    /* 7 + 1 + 8 + 1 + 219 = 236 fixed bytes; a config allows 237. */
    memset(name, 'h', 190);
    name[190] = '\0';
    args =
        xasprintf("{key: 'header:%s+query:a+cookie:b+user', limiter: l}", name);
    load(args);
    free(args);
    request_init(&r, NULL);
    memset(big, '~', 64);
    big[64] = '\0';
    headers_add(&r.headers, name, big);
    /* 21 bytes that escape to 63: the longest kept unhashed. */
    headers_add(&r.headers, "Cookie",
                "b=\xff\xff\xff\xff\xff\xff\xff\xff"
                "\xff\xff\xff\xff\xff\xff\xff\xff"
                "\xff\xff\xff\xff\xff");
    query[0] = 'a';
    query[1] = '=';
    memset(query + 2, '~', 64);
    query[66] = '\0';
    r.who.query = query;
    r.who.user = big;
    cr_assert(ratekey_build(&rl->tiers[0], &r.who, "sluice:", "r", key));
    /* Room is left for the ":<rule>" suffix. */
    cr_assert_eq(strlen(key), 500, "%zu %s", strlen(key), key);
    cr_assert_lt(strlen(key), RATEKEY_MAX - 8);
    /* A prefix no config would accept does not overflow the buffer. */
    memset(name, 'p', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    cr_assert_not(ratekey_build(&rl->tiers[0], &r.who, name, "r", key));
    cr_assert_str_eq(key, "");
    headers_deinit(&r.headers);
}

/* Every byte but [A-Za-z0-9._~@-] is escaped, each as %XX. */
Test(ratekey, each_byte_is_kept_or_escaped)
{
    struct request r;
    char key[RATEKEY_MAX];
    char value[2];
    char want[4];

    load("{key: user, limiter: l}");
    request_init(&r, NULL);
    r.who.user = value;
    for (int c = 1; c < 256; c++) {
        value[0] = (char)c;
        value[1] = '\0';
        if (isalnum(c) || strchr("._~@-", c) != NULL) {
            snprintf(want, sizeof(want), "%c", c);
        } else {
            snprintf(want, sizeof(want), "%%%02X", c);
        }
        key_of(&r, key);
        assert_key(key, "user", want);
    }
    headers_deinit(&r.headers);
}

/* A long value that would not fit as it is fits hashed. */
Test(ratekey, a_value_too_long_for_the_room_left_is_hashed_and_fits)
{
    struct request r;
    char key[RATEKEY_MAX];
    char want[2 * RATEKEY_MAX];
    char prefix[401];
    char value[301];

    load("{key: user, limiter: l}");
    request_init(&r, NULL);
    memset(value, 'a', sizeof(value) - 1);
    value[sizeof(value) - 1] = '\0';
    r.who.user = value;
    key_of(&r, key);
    cr_assert(strncmp(key, "sluice:", 7) == 0 && strchr(key, '#') != NULL, "%s",
              key);
    /* 400 + 20 fixed bytes leave 91: the value's 300 do not fit, its 33
     * hashed do. */
    memset(prefix, 'p', sizeof(prefix) - 1);
    prefix[sizeof(prefix) - 1] = '\0';
    snprintf(want, sizeof(want), "%s%s", prefix, key + 7);
    cr_assert(ratekey_build(&rl->tiers[0], &r.who, prefix, "r", key));
    cr_assert_str_eq(key, want);
    headers_deinit(&r.headers);
}

/* An empty user or role names no one; the route key always applies. */
Test(ratekey, empty_user_or_role_falls_through_to_the_next_tier)
{
    struct request r;

    load("{tiers: [{key: user, limiter: l}, {key: role, limiter: l},"
         " {key: route, limiter: l}]}");
    request_init(&r, NULL);
    r.who.user = "";
    r.who.role = "";
    cr_assert_eq(ratekey_tier(rl, &r.who), &rl->tiers[2]);
    r.who.role = "r";
    cr_assert_eq(ratekey_tier(rl, &r.who), &rl->tiers[1]);
    r.who.user = "u";
    cr_assert_eq(ratekey_tier(rl, &r.who), &rl->tiers[0]);
    headers_deinit(&r.headers);
}

/* ---- claims of a verified token (identity.jwt) ---- */

/* load() with identity.jwt, whose secret is written to a temporary file. */
static void
load_with_jwt(const char *args)
{
    struct config_errors e;
    char secret[] = "/tmp/sluice-ratekey-XXXXXX";
    int fd = mkstemp(secret);
    char *yaml;

    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, "0123456789abcdef0123456789abcdef", 32), 32);
    close(fd);
    yaml = xasprintf("limiters: {l: {algorithm: gcra, rate: 1/s}}\n"
                     "identity: {jwt: {algorithms: [HS256], secret_file: %s}}\n"
                     "routes:\n"
                     "  - id: r\n"
                     "    uri: http://x\n"
                     "    filters:\n"
                     "      - name: RequestRateLimiter\n"
                     "        args: %s\n",
                     secret, args);
    config_errors_init(&e);
    cfg = config_parse(yaml, strlen(yaml), "t.yaml", &e);
    unlink(secret);
    cr_assert_not_null(cfg, "%s", e.n > 0 ? e.v[0] : "");
    config_errors_deinit(&e);
    free(yaml);
    rl = cfg->routes[0].rate_limiters[0];
}

static struct claims *
claims_of(const char *json)
{
    struct claims *c = claims_parse(json, strlen(json));

    cr_assert_not_null(c, "%s", json);
    return c;
}

Test(ratekey, claim_key_is_the_claim_s_string)
{
    struct request r;
    char key[RATEKEY_MAX];
    struct claims *pro = claims_of("{\"plan\":\"pro\"}");
    struct claims *list = claims_of("{\"plan\":[\"gold\",\"pro\"]}");
    struct claims *num = claims_of("{\"plan\":3}");

    load_with_jwt("{key: claim:plan, limiter: l}");
    request_init(&r, "192.0.2.1");
    key_of(&r, key);
    cr_assert_str_eq(key, "", "no claims: no key");
    r.who.claims = pro;
    key_of(&r, key);
    assert_key(key, "claim:plan", "pro");
    r.who.claims = list;
    key_of(&r, key);
    assert_key(key, "claim:plan", "gold");
    r.who.claims = num;
    key_of(&r, key);
    cr_assert_str_eq(key, "", "a number is not a key");
    claims_unref(pro);
    claims_unref(list);
    claims_unref(num);
    headers_deinit(&r.headers);
}

Test(ratekey, claim_conditions_pick_the_tier)
{
    struct request r;
    struct claims *free_eu = claims_of("{\"plan\":\"free\",\"region\":\"eu\"}");
    struct claims *free_us = claims_of("{\"plan\":\"free\",\"region\":\"us\"}");
    struct claims *admin = claims_of("{\"plan\":\"pro\"}");

    load_with_jwt("{tiers: [{when: {claim: {plan: free, region: eu}}, key: "
                  "ip, limiter: l}, {when: {role: admin, claim: {plan: pro}}, "
                  "limiter: none}, {key: route, limiter: l}]}");
    request_init(&r, "192.0.2.1");
    r.who.claims = free_eu;
    cr_assert_eq(ratekey_tier(rl, &r.who), &rl->tiers[0]);
    r.who.claims = free_us;
    cr_assert_eq(ratekey_tier(rl, &r.who), &rl->tiers[2], "every claim");
    r.who.claims = admin;
    cr_assert_eq(ratekey_tier(rl, &r.who), &rl->tiers[2], "and the role");
    r.who.role = "admin";
    cr_assert_eq(ratekey_tier(rl, &r.who), &rl->tiers[1]);
    r.who.claims = NULL;
    cr_assert_eq(ratekey_tier(rl, &r.who), &rl->tiers[2]);
    claims_unref(free_eu);
    claims_unref(free_us);
    claims_unref(admin);
    headers_deinit(&r.headers);
}
