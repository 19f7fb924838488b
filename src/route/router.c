#include "router.h"

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
