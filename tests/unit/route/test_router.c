#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "predicate.h"
#include "router.h"

static const struct kind_spec *
spec(const char *name)
{
    size_t n;
    const struct kind_spec *specs = predicate_specs(&n);

    for (size_t i = 0; i < n; i++) {
        if (strcmp(specs[i].name, name) == 0) {
            return &specs[i];
        }
    }
    cr_assert_fail("no predicate called %s", name);
    return NULL;
}

/* A config built by hand: the router reads nothing but the routes. */
static struct config *cfg;

static void
setup(void)
{
    cfg = calloc(1, sizeof(*cfg));
    cfg->routes = calloc(8, sizeof(*cfg->routes));
}

static void
teardown(void)
{
    for (size_t i = 0; i < cfg->nroutes; i++) {
        struct route *r = &cfg->routes[i];

        for (size_t j = 0; j < r->npredicates; j++) {
            predicate_deinit(&r->predicates[j]);
        }
        free(r->predicates);
    }
    free(cfg->routes);
    free(cfg);
}

static struct route *
add_route(const char *id)
{
    struct route *r = &cfg->routes[cfg->nroutes++];

    r->id = (char *)id;
    r->predicates = calloc(4, sizeof(*r->predicates));
    return r;
}

static void
add_predicate(struct route *r, const char *kind, const char *const *args,
              size_t nargs)
{
    char err[256] = "";

    cr_assert_eq(predicate_init(&r->predicates[r->npredicates], spec(kind),
                                args, nargs, err, sizeof(err)),
                 0, "%s: %s", kind, err);
    r->npredicates++;
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__})
#define NARGS(...) (sizeof(ARGS(__VA_ARGS__)) / sizeof(const char *))
#define PREDICATE(route, kind, ...)                                            \
    add_predicate(route, kind, ARGS(__VA_ARGS__), NARGS(__VA_ARGS__))

static struct request_view
request(const char *method, const char *path)
{
    struct request_view r;

    memset(&r, 0, sizeof(r));
    r.method = method;
    r.path = path;
    return r;
}

static const char *
match_id(const struct request_view *req, struct glob_vars *vars)
{
    const struct route *r = router_match(cfg->routes, cfg->nroutes, req, vars);

    return r != NULL ? r->id : "(none)";
}

TestSuite(router, .init = setup, .fini = teardown);

Test(router, first_matching_route_in_file_order_wins)
{
    struct route *a = add_route("users-write");
    struct route *b = add_route("users");
    struct route *c = add_route("everything");
    struct request_view req = request("POST", "/api/users/1");

    PREDICATE(a, "Path", "/api/users/**");
    PREDICATE(a, "Method", "POST", "PUT");
    PREDICATE(b, "Path", "/api/users/**");
    PREDICATE(c, "Path", "/**");

    cr_assert_str_eq(match_id(&req, NULL), "users-write");
    req.method = "GET";
    cr_assert_str_eq(match_id(&req, NULL), "users");
    req.path = "/other";
    cr_assert_str_eq(match_id(&req, NULL), "everything");
}

Test(router, an_earlier_broad_route_shadows_a_later_narrow_one)
{
    struct route *a = add_route("broad");
    struct route *b = add_route("narrow");
    struct request_view req = request("GET", "/api/users/1");

    PREDICATE(a, "Path", "/api/**");
    PREDICATE(b, "Path", "/api/users/**");
    cr_assert_str_eq(match_id(&req, NULL), "broad");
}

Test(router, all_predicates_must_hold)
{
    struct route *a = add_route("internal-admin");
    struct request_view req = request("GET", "/admin");
    struct netaddr client;

    PREDICATE(a, "Path", "/admin");
    PREDICATE(a, "RemoteAddr", "10.0.0.0/8");
    req.client = &client;
    netaddr_parse("10.1.1.1", &client);
    cr_assert_str_eq(match_id(&req, NULL), "internal-admin");
    netaddr_parse("8.8.8.8", &client);
    cr_assert_str_eq(match_id(&req, NULL), "(none)");
}

Test(router, no_match_returns_null_and_clears_vars)
{
    struct route *a = add_route("red");
    struct request_view req = request("GET", "/blue/x");
    struct glob_vars vars;

    PREDICATE(a, "Path", "/red/{segment}");
    vars.n = 3;
    cr_assert_null(router_match(cfg->routes, cfg->nroutes, &req, &vars));
    cr_assert_eq(vars.n, 0);
}

Test(router, an_empty_config_matches_nothing)
{
    struct request_view req = request("GET", "/");

    cr_assert_null(router_match(cfg->routes, cfg->nroutes, &req, NULL));
}

Test(router, a_route_without_predicates_matches_everything)
{
    struct request_view req = request("DELETE", "/anything/at/all");

    add_route("catch-all");
    cr_assert_str_eq(match_id(&req, NULL), "catch-all");
}

Test(router, captures_the_variables_of_the_matched_route)
{
    struct route *a = add_route("get-only");
    struct route *b = add_route("items");
    struct request_view req = request("POST", "/shop/books/42");
    struct glob_vars vars;

    /* The first route's Path matches and binds 'x' before its Method
     * fails; none of that may leak into the result. */
    PREDICATE(a, "Path", "/shop/{x}/{y}");
    PREDICATE(a, "Method", "GET");
    PREDICATE(b, "Path", "/shop/{category}/{id}");
    cr_assert_str_eq(match_id(&req, &vars), "items");
    cr_assert_eq(vars.n, 2);
    cr_assert_eq(vars.v[0].name_len, strlen("category"));
    cr_assert_eq(strncmp(vars.v[0].name, "category", 8), 0);
    cr_assert_eq(vars.v[0].value_len, 5);
    cr_assert_eq(strncmp(vars.v[0].value, "books", 5), 0);
    cr_assert_eq(strncmp(vars.v[1].name, "id", 2), 0);
    cr_assert_eq(vars.v[1].value_len, 2);
    cr_assert_eq(strncmp(vars.v[1].value, "42", 2), 0);
}

Test(router, a_match_without_path_variables_reports_none)
{
    struct route *a = add_route("host");
    struct request_view req = request("GET", "/x");
    struct glob_vars vars;

    PREDICATE(a, "Host", "*.example.org");
    req.host = "api.example.org:8443";
    vars.n = 4;
    cr_assert_str_eq(match_id(&req, &vars), "host");
    cr_assert_eq(vars.n, 0);
}

/* Counts, over draws 1..n, which route each request goes to. */
static void
count_draws(size_t n, size_t *counts, size_t ncounts)
{
    struct request_view r = request("GET", "/");

    for (size_t i = 0; i < ncounts; i++) {
        counts[i] = 0;
    }
    for (uint64_t d = 1; d <= n; d++) {
        const struct route *m;

        r.draw = d * 0x9e3779b97f4a7c15ULL;
        m = router_match(cfg->routes, cfg->nroutes, &r, NULL);
        counts[m != NULL ? (size_t)(m - cfg->routes) : ncounts - 1]++;
    }
}

Test(router, weight_groups_share_draws_in_proportion)
{
    size_t counts[4];

    PREDICATE(add_route("high"), "Weight", "group1", "8");
    PREDICATE(add_route("low"), "Weight", "group1", "2");
    add_route("fallback");
    cr_assert_eq(router_weigh(cfg->routes, cfg->nroutes), 1);
    cr_assert_eq(cfg->routes[0].predicates[0].total, 10);
    cr_assert_eq(cfg->routes[1].predicates[0].lo, 8);
    cr_assert_eq(cfg->routes[1].predicates[0].hi, 10);
    count_draws(100000, counts, 4);
    /* Exactly one of the group answers each draw: nothing falls through. */
    cr_assert_eq(counts[2], 0);
    cr_assert_eq(counts[0] + counts[1], 100000);
    /* 8 sigma of a binomial(100000, 0.8) is about 1012. */
    cr_assert(counts[0] > 80000 - 1012 && counts[0] < 80000 + 1012, "%zu",
              counts[0]);
}

Test(router, weight_zero_never_matches_and_one_route_takes_all)
{
    size_t counts[4];

    PREDICATE(add_route("off"), "Weight", "g", "0");
    PREDICATE(add_route("on"), "Weight", "g", "5");
    PREDICATE(add_route("solo"), "Weight", "other", "3");
    cr_assert_eq(router_weigh(cfg->routes, cfg->nroutes), 2);
    count_draws(10000, counts, 4);
    cr_assert_eq(counts[0], 0);
    cr_assert_eq(counts[1], 10000);
    cr_assert_eq(counts[2], 0, "shadowed by 'on', which always matches");
}

Test(router, weight_groups_draw_independently)
{
    struct request_view r = request("GET", "/");
    size_t both = 0;
    const size_t n = 40000;

    /* Two groups of halves: with one value per group the pairs split in
     * quarters; reusing one value for both would give halves. */
    PREDICATE(add_route("a1"), "Weight", "a", "1");
    PREDICATE(add_route("a2"), "Weight", "a", "1");
    PREDICATE(add_route("b1"), "Weight", "b", "1");
    PREDICATE(add_route("b2"), "Weight", "b", "1");
    router_weigh(cfg->routes, cfg->nroutes);
    for (uint64_t d = 1; d <= n; d++) {
        r.draw = d * 0x9e3779b97f4a7c15ULL;
        both += predicate_test(&cfg->routes[0].predicates[0], &r, NULL) &&
                predicate_test(&cfg->routes[2].predicates[0], &r, NULL);
    }
    /* binomial(40000, 0.25): sigma ~ 87, 8 sigma ~ 693. */
    cr_assert(both > 10000 - 693 && both < 10000 + 693, "%zu", both);
}

Test(router, the_same_draw_always_picks_the_same_route)
{
    struct request_view r = request("GET", "/");
    const struct route *first;

    PREDICATE(add_route("x"), "Weight", "g", "1");
    PREDICATE(add_route("y"), "Weight", "g", "1");
    router_weigh(cfg->routes, cfg->nroutes);
    r.draw = 12345;
    first = router_match(cfg->routes, cfg->nroutes, &r, NULL);
    for (int i = 0; i < 10; i++) {
        cr_assert_eq(router_match(cfg->routes, cfg->nroutes, &r, NULL), first);
    }
}
