#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "headers.h"
#include "netaddr.h"
#include "predicate.h"

static const struct kind_spec *
spec(const char *name)
{
    size_t n;
    const struct kind_spec *specs = predicate_specs(&n);

    for (size_t i = 0; i < n; i++) {
        if (strcmp(specs[i].name, name) == 0) {
            return &specs[i];
        }
    }
    cr_assert_fail("no predicate called %s", name);
    return NULL;
}

/* Builds a predicate that must be valid. */
static struct predicate
make(const char *kind, const char *const *args, size_t nargs)
{
    struct predicate p;
    char err[256] = "";

    cr_assert_eq(predicate_init(&p, spec(kind), args, nargs, err, sizeof(err)),
                 0, "%s: %s", kind, err);
    return p;
}

/* Builds a predicate that must be refused, and checks the message. */
static void
refuse(const char *kind, const char *const *args, size_t nargs,
       const char *want)
{
    struct predicate p;
    char err[256] = "";

    memset(&p, 0xab, sizeof(p));
    cr_assert_eq(predicate_init(&p, spec(kind), args, nargs, err, sizeof(err)),
                 -1, "%s should be refused", kind);
    cr_assert_str_eq(err, want);
    cr_assert_null(p.values, "a refused predicate is left empty");
    cr_assert_null(p.name);
    cr_assert_null(p.re);
    cr_assert_null(p.cidrs);
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__})
#define NARGS(...) (sizeof(ARGS(__VA_ARGS__)) / sizeof(const char *))
#define MAKE(kind, ...) make(kind, ARGS(__VA_ARGS__), NARGS(__VA_ARGS__))
#define REFUSE(kind, want, ...)                                                \
    refuse(kind, ARGS(__VA_ARGS__), NARGS(__VA_ARGS__), want)

static struct request_view
request(const char *method, const char *path)
{
    struct request_view r;

    memset(&r, 0, sizeof(r));
    r.method = method;
    r.path = path;
    return r;
}

Test(predicate, the_table_lists_every_kind_in_readme_order)
{
    size_t n;
    const struct kind_spec *s = predicate_specs(&n);

    cr_assert_eq(n, 12);
    cr_assert_str_eq(s[0].name, "Path");
    cr_assert_eq(s[0].kind, PREDICATE_PATH);
    cr_assert(s[0].args[0].gather);
    cr_assert_str_eq(s[3].name, "Header");
    cr_assert_eq(s[3].nargs, 2);
    cr_assert_str_eq(s[3].args[1].name, "regexp");
    cr_assert(s[3].args[1].optional);
    cr_assert_str_eq(s[4].name, "Query");
    cr_assert_str_eq(s[4].args[0].name, "param");
    cr_assert_str_eq(s[5].name, "RemoteAddr");
    cr_assert_str_eq(s[5].args[0].name, "sources");
    cr_assert_str_eq(s[6].name, "After");
    cr_assert_str_eq(s[6].args[0].name, "datetime");
    cr_assert_str_eq(s[7].name, "Before");
    cr_assert_str_eq(s[8].name, "Between");
    cr_assert_str_eq(s[8].args[1].name, "datetime2");
    cr_assert_str_eq(s[9].name, "Cookie");
    cr_assert(s[9].args[1].optional);
    cr_assert_str_eq(s[10].name, "Weight");
    cr_assert_str_eq(s[10].args[0].name, "group");
    cr_assert_str_eq(s[11].name, "XForwardedRemoteAddr");
    cr_assert(s[11].args[0].gather);
}

Test(predicate, path_matches_any_of_its_patterns)
{
    struct predicate p = MAKE("Path", "/api/users/**", "/health");
    struct request_view r = request("GET", "/api/users/7");

    cr_assert(predicate_test(&p, &r, NULL));
    r.path = "/health";
    cr_assert(predicate_test(&p, &r, NULL));
    r.path = "/api/orders";
    cr_assert_not(predicate_test(&p, &r, NULL));
    r.path = NULL;
    cr_assert_not(predicate_test(&p, &r, NULL));
    predicate_deinit(&p);
}

Test(predicate, path_captures_uri_variables)
{
    struct predicate p = MAKE("Path", "/red/{segment}");
    struct request_view r = request("GET", "/red/blue");
    struct glob_vars vars;

    cr_assert(predicate_test(&p, &r, &vars));
    cr_assert_eq(vars.n, 1);
    cr_assert_eq(vars.v[0].value_len, 4);
    cr_assert_eq(strncmp(vars.v[0].value, "blue", 4), 0);
    predicate_deinit(&p);
}

Test(predicate, path_patterns_are_normalised_like_requests)
{
    struct predicate p = MAKE("Path", "/caf%c3%a9//menu");
    struct request_view r = request("GET", "/caf%C3%A9/menu");

    cr_assert_str_eq(p.values[0], "/caf%C3%A9/menu");
    cr_assert(predicate_test(&p, &r, NULL));
    predicate_deinit(&p);
}

Test(predicate, path_refuses_bad_patterns)
{
    REFUSE("Path", "Path: pattern must start with '/': \"api/**\"", "api/**");
    REFUSE("Path", "Path: pattern \"/a/{id\": unclosed '{'", "/a/{id");
    REFUSE("Path", "Path: pattern \"/a/%zz\": bad percent-escape in path",
           "/ok", "/a/%zz");
    REFUSE("Path", "Path: pattern \"/a/**b\": '**' must be a whole segment",
           "/a/**b");
}

Test(predicate, argument_counts_are_checked)
{
    struct predicate p;
    char err[256] = "";

    cr_assert_eq(predicate_init(&p, spec("Path"), NULL, 0, err, sizeof(err)),
                 -1);
    cr_assert_str_eq(err, "Path: expects at least 1 argument, got 0");
    REFUSE("Header", "Header: expects 1 or 2 arguments, got 3", "X-A", "a",
           "b");
    cr_assert_eq(predicate_init(&p, spec("Query"), NULL, 0, err, sizeof(err)),
                 -1);
    cr_assert_str_eq(err, "Query: expects 1 or 2 arguments, got 0");
}

Test(predicate, method_matches_upper_cased_names)
{
    struct predicate p = MAKE("Method", "get", "Post");
    struct request_view r = request("GET", "/");

    cr_assert_str_eq(p.values[0], "GET");
    cr_assert_str_eq(p.values[1], "POST");
    cr_assert(predicate_test(&p, &r, NULL));
    r.method = "POST";
    cr_assert(predicate_test(&p, &r, NULL));
    r.method = "DELETE";
    cr_assert_not(predicate_test(&p, &r, NULL));
    predicate_deinit(&p);
}

Test(predicate, method_refuses_non_token_names)
{
    REFUSE("Method", "Method: \"G ET\" is not a method name", "G ET");
    REFUSE("Method", "Method: \"\" is not a method name", "GET", "");
    REFUSE("Method", "Method: \"GET/1\" is not a method name", "GET/1");
}

Test(predicate, host_matches_without_the_port)
{
    struct predicate p = MAKE("Host", "**.example.org", "api.test");
    struct request_view r = request("GET", "/");

    r.host = "www.example.org";
    cr_assert(predicate_test(&p, &r, NULL));
    r.host = "example.org:8080";
    cr_assert(predicate_test(&p, &r, NULL));
    r.host = "API.TEST";
    cr_assert(predicate_test(&p, &r, NULL));
    r.host = "api.test.";
    cr_assert(predicate_test(&p, &r, NULL));
    r.host = "example.com";
    cr_assert_not(predicate_test(&p, &r, NULL));
    r.host = "evil.org:example.org";
    cr_assert_not(predicate_test(&p, &r, NULL));
    r.host = NULL;
    cr_assert_not(predicate_test(&p, &r, NULL));
    predicate_deinit(&p);
}

Test(predicate, host_single_star_is_one_label)
{
    struct predicate p = MAKE("Host", "*.example.org");
    struct request_view r = request("GET", "/");

    r.host = "a.example.org:443";
    cr_assert(predicate_test(&p, &r, NULL));
    r.host = "a.b.example.org";
    cr_assert_not(predicate_test(&p, &r, NULL));
    predicate_deinit(&p);
}

Test(predicate, host_handles_bracketed_ipv6)
{
    struct predicate p = MAKE("Host", "[::1]");
    struct request_view r = request("GET", "/");

    r.host = "[::1]:8080";
    cr_assert(predicate_test(&p, &r, NULL));
    r.host = "[::1]";
    cr_assert(predicate_test(&p, &r, NULL));
    r.host = "[::2]:8080";
    cr_assert_not(predicate_test(&p, &r, NULL));
    r.host = "[::1";
    cr_assert_not(predicate_test(&p, &r, NULL));
    predicate_deinit(&p);
}

Test(predicate, host_refuses_bad_patterns)
{
    REFUSE("Host", "Host: empty pattern", "");
    REFUSE("Host",
           "Host: pattern \"example.org:8080\": leave out the port (and "
           "write IPv6 literals in brackets)",
           "example.org:8080");
    REFUSE("Host",
           "Host: pattern \"{sub}.example.org\": '{' is not allowed in a "
           "host pattern",
           "{sub}.example.org");
}

static struct header test_fields[] = {
    {"Accept", "text/html"},
    {"X-Request-Id", "abc123"},
    {"x-request-id", "999"},
};
static const struct headers test_headers = {.v = test_fields, .n = 3, .cap = 3};

Test(predicate, header_without_regexp_tests_presence)
{
    struct predicate p = MAKE("Header", "X-REQUEST-ID");
    struct predicate q = MAKE("Header", "X-Missing");
    struct request_view r = request("GET", "/");

    r.headers = &test_headers;
    cr_assert(predicate_test(&p, &r, NULL));
    cr_assert_not(predicate_test(&q, &r, NULL));
    r.headers = NULL;
    cr_assert_not(predicate_test(&p, &r, NULL));
    predicate_deinit(&p);
    predicate_deinit(&q);
}

Test(predicate, header_regexp_must_match_a_whole_value)
{
    struct predicate digits = MAKE("Header", "X-Request-Id", "\\d+");
    struct predicate partial = MAKE("Header", "Accept", "html");
    struct predicate blank = MAKE("Header", "Accept", "");
    struct request_view r = request("GET", "/");

    r.headers = &test_headers;
    /* The first X-Request-Id is not digits; the second one is. */
    cr_assert(predicate_test(&digits, &r, NULL));
    cr_assert_not(predicate_test(&partial, &r, NULL));
    cr_assert_null(blank.re, "a blank regexp means presence only");
    cr_assert(predicate_test(&blank, &r, NULL));
    predicate_deinit(&digits);
    predicate_deinit(&partial);
    predicate_deinit(&blank);
}

Test(predicate, header_refuses_bad_names_and_regexps)
{
    REFUSE("Header", "Header: \"X Bad\" is not a header name", "X Bad");
    REFUSE("Header",
           "Header: bad regexp \"(\": missing closing parenthesis at "
           "offset 1",
           "X-A", "(");
}

Test(predicate, query_tests_presence_without_regexp)
{
    struct predicate p = MAKE("Query", "debug");
    struct request_view r = request("GET", "/");

    r.query = "a=1&debug&b=2";
    cr_assert(predicate_test(&p, &r, NULL));
    r.query = "debug=";
    cr_assert(predicate_test(&p, &r, NULL));
    r.query = "Debug=1&debugger=1&xdebug=1";
    cr_assert_not(predicate_test(&p, &r, NULL));
    r.query = "";
    cr_assert_not(predicate_test(&p, &r, NULL));
    r.query = NULL;
    cr_assert_not(predicate_test(&p, &r, NULL));
    predicate_deinit(&p);
}

Test(predicate, query_regexp_matches_a_decoded_value)
{
    struct predicate p = MAKE("Query", "q", "hello world!");
    struct request_view r = request("GET", "/");

    r.query = "q=hello+world%21";
    cr_assert(predicate_test(&p, &r, NULL));
    r.query = "q=nope&q=hello%20world!";
    cr_assert(predicate_test(&p, &r, NULL));
    r.query = "q=hello+world%21+and+more";
    cr_assert_not(predicate_test(&p, &r, NULL));
    r.query = "x=hello+world%21";
    cr_assert_not(predicate_test(&p, &r, NULL));
    predicate_deinit(&p);
}

Test(predicate, query_decodes_names_and_keeps_bad_escapes)
{
    struct predicate p = MAKE("Query", "a b", "100%");
    struct request_view r = request("GET", "/");

    r.query = "a+b=100%";
    cr_assert(predicate_test(&p, &r, NULL));
    r.query = "a%20b=100%25";
    cr_assert(predicate_test(&p, &r, NULL));
    predicate_deinit(&p);
}

Test(predicate, query_handles_long_values)
{
    struct predicate p = MAKE("Query", "v", "x{2000}");
    struct request_view r = request("GET", "/");
    char *q = malloc(2003);

    strcpy(q, "v=");
    memset(q + 2, 'x', 2000);
    q[2002] = '\0';
    r.query = q;
    cr_assert(predicate_test(&p, &r, NULL));
    q[2001] = 'y';
    cr_assert_not(predicate_test(&p, &r, NULL));
    free(q);
    predicate_deinit(&p);
}

Test(predicate, query_refuses_empty_names_and_bad_regexps)
{
    REFUSE("Query", "Query: empty parameter name", "");
    REFUSE("Query",
           "Query: bad regexp \"[a\": missing terminating ] for character "
           "class at offset 2",
           "v", "[a");
}

Test(predicate, remote_addr_matches_any_block)
{
    struct predicate p = MAKE("RemoteAddr", "10.0.0.0/8", "2001:db8::/32");
    struct request_view r = request("GET", "/");
    struct netaddr a;

    r.client = &a;
    netaddr_parse("10.9.8.7", &a);
    cr_assert(predicate_test(&p, &r, NULL));
    netaddr_parse("::ffff:10.9.8.7", &a);
    cr_assert(predicate_test(&p, &r, NULL));
    netaddr_parse("2001:db8::5", &a);
    cr_assert(predicate_test(&p, &r, NULL));
    netaddr_parse("192.168.0.1", &a);
    cr_assert_not(predicate_test(&p, &r, NULL));
    r.client = NULL;
    cr_assert_not(predicate_test(&p, &r, NULL));
    predicate_deinit(&p);
}

Test(predicate, remote_addr_explains_bad_blocks)
{
    REFUSE("RemoteAddr", "RemoteAddr: \"localhost\" is not an IP address",
           "localhost");
    REFUSE("RemoteAddr", "RemoteAddr: \"10.0.0.0/40\": bad prefix length",
           "10.0.0.0/40");
    REFUSE("RemoteAddr",
           "RemoteAddr: \"10.1.2.3/8\" has host bits set (did you mean "
           "10.0.0.0/8?)",
           "192.168.0.0/16", "10.1.2.3/8");
    REFUSE("RemoteAddr",
           "RemoteAddr: \"2001:db8::1/32\" has host bits set (did you mean "
           "2001:db8::/32?)",
           "2001:db8::1/32");
}

Test(predicate, deinit_leaves_an_empty_predicate)
{
    struct predicate p = MAKE("Header", "X-A", "a+");

    predicate_deinit(&p);
    cr_assert_null(p.name);
    cr_assert_null(p.re);
    predicate_deinit(&p);
}

/* 2017-01-21T00:42:47.789Z, the instant of Spring's examples. */
#define SPRING_EXAMPLE_MS 1484959367789LL

Test(predicate, time_reads_spring_zoned_date_times)
{
    int64_t ms = 0;
    char err[256] = "";

    cr_assert_eq(
        predicate_parse_time("2017-01-20T17:42:47.789-07:00[America/Denver]",
                             &ms, err, sizeof(err)),
        0, "%s", err);
    cr_assert_eq(ms, SPRING_EXAMPLE_MS);
    cr_assert_eq(
        predicate_parse_time("2017-01-21T00:42:47.789Z", &ms, err, sizeof(err)),
        0, "%s", err);
    cr_assert_eq(ms, SPRING_EXAMPLE_MS);
    cr_assert_eq(predicate_parse_time("2017-01-21T01:42:47.789+01:00", &ms, err,
                                      sizeof(err)),
                 0, "%s", err);
    cr_assert_eq(ms, SPRING_EXAMPLE_MS);
    cr_assert_eq(
        predicate_parse_time("2017-01-21T00:42:47Z", &ms, err, sizeof(err)), 0,
        "%s", err);
    cr_assert_eq(ms, SPRING_EXAMPLE_MS - 789);
    /* Spring reads a number as epoch milliseconds. */
    cr_assert_eq(predicate_parse_time("1484959367789", &ms, err, sizeof(err)),
                 0, "%s", err);
    cr_assert_eq(ms, SPRING_EXAMPLE_MS);
}

Test(predicate, time_refuses_what_it_cannot_place)
{
    int64_t ms;
    char err[256] = "";

    cr_assert_eq(predicate_parse_time("2017-01-20T17:42:47[America/Denver]",
                                      &ms, err, sizeof(err)),
                 -1);
    cr_assert(strstr(err, "a UTC offset is needed") != NULL, "%s", err);
    cr_assert_eq(predicate_parse_time("2017-01-20", &ms, err, sizeof(err)), -1);
    cr_assert(strstr(err, "is not a date-time") != NULL, "%s", err);
    cr_assert_eq(predicate_parse_time("2017-01-20T17:42:47+07:00 junk", &ms,
                                      err, sizeof(err)),
                 -1);
    cr_assert(strstr(err, "bad UTC offset") != NULL, "%s", err);
    cr_assert_eq(predicate_parse_time("2017-01-20T17:42:47+07:00[", &ms, err,
                                      sizeof(err)),
                 -1);
}

Test(predicate, after_before_and_between_read_the_injected_clock)
{
    struct predicate after = MAKE("After", "2017-01-21T00:42:47.789Z");
    struct predicate before = MAKE("Before", "2017-01-21T00:42:47.789Z");
    struct predicate between =
        MAKE("Between", "2017-01-20T17:42:47.789-07:00[America/Denver]",
             "2017-01-21T17:42:47.789-07:00[America/Denver]");
    struct request_view r = request("GET", "/");

    r.now_ms = SPRING_EXAMPLE_MS;
    cr_assert_not(predicate_test(&after, &r, NULL), "the instant is not after");
    cr_assert_not(predicate_test(&before, &r, NULL));
    cr_assert_not(predicate_test(&between, &r, NULL));
    r.now_ms = SPRING_EXAMPLE_MS + 1;
    cr_assert(predicate_test(&after, &r, NULL));
    cr_assert_not(predicate_test(&before, &r, NULL));
    cr_assert(predicate_test(&between, &r, NULL));
    r.now_ms = SPRING_EXAMPLE_MS - 1;
    cr_assert_not(predicate_test(&after, &r, NULL));
    cr_assert(predicate_test(&before, &r, NULL));
    cr_assert_not(predicate_test(&between, &r, NULL));
    r.now_ms = SPRING_EXAMPLE_MS + 86400000 - 1;
    cr_assert(predicate_test(&between, &r, NULL));
    r.now_ms = SPRING_EXAMPLE_MS + 86400000;
    cr_assert_not(predicate_test(&between, &r, NULL));
    predicate_deinit(&after);
    predicate_deinit(&before);
    predicate_deinit(&between);
}

Test(predicate, time_arguments_are_checked_at_load)
{
    REFUSE("After",
           "After: datetime: \"yesterday\" is not a date-time like "
           "2017-01-20T17:42:47.789-07:00[America/Denver]",
           "yesterday");
    REFUSE("Between",
           "Between: datetime2 \"2017-01-20T00:00:00Z\" must be after "
           "datetime1 \"2017-01-21T00:00:00Z\"",
           "2017-01-21T00:00:00Z", "2017-01-20T00:00:00Z");
    REFUSE("Between",
           "Between: datetime2: \"2017-01-20T00:00:00\": a UTC offset is "
           "needed (\"Z\", \"+01:00\"), a zone id alone is not read",
           "2017-01-21T00:00:00Z", "2017-01-20T00:00:00");
}

static struct header cookie_fields[] = {
    {"Cookie", "theme=dark; chocolate=chip"},
    {"Cookie", "chocolate=chop"},
};
static const struct headers cookie_headers = {
    .v = cookie_fields, .n = 2, .cap = 2};

Test(predicate, cookie_matches_the_whole_value_of_any_cookie_of_the_name)
{
    struct predicate p = MAKE("Cookie", "chocolate", "ch.p");
    /* The second "chocolate": Spring tries every cookie of the name. */
    struct predicate second = MAKE("Cookie", "chocolate", "cho.");
    struct predicate part = MAKE("Cookie", "chocolate", "ch");
    struct predicate present = MAKE("Cookie", "theme");
    struct predicate absent = MAKE("Cookie", "vanilla");
    struct request_view r = request("GET", "/");

    r.headers = &cookie_headers;
    cr_assert(predicate_test(&p, &r, NULL));
    cr_assert(predicate_test(&second, &r, NULL), "only the first was tried");
    cr_assert_not(predicate_test(&part, &r, NULL), "anchored at both ends");
    cr_assert(predicate_test(&present, &r, NULL));
    cr_assert_not(predicate_test(&absent, &r, NULL));
    r.headers = NULL;
    cr_assert_not(predicate_test(&p, &r, NULL));
    predicate_deinit(&p);
    predicate_deinit(&second);
    predicate_deinit(&part);
    predicate_deinit(&present);
    predicate_deinit(&absent);
}

Test(predicate, cookie_arguments_are_checked_at_load)
{
    REFUSE("Cookie", "Cookie: \"a b\" is not a cookie name", "a b", "x");
    REFUSE("Cookie",
           "Cookie: bad regexp \"(\": missing closing parenthesis at "
           "offset 1",
           "id", "(");
}

Test(predicate, weight_arguments_are_checked_at_load)
{
    struct predicate p = MAKE("Weight", "canary", "0");

    cr_assert_str_eq(p.name, "canary");
    cr_assert_eq(p.weight, 0);
    cr_assert_eq(p.total, 0);
    cr_assert_not(predicate_test(&p, &(struct request_view){.draw = 1}, NULL),
                  "an unweighed group matches nothing");
    predicate_deinit(&p);
    REFUSE("Weight",
           "Weight: weight must be an integer from 0 to 1000000, got \"-1\"",
           "g", "-1");
    REFUSE("Weight",
           "Weight: weight must be an integer from 0 to 1000000, got \"1.5\"",
           "g", "1.5");
    REFUSE("Weight",
           "Weight: weight must be an integer from 0 to 1000000, got "
           "\"1000001\"",
           "g", "1000001");
}

Test(predicate, xforwarded_remote_addr_tests_the_resolved_client)
{
    struct predicate p = MAKE("XForwardedRemoteAddr", "192.168.1.0/24");
    struct request_view r = request("GET", "/");
    struct netaddr a;

    cr_assert_eq(p.ncidrs, 1);
    r.client = &a;
    netaddr_parse("192.168.1.10", &a);
    cr_assert(predicate_test(&p, &r, NULL));
    netaddr_parse("192.168.2.10", &a);
    cr_assert_not(predicate_test(&p, &r, NULL));
    predicate_deinit(&p);
    REFUSE("XForwardedRemoteAddr",
           "XForwardedRemoteAddr: \"proxy\" is not an IP address", "proxy");
    REFUSE("XForwardedRemoteAddr",
           "XForwardedRemoteAddr: \"192.168.1.1/24\" has host bits set (did "
           "you mean 192.168.1.0/24?)",
           "192.168.1.1/24");
}
