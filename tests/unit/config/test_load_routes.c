/*
 * The routes: section's rules between predicates and filters, and the
 * arguments of the long form: what loads, and what is refused with one
 * error naming its file, line, column and key.
 */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "config_test.h"
#include "filter.h"
#include "predicate.h"

#define ROUTE(extra)                                                           \
    "routes:\n"                                                                \
    "  - id: a\n"                                                              \
    "    uri: http://x\n" extra

Test(load_routes, a_second_weight_predicate_is_refused)
{
    assert_error(ROUTE("    predicates: [Path=/w/**, 'Weight=g, 5', "
                       "'Weight=h, 5']\n"),
                 "t.yaml:4:45: routes[0].predicates[2]: a route takes at "
                 "most one Weight predicate (it is in group \"g\" already)");
    assert_error(ROUTE("    predicates:\n"
                       "      - Weight=g, 5\n"
                       "      - name: Weight\n"
                       "        args: {group: g, weight: 5}\n"),
                 "t.yaml:6:9: routes[0].predicates[1]: a route takes at "
                 "most one Weight predicate (it is in group \"g\" already)");
}

Test(load_routes, one_weight_predicate_beside_others_loads)
{
    struct config *cfg =
        parse_ok(ROUTE("    predicates: [Path=/w/**, 'Weight=g, 5']\n"));

    cr_assert_eq(cfg->routes[0].npredicates, 2);
    cr_assert_eq(cfg->routes[0].predicates[1].total, 5);
    config_unref(cfg);
}

Test(load_routes, a_service_named_twice_is_refused)
{
    assert_error("scg:\n"
                 "  services:\n"
                 "    orders: http://10.1.2.3:8081\n"
                 "    orders: http://10.9.9.9:8081\n" ROUTE(""),
                 "t.yaml:4:5: scg.services: duplicate key \"orders\" (first "
                 "at line 3)");
}

/* Spring binds "GET,POST" to a list; so does the long form here. */
Test(load_routes, a_long_form_list_given_as_one_string_is_split)
{
    struct config *cfg =
        parse_ok(ROUTE("    predicates:\n"
                       "      - {name: Method, args: {methods: 'GET, POST'}}\n"
                       "      - {name: Path, args: {patterns: '/a/**,/b/**'}}\n"
                       "      - {name: Host, args: {patterns: 'a.org,b.org'}}\n"
                       "      - name: RemoteAddr\n"
                       "        args: {sources: '10.0.0.0/8, ::1'}\n"
                       "      - name: XForwardedRemoteAddr\n"
                       "        args: {sources: '10.0.0.0/8,192.0.2.1'}\n"));
    const struct predicate *p = cfg->routes[0].predicates;

    cr_assert_eq(cfg->routes[0].npredicates, 5);
    cr_assert_eq(p[0].nvalues, 2);
    cr_assert_str_eq(p[0].values[1], "POST");
    cr_assert_eq(p[1].nvalues, 2);
    cr_assert_str_eq(p[1].values[0], "/a/**");
    cr_assert_str_eq(p[1].values[1], "/b/**");
    cr_assert_eq(p[2].nvalues, 2);
    cr_assert_str_eq(p[2].values[1], "b.org");
    cr_assert_eq(p[3].ncidrs, 2);
    cr_assert_eq(p[4].ncidrs, 2);
    config_unref(cfg);
}

/* gateway.yaml's shortcut keeps a response value's commas; override
 * comes by the long form. */
Test(load_routes, add_response_header_keeps_commas_and_takes_override_long)
{
    struct config *cfg = parse_ok(
        ROUTE("    filters:\n"
              "      - AddResponseHeader=Cache-Control, no-cache, no-store\n"
              "      - name: AddResponseHeader\n"
              "        args: {name: X-A, value: a, override: false}\n"));
    const struct filter *f = cfg->routes[0].filters;

    cr_assert_eq(cfg->routes[0].nfilters, 2);
    cr_assert_str_eq(f[0].value, "no-cache, no-store");
    cr_assert_not(f[0].keep_existing);
    cr_assert_str_eq(f[1].value, "a");
    cr_assert(f[1].keep_existing);
    config_unref(cfg);
}

Test(load_routes, an_empty_value_in_a_long_form_list_is_refused)
{
    assert_error(ROUTE("    predicates:\n"
                       "      - {name: Path, args: {patterns: '/a/**,'}}\n"),
                 "t.yaml:5:39: routes[0].predicates[0].args.patterns: Path: "
                 "an empty value in \"/a/**,\"");
}

Test(load_routes, a_variable_no_path_pattern_captures_is_refused)
{
    assert_error(ROUTE("    predicates: ['Path=/items/{id}']\n"
                       "    filters: ['SetPath=/v2/{idd}']\n"),
                 "t.yaml:5:15: routes[0].filters[0]: SetPath: no Path "
                 "pattern of the route captures {idd}, so it would always "
                 "be empty");
    assert_error(ROUTE("    predicates: ['Path=/items/{id}']\n"
                       "    filters: ['AddRequestHeader=X-Item, {idd}']\n"),
                 "t.yaml:5:15: routes[0].filters[0]: AddRequestHeader: no "
                 "Path pattern of the route captures {idd}, so it would "
                 "always be empty");
    assert_error(ROUTE("    filters: ['AddRequestParameter=item, {id}']\n"),
                 "t.yaml:4:15: routes[0].filters[0]: AddRequestParameter: "
                 "no Path pattern of the route captures {id}, so it would "
                 "always be empty");
}

Test(load_routes, a_variable_one_path_pattern_captures_loads)
{
    struct config *cfg = parse_ok(
        ROUTE("    predicates: ['Path=/items/{id}, /things/{id}/{part}']\n"
              "    filters:\n"
              "      - SetPath=/v2/{id}/{part}\n"
              "      - 'AddRequestHeader=X-Json, {\"a\": 1}'\n"
              "      - 'SetResponseHeader=X-Item, {id}'\n"));

    cr_assert_eq(cfg->routes[0].nfilters, 3);
    config_unref(cfg);
}

/* Response header values are literal (no {name} is expanded in them):
 * one that looks like a variable is no error. */
Test(load_routes, a_response_header_value_is_literal)
{
    struct config *cfg =
        parse_ok(ROUTE("    predicates: ['Path=/items']\n"
                       "    filters:\n"
                       "      - 'SetResponseHeader=Link, {next}'\n"
                       "      - 'AddResponseHeader=X-T, {x}'\n"));

    cr_assert_eq(cfg->routes[0].nfilters, 2);
    config_unref(cfg);
}

Test(load_routes, an_unclosed_brace_in_a_path_template_is_refused)
{
    assert_error(ROUTE("    predicates: ['Path=/items/{x}']\n"
                       "    filters: ['SetPath=/{x']\n"),
                 "t.yaml:5:15: routes[0].filters[0]: SetPath: template: '{' "
                 "does not open a {name} (a name of letters, digits, '_' and "
                 "'-', then '}')");
    assert_error(ROUTE("    filters: ['PrefixPath=/a{b']\n"),
                 "t.yaml:4:15: routes[0].filters[0]: PrefixPath: prefix: '{' "
                 "does not open a {name} (a name of letters, digits, '_' and "
                 "'-', then '}')");
}

Test(load_routes, a_request_filter_on_a_field_the_gateway_owns_is_refused)
{
    assert_error(ROUTE("    filters: ['SetRequestHeader=Transfer-Encoding, "
                       "chunked']\n"),
                 "t.yaml:4:15: routes[0].filters[0]: Transfer-Encoding "
                 "frames the request or governs its connection: the gateway "
                 "does not forward it, and a request filter may not set it");
    assert_error(ROUTE("    filters: ['AddRequestHeader=Content-Length, 5']\n"),
                 "t.yaml:4:15: routes[0].filters[0]: Content-Length is set "
                 "by the gateway when it forwards the request: a request "
                 "filter may not set it");
    assert_error(ROUTE("    filters: ['AddRequestHeader=X-Forwarded-For, "
                       "6.6.6.6']\n"),
                 "t.yaml:4:15: routes[0].filters[0]: X-Forwarded-For is set "
                 "by the gateway when it forwards the request: a request "
                 "filter may not set it");
    assert_error(ROUTE("    filters: ['MapRequestHeader=X-A, x_forwarded_"
                       "host']\n"),
                 "t.yaml:4:15: routes[0].filters[0]: x_forwarded_host is set "
                 "by the gateway when it forwards the request: a request "
                 "filter may not set it");
    assert_error(ROUTE("    filters: ['SetRequestHeader=Host, x']\n"),
                 "t.yaml:4:15: routes[0].filters[0]: Host is the gateway's "
                 "to set: use SetRequestHostHeader to send another, or "
                 "PreserveHostHeader to keep the client's");
}

Test(load_routes, a_request_filter_on_another_field_loads)
{
    struct config *cfg =
        parse_ok(ROUTE("    filters:\n"
                       "      - 'SetRequestHeader=X-Forwarded-Port, 443'\n"
                       "      - 'MapRequestHeader=Host, X-Original-Host'\n"
                       "      - RemoveRequestHeader=Connection\n"
                       "      - SetRequestHostHeader=api.internal\n"));

    cr_assert_eq(cfg->routes[0].nfilters, 4);
    config_unref(cfg);
}

Test(load_routes, a_wrong_default_filter_is_refused_without_routes)
{
    assert_error("spring:\n"
                 "  cloud:\n"
                 "    gateway:\n"
                 "      default-filters: [Bogus=1]\n"
                 "      routes: []\n",
                 "t.yaml:4:25: spring.cloud.gateway.default-filters[0]: "
                 "unknown filter \"Bogus\" (known: StripPrefix, PrefixPath, "
                 "RewritePath, SetPath, AddRequestHeader, SetRequestHeader, "
                 "RemoveRequestHeader, AddResponseHeader, SetResponseHeader, "
                 "RemoveResponseHeader, PreserveHostHeader, "
                 "AddRequestParameter, RemoveRequestParameter, "
                 "MapRequestHeader, SetRequestHostHeader, "
                 "DedupeResponseHeader, RewriteResponseHeader, "
                 "RewriteLocationResponseHeader, SecureHeaders, SetStatus, "
                 "RedirectTo, RequestSize, RequestHeaderSize, Retry, "
                 "RequestRateLimiter)");
}

Test(load_routes, right_default_filters_load_without_routes)
{
    struct config *cfg = parse_ok("spring:\n"
                                  "  cloud:\n"
                                  "    gateway:\n"
                                  "      default-filters:\n"
                                  "        - AddResponseHeader=X-Gw, sluice\n"
                                  "        - name: RequestRateLimiter\n"
                                  "          args:\n"
                                  "            redis-rate-limiter."
                                  "replenishRate: 10\n"
                                  "      routes: []\n");

    cr_assert_eq(cfg->nroutes, 0);
    config_unref(cfg);
}
