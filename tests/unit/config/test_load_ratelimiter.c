/*
 * RequestRateLimiter's args in sluice's and Spring's spellings: a
 * setting said twice (two spellings of one key) is refused like any
 * repeated key, a filter's own word wins over the file's defaults, and
 * an error names the key as written.
 */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "config.h"
#define CONFIG_TEST_FILE "app.yml"
#include "config_test.h"

/* A Spring Cloud Gateway file whose one route has a RequestRateLimiter
 * with 'args' (lines from 9 on, indented by 16). */
#define SCG_FILE(defaults, args)                                               \
    "spring:\n"                                                                \
    "  cloud:\n"                                                               \
    "    gateway:\n" defaults "      routes:\n"                                \
    "        - id: a\n"                                                        \
    "          uri: http://127.0.0.1:9000\n"                                   \
    "          filters:\n"                                                     \
    "            - name: RequestRateLimiter\n"                                 \
    "              args:\n" args

#define DENY_EMPTY                                                             \
    "      filter:\n"                                                          \
    "        request-rate-limiter:\n"                                          \
    "          deny-empty-key: true\n"

#define RATE "                redis-rate-limiter.replenishRate: 10\n"

Test(load_ratelimiter, a_filters_own_empty_key_wins_over_the_default)
{
    struct config *cfg = parse_ok(
        SCG_FILE(DENY_EMPTY, RATE "                empty_key: allow\n"));

    cr_assert(cfg->routes[0].rate_limiters[0]->empty_key_allow);
    config_unref(cfg);
    cfg = parse_ok(
        SCG_FILE(DENY_EMPTY, RATE "                deny-empty-key: false\n"));
    cr_assert(cfg->routes[0].rate_limiters[0]->empty_key_allow);
    config_unref(cfg);
    cfg = parse_ok(SCG_FILE(DENY_EMPTY, RATE));
    cr_assert_not(cfg->routes[0].rate_limiters[0]->empty_key_allow,
                  "without a word of its own, the default holds");
    config_unref(cfg);
}

Test(load_ratelimiter, status_and_status_code_are_one_key)
{
    assert_error(
        SCG_FILE("", RATE "                status: 503\n"
                          "                status-code: 429\n"),
        "app.yml:12:17: spring.cloud.gateway.routes[0].filters[0].args: "
        "duplicate key "
        "\"status-code\" (the same as \"status\" at line 11)");
    assert_error(
        SCG_FILE("", RATE "                deny-empty-key: true\n"
                          "                empty_key: allow\n"),
        "app.yml:12:17: spring.cloud.gateway.routes[0].filters[0].args: "
        "duplicate key "
        "\"empty_key\" (the same as \"deny-empty-key\" at line 11)");
}

Test(load_ratelimiter, both_spellings_of_a_redis_rate_limiter_key_are_refused)
{
    assert_error(
        SCG_FILE("", RATE "                redis-rate-limiter.replenish-rate: "
                          "1000\n"),
        "app.yml:11:17: spring.cloud.gateway.routes[0].filters[0].args: "
        "duplicate key \"redis-rate-limiter.replenish-rate\" (the same as "
        "\"redis-rate-limiter.replenishRate\" at line 10)");
    assert_error(
        SCG_FILE("", "                redis-rate-limiter:\n"
                     "                  burst-capacity: 5\n"
                     "                  replenishRate: 1\n"
                     "                  burstCapacity: 50\n"),
        "app.yml:13:19: spring.cloud.gateway.routes[0].filters[0].args."
        "redis-rate-limiter: duplicate key \"burstCapacity\" (the "
        "same as \"burst-capacity\" at line 11)");
}

Test(load_ratelimiter, a_dotted_kebab_key_is_named_as_written)
{
    assert_error(
        SCG_FILE("", "                redis-rate-limiter.replenish-"
                     "rate: ten\n"),
        "app.yml:10:52: spring.cloud.gateway.routes[0].filters[0].args."
        "redis-rate-limiter.replenish-rate: bad integer \"ten\" "
        "(expected a whole number of at least 1)");
}

Test(load_ratelimiter, a_key_resolver_named_twice_is_refused)
{
    assert_error("scg:\n"
                 "  key_resolvers:\n"
                 "    apiKey: header:X-Api-Key\n"
                 "    apiKey: ip\n" SCG_FILE("", RATE),
                 "app.yml:4:5: scg.key_resolvers: duplicate key \"apiKey\" "
                 "(first at line 3)");
}

/* The name is read as the shortcut form reads every name: blanks cut. */
Test(load_ratelimiter, a_shortcut_with_a_leading_blank_is_known)
{
    assert_error("routes:\n"
                 "  - id: a\n"
                 "    uri: http://x\n"
                 "    filters: [' RequestRateLimiter=x']\n",
                 "app.yml:4:15: routes[0].filters[0]: RequestRateLimiter has "
                 "no shortcut form: write \"name: RequestRateLimiter\" with "
                 "\"args: {key: ip, limiter: NAME}\"");
}
