/*
 * router.h - picks the route for a request: the first route, in file
 * order, whose predicates all hold. Pure: no I/O, no allocation.
 */
#ifndef SLUICE_ROUTER_H
#define SLUICE_ROUTER_H

#include "glob.h"

#include <stddef.h>

struct route;
struct request_view;

/*
 * The first of the 'n' routes whose predicates all hold for 'req', or NULL.
 * A route with no predicates matches everything. 'vars' receives the
 * URI variables of the matched route's Path predicate (n = 0 if none).
 */
const struct route *router_match(const struct route *routes, size_t n,
                                 const struct request_view *req,
                                 struct glob_vars *vars);

/*
 * Spreads the Weight predicates of the 'n' routes over their groups
 * (named by their first argument): each gets its group index and its
 * range of draws, in route order, so that a group's routes share its
 * draws in proportion to their weights. Call once, after every route is
 * built. Returns the number of groups.
 */
size_t router_weigh(struct route *routes, size_t n);

#endif
