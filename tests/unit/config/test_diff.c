#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "diff.h"

static struct config *
load(const char *text)
{
    struct config_errors errs;
    struct config *cfg;

    config_errors_init(&errs);
    cfg = config_parse(text, strlen(text), "t.yaml", &errs);
    cr_assert_not_null(cfg, "%s", errs.n > 0 ? errs.v[0] : "?");
    config_errors_deinit(&errs);
    return cfg;
}

#define BASE                                                                   \
    "server:\n  listen: 127.0.0.1:8080\n  workers: 2\n"                        \
    "redis:\n  url: redis://127.0.0.1:6379\n  key_prefix: 'a:'\n"              \
    "admin:\n  listen: 127.0.0.1:9090\n"                                       \
    "log:\n  level: info\n"                                                    \
    "routes:\n  - id: r\n    uri: http://127.0.0.1:9000\n"

/* The groups that reloading BASE as 'next' cannot apply. */
static unsigned
groups_after(const char *from, const char *to)
{
    struct config *cur = load(BASE), *next;
    char *text = strdup(BASE);
    unsigned g;

    if (from != NULL) {
        char *at = strstr(text, from);
        size_t n = strlen(text) + strlen(to) + 1;
        char *edited = malloc(n);

        cr_assert_not_null(at, "no %s in the base config", from);
        snprintf(edited, n, "%.*s%s%s", (int)(at - text), text, to,
                 at + strlen(from));
        free(text);
        text = edited;
    }
    next = load(text);
    g = config_restart_only(cur, next);
    config_unref(cur);
    config_unref(next);
    free(text);
    return g;
}

Test(diff, the_same_file_changes_nothing_that_needs_a_restart)
{
    cr_assert_eq(groups_after(NULL, NULL), 0);
}

Test(diff, routes_and_the_key_prefix_apply_at_once)
{
    cr_assert_eq(groups_after("uri: http://127.0.0.1:9000",
                              "uri: http://127.0.0.1:9001"),
                 0);
    cr_assert_eq(groups_after("key_prefix: 'a:'", "key_prefix: 'b:'"), 0);
}

Test(diff, listeners_workers_redis_admin_and_log_need_a_restart)
{
    cr_assert_eq(
        groups_after("listen: 127.0.0.1:8080", "listen: 127.0.0.1:8081"),
        CONFIG_RESTART_LISTEN);
    cr_assert_eq(groups_after("workers: 2", "workers: 3"),
                 CONFIG_RESTART_LISTEN);
    /* The file watch starts with the process: turning it on or off in a
     * reload did nothing and said nothing. */
    cr_assert_eq(groups_after("workers: 2", "workers: 2\n  watch: true"),
                 CONFIG_RESTART_LISTEN);
    cr_assert_eq(
        groups_after("redis://127.0.0.1:6379", "redis://127.0.0.1:6380"),
        CONFIG_RESTART_REDIS);
    cr_assert_eq(
        groups_after("listen: 127.0.0.1:9090", "listen: 127.0.0.1:9091"),
        CONFIG_RESTART_ADMIN);
    cr_assert_eq(groups_after("level: info", "level: debug"),
                 CONFIG_RESTART_LOG);
}

Test(diff, every_group_has_its_sentence)
{
    cr_assert_str_eq(config_restart_only_str(CONFIG_RESTART_LOG),
                     "log: takes effect on restart only");
    cr_assert(strstr(config_restart_only_str(CONFIG_RESTART_REDIS),
                     "key_prefix applies now") != NULL);
    cr_assert(strstr(config_restart_only_str(CONFIG_RESTART_LISTEN),
                     "server.workers") != NULL);
    cr_assert(strstr(config_restart_only_str(CONFIG_RESTART_ADMIN), "admin:") !=
              NULL);
}

Test(diff, a_change_of_sentinels_needs_a_restart)
{
    const char *a = "redis:\n  sentinel: {master: m, nodes: ['s1:26379']}\n"
                    "routes: []\n";
    const char *b = "redis:\n  sentinel: {master: m, nodes: ['s1:26380']}\n"
                    "routes: []\n";
    const char *c = "redis:\n  sentinel: {master: n, nodes: ['s1:26379']}\n"
                    "routes: []\n";
    struct config *ca = load(a), *ca2 = load(a), *cb = load(b), *cc = load(c);

    cr_assert_eq(config_restart_only(ca, ca2), 0);
    cr_assert_eq(config_restart_only(ca, cb), CONFIG_RESTART_REDIS);
    cr_assert_eq(config_restart_only(ca, cc), CONFIG_RESTART_REDIS);
    config_unref(ca);
    config_unref(ca2);
    config_unref(cb);
    config_unref(cc);
}
