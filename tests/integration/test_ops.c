/*
 * Operating the gateway: reloads (SIGHUP, POST /reload, --watch), the
 * admin listener, metrics, access logs, log rotation and the drain on
 * SIGTERM, all against the real binary.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

struct ops {
    struct proc echo; /* the upstream */
    uint16_t echo_port;
    struct proc gw; /* the gateway */
    uint16_t port;  /* its listener */
    uint16_t admin; /* its admin listener */
    char *cfg_path; /* its config; owned */
    char *extra;    /* more top-level YAML; owned */
    bool deny;      /* route "limited" refuses when Redis fails */
};

/* The config: route "a" always, route "b" only 'with_b'. */
static char *
ops_yaml(const struct ops *o, bool with_b)
{
    char *b = with_b ? harness_strf("  - id: b\n"
                                    "    uri: http://127.0.0.1:%u\n"
                                    "    predicates: [Path=/b/**]\n",
                                    o->echo_port)
                     : harness_strf("%s", "");
    char *yaml = harness_strf(
        "server:\n"
        "  listen: 127.0.0.1:%u\n"
        "  workers: 2\n"
        "  drain_timeout: 5s\n"
        "admin:\n"
        "  listen: 127.0.0.1:%u\n"
        "%s"
        "limiters:\n"
        "  three: { algorithm: sliding_window, limit: 3, window: 1h }\n"
        "routes:\n"
        "  - id: a\n"
        "    uri: http://127.0.0.1:%u\n"
        "    predicates: [Path=/a/**]\n"
        "  - id: limited\n"
        "    uri: http://127.0.0.1:%u\n"
        "    predicates: [Path=/limited/**]\n"
        "    filters:\n"
        "      - name: RequestRateLimiter\n"
        "        args: { key: route, limiter: three%s }\n"
        "%s",
        o->port, o->admin, o->extra != NULL ? o->extra : "", o->echo_port,
        o->echo_port, o->deny ? ", on_redis_error: deny" : "", b);

    free(b);
    return yaml;
}

static void
write_file(const char *path, const char *text)
{
    char *tmp = harness_strf("%s.tmp", path);
    FILE *f = fopen(tmp, "w");

    cr_assert(f != NULL);
    fputs(text, f);
    fclose(f);
    /* Replace it whole, as editors and deploy tools do. */
    cr_assert_eq(rename(tmp, path), 0);
    free(tmp);
}

/* Starts the upstream and the gateway with 'extra' top-level YAML; route
 * "limited" refuses when Redis fails if 'deny'. */
static void
ops_start_with(struct ops *o, const char *extra, bool deny)
{
    char *yaml;

    memset(o, 0, sizeof(*o));
    o->deny = deny;
    echo_start(&o->echo, &o->echo_port);
    o->port = harness_free_port();
    o->admin = harness_free_port();
    o->extra = extra != NULL ? harness_strf("%s", extra) : NULL;
    yaml = ops_yaml(o, false);
    o->cfg_path = harness_write_temp(yaml);
    free(yaml);
    gateway_start(&o->gw, o->cfg_path, o->port);
    cr_assert(harness_wait_port(o->admin, 5000), "no admin listener");
}

static void
ops_start(struct ops *o, const char *extra)
{
    ops_start_with(o, extra, false);
}

static int
ops_stop(struct ops *o)
{
    int st = proc_stop(&o->gw, SIGTERM, 15000);

    proc_stop(&o->echo, SIGTERM, 5000);
    unlink(o->cfg_path);
    free(o->cfg_path);
    free(o->extra);
    return st;
}

static long
get(uint16_t port, const char *path, struct http_response *r)
{
    char *u = harness_strf("http://127.0.0.1:%u%s", port, path);

    http_request(r, "GET", u, NULL, NULL, 0, 10000);
    free(u);
    return r->status;
}

static long
status(const struct ops *o, const char *path)
{
    struct http_response r;
    long st = get(o->port, path, &r);

    http_response_free(&r);
    return st;
}

static long
post_reload(const struct ops *o, struct http_response *r)
{
    char *u = harness_strf("http://127.0.0.1:%u/reload", o->admin);

    http_request(r, "POST", u, NULL, "", 0, 10000);
    free(u);
    return r->status;
}

/* ---- reload ---- */

struct loader {
    const struct ops *o;    /* borrowed */
    struct load_result res; /* what the load saw */
};

static void *
run_load(void *arg)
{
    struct loader *l = arg;
    char *u = harness_strf("http://127.0.0.1:%u/a/x", l->o->port);
    const char *urls[1] = {u};

    http_load(urls, 1, NULL, 0, 8, 3000, 10000, &l->res);
    free(u);
    return NULL;
}

static bool
b_answers(void *arg)
{
    return status(arg, "/b/x") == 200;
}

Test(ops, reload_under_load_fails_no_request, .timeout = 90)
{
    struct ops o;
    struct loader l;
    pthread_t th;
    char *yaml;

    ops_start(&o, NULL);
    cr_assert_eq(status(&o, "/b/x"), 404);
    l.o = &o;
    pthread_create(&th, NULL, run_load, &l);
    yaml = ops_yaml(&o, true);
    write_file(o.cfg_path, yaml);
    free(yaml);
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(kill(o.gw.pid, SIGHUP), 0);
        usleep(20000); /* spread the reloads over the load */
    }
    pthread_join(th, NULL);
    cr_assert_eq(l.res.errors, 0, "%zu requests failed", l.res.errors);
    cr_assert_eq(l.res.status[200], 3000);
    cr_assert(harness_wait_until(b_answers, &o, 5000),
              "the new route never answered");
    cr_assert_eq(ops_stop(&o), 0);
}

/* Both reloads, by POST and by SIGHUP, were refused and logged. */
static bool
failed_twice(void *arg)
{
    char *log = proc_log(arg);
    const char *p = strstr(log, "the running config stays");
    bool twice = p != NULL && strstr(p + 1, "the running config stays");

    free(log);
    return twice;
}

Test(ops, broken_reload_keeps_the_running_config)
{
    struct ops o;
    struct http_response r;
    char *want;

    ops_start(&o, NULL);
    write_file(o.cfg_path, "routes:\n  - id: a\n    uri: http:/nowhere\n"
                           "    predicates: [Paht=/x]\n");
    cr_assert_eq(post_reload(&o, &r), 400, "%s", r.body);
    want = harness_strf("%s:3:10: routes[0].uri", o.cfg_path);
    cr_assert(strstr(r.body, want) != NULL, "no %s in %s", want, r.body);
    cr_assert(strstr(r.body, "Paht") != NULL, "%s", r.body);
    free(want);
    http_response_free(&r);
    cr_assert_eq(kill(o.gw.pid, SIGHUP), 0);
    cr_assert(harness_wait_until(failed_twice, &o.gw, 5000),
              "the SIGHUP reload was not reported");
    cr_assert_eq(status(&o, "/a/x"), 200, "the old config stopped serving");
    cr_assert_eq(ops_stop(&o), 0);
}

Test(ops, post_reload_applies_a_valid_file)
{
    struct ops o;
    struct http_response r;
    char *yaml;

    ops_start(&o, NULL);
    yaml = ops_yaml(&o, true);
    write_file(o.cfg_path, yaml);
    free(yaml);
    cr_assert_eq(post_reload(&o, &r), 200, "%s", r.body);
    http_response_free(&r);
    cr_assert(harness_wait_until(b_answers, &o, 5000));
    cr_assert_eq(ops_stop(&o), 0);
}

static bool
restart_only_logged(void *arg)
{
    return proc_log_contains(arg, "log.level takes effect on restart only");
}

Test(ops, reload_says_which_settings_wait_for_a_restart)
{
    struct ops o;
    struct http_response r;
    char *yaml;

    ops_start(&o, "log:\n  level: info\n");
    free(o.extra);
    o.extra = harness_strf("log:\n  level: debug\n");
    yaml = ops_yaml(&o, true);
    write_file(o.cfg_path, yaml);
    free(yaml);
    cr_assert_eq(post_reload(&o, &r), 200, "%s", r.body);
    http_response_free(&r);
    cr_assert(harness_wait_until(restart_only_logged, &o.gw, 5000),
              "no word that log: waits for a restart");
    /* The rest of the file did apply. */
    cr_assert(harness_wait_until(b_answers, &o, 5000));
    cr_assert_eq(ops_stop(&o), 0);
}

/* Writes the config with 'log_level', reloads it, and waits for the
 * reload's log line number 'nth'. */
static void
reload_with_level(struct ops *o, const char *log_level, size_t nth)
{
    struct http_response r;
    struct log_wait w = {&o->gw, "server: reloaded", nth};
    char *yaml;

    free(o->extra);
    o->extra = harness_strf("log:\n  level: %s\n", log_level);
    yaml = ops_yaml(o, false);
    write_file(o->cfg_path, yaml);
    free(yaml);
    cr_assert_eq(post_reload(o, &r), 200, "%s", r.body);
    http_response_free(&r);
    cr_assert(harness_wait_until(proc_log_count_reached, &w, 5000),
              "reload %zu was not logged", nth);
}

Test(ops, restart_only_warnings_compare_with_the_settings_in_force)
{
    static const char warning[] = "log.level takes effect on restart only";
    struct ops o;

    ops_start(&o, "log:\n  level: info\n");
    reload_with_level(&o, "debug", 1);
    cr_assert_eq(proc_log_count(&o.gw, warning), 1);
    /* Still not in force: said again. */
    reload_with_level(&o, "debug", 2);
    cr_assert_eq(proc_log_count(&o.gw, warning), 2,
                 "a second reload of the same change did not warn");
    /* Back to what runs: nothing waits for a restart. */
    reload_with_level(&o, "info", 3);
    cr_assert_eq(proc_log_count(&o.gw, warning), 2,
                 "a reload back to the settings in force warned");
    cr_assert_eq(ops_stop(&o), 0);
}

/* Waits up to 10 s for the admin listener's /ready to answer 200. */
static void
wait_ready(const struct ops *o)
{
    int64_t deadline = harness_now_ms() + 10000;
    struct http_response r;
    long st = 0;

    while (st != 200 && harness_now_ms() < deadline) {
        st = get(o->admin, "/ready", &r);
        http_response_free(&r);
    }
    cr_assert_eq(st, 200, "never ready");
}

/*
 * Spends route "limited"'s three requests, writes the config with
 * 'extra' as its top-level YAML, and checks that the reload is refused
 * for 'why' and that the limiter in force still counts the three.
 */
static void
reload_refused_and_still_counted(struct ops *o, char *extra, const char *why)
{
    struct http_response r;
    char *yaml;

    for (int i = 0; i < 3; i++) {
        cr_assert_eq(status(o, "/limited/x"), 200, "request %d", i + 1);
    }
    free(o->extra);
    o->extra = extra;
    yaml = ops_yaml(o, false);
    write_file(o->cfg_path, yaml);
    free(yaml);
    cr_assert_eq(post_reload(o, &r), 400, "%s", r.body);
    cr_assert(strstr(r.body, why) != NULL, "no \"%s\" in %s", why, r.body);
    cr_assert(strstr(r.body, "takes a restart") != NULL, "%s", r.body);
    http_response_free(&r);
    cr_assert_eq(status(o, "/limited/x"), 429,
                 "the limiter in force was replaced");
}

Test(ops, a_reload_that_removes_redis_is_refused, .timeout = 30)
{
    struct ops o;
    struct proc redis;
    uint16_t redis_port;

    redis_start(&redis, &redis_port);
    {
        char *extra =
            harness_strf("redis:\n  url: redis://127.0.0.1:%u/0\n", redis_port);

        /* Decided by Redis, never by the fallback, once ready. */
        ops_start_with(&o, extra, true);
        free(extra);
    }
    wait_ready(&o);
    reload_refused_and_still_counted(&o, NULL,
                                     "redis: the section was removed");
    cr_assert_eq(ops_stop(&o), 0);
    proc_stop(&redis, SIGTERM, 5000);
}

Test(ops, a_reload_that_adds_redis_is_refused, .timeout = 30)
{
    struct ops o;
    struct proc redis;
    uint16_t redis_port;

    redis_start(&redis, &redis_port);
    ops_start(&o, NULL);
    reload_refused_and_still_counted(
        &o, harness_strf("redis:\n  url: redis://127.0.0.1:%u/0\n", redis_port),
        "redis: the section was added");
    cr_assert_eq(ops_stop(&o), 0);
    proc_stop(&redis, SIGTERM, 5000);
}

Test(ops, watch_reloads_when_the_file_changes, .timeout = 30)
{
    struct ops o;
    char *yaml;

    ops_start(&o, NULL);
    ops_stop(&o);
    /* Again with server.watch on. */
    memset(&o, 0, sizeof(o));
    echo_start(&o.echo, &o.echo_port);
    o.port = harness_free_port();
    o.admin = harness_free_port();
    yaml = ops_yaml(&o, false);
    {
        char *watching = harness_subst(yaml, "  workers: 2\n",
                                       "  workers: 2\n  watch: true\n");

        o.cfg_path = harness_write_temp(watching);
        free(watching);
    }
    free(yaml);
    gateway_start(&o.gw, o.cfg_path, o.port);
    cr_assert_eq(status(&o, "/b/x"), 404);
    yaml = ops_yaml(&o, true);
    {
        char *watching = harness_subst(yaml, "  workers: 2\n",
                                       "  workers: 2\n  watch: true\n");

        write_file(o.cfg_path, watching);
        free(watching);
    }
    free(yaml);
    cr_assert(harness_wait_until(b_answers, &o, 5000),
              "the change on disk was not picked up");
    cr_assert_eq(ops_stop(&o), 0);
}

/* ---- --watch through symlinks ---- */

static bool
b_gone(void *arg)
{
    return status(arg, "/b/x") == 404;
}

/* The config with server.watch on. */
static char *
watch_yaml(const struct ops *o, bool with_b)
{
    char *yaml = ops_yaml(o, with_b);
    char *watching =
        harness_subst(yaml, "  workers: 2\n", "  workers: 2\n  watch: true\n");

    free(yaml);
    return watching;
}

/* Writes 'text' to 'path' in place, as an editor writing through a
 * symlink does (no rename). */
static void
write_in_place(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    cr_assert(f != NULL, "%s", path);
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
}

static char *
make_dir(void)
{
    const char *tmp = getenv("TMPDIR");
    char *dir = harness_strf("%s/sluice-watch-XXXXXX",
                             tmp != NULL && tmp[0] ? tmp : "/tmp");

    cr_assert(mkdtemp(dir) != NULL);
    return dir;
}

/* A ConfigMap's next version: dir/..vN/gw.yaml, then ..data swapped to
 * it at once, as the kubelet does. */
static void
configmap_version(const char *dir, int n, const char *text)
{
    char *ver = harness_strf("%s/..v%d", dir, n);
    char *file = harness_strf("%s/gw.yaml", ver);
    char *target = harness_strf("..v%d", n);
    char *tmp = harness_strf("%s/..data_tmp", dir);
    char *data = harness_strf("%s/..data", dir);

    cr_assert_eq(mkdir(ver, 0700), 0);
    write_in_place(file, text);
    cr_assert_eq(symlink(target, tmp), 0);
    cr_assert_eq(rename(tmp, data), 0);
    free(ver);
    free(file);
    free(target);
    free(tmp);
    free(data);
}

Test(ops, watch_follows_a_configmap_swap, .timeout = 60)
{
    struct ops o;
    char *dir, *link, *yaml;

    memset(&o, 0, sizeof(o));
    echo_start(&o.echo, &o.echo_port);
    o.port = harness_free_port();
    o.admin = harness_free_port();
    dir = make_dir();
    yaml = watch_yaml(&o, false);
    configmap_version(dir, 1, yaml);
    free(yaml);
    link = harness_strf("%s/gw.yaml", dir);
    cr_assert_eq(symlink("..data/gw.yaml", link), 0);
    o.cfg_path = harness_strf("%s", link);
    gateway_start(&o.gw, o.cfg_path, o.port);
    cr_assert_eq(status(&o, "/b/x"), 404);

    yaml = watch_yaml(&o, true);
    configmap_version(dir, 2, yaml);
    free(yaml);
    cr_assert(harness_wait_until(b_answers, &o, 5000),
              "the swap of ..data to ..v2 was not picked up");
    yaml = watch_yaml(&o, false);
    configmap_version(dir, 3, yaml);
    free(yaml);
    cr_assert(harness_wait_until(b_gone, &o, 5000),
              "the swap of ..data to ..v3 was not picked up");

    cr_assert_eq(proc_stop(&o.gw, SIGTERM, 15000), 0);
    proc_stop(&o.echo, SIGTERM, 5000);
    for (int n = 1; n <= 3; n++) {
        char *f = harness_strf("%s/..v%d/gw.yaml", dir, n);
        char *d = harness_strf("%s/..v%d", dir, n);

        unlink(f);
        rmdir(d);
        free(f);
        free(d);
    }
    unlink(link);
    free(link);
    link = harness_strf("%s/..data", dir);
    unlink(link);
    free(link);
    rmdir(dir);
    free(dir);
    free(o.cfg_path);
}

Test(ops, watch_follows_a_symlink_to_another_directory, .timeout = 60)
{
    struct ops o;
    char *dir_link, *dir_file, *real, *yaml;

    memset(&o, 0, sizeof(o));
    echo_start(&o.echo, &o.echo_port);
    o.port = harness_free_port();
    o.admin = harness_free_port();
    dir_link = make_dir();
    dir_file = make_dir();
    real = harness_strf("%s/real.yaml", dir_file);
    yaml = watch_yaml(&o, false);
    write_in_place(real, yaml);
    free(yaml);
    o.cfg_path = harness_strf("%s/gw.yaml", dir_link);
    cr_assert_eq(symlink(real, o.cfg_path), 0);
    gateway_start(&o.gw, o.cfg_path, o.port);
    cr_assert_eq(status(&o, "/b/x"), 404);

    /* Edited where it is: only its own directory sees it. */
    yaml = watch_yaml(&o, true);
    write_in_place(real, yaml);
    free(yaml);
    cr_assert(harness_wait_until(b_answers, &o, 5000),
              "an edit of the symlink's target was not picked up");
    /* Replaced by a rename there: still followed. */
    yaml = watch_yaml(&o, false);
    write_file(real, yaml);
    free(yaml);
    cr_assert(harness_wait_until(b_gone, &o, 5000),
              "a second edit of the symlink's target was not picked up");

    cr_assert_eq(proc_stop(&o.gw, SIGTERM, 15000), 0);
    proc_stop(&o.echo, SIGTERM, 5000);
    unlink(o.cfg_path);
    unlink(real);
    rmdir(dir_link);
    rmdir(dir_file);
    free(real);
    free(dir_link);
    free(dir_file);
    free(o.cfg_path);
}

/* ---- admin listener and metrics ---- */

/* The value of the sample 'series' (name and labels as rendered). */
static long
sample(const char *text, const char *series)
{
    const char *p = text;
    size_t n = strlen(series);

    while ((p = strstr(p, series)) != NULL) {
        if ((p == text || p[-1] == '\n') && p[n] == ' ') {
            return atol(p + n + 1);
        }
        p += n;
    }
    return -1;
}

Test(ops, metrics_count_the_requests_made)
{
    struct ops o;
    struct http_response r;

    ops_start(&o, NULL);
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(status(&o, "/a/x"), 200);
    }
    cr_assert_eq(status(&o, "/nowhere"), 404);
    for (int i = 0; i < 5; i++) {
        status(&o, "/limited/x");
    }
    cr_assert_eq(get(o.admin, "/metrics", &r), 200);
    cr_assert_eq(sample(r.body, "sluice_requests_total{route=\"a\","
                                "method=\"GET\",status=\"200\"}"),
                 4, "%s", r.body);
    cr_assert_eq(sample(r.body, "sluice_requests_total{route=\"-\","
                                "method=\"GET\",status=\"404\"}"),
                 1);
    cr_assert_eq(sample(r.body, "sluice_requests_total{route=\"limited\","
                                "method=\"GET\",status=\"429\"}"),
                 2);
    cr_assert_eq(sample(r.body, "sluice_ratelimit_decisions_total{route="
                                "\"limited\",limiter=\"three\",tier=\"0\","
                                "result=\"allowed\"}"),
                 3);
    cr_assert_eq(sample(r.body, "sluice_ratelimit_decisions_total{route="
                                "\"limited\",limiter=\"three\",tier=\"0\","
                                "result=\"denied\"}"),
                 2);
    cr_assert_eq(sample(r.body, "sluice_upstream_duration_seconds_count{"
                                "route=\"a\"}"),
                 4);
    cr_assert_eq(sample(r.body, "sluice_requests_in_flight"), 0);
    cr_assert_eq(sample(r.body, "sluice_config_generation"), 1);
    /* No client address or other unbounded value in any label. */
    cr_assert(strstr(r.body, "127.0.0.1") == NULL);
    http_response_free(&r);
    cr_assert_eq(ops_stop(&o), 0);
}

Test(ops, admin_answers_health_ready_and_routes)
{
    struct ops o;
    struct http_response r;

    ops_start(&o, NULL);
    cr_assert_eq(get(o.admin, "/health", &r), 200);
    http_response_free(&r);
    cr_assert_eq(get(o.admin, "/ready", &r), 200, "%s", r.body);
    http_response_free(&r);
    cr_assert_eq(get(o.admin, "/routes", &r), 200);
    cr_assert(strstr(r.body, "\"id\":\"a\"") != NULL, "%s", r.body);
    cr_assert(strstr(r.body, "\"name\":\"RequestRateLimiter\"") != NULL);
    cr_assert(strstr(r.body, "\"algorithm\":\"sliding_window\"") != NULL);
    http_response_free(&r);
    cr_assert_eq(get(o.admin, "/nothing", &r), 404);
    http_response_free(&r);
    cr_assert_eq(ops_stop(&o), 0);
}

/* 'method' on admin 'path' is a 405 whose Allow field is 'allow'. */
static void
assert_405_allow(const struct ops *o, const char *method, const char *path,
                 const char *allow)
{
    char *u = harness_strf("http://127.0.0.1:%u%s", o->admin, path);
    struct http_response r;
    char *got;

    http_request(&r, method, u, NULL, NULL, 0, 10000);
    cr_assert_eq(r.status, 405, "%s %s: %ld", method, path, r.status);
    got = http_response_header(&r, "Allow");
    cr_assert(got != NULL, "%s %s: a 405 without Allow", method, path);
    cr_assert_str_eq(got, allow, "%s %s", method, path);
    free(got);
    http_response_free(&r);
    free(u);
}

Test(ops, admin_405_answers_say_which_methods_are_allowed)
{
    struct ops o;

    ops_start(&o, NULL);
    assert_405_allow(&o, "GET", "/reload", "POST");
    assert_405_allow(&o, "POST", "/health", "GET, HEAD");
    assert_405_allow(&o, "POST", "/metrics", "GET, HEAD");
    cr_assert_eq(ops_stop(&o), 0);
}

/* Milliseconds until the admin listener closes a connection that sent
 * 'text' and no more (it is never answered); 'limit_ms' if it did not. */
static int64_t
admin_cut_ms(uint16_t admin, const char *text, int limit_ms)
{
    int64_t t0 = harness_now_ms();
    char *got = raw_http(admin, text, strlen(text), limit_ms);

    cr_assert(got != NULL, "the admin listener refused the connection");
    cr_assert_str_eq(got, "", "an answer to a partial head: %s", got);
    free(got);
    return harness_now_ms() - t0;
}

Test(ops, admin_connections_time_out_at_header_timeout, .timeout = 60)
{
    struct echo_stack st;
    uint16_t admin = harness_free_port();
    char *sections = harness_strf("admin:\n  listen: 127.0.0.1:%u\n", admin);
    int64_t partial, idle;

    echo_stack_start(&st, "  header_timeout: 1s\n", sections,
                     "  - id: all\n"
                     "    uri: http://@ECHO@\n"
                     "    predicates: [Path=/**]\n");
    free(sections);
    cr_assert(harness_wait_port(admin, 5000), "no admin listener");
    partial = admin_cut_ms(admin, "GET /health HTTP/1.1\r\nHost: a\r\n", 8000);
    idle = admin_cut_ms(admin, "", 8000);
    cr_assert_lt(partial, 5000, "a partial head stayed open %lld ms",
                 (long long)partial);
    cr_assert_lt(idle, 5000, "a silent connection stayed open %lld ms",
                 (long long)idle);
    /* Not cut at once: the timeout is header_timeout's second. */
    cr_assert_geq(partial, 500, "cut after %lld ms", (long long)partial);
    echo_stack_stop(&st);
}

/*
 * The admin listener refuses a CONNECT as the gateway's does: evhttp
 * answered 501 with "Connection: close" but kept the connection, and
 * read what came next as a request (here it answered /metrics, which
 * the client took for the rest of the 501's body).
 */
Test(ops, admin_connect_is_501_and_the_connection_closed, .timeout = 60)
{
    static const char text[] = "CONNECT example.org:443 HTTP/1.1\r\n"
                               "Host: example.org:443\r\n\r\n"
                               "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n";
    struct echo_stack st;
    uint16_t admin = harness_free_port();
    char *sections = harness_strf("admin:\n  listen: 127.0.0.1:%u\n", admin);
    int64_t t0;
    char *got;

    echo_stack_start(&st, "  header_timeout: 10s\n", sections,
                     "  - id: all\n"
                     "    uri: http://@ECHO@\n"
                     "    predicates: [Path=/**]\n");
    free(sections);
    cr_assert(harness_wait_port(admin, 5000), "no admin listener");
    t0 = harness_now_ms();
    got = raw_http(admin, text, strlen(text), 8000);
    cr_assert(got != NULL, "the admin listener refused the connection");
    cr_assert(strncmp(got, "HTTP/1.1 501 ", 13) == 0, "answered: %s", got);
    cr_assert(strstr(got, "HTTP/1.1 200") == NULL,
              "a request after the CONNECT was answered: %s", got);
    /* Closed after the answer, not at the 10 s idle timeout. */
    cr_assert_lt(harness_now_ms() - t0, 5000, "the connection stayed open");
    free(got);
    echo_stack_stop(&st);
}

/* Where the response starting at 'p' ends: after its head and the
 * Content-Length bytes of body it announces (none for a HEAD). */
static const char *
response_end(const char *p, bool head)
{
    const char *end = strstr(p, "\r\n\r\n");
    const char *cl = strstr(p, "Content-Length: ");

    cr_assert(end != NULL, "no whole head in: %s", p);
    if (head || cl == NULL || cl > end) {
        return end + 4;
    }
    return end + 4 + atol(cl + strlen("Content-Length: "));
}

Test(ops, admin_head_replies_have_no_body)
{
    static const char req[] = "HEAD /health HTTP/1.1\r\nHost: a\r\n\r\n"
                              "GET /health HTTP/1.1\r\nHost: a\r\n"
                              "Connection: close\r\n\r\n";
    struct ops o;
    char *got;
    const char *second;

    ops_start(&o, NULL);
    got = raw_http(o.admin, req, sizeof(req) - 1, 5000);
    cr_assert(got != NULL);
    cr_assert(strncmp(got, "HTTP/1.1 200", 12) == 0, "%s", got);
    /* The HEAD answer says the GET's length and sends no byte of it. */
    cr_assert(strstr(got, "Content-Length: 16\r\n") != NULL, "%s", got);
    second = response_end(got, true);
    cr_assert(strncmp(second, "HTTP/1.1 200", 12) == 0,
              "the second response does not start where the HEAD one "
              "ends: %s",
              got);
    cr_assert_str_eq(response_end(second, false) - 16, "{\"status\":\"ok\"}\n");
    free(got);
    cr_assert_eq(ops_stop(&o), 0);
}

Test(ops, ready_waits_for_redis_when_the_policy_needs_it, .timeout = 30)
{
    struct ops o;
    struct http_response r;
    struct proc redis;
    uint16_t redis_port = harness_free_port();
    char *extra =
        harness_strf("redis:\n  url: redis://127.0.0.1:%u/0\n", redis_port);

    ops_start_with(&o, extra, true);
    free(extra);
    /* Redis is not there yet: not ready, and it says why. */
    cr_assert_eq(get(o.admin, "/ready", &r), 503);
    cr_assert(strstr(r.body, "Redis") != NULL, "%s", r.body);
    http_response_free(&r);
    redis_start_on(&redis, redis_port);
    wait_ready(&o);
    cr_assert_eq(ops_stop(&o), 0);
    proc_stop(&redis, SIGTERM, 5000);
}

/* ---- access log ---- */

static bool
reopen_logged(void *arg)
{
    return proc_log_contains(arg, "access log reopened");
}

static bool
file_has_lines(void *arg)
{
    const char *path = arg;
    FILE *f = fopen(path, "r");
    int c, n = 0;

    if (f == NULL) {
        return false;
    }
    while ((c = fgetc(f)) != EOF) {
        n += c == '\n';
    }
    fclose(f);
    return n >= 2;
}

static char *
slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf = calloc(1, 1 << 16);

    if (f != NULL) {
        size_t n = fread(buf, 1, (1 << 16) - 1, f);

        buf[n] = '\0';
        fclose(f);
    }
    return buf;
}

static char *
temp_log_path(const char *tag)
{
    const char *dir = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";

    return harness_strf("%s/sluice-%s-%d.log", dir, tag, (int)getpid());
}

Test(ops, access_log_lines_carry_every_field)
{
    struct ops o;
    char *log_path = temp_log_path("access");
    char *extra =
        harness_strf("log:\n  access: %s\n  access_format: json\n", log_path);
    char *text, *line2;

    unlink(log_path);
    ops_start(&o, extra);
    cr_assert_eq(status(&o, "/a/x?q=1"), 200);
    cr_assert_eq(status(&o, "/missing"), 404);
    cr_assert(harness_wait_until(file_has_lines, log_path, 5000));
    text = slurp(log_path);
    cr_assert(strncmp(text, "{\"time\":\"", 9) == 0, "%s", text);
    cr_assert(strstr(text, "\"client\":\"127.0.0.1\",\"method\":\"GET\","
                           "\"path\":\"/a/x?q=1\",\"route\":\"a\","
                           "\"status\":200,") != NULL,
              "%s", text);
    cr_assert(strstr(text, "\"upstream_ms\":") != NULL);
    cr_assert(strstr(text, "\"total_ms\":") != NULL);
    line2 = strchr(text, '\n') + 1;
    cr_assert(strstr(line2, "\"path\":\"/missing\",\"route\":null,"
                            "\"status\":404,") != NULL,
              "%s", line2);
    cr_assert(strstr(line2, "\"upstream_ms\":null") != NULL ||
                  strstr(line2, "\"upstream_ms\":-1") != NULL,
              "%s", line2);
    free(text);
    cr_assert_eq(ops_stop(&o), 0);
    unlink(log_path);
    free(log_path);
    free(extra);
}

Test(ops, sigusr1_reopens_the_access_log)
{
    struct ops o;
    char *log_path = temp_log_path("rotate");
    char *old_path = harness_strf("%s.1", log_path);
    char *extra = harness_strf("log:\n  access: %s\n", log_path);
    char *text;

    unlink(log_path);
    unlink(old_path);
    ops_start(&o, extra);
    cr_assert_eq(status(&o, "/a/before"), 200);
    cr_assert_eq(status(&o, "/a/before2"), 200);
    cr_assert(harness_wait_until(file_has_lines, log_path, 5000));
    cr_assert_eq(rename(log_path, old_path), 0);
    cr_assert_eq(kill(o.gw.pid, SIGUSR1), 0);
    cr_assert(harness_wait_until(reopen_logged, &o.gw, 5000),
              "no reopen logged");
    cr_assert_eq(status(&o, "/a/after"), 200);
    cr_assert_eq(status(&o, "/a/after2"), 200);
    cr_assert(harness_wait_until(file_has_lines, log_path, 5000),
              "nothing written to the new file");
    text = slurp(log_path);
    cr_assert(strstr(text, "/a/after") != NULL, "%s", text);
    cr_assert(strstr(text, "/a/before") == NULL, "%s", text);
    free(text);
    text = slurp(old_path);
    cr_assert(strstr(text, "/a/before") != NULL, "%s", text);
    cr_assert(strstr(text, "/a/after") == NULL, "%s", text);
    free(text);
    cr_assert_eq(ops_stop(&o), 0);
    unlink(log_path);
    unlink(old_path);
    free(log_path);
    free(old_path);
    free(extra);
}

/*
 * ---- drain ----
 *
 * A response ends for the proxy when it is handed to evhttp; it reaches
 * the client a loop turn later. A drain that ended on "nothing in flight"
 * alone lost such responses about one run in five here: the test below
 * is what showed it.
 */

struct slow {
    const struct ops *o; /* borrowed */
    const char *path;    /* what it asks for; borrowed */
    long status;         /* what the client got */
    char *connection;    /* its Connection header, or NULL; owned */
};

static void *
slow_request(void *arg)
{
    struct slow *s = arg;
    struct http_response r;

    s->status = get(s->o->port, s->path, &r);
    s->connection = http_response_header(&r, "Connection");
    http_response_free(&r);
    return NULL;
}

/* The echo upstream has seen at least 'n' requests of the gateway's. */
struct seen {
    const struct ops *o; /* borrowed */
    unsigned n;          /* the condition */
};

static bool
upstream_saw(void *arg)
{
    const struct seen *w = arg;
    struct echo_stats st;

    return echo_stats(w->o->echo_port, &st) == 0 && st.requests >= w->n;
}

Test(ops, sigterm_lets_requests_in_flight_finish, .timeout = 30)
{
    struct ops o;
    struct slow s[3];
    pthread_t th[3];
    int st;

    ops_start(&o, NULL);
    for (int i = 0; i < 3; i++) {
        s[i].o = &o;
        s[i].path = "/a/slow?sleep_ms=1500";
        pthread_create(&th[i], NULL, slow_request, &s[i]);
    }
    cr_assert(harness_wait_until(upstream_saw, &(struct seen){&o, 3}, 5000));
    cr_assert_eq(kill(o.gw.pid, SIGTERM), 0);
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(s[i].status, 200, "request %d got %ld", i, s[i].status);
        /* Keep-alive ends with the drain: no request is sent into it. */
        cr_assert(s[i].connection != NULL &&
                      strcmp(s[i].connection, "close") == 0,
                  "request %d: Connection: %s", i,
                  s[i].connection != NULL ? s[i].connection : "(none)");
        free(s[i].connection);
    }
    st = proc_stop(&o.gw, 0, 10000);
    cr_assert_eq(st, 0, "exit status %d", st);
    proc_stop(&o.echo, SIGTERM, 5000);
    unlink(o.cfg_path);
    free(o.cfg_path);
}

/* A request the drain timeout cuts off is closed by the gateway, not left
 * by its client: it was logged 499 ("client left"), so an operator read
 * a shutdown as impatient clients. It is logged 444, nginx's status for a
 * connection the server closed without a response. */
Test(ops, a_request_cut_off_by_the_drain_timeout_is_not_logged_as_client_left,
     .timeout = 30)
{
    static const char big[] = "GET /a/big?bytes=1000000000 HTTP/1.1\r\n"
                              "Host: x\r\n\r\n";
    struct ops o;
    struct slow s = {0};
    struct sockaddr_in sa = {.sin_family = AF_INET};
    int reader;
    pthread_t th;
    char *log_path = temp_log_path("drain");
    char *extra = harness_strf("log:\n  access: %s\n", log_path);
    char *text;
    int st;

    unlink(log_path);
    ops_start(&o, extra);
    s.o = &o;
    /* A client that asks for 1 GB and reads none of it. */
    reader = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(reader >= 0);
    sa.sin_port = htons(o.port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(connect(reader, (struct sockaddr *)&sa, sizeof(sa)), 0);
    cr_assert_eq(write(reader, big, strlen(big)), (ssize_t)strlen(big));
    cr_assert(harness_wait_until(upstream_saw, &(struct seen){&o, 1}, 5000));
    s.path = "/a/hung?sleep_ms=20000";
    pthread_create(&th, NULL, slow_request, &s);
    cr_assert(harness_wait_until(upstream_saw, &(struct seen){&o, 2}, 5000));
    cr_assert_eq(kill(o.gw.pid, SIGTERM), 0);
    /* drain_timeout is 5 s; the upstream answers after 20. */
    pthread_join(th, NULL);
    free(s.connection);
    cr_assert_neq(s.status, 200, "the drain waited for the upstream");
    st = proc_stop(&o.gw, 0, 10000);
    cr_assert_eq(st, 0, "exit status %d", st);
    close(reader);
    text = slurp(log_path);
    cr_assert(strstr(text, "\"GET /a/hung?sleep_ms=20000\" route=a "
                           "status=444 ") != NULL,
              "%s", text);
    /* A response already on its way keeps its status, as a cut one. */
    cr_assert(strstr(text, "\"GET /a/big?bytes=1000000000\" route=a "
                           "status=200 ") != NULL,
              "%s", text);
    free(text);
    proc_stop(&o.echo, SIGTERM, 5000);
    unlink(o.cfg_path);
    free(o.cfg_path);
    free(o.extra);
    unlink(log_path);
    free(log_path);
    free(extra);
}
