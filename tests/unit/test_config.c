#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "netaddr.h"

/* Every test names its text "t.yaml", so that messages are exact. */
static struct config *
parse(const char *yaml, struct config_errors *e)
{
    config_errors_init(e);
    return config_parse(yaml, strlen(yaml), "t.yaml", e);
}

/* The text must be refused with exactly the one message 'want'. */
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

/* Same, for messages whose tail belongs to predicate.c or filter.c. */
static void
assert_error_prefix(const char *yaml, const char *prefix, const char *also)
{
    struct config_errors e;
    struct config *cfg = parse(yaml, &e);

    cr_assert_null(cfg, "accepted: %s", yaml);
    cr_assert_eq(e.n, 1, "%zu errors, first: %s", e.n, e.n > 0 ? e.v[0] : "");
    cr_assert(strncmp(e.v[0], prefix, strlen(prefix)) == 0,
              "\"%s\" does not start with \"%s\"", e.v[0], prefix);
    cr_assert_not_null(strstr(e.v[0], also), "\"%s\" lacks \"%s\"", e.v[0],
                       also);
    config_errors_deinit(&e);
}

static struct config *
parse_ok(const char *yaml)
{
    struct config_errors e;
    struct config *cfg = parse(yaml, &e);

    cr_assert_not_null(cfg, "refused: %s", e.n > 0 ? e.v[0] : "(no error)");
    cr_assert_eq(e.n, 0);
    config_errors_deinit(&e);
    return cfg;
}

static const char full_yaml[] =
    "server:\n"
    "  listen: '[::]:8443'\n"
    "  workers: 4\n"
    "  trusted_proxies: [127.0.0.1/32, 10.0.0.0/8, 'fd00::/8']\n"
    "  max_header_bytes: 32KiB\n"
    "  max_body_bytes: 1GiB\n"
    "  client_timeout: 2m\n"
    "  drain_timeout: 0s\n"
    "admin:\n"
    "  listen: 0.0.0.0:9191\n"
    "redis:\n"
    "  url: redis://gw%40prod:p%3Ass%2Fw@redis.internal:6380/3\n"
    "  timeout: 250ms\n"
    "upstream:\n"
    "  connect_timeout: 2s\n"
    "  response_timeout: 30s\n"
    "  keepalive: 0\n"
    "log:\n"
    "  level: warn\n"
    "routes:\n"
    "  - id: users\n"
    "    uri: http://127.0.0.1:9000/base/\n"
    "    predicates:\n"
    "      - Path=/api/users/**\n"
    "      - Method=GET, POST\n"
    "      - name: Header\n"
    "        args: { header: X-Id, regexp: '\\d+' }\n"
    "    filters:\n"
    "      - StripPrefix=1\n"
    "      - AddRequestHeader=X-Gateway, sluice, v1\n"
    "    connect_timeout: 1s\n"
    "    response_timeout: 5s\n"
    "  - id: v6.backend_2\n"
    "    uri: http://[::1]\n"
    "    predicates:\n"
    "      - name: RemoteAddr\n"
    "        args:\n"
    "          sources: [192.168.0.0/16, 10.1.0.0/16]\n"
    "    filters:\n"
    "      - PreserveHostHeader\n";

Test(config, full_config_round_trips_every_field)
{
    struct config *cfg = parse_ok(full_yaml);
    const struct route *r;
    char buf[64];

    cr_assert_str_eq(cfg->path, "t.yaml");
    cr_assert_eq(cfg->refs, 1);

    cr_assert_str_eq(cfg->server.listen.host, "::");
    cr_assert_eq(cfg->server.listen.port, 8443);
    cr_assert_eq(cfg->server.workers, 4);
    cr_assert_eq(cfg->server.ntrusted_proxies, 3);
    netaddr_format(&cfg->server.trusted_proxies[1].addr, buf, sizeof(buf));
    cr_assert_str_eq(buf, "10.0.0.0");
    cr_assert_eq(cfg->server.trusted_proxies[1].prefix, 8);
    cr_assert_eq(cfg->server.trusted_proxies[2].addr.family, AF_INET6);
    cr_assert_eq(cfg->server.trusted_proxies[2].prefix, 8);
    cr_assert_eq(cfg->server.max_header_bytes, 32 * 1024);
    cr_assert_eq(cfg->server.max_body_bytes, 1024ULL * 1024 * 1024);
    cr_assert_eq(cfg->server.client_timeout_ms, 120000);
    cr_assert_eq(cfg->server.drain_timeout_ms, 0);

    cr_assert(cfg->admin.enabled);
    cr_assert_str_eq(cfg->admin.listen.host, "0.0.0.0");
    cr_assert_eq(cfg->admin.listen.port, 9191);

    cr_assert(cfg->redis.enabled);
    cr_assert_str_eq(cfg->redis.host, "redis.internal");
    cr_assert_eq(cfg->redis.port, 6380);
    cr_assert_eq(cfg->redis.db, 3);
    cr_assert_str_eq(cfg->redis.user, "gw@prod");
    cr_assert_str_eq(cfg->redis.password, "p:ss/w");
    cr_assert_eq(cfg->redis.timeout_ms, 250);

    cr_assert_eq(cfg->upstream.connect_timeout_ms, 2000);
    cr_assert_eq(cfg->upstream.response_timeout_ms, 30000);
    cr_assert_eq(cfg->upstream.keepalive, 0);
    cr_assert_eq(cfg->log_level, LOG_WARN);

    cr_assert_eq(cfg->nroutes, 2);
    r = &cfg->routes[0];
    cr_assert_str_eq(r->id, "users");
    cr_assert_str_eq(r->uri.host, "127.0.0.1");
    cr_assert_eq(r->uri.port, 9000);
    cr_assert_str_eq(r->uri.base_path, "/base");
    cr_assert_str_eq(r->uri.authority, "127.0.0.1:9000");
    cr_assert_eq(r->npredicates, 3);
    cr_assert_eq(r->predicates[0].kind, PREDICATE_PATH);
    cr_assert_eq(r->predicates[0].nvalues, 1);
    cr_assert_str_eq(r->predicates[0].values[0], "/api/users/**");
    cr_assert_eq(r->predicates[1].kind, PREDICATE_METHOD);
    cr_assert_eq(r->predicates[1].nvalues, 2);
    cr_assert_str_eq(r->predicates[1].values[0], "GET");
    cr_assert_str_eq(r->predicates[1].values[1], "POST");
    cr_assert_eq(r->predicates[2].kind, PREDICATE_HEADER);
    cr_assert_str_eq(r->predicates[2].name, "X-Id");
    cr_assert_not_null(r->predicates[2].re);
    cr_assert_eq(r->nfilters, 2);
    cr_assert_eq(r->filters[0].kind, FILTER_STRIP_PREFIX);
    cr_assert_eq(r->filters[0].parts, 1);
    cr_assert_eq(r->filters[1].kind, FILTER_ADD_REQUEST_HEADER);
    cr_assert_str_eq(r->filters[1].name, "X-Gateway");
    /* The last argument keeps its commas. */
    cr_assert_str_eq(r->filters[1].value, "sluice, v1");
    cr_assert_eq(r->connect_timeout_ms, 1000);
    cr_assert_eq(r->response_timeout_ms, 5000);

    r = &cfg->routes[1];
    cr_assert_str_eq(r->id, "v6.backend_2");
    cr_assert_str_eq(r->uri.host, "::1");
    cr_assert_eq(r->uri.port, 80);
    cr_assert_str_eq(r->uri.base_path, "");
    cr_assert_str_eq(r->uri.authority, "[::1]");
    cr_assert_eq(r->npredicates, 1);
    cr_assert_eq(r->predicates[0].kind, PREDICATE_REMOTE_ADDR);
    cr_assert_eq(r->predicates[0].ncidrs, 2);
    cr_assert_eq(r->predicates[0].cidrs[1].prefix, 16);
    cr_assert_eq(r->nfilters, 1);
    cr_assert_eq(r->filters[0].kind, FILTER_PRESERVE_HOST_HEADER);
    /* Inherited from upstream:. */
    cr_assert_eq(r->connect_timeout_ms, 2000);
    cr_assert_eq(r->response_timeout_ms, 30000);

    cr_assert_eq(config_find_route(cfg, "v6.backend_2"), &cfg->routes[1]);
    cr_assert_eq(config_find_route(cfg, "users"), &cfg->routes[0]);
    cr_assert_null(config_find_route(cfg, "user"));
    config_unref(cfg);
}

Test(config, defaults_apply_when_sections_are_absent)
{
    struct config *cfg = parse_ok("routes: []\n");

    cr_assert_str_eq(cfg->server.listen.host, "0.0.0.0");
    cr_assert_eq(cfg->server.listen.port, 8080);
    cr_assert_eq(cfg->server.workers, 0);
    cr_assert_eq(cfg->server.ntrusted_proxies, 0);
    cr_assert_eq(cfg->server.max_header_bytes, 16 * 1024);
    cr_assert_eq(cfg->server.max_body_bytes, 8 * 1024 * 1024);
    cr_assert_eq(cfg->server.client_timeout_ms, 60000);
    cr_assert_eq(cfg->server.drain_timeout_ms, 10000);
    cr_assert_not(cfg->admin.enabled);
    cr_assert_str_eq(cfg->admin.listen.host, "127.0.0.1");
    cr_assert_eq(cfg->admin.listen.port, 9090);
    cr_assert_not(cfg->redis.enabled);
    cr_assert_eq(cfg->redis.timeout_ms, 50);
    cr_assert_eq(cfg->upstream.connect_timeout_ms, 5000);
    cr_assert_eq(cfg->upstream.response_timeout_ms, 60000);
    cr_assert_eq(cfg->upstream.keepalive, 256);
    cr_assert_eq(cfg->log_level, LOG_INFO);
    cr_assert_eq(cfg->nroutes, 0);
    config_unref(cfg);
}

Test(config, empty_sections_turn_features_on_with_defaults)
{
    struct config *cfg = parse_ok("server:\nadmin:\nroutes:\n");

    cr_assert(cfg->admin.enabled);
    cr_assert_str_eq(cfg->admin.listen.host, "127.0.0.1");
    cr_assert_eq(cfg->admin.listen.port, 9090);
    cr_assert_eq(cfg->server.listen.port, 8080);
    cr_assert_eq(cfg->nroutes, 0);
    config_unref(cfg);
}

Test(config, redis_url_defaults_port_and_db)
{
    struct config *cfg = parse_ok("redis:\n"
                                  "  url: redis://:secret@[::1]\n"
                                  "routes: []\n");

    cr_assert(cfg->redis.enabled);
    cr_assert_str_eq(cfg->redis.host, "::1");
    cr_assert_eq(cfg->redis.port, 6379);
    cr_assert_eq(cfg->redis.db, 0);
    cr_assert_null(cfg->redis.user);
    cr_assert_str_eq(cfg->redis.password, "secret");
    config_unref(cfg);
}

Test(config, route_timeouts_inherit_upstream_written_after_routes)
{
    struct config *cfg = parse_ok("routes:\n"
                                  "  - id: a\n"
                                  "    uri: http://example.com:8080/\n"
                                  "upstream:\n"
                                  "  connect_timeout: 3s\n"
                                  "  response_timeout: 7s\n");

    cr_assert_eq(cfg->routes[0].connect_timeout_ms, 3000);
    cr_assert_eq(cfg->routes[0].response_timeout_ms, 7000);
    cr_assert_str_eq(cfg->routes[0].uri.authority, "example.com:8080");
    cr_assert_str_eq(cfg->routes[0].uri.base_path, "");
    cr_assert_eq(cfg->routes[0].npredicates, 0);
    cr_assert_eq(cfg->routes[0].nfilters, 0);
    config_unref(cfg);
}

Test(config, shortcut_gathers_and_trims_every_piece)
{
    struct config *cfg = parse_ok("routes:\n"
                                  "  - id: a\n"
                                  "    uri: http://b\n"
                                  "    predicates:\n"
                                  "      - ' Path = /a/** ,/b ,  /c'\n"
                                  "      - Header=X-Id, \\d{1,3}\n");
    const struct predicate *p = cfg->routes[0].predicates;

    cr_assert_eq(p[0].nvalues, 3);
    cr_assert_str_eq(p[0].values[0], "/a/**");
    cr_assert_str_eq(p[0].values[1], "/b");
    cr_assert_str_eq(p[0].values[2], "/c");
    cr_assert_str_eq(p[1].name, "X-Id");
    cr_assert_not_null(p[1].re);
    config_unref(cfg);
}

Test(config, long_form_gather_takes_a_scalar_or_a_sequence)
{
    struct config *cfg = parse_ok("routes:\n"
                                  "  - id: a\n"
                                  "    uri: http://b\n"
                                  "    predicates:\n"
                                  "      - name: Method\n"
                                  "        args: { methods: [GET, PUT] }\n"
                                  "      - name: Path\n"
                                  "        args: { patterns: /x }\n"
                                  "      - name: Header\n"
                                  "        args: { header: X-A }\n");
    const struct predicate *p = cfg->routes[0].predicates;

    cr_assert_eq(cfg->routes[0].npredicates, 3);
    cr_assert_eq(p[0].nvalues, 2);
    cr_assert_str_eq(p[0].values[1], "PUT");
    cr_assert_eq(p[1].nvalues, 1);
    cr_assert_str_eq(p[1].values[0], "/x");
    cr_assert_str_eq(p[2].name, "X-A");
    cr_assert_null(p[2].re);
    config_unref(cfg);
}

Test(config, references_are_counted)
{
    struct config *cfg = parse_ok("routes: []\n");

    cr_assert_eq(config_ref(cfg), cfg);
    cr_assert_eq(cfg->refs, 2);
    config_unref(cfg);
    cr_assert_eq(cfg->refs, 1);
    /* The last reference frees; ASan reports a leak or double free. */
    config_unref(cfg);
    config_unref(NULL);
}

Test(config, load_reads_a_file)
{
    char path[] = "/tmp/sluice-test-config-XXXXXX";
    int fd = mkstemp(path);
    struct config_errors e;
    struct config *cfg;

    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, full_yaml, strlen(full_yaml)),
                 (ssize_t)strlen(full_yaml));
    close(fd);
    config_errors_init(&e);
    cfg = config_load(path, &e);
    unlink(path);
    cr_assert_not_null(cfg, "%s", e.n > 0 ? e.v[0] : "");
    cr_assert_str_eq(cfg->path, path);
    cr_assert_eq(cfg->nroutes, 2);
    config_unref(cfg);
    config_errors_deinit(&e);
}

Test(config, load_reports_an_unreadable_file)
{
    struct config_errors e;

    config_errors_init(&e);
    cr_assert_null(config_load("no/such/gateway.yaml", &e));
    cr_assert_eq(e.n, 1);
    cr_assert_str_eq(e.v[0],
                     "no/such/gateway.yaml: cannot read: No such file or "
                     "directory");
    config_errors_deinit(&e);
}

Test(config, load_places_errors_under_the_path_given)
{
    char path[] = "/tmp/sluice-test-config-XXXXXX";
    int fd = mkstemp(path);
    const char text[] = "routes: []\nlog: {level: loud}\n";
    struct config_errors e;
    char want[256];

    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    config_errors_init(&e);
    cr_assert_null(config_load(path, &e));
    unlink(path);
    cr_assert_eq(e.n, 1);
    snprintf(want, sizeof(want),
             "%s:2:14: log.level: bad log level \"loud\" (expected debug, "
             "info, warn or error)",
             path);
    cr_assert_str_eq(e.v[0], want);
    config_errors_deinit(&e);
}

Test(config, every_mistake_is_reported_in_file_order)
{
    struct config_errors e;
    struct config *cfg = parse("routes:\n"
                               "  - id: a\n"
                               "    uri: https://b\n"
                               "server:\n"
                               "  workers: many\n"
                               "log:\n"
                               "  levle: info\n",
                               &e);

    cr_assert_null(cfg);
    cr_assert_eq(e.n, 3);
    cr_assert_str_eq(e.v[0],
                     "t.yaml:3:10: routes[0].uri: https upstreams are not "
                     "supported");
    cr_assert_str_eq(e.v[1], "t.yaml:5:12: server.workers: bad integer "
                             "\"many\" (expected \"auto\" or an integer "
                             "from 1 to 256)");
    cr_assert_str_eq(e.v[2], "t.yaml:7:3: log: unknown key \"levle\" (did "
                             "you mean \"level\"?)");
    config_errors_deinit(&e);
}

Test(config, errors_are_appended_to_the_list)
{
    struct config_errors e;

    config_errors_init(&e);
    cr_assert_null(config_parse("x: 1\n", 5, "a.yaml", &e));
    cr_assert_null(config_parse("", 0, "b.yaml", &e));
    cr_assert_eq(e.n, 3);
    /* Same position: in the order found, the key walk first. */
    cr_assert_str_eq(e.v[0], "a.yaml:1:1: unknown key \"x\" (known: server, "
                             "admin, redis, upstream, log, routes)");
    cr_assert_str_eq(e.v[1], "a.yaml:1:1: routes: required");
    cr_assert_str_eq(e.v[2], "b.yaml:1:1: the file is empty (expected a "
                             "mapping with at least \"routes\")");
    config_errors_deinit(&e);
    cr_assert_eq(e.n, 0);
}

/* YAML itself. */

Test(config, yaml_syntax_error_has_the_parser_position)
{
    assert_error("routes: []\nserver: [\n",
                 "t.yaml:3:1: yaml: did not find expected node content");
    assert_error("routes: []\nserver:\n  listen: a\n listen: b\n",
                 "t.yaml:4:2: yaml: did not find expected key");
}

Test(config, bad_utf8_is_a_yaml_error)
{
    assert_error("routes: []\nlog: \xff\n",
                 "t.yaml:2:6: yaml: invalid leading UTF-8 octet");
}

Test(config, empty_file_is_an_error)
{
    const char *want = "t.yaml:1:1: the file is empty (expected a mapping "
                       "with at least \"routes\")";

    assert_error("", want);
    assert_error("# nothing but a comment\n", want);
}

Test(config, document_that_is_not_a_mapping_is_an_error)
{
    assert_error("- routes\n", "t.yaml:1:1: expected a mapping, got a "
                               "sequence");
    assert_error("routes\n", "t.yaml:1:1: expected a mapping, got a scalar");
}

Test(config, second_document_is_refused)
{
    assert_error("routes: []\n---\nroutes: []\n",
                 "t.yaml:3:1: only one YAML document is allowed");
}

Test(config, nul_in_a_quoted_scalar_is_refused)
{
    assert_error("routes: []\nlog: {level: \"info\\0x\"}\n",
                 "t.yaml:2:14: log.level: contains a NUL character");
}

/* Shapes and keys. */

Test(config, missing_routes_is_an_error)
{
    assert_error("server:\n  workers: 2\n", "t.yaml:1:1: routes: required");
}

Test(config, wrong_type_names_what_was_expected)
{
    assert_error("server: [1]\nroutes: []\n",
                 "t.yaml:1:9: server: expected a mapping, got a sequence");
    assert_error("routes: {a: 1}\n",
                 "t.yaml:1:9: routes: expected a sequence, got a mapping");
    assert_error("server:\n  listen: {a: 1}\nroutes: []\n",
                 "t.yaml:2:11: server.listen: expected a scalar, got a "
                 "mapping");
    assert_error("server:\n  listen:\nroutes: []\n",
                 "t.yaml:2:10: server.listen: missing value");
    assert_error("routes:\n  - [a]\n",
                 "t.yaml:2:5: routes[0]: expected a mapping, got a sequence");
    assert_error("server: {trusted_proxies: 10.0.0.0/8}\nroutes: []\n",
                 "t.yaml:1:27: server.trusted_proxies: expected a sequence, "
                 "got a scalar");
}

Test(config, unknown_key_gets_a_suggestion)
{
    assert_error("server:\n  listn: 0.0.0.0:80\nroutes: []\n",
                 "t.yaml:2:3: server: unknown key \"listn\" (did you mean "
                 "\"listen\"?)");
    assert_error("servr: {}\nroutes: []\n",
                 "t.yaml:1:1: unknown key \"servr\" (did you mean "
                 "\"server\"?)");
    assert_error("routes:\n  - id: a\n    url: http://b\n",
                 "t.yaml:3:5: routes[0]: unknown key \"url\" (did you mean "
                 "\"uri\"?)");
}

Test(config, unknown_key_far_from_any_lists_the_known_keys)
{
    assert_error("upstream:\n  colour: red\nroutes: []\n",
                 "t.yaml:2:3: upstream: unknown key \"colour\" (known: "
                 "connect_timeout, response_timeout, keepalive)");
}

Test(config, duplicate_key_is_an_error)
{
    assert_error("server:\n  workers: 2\n  workers: 3\nroutes: []\n",
                 "t.yaml:3:3: server: duplicate key \"workers\" (first at "
                 "line 2)");
    assert_error("routes: []\nroutes: []\n",
                 "t.yaml:2:1: duplicate key \"routes\" (first at line 1)");
}

/* Values. */

Test(config, bad_duration_is_an_error)
{
    assert_error("server: {client_timeout: 60}\nroutes: []\n",
                 "t.yaml:1:26: server.client_timeout: bad duration \"60\" "
                 "(expected a number and a unit: ms, s, m, h or d)");
    assert_error("server: {client_timeout: 0ms}\nroutes: []\n",
                 "t.yaml:1:26: server.client_timeout: duration must be "
                 "greater than 0, got \"0ms\"");
    assert_error("redis: {url: 'redis://r', timeout: 1.5s}\nroutes: []\n",
                 "t.yaml:1:36: redis.timeout: bad duration \"1.5s\" "
                 "(expected a number and a unit: ms, s, m, h or d)");
}

Test(config, bad_size_is_an_error)
{
    assert_error("server: {max_body_bytes: 8MB}\nroutes: []\n",
                 "t.yaml:1:26: server.max_body_bytes: bad size \"8MB\" "
                 "(expected a number and a unit: B, KiB, MiB or GiB)");
    assert_error("server: {max_header_bytes: 1023B}\nroutes: []\n",
                 "t.yaml:1:28: server.max_header_bytes: size must be at "
                 "least 1KiB, got \"1023B\"");
}

Test(config, bad_integer_is_an_error)
{
    assert_error("upstream: {keepalive: 100001}\nroutes: []\n",
                 "t.yaml:1:23: upstream.keepalive: bad integer \"100001\" "
                 "(expected an integer from 0 to 100000)");
    assert_error("upstream: {keepalive: +5}\nroutes: []\n",
                 "t.yaml:1:23: upstream.keepalive: bad integer \"+5\" "
                 "(expected an integer from 0 to 100000)");
    assert_error("server: {workers: 0}\nroutes: []\n",
                 "t.yaml:1:19: server.workers: bad integer \"0\" (expected "
                 "\"auto\" or an integer from 1 to 256)");
}

Test(config, bad_log_level_is_an_error)
{
    assert_error("log: {level: trace}\nroutes: []\n",
                 "t.yaml:1:14: log.level: bad log level \"trace\" (expected "
                 "debug, info, warn or error)");
}

Test(config, bad_listen_address_is_an_error)
{
    assert_error("server: {listen: 0.0.0.0}\nroutes: []\n",
                 "t.yaml:1:18: server.listen: bad listen address \"0.0.0.0\": "
                 "missing port (expected host:port or [ipv6]:port)");
    assert_error("admin: {listen: '::1:9090'}\nroutes: []\n",
                 "t.yaml:1:17: admin.listen: bad listen address \"::1:9090\": "
                 "an IPv6 address must be in brackets");
    assert_error("server: {listen: 'localhost:70000'}\nroutes: []\n",
                 "t.yaml:1:18: server.listen: bad listen address "
                 "\"localhost:70000\": the port must be from 1 to 65535");
}

Test(config, bad_cidr_is_an_error)
{
    assert_error("server:\n  trusted_proxies: [10.0.0.0/8, 10.0.0.1/8]\n"
                 "routes: []\n",
                 "t.yaml:2:33: server.trusted_proxies[1]: bad CIDR "
                 "\"10.0.0.1/8\" (expected an address, or address/prefix "
                 "with no bits set past the prefix)");
}

Test(config, redis_section_needs_a_url)
{
    assert_error("redis:\n  timeout: 10ms\nroutes: []\n",
                 "t.yaml:2:3: redis.url: required");
}

Test(config, bad_redis_url_is_an_error_that_hides_the_password)
{
    assert_error("redis: {url: 'http://r'}\nroutes: []\n",
                 "t.yaml:1:14: redis.url: bad redis url: expected "
                 "redis://[user[:password]@]host[:port][/db]");
    assert_error("redis: {url: 'rediss://r'}\nroutes: []\n",
                 "t.yaml:1:14: redis.url: bad redis url: TLS (rediss://) is "
                 "not supported");
    assert_error("redis: {url: 'redis://u:hunter2@r:0'}\nroutes: []\n",
                 "t.yaml:1:14: redis.url: bad redis url: the port must be "
                 "from 1 to 65535");
    assert_error("redis: {url: 'redis://u:hunter%zz@r'}\nroutes: []\n",
                 "t.yaml:1:14: redis.url: bad redis url: bad "
                 "percent-encoding in the password");
    assert_error("redis: {url: 'redis://r/x'}\nroutes: []\n",
                 "t.yaml:1:14: redis.url: bad redis url: bad database "
                 "number");
    assert_error("redis: {url: 'redis://:pw@'}\nroutes: []\n",
                 "t.yaml:1:14: redis.url: bad redis url: missing host");
}

/* Routes. */

Test(config, route_needs_id_and_uri)
{
    assert_error("routes:\n  - uri: http://a\n",
                 "t.yaml:2:5: routes[0].id: required");
    assert_error("routes:\n  - id: a\n", "t.yaml:2:5: routes[0].uri: required");
}

Test(config, duplicate_route_id_is_an_error)
{
    assert_error("routes:\n"
                 "  - {id: a, uri: 'http://x'}\n"
                 "  - {id: b, uri: 'http://x'}\n"
                 "  - {id: a, uri: 'http://x'}\n",
                 "t.yaml:4:10: routes[2].id: duplicate route id \"a\" (first "
                 "used by routes[0])");
}

Test(config, bad_route_id_is_an_error)
{
    assert_error("routes:\n  - {id: 'a/b', uri: 'http://x'}\n",
                 "t.yaml:2:10: routes[0].id: bad route id \"a/b\" (use "
                 "letters, digits, '_', '.' and '-')");
    assert_error("routes:\n  - {id: '', uri: 'http://x'}\n",
                 "t.yaml:2:10: routes[0].id: bad route id \"\" (use "
                 "letters, digits, '_', '.' and '-')");
}

Test(config, https_uri_is_refused)
{
    assert_error("routes:\n  - id: a\n    uri: HTTPS://x\n",
                 "t.yaml:3:10: routes[0].uri: https upstreams are not "
                 "supported");
}

Test(config, bad_uri_is_an_error)
{
    assert_error("routes:\n  - {id: a, uri: 'ftp://x'}\n",
                 "t.yaml:2:18: routes[0].uri: bad uri \"ftp://x\": expected "
                 "http://host[:port][/path]");
    assert_error("routes:\n  - {id: a, uri: 'http://x/p?q=1'}\n",
                 "t.yaml:2:18: routes[0].uri: bad uri \"http://x/p?q=1\": a "
                 "query is not allowed");
    assert_error("routes:\n  - {id: a, uri: 'http://x#top'}\n",
                 "t.yaml:2:18: routes[0].uri: bad uri \"http://x#top\": a "
                 "fragment is not allowed");
    assert_error("routes:\n  - {id: a, uri: 'http://u:p@x'}\n",
                 "t.yaml:2:18: routes[0].uri: bad uri \"http://u:p@x\": user "
                 "info is not allowed");
    assert_error("routes:\n  - {id: a, uri: 'http://:80'}\n",
                 "t.yaml:2:18: routes[0].uri: bad uri \"http://:80\": "
                 "missing host");
    assert_error("routes:\n  - {id: a, uri: 'http://x:'}\n",
                 "t.yaml:2:18: routes[0].uri: bad uri \"http://x:\": the "
                 "port must be from 1 to 65535");
    assert_error("routes:\n  - {id: a, uri: 'http://[1.2.3.4]'}\n",
                 "t.yaml:2:18: routes[0].uri: bad uri \"http://[1.2.3.4]\": "
                 "bad IPv6 address");
    assert_error("routes:\n  - {id: a, uri: 'http://x/a b'}\n",
                 "t.yaml:2:18: routes[0].uri: bad uri \"http://x/a b\": the "
                 "path contains a space or control character");
}

Test(config, unknown_predicate_or_filter_gets_a_suggestion)
{
    assert_error("routes:\n"
                 "  - id: a\n"
                 "    uri: http://x\n"
                 "    filters: [StripPrefx=1]\n",
                 "t.yaml:4:15: routes[0].filters[0]: unknown filter "
                 "\"StripPrefx\" (did you mean \"StripPrefix\"?)");
    assert_error("routes:\n"
                 "  - id: a\n"
                 "    uri: http://x\n"
                 "    predicates:\n"
                 "      - name: path\n"
                 "        args: {patterns: /a}\n",
                 "t.yaml:5:15: routes[0].predicates[0]: unknown predicate "
                 "\"path\" (did you mean \"Path\"?)");
    assert_error("routes:\n"
                 "  - id: a\n"
                 "    uri: http://x\n"
                 "    predicates: [Cookie=a]\n",
                 "t.yaml:4:18: routes[0].predicates[0]: unknown predicate "
                 "\"Cookie\" (known: Path, Method, Host, Header, Query, "
                 "RemoteAddr)");
}

Test(config, predicate_in_the_filter_list_is_named_as_such)
{
    assert_error("routes:\n"
                 "  - id: a\n"
                 "    uri: http://x\n"
                 "    filters: [Path=/a]\n",
                 "t.yaml:4:15: routes[0].filters[0]: unknown filter \"Path\" "
                 "(Path is a predicate)");
}

Test(config, wrong_argument_count_is_an_error)
{
    assert_error("routes:\n"
                 "  - id: a\n"
                 "    uri: http://x\n"
                 "    predicates: [Header]\n",
                 "t.yaml:4:18: routes[0].predicates[0]: Header takes 1 to 2 "
                 "arguments (header, regexp), got 0");
    assert_error("routes:\n"
                 "  - id: a\n"
                 "    uri: http://x\n"
                 "    filters: [PreserveHostHeader=yes]\n",
                 "t.yaml:4:15: routes[0].filters[0]: PreserveHostHeader takes "
                 "no arguments, got 1");
    assert_error("routes:\n"
                 "  - id: a\n"
                 "    uri: http://x\n"
                 "    filters: [RewritePath=/a]\n",
                 "t.yaml:4:15: routes[0].filters[0]: RewritePath takes 2 "
                 "arguments (regexp, replacement), got 1");
    assert_error("routes:\n"
                 "  - id: a\n"
                 "    uri: http://x\n"
                 "    predicates:\n"
                 "      - {name: Path, args: {patterns: []}}\n",
                 "t.yaml:5:9: routes[0].predicates[0]: Path takes 1 or more "
                 "arguments (patterns), got 0");
}

Test(config, empty_shortcut_argument_is_an_error)
{
    assert_error("routes:\n"
                 "  - id: a\n"
                 "    uri: http://x\n"
                 "    predicates: ['Method=GET,,POST']\n",
                 "t.yaml:4:18: routes[0].predicates[0]: Method: argument 2 "
                 "is empty");
}

Test(config, long_form_arguments_are_checked_against_the_spec)
{
    assert_error("routes:\n"
                 "  - id: a\n"
                 "    uri: http://x\n"
                 "    predicates:\n"
                 "      - name: Header\n"
                 "        args: {header: X-A, regex: a}\n",
                 "t.yaml:6:29: routes[0].predicates[0].args: unknown key "
                 "\"regex\" (did you mean \"regexp\"?)");
    assert_error("routes:\n"
                 "  - id: a\n"
                 "    uri: http://x\n"
                 "    predicates:\n"
                 "      - name: Header\n"
                 "        args: {regexp: a}\n",
                 "t.yaml:5:9: routes[0].predicates[0]: Header: missing "
                 "argument \"header\"");
    assert_error("routes:\n"
                 "  - id: a\n"
                 "    uri: http://x\n"
                 "    predicates:\n"
                 "      - name: Header\n"
                 "        args: {header: [a, b]}\n",
                 "t.yaml:6:24: routes[0].predicates[0].args.header: expected "
                 "a scalar, got a sequence");
    assert_error("routes:\n"
                 "  - id: a\n"
                 "    uri: http://x\n"
                 "    filters:\n"
                 "      - {name: AddRequestHeader, arg: {name: a, value: b}}\n",
                 "t.yaml:5:34: routes[0].filters[0]: unknown key \"arg\" (did "
                 "you mean \"args\"?)");
    assert_error("routes:\n"
                 "  - id: a\n"
                 "    uri: http://x\n"
                 "    filters:\n"
                 "      - args: {name: a}\n",
                 "t.yaml:5:9: routes[0].filters[0].name: required");
    assert_error("routes:\n"
                 "  - id: a\n"
                 "    uri: http://x\n"
                 "    filters:\n"
                 "      - {name: SetPath, args: [/a]}\n",
                 "t.yaml:5:31: routes[0].filters[0].args: expected a "
                 "mapping, got a sequence");
    assert_error("routes:\n"
                 "  - id: a\n"
                 "    uri: http://x\n"
                 "    filters:\n"
                 "      - [StripPrefix]\n",
                 "t.yaml:5:9: routes[0].filters[0]: expected \"Name=args\" "
                 "or a mapping with name and args, got a sequence");
}

Test(config, argument_errors_of_the_module_follow_the_key_path)
{
    assert_error_prefix("routes:\n"
                        "  - id: a\n"
                        "    uri: http://x\n"
                        "    filters: [StripPrefix=x]\n",
                        "t.yaml:4:15: routes[0].filters[0]: StripPrefix",
                        "\"x\"");
    assert_error_prefix("routes:\n"
                        "  - id: a\n"
                        "    uri: http://x\n"
                        "    predicates:\n"
                        "      - Path=/ok\n"
                        "      - Path=no-slash\n",
                        "t.yaml:6:9: routes[0].predicates[1]: Path",
                        "no-slash");
    assert_error_prefix("routes:\n"
                        "  - id: a\n"
                        "    uri: http://x\n"
                        "    predicates:\n"
                        "      - name: Header\n"
                        "        args: {header: X-A, regexp: '(a'}\n",
                        "t.yaml:5:9: routes[0].predicates[0]: Header", "(a");
}

Test(config, three_mistakes_in_one_route_are_three_errors)
{
    struct config_errors e;
    struct config *cfg = parse("routes:\n"
                               "  - id: a\n"
                               "    uri: http://x\n"
                               "    predicates: [Pth=/a, Method=GET]\n"
                               "    filters: [StripPrefix=1, SetPth=/b]\n"
                               "    response_timeout: soon\n",
                               &e);

    cr_assert_null(cfg);
    cr_assert_eq(e.n, 3);
    cr_assert_str_eq(e.v[0], "t.yaml:4:18: routes[0].predicates[0]: unknown "
                             "predicate \"Pth\" (did you mean \"Path\"?)");
    cr_assert_str_eq(e.v[1], "t.yaml:5:30: routes[0].filters[1]: unknown "
                             "filter \"SetPth\" (did you mean \"SetPath\"?)");
    cr_assert_str_eq(e.v[2], "t.yaml:6:23: routes[0].response_timeout: bad "
                             "duration \"soon\" (expected a number and a "
                             "unit: ms, s, m, h or d)");
    config_errors_deinit(&e);
}

Test(config, filter_without_arguments_refuses_any_args_key)
{
    assert_error("routes:\n"
                 "  - id: a\n"
                 "    uri: http://x\n"
                 "    filters:\n"
                 "      - {name: PreserveHostHeader, args: {on: yes}}\n",
                 "t.yaml:5:43: routes[0].filters[0].args: unknown key \"on\" "
                 "(known: none)");
}

Test(config, empty_list_item_is_an_error)
{
    assert_error("routes:\n"
                 "  - id: a\n"
                 "    uri: http://x\n"
                 "    predicates:\n"
                 "      -\n",
                 "t.yaml:5:8: routes[0].predicates[0]: expected "
                 "\"Name=args\" or a mapping with name and args, got nothing");
}

Test(config, workers_auto_means_one_per_core)
{
    struct config *cfg = parse_ok("server: {workers: auto}\nroutes: []\n");

    cr_assert_eq(cfg->server.workers, 0);
    config_unref(cfg);
    cfg = parse_ok("server: {workers: 256}\nroutes: []\n");
    cr_assert_eq(cfg->server.workers, 256);
    config_unref(cfg);
}
