/*
 * The predicates and filters that Spring Cloud Gateway users rely on, as
 * gateway.yaml spells them: both forms load, and a bad argument names its
 * file, line, column and key.
 */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "filter.h"
#include "predicate.h"

static struct config *
parse(const char *yaml, struct config_errors *e)
{
    config_errors_init(e);
    return config_parse(yaml, strlen(yaml), "t.yaml", e);
}

static void
assert_error(const char *yaml, const char *want)
{
    struct config_errors e;
    struct config *cfg = parse(yaml, &e);

    cr_assert_null(cfg, "accepted: %s", yaml);
    cr_assert_eq(e.n, 1, "%zu errors, first: %s", e.n, e.n > 0 ? e.v[0] : "");
    cr_assert_str_eq(e.v[0], want);
    config_errors_deinit(&e);
}

static struct config *
parse_ok(const char *yaml)
{
    struct config_errors e;
    struct config *cfg = parse(yaml, &e);

    cr_assert_not_null(cfg, "refused: %s", e.n > 0 ? e.v[0] : "(no error)");
    config_errors_deinit(&e);
    return cfg;
}

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
