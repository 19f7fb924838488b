#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "accesslog.h"
#include "config.h"
#include "config_test.h"
#include "diff.h"
#include "log.h"
#include "netaddr.h"
#include "xmalloc.h"

/* Every test names its text "t.yaml", so that messages are exact. */
/* The text must be refused with exactly the one message 'want'. */
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

static const char full_yaml[] =
    "server:\n"
    "  listen: '[::]:8443'\n"
    "  workers: 4\n"
    "  trusted_proxies: [127.0.0.1/32, 10.0.0.0/8, 'fd00::/8']\n"
    "  max_header_bytes: 32KiB\n"
    "  max_body_bytes: 1GiB\n"
    "  client_timeout: 2m\n"
    "  header_timeout: 3s\n"
    "  max_connections: 5000\n"
    "  max_held: 100\n"
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
    cr_assert_eq(cfg->server.header_timeout_ms, 3000);
    cr_assert_eq(cfg->server.max_connections, 5000);
    cr_assert_eq(cfg->server.max_held, 100);
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
    cr_assert_eq(cfg->server.header_timeout_ms, 10000);
    cr_assert_eq(cfg->server.max_connections, 0);
    cr_assert_eq(cfg->server.max_held, 4096);
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

/* config_load() of 'path' is refused with exactly 'want' (after the path
 * and ": "), at once: within 2 s, the test's own timeout catching a
 * loader that blocks. */
static void
assert_load_refused(const char *path, const char *want)
{
    struct config_errors e;
    char *full = xasprintf("%s: %s", path, want);

    config_errors_init(&e);
    cr_assert_null(config_load(path, &e));
    cr_assert_eq(e.n, 1);
    cr_assert_str_eq(e.v[0], full);
    free(full);
    config_errors_deinit(&e);
}

Test(config, load_refuses_a_fifo_without_waiting_for_a_writer, .timeout = 5)
{
    char dir[] = "/tmp/sluice-test-config-XXXXXX";
    char *path;

    cr_assert_not_null(mkdtemp(dir));
    path = xasprintf("%s/gateway.yaml", dir);
    cr_assert_eq(mkfifo(path, 0600), 0);
    assert_load_refused(path, "cannot read: a FIFO, not a regular file");
    unlink(path);
    rmdir(dir);
    free(path);
}

Test(config, load_refuses_a_device_through_a_symlink, .timeout = 5)
{
    char dir[] = "/tmp/sluice-test-config-XXXXXX";
    char *path;

    cr_assert_not_null(mkdtemp(dir));
    path = xasprintf("%s/gateway.yaml", dir);
    cr_assert_eq(symlink("/dev/zero", path), 0);
    assert_load_refused(path,
                        "cannot read: a character device, not a regular file");
    unlink(path);
    rmdir(dir);
    free(path);
}

Test(config, load_refuses_a_directory)
{
    char dir[] = "/tmp/sluice-test-config-XXXXXX";

    cr_assert_not_null(mkdtemp(dir));
    assert_load_refused(dir, "cannot read: a directory, not a regular file");
    rmdir(dir);
}

Test(config, load_refuses_a_file_over_the_cap, .timeout = 5)
{
    char path[] = "/tmp/sluice-test-config-XXXXXX";
    int fd = mkstemp(path);
    char *want;

    cr_assert_geq(fd, 0);
    /* Sparse: no 16 MiB written. */
    cr_assert_eq(ftruncate(fd, CONFIG_FILE_MAX + 1), 0);
    close(fd);
    want = xasprintf("cannot read: %d bytes, more than the 16 MiB a config "
                     "file may have",
                     CONFIG_FILE_MAX + 1);
    assert_load_refused(path, want);
    free(want);
    /* At the cap it is read (and parsed: a comment line of spaces). */
    cr_assert_eq(truncate(path, CONFIG_FILE_MAX), 0);
    {
        struct config_errors e;

        config_errors_init(&e);
        cr_assert_null(config_load(path, &e));
        cr_assert_geq(e.n, 1);
        cr_assert(strstr(e.v[0], "cannot read") == NULL, "%s", e.v[0]);
        config_errors_deinit(&e);
    }
    unlink(path);
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
                               "    uri: ftp://b\n"
                               "server:\n"
                               "  workers: many\n"
                               "log:\n"
                               "  levle: info\n",
                               &e);

    cr_assert_null(cfg);
    cr_assert_eq(e.n, 3);
    cr_assert_str_eq(e.v[0], "t.yaml:3:10: routes[0].uri: bad uri \"ftp://b\": "
                             "expected http[s]://host[:port][/path]");
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
                             "admin, redis, upstream, identity, limiters, "
                             "log, scg, routes)");
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
                 "t.yaml:4:2: yaml: while parsing a block mapping at line 1, "
                 "column 1; did not find expected key");
    /* Where the unfinished thing began, when that is elsewhere. */
    assert_error("routes: []\nlog: {level: \"abc\n",
                 "t.yaml:3:1: yaml: while scanning a quoted scalar at line 2, "
                 "column 14; found unexpected end of stream");
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
                 "connect_timeout, response_timeout, keepalive, tls)");
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
                 "t.yaml:2:3: redis.url: required (or sentinel, or cluster)");
}

Test(config, redis_sentinel_names_the_master_and_the_sentinels)
{
    struct config *cfg = parse_ok("redis:\n"
                                  "  sentinel:\n"
                                  "    master: mymaster\n"
                                  "    nodes: [10.0.0.1:26379, 's2:26380']\n"
                                  "    db: 3\n"
                                  "    user: app\n"
                                  "    password: pw\n"
                                  "    sentinel_password: spw\n"
                                  "routes: []\n");

    cr_assert(cfg->redis.enabled);
    cr_assert_null(cfg->redis.host);
    cr_assert_str_eq(cfg->redis.sentinel_master, "mymaster");
    cr_assert_eq(cfg->redis.nsentinels, 2);
    cr_assert_str_eq(cfg->redis.sentinels[0].host, "10.0.0.1");
    cr_assert_eq(cfg->redis.sentinels[0].port, 26379);
    cr_assert_str_eq(cfg->redis.sentinels[1].host, "s2");
    cr_assert_eq(cfg->redis.sentinels[1].port, 26380);
    cr_assert_eq(cfg->redis.db, 3);
    cr_assert_str_eq(cfg->redis.user, "app");
    cr_assert_str_eq(cfg->redis.password, "pw");
    cr_assert_str_eq(cfg->redis.sentinel_password, "spw");
    config_unref(cfg);
}

Test(config, redis_sentinel_errors_name_the_key)
{
    assert_error("redis:\n"
                 "  url: redis://r\n"
                 "  sentinel: {master: m, nodes: ['a:1']}\n"
                 "routes: []\n",
                 "t.yaml:3:3: redis.sentinel: url and sentinel are exclusive: "
                 "with Sentinel, the sentinels name the primary");
    assert_error("redis:\n  sentinel: {nodes: ['a:1']}\nroutes: []\n",
                 "t.yaml:2:13: redis.sentinel.master: required");
    assert_error("redis:\n  sentinel: {master: m, nodes: []}\nroutes: []\n",
                 "t.yaml:2:32: redis.sentinel.nodes: at least one sentinel, "
                 "as host:port");
    assert_error("redis:\n  sentinel: {master: m, nodes: [a]}\nroutes: []\n",
                 "t.yaml:2:33: redis.sentinel.nodes[0]: bad sentinel address "
                 "\"a\": missing port (expected host:port or [ipv6]:port)");
}

Test(config, redis_cluster_names_the_seed_nodes)
{
    struct config *cfg = parse_ok("redis:\n"
                                  "  cluster:\n"
                                  "    nodes: [10.0.0.1:7000, 'r2:7001']\n"
                                  "    user: app\n"
                                  "    password: pw\n"
                                  "  timeout: 80ms\n"
                                  "routes: []\n");

    cr_assert(cfg->redis.enabled);
    cr_assert_null(cfg->redis.host);
    cr_assert_null(cfg->redis.sentinel_master);
    cr_assert_eq(cfg->redis.ncluster_nodes, 2);
    cr_assert_str_eq(cfg->redis.cluster_nodes[0].host, "10.0.0.1");
    cr_assert_eq(cfg->redis.cluster_nodes[0].port, 7000);
    cr_assert_str_eq(cfg->redis.cluster_nodes[1].host, "r2");
    cr_assert_eq(cfg->redis.cluster_nodes[1].port, 7001);
    cr_assert_eq(cfg->redis.db, 0);
    cr_assert_str_eq(cfg->redis.user, "app");
    cr_assert_str_eq(cfg->redis.password, "pw");
    cr_assert_eq(cfg->redis.timeout_ms, 80);
    config_unref(cfg);
}

Test(config, redis_cluster_errors_name_the_key)
{
    assert_error("redis:\n"
                 "  url: redis://r\n"
                 "  cluster: {nodes: ['a:1']}\n"
                 "routes: []\n",
                 "t.yaml:3:3: redis.cluster: url and cluster are exclusive: "
                 "in a cluster, the nodes name the primaries");
    assert_error("redis:\n"
                 "  sentinel: {master: m, nodes: ['a:1']}\n"
                 "  cluster: {nodes: ['a:1']}\n"
                 "routes: []\n",
                 "t.yaml:3:3: redis.cluster: sentinel and cluster are "
                 "exclusive: in a cluster, the nodes name the primaries");
    assert_error("redis:\n  cluster: {user: u}\nroutes: []\n",
                 "t.yaml:2:12: redis.cluster.nodes: required");
    assert_error("redis:\n  cluster: {nodes: []}\nroutes: []\n",
                 "t.yaml:2:20: redis.cluster.nodes: at least one cluster "
                 "node, as host:port");
    assert_error("redis:\n  cluster: {nodes: [a]}\nroutes: []\n",
                 "t.yaml:2:21: redis.cluster.nodes[0]: bad cluster node "
                 "address \"a\": missing port (expected host:port or "
                 "[ipv6]:port)");
    assert_error("redis:\n  cluster: {nodes: ['a:1'], db: 2}\nroutes: []\n",
                 "t.yaml:2:33: redis.cluster.db: a Redis Cluster has "
                 "database 0 only (got 2)");
}

Test(config, redis_cluster_change_needs_a_restart)
{
    struct config *a = parse_ok("redis: {cluster: {nodes: ['a:1']}}\n"
                                "routes: []\n");
    struct config *b = parse_ok("redis: {cluster: {nodes: ['a:1', 'b:2']}}\n"
                                "routes: []\n");
    const char *names[CONFIG_RESTART_MAX];

    cr_assert_eq(config_restart_only(a, b, names), 1);
    cr_assert_str_eq(names[0], "redis");
    cr_assert_eq(config_restart_only(a, a, names), 0);
    config_unref(a);
    config_unref(b);
}

Test(config, redis_sentinel_master_is_one_word_of_at_most_255_bytes)
{
    char name[300];
    char yaml[512];
    struct config *cfg;

    memset(name, 'm', 255);
    name[255] = '\0';
    snprintf(yaml, sizeof(yaml),
             "redis:\n  sentinel: {master: %s, nodes: ['a:1']}\nroutes: []\n",
             name);
    cfg = parse_ok(yaml);
    cr_assert_eq(strlen(cfg->redis.sentinel_master), 255);
    config_unref(cfg);
    name[255] = 'm';
    name[256] = '\0';
    snprintf(yaml, sizeof(yaml),
             "redis:\n  sentinel: {master: %s, nodes: ['a:1']}\nroutes: []\n",
             name);
    assert_error(yaml, "t.yaml:2:22: redis.sentinel.master: master name "
                       "longer than 255 bytes");
    assert_error("redis:\n  sentinel: {master: 'my master', nodes: "
                 "['a:1']}\nroutes: []\n",
                 "t.yaml:2:22: redis.sentinel.master: master name with a "
                 "space or control character");
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

Test(config, https_uri_defaults_to_port_443_and_to_verifying)
{
    struct config_errors e;
    struct config *cfg = parse("routes:\n  - id: a\n    uri: HTTPS://x/b\n"
                               "  - id: c\n    uri: https://y:8443\n",
                               &e);

    cr_assert_not_null(cfg, "%s", e.n > 0 ? e.v[0] : "");
    cr_assert(cfg->routes[0].uri.https);
    cr_assert_eq(cfg->routes[0].uri.port, 443);
    cr_assert_str_eq(cfg->routes[0].uri.authority, "x");
    cr_assert_str_eq(cfg->routes[0].uri.base_path, "/b");
    cr_assert(cfg->routes[0].tls.verify);
    cr_assert_null(cfg->routes[0].tls.ca_file);
    cr_assert_str_eq(cfg->routes[1].uri.authority, "y:8443");
    cr_assert_not(cfg->server.tls.enabled);
    config_unref(cfg);
}

Test(config, a_route_tls_key_overrides_upstream_tls_one_by_one)
{
    struct config_errors e;
    struct config *cfg =
        parse("upstream:\n"
              "  tls: {ca_file: /ca.pem, cert_file: /c.pem, key_file: /k.pem}\n"
              "routes:\n"
              "  - id: a\n    uri: https://x\n"
              "  - id: b\n    uri: https://y\n    tls: {verify: false}\n"
              "  - id: c\n    uri: https://z\n    tls: {ca_file: /o.pem}\n",
              &e);

    cr_assert_not_null(cfg, "%s", e.n > 0 ? e.v[0] : "");
    cr_assert(cfg->routes[0].tls.verify);
    cr_assert_str_eq(cfg->routes[0].tls.ca_file, "/ca.pem");
    cr_assert_str_eq(cfg->routes[0].tls.key_file, "/k.pem");
    cr_assert_not(cfg->routes[1].tls.verify);
    cr_assert_str_eq(cfg->routes[1].tls.cert_file, "/c.pem");
    cr_assert(cfg->routes[2].tls.verify);
    cr_assert_str_eq(cfg->routes[2].tls.ca_file, "/o.pem");
    config_unref(cfg);
}

Test(config, a_client_certificate_needs_its_key)
{
    assert_error("upstream:\n  tls: {cert_file: /c.pem}\n"
                 "routes:\n  - {id: a, uri: 'http://x'}\n",
                 "t.yaml:2:8: upstream.tls: cert_file and key_file go "
                 "together (mutual TLS needs both)");
    assert_error("routes:\n  - id: a\n    uri: https://x\n"
                 "    tls: {key_file: /k.pem}\n",
                 "t.yaml:4:10: routes[0].tls: cert_file and key_file go "
                 "together (mutual TLS needs both)");
}

Test(config, the_tls_listener_needs_a_certificate_and_key)
{
    struct config_errors e;
    struct config *cfg = parse("server:\n  tls: {listen: 127.0.0.1:9443, "
                               "cert_file: /c.pem, key_file: /k.pem}\n"
                               "routes:\n  - {id: a, uri: 'http://x'}\n",
                               &e);

    cr_assert_not_null(cfg, "%s", e.n > 0 ? e.v[0] : "");
    cr_assert(cfg->server.tls.enabled);
    cr_assert_eq(cfg->server.tls.listen.port, 9443);
    cr_assert_str_eq(cfg->server.tls.cert_file, "/c.pem");
    config_unref(cfg);
    assert_error("server:\n  tls: {key_file: /k.pem}\n"
                 "routes:\n  - {id: a, uri: 'http://x'}\n",
                 "t.yaml:2:8: server.tls.cert_file: required");
}

Test(config, the_plain_listener_may_be_off_when_there_is_a_tls_one)
{
    struct config_errors e;
    struct config *cfg = parse("server:\n  listen: off\n"
                               "  tls: {cert_file: /c.pem, key_file: /k.pem}\n"
                               "routes:\n  - {id: a, uri: 'http://x'}\n",
                               &e);

    cr_assert_not_null(cfg, "%s", e.n > 0 ? e.v[0] : "");
    cr_assert_null(cfg->server.listen.host);
    cr_assert(cfg->server.tls.enabled);
    config_unref(cfg);
    assert_error("server:\n  listen: off\n"
                 "routes:\n  - {id: a, uri: 'http://x'}\n",
                 "t.yaml:2:3: server: listen: off needs server.tls: there "
                 "would be no listener");
}

Test(config, bad_uri_is_an_error)
{
    assert_error("routes:\n  - {id: a, uri: 'ftp://x'}\n",
                 "t.yaml:2:18: routes[0].uri: bad uri \"ftp://x\": expected "
                 "http[s]://host[:port][/path]");
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
                 "    predicates: [Version=a]\n",
                 "t.yaml:4:18: routes[0].predicates[0]: unknown predicate "
                 "\"Version\" (known: Path, Method, Host, Header, Query, "
                 "RemoteAddr, After, Before, Between, Cookie, Weight, "
                 "XForwardedRemoteAddr)");
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

Test(config, max_connections_auto_is_sized_at_start)
{
    struct config *cfg =
        parse_ok("server: {max_connections: auto}\nroutes: []\n");

    cr_assert_eq(cfg->server.max_connections, 0);
    config_unref(cfg);
    cfg = parse_ok("server: {max_connections: 1}\nroutes: []\n");
    cr_assert_eq(cfg->server.max_connections, 1);
    config_unref(cfg);
}

Test(config, max_held_must_be_a_positive_integer)
{
    assert_error("server: {max_held: 0}\nroutes: []\n",
                 "t.yaml:1:20: server.max_held: bad integer \"0\" "
                 "(expected an integer from 1 to 100000000)");
}

Test(config, max_connections_must_be_a_positive_integer)
{
    assert_error("server: {max_connections: 0}\nroutes: []\n",
                 "t.yaml:1:27: server.max_connections: bad integer \"0\" "
                 "(expected \"auto\" or an integer from 1 to 100000000)");
    assert_error("server:\n  max_connections: -1\nroutes: []\n",
                 "t.yaml:2:20: server.max_connections: bad integer \"-1\" "
                 "(expected \"auto\" or an integer from 1 to 100000000)");
    assert_error("server: {max_connections: 10k}\nroutes: []\n",
                 "t.yaml:1:27: server.max_connections: bad integer \"10k\" "
                 "(expected \"auto\" or an integer from 1 to 100000000)");
    assert_error("server: {max_connections: 100000001}\nroutes: []\n",
                 "t.yaml:1:27: server.max_connections: bad integer "
                 "\"100000001\" (expected \"auto\" or an integer from 1 to "
                 "100000000)");
}

Test(config, header_timeout_is_a_positive_duration)
{
    struct config *cfg =
        parse_ok("server: {header_timeout: 500ms}\nroutes: []\n");

    cr_assert_eq(cfg->server.header_timeout_ms, 500);
    config_unref(cfg);
    assert_error("server: {header_timeout: 10}\nroutes: []\n",
                 "t.yaml:1:26: server.header_timeout: bad duration \"10\" "
                 "(expected a number and a unit: ms, s, m, h or d)");
    assert_error("server:\n  header_timeout: 0s\nroutes: []\n",
                 "t.yaml:2:19: server.header_timeout: duration must be "
                 "greater than 0, got \"0s\"");
}

/* Rate limiting: identity:, limiters: and RequestRateLimiter. */

static const char rl_yaml[] =
    "identity:\n"
    "  user_header: X-Auth-User\n"
    "  role_header: X-Auth-Role\n"
    "  ipv6_prefix: 56\n"
    "redis:\n"
    "  url: redis://127.0.0.1:6379\n"
    "  key_prefix: 'gw1:'\n"
    "  max_in_flight: 64\n"
    "limiters:\n"
    "  per-user:   { algorithm: token_bucket, rate: 10/s, burst: 20 }\n"
    "  per-ip:     { algorithm: gcra, rate: 5/s, burst: 10 }\n"
    "  admin-ip:   { algorithm: sliding_window, rules: [ { limit: 5, "
    "window: 1s }, { limit: 100, window: 1m } ] }\n"
    "  smooth:     { algorithm: leaky_bucket, rate: 10/s, burst: 50, mode: "
    "delay, max_delay: 2s }\n"
    "routes:\n"
    "  - id: images\n"
    "    uri: http://127.0.0.1:9000\n"
    "    filters:\n"
    "      - StripPrefix=1\n"
    "      - name: RequestRateLimiter\n"
    "        args:\n"
    "          tiers:\n"
    "            - when: { role: superadmin }\n"
    "              limiter: none\n"
    "            - when: { role: admin }\n"
    "              key: ip\n"
    "              limiter: admin-ip\n"
    "            - key: user\n"
    "              limiter: per-user\n"
    "            - key: ip + header:X-Api-Key\n"
    "              limiter: per-ip\n"
    "          cost: 2\n"
    "          on_redis_error: deny\n"
    "          dry_run: true\n"
    "          empty_key: allow\n"
    "          scope: shared.images\n"
    "          backend: local\n"
    "          headers: ietf\n"
    "          status: 503\n"
    "      - name: RequestRateLimiter\n"
    "        args: { key: route, limiter: smooth }\n";

static bool
is_tag(const char *t)
{
    if (strlen(t) != 8) {
        return false;
    }
    for (; *t != '\0'; t++) {
        if (!((*t >= '0' && *t <= '9') || (*t >= 'a' && *t <= 'f'))) {
            return false;
        }
    }
    return true;
}

Test(config, rate_limiting_example_round_trips_every_field)
{
    struct config *cfg = parse_ok(rl_yaml);
    const struct limiter_def *l = cfg->limiters;
    const struct route *r = &cfg->routes[0];
    const struct rate_limit_conf *rl;
    const struct tier *t;

    cr_assert_str_eq(cfg->identity.user_header, "X-Auth-User");
    cr_assert_str_eq(cfg->identity.role_header, "X-Auth-Role");
    cr_assert_eq(cfg->identity.ipv6_prefix, 56);
    cr_assert_str_eq(cfg->redis.key_prefix, "gw1:");
    cr_assert_eq(cfg->redis.max_in_flight, 64);

    cr_assert_eq(cfg->nlimiters, 4);
    cr_assert_str_eq(l[0].name, "per-user");
    cr_assert_eq(l[0].algorithm, LIMIT_TOKEN_BUCKET);
    cr_assert_eq(l[0].nrules, 1);
    cr_assert_eq(l[0].rules[0].limit, 10);
    cr_assert_eq(l[0].rules[0].window_ms, 1000);
    cr_assert_eq(l[0].rules[0].burst, 20);
    cr_assert_not(l[0].delay);
    cr_assert_eq(l[0].max_delay_ms, 0);
    cr_assert(is_tag(l[0].tag), "tag \"%s\"", l[0].tag);

    cr_assert_str_eq(l[1].name, "per-ip");
    cr_assert_eq(l[1].algorithm, LIMIT_GCRA);
    cr_assert_eq(l[1].nrules, 1);
    cr_assert_eq(l[1].rules[0].limit, 5);
    cr_assert_eq(l[1].rules[0].window_ms, 1000);
    cr_assert_eq(l[1].rules[0].burst, 10);

    cr_assert_str_eq(l[2].name, "admin-ip");
    cr_assert_eq(l[2].algorithm, LIMIT_SLIDING_WINDOW);
    cr_assert_eq(l[2].nrules, 2);
    cr_assert_eq(l[2].rules[0].limit, 5);
    cr_assert_eq(l[2].rules[0].window_ms, 1000);
    cr_assert_eq(l[2].rules[0].burst, 5);
    cr_assert_eq(l[2].rules[1].limit, 100);
    cr_assert_eq(l[2].rules[1].window_ms, 60000);
    cr_assert_eq(l[2].rules[1].burst, 100);

    cr_assert_str_eq(l[3].name, "smooth");
    cr_assert_eq(l[3].algorithm, LIMIT_LEAKY_BUCKET);
    cr_assert_eq(l[3].rules[0].limit, 10);
    cr_assert_eq(l[3].rules[0].burst, 50);
    cr_assert(l[3].delay);
    cr_assert_eq(l[3].max_delay_ms, 2000);
    for (size_t i = 0; i < 4; i++) {
        cr_assert(is_tag(l[i].tag), "tag \"%s\"", l[i].tag);
        for (size_t j = 0; j < i; j++) {
            cr_assert_str_neq(l[i].tag, l[j].tag);
        }
    }

    /* filters[1] and [2] of the file are the route's rate limiters. */
    cr_assert_eq(r->nfilters, 1);
    cr_assert_eq(r->filters[0].kind, FILTER_STRIP_PREFIX);
    cr_assert_eq(r->nrate_limiters, 2);
    rl = r->rate_limiters[0];
    cr_assert_not_null(rl);
    cr_assert_eq(rl->ntiers, 4);
    cr_assert_eq(rl->cost, 2);
    cr_assert_eq(rl->on_redis_error, REDIS_FAILURE_DENY);
    cr_assert(rl->dry_run);
    cr_assert(rl->empty_key_allow);
    cr_assert_str_eq(rl->scope, "shared.images");
    cr_assert(rl->local);
    cr_assert_eq(rl->headers, RL_HEADERS_IETF);
    cr_assert_eq(rl->deny_status, 503);

    t = &rl->tiers[0];
    cr_assert_str_eq(t->when_role, "superadmin");
    cr_assert_null(t->limiter);
    cr_assert_eq(t->key.nparts, 0);
    cr_assert_null(t->key.text);
    cr_assert_str_eq(t->label, "0");
    t = &rl->tiers[1];
    cr_assert_str_eq(t->when_role, "admin");
    cr_assert_eq(t->limiter, &l[2]);
    cr_assert_eq(t->key.nparts, 1);
    cr_assert_eq(t->key.parts[0].kind, KEY_IP);
    cr_assert_null(t->key.parts[0].name);
    cr_assert_str_eq(t->key.text, "ip");
    cr_assert_str_eq(t->label, "1");
    t = &rl->tiers[2];
    cr_assert_null(t->when_role);
    cr_assert_eq(t->limiter, &l[0]);
    cr_assert_eq(t->key.parts[0].kind, KEY_USER);
    cr_assert_str_eq(t->key.text, "user");
    cr_assert_str_eq(t->label, "2");
    t = &rl->tiers[3];
    cr_assert_null(t->when_role);
    cr_assert_eq(t->limiter, &l[1]);
    cr_assert_eq(t->key.nparts, 2);
    cr_assert_eq(t->key.parts[0].kind, KEY_IP);
    cr_assert_eq(t->key.parts[1].kind, KEY_HEADER);
    /* Header names are case-insensitive: one spelling in the key. */
    cr_assert_str_eq(t->key.parts[1].name, "x-api-key");
    cr_assert_str_eq(t->key.text, "ip+header:x-api-key");
    cr_assert_str_eq(t->label, "3");

    rl = r->rate_limiters[1];
    cr_assert_eq(rl->ntiers, 1);
    cr_assert_null(rl->tiers[0].when_role);
    cr_assert_eq(rl->tiers[0].limiter, &l[3]);
    cr_assert_eq(rl->tiers[0].key.parts[0].kind, KEY_ROUTE);
    cr_assert_str_eq(rl->tiers[0].key.text, "route");
    cr_assert_str_eq(rl->tiers[0].label, "0");
    /* The defaults; redis: is configured, so the backend is Redis. */
    cr_assert_str_eq(rl->scope, "images");
    cr_assert_not(rl->local);
    cr_assert_eq(rl->cost, 1);
    cr_assert_eq(rl->on_redis_error, REDIS_FAILURE_LOCAL);
    cr_assert_not(rl->dry_run);
    cr_assert_not(rl->empty_key_allow);
    cr_assert_eq(rl->headers, RL_HEADERS_BOTH);
    cr_assert_eq(rl->deny_status, 429);
    config_unref(cfg);
}

Test(config, identity_and_new_redis_keys_have_defaults)
{
    struct config *cfg = parse_ok("redis: {url: 'redis://r'}\nroutes: []\n");

    cr_assert_str_eq(cfg->identity.user_header, "X-User-Id");
    cr_assert_str_eq(cfg->identity.role_header, "X-User-Role");
    cr_assert_eq(cfg->identity.ipv6_prefix, 64);
    cr_assert_str_eq(cfg->redis.key_prefix, "sluice:");
    cr_assert_eq(cfg->redis.max_in_flight, 1024);
    cr_assert_eq(cfg->nlimiters, 0);
    cr_assert_null(cfg->limiters);
    config_unref(cfg);
    cfg = parse_ok("redis: {url: 'redis://r', key_prefix: ''}\n"
                   "limiters:\n"
                   "routes: []\n");
    cr_assert_str_eq(cfg->redis.key_prefix, "");
    cr_assert_eq(cfg->nlimiters, 0);
    config_unref(cfg);
}

Test(config, short_form_without_redis_defaults_to_the_local_backend)
{
    struct config *cfg =
        parse_ok("limiters:\n"
                 "  l: {algorithm: fixed_window, limit: 3, window: 10s}\n"
                 "routes:\n"
                 "  - id: r1\n"
                 "    uri: http://x\n"
                 "    filters:\n"
                 "      - name: RequestRateLimiter\n"
                 "        args: {key: 'cookie:sid', limiter: l}\n");
    const struct rate_limit_conf *rl = cfg->routes[0].rate_limiters[0];

    cr_assert(rl->local);
    cr_assert_str_eq(rl->scope, "r1");
    cr_assert_eq(rl->tiers[0].key.parts[0].kind, KEY_COOKIE);
    /* Cookie and query names are case-sensitive: kept as written. */
    cr_assert_str_eq(rl->tiers[0].key.parts[0].name, "sid");
    cr_assert_eq(cfg->limiters[0].rules[0].limit, 3);
    cr_assert_eq(cfg->limiters[0].rules[0].window_ms, 10000);
    cr_assert_eq(cfg->limiters[0].rules[0].burst, 3);
    config_unref(cfg);
}

Test(config, limiter_forms_cover_every_algorithm_and_rule_shape)
{
    struct config *cfg = parse_ok(
        "limiters:\n"
        "  a: {algorithm: fixed_window, limit: 100, window: 1m}\n"
        "  b: {algorithm: sliding_window_counter, rules: [{limit: 1, window: "
        "250ms}]}\n"
        "  c: {algorithm: token_bucket, rate: 7/m}\n"
        "  d: {algorithm: gcra, rules: [{rate: 2/s}, {rate: 100/h, burst: "
        "5}]}\n"
        "  e: {algorithm: token_bucket, rate: 1/d, burst: 1, mode: deny}\n"
        "  f: {algorithm: gcra, rate: 1/s, mode: delay, max_delay: 1ms}\n"
        "routes: []\n");
    const struct limiter_def *l = cfg->limiters;

    cr_assert_eq(cfg->nlimiters, 6);
    cr_assert_eq(l[0].algorithm, LIMIT_FIXED_WINDOW);
    cr_assert_eq(l[0].rules[0].window_ms, 60000);
    cr_assert_eq(l[1].algorithm, LIMIT_SLIDING_WINDOW_COUNTER);
    cr_assert_eq(l[1].nrules, 1);
    cr_assert_eq(l[1].rules[0].window_ms, 250);
    /* The burst defaults to the rate's count. */
    cr_assert_eq(l[2].rules[0].limit, 7);
    cr_assert_eq(l[2].rules[0].window_ms, 60000);
    cr_assert_eq(l[2].rules[0].burst, 7);
    cr_assert_eq(l[3].nrules, 2);
    cr_assert_eq(l[3].rules[0].burst, 2);
    cr_assert_eq(l[3].rules[1].limit, 100);
    cr_assert_eq(l[3].rules[1].window_ms, 3600000);
    cr_assert_eq(l[3].rules[1].burst, 5);
    cr_assert_eq(l[4].rules[0].window_ms, 86400000);
    cr_assert_not(l[4].delay);
    cr_assert(l[5].delay);
    cr_assert_eq(l[5].max_delay_ms, 1);
    /* Each carries its RateLimit-Policy, built once here. */
    for (size_t i = 0; i < cfg->nlimiters; i++) {
        cr_assert_not_null(l[i].policy, "limiter %s has no policy", l[i].name);
    }
    cr_assert_str_eq(l[0].policy, "\"a\";q=100;w=60");
    cr_assert_str_eq(l[2].policy, "\"c\";q=7;w=60");
    cr_assert_str_eq(l[3].policy, "\"d\";q=2;w=1, \"d/1\";q=5;w=180");
    config_unref(cfg);
}

/* The tag of the only limiter of "limiters: {x: <def>}". */
static void
tag_of(const char *def, char *tag)
{
    char *yaml = NULL;
    struct config *cfg;

    yaml = xasprintf("limiters:\n  x: %s\nroutes: []\n", def);
    cfg = parse_ok(yaml);
    memcpy(tag, cfg->limiters[0].tag, 9);
    config_unref(cfg);
    free(yaml);
}

Test(config, limiter_tag_changes_with_any_rule_but_not_with_the_name)
{
    static const char *const variants[] = {
        "{algorithm: token_bucket, rate: 10/s, burst: 21}",
        "{algorithm: token_bucket, rate: 11/s, burst: 20}",
        "{algorithm: token_bucket, rate: 10/m, burst: 20}",
        "{algorithm: gcra, rate: 10/s, burst: 20}",
        "{algorithm: token_bucket, rate: 10/s, burst: 20, mode: delay, "
        "max_delay: 1s}",
        "{algorithm: token_bucket, rate: 10/s, burst: 20, mode: delay, "
        "max_delay: 2s}",
        "{algorithm: token_bucket, rules: [{rate: 10/s, burst: 20}, {rate: "
        "100/m}]}",
        "{algorithm: fixed_window, limit: 10, window: 1s}",
        "{algorithm: sliding_window, limit: 10, window: 1s}",
    };
    char base[9];
    char same[9];
    char tags[sizeof(variants) / sizeof(variants[0])][9];
    struct config *cfg;

    tag_of("{algorithm: token_bucket, rate: 10/s, burst: 20}", base);
    cr_assert(is_tag(base), "tag \"%s\"", base);
    /* Written differently, defined the same. */
    tag_of("{algorithm: token_bucket, rules: [{rate: 10/s, burst: 20}], "
           "mode: deny}",
           same);
    cr_assert_str_eq(same, base);
    cfg = parse_ok("limiters:\n"
                   "  a: {algorithm: token_bucket, rate: 10/s, burst: 20}\n"
                   "  b: {algorithm: token_bucket, rate: 10/s, burst: 20}\n"
                   "routes: []\n");
    cr_assert_str_eq(cfg->limiters[0].tag, base);
    cr_assert_str_eq(cfg->limiters[1].tag, base);
    config_unref(cfg);
    for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++) {
        tag_of(variants[i], tags[i]);
        cr_assert_str_neq(tags[i], base, "%s", variants[i]);
        for (size_t j = 0; j < i; j++) {
            cr_assert_str_neq(tags[i], tags[j], "%s", variants[i]);
        }
    }
}

/*
 * The layout the script stores a rule's state in is part of the tag: with
 * layout 2 (one string, lua/README.md) the keys of the hash-state
 * algorithms took new names, so a new script never reads a hash that an
 * older gateway wrote. sliding_window's layout, and so its tag, never
 * changed. The figures are pinned: a changed tag resets every client's
 * state in Redis, so it must never change by accident.
 */
Test(config, limiter_tag_includes_the_state_layout)
{
    char tag[9];

    tag_of("{algorithm: token_bucket, rate: 10/s, burst: 20}", tag);
    /* Layout 1 gave FNV-1a of "token_bucket|deny|0|10/1000/20". */
    cr_assert_str_neq(tag, "c1c86ae9");
    cr_assert_str_eq(tag, "9d72e707");
    tag_of("{algorithm: sliding_window, limit: 10, window: 1s}", tag);
    cr_assert_str_eq(tag, "ddd8b781");
}

Test(config, keys_combine_parts_and_are_normalised)
{
    struct config *cfg = parse_ok(
        "limiters:\n"
        "  l: {algorithm: gcra, rate: 1/s}\n"
        "routes:\n"
        "  - id: r\n"
        "    uri: http://x\n"
        "    filters:\n"
        "      - name: RequestRateLimiter\n"
        "        args:\n"
        "          tiers:\n"
        "            - {key: ' user + role ', limiter: l}\n"
        "            - {key: 'query:api_key+cookie:Sess+header:X-A+route', "
        "limiter: l}\n"
        "            - {key: 'header:X-A+header:X-B', limiter: l}\n"
        "            - {when: {role: ops}, limiter: none}\n"
        "            - {key: ip, limiter: none}\n");
    const struct rate_limit_conf *rl = cfg->routes[0].rate_limiters[0];
    const struct key_spec *k;

    cr_assert_eq(rl->ntiers, 5);
    k = &rl->tiers[0].key;
    cr_assert_eq(k->nparts, 2);
    cr_assert_eq(k->parts[0].kind, KEY_USER);
    cr_assert_eq(k->parts[1].kind, KEY_ROLE);
    cr_assert_str_eq(k->text, "user+role");
    k = &rl->tiers[1].key;
    cr_assert_eq(k->nparts, 4);
    cr_assert_eq(k->parts[0].kind, KEY_QUERY);
    cr_assert_str_eq(k->parts[0].name, "api_key");
    cr_assert_eq(k->parts[1].kind, KEY_COOKIE);
    cr_assert_str_eq(k->parts[1].name, "Sess");
    cr_assert_eq(k->parts[2].kind, KEY_HEADER);
    cr_assert_str_eq(k->parts[2].name, "x-a");
    cr_assert_eq(k->parts[3].kind, KEY_ROUTE);
    cr_assert_null(k->parts[3].name);
    cr_assert_str_eq(k->text, "query:api_key+cookie:Sess+header:x-a+route");
    /* Two headers are two parts, not a duplicate. */
    cr_assert_str_eq(rl->tiers[2].key.text, "header:x-a+header:x-b");
    cr_assert_str_eq(rl->tiers[3].when_role, "ops");
    cr_assert_null(rl->tiers[3].limiter);
    cr_assert_eq(rl->tiers[3].key.nparts, 0);
    /* "none" with a key: applies only when the key resolves. */
    cr_assert_null(rl->tiers[4].limiter);
    cr_assert_str_eq(rl->tiers[4].key.text, "ip");
    config_unref(cfg);
}

Test(config, routes_naming_one_scope_share_it)
{
    struct config *cfg =
        parse_ok("limiters: {l: {algorithm: gcra, rate: 1/s}}\n"
                 "routes:\n"
                 "  - id: a\n"
                 "    uri: http://x\n"
                 "    filters:\n"
                 "      - name: RequestRateLimiter\n"
                 "        args: {key: ip, limiter: l, scope: api}\n"
                 "  - id: b\n"
                 "    uri: http://x\n"
                 "    filters:\n"
                 "      - name: RequestRateLimiter\n"
                 "        args: {key: ip, limiter: l, scope: api}\n"
                 "      - name: RequestRateLimiter\n"
                 "        args: {key: ip, limiter: l, scope: route}\n");

    cr_assert_str_eq(cfg->routes[0].rate_limiters[0]->scope, "api");
    cr_assert_str_eq(cfg->routes[1].rate_limiters[0]->scope, "api");
    cr_assert_str_eq(cfg->routes[1].rate_limiters[1]->scope, "b");
    cr_assert_eq(cfg->routes[0].rate_limiters[0]->tiers[0].limiter,
                 cfg->routes[1].rate_limiters[1]->tiers[0].limiter);
    config_unref(cfg);
}

/* A route with scope: route keeps its budget under its id, so a scope
 * named after another route's id shared that route's buckets without a
 * word: the two limits silently became one. Its own id is harmless. */
Test(config, a_scope_named_after_another_route_is_refused)
{
    struct config *cfg;

    assert_error("limiters: {l: {algorithm: gcra, rate: 1/s}}\n"
                 "routes:\n"
                 "  - id: b\n"
                 "    uri: http://x\n"
                 "    filters:\n"
                 "      - name: RequestRateLimiter\n"
                 "        args: {key: ip, limiter: l, scope: api}\n"
                 "  - id: api\n"
                 "    uri: http://x\n"
                 "    filters:\n"
                 "      - name: RequestRateLimiter\n"
                 "        args: {key: ip, limiter: l}\n",
                 "t.yaml:7:44: routes[0].filters[0].args.scope: scope "
                 "\"api\" is the id of routes[1]: a route's own budget "
                 "(scope: route) is kept under its id, so the two would "
                 "share buckets; name the scope after no route");
    cfg = parse_ok("limiters: {l: {algorithm: gcra, rate: 1/s}}\n"
                   "routes:\n"
                   "  - id: api\n"
                   "    uri: http://x\n"
                   "    filters:\n"
                   "      - name: RequestRateLimiter\n"
                   "        args: {key: ip, limiter: l, scope: api}\n");
    cr_assert_str_eq(cfg->routes[0].rate_limiters[0]->scope, "api");
    config_unref(cfg);
}

Test(config, booleans_take_the_yaml_spellings)
{
    struct config *cfg =
        parse_ok("limiters: {l: {algorithm: gcra, rate: 1/s}}\n"
                 "routes:\n"
                 "  - id: a\n"
                 "    uri: http://x\n"
                 "    filters:\n"
                 "      - {name: RequestRateLimiter, args: {key: ip, "
                 "limiter: l, dry_run: yes}}\n"
                 "      - {name: RequestRateLimiter, args: {key: ip, "
                 "limiter: l, dry_run: False}}\n");

    cr_assert(cfg->routes[0].rate_limiters[0]->dry_run);
    cr_assert_not(cfg->routes[0].rate_limiters[1]->dry_run);
    config_unref(cfg);
}

/* Errors: identity: and redis:. */

Test(config, bad_identity_is_an_error)
{
    assert_error("identity: {user_header: 'X User'}\nroutes: []\n",
                 "t.yaml:1:25: identity.user_header: bad name "
                 "\"X User\" (expected letters, digits and "
                 "!#$%&'*+-.^_`|~)");
    assert_error("identity: {ipv6_prefix: 0}\nroutes: []\n",
                 "t.yaml:1:25: identity.ipv6_prefix: bad integer \"0\" "
                 "(expected an integer from 1 to 128)");
    assert_error("identity: {ipv6_prefix: 129}\nroutes: []\n",
                 "t.yaml:1:25: identity.ipv6_prefix: bad integer \"129\" "
                 "(expected an integer from 1 to 128)");
    assert_error("identity: {user_heder: X}\nroutes: []\n",
                 "t.yaml:1:12: identity: unknown key \"user_heder\" (did you "
                 "mean \"user_header\"?)");
}

Test(config, bad_redis_key_prefix_or_in_flight_cap_is_an_error)
{
    assert_error("redis: {url: 'redis://r', key_prefix: 'a{b}:'}\n"
                 "routes: []\n",
                 "t.yaml:1:39: redis.key_prefix: bad key prefix \"a{b}:\" "
                 "(no braces, spaces or control characters)");
    assert_error("redis: {url: 'redis://r', key_prefix: 'a b'}\n"
                 "routes: []\n",
                 "t.yaml:1:39: redis.key_prefix: bad key prefix \"a b\" "
                 "(no braces, spaces or control characters)");
    assert_error("redis: {url: 'redis://r', key_prefix: "
                 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                 "aaaaa}\nroutes: []\n",
                 "t.yaml:1:39: redis.key_prefix: key prefix is longer than "
                 "64 bytes");
    assert_error("redis: {url: 'redis://r', max_in_flight: 0}\nroutes: []\n",
                 "t.yaml:1:42: redis.max_in_flight: bad integer \"0\" "
                 "(expected an integer from 1 to 1000000)");
}

/* Errors: limiters:. */

Test(config, limiters_must_be_a_mapping_of_valid_names)
{
    assert_error("limiters: [a]\nroutes: []\n",
                 "t.yaml:1:11: limiters: expected a mapping, got a sequence");
    assert_error("limiters:\n  a/b: {algorithm: gcra, rate: 1/s}\n"
                 "routes: []\n",
                 "t.yaml:2:3: limiters: bad limiter name \"a/b\" (use up to "
                 "64 letters, digits, '_', '.' and '-')");
    assert_error("limiters:\n  none: {algorithm: gcra, rate: 1/s}\n"
                 "routes: []\n",
                 "t.yaml:2:3: limiters: \"none\" is reserved: a tier with "
                 "limiter: none is never limited");
    /* It would count in the buckets of route dup's redis-rate-limiter. */
    assert_error("limiters:\n  scg.dup: {algorithm: gcra, rate: 1/s}\n"
                 "routes: []\n",
                 "t.yaml:2:3: limiters: bad limiter name \"scg.dup\": names "
                 "starting with \"scg.\" are the redis-rate-limiter's");
    assert_error("limiters:\n"
                 "  a: {algorithm: gcra, rate: 1/s}\n"
                 "  a: {algorithm: gcra, rate: 2/s}\n"
                 "routes: []\n",
                 "t.yaml:3:3: limiters: duplicate limiter \"a\" (first at "
                 "line 2)");
    assert_error("limiters:\n  a: 5\nroutes: []\n",
                 "t.yaml:2:6: limiters.a: expected a mapping, got a scalar");
    assert_error("limiters:\n  a: {rate: 1/s}\nroutes: []\n",
                 "t.yaml:2:6: limiters.a.algorithm: required");
}

Test(config, unknown_algorithm_gets_a_suggestion)
{
    assert_error("limiters:\n  a: {algorithm: token_bukket, rate: 1/s}\n"
                 "routes: []\n",
                 "t.yaml:2:18: limiters.a.algorithm: unknown algorithm "
                 "\"token_bukket\" (did you mean \"token_bucket\"?)");
    assert_error("limiters:\n  a: {algorithm: magic, rate: 1/s}\n"
                 "routes: []\n",
                 "t.yaml:2:18: limiters.a.algorithm: unknown algorithm "
                 "\"magic\" (known: fixed_window, sliding_window, "
                 "sliding_window_counter, token_bucket, leaky_bucket, gcra)");
    assert_error("limiters:\n  a: {algorithm: gcra, rte: 1/s}\n"
                 "routes: []\n",
                 "t.yaml:2:24: limiters.a: unknown key \"rte\" (did you mean "
                 "\"rate\"?)");
}

Test(config, keys_of_the_other_algorithm_family_are_errors)
{
    assert_error("limiters:\n"
                 "  a: {algorithm: fixed_window, rate: 1/s}\n"
                 "routes: []\n",
                 "t.yaml:2:38: limiters.a.rate: fixed_window takes limit and "
                 "window; rate and burst are for token_bucket, leaky_bucket "
                 "and gcra");
    assert_error("limiters:\n"
                 "  a: {algorithm: gcra, rate: 5/s, window: 1s}\n"
                 "routes: []\n",
                 "t.yaml:2:43: limiters.a.window: gcra takes rate and burst, "
                 "not limit and window");
    assert_error("limiters:\n"
                 "  a: {algorithm: sliding_window, rules: [{limit: 1, window: "
                 "1s, burst: 2}]}\n"
                 "routes: []\n",
                 "t.yaml:2:65: limiters.a.rules[0]: unknown key \"burst\" "
                 "(known: limit, window)");
}

Test(config, rules_and_inline_rule_are_exclusive_and_complete)
{
    assert_error("limiters:\n"
                 "  a: {algorithm: gcra, rate: 1/s, rules: [{rate: 2/s}]}\n"
                 "routes: []\n",
                 "t.yaml:2:42: limiters.a.rules: give either rules or rate "
                 "and burst, not both");
    assert_error("limiters:\n  a: {algorithm: fixed_window, limit: 5}\n"
                 "routes: []\n",
                 "t.yaml:2:6: limiters.a.window: required");
    assert_error("limiters:\n  a: {algorithm: gcra, burst: 5}\n"
                 "routes: []\n",
                 "t.yaml:2:6: limiters.a.rate: required");
    assert_error("limiters:\n  a: {algorithm: gcra, rules: []}\n"
                 "routes: []\n",
                 "t.yaml:2:31: limiters.a.rules: expected 1 to 8 rules, "
                 "got 0");
    assert_error("limiters:\n"
                 "  a: {algorithm: gcra, rules: [{rate: 1/s}, {rate: 1/s}, "
                 "{rate: 1/s}, {rate: 1/s}, {rate: 1/s}, {rate: 1/s}, "
                 "{rate: 1/s}, {rate: 1/s}, {rate: 1/s}]}\n"
                 "routes: []\n",
                 "t.yaml:2:31: limiters.a.rules: expected 1 to 8 rules, "
                 "got 9");
    assert_error("limiters:\n  a: {algorithm: gcra, rules: {rate: 1/s}}\n"
                 "routes: []\n",
                 "t.yaml:2:31: limiters.a.rules: expected a sequence, got a "
                 "mapping");
    assert_error("limiters:\n"
                 "  a: {algorithm: fixed_window, rules: [{window: 1s}]}\n"
                 "routes: []\n",
                 "t.yaml:2:40: limiters.a.rules[0].limit: required");
}

Test(config, bad_rule_values_are_errors)
{
    assert_error("limiters:\n  a: {algorithm: gcra, rate: 10/minute}\n"
                 "routes: []\n",
                 "t.yaml:2:30: limiters.a.rate: bad rate \"10/minute\" "
                 "(expected a count above 0 per period: N/s, N/m, N/h or "
                 "N/d)");
    assert_error("limiters:\n  a: {algorithm: gcra, rate: 0/s}\n"
                 "routes: []\n",
                 "t.yaml:2:30: limiters.a.rate: bad rate \"0/s\" (expected "
                 "a count above 0 per period: N/s, N/m, N/h or N/d)");
    assert_error("limiters:\n  a: {algorithm: gcra, rate: 1/s, burst: 0}\n"
                 "routes: []\n",
                 "t.yaml:2:42: limiters.a.burst: bad integer \"0\" (expected "
                 "a whole number of at least 1)");
    assert_error("limiters:\n"
                 "  a: {algorithm: fixed_window, limit: -1, window: 1s}\n"
                 "routes: []\n",
                 "t.yaml:2:39: limiters.a.limit: bad integer \"-1\" "
                 "(expected a whole number of at least 1)");
    assert_error("limiters:\n"
                 "  a: {algorithm: fixed_window, limit: 1, window: 0ms}\n"
                 "routes: []\n",
                 "t.yaml:2:50: limiters.a.window: duration must be greater "
                 "than 0, got \"0ms\"");
}

Test(config, rules_too_large_for_exact_arithmetic_are_errors)
{
    /* 2^50 / 86400000 ms is about 13.03 million per day. */
    assert_error("limiters:\n"
                 "  a: {algorithm: fixed_window, rules: [{limit: 1, window: "
                 "1s}, {limit: 13100000, window: 1d}]}\n"
                 "routes: []\n",
                 "t.yaml:2:64: limiters.a.rules[1]: rule too large: limit "
                 "13100000 x window 86400000 ms must stay below 2^50");
    assert_error("limiters:\n"
                 "  a: {algorithm: token_bucket, rate: 1/d, burst: "
                 "13100000}\n"
                 "routes: []\n",
                 "t.yaml:2:6: limiters.a: rule too large: burst 13100000 x "
                 "window 86400000 ms must stay below 2^50");
    assert_error("limiters:\n"
                 "  a: {algorithm: gcra, rate: 100000000/s, mode: delay, "
                 "max_delay: 1d}\n"
                 "routes: []\n",
                 "t.yaml:2:67: limiters.a.max_delay: too large: max_delay "
                 "86400000 ms x limit 100000000 must stay below 2^50");
    /* Just below the bound is fine. */
    config_unref(
        parse_ok("limiters:\n"
                 "  a: {algorithm: fixed_window, limit: 13000000, window: 1d}\n"
                 "routes: []\n"));
}

Test(config, delay_mode_needs_a_bucket_and_a_max_delay)
{
    assert_error("limiters:\n"
                 "  a: {algorithm: fixed_window, limit: 1, window: 1s, mode: "
                 "delay, max_delay: 1s}\n"
                 "routes: []\n",
                 "t.yaml:2:60: limiters.a.mode: mode: delay needs "
                 "token_bucket, leaky_bucket or gcra, not fixed_window");
    assert_error("limiters:\n"
                 "  a: {algorithm: gcra, rate: 1/s, mode: delay}\n"
                 "routes: []\n",
                 "t.yaml:2:6: limiters.a.max_delay: required with mode: "
                 "delay");
    assert_error("limiters:\n"
                 "  a: {algorithm: gcra, rate: 1/s, max_delay: 1s}\n"
                 "routes: []\n",
                 "t.yaml:2:46: limiters.a.max_delay: only allowed with "
                 "mode: delay");
    assert_error("limiters:\n"
                 "  a: {algorithm: gcra, rate: 1/s, mode: wait}\n"
                 "routes: []\n",
                 "t.yaml:2:41: limiters.a.mode: bad mode \"wait\" (expected "
                 "deny or delay)");
    assert_error("limiters:\n"
                 "  a: {algorithm: gcra, rate: 1/s, mode: delay, max_delay: "
                 "0s}\n"
                 "routes: []\n",
                 "t.yaml:2:59: limiters.a.max_delay: duration must be "
                 "greater than 0, got \"0s\"");
}

/* Errors: RequestRateLimiter. */

/* A route with one filter, 'filter' being the text of its list item. */
static void
assert_rl_error(const char *filter, const char *want)
{
    char *yaml = NULL;

    yaml = xasprintf("limiters:\n"
                     "  per-user: {algorithm: token_bucket, rate: 10/s, "
                     "burst: 20}\n"
                     "  per-ip: {algorithm: gcra, rate: 5/s, burst: 10}\n"
                     "  two: {algorithm: fixed_window, rules: [{limit: 9, "
                     "window: 1s}, {limit: 4, window: 1m}]}\n"
                     "routes:\n"
                     "  - id: r\n"
                     "    uri: http://x\n"
                     "    filters:\n"
                     "      - %s\n",
                     filter);
    assert_error(yaml, want);
    free(yaml);
}

Test(config, request_rate_limiter_has_no_shortcut_form)
{
    const char *want = "t.yaml:9:9: routes[0].filters[0]: RequestRateLimiter "
                       "has no shortcut form: write \"name: "
                       "RequestRateLimiter\" with \"args: {key: ip, limiter: "
                       "NAME}\"";

    assert_rl_error("RequestRateLimiter=ip, per-ip", want);
    assert_rl_error("RequestRateLimiter", want);
}

Test(config, request_rate_limiter_needs_its_args)
{
    assert_rl_error("{name: RequestRateLimiter}",
                    "t.yaml:9:9: routes[0].filters[0]: RequestRateLimiter: "
                    "missing args (a key and a limiter, or tiers)");
    assert_rl_error("{name: RequestRateLimiter, args: {cost: 1}}",
                    "t.yaml:9:42: routes[0].filters[0].args: "
                    "RequestRateLimiter needs a key and a limiter, tiers, or "
                    "redis-rate-limiter");
    assert_rl_error("{name: RequestRateLimiter, args: {key: ip}}",
                    "t.yaml:9:42: routes[0].filters[0].args.limiter: "
                    "required");
    assert_rl_error("{name: RequestRateLimiter, args: {limiter: per-ip}}",
                    "t.yaml:9:42: routes[0].filters[0].args.key: required");
    assert_rl_error("{name: RequestRateLimiter, args: {key: ip, limitr: "
                    "per-ip}}",
                    "t.yaml:9:52: routes[0].filters[0].args: unknown key "
                    "\"limitr\" (did you mean \"limiter\"?)");
    assert_rl_error("{name: RequestRateLimiter, args: [ip]}",
                    "t.yaml:9:42: routes[0].filters[0].args: expected a "
                    "mapping, got a sequence");
}

Test(config, misspelt_or_misplaced_request_rate_limiter_is_named)
{
    assert_rl_error("{name: RequestRateLimitr, args: {key: ip}}",
                    "t.yaml:9:16: routes[0].filters[0]: unknown filter "
                    "\"RequestRateLimitr\" (did you mean "
                    "\"RequestRateLimiter\"?)");
    assert_error("routes:\n"
                 "  - id: a\n"
                 "    uri: http://x\n"
                 "    predicates: [RequestRateLimiter]\n",
                 "t.yaml:4:18: routes[0].predicates[0]: unknown predicate "
                 "\"RequestRateLimiter\" (RequestRateLimiter is a filter)");
}

Test(config, unknown_limiter_gets_a_suggestion)
{
    assert_rl_error("{name: RequestRateLimiter, args: {key: user, limiter: "
                    "per-usr}}",
                    "t.yaml:9:63: routes[0].filters[0].args.limiter: unknown "
                    "limiter \"per-usr\" (did you mean \"per-user\"?)");
    assert_rl_error("{name: RequestRateLimiter, args: {key: user, limiter: "
                    "global}}",
                    "t.yaml:9:63: routes[0].filters[0].args.limiter: unknown "
                    "limiter \"global\" (known: per-user, per-ip, two)");
    assert_error("routes:\n"
                 "  - id: a\n"
                 "    uri: http://x\n"
                 "    filters:\n"
                 "      - {name: RequestRateLimiter, args: {key: ip, "
                 "limiter: per-ip}}\n",
                 "t.yaml:5:61: routes[0].filters[0].args.limiter: unknown "
                 "limiter \"per-ip\" (no limiters are defined under "
                 "limiters:)");
}

/*
 * A route naming a limiter whose name was refused under limiters: is told
 * so, not that no limiters are defined, nor offered the others.
 */
Test(config, a_limiter_whose_name_was_refused_is_said_to_be)
{
    static const char yaml[] =
        "limiters:\n"
        "  scg.x: {algorithm: fixed_window, limit: 1, window: 1s}\n"
        "routes:\n"
        "  - id: a\n"
        "    uri: http://x\n"
        "    filters:\n"
        "      - {name: RequestRateLimiter, args: {key: ip, "
        "limiter: scg.x}}\n";
    struct config_errors e;
    struct config *cfg = parse(yaml, &e);

    cr_assert_null(cfg);
    cr_assert_eq(e.n, 2, "%zu errors, first: %s", e.n, e.n > 0 ? e.v[0] : "");
    cr_assert(strstr(e.v[0], "bad limiter name \"scg.x\"") != NULL, "%s",
              e.v[0]);
    cr_assert_str_eq(e.v[1], "t.yaml:7:61: routes[0].filters[0].args.limiter: "
                             "unknown limiter \"scg.x\" (its name under "
                             "limiters: was refused)");
    config_errors_deinit(&e);
}

Test(config, bad_keys_are_errors)
{
    static const char tail[] = " (expected parts joined by '+': ip, user, "
                               "role, route, header:NAME, query:NAME, "
                               "cookie:NAME, claim:NAME)";
    static const struct {
        const char *key;
        const char *why;
    } cases[] = {
        {"usr", "unknown part \"usr\" (did you mean \"user\"?)"},
        {"address", "unknown part \"address\" (known: ip, user, role, "
                    "route, header, query, cookie, claim)"},
        {"header", "header needs a name (header:NAME)"},
        {"'cookie:'", "cookie needs a name (cookie:NAME)"},
        {"'ip:v4'", "ip takes no name"},
        {"'query:a b'", "bad query name \"a b\" (expected a token)"},
        {"ip+user+ip", "\"ip\" appears twice"},
        {"'header:X-A+header:x-a'", "\"header:x-a\" appears twice"},
        {"ip++user", "empty part"},
        {"''", "empty part"},
        {"ip+user+role+route+header:A", "at most 4 parts"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *item = NULL;
        char *want = NULL;
        const char *raw = cases[i].key;
        size_t n = strlen(raw);
        bool quoted = raw[0] == '\'';

        item = xasprintf("{name: RequestRateLimiter, args: {limiter: "
                         "per-ip, key: %s}}",
                         raw);
        want = xasprintf("t.yaml:9:65: routes[0].filters[0].args.key: bad "
                         "key \"%.*s\": %s%s",
                         (int)(quoted ? n - 2 : n), quoted ? raw + 1 : raw,
                         cases[i].why, tail);
        assert_rl_error(item, want);
        free(item);
        free(want);
    }
}

Test(config, tiers_are_checked_one_by_one)
{
    assert_rl_error("{name: RequestRateLimiter, args: {tiers: [{limiter: "
                    "per-ip}]}}",
                    "t.yaml:9:51: routes[0].filters[0].args.tiers[0].key: "
                    "required");
    assert_rl_error("{name: RequestRateLimiter, args: {tiers: [{key: ip}]}}",
                    "t.yaml:9:51: routes[0].filters[0].args.tiers[0]."
                    "limiter: required");
    assert_rl_error("{name: RequestRateLimiter, args: {tiers: []}}",
                    "t.yaml:9:50: routes[0].filters[0].args.tiers: expected "
                    "at least one tier");
    assert_rl_error("{name: RequestRateLimiter, args: {tiers: ip}}",
                    "t.yaml:9:50: routes[0].filters[0].args.tiers: expected "
                    "a sequence, got a scalar");
    assert_rl_error("{name: RequestRateLimiter, args: {key: ip, limiter: "
                    "per-ip, tiers: [{key: ip, limiter: per-ip}]}}",
                    "t.yaml:9:76: routes[0].filters[0].args.tiers: give "
                    "either tiers or key and limiter, not both");
    assert_rl_error("{name: RequestRateLimiter, args: {tiers: [{when: {}, "
                    "limiter: none}]}}",
                    "t.yaml:9:58: routes[0].filters[0].args.tiers[0].when."
                    "role: required");
    assert_rl_error("{name: RequestRateLimiter, args: {tiers: [{when: {rol: "
                    "a}, limiter: none}]}}",
                    "t.yaml:9:59: routes[0].filters[0].args.tiers[0].when: "
                    "unknown key \"rol\" (did you mean \"role\"?)");
    assert_rl_error("{name: RequestRateLimiter, args: {tiers: [{when: {role: "
                    "''}, limiter: none}]}}",
                    "t.yaml:9:65: routes[0].filters[0].args.tiers[0].when."
                    "role: bad role \"\"");
    assert_rl_error("{name: RequestRateLimiter, args: {tiers: [{who: x, "
                    "limiter: none}]}}",
                    "t.yaml:9:52: routes[0].filters[0].args.tiers[0]: "
                    "unknown key \"who\" (known: when, key, limiter)");
}

Test(config, every_broken_tier_is_reported)
{
    struct config_errors e;
    struct config *cfg = parse("limiters: {l: {algorithm: gcra, rate: 1/s}}\n"
                               "routes:\n"
                               "  - id: r\n"
                               "    uri: http://x\n"
                               "    filters:\n"
                               "      - name: RequestRateLimiter\n"
                               "        args:\n"
                               "          tiers:\n"
                               "            - {key: ip, limiter: k}\n"
                               "            - {key: usr, limiter: l}\n"
                               "            - {key: ip, limiter: l}\n",
                               &e);

    cr_assert_null(cfg);
    cr_assert_eq(e.n, 2);
    cr_assert_str_eq(e.v[0], "t.yaml:9:34: routes[0].filters[0].args.tiers[0]."
                             "limiter: unknown limiter \"k\" (known: l)");
    cr_assert_str_eq(e.v[1],
                     "t.yaml:10:21: routes[0].filters[0].args.tiers[1].key: "
                     "bad key \"usr\": unknown part \"usr\" (did you mean "
                     "\"user\"?) (expected parts joined by '+': ip, user, "
                     "role, route, header:NAME, query:NAME, cookie:NAME, "
                     "claim:NAME)");
    config_errors_deinit(&e);
}

Test(config, cost_must_fit_every_tier)
{
    assert_rl_error("{name: RequestRateLimiter, args: {tiers: [{key: ip, "
                    "limiter: per-ip}, {key: user, limiter: per-user}], "
                    "cost: 11}}",
                    "t.yaml:9:70: routes[0].filters[0].args.tiers[0].limiter: "
                    "limiter \"per-ip\" can never admit cost 11 (burst 10)");
    assert_rl_error("{name: RequestRateLimiter, args: {key: ip, limiter: two, "
                    "cost: 5}}",
                    "t.yaml:9:61: routes[0].filters[0].args.limiter: limiter "
                    "\"two\" can never admit cost 5 (limit 4 in rules[1])");
    assert_rl_error("{name: RequestRateLimiter, args: {key: ip, limiter: "
                    "per-ip, cost: 0}}",
                    "t.yaml:9:75: routes[0].filters[0].args.cost: bad "
                    "integer \"0\" (expected a whole number of at least 1)");
    /* The burst itself fits; "none" has no capacity to exceed. */
    config_unref(parse_ok("limiters: {l: {algorithm: gcra, rate: 1/s, burst: "
                          "10}}\n"
                          "routes:\n"
                          "  - id: r\n"
                          "    uri: http://x\n"
                          "    filters:\n"
                          "      - name: RequestRateLimiter\n"
                          "        args:\n"
                          "          cost: 10\n"
                          "          tiers: [{limiter: none}, {key: ip, "
                          "limiter: l}]\n"));
}

Test(config, bad_options_are_errors)
{
    assert_rl_error("{name: RequestRateLimiter, args: {key: ip, limiter: "
                    "per-ip, on_redis_error: fail}}",
                    "t.yaml:9:85: routes[0].filters[0].args.on_redis_error: "
                    "bad on_redis_error \"fail\" (expected local, allow or "
                    "deny)");
    assert_rl_error(
        "{name: RequestRateLimiter, args: {key: ip, limiter: "
        "per-ip, headers: all}}",
        "t.yaml:9:78: routes[0].filters[0].args.headers: bad "
        "headers \"all\" (expected ietf, legacy, both, none or scg)");
    assert_rl_error("{name: RequestRateLimiter, args: {key: ip, limiter: "
                    "per-ip, empty_key: 403}}",
                    "t.yaml:9:80: routes[0].filters[0].args.empty_key: bad "
                    "empty_key \"403\" (expected deny or allow)");
    assert_rl_error("{name: RequestRateLimiter, args: {key: ip, limiter: "
                    "per-ip, backend: memory}}",
                    "t.yaml:9:78: routes[0].filters[0].args.backend: bad "
                    "backend \"memory\" (expected redis or local)");
    assert_rl_error("{name: RequestRateLimiter, args: {key: ip, limiter: "
                    "per-ip, dry_run: maybe}}",
                    "t.yaml:9:78: routes[0].filters[0].args.dry_run: bad "
                    "boolean \"maybe\" (expected true or false)");
    assert_rl_error("{name: RequestRateLimiter, args: {key: ip, limiter: "
                    "per-ip, status: 302}}",
                    "t.yaml:9:77: routes[0].filters[0].args.status: bad "
                    "integer \"302\" (expected an integer from 400 to 599)");
    assert_rl_error("{name: RequestRateLimiter, args: {key: ip, limiter: "
                    "per-ip, scope: 'a:b'}}",
                    "t.yaml:9:76: routes[0].filters[0].args.scope: bad scope "
                    "\"a:b\" (expected \"route\", or a name of up to 64 "
                    "letters, digits, '_', '.' and '-')");
    /* No redis: section here. */
    assert_rl_error("{name: RequestRateLimiter, args: {key: ip, limiter: "
                    "per-ip, backend: redis}}",
                    "t.yaml:9:78: routes[0].filters[0].args.backend: backend: "
                    "redis needs a redis: section (or use backend: local)");
}

Test(config, key_that_could_outgrow_redis_keys_is_an_error)
{
    char *item = NULL;
    char name[201];

    memset(name, 'a', 200);
    name[200] = '\0';
    /* 7 (prefix) + 6 + 8 + 1 (scope "r") + 7 + 200 = 229: fits. */
    item = xasprintf("routes:\n"
                     "  - id: r\n"
                     "    uri: http://x\n"
                     "    filters:\n"
                     "      - {name: RequestRateLimiter, args: {limiter: "
                     "per-ip, key: 'header:%s'}}\n"
                     "limiters: {per-ip: {algorithm: gcra, rate: 1/s}}\n",
                     name);
    config_unref(parse_ok(item));
    free(item);
    item = xasprintf("routes:\n"
                     "  - id: r\n"
                     "    uri: http://x\n"
                     "    filters:\n"
                     "      - {name: RequestRateLimiter, args: {limiter: "
                     "per-ip, key: 'header:%s', scope: abcdefghij}}\n"
                     "limiters: {per-ip: {algorithm: gcra, rate: 1/s}}\n",
                     name);
    assert_error(item, "t.yaml:5:65: routes[0].filters[0].args.key: the Redis "
                       "key would be too long: key prefix, limiter name, tag, "
                       "scope and key take 238 bytes (at most 237)");
    free(item);
}

Test(config, broken_limiter_is_reported_once)
{
    /* The route naming it says nothing more. */
    assert_error("limiters: {l: {algorithm: gcra, rate: fast}}\n"
                 "routes:\n"
                 "  - id: r\n"
                 "    uri: http://x\n"
                 "    filters:\n"
                 "      - {name: RequestRateLimiter, args: {key: ip, limiter: "
                 "l, cost: 5}}\n",
                 "t.yaml:1:39: limiters.l.rate: bad rate \"fast\" (expected "
                 "a count above 0 per period: N/s, N/m, N/h or N/d)");
}

Test(config, access_log_and_watch_have_defaults)
{
    struct config *cfg = parse_ok("routes: []\n");

    cr_assert_str_eq(cfg->access_log, "-");
    cr_assert_eq(cfg->access_format, ACCESSLOG_TEXT);
    cr_assert_not(cfg->server.watch);
    config_unref(cfg);
}

/* The value log.access takes for 'written'. */
static void
assert_access_log(const char *written, const char *want)
{
    char yaml[256];
    struct config *cfg;

    snprintf(yaml, sizeof(yaml), "routes: []\nlog: {access: %s}\n", written);
    cfg = parse_ok(yaml);
    cr_assert_str_eq(cfg->access_log, want, "access: %s", written);
    config_unref(cfg);
}

Test(config, access_log_is_stdout_off_or_a_file)
{
    assert_access_log("stdout", "-");
    assert_access_log("-", "-");
    assert_access_log("'-'", "-");
    assert_access_log("off", "off");
    assert_access_log("/var/log/sluice/access.log",
                      "/var/log/sluice/access.log");
    assert_access_log("logs/access.log", "logs/access.log");
}

Test(config, access_format_is_text_or_json)
{
    struct config *cfg = parse_ok("routes: []\nlog: {access_format: json}\n");

    cr_assert_eq(cfg->access_format, ACCESSLOG_JSON);
    config_unref(cfg);
    cfg = parse_ok("routes: []\nlog:\n  access_format: text\n"
                   "  access: /tmp/a.log\n");
    cr_assert_eq(cfg->access_format, ACCESSLOG_TEXT);
    cr_assert_str_eq(cfg->access_log, "/tmp/a.log");
    config_unref(cfg);
}

Test(config, watch_is_a_boolean)
{
    struct config *cfg = parse_ok("routes: []\nserver: {watch: true}\n");

    cr_assert(cfg->server.watch);
    config_unref(cfg);
    cfg = parse_ok("routes: []\nserver: {watch: no}\n");
    cr_assert_not(cfg->server.watch);
    config_unref(cfg);
    assert_error("routes: []\nserver: {watch: often}\n",
                 "t.yaml:2:17: server.watch: bad boolean \"often\" (expected "
                 "true or false)");
}

Test(config, underscores_in_headers_is_a_boolean_off_by_default)
{
    struct config *cfg = parse_ok("routes: []\n");

    cr_assert_not(cfg->server.underscores);
    config_unref(cfg);
    cfg = parse_ok("routes: []\nserver: {underscores_in_headers: true}\n");
    cr_assert(cfg->server.underscores);
    config_unref(cfg);
    assert_error("routes: []\nserver: {underscores_in_headers: 1x}\n",
                 "t.yaml:2:34: server.underscores_in_headers: bad boolean "
                 "\"1x\" (expected true or false)");
}

Test(config, bad_access_settings_are_errors)
{
    assert_error("routes: []\nlog: {access_format: jsn}\n",
                 "t.yaml:2:22: log.access_format: bad access format \"jsn\" "
                 "(did you mean \"json\"?)");
    assert_error("routes: []\nlog: {access_format: xml}\n",
                 "t.yaml:2:22: log.access_format: bad access format \"xml\" "
                 "(expected text or json)");
    assert_error("routes: []\nlog: {access: ''}\n",
                 "t.yaml:2:15: log.access: empty access log (expected "
                 "stdout, -, off or a file path)");
    assert_error("routes: []\nlog: {access: ~}\n",
                 "t.yaml:2:15: log.access: missing value");
    assert_error("routes: []\nlog: {acces: off}\n",
                 "t.yaml:2:7: log: unknown key \"acces\" (did you mean "
                 "\"access\"?)");
}

Test(config, a_filter_on_an_identity_field_is_an_error)
{
    assert_error("routes:\n"
                 "  - id: a\n"
                 "    uri: http://u\n"
                 "    filters: ['SetRequestHeader=x-user-id, admin']\n",
                 "t.yaml:4:15: routes[0].filters[0]: x-user-id is "
                 "identity.user_header: the gateway writes it from the "
                 "identity it decided, so this filter would do nothing");
    assert_error("identity: {role_header: X-Role}\n"
                 "routes:\n"
                 "  - id: a\n"
                 "    uri: http://u\n"
                 "    filters: ['AddRequestHeader=X-Usr, u', "
                 "RemoveRequestHeader=X-Role]\n",
                 "t.yaml:5:44: routes[0].filters[1]: X-Role is "
                 "identity.role_header: the gateway writes it from the "
                 "identity it decided, so this filter would do nothing");
    /* Response fields are the upstream's to set. */
    config_unref(parse_ok("routes:\n"
                          "  - id: a\n"
                          "    uri: http://u\n"
                          "    filters: ['SetResponseHeader=X-User-Id, u']\n"));
}

Test(config, a_filter_on_an_identity_field_spelt_with_underscores_is_an_error)
{
    /* A CGI upstream reads x_user_id as X-User-Id, so the gateway never
     * forwards it: the filter would do nothing either. */
    assert_error("routes:\n"
                 "  - id: a\n"
                 "    uri: http://u\n"
                 "    filters: ['SetRequestHeader=x_user_id, admin']\n",
                 "t.yaml:4:15: routes[0].filters[0]: x_user_id is "
                 "identity.user_header: the gateway writes it from the "
                 "identity it decided, so this filter would do nothing");
    assert_error("identity: {role_header: X-Role}\n"
                 "routes:\n"
                 "  - id: a\n"
                 "    uri: http://u\n"
                 "    filters: ['RemoveRequestHeader=X_ROLE']\n",
                 "t.yaml:5:15: routes[0].filters[0]: X_ROLE is "
                 "identity.role_header: the gateway writes it from the "
                 "identity it decided, so this filter would do nothing");
    assert_error("routes:\n"
                 "  - id: a\n"
                 "    uri: http://u\n"
                 "    filters: ['MapRequestHeader=X-Token, X_User_Role']\n",
                 "t.yaml:4:15: routes[0].filters[0]: X_User_Role is "
                 "identity.role_header: the gateway writes it from the "
                 "identity it decided, so this filter would do nothing");
    /* Another name that merely starts alike is not one of them. */
    config_unref(parse_ok("routes:\n"
                          "  - id: a\n"
                          "    uri: http://u\n"
                          "    filters: ['SetRequestHeader=X_User_Ids, u']\n"));
}

Test(config, a_response_filter_on_a_framing_field_is_an_error)
{
    assert_error("routes:\n"
                 "  - id: a\n"
                 "    uri: http://u\n"
                 "    filters: ['SetResponseHeader=Content-Length, 2']\n",
                 "t.yaml:4:15: routes[0].filters[0]: Content-Length frames "
                 "the response or governs its connection: the gateway sets "
                 "it, and a response filter may not");
    assert_error("routes:\n"
                 "  - id: a\n"
                 "    uri: http://u\n"
                 "    filters: ['AddResponseHeader=transfer-encoding, x']\n",
                 "t.yaml:4:15: routes[0].filters[0]: transfer-encoding frames "
                 "the response or governs its connection: the gateway sets "
                 "it, and a response filter may not");
    assert_error("routes:\n"
                 "  - id: a\n"
                 "    uri: http://u\n"
                 "    filters: ['DedupeResponseHeader=Vary Connection']\n",
                 "t.yaml:4:15: routes[0].filters[0]: Connection frames "
                 "the response or governs its connection: the gateway sets "
                 "it, and a response filter may not");
    /* Request fields are checked elsewhere; other response fields pass. */
    config_unref(parse_ok("routes:\n"
                          "  - id: a\n"
                          "    uri: http://u\n"
                          "    filters: ['SetResponseHeader=Content-Type, x', "
                          "'RemoveResponseHeader=Server']\n"));
}

Test(config, lease_is_for_token_bucket_and_gcra_within_bounds)
{
    struct config *cfg =
        parse_ok("limiters:\n"
                 "  a: {algorithm: token_bucket, rate: 100/s, burst: 100, "
                 "lease: 20}\n"
                 "  b: {algorithm: gcra, rate: 100/s, lease: 100000}\n"
                 "  c: {algorithm: gcra, rate: 100/s}\n"
                 "routes: []\n");

    cr_assert_eq(cfg->limiters[0].lease, 20);
    cr_assert_eq(cfg->limiters[1].lease, 100000);
    cr_assert_eq(cfg->limiters[2].lease, 0);
    config_unref(cfg);
    assert_error("limiters:\n"
                 "  a: {algorithm: leaky_bucket, rate: 1/s, lease: 5}\n"
                 "routes: []\n",
                 "t.yaml:2:50: limiters.a.lease: lease needs token_bucket or "
                 "gcra, not leaky_bucket");
    assert_error("limiters:\n"
                 "  a: {algorithm: fixed_window, limit: 1, window: 1s, "
                 "lease: 5}\n"
                 "routes: []\n",
                 "t.yaml:2:61: limiters.a.lease: lease needs token_bucket or "
                 "gcra, not fixed_window");
    assert_error("limiters:\n"
                 "  a: {algorithm: gcra, rate: 1/s, lease: 0}\n"
                 "routes: []\n",
                 "t.yaml:2:42: limiters.a.lease: bad integer \"0\" (expected "
                 "an integer from 1 to 100000)");
    assert_error("limiters:\n"
                 "  a: {algorithm: gcra, rate: 1/s, lease: 100001}\n"
                 "routes: []\n",
                 "t.yaml:2:42: limiters.a.lease: bad integer \"100001\" "
                 "(expected an integer from 1 to 100000)");
}

Test(config, a_limiter_with_a_lease_needs_the_redis_backend)
{
    /* No redis: section: the backend is local. */
    assert_error("limiters:\n"
                 "  hot: {algorithm: gcra, rate: 100/s, lease: 10}\n"
                 "routes:\n"
                 "  - id: api\n"
                 "    uri: http://127.0.0.1:9000\n"
                 "    predicates: [Path=/**]\n"
                 "    filters:\n"
                 "      - name: RequestRateLimiter\n"
                 "        args: { key: route, limiter: hot }\n",
                 "t.yaml:9:38: routes[0].filters[0].args.limiter: limiter "
                 "\"hot\" has lease: 10, and leases need backend: redis "
                 "(there is no redis: section)");
    assert_error("redis:\n"
                 "  url: redis://127.0.0.1:6379/0\n"
                 "limiters:\n"
                 "  hot: {algorithm: gcra, rate: 100/s, lease: 10}\n"
                 "routes:\n"
                 "  - id: api\n"
                 "    uri: http://127.0.0.1:9000\n"
                 "    predicates: [Path=/**]\n"
                 "    filters:\n"
                 "      - name: RequestRateLimiter\n"
                 "        args: { key: route, limiter: hot, backend: local }\n",
                 "t.yaml:11:38: routes[0].filters[0].args.limiter: limiter "
                 "\"hot\" has lease: 10, and leases need backend: redis");
    config_unref(parse_ok("redis:\n"
                          "  url: redis://127.0.0.1:6379/0\n"
                          "limiters:\n"
                          "  hot: {algorithm: gcra, rate: 100/s, lease: 10}\n"
                          "routes:\n"
                          "  - id: api\n"
                          "    uri: http://127.0.0.1:9000\n"
                          "    predicates: [Path=/**]\n"
                          "    filters:\n"
                          "      - name: RequestRateLimiter\n"
                          "        args: { key: route, limiter: hot }\n"));
}
