#include "units.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

struct unit {
    const char *suffix; /* exact spelling, case-sensitive */
    uint64_t factor;    /* value of one unit in the base unit */
};

static const struct unit duration_units[] = {
    {"ms", 1},
    {"s", 1000},
    {"m", 60 * 1000},
    {"h", 60 * 60 * 1000},
    {"d", 24 * 60 * 60 * 1000},
};

static const struct unit size_units[] = {
    {"B", 1},
    {"KiB", 1024},
    {"MiB", 1024 * 1024},
    {"GiB", 1024 * 1024 * 1024},
};

/* Rates: the unit is the period, so the factor is the period in ms. */
static const struct unit rate_units[] = {
    {"/s", 1000},
    {"/m", 60 * 1000},
    {"/h", 60 * 60 * 1000},
    {"/d", 24 * 60 * 60 * 1000},
};

#define NUNITS(a) (sizeof(a) / sizeof((a)[0]))

/*
 * Reads the leading decimal digits of 's' into '*n' and points '*rest' at
 * what follows. Fails on no digits at all and on a value past UINT64_MAX,
 * so that "99999999999999999999s" is an error rather than a wrapped count.
 */
static int
parse_digits(const char *s, uint64_t *n, const char **rest)
{
    uint64_t v = 0;
    const char *p = s;

    while (*p >= '0' && *p <= '9') {
        uint64_t d = (uint64_t)(*p - '0');

        if (v > (UINT64_MAX - d) / 10) {
            return -1;
        }
        v = v * 10 + d;
        p++;
    }
    if (p == s) {
        return -1;
    }
    *n = v;
    *rest = p;
    return 0;
}

static const struct unit *
find_unit(const struct unit *units, size_t n, const char *suffix)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(units[i].suffix, suffix) == 0) {
            return &units[i];
        }
    }
    return NULL;
}

/* N followed by one unit of the table, scaled without overflow. */
static int
parse_scaled(const char *s, const struct unit *units, size_t nunits,
             uint64_t *out)
{
    const struct unit *u;
    const char *rest;
    uint64_t n;

    if (s == NULL || parse_digits(s, &n, &rest) < 0) {
        return -1;
    }
    u = find_unit(units, nunits, rest);
    if (u == NULL) {
        return -1;
    }
    if (n > UINT64_MAX / u->factor) {
        return -1;
    }
    *out = n * u->factor;
    return 0;
}

int
units_parse_duration(const char *s, uint64_t *ms)
{
    return parse_scaled(s, duration_units, NUNITS(duration_units), ms);
}

int
units_parse_size(const char *s, uint64_t *bytes)
{
    return parse_scaled(s, size_units, NUNITS(size_units), bytes);
}

int
units_parse_rate(const char *s, struct rate *out)
{
    const struct unit *u;
    const char *rest;
    uint64_t n;

    if (s == NULL || parse_digits(s, &n, &rest) < 0 || n == 0) {
        return -1;
    }
    u = find_unit(rate_units, NUNITS(rate_units), rest);
    if (u == NULL) {
        return -1;
    }
    out->count = n;
    out->period_ms = u->factor;
    return 0;
}

char *
units_format_duration(uint64_t ms, char *buf, size_t len)
{
    static const struct {
        uint64_t ms;
        const char *unit;
    } units[] = {
        {86400000, "d"},
        {3600000, "h"},
        {60000, "m"},
        {1000, "s"},
    };
    const char *unit = "ms";
    uint64_t n = ms;

    for (size_t i = 0; ms > 0 && i < sizeof(units) / sizeof(units[0]); i++) {
        if (ms % units[i].ms == 0) {
            n = ms / units[i].ms;
            unit = units[i].unit;
            break;
        }
    }
    snprintf(buf, len, "%llu%s", (unsigned long long)n, unit);
    return buf;
}
