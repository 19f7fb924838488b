/*
 * What `sluice --check` prints of a loaded config: routes in the order
 * they are tried, each RequestRateLimiter's limiter, Redis, the listener
 * and the ignored keys.
 */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "describe.h"

static char *
describe(const char *yaml)
{
    struct config_errors e;
    struct config *cfg;
    char *text;

    config_errors_init(&e);
    cfg = config_parse(yaml, strlen(yaml), "t.yaml", &e);
    cr_assert_not_null(cfg, "%s", e.n > 0 ? e.v[0] : "?");
    config_errors_deinit(&e);
    text = config_describe(cfg);
    config_unref(cfg);
    return text;
}

static void
assert_lines(const char *text, const char *const *want, size_t n)
{
    const char *prev = text;

    for (size_t i = 0; i < n; i++) {
        const char *at = strstr(prev, want[i]);

        cr_assert(at != NULL, "no (or out of order) \"%s\" in:\n%s", want[i],
                  text);
        prev = at;
    }
}

Test(describe, native_file_with_a_named_limiter)
{
    char *text = describe("server: { listen: 127.0.0.1:8081 }\n"
                          "limiters:\n"
                          "  per-ip: { algorithm: fixed_window, limit: 5, "
                          "window: 1m }\n"
                          "routes:\n"
                          "  - id: a\n"
                          "    uri: http://h:81/base\n"
                          "    predicates: [Path=/a/**]\n"
                          "    filters:\n"
                          "      - StripPrefix=1\n"
                          "      - name: RequestRateLimiter\n"
                          "        args: { key: ip, limiter: per-ip, "
                          "empty_key: allow }\n");
    const char *want[] = {
        "gateway.yaml shape, 1 route, in the order they are tried:\n",
        "  route a: order 0, uri http://h:81/base\n",
        "    predicate {\"name\":\"Path\",\"args\":[\"/a/**\"]}\n",
        "    filter {\"name\":\"StripPrefix\",\"args\":[\"1\"]}\n",
        "    filter RequestRateLimiter\n",
        "    limiter per-ip: fixed_window 5 per 60000 ms (from limiters:); "
        "key ip\n",
        "      cost 1, scope a, backend local, on_redis_error local, headers "
        "both, refusal 429, no key allowed\n",
        "listen: 127.0.0.1:8081\n",
        "ignored keys: 0\n",
    };

    assert_lines(text, want, sizeof(want) / sizeof(want[0]));
    free(text);
}

/* A delay-mode limiter was shown as if it refused, and a dry run as if
 * it limited. */
Test(describe, delay_mode_and_dry_run_are_shown)
{
    char *text = describe("limiters:\n"
                          "  smooth: { algorithm: leaky_bucket, rate: 10/s, "
                          "burst: 50, mode: delay, max_delay: 2s }\n"
                          "routes:\n"
                          "  - id: a\n"
                          "    uri: http://h\n"
                          "    filters:\n"
                          "      - name: RequestRateLimiter\n"
                          "        args: { key: ip, limiter: smooth, "
                          "dry_run: true }\n");
    const char *want[] = {
        "    limiter smooth: leaky_bucket 10 per 1000 ms, burst 50, delay "
        "mode up to 2000 ms (from limiters:); key ip\n",
        "headers both, refusal 429, no key refused (403), dry run (counts, "
        "never refuses)\n",
    };

    assert_lines(text, want, sizeof(want) / sizeof(want[0]));
    free(text);
}

Test(describe, spring_file_with_a_limiter_that_refuses_all)
{
    char *text =
        describe("spring:\n"
                 "  main:\n"
                 "    banner-mode: off\n"
                 "  redis:\n"
                 "    host: r\n"
                 "  cloud:\n"
                 "    gateway:\n"
                 "      routes:\n"
                 "        - id: shut\n"
                 "          uri: http://h\n"
                 "          filters:\n"
                 "            - name: RequestRateLimiter\n"
                 "              args:\n"
                 "                redis-rate-limiter.replenishRate: 2\n"
                 "                redis-rate-limiter.burstCapacity: 0\n");
    const char *want[] = {
        "Spring Cloud Gateway shape, 1 route",
        "  route shut: order 0, uri http://h\n",
        "    limiter scg.shut: token_bucket 2 per 1000 ms, burst 0 (refuses "
        "every request) (from redis-rate-limiter); key user\n",
        "headers scg, refusal 429, no key refused (403)\n",
        "redis: r:6379, db 0, timeout 50 ms\n",
        "listen: 0.0.0.0:8080\n",
        "ignored keys: 1\n",
        "  t.yaml:3:18: spring.main.banner-mode: ignored",
    };

    assert_lines(text, want, sizeof(want) / sizeof(want[0]));
    free(text);
}

Test(describe, spring_file_with_a_cluster)
{
    char *text = describe("spring:\n"
                          "  redis:\n"
                          "    cluster:\n"
                          "      nodes: a:7000,b:7001\n"
                          "  cloud:\n"
                          "    gateway:\n"
                          "      routes:\n"
                          "        - id: a\n"
                          "          uri: http://h\n");
    const char *want[] = {"redis: cluster, 2 seed nodes, timeout 50 ms\n"};

    assert_lines(text, want, 1);
    free(text);
}

/* https routes say so (with verify: false when it is off), and a gateway
 * with only the TLS listener says "listen: off" rather than print a null
 * host. */
Test(describe, https_routes_and_the_tls_listener)
{
    char *text = describe("server:\n"
                          "  listen: off\n"
                          "  tls: { listen: 127.0.0.1:8443, cert_file: c.pem, "
                          "key_file: k.pem }\n"
                          "routes:\n"
                          "  - id: a\n"
                          "    uri: https://pay.internal/v1\n"
                          "  - id: b\n"
                          "    uri: https://test.internal\n"
                          "    tls: { verify: false }\n");
    const char *want[] = {
        "  route a: order 0, uri https://pay.internal/v1\n",
        "  route b: order 0, uri https://test.internal, tls verify: false\n",
        "listen: off\n",
        "tls listen: 127.0.0.1:8443\n",
    };

    assert_lines(text, want, sizeof(want) / sizeof(want[0]));
    free(text);
}

/* A tier of limiter none may have no key: said so, never printf'ed from
 * NULL. */
Test(describe, a_tier_without_a_key)
{
    char *text = describe("routes:\n"
                          "  - id: a\n"
                          "    uri: http://h\n"
                          "    filters:\n"
                          "      - name: RequestRateLimiter\n"
                          "        args: { limiter: none }\n");
    const char *want[] = {"    limiter none; no key\n"};

    assert_lines(text, want, 1);
    free(text);
}
