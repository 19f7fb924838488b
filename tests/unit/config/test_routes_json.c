#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "routes_json.h"

static const char yaml[] =
    "redis: { url: 'redis://127.0.0.1:6379' }\n"
    "limiters:\n"
    "  per-ip: { algorithm: gcra, rate: 5/s, burst: 10, lease: 4 }\n"
    "  smooth: { algorithm: leaky_bucket, rate: 10/s, burst: 50,"
    " mode: delay, max_delay: 2s }\n"
    "routes:\n"
    "  - id: api\n"
    "    uri: http://127.0.0.1:9000/base\n"
    "    connect_timeout: 2s\n"
    "    predicates:\n"
    "      - Path=/api/**, /v1/**\n"
    "      - name: Header\n"
    "        args: { header: X-Version, regexp: 'v[0-9]+' }\n"
    "      - RemoteAddr=10.0.0.0/8\n"
    "    filters:\n"
    "      - StripPrefix=1\n"
    "      - AddRequestHeader=X-Gateway, sl\"uice\n"
    "      - name: RequestRateLimiter\n"
    "        args:\n"
    "          tiers:\n"
    "            - when: { role: admin }\n"
    "              limiter: none\n"
    "            - key: ip\n"
    "              limiter: per-ip\n"
    "          on_redis_error: deny\n"
    "  - id: slow\n"
    "    uri: http://127.0.0.1:9001\n"
    "    filters:\n"
    "      - name: RequestRateLimiter\n"
    "        args: { key: route, limiter: smooth, backend: local }\n";

static char *json;

static void
setup(void)
{
    struct config_errors errs;
    struct config *cfg;

    config_errors_init(&errs);
    cfg = config_parse(yaml, strlen(yaml), "t.yaml", &errs);
    cr_assert_not_null(cfg, "%s", errs.n > 0 ? errs.v[0] : "?");
    config_errors_deinit(&errs);
    json = config_routes_json(cfg);
    config_unref(cfg);
}

static void
teardown(void)
{
    free(json);
}

TestSuite(routes_json, .init = setup, .fini = teardown);

static void
assert_has(const char *want)
{
    cr_assert(strstr(json, want) != NULL, "no %s in %s", want, json);
}

Test(routes_json, routes_come_in_file_order_with_upstream_and_timeouts)
{
    const char *api = strstr(json, "{\"id\":\"api\"");
    const char *slow = strstr(json, "{\"id\":\"slow\"");

    cr_assert(api != NULL && slow != NULL && api < slow, "%s", json);
    assert_has("\"uri\":\"http://127.0.0.1:9000/base\","
               "\"connect_timeout_ms\":2000,\"response_timeout_ms\":60000");
    cr_assert_eq(json[strlen(json) - 1], '\n');
}

Test(routes_json, predicates_show_their_arguments)
{
    assert_has("{\"name\":\"Path\",\"args\":[\"/api/**\",\"/v1/**\"]}");
    assert_has("{\"name\":\"Header\",\"args\":[\"X-Version\",\"v[0-9]+\"]}");
    assert_has("{\"name\":\"RemoteAddr\",\"args\":[\"10.0.0.0/8\"]}");
}

Test(routes_json, filter_values_are_escaped_as_json)
{
    assert_has("{\"name\":\"StripPrefix\",\"args\":[\"1\"]}");
    assert_has("{\"name\":\"AddRequestHeader\",\"args\":[\"X-Gateway\","
               "\"sl\\\"uice\"]}");
}

Test(routes_json, rate_limiters_show_tiers_backend_and_failure_policy)
{
    assert_has("\"tiers\":[{\"role\":\"admin\",\"key\":");
    assert_has("\"limiter\":\"none\"}");
    assert_has("\"limiter\":\"per-ip\"}");
    assert_has("\"backend\":\"redis\",\"on_redis_error\":\"deny\"");
    assert_has("\"backend\":\"local\",\"on_redis_error\":\"local\"");
}

Test(routes_json, limiters_show_algorithm_mode_and_rules)
{
    assert_has("{\"name\":\"per-ip\",\"algorithm\":\"gcra\"");
    assert_has("\"mode\":\"delay\",\"max_delay_ms\":2000");
    assert_has("{\"name\":\"smooth\",\"algorithm\":\"leaky_bucket\"");
    /* The lease, where there is one. */
    assert_has("\"mode\":\"deny\",\"lease\":4,\"rules\":");
    cr_assert_null(strstr(strstr(json, "\"lease\":") + 1, "\"lease\":"),
                   "smooth has no lease: %s", json);
}

/* The limiters built from redis-rate-limiter follow those of limiters:. */
Test(routes_json_scg, derived_limiters_are_listed_after_the_named_ones)
{
    static const char text[] =
        "limiters:\n"
        "  per-ip: { algorithm: gcra, rate: 5/s, burst: 10 }\n"
        "routes:\n"
        "  - id: a\n"
        "    uri: http://127.0.0.1:9000\n"
        "    filters:\n"
        "      - name: RequestRateLimiter\n"
        "        args: { key: ip, limiter: per-ip }\n"
        "      - name: RequestRateLimiter\n"
        "        args:\n"
        "          redis-rate-limiter.replenishRate: 10\n"
        "          redis-rate-limiter.burstCapacity: 20\n";
    struct config_errors errs;
    struct config *cfg;
    char *out;
    const char *named;
    const char *derived;

    config_errors_init(&errs);
    cfg = config_parse(text, strlen(text), "t.yaml", &errs);
    cr_assert_not_null(cfg, "%s", errs.n > 0 ? errs.v[0] : "?");
    config_errors_deinit(&errs);
    out = config_routes_json(cfg);
    named = strstr(out, "],\"limiters\":[{\"name\":\"per-ip\"");
    derived = strstr(out, "]},{\"name\":\"scg.a.1\",\"algorithm\":"
                          "\"token_bucket\"");
    cr_assert(named != NULL && derived != NULL && named < derived, "%s", out);
    cr_assert(strstr(derived, "\"rules\":[{\"limit\":10,\"window_ms\":1000,"
                              "\"burst\":20}]}]}\n") != NULL,
              "%s", out);
    free(out);
    config_unref(cfg);
}
