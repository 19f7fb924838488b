#include "router.h"

#include "config.h"
#include "predicate.h"

const struct route *
router_match(const struct config *cfg, const struct request_view *req,
             struct glob_vars *vars)
{
    for (size_t i = 0; i < cfg->nroutes; i++) {
        const struct route *r = &cfg->routes[i];
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
