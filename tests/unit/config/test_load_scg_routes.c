/*
 * The predicates and filters that Spring Cloud Gateway users rely on, as
 * gateway.yaml spells them: both forms load, and a bad argument names its
 * file, line, column and key.
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

Test(scg_routes, time_predicates_load_in_both_forms)
{
    struct config *cfg = parse_ok(
        ROUTE("    predicates:\n"
              "      - After=2017-01-20T17:42:47.789-07:00[America/Denver]\n"
              "      - name: Between\n"
              "        args:\n"
              "          datetime1: 2017-01-20T17:42:47.789-07:00\n"
              "          datetime2: 2017-01-21T17:42:47.789-07:00\n"));

    cr_assert_eq(cfg->routes[0].npredicates, 2);
    cr_assert_eq(cfg->routes[0].predicates[0].kind, PREDICATE_AFTER);
    cr_assert_eq(cfg->routes[0].predicates[0].t0, 1484959367789LL);
    cr_assert_eq(cfg->routes[0].predicates[1].t1, 1484959367789LL + 86400000);
    config_unref(cfg);
}

Test(scg_routes, a_bad_date_time_names_its_position)
{
    assert_error(ROUTE("    predicates:\n"
                       "      - Before=tomorrow\n"),
                 "t.yaml:5:9: routes[0].predicates[0]: Before: datetime: "
                 "\"tomorrow\" is not a date-time like "
                 "2017-01-20T17:42:47.789-07:00[America/Denver]");
}

Test(scg_routes, weight_groups_are_weighed_across_routes)
{
    struct config *cfg = parse_ok("routes:\n"
                                  "  - id: high\n"
                                  "    uri: http://x\n"
                                  "    predicates: [\"Weight=group1, 8\"]\n"
                                  "  - id: low\n"
                                  "    uri: http://y\n"
                                  "    predicates:\n"
                                  "      - name: Weight\n"
                                  "        args: {group: group1, weight: 2}\n");

    cr_assert_eq(cfg->routes[0].predicates[0].total, 10);
    cr_assert_eq(cfg->routes[1].predicates[0].lo, 8);
    cr_assert_eq(cfg->routes[1].predicates[0].hi, 10);
    config_unref(cfg);
}

Test(scg_routes, cookie_and_xforwarded_remote_addr_load)
{
    struct config *cfg =
        parse_ok(ROUTE("    predicates:\n"
                       "      - Cookie=chocolate, ch.p\n"
                       "      - XForwardedRemoteAddr=10.0.0.0/8, "
                       "2a01:111:2050::/44\n"));

    cr_assert_eq(cfg->routes[0].predicates[0].kind, PREDICATE_COOKIE);
    cr_assert_eq(cfg->routes[0].predicates[1].ncidrs, 2);
    config_unref(cfg);
    assert_error(ROUTE("    predicates:\n"
                       "      - name: Weight\n"
                       "        args: {group: g, weight: lots}\n"),
                 "t.yaml:5:9: routes[0].predicates[0]: Weight: weight must "
                 "be an integer from 0 to 1000000, got \"lots\"");
}

Test(scg_routes, retry_long_form_reads_nested_backoff_and_lists)
{
    struct config *cfg =
        parse_ok(ROUTE("    filters:\n"
                       "      - name: Retry\n"
                       "        args:\n"
                       "          retries: 3\n"
                       "          statuses: [BAD_GATEWAY, 503]\n"
                       "          methods: GET,POST\n"
                       "          backoff:\n"
                       "            firstBackoff: 10ms\n"
                       "            maxBackoff: 50ms\n"
                       "            factor: 2\n"
                       "            basedOnPreviousValue: false\n"
                       "          timeout: 100ms\n"));
    const struct retry_conf *rc = cfg->routes[0].filters[0].retry;

    cr_assert_not_null(rc);
    cr_assert_eq(rc->retries, 3);
    cr_assert_eq(rc->first_backoff_ms, 10);
    cr_assert_eq(rc->max_backoff_ms, 50);
    cr_assert_eq(rc->factor, 2);
    cr_assert_not(rc->based_on_previous);
    cr_assert_eq(rc->timeout_ms, 100);
    cr_assert(rc->methods & filter_method_bit("POST"));
    cr_assert(rc->statuses[(502 - 100) / 64] >> ((502 - 100) % 64) & 1);
    cr_assert(rc->statuses[(503 - 100) / 64] >> ((503 - 100) % 64) & 1);
    config_unref(cfg);
}

Test(scg_routes, retry_shortcut_and_errors_name_their_key)
{
    struct config *cfg = parse_ok(
        ROUTE("    filters:\n"
              "      - Retry=3,INTERNAL_SERVER_ERROR,GET,10ms,50ms,2,false\n"));

    cr_assert_eq(cfg->routes[0].filters[0].retry->first_backoff_ms, 10);
    config_unref(cfg);
    assert_error(ROUTE("    filters:\n"
                       "      - name: Retry\n"
                       "        args:\n"
                       "          backoff:\n"
                       "            firstBackof: 10ms\n"),
                 "t.yaml:8:13: routes[0].filters[0].args.backoff: unknown "
                 "key \"firstBackof\" (did you mean \"firstBackoff\"?)");
    assert_error(ROUTE("    filters:\n"
                       "      - name: Retry\n"
                       "        args: {retries: 30}\n"),
                 "t.yaml:5:9: routes[0].filters[0]: Retry: retries must be an "
                 "integer from 1 to 10, got \"30\"");
}

Test(scg_routes, rewrite_location_shortcut_may_leave_arguments_empty)
{
    struct config *cfg =
        parse_ok(ROUTE("    filters:\n"
                       "      - RewriteLocationResponseHeader=AS_IN_REQUEST, "
                       "Location, ,\n"
                       "      - name: RewriteLocationResponseHeader\n"
                       "        args: {hostValue: api.example.com}\n"));
    const struct filter *f = &cfg->routes[0].filters[0];

    cr_assert_eq(f->kind, FILTER_REWRITE_LOCATION_RESPONSE_HEADER);
    cr_assert_str_eq(f->name, "Location");
    cr_assert_null(f->name2);
    cr_assert_str_eq(cfg->routes[0].filters[1].name2, "api.example.com");
    config_unref(cfg);
}

Test(scg_routes, every_new_filter_loads_in_shortcut_form)
{
    struct config *cfg = parse_ok(ROUTE(
        "    filters:\n"
        "      - AddRequestParameter=red, blue\n"
        "      - RemoveRequestParameter=red\n"
        "      - MapRequestHeader=Blue, X-Request-Red\n"
        "      - SetRequestHostHeader=example.org\n"
        "      - DedupeResponseHeader=Access-Control-Allow-Origin, "
        "RETAIN_UNIQUE\n"
        "      - RewriteResponseHeader=X-Response-Red, password=[^&]+, "
        "password=***\n"
        "      - SecureHeaders\n"
        "      - SetStatus=UNAUTHORIZED\n"
        "      - RedirectTo=302, https://acme.org, true\n"
        "      - RequestSize=5000000\n"
        "      - RequestHeaderSize=1000B\n"
        "      - name: SecureHeaders\n"
        "        args:\n"
        "          disable: x-frame-options,strict-transport-security\n"));

    cr_assert_eq(cfg->routes[0].nfilters, 12);
    cr_assert_eq(cfg->routes[0].filters[7].status, 401);
    cr_assert_eq(cfg->routes[0].filters[10].max_size, 1000);
    cr_assert_eq(cfg->routes[0].filters[11].secure,
                 0xff & ~(1u << 1) & ~(1u << 2));
    config_unref(cfg);
    assert_error(ROUTE("    filters:\n"
                       "      - RedirectTo=200, https://acme.org\n"),
                 "t.yaml:5:9: routes[0].filters[0]: RedirectTo: status must "
                 "be a 3xx redirect code, got \"200\"");
}

Test(scg_routes, map_request_header_onto_an_identity_field_is_an_error)
{
    assert_error(ROUTE("    filters: ['MapRequestHeader=X-Name, x-user-id']\n"),
                 "t.yaml:4:15: routes[0].filters[0]: x-user-id is "
                 "identity.user_header: the gateway writes it from the "
                 "identity it decided, so this filter would do nothing");
}
