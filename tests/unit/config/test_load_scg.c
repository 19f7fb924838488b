/*
 * A Spring Cloud Gateway application.yml, read as it is: the files under
 * tests/scg/ load, Spring's keys map onto sluice's config, the keys with
 * no meaning here are warnings naming them, and RequestRateLimiter's
 * redis-rate-limiter args derive a token_bucket limiter.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#define CONFIG_TEST_FILE "app.yml"
#include "config_test.h"
#include "filter.h"
#include "limit.h"
#include "predicate.h"

static struct config *
load_file(const char *name)
{
    char path[512];
    struct config_errors e;
    struct config *cfg;

    snprintf(path, sizeof(path), "%s/scg/%s", SLUICE_TESTS_DIR, name);
    config_errors_init(&e);
    cfg = config_load(path, &e);
    cr_assert_not_null(cfg, "%s refused: %s", name,
                       e.n > 0 ? e.v[0] : "(no error)");
    config_errors_deinit(&e);
    return cfg;
}

/* The one route's first rate limiter of 'cfg'. */
static const struct rate_limit_conf *
rl0(const struct config *cfg, size_t route)
{
    cr_assert_gt(cfg->routes[route].nrate_limiters, 0);
    return cfg->routes[route].rate_limiters[0];
}

#define SCG_HEAD                                                               \
    "spring:\n"                                                                \
    "  cloud:\n"                                                               \
    "    gateway:\n"                                                           \
    "      routes:\n"

#define SCG_ROUTE(id, extra)                                                   \
    "        - id: " id "\n"                                                   \
    "          uri: http://127.0.0.1:9000\n" extra

#define RRL(args)                                                              \
    "          filters:\n"                                                     \
    "            - name: RequestRateLimiter\n"                                 \
    "              args:\n" args

Test(scg_shape, every_file_under_tests_scg_loads)
{
    static const char *const files[] = {"basic.yml", "sentinel.yml",
                                        "sluice_part.yml", "webflux.yml",
                                        "../../conf/application.yml"};

    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        struct config *cfg = load_file(files[i]);

        cr_assert(cfg->scg_shape, "%s", files[i]);
        cr_assert_gt(cfg->nroutes, 0, "%s", files[i]);
        config_unref(cfg);
    }
}

Test(scg_shape, basic_file_maps_redis_port_order_and_limits)
{
    struct config *cfg = load_file("basic.yml");
    const struct rate_limit_conf *rl;

    cr_assert(cfg->redis.enabled);
    cr_assert_str_eq(cfg->redis.host, "127.0.0.1");
    cr_assert_eq(cfg->redis.port, 6390);
    cr_assert_eq(cfg->redis.db, 2);
    cr_assert_eq(cfg->redis.timeout_ms, 250);
    cr_assert_str_eq(cfg->server.listen.host, "0.0.0.0");
    cr_assert_eq(cfg->server.listen.port, 8088);
    /* order -1 before order 5, whatever the file's order. */
    cr_assert_str_eq(cfg->routes[0].id, "basket");
    cr_assert_eq(cfg->routes[0].order, -1);
    cr_assert_str_eq(cfg->routes[1].id, "catalog");
    /* The uri's path is not prepended. */
    cr_assert_str_eq(cfg->routes[1].uri.base_path, "");
    rl = rl0(cfg, 0);
    cr_assert_eq(rl->cost, 2);
    cr_assert_eq(rl->headers, RL_HEADERS_SCG);
    cr_assert_not_null(rl->derived);
    cr_assert_eq(rl->derived->algorithm, LIMIT_TOKEN_BUCKET);
    cr_assert_eq(rl->derived->rules[0].limit, 2);
    cr_assert_eq(rl->derived->rules[0].window_ms, 1000);
    cr_assert_eq(rl->derived->rules[0].burst, 4);
    /* No key-resolver: SCG's default, the principal's name. */
    cr_assert_str_eq(rl->tiers[0].key.text, "user");
    cr_assert_str_eq(rl0(cfg, 1)->tiers[0].key.text, "ip");
    cr_assert(!rl->local, "Redis is configured: backend redis");
    config_unref(cfg);
}

Test(scg_shape, ignored_keys_are_warnings_naming_each_key_once)
{
    struct config *cfg = load_file("basic.yml");
    static const char *const want[] = {
        ":8:11: spring.application.name: ignored",
        ":18:20: spring.cloud.gateway.discovery.locator.enabled: ignored",
        ":48:19: spring.cloud.gateway.routes[1].metadata.team: ignored",
        ":54:18: management.endpoints.web.exposure.include: ignored",
        ":57:14: eureka.client.enabled: ignored",
        ":60:11: logging.level.root: ignored",
    };

    cr_assert_eq(cfg->warnings.n, 6);
    for (size_t i = 0; i < 6; i++) {
        cr_assert(strstr(cfg->warnings.v[i], want[i]) != NULL, "%s",
                  cfg->warnings.v[i]);
    }
    config_unref(cfg);
}

/* Spring Boot resolves a plain scalar by YAML 1.1 before binding a
 * property from its text: such a scalar means something else there. */
Test(scg_shape, plain_scalars_yaml_1_1_reads_otherwise_are_refused)
{
    static const struct {
        const char *value, *as;
    } cases[] = {
        {"yes", "the boolean true"},
        {"Off", "the boolean false"},
        {"0755", "an octal number"},
        {"0x1F", "a hexadecimal number"},
        {"0b101", "a binary number"},
        {"1:30", "a number in base 60"},
        {"1_000", "the number written without '+' and '_'"},
        {"+5", "the number written without '+' and '_'"},
        {"-0", "the number 0"},
        {"-_1", "a floating-point number"},
        {"1.50", "a floating-point number"},
        {"1e3", "a floating-point number"},
        {"08080", "a floating-point number"},
        {".5", "a floating-point number"},
        {"0.0001", "a floating-point number"},
        {"12345678.5", "a floating-point number"},
        {".inf", "a floating-point number"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char yaml[512], want[512];

        snprintf(yaml, sizeof(yaml),
                 SCG_HEAD SCG_ROUTE("a",
                                    "          filters:\n"
                                    "            - name: AddRequestHeader\n"
                                    "              args:\n"
                                    "                name: X-A\n"
                                    "                value: %s\n"),
                 cases[i].value);
        snprintf(want, sizeof(want),
                 "app.yml:11:24: spring.cloud.gateway.routes[0].filters[0]."
                 "args.value: Spring Boot reads the plain scalar %s as %s "
                 "(YAML 1.1); write what is meant, or quote it for the text",
                 cases[i].value, cases[i].as);
        assert_error(yaml, want);
    }
}

/* What YAML 1.1 reads as the same text, a quoted scalar, and sluice's
 * own sections load as written. */
Test(scg_shape, plain_scalars_spring_reads_as_written_load)
{
    static const char *const same[] = {
        "v1",   "1.5",   "2.0",    "-0.25", "0.001", "10", "-3", "0",
        "true", "false", "1.10.3", "a:b",   "1:60",  "_",  "__", "_1",
    };

    for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
        char yaml[512];
        struct config *cfg;

        snprintf(yaml, sizeof(yaml),
                 SCG_HEAD SCG_ROUTE("a",
                                    "          filters:\n"
                                    "            - name: AddRequestHeader\n"
                                    "              args: {name: X-A, "
                                    "value: %s}\n"),
                 same[i]);
        cfg = parse_ok(yaml);
        cr_assert_str_eq(cfg->routes[0].filters[0].value, same[i]);
        config_unref(cfg);
    }
    config_unref(parse_ok(
        "sluice:\n"
        "  log: { access: off }\n"
        "scg:\n"
        "  services: { orders: 'http://10.0.0.5:8081' }\n" SCG_HEAD SCG_ROUTE(
            "a", "          filters:\n"
                 "            - name: "
                 "AddRequestHeader\n"
                 "              args: {name: "
                 "X-A, value: '0755'}\n")));
}

/* Spring's per-route timeouts live in a route's metadata, in ms. */
Test(scg_shape, metadata_timeouts_are_the_routes_own)
{
    struct config *cfg = parse_ok(
        "spring:\n"
        "  cloud:\n"
        "    gateway:\n"
        "      httpclient: { connect-timeout: 1000, response-timeout: 5s }\n"
        "      routes:\n"
        "        - id: a\n"
        "          uri: http://127.0.0.1:9000\n"
        "          metadata:\n"
        "            response-timeout: 200\n"
        "            connect-timeout: 300\n"
        "            team: payments\n"
        "        - id: b\n"
        "          uri: http://127.0.0.1:9000\n");

    cr_assert_eq(cfg->routes[0].response_timeout_ms, 200);
    cr_assert_eq(cfg->routes[0].connect_timeout_ms, 300);
    cr_assert_eq(cfg->routes[1].response_timeout_ms, 5000);
    cr_assert_eq(cfg->routes[1].connect_timeout_ms, 1000);
    cr_assert_eq(cfg->warnings.n, 1);
    cr_assert(strstr(cfg->warnings.v[0], "routes[0].metadata.team: ignored") !=
                  NULL,
              "%s", cfg->warnings.v[0]);
    config_unref(cfg);
    assert_error(SCG_HEAD SCG_ROUTE("a", "          metadata:\n"
                                         "            response-timeout: -1\n"),
                 "app.yml:8:31: spring.cloud.gateway.routes[0].metadata."
                 "response-timeout: a negative value turns Spring's timeout "
                 "off for the route; sluice has no such setting: give "
                 "milliseconds");
    assert_error(SCG_HEAD SCG_ROUTE("a", "          metadata:\n"
                                         "            connect-timeout: '2s'\n"),
                 "app.yml:8:30: spring.cloud.gateway.routes[0].metadata."
                 "connect-timeout: Spring reads a number of milliseconds here "
                 "and ignores a string: write it unquoted");
}

Test(scg_shape, sentinel_file_maps_spring_data_redis_and_the_sub_second_rate)
{
    struct config *cfg = load_file("sentinel.yml");
    const struct rate_limit_conf *rl = rl0(cfg, 0);

    cr_assert_str_eq(cfg->redis.sentinel_master, "edge-primary");
    cr_assert_eq(cfg->redis.nsentinels, 3);
    cr_assert_str_eq(cfg->redis.sentinels[2].host, "10.0.0.7");
    cr_assert_eq(cfg->redis.sentinels[2].port, 26380);
    cr_assert_null(cfg->redis.host);
    cr_assert_str_eq(cfg->redis.password, "s3cret");
    cr_assert_eq(cfg->redis.db, 1);
    cr_assert_eq(cfg->redis.timeout_ms, 2000);
    /* One request a minute: 1 token/s, 60 a request, a bucket of 60. */
    cr_assert_eq(rl->cost, 60);
    cr_assert_eq(rl->derived->rules[0].limit, 1);
    cr_assert_eq(rl->derived->rules[0].burst, 60);
    cr_assert_str_eq(rl->tiers[0].key.text, "query:user");
    /* spring.cloud.gateway.filter.request-rate-limiter.deny-empty-key */
    cr_assert(rl->empty_key_allow);
    cr_assert_str_eq(cfg->routes[0].uri.base_path, "");
    config_unref(cfg);
}

/*
 * Spring's order: the i-th filter of default-filters and of a route's own
 * list both have the order i + 1, RequestRateLimiter too, the defaults
 * first among equals. The default AddRequestHeader and limiter are at 0
 * and 1, a route's own limiter at 0: it comes before the default one.
 */
Test(scg_shape, default_filters_take_springs_order_with_a_routes_limiters)
{
    struct config *cfg = load_file("sluice_part.yml");
    const struct route *r = cfg->routes;

    cr_assert_eq(cfg->nroutes, 3);
    for (size_t i = 0; i < cfg->nroutes; i++) {
        cr_assert_eq(r[i].nfilters, 1, "%s", r[i].id);
        cr_assert_eq(r[i].filters[0].kind, FILTER_ADD_REQUEST_HEADER);
        cr_assert_str_eq(r[i].filters[0].name, "X-Via");
    }
    cr_assert_eq(r[0].nrate_limiters, 1);
    cr_assert_str_eq(r[0].rate_limiters[0]->tiers[0].key.text, "ip");
    cr_assert_eq(r[1].nrate_limiters, 2);
    cr_assert_str_eq(r[1].rate_limiters[0]->tiers[0].key.text,
                     "header:x-api-key");
    cr_assert_str_eq(r[1].rate_limiters[1]->tiers[0].key.text, "ip");
    cr_assert_eq(r[1].rate_limiters[1]->derived->rules[0].limit, 100);
    cr_assert_str_eq(r[1].rate_limiters[0]->derived->name, "scg.partners");
    cr_assert_str_eq(r[1].rate_limiters[1]->derived->name, "scg.partners.1");
    cr_assert(r[2].rate_limiters[0]->derived->refuse_all);
    cr_assert_str_eq(r[2].rate_limiters[1]->tiers[0].key.text, "ip");
    config_unref(cfg);
}

/* A default filter after a route's own limiter, and one before it: the
 * limiter holds its place in the count. */
Test(scg_shape, a_limiter_holds_its_place_among_the_filters)
{
    struct config *cfg =
        parse_ok("spring:\n"
                 "  cloud:\n"
                 "    gateway:\n"
                 "      default-filters:\n"
                 "        - AddRequestHeader=X-D, 1\n"
                 "        - PrefixPath=/api\n"
                 "      routes:\n"
                 "        - id: a\n"
                 "          uri: http://127.0.0.1:9000\n"
                 "          filters:\n"
                 "            - name: RequestRateLimiter\n"
                 "              args: {redis-rate-limiter.replenishRate: 10}\n"
                 "            - StripPrefix=1\n");
    const struct route *a = &cfg->routes[0];

    /* Spring: AddRequestHeader (1), the limiter (1), PrefixPath (2),
     * StripPrefix (2): /foo/bar goes upstream as /foo/bar. */
    cr_assert_eq(a->nfilters, 3);
    cr_assert_eq(a->filters[0].kind, FILTER_ADD_REQUEST_HEADER);
    cr_assert_eq(a->filters[1].kind, FILTER_PREFIX_PATH);
    cr_assert_eq(a->filters[2].kind, FILTER_STRIP_PREFIX);
    config_unref(cfg);
}

Test(scg_shape, sluice_part_and_key_resolvers_table)
{
    struct config *cfg = load_file("sluice_part.yml");
    const struct rate_limit_conf *partners = cfg->routes[1].rate_limiters[0];
    const struct rate_limit_conf *closed = cfg->routes[2].rate_limiters[0];

    cr_assert_str_eq(cfg->identity.user_header, "X-Account");
    cr_assert_eq(cfg->upstream.connect_timeout_ms, 2000);
    cr_assert_eq(cfg->routes[0].connect_timeout_ms, 2000);
    cr_assert_str_eq(cfg->redis.host, "127.0.0.1");
    cr_assert_eq(cfg->redis.port, 6391);
    cr_assert_eq(cfg->redis.db, 3);
    cr_assert_str_eq(partners->tiers[0].key.text, "header:x-api-key");
    cr_assert(!partners->empty_key_allow);
    cr_assert_eq(partners->empty_key_status, 401);
    cr_assert(closed->derived->refuse_all);
    cr_assert_eq(closed->derived->rules[0].burst, 0);
    config_unref(cfg);
}

Test(scg_shape, data_redis_defaults_to_localhost)
{
    struct config *cfg = parse_ok("spring:\n"
                                  "  data:\n"
                                  "    redis:\n"
                                  "      port: 6400\n"
                                  "      password:\n"
                                  "      timeout: 1500\n"
                                  "  cloud:\n"
                                  "    gateway:\n"
                                  "      routes:\n" SCG_ROUTE("a", ""));

    cr_assert(cfg->redis.enabled);
    cr_assert_str_eq(cfg->redis.host, "localhost");
    cr_assert_eq(cfg->redis.port, 6400);
    cr_assert_null(cfg->redis.password);
    cr_assert_eq(cfg->redis.timeout_ms, 1500, "a bare number is ms");
    config_unref(cfg);
}

/* As in Spring Boot: the url overrides host, port, username, password
 * and database, whichever comes first in the file. */
Test(scg_shape, the_redis_url_wins_over_host_port_and_database)
{
    struct config *cfg = parse_ok("spring:\n"
                                  "  data:\n"
                                  "    redis:\n"
                                  "      url: redis://prod.internal:6380/2\n"
                                  "      host: localhost\n"
                                  "      port: 6379\n"
                                  "      database: 0\n"
                                  "      username: u\n"
                                  "      password: p\n"
                                  "  cloud:\n"
                                  "    gateway:\n"
                                  "      routes:\n" SCG_ROUTE("a", ""));

    cr_assert_str_eq(cfg->redis.host, "prod.internal");
    cr_assert_eq(cfg->redis.port, 6380);
    cr_assert_eq(cfg->redis.db, 2);
    cr_assert_null(cfg->redis.user);
    cr_assert_null(cfg->redis.password);
    config_unref(cfg);
    cfg = parse_ok("spring:\n"
                   "  redis:\n"
                   "    host: other\n"
                   "    database: 5\n"
                   "    port: 7000\n"
                   "    url: redis://prod.internal\n"
                   "  cloud:\n"
                   "    gateway:\n"
                   "      routes:\n" SCG_ROUTE("a", ""));
    cr_assert_str_eq(cfg->redis.host, "prod.internal");
    cr_assert_eq(cfg->redis.port, 6379, "what the url leaves out is 6379");
    cr_assert_eq(cfg->redis.db, 0);
    config_unref(cfg);
}

Test(scg_shape, sentinel_nodes_as_a_list)
{
    struct config *cfg = parse_ok("spring:\n"
                                  "  redis:\n"
                                  "    sentinel:\n"
                                  "      master: m\n"
                                  "      nodes: [\"a:1\", \"b:2\"]\n"
                                  "  cloud:\n"
                                  "    gateway:\n"
                                  "      routes:\n" SCG_ROUTE("a", ""));

    cr_assert_eq(cfg->redis.nsentinels, 2);
    cr_assert_str_eq(cfg->redis.sentinels[1].host, "b");
    config_unref(cfg);
}

Test(scg_shape, cluster_nodes_name_the_cluster)
{
    struct config *cfg = parse_ok("spring:\n"
                                  "  redis:\n"
                                  "    password: pw\n"
                                  "    cluster:\n"
                                  "      nodes: a:7000, b:7001,c:7002\n"
                                  "      max-redirects: 3\n"
                                  "  cloud:\n"
                                  "    gateway:\n"
                                  "      routes:\n" SCG_ROUTE("a", ""));

    cr_assert(cfg->redis.enabled);
    cr_assert_null(cfg->redis.host, "no localhost beside a cluster");
    cr_assert_eq(cfg->redis.ncluster_nodes, 3);
    cr_assert_str_eq(cfg->redis.cluster_nodes[1].host, "b");
    cr_assert_eq(cfg->redis.cluster_nodes[2].port, 7002);
    cr_assert_str_eq(cfg->redis.password, "pw");
    cr_assert_eq(cfg->warnings.n, 1);
    cr_assert(strstr(cfg->warnings.v[0],
                     "spring.redis.cluster.max-redirects: ignored") != NULL,
              "%s", cfg->warnings.v[0]);
    config_unref(cfg);
    cfg = parse_ok("spring:\n"
                   "  data:\n"
                   "    redis:\n"
                   "      cluster:\n"
                   "        nodes: [\"a:7000\"]\n"
                   "  cloud:\n"
                   "    gateway:\n"
                   "      routes:\n" SCG_ROUTE("a", ""));
    cr_assert_eq(cfg->redis.ncluster_nodes, 1);
    config_unref(cfg);
}

Test(scg_shape, a_cluster_beside_a_host_or_a_database_is_an_error)
{
    assert_error("spring:\n"
                 "  redis:\n"
                 "    host: r\n"
                 "    cluster:\n"
                 "      nodes: a:7000\n"
                 "  cloud:\n"
                 "    gateway:\n"
                 "      routes:\n" SCG_ROUTE("a", ""),
                 "app.yml:3:5: spring.redis.cluster: host (or url) and cluster "
                 "are exclusive: in a cluster, the nodes name the servers");
    assert_error("spring:\n"
                 "  redis:\n"
                 "    database: 2\n"
                 "    cluster:\n"
                 "      nodes: a:7000\n"
                 "  cloud:\n"
                 "    gateway:\n"
                 "      routes:\n" SCG_ROUTE("a", ""),
                 "app.yml:3:5: spring.redis.database: a Redis Cluster has "
                 "database 0 only (got 2)");
    assert_error("spring:\n"
                 "  redis:\n"
                 "    cluster:\n"
                 "      nodes: a\n"
                 "  cloud:\n"
                 "    gateway:\n"
                 "      routes:\n" SCG_ROUTE("a", ""),
                 "app.yml:4:14: spring.redis.cluster.nodes: bad cluster node "
                 "address \"a\": missing port (expected host:port or "
                 "[ipv6]:port)");
}

Test(scg_shape, redis_given_twice_is_an_error)
{
    assert_error("sluice:\n"
                 "  redis:\n"
                 "    url: redis://x\n"
                 "spring:\n"
                 "  redis:\n"
                 "    host: y\n"
                 "  cloud:\n"
                 "    gateway:\n"
                 "      routes:\n" SCG_ROUTE("a", ""),
                 "app.yml:6:5: spring.redis: Redis is already set (by "
                 "sluice.redis, spring.redis or spring.data.redis): give it "
                 "once");
}

Test(scg_shape, lb_uri_without_an_address_is_an_error_naming_the_key)
{
    assert_error(SCG_HEAD "        - id: a\n"
                          "          uri: lb://orders\n",
                 "app.yml:6:16: spring.cloud.gateway.routes[0].uri: "
                 "lb://orders needs an address: sluice has no service "
                 "discovery; give it in scg.services (orders: "
                 "http://host:port), or write http://host:port");
}

Test(scg_shape, lb_uri_takes_its_address_from_scg_services)
{
    struct config *cfg = parse_ok("scg:\n"
                                  "  services:\n"
                                  "    orders: http://10.1.2.3:8081\n"
                                  "    users: http://users.internal\n" SCG_HEAD
                                  "        - id: a\n"
                                  "          uri: lb://orders/**\n"
                                  "        - id: b\n"
                                  "          uri: lb://users\n");

    cr_assert_str_eq(cfg->routes[0].uri.host, "10.1.2.3");
    cr_assert_eq(cfg->routes[0].uri.port, 8081);
    cr_assert_str_eq(cfg->routes[0].uri.base_path, "");
    cr_assert_str_eq(cfg->routes[1].uri.authority, "users.internal");
    config_unref(cfg);
    assert_error("scg:\n"
                 "  services:\n"
                 "    orders: http://10.1.2.3:8081/v1\n" SCG_HEAD
                 "        - id: a\n"
                 "          uri: http://x\n",
                 "app.yml:3:13: scg.services.orders: bad address "
                 "\"http://10.1.2.3:8081/v1\": a path is not allowed "
                 "(expected http://host[:port])");
}

Test(scg_shape, unknown_keys_are_errors_with_a_suggestion)
{
    assert_error(SCG_HEAD SCG_ROUTE("a", "          oder: 1\n"),
                 "app.yml:7:11: spring.cloud.gateway.routes[0]: unknown key "
                 "\"oder\" (did you mean \"order\"?)");
    assert_error("spring:\n"
                 "  cloud:\n"
                 "    gateway:\n"
                 "      routes: []\n"
                 "  webflux: {}\n",
                 "app.yml:5:3: spring: unknown key \"webflux\" (known: redis, "
                 "data, cloud, application, profiles, main)");
}

Test(scg_shape, routes_sort_by_order_stably)
{
    struct config *cfg =
        parse_ok(SCG_HEAD SCG_ROUTE("a", "          order: 2\n")
                     SCG_ROUTE("b", "") SCG_ROUTE("c", "          order: -3\n")
                         SCG_ROUTE("d", "          order: 0\n"));

    cr_assert_str_eq(cfg->routes[0].id, "c");
    cr_assert_str_eq(cfg->routes[1].id, "b");
    cr_assert_str_eq(cfg->routes[2].id, "d");
    cr_assert_str_eq(cfg->routes[3].id, "a");
    config_unref(cfg);
}

Test(scg_shape, burst_zero_refuses_all_and_a_cost_above_the_burst_is_an_error)
{
    struct config *cfg = parse_ok(
        SCG_HEAD SCG_ROUTE("a", RRL("                redis-rate-limiter."
                                    "replenishRate: 3\n"
                                    "                redis-rate-limiter."
                                    "burstCapacity: 0\n")));

    cr_assert(rl0(cfg, 0)->derived->refuse_all);
    /* A derived limiter carries its RateLimit-Policy too. */
    cr_assert_not_null(rl0(cfg, 0)->derived->policy);
    cr_assert(strstr(rl0(cfg, 0)->derived->policy, ";q=0;") != NULL, "%s",
              rl0(cfg, 0)->derived->policy);
    config_unref(cfg);
    assert_error(
        SCG_HEAD SCG_ROUTE("a", RRL("                redis-rate-limiter:\n"
                                    "                  replenishRate: 1\n"
                                    "                  burstCapacity: 5\n"
                                    "                  requestedTokens: 6\n")),
        "app.yml:11:19: spring.cloud.gateway.routes[0].filters[0].args."
        "redis-rate-limiter: requestedTokens 6 is above burstCapacity 5: no "
        "request could ever pass (burstCapacity: 0 refuses all on purpose)");
}

Test(scg_shape, an_unknown_bean_is_an_error_naming_it)
{
    assert_error(
        SCG_HEAD SCG_ROUTE(
            "a", RRL("                key-resolver: \"#{@ipKeyResolvr}\"\n"
                     "                redis-rate-limiter.replenishRate: 1\n")),
        "app.yml:10:31: spring.cloud.gateway.routes[0].filters[0].args."
        "key-resolver: unknown key resolver \"ipKeyResolvr\" (did you mean "
        "\"ipKeyResolver\"?) (name it in scg.key_resolvers)");
    assert_error(
        SCG_HEAD SCG_ROUTE(
            "a", RRL("                key-resolver: \"ipKeyResolver\"\n"
                     "                redis-rate-limiter.replenishRate: 1\n")),
        "app.yml:10:31: spring.cloud.gateway.routes[0].filters[0].args."
        "key-resolver: bad key-resolver \"ipKeyResolver\" (expected "
        "\"#{@beanName}\", a name from scg.key_resolvers)");
}

Test(scg_shape, a_bad_key_in_scg_key_resolvers_is_an_error)
{
    assert_error("scg:\n"
                 "  key_resolvers:\n"
                 "    k: \"header\"\n" SCG_HEAD SCG_ROUTE("a", ""),
                 "app.yml:3:8: scg.key_resolvers.k: bad key \"header\": "
                 "header needs a name (header:NAME) (expected parts joined "
                 "by '+': ip, user, role, route, header:NAME, query:NAME, "
                 "cookie:NAME, claim:NAME)");
}

Test(scg_shape, a_bad_default_filter_is_reported_once)
{
    struct config_errors e;
    struct config *cfg =
        parse("spring:\n"
              "  cloud:\n"
              "    gateway:\n"
              "      default-filters:\n"
              "        - NoSuchFilter=1\n"
              "      routes:\n" SCG_ROUTE("a", "") SCG_ROUTE("b", ""),
              &e);

    cr_assert_null(cfg);
    cr_assert_eq(e.n, 1, "%zu errors", e.n);
    cr_assert(strstr(e.v[0], "spring.cloud.gateway.default-filters[0]: "
                             "unknown filter \"NoSuchFilter\"") != NULL,
              "%s", e.v[0]);
    config_errors_deinit(&e);
}

/* The same args in gateway.yaml's own shape; headers stay "both". */
Test(scg_shape, native_shape_takes_the_spring_args_too)
{
    struct config *cfg =
        parse_ok("scg:\n"
                 "  key_resolvers:\n"
                 "    tenantKeyResolver: \"header:X-Tenant\"\n"
                 "routes:\n"
                 "  - id: a\n"
                 "    uri: http://x/base\n"
                 "    filters:\n"
                 "      - name: RequestRateLimiter\n"
                 "        args:\n"
                 "          key-resolver: \"#{@tenantKeyResolver}\"\n"
                 "          deny-empty-key: false\n"
                 "          status-code: SERVICE_UNAVAILABLE\n"
                 "          redis-rate-limiter.replenishRate: 10\n"
                 "          redis-rate-limiter.burstCapacity: 20\n");
    const struct rate_limit_conf *rl = rl0(cfg, 0);

    cr_assert(!cfg->scg_shape);
    cr_assert_str_eq(cfg->routes[0].uri.base_path, "/base");
    cr_assert_eq(rl->headers, RL_HEADERS_BOTH);
    cr_assert_str_eq(rl->tiers[0].key.text, "header:x-tenant");
    cr_assert(rl->empty_key_allow);
    cr_assert_eq(rl->deny_status, 503);
    cr_assert_eq(rl->derived->rules[0].burst, 20);
    cr_assert_str_eq(rl->derived->name, "scg.a");
    cr_assert(rl->local, "no redis: section: backend local");
    config_unref(cfg);
}

Test(scg_shape, mapping_and_dotted_forms_are_exclusive)
{
    assert_error(
        SCG_HEAD SCG_ROUTE("a", RRL("                redis-rate-limiter:\n"
                                    "                  replenishRate: 1\n"
                                    "                redis-rate-limiter."
                                    "burstCapacity: 5\n")),
        "app.yml:11:19: spring.cloud.gateway.routes[0].filters[0].args."
        "redis-rate-limiter: give redis-rate-limiter as a mapping or as "
        "dotted keys (redis-rate-limiter.replenishRate), not both");
}

Test(scg_shape, a_bad_status_is_an_error)
{
    assert_error(
        SCG_HEAD SCG_ROUTE(
            "a", RRL("                empty-key-status-code: 200\n"
                     "                redis-rate-limiter.replenishRate: 1\n")),
        "app.yml:10:40: spring.cloud.gateway.routes[0].filters[0].args."
        "empty-key-status-code: bad status \"200\" (expected a number from "
        "400 to 599, or Spring's name of one, like FORBIDDEN)");
}

Test(scg_shape, property_placeholders_are_errors)
{
    assert_error("spring:\n"
                 "  redis:\n"
                 "    host: ${REDIS_HOST:localhost}\n"
                 "  cloud:\n"
                 "    gateway:\n"
                 "      routes:\n" SCG_ROUTE("a", ""),
                 "app.yml:3:11: spring.redis.host: property placeholders "
                 "(\"${...}\") are not supported: write the value");
}

/* A scope of its own names the limiter, so that routes share a bucket. */
Test(scg_shape, routes_naming_one_scope_share_one_limiter_name)
{
    struct config *cfg = parse_ok(
        SCG_HEAD SCG_ROUTE(
            "a", RRL("                scope: shop\n"
                     "                redis-rate-limiter.replenishRate: 4\n"))
            SCG_ROUTE(
                "b",
                RRL("                scope: shop\n"
                    "                redis-rate-limiter.replenishRate: 4\n")));

    cr_assert_str_eq(rl0(cfg, 0)->derived->name, "scg.shop");
    cr_assert_str_eq(rl0(cfg, 1)->derived->name, "scg.shop");
    cr_assert_str_eq(rl0(cfg, 0)->derived->tag, rl0(cfg, 1)->derived->tag);
    config_unref(cfg);
}

/* Route b's limiter is named scg.b; a scope "b" on route a named its
 * limiter scg.b too, and the two routes shared buckets. */
Test(scg_shape, a_scope_named_after_another_route_is_refused)
{
    assert_error(
        SCG_HEAD SCG_ROUTE(
            "a", RRL("                scope: b\n"
                     "                redis-rate-limiter.replenishRate: 4\n"))
            SCG_ROUTE("b", RRL("                redis-rate-limiter."
                               "replenishRate: 4\n")),
        "app.yml:10:24: spring.cloud.gateway.routes[0].filters[0].args.scope: "
        "scope \"b\" is the id of routes[1]: a route's own budget (scope: "
        "route) is kept under its id, so the two would share buckets; name "
        "the scope after no route");
}

/* cost: says the same as requestedTokens; one of them. */
Test(scg_shape, cost_stands_for_requested_tokens_but_not_beside_it)
{
    struct config *cfg = parse_ok(SCG_HEAD SCG_ROUTE(
        "a", RRL("                cost: 3\n"
                 "                redis-rate-limiter.replenishRate: 1\n"
                 "                redis-rate-limiter.burstCapacity: 5\n")));

    cr_assert_eq(rl0(cfg, 0)->cost, 3);
    config_unref(cfg);
    assert_error(
        SCG_HEAD SCG_ROUTE(
            "a", RRL("                cost: 3\n"
                     "                redis-rate-limiter.replenishRate: 1\n"
                     "                redis-rate-limiter.requestedTokens: "
                     "2\n")),
        "app.yml:10:17: spring.cloud.gateway.routes[0].filters[0].args."
        "redis-rate-limiter: give either requestedTokens or cost, not both");
}

/* Spring Boot binds every scalar from its text, so an application.yml may
 * quote a number or a boolean where Spring reads one; such files were
 * refused ("expected a number, got the quoted string"). */
Test(scg_shape, quoted_numbers_and_booleans_read_as_spring_reads_them)
{
    struct config *cfg = parse_ok(
        "spring:\n"
        "  cloud:\n"
        "    gateway:\n"
        "      filter:\n"
        "        request-rate-limiter:\n"
        "          deny-empty-key: 'false'\n"
        "      routes:\n" SCG_ROUTE(
            "a",
            RRL("                redis-rate-limiter.replenishRate: '10'\n"
                "                redis-rate-limiter.burstCapacity: \"20\"\n"
                "                redis-rate-limiter.requestedTokens: "
                "'2'\n")));
    const struct rate_limit_conf *rl = rl0(cfg, 0);

    cr_assert_not_null(rl->derived);
    cr_assert_eq(rl->derived->rules[0].limit, 10);
    cr_assert_eq(rl->derived->rules[0].burst, 20);
    cr_assert_eq(rl->cost, 2);
    cr_assert(rl->empty_key_allow);
    config_unref(cfg);
}

/* httpclient's timeouts are every route's upstream defaults. */
/* An https route of a Spring file verifies its upstream as a native one
 * does: its tls settings start from upstream.tls (verify: true). A route
 * left zeroed trusted any certificate. */
Test(scg_shape, https_routes_verify_by_default_and_take_upstream_tls)
{
    struct config *cfg =
        parse_ok(SCG_HEAD "        - id: a\n"
                          "          uri: https://pay.internal\n");

    cr_assert(cfg->routes[0].uri.https);
    cr_assert(cfg->routes[0].tls.verify, "an https route trusts anyone");
    config_unref(cfg);
    cfg = parse_ok("sluice:\n"
                   "  upstream:\n"
                   "    tls: { ca_file: /etc/ca.pem }\n" SCG_HEAD
                   "        - id: a\n"
                   "          uri: https://pay.internal\n");
    cr_assert(cfg->routes[0].tls.verify);
    cr_assert_str_eq(cfg->routes[0].tls.ca_file, "/etc/ca.pem");
    config_unref(cfg);
}

Test(scg_shape, httpclient_timeouts_are_the_upstream_defaults)
{
    struct config *cfg = parse_ok("spring:\n"
                                  "  cloud:\n"
                                  "    gateway:\n"
                                  "      httpclient:\n"
                                  "        connect-timeout: 1500\n"
                                  "        response-timeout: 7s\n"
                                  "      routes:\n" SCG_ROUTE("a", ""));

    cr_assert_eq(cfg->upstream.connect_timeout_ms, 1500);
    cr_assert_eq(cfg->routes[0].connect_timeout_ms, 1500);
    cr_assert_eq(cfg->routes[0].response_timeout_ms, 7000);
    config_unref(cfg);
}

/* Spring Cloud Gateway 4.3 moved every key under
 * spring.cloud.gateway.server.webflux (the old prefix deprecated): a
 * file of either kind loads the same. */
Test(scg_shape, the_server_webflux_prefix_of_gateway_4_3_loads)
{
    struct config *cfg = parse_ok("spring:\n"
                                  "  cloud:\n"
                                  "    gateway:\n"
                                  "      server:\n"
                                  "        webflux:\n"
                                  "          httpclient:\n"
                                  "            connect-timeout: 1500\n"
                                  "          default-filters:\n"
                                  "            - AddResponseHeader=X-A, 1\n"
                                  "          routes:\n"
                                  "            - id: a\n"
                                  "              uri: http://127.0.0.1:9000\n"
                                  "            - id: b\n"
                                  "              uri: http://127.0.0.1:9000\n");

    cr_assert_eq(cfg->nroutes, 2);
    cr_assert_str_eq(cfg->routes[0].id, "a");
    cr_assert_eq(cfg->routes[0].connect_timeout_ms, 1500);
    cr_assert_eq(cfg->routes[1].nfilters, 1);
    config_unref(cfg);
}

/* Spring orders the i-th filter of each list i + 1 and sorts the
 * defaults, then the route's own, stably: they alternate. */
Test(scg_shape, default_filters_alternate_with_the_routes_own)
{
    static const char *const want[] = {"X-D1", "X-R1", "X-D2", "X-R2", "X-D3"};
    struct config *cfg = parse_ok("spring:\n"
                                  "  cloud:\n"
                                  "    gateway:\n"
                                  "      default-filters:\n"
                                  "        - AddResponseHeader=X-D1, 1\n"
                                  "        - AddResponseHeader=X-D2, 1\n"
                                  "        - AddResponseHeader=X-D3, 1\n"
                                  "      routes:\n"
                                  "        - id: a\n"
                                  "          uri: http://127.0.0.1:9000\n"
                                  "          filters:\n"
                                  "            - AddResponseHeader=X-R1, 1\n"
                                  "            - AddResponseHeader=X-R2, 1\n"
                                  "        - id: b\n"
                                  "          uri: http://127.0.0.1:9000\n");
    const struct route *a = &cfg->routes[0];

    cr_assert_eq(a->nfilters, 5);
    for (size_t i = 0; i < 5; i++) {
        cr_assert_str_eq(a->filters[i].name, want[i], "filter %zu", i);
    }
    cr_assert_eq(cfg->routes[1].nfilters, 3);
    cr_assert_str_eq(cfg->routes[1].filters[2].name, "X-D3");
    config_unref(cfg);
}

/* Spring cuts a shortcut at every comma: AddResponseHeader's third
 * piece is its override, and a value with commas is refused rather than
 * cut as Spring would cut it. */
Test(scg_shape, shortcuts_are_cut_at_every_comma)
{
    struct config *cfg = parse_ok(
        SCG_HEAD SCG_ROUTE("a", "          filters:\n"
                                "            - AddResponseHeader=X-B, White, "
                                "false\n"
                                "            - AddResponseHeader=X-C, c\n"));
    const struct filter *f = cfg->routes[0].filters;

    cr_assert_str_eq(f[0].value, "White");
    cr_assert(f[0].keep_existing);
    cr_assert_str_eq(f[1].value, "c");
    cr_assert_not(f[1].keep_existing);
    config_unref(cfg);
    assert_error(SCG_HEAD SCG_ROUTE("a", "          filters:\n"
                                         "            - AddRequestHeader=X-A, "
                                         "a, b\n"),
                 "app.yml:8:15: spring.cloud.gateway.routes[0].filters[0]: "
                 "AddRequestHeader: Spring cuts a shortcut at every comma, "
                 "which gives 3 arguments where AddRequestHeader takes at "
                 "most 2; give a value that holds commas in the long form "
                 "(name:, args:)");
    assert_error(SCG_HEAD SCG_ROUTE("a", "          filters:\n"
                                         "            - AddResponseHeader=X-A, "
                                         "a, maybe\n"),
                 "app.yml:8:15: spring.cloud.gateway.routes[0].filters[0]: "
                 "AddResponseHeader: override must be true or false, got "
                 "\"maybe\"");
}

/* Spring expands {var} in response header values; sluice does not, so a
 * Spring file that uses it is refused rather than sent "v-{segment}". */
Test(scg_shape, a_variable_in_a_response_header_value_is_refused)
{
    assert_error(SCG_HEAD SCG_ROUTE("a", "          predicates:\n"
                                         "            - Path=/red/{segment}\n"
                                         "          filters:\n"
                                         "            - SetResponseHeader=X-S, "
                                         "s-{segment}\n"),
                 "app.yml:10:15: spring.cloud.gateway.routes[0].filters[0]: "
                 "SetResponseHeader: Spring would expand {segment} in the "
                 "value; sluice sends response header values as written");
    /* Braces around what cannot be a variable's name are no reference,
     * as in a request header value. */
    config_unref(parse_ok(
        SCG_HEAD SCG_ROUTE("a", "          filters:\n"
                                "            - name: AddResponseHeader\n"
                                "              args: {name: X-J, "
                                "value: '{\"a\": 1}'}\n")));
}

/* Keys under both prefixes would leave which of them holds to the order
 * of reading: refused. */
Test(scg_shape, both_prefixes_at_once_are_refused)
{
    assert_error("spring:\n"
                 "  cloud:\n"
                 "    gateway:\n"
                 "      httpclient: { connect-timeout: 1000 }\n"
                 "      server:\n"
                 "        webflux:\n"
                 "          routes: []\n",
                 "app.yml:4:7: spring.cloud.gateway: \"httpclient\" beside "
                 "server.webflux: give every key under one prefix, "
                 "spring.cloud.gateway.server.webflux (Spring Cloud Gateway "
                 "4.3 on) or spring.cloud.gateway (before)");
    assert_error("spring:\n"
                 "  cloud:\n"
                 "    gateway:\n"
                 "      server:\n"
                 "        webflux:\n"
                 "          default-filters: [AddResponseHeader=X-A, 1]\n",
                 "app.yml:6:11: spring.cloud.gateway.server.webflux.routes: "
                 "required");
    assert_error("spring:\n"
                 "  cloud:\n"
                 "    gateway:\n"
                 "      server:\n"
                 "        webmvc:\n"
                 "          routes: []\n",
                 "app.yml:5:9: spring.cloud.gateway.server: unknown key "
                 "\"webmvc\" (known: webflux)");
}

/* order is a Java int: Ordered.HIGHEST_PRECEDENCE, -2^31, included. */
Test(scg_shape, order_takes_every_java_int)
{
    struct config *cfg =
        parse_ok("spring:\n  cloud:\n    gateway:\n      routes:\n" SCG_ROUTE(
            "a", "          order: 2147483647\n")
                     SCG_ROUTE("b", "          order: -2147483648\n"));

    cr_assert_str_eq(cfg->routes[0].id, "b");
    cr_assert_eq(cfg->routes[0].order, INT32_MIN);
    cr_assert_eq(cfg->routes[1].order, INT32_MAX);
    config_unref(cfg);
    assert_error("spring:\n  cloud:\n    gateway:\n      routes:\n" SCG_ROUTE(
                     "a", "          order: -2147483649\n"),
                 "app.yml:7:18: spring.cloud.gateway.routes[0].order: bad "
                 "order \"-2147483649\" (expected an integer from -2147483648 "
                 "to 2147483647)");
}
