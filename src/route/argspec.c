#include "argspec.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "errbuf.h"
#include "xmalloc.h"

/* Predicates' wording: counts only. */
static void
say_brief(const struct kind_spec *spec, size_t nargs, size_t min, size_t max,
          char *err, size_t errlen)
{
    if (max == SIZE_MAX) {
        errbuf_printf(err, errlen,
                      "%s: expects at least %zu argument%s, got %zu",
                      spec->name, min, min == 1 ? "" : "s", nargs);
    } else if (min == max) {
        errbuf_printf(err, errlen, "%s: expects %zu argument%s, got %zu",
                      spec->name, min, min == 1 ? "" : "s", nargs);
    } else {
        errbuf_printf(err, errlen, "%s: expects %zu %s %zu arguments, got %zu",
                      spec->name, min, max == min + 1 ? "or" : "to", max,
                      nargs);
    }
}

/* Filters' wording: counts and the arguments' names. */
static void
say_with_names(const struct kind_spec *spec, size_t nargs, size_t min,
               size_t max, char *err, size_t errlen)
{
    char names[128] = "";
    size_t used = 0;

    for (size_t i = 0; i < spec->nargs; i++) {
        int m = snprintf(names + used, sizeof(names) - used, "%s%s",
                         i > 0 ? ", " : "", spec->args[i].name);

        if (m > 0 && (size_t)m < sizeof(names) - used) {
            used += (size_t)m;
        }
    }
    if (spec->nargs == 0) {
        errbuf_printf(err, errlen, "%s: takes no arguments, got %zu",
                      spec->name, nargs);
    } else if (max == SIZE_MAX) {
        errbuf_printf(err, errlen,
                      "%s: expects at least %zu argument%s (%s), got %zu",
                      spec->name, min, min == 1 ? "" : "s", names, nargs);
    } else if (min == max) {
        errbuf_printf(err, errlen, "%s: expects %zu argument%s (%s), got %zu",
                      spec->name, max, max == 1 ? "" : "s", names, nargs);
    } else {
        errbuf_printf(err, errlen,
                      "%s: expects %zu to %zu arguments (%s), got %zu",
                      spec->name, min, max, names, nargs);
    }
}

int
argspec_check_count(const struct kind_spec *spec, size_t nargs,
                    enum argspec_wording wording, char *err, size_t errlen)
{
    size_t min = 0;
    size_t max = spec->nargs;

    /* Only trailing arguments are optional, so the last required one
     * sets the minimum. */
    for (size_t i = 0; i < spec->nargs; i++) {
        if (!spec->args[i].optional) {
            min = i + 1;
        }
        if (spec->args[i].gather) {
            max = SIZE_MAX;
        }
    }
    if (nargs >= min && nargs <= max) {
        return 0;
    }
    if (wording == ARGSPEC_WITH_NAMES) {
        say_with_names(spec, nargs, min, max, err, errlen);
    } else {
        say_brief(spec, nargs, min, max, err, errlen);
    }
    return -1;
}

const char *
argspec_kind_name(const struct kind_spec *specs, size_t n, int kind)
{
    for (size_t i = 0; i < n; i++) {
        if (specs[i].kind == kind) {
            return specs[i].name;
        }
    }
    return NULL;
}

void
argspec_given_init(struct argspec_given *g, const char *const *args, size_t n)
{
    g->v = n > 0 ? xcalloc(n, sizeof(*g->v)) : NULL;
    g->n = n;
    for (size_t i = 0; i < n; i++) {
        g->v[i] = args[i] != NULL ? xstrdup(args[i]) : NULL;
    }
}

void
argspec_given_deinit(struct argspec_given *g)
{
    for (size_t i = 0; i < g->n; i++) {
        free(g->v[i]);
    }
    free(g->v);
    g->v = NULL;
    g->n = 0;
}
