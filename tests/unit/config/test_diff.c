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

/* The restart-only settings of 'cur' and 'next', joined by ", " into
 * 'buf'; "" when none. */
static const char *
named(const struct config *cur, const struct config *next, char *buf,
      size_t size)
{
    const char *names[CONFIG_RESTART_MAX];
    size_t n = config_restart_only(cur, next, names);

    buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        snprintf(buf + strlen(buf), size - strlen(buf), "%s%s",
                 i > 0 ? ", " : "", names[i]);
    }
    return buf;
}

/* The restart-only settings of reloading BASE with 'from' replaced by
 * 'to', joined by ", " (static storage). */
static const char *
after(const char *from, const char *to)
{
    static char buf[512];
    struct config *cur = load(BASE), *next;
    char *text = strdup(BASE);

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
    named(cur, next, buf, sizeof(buf));
    config_unref(cur);
    config_unref(next);
    free(text);
    return buf;
}

Test(diff, the_same_file_changes_nothing_that_needs_a_restart)
{
    cr_assert_str_eq(after(NULL, NULL), "");
}

Test(diff, routes_and_the_key_prefix_apply_at_once)
{
    cr_assert_str_eq(
        after("uri: http://127.0.0.1:9000", "uri: http://127.0.0.1:9001"), "");
    cr_assert_str_eq(after("key_prefix: 'a:'", "key_prefix: 'b:'"), "");
}

/* Each setting by its own name: the log named a fixed group of four
 * ("server.listen, server.workers, server.watch and server.tls") for a
 * change of any one of them. */
Test(diff, each_restart_only_setting_is_named_as_the_file_spells_it)
{
    cr_assert_str_eq(after("listen: 127.0.0.1:8080", "listen: 127.0.0.1:8081"),
                     "server.listen");
    cr_assert_str_eq(after("workers: 2", "workers: 3"), "server.workers");
    /* The file watch starts with the process: turning it on or off in a
     * reload did nothing and said nothing. */
    cr_assert_str_eq(after("workers: 2", "workers: 2\n  watch: true"),
                     "server.watch");
    cr_assert_str_eq(after("redis://127.0.0.1:6379", "redis://127.0.0.1:6380"),
                     "redis");
    cr_assert_str_eq(after("key_prefix: 'a:'", "timeout: 2s"), "redis.timeout");
    cr_assert_str_eq(after("listen: 127.0.0.1:9090", "listen: 127.0.0.1:9091"),
                     "admin.listen");
    cr_assert_str_eq(after("admin:\n  listen: 127.0.0.1:9090\n", ""), "admin");
    cr_assert_str_eq(after("level: info", "level: debug"), "log.level");
    cr_assert_str_eq(after("level: info", "level: info\n  access: off"),
                     "log.access");
    cr_assert_str_eq(after("workers: 2", "workers: 3\n  watch: true"),
                     "server.workers, server.watch");
}

Test(diff, a_note_says_what_applies_at_once)
{
    cr_assert(strstr(config_restart_note("redis"), "key_prefix applies now") !=
              NULL);
    cr_assert(strstr(config_restart_note("server.tls.listen"), "certificate") !=
              NULL);
    cr_assert_str_eq(config_restart_note("log.level"), "");
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
    char buf[128];

    cr_assert_str_eq(named(ca, ca2, buf, sizeof(buf)), "");
    cr_assert_str_eq(named(ca, cb, buf, sizeof(buf)), "redis");
    cr_assert_str_eq(named(ca, cc, buf, sizeof(buf)), "redis");
    config_unref(ca);
    config_unref(ca2);
    config_unref(cb);
    config_unref(cc);
}
