/*
 * argspec.h - the table that describes each predicate and filter: its name
 * and its arguments, in the order of Spring's shortcut form
 * ("AddRequestHeader=X-Gateway, sluice") and with the names of its long
 * form ("args: { name: X-Gateway, value: sluice }"). The config loader
 * reads these tables; predicate.c and filter.c own them.
 */
#ifndef SLUICE_ARGSPEC_H
#define SLUICE_ARGSPEC_H

#include <stdbool.h>
#include <stddef.h>

struct arg_spec {
    const char *name; /* long-form key, e.g. "regexp" */
    bool optional;    /* may be left out (only trailing arguments) */
    bool gather;      /* last argument only: takes one or more values */
};

struct kind_spec {
    const char *name;            /* e.g. "Path", "StripPrefix" */
    int kind;                    /* enum predicate_kind / filter_kind */
    const struct arg_spec *args; /* in shortcut order */
    size_t nargs;
};

#endif
