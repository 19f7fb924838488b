#include "router.h"

#include <stdbool.h>
#include <string.h>

#include "predicate.h"
#include "route.h"

const struct route *
router_match(const struct route *routes, size_t n,
             const struct request_view *req, struct glob_vars *vars)
{
    for (size_t i = 0; i < n; i++) {
        const struct route *r = &routes[i];
        struct glob_vars found;
        size_t j;

        /* A Path predicate that fails still writes 'found', so the
         * caller's 'vars' is only touched once a route has matched. */
        found.n = 0;
        for (j = 0; j < r->npredicates; j++) {
            if (!predicate_test(&r->predicates[j], req, &found)) {
                break;
            }
        }
        if (j == r->npredicates) {
            if (vars != NULL) {
                *vars = found;
            }
            return r;
        }
    }
    if (vars != NULL) {
        vars->n = 0;
    }
    return NULL;
}

/* The Weight predicate of 'r', or NULL. */
static struct predicate *
weight_of(struct route *r)
{
    for (size_t j = 0; j < r->npredicates; j++) {
        if (r->predicates[j].kind == PREDICATE_WEIGHT) {
            return &r->predicates[j];
        }
    }
    return NULL;
}

/* True when a route before 'i' is in the group of 'w'. */
static bool
seen_before(struct route *routes, size_t i, const struct predicate *w)
{
    for (size_t k = 0; k < i; k++) {
        const struct predicate *o = weight_of(&routes[k]);

        if (o != NULL && strcmp(o->name, w->name) == 0) {
            return true;
        }
    }
    return false;
}

size_t
router_weigh(struct route *routes, size_t n)
{
    size_t groups = 0;

    /* The first route of each group numbers it and sums it up. Config
     * sizes make the quadratic walks harmless. */
    for (size_t i = 0; i < n; i++) {
        struct predicate *first = weight_of(&routes[i]);
        uint64_t at = 0;

        if (first == NULL || seen_before(routes, i, first)) {
            continue;
        }
        for (size_t k = i; k < n; k++) {
            struct predicate *w = weight_of(&routes[k]);

            if (w != NULL && strcmp(w->name, first->name) == 0) {
                w->group = groups;
                w->lo = at;
                at += w->weight;
                w->hi = at;
            }
        }
        for (size_t k = i; k < n; k++) {
            struct predicate *w = weight_of(&routes[k]);

            if (w != NULL && strcmp(w->name, first->name) == 0) {
                w->total = at;
            }
        }
        groups++;
    }
    return groups;
}
