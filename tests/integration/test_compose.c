/*
 * test_compose.c - the container files cannot rot. Where docker-compose is
 * installed, it validates docker-compose.yml (`config -q`, no Docker engine
 * needed) and rejects deliberately broken copies of it; sluice --check
 * accepts conf/gateway.docker.yaml, which must keep the routes and limiters
 * of conf/gateway.yaml and the addresses docker-compose.yml gives it.
 * Likewise docker-compose.cluster.yml (a Redis Cluster beside the gateway)
 * and conf/gateway.cluster.yaml, whose seed nodes it must start.
 *
 * The repository is found from this file's path (__FILE__ is absolute under
 * CMake), or from $SLUICE_SOURCE_DIR when that is set.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "harness.h"
#include "netaddr.h"

#define THIS_FILE "tests/integration/test_compose.c"

/* The repository root, without a trailing '/'; a new string. */
static char *
repo_root(void)
{
    const char *env = getenv("SLUICE_SOURCE_DIR");
    size_t flen = strlen(__FILE__);
    size_t slen = strlen(THIS_FILE);
    char *root;

    if (env != NULL && env[0] != '\0') {
        root = harness_strf("%s", env);
    } else {
        cr_assert(__FILE__[0] == '/' && flen > slen &&
                      strcmp(__FILE__ + flen - slen, THIS_FILE) == 0,
                  "cannot find the repository from __FILE__ \"%s\"; "
                  "set SLUICE_SOURCE_DIR",
                  __FILE__);
        root = harness_strf("%.*s", (int)(flen - slen - 1), __FILE__);
    }
    return root;
}

/* 'rel' under the repository root; a new string. */
static char *
repo_path(const char *rel)
{
    char *root = repo_root();
    char *path = harness_strf("%s/%s", root, rel);

    free(root);
    return path;
}

/* The whole of 'path', NUL-terminated; a new string. Fails the test if the
 * file cannot be read. */
static char *
read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t len = 0;
    size_t cap = 0;
    size_t n;

    cr_assert_not_null(f, "cannot read %s", path);
    do {
        if (cap - len < 4096) {
            cap = cap * 2 + 4096;
            buf = realloc(buf, cap + 1);
            cr_assert_not_null(buf);
        }
        n = fread(buf + len, 1, cap - len, f);
        len += n;
    } while (n > 0);
    cr_assert(!ferror(f), "cannot read %s", path);
    fclose(f);
    buf[len] = '\0';
    return buf;
}

/* True if an executable 'name' is in one of $PATH's directories. */
static bool
in_path(const char *name)
{
    const char *path = getenv("PATH");
    bool found = false;

    while (path != NULL && !found) {
        const char *end = strchr(path, ':');
        size_t dlen = end != NULL ? (size_t)(end - path) : strlen(path);
        char *candidate = harness_strf("%.*s/%s", (int)dlen, path, name);

        found = dlen > 0 && access(candidate, X_OK) == 0;
        free(candidate);
        path = end != NULL ? end + 1 : NULL;
    }
    return found;
}

static bool
exited(void *arg)
{
    return !proc_running(arg);
}

/*
 * Runs 'argv' (argv[0] searched in PATH) to completion within 60 s (a cold
 * docker-compose takes a second or two); stores its output in '*output'
 * (the caller frees it) and returns its exit status.
 */
static int
run(char *const argv[], char **output)
{
    struct proc p;

    cr_assert_eq(proc_start(&p, argv), 0, "cannot start %s", argv[0]);
    cr_assert(harness_wait_until(exited, &p, 60000), "%s did not exit",
              argv[0]);
    *output = proc_log(&p);
    return proc_stop(&p, 0, 1000);
}

static void
skip_without_docker_compose(void)
{
    if (!in_path("docker-compose")) {
        cr_skip_test("docker-compose is not installed, so docker-compose.yml "
                     "is not validated (apt-get install docker-compose)");
    }
}

/*
 * `docker-compose -f FILE --project-directory REPO config -q`: 'FILE' may
 * live anywhere while build contexts and volumes still resolve against the
 * repository, as they do for the real file. Returns the exit status.
 */
static int
compose_config(const char *file, char **output)
{
    char *root = repo_root();
    char *argv[] = {
        "docker-compose", "-f", (char *)file, "--project-directory", root,
        "config",         "-q", NULL};
    int status = run(argv, output);

    free(root);
    return status;
}

/* A temporary copy of the compose file 'rel' with 'from' (which must
 * occur) replaced by 'to'; the caller unlinks and frees the path. */
static char *
compose_variant_of(const char *rel, const char *from, const char *to)
{
    char *path = repo_path(rel);
    char *text = read_text(path);
    char *changed;
    char *tmp;

    cr_assert_not_null(strstr(text, from), "%s no longer contains \"%s\"", rel,
                       from);
    changed = harness_subst(text, from, to);
    tmp = harness_write_temp(changed);
    free(changed);
    free(text);
    free(path);
    return tmp;
}

static char *
compose_variant(const char *from, const char *to)
{
    return compose_variant_of("docker-compose.yml", from, to);
}

TestSuite(compose, .timeout = 150);

Test(compose, docker_compose_accepts_the_compose_file)
{
    char *path = repo_path("docker-compose.yml");
    char *out;

    skip_without_docker_compose();
    cr_assert_eq(compose_config(path, &out), 0,
                 "docker-compose config -q rejected %s:\n%s", path, out);
    free(out);
    free(path);
}

/* The control: the same check on an unchanged temporary copy passes, so
 * the failures below are the broken entries' and not the relocation's. */
Test(compose, an_unchanged_copy_passes_from_a_temporary_directory)
{
    char *copy;
    char *out;

    skip_without_docker_compose();
    copy = compose_variant("- \"8080:8080\"", "- \"8080:8080\"");
    cr_assert_eq(compose_config(copy, &out), 0, "%s", out);
    free(out);
    unlink(copy);
    free(copy);
}

Test(compose, docker_compose_rejects_a_ports_entry_of_the_wrong_type)
{
    char *copy;
    char *out;
    int status;

    skip_without_docker_compose();
    copy = compose_variant("- \"8080:8080\"", "- true");
    status = compose_config(copy, &out);
    cr_assert_neq(status, 0, "a boolean ports entry passed:\n%s", out);
    cr_assert_not_null(strstr(out, "services.gateway.ports"), "%s", out);
    free(out);
    unlink(copy);
    free(copy);
}

Test(compose, docker_compose_rejects_a_dependency_on_an_undefined_service)
{
    char *copy;
    char *out;
    int status;

    skip_without_docker_compose();
    copy = compose_variant("      backend:\n        condition: service_started",
                           "      backnd:\n        condition: service_started");
    status = compose_config(copy, &out);
    cr_assert_neq(status, 0, "depends_on an undefined service passed:\n%s",
                  out);
    cr_assert_not_null(strstr(out, "backnd"), "%s", out);
    free(out);
    unlink(copy);
    free(copy);
}

Test(compose, sluice_check_accepts_the_compose_config)
{
    char *path = repo_path("conf/gateway.docker.yaml");
    char *argv[] = {getenv("SLUICE_BIN"), "--check", "-c", path, NULL};
    char *out;

    cr_assert_not_null(argv[0], "SLUICE_BIN is not set");
    cr_assert_eq(run(argv, &out), 0, "%s", out);
    cr_assert_not_null(strstr(out, ": ok"), "%s", out);
    free(out);
    free(path);
}

static struct config *
load(const char *rel)
{
    char *path = repo_path(rel);
    struct config_errors errs;
    struct config *cfg;

    config_errors_init(&errs);
    cfg = config_load(path, &errs);
    cr_assert_not_null(cfg, "%s: %s", path, errs.n > 0 ? errs.v[0] : "?");
    config_errors_deinit(&errs);
    free(path);
    return cfg;
}

/* Only the addresses may differ: every route and limiter of gateway.yaml,
 * in the same order, with the same predicates, filters and rules. */
Test(compose, compose_config_keeps_the_routes_and_limiters_of_gateway_yaml)
{
    struct config *local = load("conf/gateway.yaml");
    struct config *docker = load("conf/gateway.docker.yaml");

    cr_assert_eq(docker->nroutes, local->nroutes);
    for (size_t i = 0; i < local->nroutes; i++) {
        const struct route *l = &local->routes[i];
        const struct route *d = &docker->routes[i];

        cr_assert_str_eq(d->id, l->id, "routes[%zu]", i);
        cr_assert_eq(d->npredicates, l->npredicates, "route %s", l->id);
        for (size_t j = 0; j < l->npredicates; j++) {
            cr_assert_eq(d->predicates[j].kind, l->predicates[j].kind,
                         "route %s predicate %zu", l->id, j);
        }
        cr_assert_eq(d->nfilters, l->nfilters, "route %s", l->id);
        for (size_t j = 0; j < l->nfilters; j++) {
            cr_assert_eq(d->filters[j].kind, l->filters[j].kind,
                         "route %s filter %zu", l->id, j);
        }
        cr_assert_str_eq(d->uri.base_path, l->uri.base_path, "route %s", l->id);
        cr_assert_eq(d->connect_timeout_ms, l->connect_timeout_ms);
        cr_assert_eq(d->response_timeout_ms, l->response_timeout_ms);
        /* The demo backend, by its compose service name. */
        cr_assert_str_eq(d->uri.host, "backend", "route %s", l->id);
        cr_assert_eq(d->uri.port, 9000, "route %s", l->id);
    }
    cr_assert_eq(docker->nlimiters, local->nlimiters);
    for (size_t i = 0; i < local->nlimiters; i++) {
        const struct limiter_def *l = &local->limiters[i];
        const struct limiter_def *d = &docker->limiters[i];

        cr_assert_str_eq(d->name, l->name, "limiters[%zu]", i);
        /* The tag hashes the algorithm, the rules and the mode. */
        cr_assert_str_eq(d->tag, l->tag, "limiter %s", l->name);
    }
    cr_assert_str_eq(docker->redis.host, "redis");
    cr_assert_eq(docker->redis.port, 6379);
    config_unref(docker);
    config_unref(local);
}

/* The ports docker-compose.yml publishes are the ones the config listens
 * on, and clients coming through Docker's proxy (the compose network's
 * gateway, its first address) are trusted as on the host's loopback. */
Test(compose, compose_file_and_compose_config_agree_on_addresses)
{
    char *path = repo_path("docker-compose.yml");
    char *text = read_text(path);
    struct config *docker = load("conf/gateway.docker.yaml");
    const char *subnet = strstr(text, "subnet: ");
    char cidr_text[64];
    struct cidr net;
    struct netaddr gw;
    bool trusted = false;

    cr_assert_not_null(strstr(text, "- \"8080:8080\""));
    cr_assert_not_null(strstr(text, "- \"127.0.0.1:9090:9090\""));
    cr_assert_str_eq(docker->server.listen.host, "0.0.0.0");
    cr_assert_eq(docker->server.listen.port, 8080);
    cr_assert(docker->admin.enabled);
    cr_assert_str_eq(docker->admin.listen.host, "0.0.0.0");
    cr_assert_eq(docker->admin.listen.port, 9090);

    cr_assert_not_null(subnet, "docker-compose.yml pins no subnet");
    cr_assert_eq(sscanf(subnet, "subnet: %63s", cidr_text), 1);
    cr_assert_eq(netaddr_parse_cidr(cidr_text, &net), 0, "%s", cidr_text);
    cr_assert_eq(net.addr.family, AF_INET, "%s", cidr_text);
    gw = net.addr;
    gw.bytes[3] |= 1;
    for (size_t i = 0; i < docker->server.ntrusted_proxies; i++) {
        trusted =
            trusted || netaddr_in_cidr(&docker->server.trusted_proxies[i], &gw);
    }
    cr_assert(trusted, "trusted_proxies does not hold %s's gateway", cidr_text);
    config_unref(docker);
    free(text);
    free(path);
}

/* ---- docker-compose.cluster.yml ---- */

Test(compose, docker_compose_accepts_the_cluster_compose_file)
{
    char *path = repo_path("docker-compose.cluster.yml");
    char *out;

    skip_without_docker_compose();
    cr_assert_eq(compose_config(path, &out), 0,
                 "docker-compose config -q rejected %s:\n%s", path, out);
    free(out);
    free(path);
}

Test(compose, docker_compose_rejects_a_cluster_file_waiting_on_no_node)
{
    char *copy;
    char *out;
    int status;

    skip_without_docker_compose();
    copy = compose_variant_of("docker-compose.cluster.yml",
                              "redis-6: { condition: service_healthy }",
                              "redis-7: { condition: service_healthy }");
    status = compose_config(copy, &out);
    cr_assert_neq(status, 0, "depends_on an undefined node passed:\n%s", out);
    cr_assert_not_null(strstr(out, "redis-7"), "%s", out);
    free(out);
    unlink(copy);
    free(copy);
}

Test(compose, sluice_check_accepts_the_cluster_config)
{
    char *path = repo_path("conf/gateway.cluster.yaml");
    char *argv[] = {getenv("SLUICE_BIN"), "--check", "-c", path, NULL};
    char *out;

    cr_assert_not_null(argv[0], "SLUICE_BIN is not set");
    cr_assert_eq(run(argv, &out), 0, "%s", out);
    cr_assert_not_null(strstr(out, ": ok"), "%s", out);
    free(out);
    free(path);
}

/* Every seed of the config is a node that the compose file starts, at
 * the address it pins, on Redis's port; and the cluster is created from
 * those nodes. */
Test(compose, cluster_config_seeds_are_nodes_of_the_cluster_compose_file)
{
    char *path = repo_path("docker-compose.cluster.yml");
    char *text = read_text(path);
    struct config *cfg = load("conf/gateway.cluster.yaml");

    cr_assert(cfg->redis.ncluster_nodes >= 1);
    cr_assert_null(cfg->redis.host);
    for (size_t i = 0; i < cfg->redis.ncluster_nodes; i++) {
        const struct redis_node *n = &cfg->redis.cluster_nodes[i];
        char *pinned = harness_strf("ipv4_address: %s }", n->host);
        char *created = harness_strf("%s:%u", n->host, (unsigned)n->port);

        cr_assert_eq(n->port, 6379, "%s", n->host);
        cr_assert_not_null(strstr(text, pinned), "%s is not pinned", n->host);
        cr_assert_not_null(strstr(text, created),
                           "%s is not in --cluster create", created);
        free(pinned);
        free(created);
    }
    config_unref(cfg);
    free(text);
    free(path);
}
