/*
 * argspec.h - the table that describes each predicate and filter: its name
 * and its arguments, in the order of Spring's shortcut form
 * ("AddRequestHeader=X-Gateway, sluice") and with the names of its long
 * form ("args: { name: X-Gateway, value: sluice }"). The config loader
 * reads these tables; predicate.c and filter.c own them, and check an
 * argument count against them here. A predicate or filter keeps the
 * arguments it was built from (struct argspec_given), to show them.
 * No I/O; only argspec_given_init() allocates. Depends on xmalloc.h.
 */
#ifndef SLUICE_ARGSPEC_H
#define SLUICE_ARGSPEC_H

#include <stdbool.h>
#include <stddef.h>

struct arg_spec {
    const char *name; /* long-form key, e.g. "regexp" */
    bool optional;    /* may be left out (only trailing arguments) */
    bool gather;      /* last argument only: takes one or more values */
    bool list;        /* a comma-separated list, which the long form may
                         also give as a sequence */
};

struct kind_spec {
    const char *name;            /* e.g. "Path", "StripPrefix" */
    int kind;                    /* enum predicate_kind / filter_kind */
    const struct arg_spec *args; /* in shortcut order */
    size_t nargs;
    bool sparse;           /* any argument may be left out, in any position: the
                              shortcut's empty pieces and the long form's missing
                              keys are NULL arguments. A name "a.b" is key "b" of
                              the long form's mapping "a". */
    size_t shortcut_nargs; /* gateway.yaml's shortcut cuts at most this many
                              pieces, the last keeping its commas (a later
                              argument then comes by the long form only);
                              0: nargs */
};

/* The name of 'kind' among the 'n' 'specs' (predicate_specs(),
 * filter_specs()), or NULL. */
const char *argspec_kind_name(const struct kind_spec *specs, size_t n,
                              int kind);

/* How argspec_check_count words its complaint. */
enum argspec_wording {
    ARGSPEC_BRIEF,      /* "Header: expects 1 or 2 arguments, got 3" */
    ARGSPEC_WITH_NAMES, /* "AddRequestHeader: expects 2 arguments (name,
                           value), got 1" */
};

/*
 * 0 if 'nargs' arguments suit 'spec' (its required ones at least, and no
 * more than it has unless the last one gathers); otherwise -1 with a
 * message in 'err' (NULL or 'errlen' 0: none), worded as 'wording' says.
 */
int argspec_check_count(const struct kind_spec *spec, size_t nargs,
                        enum argspec_wording wording, char *err, size_t errlen);

/*
 * The arguments a predicate or filter was built from, as given and in
 * shortcut order (a long form's spread into it): what --check and
 * GET /routes show, so that every kind shows all of its arguments.
 */
struct argspec_given {
    char **v; /* each argument; NULL where a sparse spec's argument
                 was left out; owned */
    size_t n; /* entries in 'v' */
};

/* Copies the 'n' 'args' (each may be NULL) into '*g', which must be
 * empty. */
void argspec_given_init(struct argspec_given *g, const char *const *args,
                        size_t n);
/* Frees what '*g' holds and leaves it empty. */
void argspec_given_deinit(struct argspec_given *g);

#endif
