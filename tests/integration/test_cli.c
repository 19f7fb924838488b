/*
 * The sluice command line: --version, --help, --check on good and bad
 * files, and starts that must fail fast (port in use, unreadable file).
 */
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

static bool
exited(void *arg)
{
    return !proc_running(arg);
}

/*
 * Runs sluice with 'args' (NULL-terminated, at most 6) to completion within
 * 10 s; stores its output in '*output' (the caller frees it) and returns
 * its exit status.
 */
static int
run_sluice(const char *const *args, char **output)
{
    char *argv[8];
    struct proc p;
    size_t n = 1;

    argv[0] = getenv("SLUICE_BIN");
    cr_assert(argv[0] != NULL, "SLUICE_BIN is not set");
    for (; n < 7 && args[n - 1] != NULL; n++) {
        argv[n] = (char *)args[n - 1];
    }
    argv[n] = NULL;
    cr_assert_eq(proc_start(&p, argv), 0);
    cr_assert(harness_wait_until(exited, &p, 10000), "sluice did not exit");
    *output = proc_log(&p);
    return proc_stop(&p, 0, 1000);
}

Test(cli, version_prints_the_version)
{
    const char *args[] = {"--version", NULL};
    char *out;

    cr_assert_eq(run_sluice(args, &out), 0);
    cr_assert(strncmp(out, "sluice ", 7) == 0 && strchr(out, '.') != NULL, "%s",
              out);
    free(out);
}

Test(cli, help_lists_the_options)
{
    const char *args[] = {"--help", NULL};
    char *out;

    cr_assert_eq(run_sluice(args, &out), 0);
    cr_assert(strstr(out, "--check") != NULL && strstr(out, "-c") != NULL, "%s",
              out);
    free(out);
}

Test(cli, unknown_option_is_a_usage_error)
{
    const char *args[] = {"--frobnicate", NULL};
    char *out;

    cr_assert_eq(run_sluice(args, &out), 2);
    cr_assert(strstr(out, "usage:") != NULL, "%s", out);
    free(out);
}

Test(cli, check_accepts_a_good_file)
{
    char *path = harness_write_temp("routes:\n"
                                    "  - id: a\n"
                                    "    uri: http://127.0.0.1:9\n"
                                    "    predicates: [Path=/a/**]\n");
    const char *args[] = {"--check", "-c", path, NULL};
    char *out;

    cr_assert_eq(run_sluice(args, &out), 0, "%s", out);
    cr_assert(strstr(out, "ok, 1 route") != NULL, "%s", out);
    free(out);
    unlink(path);
    free(path);
}

Test(cli, check_reports_every_error_with_its_position)
{
    char *path = harness_write_temp("server:\n"
                                    "  listn: 127.0.0.1:8080\n"
                                    "routes:\n"
                                    "  - id: a\n"
                                    "    uri: ftp://example.test\n"
                                    "    filters: [StripPrefx=1]\n");
    const char *args[] = {"--check", "-c", path, NULL};
    char *out, *want;

    cr_assert_eq(run_sluice(args, &out), 1, "%s", out);
    want = harness_strf("%s:2:3: server: unknown key \"listn\" (did you mean "
                        "\"listen\"?)",
                        path);
    cr_assert(strstr(out, want) != NULL, "no \"%s\" in:\n%s", want, out);
    free(want);
    want = harness_strf("%s:5:10: routes[0].uri:", path);
    cr_assert(strstr(out, want) != NULL, "no \"%s\" in:\n%s", want, out);
    free(want);
    want = harness_strf("%s:6:15: routes[0].filters[0]: unknown filter "
                        "\"StripPrefx\" (did you mean \"StripPrefix\"?)",
                        path);
    cr_assert(strstr(out, want) != NULL, "no \"%s\" in:\n%s", want, out);
    free(want);
    cr_assert(strstr(out, "3 errors") != NULL, "%s", out);
    free(out);
    unlink(path);
    free(path);
}

Test(cli, check_prints_what_it_understood_of_a_spring_file)
{
    char *path = harness_write_temp(
        "spring:\n"
        "  application:\n"
        "    name: edge\n"
        "  cloud:\n"
        "    gateway:\n"
        "      discovery:\n"
        "        locator:\n"
        "          enabled: true\n"
        "      default-filters:\n"
        "        - AddResponseHeader=X-Edge, 1\n"
        "      routes:\n"
        "        - id: late\n"
        "          uri: http://127.0.0.1:9/**\n"
        "          order: 2\n"
        "          predicates: [Path=/late/**]\n"
        "        - id: early\n"
        "          uri: http://127.0.0.1:9\n"
        "          order: -1\n"
        "          predicates: [Path=/early/**]\n"
        "          filters:\n"
        "            - name: RequestRateLimiter\n"
        "              args:\n"
        "                key-resolver: \"#{@ipKeyResolver}\"\n"
        "                redis-rate-limiter.replenishRate: 10\n"
        "                redis-rate-limiter.burstCapacity: 20\n"
        "management:\n"
        "  endpoints:\n"
        "    enabled-by-default: false\n"
        "eureka:\n"
        "  client:\n"
        "    register-with-eureka: false\n");
    const char *args[] = {"--check", "-c", path, NULL};
    const char *want[] = {
        "ok, 2 routes",
        "Spring Cloud Gateway shape, 2 routes, in the order they are tried",
        "route early: order -1, uri http://127.0.0.1:9\n",
        "predicate {\"name\":\"Path\",\"args\":[\"/early/**\"]}",
        "filter {\"name\":\"AddResponseHeader\",\"args\":[\"X-Edge\",\"1\"]}",
        "limiter scg.early: token_bucket 10 per 1000 ms, burst 20 (from "
        "redis-rate-limiter); key ip",
        "headers scg",
        "route late: order 2, uri http://127.0.0.1:9\n",
        "ignored keys: 4",
        ":3:11: spring.application.name: ignored",
        ":8:20: spring.cloud.gateway.discovery.locator.enabled: ignored",
        ":28:25: management.endpoints.enabled-by-default: ignored",
        ":31:27: eureka.client.register-with-eureka: ignored",
    };
    char *out;
    const char *prev = NULL;

    cr_assert_eq(run_sluice(args, &out), 0, "%s", out);
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        const char *at = strstr(out, want[i]);

        cr_assert(at != NULL, "no \"%s\" in:\n%s", want[i], out);
        /* In this order: early before late, ignored keys last. */
        cr_assert(prev == NULL || at > prev, "\"%s\" out of order in:\n%s",
                  want[i], out);
        prev = at;
    }
    free(out);
    unlink(path);
    free(path);
}

Test(cli, missing_file_fails_to_start)
{
    const char *args[] = {"-c", "no/such/gateway.yaml", NULL};
    char *out;

    cr_assert_eq(run_sluice(args, &out), 1);
    cr_assert(strstr(out, "no/such/gateway.yaml: cannot read: No such file") !=
                  NULL,
              "%s", out);
    free(out);
}

Test(cli, port_in_use_fails_to_start)
{
    struct sockaddr_in sa = {0};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    char *cfg, *path, *out, *want;
    const char *args[] = {"-c", NULL, NULL};

    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    cr_assert_eq(listen(fd, 8), 0);
    getsockname(fd, (struct sockaddr *)&sa, &len);
    cfg = harness_strf("server:\n"
                       "  listen: 127.0.0.1:%u\n"
                       "routes: []\n",
                       ntohs(sa.sin_port));
    path = harness_write_temp(cfg);
    args[1] = path;
    cr_assert_eq(run_sluice(args, &out), 1, "%s", out);
    want = harness_strf("127.0.0.1:%u: Address already in use",
                        ntohs(sa.sin_port));
    cr_assert(strstr(out, want) != NULL, "no \"%s\" in:\n%s", want, out);
    free(want);
    free(out);
    unlink(path);
    free(path);
    free(cfg);
    close(fd);
}
