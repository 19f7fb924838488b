/*
 * fuzz_config.c - libFuzzer target for config_parse(): the input is the
 * text of a gateway.yaml, any bytes. Either a config comes back and no
 * error, or no config and at least one error, each one line of the form
 * "fuzz.yaml:LINE:COL: ...", in file order (and so are the warnings of an
 * accepted Spring file). Everything is freed, so that a leak on any error
 * path shows.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "describe.h"
#include "fuzz.h"

#define NAME "fuzz.yaml"

/* Reads the decimal at '*p' (at least one digit), moving '*p' past it. */
static bool
read_number(const char **p, size_t *out)
{
    size_t v = 0;
    const char *s = *p;

    if (*s < '0' || *s > '9') {
        return false;
    }
    while (*s >= '0' && *s <= '9') {
        v = v * 10 + (size_t)(*s - '0');
        s++;
    }
    *p = s;
    *out = v;
    return true;
}

/*
 * "fuzz.yaml:LINE:COL: what": a position within the input, then one line
 * of text that a terminal and a log show as it is.
 */
static void
check_error(const char *msg, size_t size, size_t *line, size_t *col)
{
    const char *p = msg;

    FUZZ_CHECK(strncmp(p, NAME ":", strlen(NAME ":")) == 0);
    p += strlen(NAME ":");
    FUZZ_CHECK(read_number(&p, line) && *p == ':');
    p++;
    FUZZ_CHECK(read_number(&p, col) && *p == ':');
    p++;
    FUZZ_CHECK(*line >= 1 && *col >= 1);
    FUZZ_CHECK(*line <= size + 1 && *col <= size + 1);
    FUZZ_CHECK(p[0] == ' ' && p[1] != '\0' && p[1] != ' ');
    for (; *p != '\0'; p++) {
        FUZZ_CHECK((unsigned char)*p >= 0x20 && *p != 0x7f);
    }
}

/* What any accepted config is. */
static void
check_config(const struct config *cfg)
{
    FUZZ_CHECK(cfg->refs == 1 && strcmp(cfg->path, NAME) == 0);
    for (size_t i = 0; i < cfg->nroutes; i++) {
        const struct route *r = &cfg->routes[i];

        FUZZ_CHECK(r->id != NULL && r->uri.host != NULL);
        FUZZ_CHECK(config_find_route(cfg, r->id) == r);
        FUZZ_CHECK(r->connect_timeout_ms > 0 && r->response_timeout_ms > 0);
        for (size_t j = 0; j < r->nrate_limiters; j++) {
            const struct rate_limit_conf *rl = r->rate_limiters[j];

            FUZZ_CHECK(rl->ntiers >= 1 && rl->scope != NULL);
            for (size_t k = 0; k < rl->ntiers; k++) {
                const struct tier *t = &rl->tiers[k];

                FUZZ_CHECK(t->limiter == NULL || t->limiter->nrules >= 1);
                FUZZ_CHECK(t->limiter == NULL || t->key.nparts >= 1);
            }
            /* Spring's redis-rate-limiter: a bucket that can admit the
             * cost, or one that refuses all (burstCapacity 0). */
            if (rl->derived != NULL) {
                const struct limit_rule *dr = &rl->derived->rules[0];

                FUZZ_CHECK(rl->tiers[0].limiter == rl->derived);
                FUZZ_CHECK(dr->limit >= 1 && dr->window_ms == 1000);
                FUZZ_CHECK(rl->derived->refuse_all ? dr->burst == 0
                                                   : dr->burst >= rl->cost);
            }
        }
    }
    for (size_t i = 0; i < cfg->nlimiters; i++) {
        const struct limiter_def *d = &cfg->limiters[i];

        for (size_t k = 0; k < d->nrules; k++) {
            FUZZ_CHECK(d->rules[k].limit >= 1 && d->rules[k].window_ms >= 1 &&
                       d->rules[k].burst >= 1);
        }
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct config_errors errs;
    struct config *cfg;
    size_t prev_line = 0;
    size_t prev_col = 0;

    config_errors_init(&errs);
    cfg = config_parse((const char *)data, size, NAME, &errs);
    if (cfg != NULL) {
        size_t wline = 0;
        size_t wcol = 0;

        FUZZ_CHECK(errs.n == 0);
        check_config(cfg);
        /* Warnings have the form of errors, and come in file order. */
        for (size_t i = 0; i < cfg->warnings.n; i++) {
            size_t line;
            size_t col;

            check_error(cfg->warnings.v[i], size, &line, &col);
            FUZZ_CHECK(line > wline || (line == wline && col >= wcol));
            wline = line;
            wcol = col;
        }
        free(config_describe(cfg));
        config_unref(cfg);
    } else {
        FUZZ_CHECK(errs.n >= 1);
    }
    for (size_t i = 0; i < errs.n; i++) {
        size_t line;
        size_t col;

        check_error(errs.v[i], size, &line, &col);
        /* In file order, whatever order the sections were read in. */
        FUZZ_CHECK(line > prev_line || (line == prev_line && col >= prev_col));
        prev_line = line;
        prev_col = col;
    }
    config_errors_deinit(&errs);
    return 0;
}
