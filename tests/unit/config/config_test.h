/*
 * config_test.h - what the loader's unit tests share: parse a YAML text
 * as the file CONFIG_TEST_FILE ("t.yaml" unless the test defines it
 * first), and assert that it loads, or that it is refused with exactly
 * one error.
 */
#ifndef SLUICE_CONFIG_TEST_H
#define SLUICE_CONFIG_TEST_H

#include <criterion/criterion.h>
#include <string.h>

#include "config.h"

#ifndef CONFIG_TEST_FILE
#define CONFIG_TEST_FILE "t.yaml"
#endif

/* Loads 'yaml'; 'e' gets the errors, the caller's to deinit. */
static inline struct config *
parse(const char *yaml, struct config_errors *e)
{
    config_errors_init(e);
    return config_parse(yaml, strlen(yaml), CONFIG_TEST_FILE, e);
}

/* 'yaml' loads without an error; the config is the caller's to unref. */
static inline struct config *
parse_ok(const char *yaml)
{
    struct config_errors e;
    struct config *cfg = parse(yaml, &e);

    cr_assert_not_null(cfg, "refused: %s", e.n > 0 ? e.v[0] : "(no error)");
    cr_assert_eq(e.n, 0, "loaded with %zu errors, first: %s", e.n,
                 e.n > 0 ? e.v[0] : "");
    config_errors_deinit(&e);
    return cfg;
}

/* 'yaml' is refused with one error, 'want' word for word. */
static inline void
assert_error(const char *yaml, const char *want)
{
    struct config_errors e;
    struct config *cfg = parse(yaml, &e);

    cr_assert_null(cfg, "accepted: %s", yaml);
    cr_assert_eq(e.n, 1, "%zu errors, first: %s", e.n, e.n > 0 ? e.v[0] : "");
    cr_assert_str_eq(e.v[0], want);
    config_errors_deinit(&e);
}

#endif
