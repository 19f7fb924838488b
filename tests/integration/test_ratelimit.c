/*
 * RequestRateLimiter end to end: real gateways, a real Redis and the echo
 * upstream, seen from the client. Windows are an hour long wherever the
 * count matters, so that no window ends during a test; the one test that
 * could straddle a window boundary checks Redis's clock and skips if so.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

#define MAX_GATEWAYS 4

struct rig {
    struct proc redis;              /* the shared Redis, if any */
    uint16_t redis_port;            /* its port */
    struct proc echo;               /* the upstream */
    uint16_t echo_port;             /* its port */
    struct proc gw[MAX_GATEWAYS];   /* the gateways */
    uint16_t gw_port[MAX_GATEWAYS]; /* their ports */
    char *cfg_path[MAX_GATEWAYS];   /* their configs; owned */
    size_t ngw;                     /* gateways started */
};

static bool
all_workers_connected(void *arg)
{
    char *log = proc_log(arg);
    size_t n = 0;

    for (const char *p = strstr(log, "redis: connected"); p != NULL;
         p = strstr(p + 1, "redis: connected")) {
        n++;
    }
    free(log);
    /* Every rig gateway runs one worker, except where the test says. */
    return n >= 1;
}

static bool
redis_connected(struct proc *gw)
{
    return harness_wait_until(all_workers_connected, gw, 10000);
}

/*
 * Starts Redis (when 'with_redis'), the echo, and 'ngw' gateways whose
 * config is 'yaml' with @PORT@, @ECHO@ and @REDIS@ filled in.
 */
static void
rig_start(struct rig *r, bool with_redis, size_t ngw, const char *yaml)
{
    char addr[32];

    memset(r, 0, sizeof(*r));
    if (with_redis) {
        redis_start(&r->redis, &r->redis_port);
    }
    echo_start(&r->echo, &r->echo_port);
    for (size_t i = 0; i < ngw; i++) {
        char *a, *b, *c;

        r->gw_port[i] = harness_free_port();
        snprintf(addr, sizeof(addr), "%u", r->gw_port[i]);
        a = harness_subst(yaml, "@PORT@", addr);
        snprintf(addr, sizeof(addr), "127.0.0.1:%u", r->echo_port);
        b = harness_subst(a, "@ECHO@", addr);
        snprintf(addr, sizeof(addr), "127.0.0.1:%u", r->redis_port);
        c = harness_subst(b, "@REDIS@", addr);
        r->cfg_path[i] = harness_write_temp(c);
        free(a);
        free(b);
        free(c);
        gateway_start(&r->gw[i], r->cfg_path[i], r->gw_port[i]);
        r->ngw++;
    }
    /* Decisions made before a worker's Redis connection is up would fall
     * back to the local twin and blur the counts. */
    for (size_t i = 0; with_redis && strstr(yaml, "redis:") && i < r->ngw;
         i++) {
        cr_assert(redis_connected(&r->gw[i]),
                  "gateway %zu never connected to Redis", i);
    }
}

static void
rig_stop(struct rig *r)
{
    int status[MAX_GATEWAYS];

    for (size_t i = 0; i < r->ngw; i++) {
        status[i] = proc_stop(&r->gw[i], SIGTERM, 15000);
        unlink(r->cfg_path[i]);
        free(r->cfg_path[i]);
    }
    proc_stop(&r->echo, SIGTERM, 5000);
    if (r->redis.pid != 0) {
        proc_stop(&r->redis, SIGTERM, 5000);
    }
    for (size_t i = 0; i < r->ngw; i++) {
        cr_assert_eq(status[i], 0, "gateway %zu exited with %d", i, status[i]);
    }
}

static char *
gw_url(const struct rig *r, size_t i, const char *path)
{
    return harness_strf("http://127.0.0.1:%u%s", r->gw_port[i], path);
}

static long
get_with(const struct rig *r, size_t i, const char *path,
         const char *const *headers, struct http_response *out)
{
    char *u = gw_url(r, i, path);

    http_request(out, "GET", u, headers, NULL, 0, 10000);
    free(u);
    return out->status;
}

static long
status_of(const struct rig *r, const char *path, const char *const *headers)
{
    struct http_response resp;
    long st = get_with(r, 0, path, headers, &resp);

    http_response_free(&resp);
    return st;
}

static redisContext *
redis_sync(const struct rig *r)
{
    redisContext *c = redisConnect("127.0.0.1", r->redis_port);

    cr_assert(c != NULL && c->err == 0, "cannot connect to the test Redis");
    return c;
}

static long long
redis_now_ms(redisContext *c)
{
    redisReply *rep = redisCommand(c, "TIME");
    long long ms;

    cr_assert(rep != NULL && rep->type == REDIS_REPLY_ARRAY);
    ms =
        atoll(rep->element[0]->str) * 1000 + atoll(rep->element[1]->str) / 1000;
    freeReplyObject(rep);
    return ms;
}

/* A Redis call slower than redis.timeout turns into the failure policy; a
 * slow test run must not, where a count is asserted. */
#define GATEWAY_HEAD                                                           \
    "server:\n"                                                                \
    "  listen: 127.0.0.1:@PORT@\n"                                             \
    "  workers: 1\n"                                                           \
    "  trusted_proxies: [127.0.0.1/32]\n"                                      \
    "redis:\n"                                                                 \
    "  url: redis://@REDIS@/0\n"                                               \
    "  timeout: 1s\n"

/* ---- one budget across gateways ---- */

Test(ratelimit, four_gateways_share_one_fixed_window_exactly, .timeout = 120)
{
    struct rig r;
    struct load_result res;
    const char *urls[MAX_GATEWAYS];
    char *owned[MAX_GATEWAYS];
    redisContext *rc;
    long long before, after;

    rig_start(&r, true, 4,
              GATEWAY_HEAD "limiters:\n"
                           "  shared: { algorithm: fixed_window, limit: 500, "
                           "window: 1h }\n"
                           "routes:\n"
                           "  - id: api\n"
                           "    uri: http://@ECHO@\n"
                           "    predicates: [Path=/**]\n"
                           "    filters:\n"
                           "      - name: RequestRateLimiter\n"
                           "        args: { key: route, limiter: shared }\n");
    for (size_t i = 0; i < 4; i++) {
        owned[i] = gw_url(&r, i, "/api");
        urls[i] = owned[i];
    }
    rc = redis_sync(&r);
    before = redis_now_ms(rc);
    http_load(urls, 4, NULL, 0, 200, 2000, 10000, &res);
    after = redis_now_ms(rc);
    redisFree(rc);
    if (before / 3600000 != after / 3600000) {
        rig_stop(&r);
        cr_skip_test("the load straddled a window boundary");
    }
    cr_assert_eq(res.errors, 0);
    cr_assert_eq(res.status[200], 500, "admitted %zu of 2000", res.status[200]);
    cr_assert_eq(res.status[429], 1500);
    for (size_t i = 0; i < 4; i++) {
        free(owned[i]);
    }
    rig_stop(&r);
}

Test(ratelimit, local_backend_is_one_budget_across_workers, .timeout = 60)
{
    struct rig r;
    struct load_result res;
    char *u;
    const char *urls[1];

    rig_start(&r, false, 1,
              "server:\n"
              "  listen: 127.0.0.1:@PORT@\n"
              "  workers: 4\n"
              "limiters:\n"
              "  shared: { algorithm: sliding_window, limit: 100, "
              "window: 1h }\n"
              "routes:\n"
              "  - id: api\n"
              "    uri: http://@ECHO@\n"
              "    predicates: [Path=/**]\n"
              "    filters:\n"
              "      - name: RequestRateLimiter\n"
              "        args: { key: route, limiter: shared }\n");
    u = gw_url(&r, 0, "/x");
    urls[0] = u;
    http_load(urls, 1, NULL, 0, 50, 400, 10000, &res);
    cr_assert_eq(res.errors, 0);
    cr_assert_eq(res.status[200], 100);
    cr_assert_eq(res.status[429], 300);
    free(u);
    rig_stop(&r);
}

/* ---- tiers and identity ---- */

#define TIERED                                                                 \
    "limiters:\n"                                                              \
    "  per-user: { algorithm: token_bucket, rate: 1/h, burst: 3 }\n"           \
    "  per-ip: { algorithm: gcra, rate: 1/h, burst: 2 }\n"                     \
    "  admin-ip: { algorithm: sliding_window, rules: [ { limit: 5, "           \
    "window: 1h }, { limit: 100, window: 1d } ] }\n"                           \
    "routes:\n"                                                                \
    "  - id: images\n"                                                         \
    "    uri: http://@ECHO@\n"                                                 \
    "    predicates: [Path=/images/**]\n"                                      \
    "    filters:\n"                                                           \
    "      - name: RequestRateLimiter\n"                                       \
    "        args:\n"                                                          \
    "          tiers:\n"                                                       \
    "            - when: { role: superadmin }\n"                               \
    "              limiter: none\n"                                            \
    "            - when: { role: admin }\n"                                    \
    "              key: ip\n"                                                  \
    "              limiter: admin-ip\n"                                        \
    "            - key: user\n"                                                \
    "              limiter: per-user\n"                                        \
    "            - key: ip\n"                                                  \
    "              limiter: per-ip\n"

static size_t
count_passes(const struct rig *r, const char *const *headers, size_t tries)
{
    size_t ok = 0;

    for (size_t i = 0; i < tries; i++) {
        long st = status_of(r, "/images/a.png", headers);

        cr_assert(st == 200 || st == 429, "status %ld", st);
        ok += st == 200;
    }
    return ok;
}

Test(ratelimit, tiers_limit_each_kind_of_caller_its_own_way)
{
    struct rig r;
    const char *super[] = {"X-User-Role: superadmin", "X-User-Id: root", NULL};
    const char *admin1[] = {"X-User-Role: admin", "X-User-Id: ann", NULL};
    const char *admin2[] = {"X-User-Role: admin", "X-User-Id: bob", NULL};
    const char *u1[] = {"X-User-Id: u1", NULL};
    const char *u2[] = {"X-User-Id: u2", NULL};

    rig_start(&r, true, 1, GATEWAY_HEAD TIERED);
    cr_assert_eq(count_passes(&r, super, 30), 30, "superadmin was limited");
    /* A shared admin account is limited by address, whoever logs in. */
    cr_assert_eq(count_passes(&r, admin1, 3), 3);
    cr_assert_eq(count_passes(&r, admin2, 5), 2);
    /* Users by user id: each has a budget of their own. */
    cr_assert_eq(count_passes(&r, u1, 6), 3);
    cr_assert_eq(count_passes(&r, u2, 6), 3);
    /* Anonymous callers by address. */
    cr_assert_eq(count_passes(&r, NULL, 5), 2);
    rig_stop(&r);
}

Test(ratelimit, user_header_from_an_untrusted_peer_is_ignored)
{
    struct rig r;
    const char *u1[] = {"X-User-Id: u1", NULL};
    const char *u2[] = {"X-User-Id: u2", NULL};
    char *yaml = harness_subst(GATEWAY_HEAD TIERED,
                               "  trusted_proxies: [127.0.0.1/32]\n", "");

    rig_start(&r, true, 1, yaml);
    /* Not believed, and not passed on to the upstream either. */
    {
        struct http_response resp;
        char *seen;

        cr_assert_eq(get_with(&r, 0, "/images/a.png", u1, &resp), 200);
        seen = echo_header(resp.body, "X-User-Id");
        cr_assert(seen == NULL, "the upstream saw X-User-Id: %s", seen);
        http_response_free(&resp);
    }
    /* Both fall through to the per-ip tier (burst 2), one used above. */
    cr_assert_eq(count_passes(&r, u1, 1), 1);
    cr_assert_eq(count_passes(&r, u2, 2), 0,
                 "an untrusted X-User-Id opened a bucket of its own");
    free(yaml);
    rig_stop(&r);
}

Test(ratelimit, x_forwarded_for_from_an_untrusted_peer_is_ignored)
{
    struct rig r;
    const char *a[] = {"X-Forwarded-For: 198.51.100.1", NULL};
    const char *b[] = {"X-Forwarded-For: 198.51.100.2", NULL};
    const char *yaml = "server:\n"
                       "  listen: 127.0.0.1:@PORT@\n"
                       "  workers: 1\n"
                       "limiters:\n"
                       "  per-ip: { algorithm: sliding_window, limit: 1, "
                       "window: 1h }\n"
                       "routes:\n"
                       "  - id: api\n"
                       "    uri: http://@ECHO@\n"
                       "    predicates: [Path=/**]\n"
                       "    filters:\n"
                       "      - name: RequestRateLimiter\n"
                       "        args: { key: ip, limiter: per-ip }\n";
    char *trusting;

    rig_start(&r, false, 1, yaml);
    cr_assert_eq(status_of(&r, "/x", a), 200);
    cr_assert_eq(status_of(&r, "/x", b), 429,
                 "a client picked its own bucket with X-Forwarded-For");
    rig_stop(&r);

    trusting = harness_subst(yaml, "  workers: 1\n",
                             "  workers: 1\n"
                             "  trusted_proxies: [127.0.0.1/32]\n");
    rig_start(&r, false, 1, trusting);
    cr_assert_eq(status_of(&r, "/x", a), 200);
    cr_assert_eq(status_of(&r, "/x", b), 200);
    cr_assert_eq(status_of(&r, "/x", a), 429);
    free(trusting);
    rig_stop(&r);
}

/* ---- what the client is told ---- */

static char *
must_header(const struct http_response *resp, const char *name)
{
    char *v = http_response_header(resp, name);

    cr_assert(v != NULL, "no %s in:\n%s", name, resp->headers);
    return v;
}

Test(ratelimit, refusal_carries_every_field_and_a_problem_body)
{
    struct rig r;
    struct http_response resp;
    char *v, *t_field, *expect, *u;
    long retry;

    rig_start(&r, true, 1,
              GATEWAY_HEAD
              "limiters:\n"
              "  per-user: { algorithm: token_bucket, rate: 1/h, burst: 2 }\n"
              "routes:\n"
              "  - id: api\n"
              "    uri: http://@ECHO@\n"
              "    predicates: [Path=/**]\n"
              "    filters:\n"
              "      - name: RequestRateLimiter\n"
              "        args: { key: ip, limiter: per-user }\n");
    cr_assert_eq(get_with(&r, 0, "/x", NULL, &resp), 200);
    v = must_header(&resp, "RateLimit-Policy");
    cr_assert_str_eq(v, "\"per-user\";q=2;w=7200");
    free(v);
    v = must_header(&resp, "RateLimit");
    cr_assert(strncmp(v, "\"per-user\";r=1;t=", 17) == 0, "%s", v);
    free(v);
    v = must_header(&resp, "X-RateLimit-Limit");
    cr_assert_str_eq(v, "2");
    free(v);
    v = must_header(&resp, "X-RateLimit-Remaining");
    cr_assert_str_eq(v, "1");
    free(v);
    cr_assert_eq(http_response_header_count(&resp, "Retry-After"), 0);
    http_response_free(&resp);

    cr_assert_eq(get_with(&r, 0, "/x", NULL, &resp), 200);
    http_response_free(&resp);
    cr_assert_eq(get_with(&r, 0, "/x", NULL, &resp), 429);
    v = must_header(&resp, "Retry-After");
    retry = atol(v);
    /* 1 token per hour, the last taken a moment ago: about an hour. */
    cr_assert(retry > 3500 && retry <= 3600, "Retry-After: %s", v);
    expect = harness_strf("\"per-user\";r=0;t=%ld", retry);
    t_field = must_header(&resp, "RateLimit");
    cr_assert_str_eq(t_field, expect);
    free(t_field);
    free(expect);
    free(v);
    v = must_header(&resp, "X-RateLimit-Remaining");
    cr_assert_str_eq(v, "0");
    free(v);
    v = must_header(&resp, "Content-Type");
    cr_assert_str_eq(v, "application/problem+json");
    free(v);
    cr_assert(strstr(resp.body, "\"status\":429") != NULL, "%s", resp.body);
    cr_assert(strstr(resp.body, "\"policy\":\"per-user\"") != NULL, "%s",
              resp.body);
    cr_assert(strstr(resp.body, "\"title\":\"Too Many Requests\"") != NULL,
              "%s", resp.body);
    http_response_free(&resp);

    /* A HEAD's answer is headed by evhttp, not by the gateway: the same
     * fields, and no body. */
    u = gw_url(&r, 0, "/x");
    cr_assert_eq(http_request(&resp, "HEAD", u, NULL, NULL, 0, 10000), 0);
    cr_assert_eq(resp.status, 429);
    v = must_header(&resp, "X-RateLimit-Remaining");
    cr_assert_str_eq(v, "0");
    free(v);
    v = must_header(&resp, "Retry-After");
    free(v);
    cr_assert_eq(resp.body_len, 0);
    http_response_free(&resp);
    free(u);
    rig_stop(&r);
}

/* The fields of an answer to 'path': exactly one of each, and 'policy'. */
static long
one_route_fields(const struct rig *r, const char *path, const char *policy)
{
    struct http_response resp;
    long st = get_with(r, 0, path, NULL, &resp);
    char *v;

    cr_assert_eq(http_response_header_count(&resp, "RateLimit-Policy"), 1);
    cr_assert_eq(http_response_header_count(&resp, "RateLimit"), 1);
    cr_assert_eq(http_response_header_count(&resp, "X-RateLimit-Limit"), 1);
    v = must_header(&resp, "RateLimit-Policy");
    cr_assert_str_eq(v, policy);
    free(v);
    if (st == 200) {
        cr_assert_eq(http_response_header_count(&resp, "Retry-After"), 0);
    }
    http_response_free(&resp);
    return st;
}

/*
 * A worker reuses what one decision used (its record, the list of its
 * fields) for the next: a route with two limiters, one of them refusing,
 * in turn with a route with one, and nothing of one answer shows on
 * another.
 */
Test(ratelimit, nothing_of_one_decision_shows_on_the_next)
{
    struct rig r;
    const char *pair = "\"wide\";q=100;w=1, \"two\";q=1;w=3600";
    const char *one = "\"wide\";q=100;w=1";

    rig_start(&r, true, 1,
              GATEWAY_HEAD
              "limiters:\n"
              "  wide: { algorithm: token_bucket, rate: 100/s, burst: 100 }\n"
              "  two: { algorithm: token_bucket, rate: 1/h, burst: 1 }\n"
              "routes:\n"
              "  - id: pair\n"
              "    uri: http://@ECHO@\n"
              "    predicates: [Path=/pair/**]\n"
              "    filters:\n"
              "      - name: RequestRateLimiter\n"
              "        args: { key: ip, limiter: wide }\n"
              "      - name: RequestRateLimiter\n"
              "        args: { key: ip, limiter: two }\n"
              "  - id: one\n"
              "    uri: http://@ECHO@\n"
              "    predicates: [Path=/one/**]\n"
              "    filters:\n"
              "      - name: RequestRateLimiter\n"
              "        args: { key: ip, limiter: wide }\n");
    cr_assert_eq(one_route_fields(&r, "/pair/a", pair), 200);
    for (int i = 0; i < 3; i++) {
        /* Refused by Redis, then from the deny cache at once. */
        cr_assert_eq(one_route_fields(&r, "/pair/a", pair), 429);
        cr_assert_eq(one_route_fields(&r, "/one/a", one), 200);
    }
    rig_stop(&r);
}

Test(ratelimit, dry_run_counts_but_never_refuses)
{
    struct rig r;
    struct http_response resp;
    char *v;

    rig_start(&r, false, 1,
              "server:\n"
              "  listen: 127.0.0.1:@PORT@\n"
              "  workers: 1\n"
              "limiters:\n"
              "  one: { algorithm: sliding_window, limit: 1, window: 1h }\n"
              "routes:\n"
              "  - id: api\n"
              "    uri: http://@ECHO@\n"
              "    predicates: [Path=/**]\n"
              "    filters:\n"
              "      - name: RequestRateLimiter\n"
              "        args: { key: route, limiter: one, dry_run: true }\n");
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(get_with(&r, 0, "/x", NULL, &resp), 200);
        v = must_header(&resp, "X-RateLimit-Remaining");
        cr_assert_str_eq(v, "0");
        free(v);
        /* Retry-After means "come back later" (RFC 9110 10.2.3): on an
         * answer that was not refused it would make clients wait for
         * nothing. */
        cr_assert_eq(http_response_header_count(&resp, "Retry-After"), 0,
                     "request %d: a dry run sent Retry-After with its 200",
                     i + 1);
        http_response_free(&resp);
    }
    rig_stop(&r);
}

/* With empty_key: allow, a request that names no key passes unlimited.
 * A key field sent twice names no one either (the upstream may read the
 * other copy), and it let a client whose key was spent through without
 * any limit, as the key it had spent. It is refused instead. */
Test(ratelimit, a_repeated_key_field_is_refused_even_with_empty_key_allow)
{
    static const char *const once[] = {"X-Api-Key: k9", NULL};
    static const char *const twice[] = {"X-Api-Key: k9", "X-Api-Key: k9", NULL};
    static const char *const junk[] = {"X-Api-Key: junk", "X-Api-Key: k9",
                                       NULL};
    static const char *const cookies[] = {"Cookie: k=k9; k=k8", NULL};
    struct rig r;

    rig_start(&r, false, 1,
              "server:\n"
              "  listen: 127.0.0.1:@PORT@\n"
              "  workers: 1\n"
              "limiters:\n"
              "  two: { algorithm: fixed_window, limit: 2, window: 1h }\n"
              "routes:\n"
              "  - id: hdr\n"
              "    uri: http://@ECHO@\n"
              "    predicates: [Path=/hdr/**]\n"
              "    filters:\n"
              "      - name: RequestRateLimiter\n"
              "        args: { key: 'header:X-Api-Key', limiter: two, "
              "empty_key: allow }\n"
              "  - id: ck\n"
              "    uri: http://@ECHO@\n"
              "    predicates: [Path=/ck/**]\n"
              "    filters:\n"
              "      - name: RequestRateLimiter\n"
              "        args: { key: 'cookie:k', limiter: two, "
              "empty_key: allow }\n"
              "  - id: dry\n"
              "    uri: http://@ECHO@\n"
              "    predicates: [Path=/dry/**]\n"
              "    filters:\n"
              "      - name: RequestRateLimiter\n"
              "        args: { key: 'header:X-Api-Key', limiter: two, "
              "empty_key: allow, dry_run: true }\n");
    cr_assert_eq(status_of(&r, "/hdr/a", once), 200);
    cr_assert_eq(status_of(&r, "/hdr/a", once), 200);
    cr_assert_eq(status_of(&r, "/hdr/a", once), 429);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(status_of(&r, "/hdr/a", twice), 403,
                     "the key sent twice passed");
        cr_assert_eq(status_of(&r, "/hdr/a", junk), 403,
                     "a junk key before the spent one passed");
        cr_assert_eq(status_of(&r, "/ck/a", cookies), 403,
                     "a repeated cookie passed");
    }
    /* A dry run refuses nothing, this neither. */
    cr_assert_eq(status_of(&r, "/dry/a", twice), 200);
    /* Naming no key at all still passes, as empty_key: allow says. */
    cr_assert_eq(status_of(&r, "/hdr/a", NULL), 200);
    cr_assert_eq(status_of(&r, "/ck/a", NULL), 200);
    rig_stop(&r);
}

/* The value of the sample 'series' (name and labels as rendered), or -1. */
static long
metric_sample(const char *text, const char *series)
{
    const char *p = text;
    size_t n = strlen(series);

    while ((p = strstr(p, series)) != NULL) {
        if ((p == text || p[-1] == '\n') && p[n] == ' ') {
            return atol(p + n + 1);
        }
        p += n;
    }
    return -1;
}

Test(ratelimit, a_refusal_with_status_403_is_labelled_denied_not_no_key)
{
    struct rig r;
    struct http_response resp;
    uint16_t admin = harness_free_port();
    char *yaml = harness_strf(
        "server:\n"
        "  listen: 127.0.0.1:@PORT@\n"
        "  workers: 1\n"
        "admin:\n"
        "  listen: 127.0.0.1:%u\n"
        "limiters:\n"
        "  one: { algorithm: sliding_window, limit: 1, window: 1h }\n"
        "routes:\n"
        "  - id: api\n"
        "    uri: http://@ECHO@\n"
        "    predicates: [Path=/**]\n"
        "    filters:\n"
        "      - name: RequestRateLimiter\n"
        "        args: { key: route, limiter: one, status: 403 }\n",
        admin);
    struct log_wait denied = {NULL, "\"GET /x\" route=api status=403 ", 1};
    char *u, *log, *line;

    rig_start(&r, false, 1, yaml);
    cr_assert(harness_wait_port(admin, 5000), "no admin listener");
    cr_assert_eq(status_of(&r, "/x", NULL), 200);
    /* A refusal by the rule: the configured status, not "no key". */
    cr_assert_eq(get_with(&r, 0, "/x", NULL, &resp), 403);
    cr_assert(strstr(resp.body, "\"policy\":\"one\"") != NULL, "%s", resp.body);
    http_response_free(&resp);

    denied.p = &r.gw[0];
    cr_assert(harness_wait_until(proc_log_count_reached, &denied, 5000),
              "no access-log line for the refusal");
    log = proc_log(&r.gw[0]);
    line = strstr(log, denied.needle);
    *strchr(line, '\n') = '\0';
    cr_expect(strstr(line, " rl=denied tier=0") != NULL, "access log: %s",
              line);
    free(log);

    u = harness_strf("http://127.0.0.1:%u/metrics", admin);
    cr_assert_eq(http_get(&resp, u, 10000), 0);
    cr_assert_eq(resp.status, 200);
    cr_expect_eq(metric_sample(resp.body,
                               "sluice_ratelimit_decisions_total{route="
                               "\"api\",limiter=\"one\",tier=\"0\","
                               "result=\"denied\"}"),
                 1, "%s", resp.body);
    cr_expect_eq(metric_sample(resp.body,
                               "sluice_ratelimit_decisions_total{route="
                               "\"api\",limiter=\"one\",tier=\"0\","
                               "result=\"no_key\"}"),
                 -1, "%s", resp.body);
    http_response_free(&resp);
    free(u);
    free(yaml);
    rig_stop(&r);
}

/* ---- the over-limit cache ---- */

/* The calls of the commands named in 'cmds' (NULL-terminated) that
 * Redis has run, from INFO commandstats. */
static long
command_calls(const struct rig *r, const char *const *cmds)
{
    redisContext *c = redis_sync(r);
    redisReply *rep = redisCommand(c, "INFO commandstats");
    long n = 0;

    cr_assert(rep != NULL && rep->type == REDIS_REPLY_STRING);
    for (size_t i = 0; cmds[i] != NULL; i++) {
        char *field = harness_strf("cmdstat_%s:calls=", cmds[i]);
        const char *p = strstr(rep->str, field);

        n += p != NULL ? atol(p + strlen(field)) : 0;
        free(field);
    }
    freeReplyObject(rep);
    redisFree(c);
    return n;
}

/* Script commands Redis has run (EVALSHA and EVAL): one per call, or one
 * per batch of calls (lua/README.md, "Batches"). */
static long
script_calls(const struct rig *r)
{
    static const char *const cmds[] = {"evalsha", "eval", NULL};

    return command_calls(r, cmds);
}

#define CACHE_ROUTE                                                            \
    "routes:\n"                                                                \
    "  - id: api\n"                                                            \
    "    uri: http://@ECHO@\n"                                                 \
    "    predicates: [Path=/**]\n"                                             \
    "    filters:\n"                                                           \
    "      - name: RequestRateLimiter\n"                                       \
    "        args: { key: \"header:X-Key\", limiter: lim }\n"

Test(ratelimit, a_refused_key_is_refused_without_redis_while_another_passes)
{
    const char *a[] = {"X-Key: a", NULL};
    const char *b[] = {"X-Key: b", NULL};
    struct rig r;
    struct http_response resp;
    char *first_body = NULL;
    long calls;

    rig_start(&r, true, 1,
              GATEWAY_HEAD "limiters:\n"
                           "  lim: { algorithm: token_bucket, rate: 1/h, "
                           "burst: 2 }\n" CACHE_ROUTE);
    cr_assert_eq(status_of(&r, "/x", a), 200);
    cr_assert_eq(status_of(&r, "/x", a), 200);
    for (int i = 0; i < 100; i++) {
        char *retry;

        cr_assert_eq(get_with(&r, 0, "/x", a, &resp), 429, "request %d", i);
        /* A refusal from the cache reads as the one Redis gave. */
        retry = must_header(&resp, "Retry-After");
        cr_assert(atol(retry) > 3500 && atol(retry) <= 3600, "%s", retry);
        free(retry);
        retry = must_header(&resp, "X-RateLimit-Remaining");
        cr_assert_str_eq(retry, "0");
        free(retry);
        cr_assert(strstr(resp.body, "\"policy\":\"lim\"") != NULL, "%s",
                  resp.body);
        if (first_body == NULL) {
            first_body = strdup(resp.body);
        }
        http_response_free(&resp);
        /* Another caller's key is decided by Redis as ever. */
        if (i == 50) {
            cr_assert_eq(status_of(&r, "/x", b), 200);
            cr_assert_eq(status_of(&r, "/x", b), 200);
            cr_assert_eq(status_of(&r, "/x", b), 429);
        }
    }
    cr_assert(strstr(first_body, "\"retry_after_ms\":") != NULL, "%s",
              first_body);
    free(first_body);
    /* a: two admissions and one refusal asked Redis; b: the same. The
     * other 99 refusals of a never reached it. */
    calls = script_calls(&r);
    cr_assert_eq(calls, 6, "Redis ran %ld script calls", calls);
    rig_stop(&r);
}

/* The body's retry_after_ms of a refusal, or -1. */
static long
retry_after_ms(const struct http_response *resp)
{
    const char *p = strstr(resp->body, "\"retry_after_ms\":");

    return p != NULL ? atol(p + strlen("\"retry_after_ms\":")) : -1;
}

Test(ratelimit, a_cached_refusal_ends_by_the_time_redis_would_admit)
{
    const char *a[] = {"X-Key: a", NULL};
    struct rig r;
    struct http_response resp;

    rig_start(&r, true, 1,
              GATEWAY_HEAD "limiters:\n"
                           "  lim: { algorithm: token_bucket, rate: 2/s, "
                           "burst: 1 }\n" CACHE_ROUTE);
    for (int round = 0; round < 3; round++) {
        int64_t refused_at;
        long wait_ms;
        long calls_before;
        int cached = 0;

        /* The bucket may hold its unit from the last round, or may not
         * yet: take it, waiting at most one refill. */
        for (int64_t deadline = harness_now_ms() + 2000;
             status_of(&r, "/x", a) != 200;) {
            cr_assert(harness_now_ms() < deadline, "never admitted");
        }
        cr_assert_eq(get_with(&r, 0, "/x", a, &resp), 429);
        refused_at = harness_now_ms();
        wait_ms = retry_after_ms(&resp);
        http_response_free(&resp);
        cr_assert(wait_ms > 0 && wait_ms <= 500, "retry_after_ms %ld", wait_ms);
        /* Refusals in the meantime come from the cache... */
        calls_before = script_calls(&r);
        while (harness_now_ms() < refused_at + wait_ms - 50) {
            cr_assert_eq(status_of(&r, "/x", a), 429);
            cached++;
        }
        cr_assert_eq(script_calls(&r), calls_before, "%d refusals asked Redis",
                     cached);
        /* ...and once Redis would admit, so does the gateway: the cache
         * never refuses past the refusal's own retry_after. */
        while (harness_now_ms() < refused_at + wait_ms) {
            continue;
        }
        cr_assert_eq(status_of(&r, "/x", a), 200,
                     "refused at or after retry_after_ms (%ld ms)", wait_ms);
    }
    rig_stop(&r);
}

/* ---- leases on a hot key ---- */

/* Burst 3000, refilled 1000 a day: under one unit (86.4 s) in a test. */
#define HOT_LIMIT 3000
#define HOT_ROUTE                                                              \
    "routes:\n"                                                                \
    "  - id: api\n"                                                            \
    "    uri: http://@ECHO@\n"                                                 \
    "    predicates: [Path=/**]\n"                                             \
    "    filters:\n"                                                           \
    "      - name: RequestRateLimiter\n"                                       \
    "        args: { key: route, limiter: hot }\n"

/* One gateway's config: the hot limiter with leases of up to 50; the
 * burst (%d) is HOT_LIMIT. */
#define HOT_LEASE_50                                                           \
    GATEWAY_HEAD "limiters:\n"                                                 \
                 "  hot: { algorithm: token_bucket, rate: 1000/d, "            \
                 "burst: %d, lease: 50 }\n" HOT_ROUTE

/* Pauses every client of the rig's Redis for 'ms' (CLIENT PAUSE ALL). */
static void
redis_pause(redisContext *rc, int ms)
{
    redisReply *rep = redisCommand(rc, "CLIENT PAUSE %d ALL", ms);

    cr_assert(rep != NULL && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
}

struct hot_poll {
    const struct rig *r; /* the gateways */
    size_t next;         /* the gateway the next request goes to */
    size_t admitted;     /* 200s so far */
    size_t want;         /* stop once this many are admitted */
};

/* One request, to the gateways in turn; true once 'want' are admitted. */
static bool
hot_admit_one(void *arg)
{
    struct hot_poll *hp = arg;
    char *u = gw_url(hp->r, hp->next++ % hp->r->ngw, "/hot");
    struct http_response resp;

    http_request(&resp, "GET", u, NULL, NULL, 0, 10000);
    cr_assert(resp.status == 200 || resp.status == 429, "status %ld",
              resp.status);
    hp->admitted += resp.status == 200;
    http_response_free(&resp);
    free(u);
    return hp->admitted >= hp->want;
}

/* The hot limiter's rule: 1000 a day, burst HOT_LIMIT. */
#define HOT_L 1000LL
#define HOT_W 86400000LL

struct hot_level {
    const struct rig *r; /* the Redis */
    bool gcra;           /* how the state reads */
    long long units;     /* the units Redis has now */
    long long expect;    /* the condition: units == expect */
};

/* Reads the units the one hot key holds in Redis now (lua/README.md,
 * "State"). */
static bool
hot_level_is(void *arg)
{
    struct hot_level *hl = arg;
    redisContext *c = redis_sync(hl->r);
    redisReply *keys = redisCommand(c, "KEYS *:hot:*");
    long long now = redis_now_ms(c);
    long long full = HOT_LIMIT * HOT_W;

    cr_assert(keys != NULL && keys->type == REDIS_REPLY_ARRAY);
    hl->units = HOT_LIMIT; /* no key: a full bucket */
    if (keys->elements == 1) {
        redisReply *v = redisCommand(c, "GET %s", keys->element[0]->str);
        long long a = 0, b = 0;

        cr_assert(v != NULL);
        if (v->type == REDIS_REPLY_NIL) {
            /* A bucket back to full expires its key, maybe just now. */
            freeReplyObject(v);
            freeReplyObject(keys);
            redisFree(c);
            return hl->units == hl->expect;
        }
        cr_assert(v->type == REDIS_REPLY_STRING);
        cr_assert_eq(sscanf(v->str, "%lld:%lld", &a, &b), 2, "%s", v->str);
        if (hl->gcra) {
            long long d = a >= now ? (a - now) * HOT_L + b : 0;

            hl->units = (full - d) / HOT_W;
        } else {
            long long lvl = a + (now > b ? now - b : 0) * HOT_L;

            hl->units = (lvl < full ? lvl : full) / HOT_W;
        }
        freeReplyObject(v);
    } else {
        cr_assert_eq(keys->elements, 0);
    }
    freeReplyObject(keys);
    redisFree(c);
    return hl->units == hl->expect;
}

/*
 * The exactness test of four gateways with leases on one hot key, 200
 * connections to each. The bucket holds HOT_LIMIT and refills less than
 * one unit in the test (skipped if it ran that long), so "exact" is
 * exact: the units Redis holds are HOT_LIMIT minus those admitted, once
 * the leases are back; never more than HOT_LIMIT admitted; exactly
 * HOT_LIMIT in the end; and at most one Redis call per ten admitted
 * requests, where without leases it is one per request.
 */
/* Every worker of a gateway has logged its Redis connection. */
struct connected_wait {
    const struct proc *gw; /* borrowed */
    size_t workers;        /* how many must have connected */
};

static bool
workers_connected(void *arg)
{
    struct connected_wait *cw = arg;
    char *log = proc_log(cw->gw);
    size_t n = 0;

    for (const char *p = strstr(log, "redis: connected"); p != NULL;
         p = strstr(p + 1, "redis: connected")) {
        n++;
    }
    free(log);
    return n >= cw->workers;
}

static void
hot_key_exactness(const char *algorithm, int lease, int workers)
{
    struct rig r;
    struct load_result res;
    const char *urls[MAX_GATEWAYS];
    char *owned[MAX_GATEWAYS];
    redisContext *rc;
    long long before, after;
    long calls;
    struct hot_poll hp;
    struct hot_level hl;
    size_t admitted;
    char *yaml = harness_strf(
        "server:\n"
        "  listen: 127.0.0.1:@PORT@\n"
        "  workers: %d\n"
        "redis:\n"
        "  url: redis://@REDIS@/0\n"
        "  timeout: 1s\n"
        "limiters:\n"
        "  hot: { algorithm: %s, rules: [ { rate: 1000/d, burst: %d } ]%s "
        "}\n" HOT_ROUTE,
        workers, algorithm, HOT_LIMIT, lease > 0 ? ", lease: 100" : "");

    rig_start(&r, true, 4, yaml);
    for (size_t i = 0; i < 4; i++) {
        struct connected_wait cw = {&r.gw[i], (size_t)workers};

        cr_assert(harness_wait_until(workers_connected, &cw, 10000),
                  "gateway %zu: not every worker connected to Redis", i);
    }
    for (size_t i = 0; i < 4; i++) {
        owned[i] = gw_url(&r, i, "/hot");
        urls[i] = owned[i];
    }
    rc = redis_sync(&r);
    before = redis_now_ms(rc);
    /* Two thirds of the limit: all admitted, whatever the leases hold. */
    http_load(urls, 4, NULL, 0, 800, 2000, 20000, &res);
    cr_assert_eq(res.errors, 0);
    cr_assert_eq(res.status[200], 2000, "%s: admitted %zu of 2000", algorithm,
                 res.status[200]);
    hl = (struct hot_level){&r, strcmp(algorithm, "gcra") == 0, 0,
                            HOT_LIMIT - 2000};
    hot_level_is(&hl);
    cr_log_info("%s, lease %d, %d workers: Redis has %lld units while "
                "leases are out",
                algorithm, lease, workers, hl.units);
    /* At most N per worker and gateway are out. */
    cr_assert_geq(hl.units, HOT_LIMIT - 2000 - 100 * 4 * workers);
    cr_assert_leq(hl.units, HOT_LIMIT - 2000);
    /* The leases come back (within their one-second lifetime): then Redis
     * holds exactly what was not admitted. */
    cr_assert(harness_wait_until(hot_level_is, &hl, 10000),
              "%s: Redis holds %lld units after 2000 admitted, not %d",
              algorithm, hl.units, HOT_LIMIT - 2000);
    /* Past the limit under load: never over it. */
    http_load(urls, 4, NULL, 0, 800, 2000, 20000, &res);
    cr_assert_eq(res.errors, 0);
    admitted = 2000 + res.status[200];
    cr_assert_leq(admitted, HOT_LIMIT, "%s: admitted %zu of %d", algorithm,
                  admitted, HOT_LIMIT);
    /* Then the units still on lease come back and are admitted too: the
     * limit exactly, and not one more, from any gateway. */
    hp = (struct hot_poll){&r, 0, admitted, HOT_LIMIT};
    cr_assert(harness_wait_until(hot_admit_one, &hp, 20000),
              "%s: %zu admitted in all; %d expected", algorithm, hp.admitted,
              HOT_LIMIT);
    for (size_t i = 0; i < 8; i++) {
        hp.want = hp.admitted + 1;
        cr_assert_not(hot_admit_one(&hp), "%s: admitted past the limit",
                      algorithm);
    }
    hl.expect = 0;
    cr_assert(hot_level_is(&hl), "%s: %lld units left in Redis", algorithm,
              hl.units);
    after = redis_now_ms(rc);
    redisFree(rc);
    calls = script_calls(&r);
    cr_log_info("%s, lease %d, %d workers: %ld script calls for %d "
                "admitted (%.4f)",
                algorithm, lease, workers, calls, HOT_LIMIT,
                (double)calls / HOT_LIMIT);
    if (after - before >= HOT_W / HOT_L) {
        rig_stop(&r);
        cr_skip_test("the test ran long enough for the bucket to refill");
    }
    cr_assert_leq(calls * 10, HOT_LIMIT,
                  "%s: %ld Redis calls for %d admitted requests", algorithm,
                  calls, HOT_LIMIT);
    for (size_t i = 0; i < 4; i++) {
        free(owned[i]);
    }
    free(yaml);
    rig_stop(&r);
}

Test(ratelimit, four_gateways_with_leases_on_a_token_bucket_stay_exact,
     .timeout = 120)
{
    hot_key_exactness("token_bucket", 100, 1);
}

Test(ratelimit, four_gateways_with_leases_on_gcra_stay_exact, .timeout = 120)
{
    hot_key_exactness("gcra", 100, 1);
}

/* Eight lease holders: two workers in each of the four gateways. */
Test(ratelimit, four_gateways_of_two_workers_with_leases_stay_exact,
     .timeout = 120)
{
    hot_key_exactness("token_bucket", 100, 2);
}

/* The sample 'series' of gateway admin port 'admin''s /metrics, or -1. */
static long
admin_metric(uint16_t admin, const char *series)
{
    char *u = harness_strf("http://127.0.0.1:%u/metrics", admin);
    struct http_response resp;
    long v;

    cr_assert_eq(http_get(&resp, u, 10000), 0);
    cr_assert_eq(resp.status, 200);
    v = metric_sample(resp.body, series);
    http_response_free(&resp);
    free(u);
    return v;
}

struct returned_wait {
    uint16_t admin; /* the gateway's admin port */
    long units;     /* the condition: at least this many returned */
};

static bool
units_returned(void *arg)
{
    struct returned_wait *rw = arg;

    return admin_metric(rw->admin, "sluice_ratelimit_lease_units_total{"
                                   "event=\"returned\"}") >= rw->units;
}

/*
 * One worker on a hot key: requests admitted from its lease count down
 * RateLimit-Remaining exactly as Redis would (the units in Redis plus
 * those the lease holds); an unused lease goes back after its lifetime,
 * and at drain; /metrics counts hits and units.
 */
Test(ratelimit, a_lease_counts_down_exactly_and_goes_back_in_time_and_at_drain)
{
    struct rig r;
    uint16_t admin = harness_free_port();
    char *yaml = harness_strf(
        "server:\n"
        "  listen: 127.0.0.1:@PORT@\n"
        "  workers: 1\n"
        "admin:\n"
        "  listen: 127.0.0.1:%u\n"
        "redis:\n"
        "  url: redis://@REDIS@/0\n"
        "  timeout: 1s\n"
        "limiters:\n"
        "  hot: { algorithm: token_bucket, rate: 1000/d, burst: %d, "
        "lease: 50 }\n" HOT_ROUTE,
        admin, HOT_LIMIT);
    struct hot_level hl;
    struct returned_wait rw;
    long hits, taken, returned;

    rig_start(&r, true, 1, yaml);
    cr_assert(harness_wait_port(admin, 5000), "no admin listener");
    hl = (struct hot_level){&r, false, 0, 0};
    for (int i = 1; i <= 100; i++) {
        struct http_response resp;
        char *rem;

        cr_assert_eq(get_with(&r, 0, "/hot", NULL, &resp), 200);
        rem = must_header(&resp, "X-RateLimit-Remaining");
        cr_assert_eq(atol(rem), HOT_LIMIT - i, "request %d: remaining %s", i,
                     rem);
        free(rem);
        http_response_free(&resp);
    }
    hits = admin_metric(admin, "sluice_ratelimit_lease_hits_total");
    taken = admin_metric(admin, "sluice_ratelimit_lease_units_total{"
                                "event=\"taken\"}");
    /* Takes of 1, 2, 4, 8, 16, 32, then 50: 7 of 100 asked Redis. */
    cr_assert_eq(hits, 93, "lease hits: %ld", hits);
    cr_assert_eq(taken, 113, "units taken: %ld", taken);
    /* 13 units on lease: Redis has 2887; they come back in time. */
    hot_level_is(&hl);
    cr_assert_eq(hl.units, HOT_LIMIT - 113);
    rw = (struct returned_wait){admin, 13};
    cr_assert(harness_wait_until(units_returned, &rw, 5000),
              "the lease never went back");
    hl.expect = HOT_LIMIT - 100;
    cr_assert(hot_level_is(&hl), "Redis has %lld units", hl.units);
    /* Drain: the worker hands back what it holds before it exits. */
    for (int i = 0; i < 10; i++) {
        cr_assert_eq(status_of(&r, "/hot", NULL), 200);
    }
    hl.expect = HOT_LIMIT - 110;
    cr_assert_not(hot_level_is(&hl), "no units on lease before the drain");
    returned = admin_metric(admin, "sluice_ratelimit_lease_units_total{"
                                   "event=\"returned\"}");
    cr_assert_eq(returned, 13);
    cr_assert_eq(proc_stop(&r.gw[0], SIGTERM, 15000), 0);
    cr_assert(hot_level_is(&hl), "Redis has %lld units after the drain",
              hl.units);
    r.ngw = 0;
    unlink(r.cfg_path[0]);
    free(r.cfg_path[0]);
    free(yaml);
    rig_stop(&r);
}

/*
 * Redis goes away while a worker holds a lease: the units of the lease
 * are still admitted (Redis counted them already), then the failure
 * policy decides.
 */
Test(ratelimit, a_lease_held_when_redis_goes_away_is_still_spent)
{
    struct rig r;
    char *yaml = harness_strf(
        "server:\n"
        "  listen: 127.0.0.1:@PORT@\n"
        "  workers: 1\n"
        "redis:\n"
        "  url: redis://@REDIS@/0\n"
        "  timeout: 200ms\n"
        "limiters:\n"
        "  hot: { algorithm: gcra, rate: 1000/d, burst: %d, lease: 50 }\n"
        "routes:\n"
        "  - id: api\n"
        "    uri: http://@ECHO@\n"
        "    predicates: [Path=/**]\n"
        "    filters:\n"
        "      - name: RequestRateLimiter\n"
        "        args: { key: route, limiter: hot, on_redis_error: deny }\n",
        HOT_LIMIT);
    int from_lease = 0;

    rig_start(&r, true, 1, yaml);
    /* Takes of 1, 2, 4, 8, 16, 32, then 50 at request 64: after 70, the
     * lease holds 43. */
    for (int i = 0; i < 70; i++) {
        cr_assert_eq(status_of(&r, "/hot", NULL), 200, "request %d", i);
    }
    cr_assert_eq(proc_stop(&r.redis, SIGTERM, 5000), 0);
    for (int i = 0; i < 60; i++) {
        long st = status_of(&r, "/hot", NULL);

        if (st == 200) {
            cr_assert_eq(from_lease, i, "a 200 after a 503 (request %d)", i);
            from_lease++;
        } else {
            cr_assert_eq(st, 503, "request %d: %ld", i, st);
        }
    }
    cr_assert(from_lease >= 1 && from_lease <= 43, "%d admitted from the lease",
              from_lease);
    free(yaml);
    rig_stop(&r);
}

/*
 * Clients that give up while their requests wait for a take (Redis is
 * paused): the take that went out still lands in the lease, the cost of
 * the request that sent it included, and all of it goes back: no unit is
 * lost to a request that was never served.
 */
Test(ratelimit, a_take_whose_requests_all_left_goes_back_whole)
{
    struct rig r;
    char *yaml = harness_strf(HOT_LEASE_50, HOT_LIMIT);
    const char *urls[1];
    char *u;
    struct load_result res;
    struct hot_level hl;
    redisContext *rc;

    rig_start(&r, true, 1, yaml);
    u = gw_url(&r, 0, "/hot");
    urls[0] = u;
    rc = redis_sync(&r);
    redis_pause(rc, 600);
    /* One takes, nineteen wait behind it; all give up after 150 ms. */
    http_load(urls, 1, NULL, 0, 20, 20, 150, &res);
    cr_assert_eq(res.errors, 20, "%zu of 20 gave up", res.errors);
    /* The take lands once Redis resumes; its lease ends and goes back. */
    {
        int64_t deadline = harness_now_ms() + 10000;

        while (script_calls(&r) < 1 && harness_now_ms() < deadline) {
        }
        cr_assert_geq(script_calls(&r), 1, "the take never ran");
    }
    hl = (struct hot_level){&r, false, 0, HOT_LIMIT};
    cr_assert(harness_wait_until(hot_level_is, &hl, 10000),
              "Redis has %lld units; %d were never admitted", hl.units,
              HOT_LIMIT);
    redisFree(rc);
    /* And the key is decided as ever afterwards. */
    cr_assert_eq(status_of(&r, "/hot", NULL), 200);
    free(u);
    free(yaml);
    rig_stop(&r);
}

/*
 * Redis stalls under a hot key whose takes have grown to the whole lease:
 * each take that times out may still be granted when Redis resumes, so
 * it counts as lost. Only the first may ask for the lease; those after it
 * ask for one request's cost. Each of them used to ask for the whole
 * lease again, so that a short stall emptied the bucket.
 */
Test(ratelimit, takes_into_a_stalled_redis_lose_one_lease_not_one_each)
{
    struct rig r;
    uint16_t admin = harness_free_port();
    char *yaml = harness_strf(
        "server:\n"
        "  listen: 127.0.0.1:@PORT@\n"
        "  workers: 1\n"
        "admin:\n"
        "  listen: 127.0.0.1:%u\n"
        "redis:\n"
        "  url: redis://@REDIS@/0\n"
        "  timeout: 50ms\n"
        "limiters:\n"
        "  hot: { algorithm: token_bucket, rate: 1000/d, burst: %d, "
        "lease: 50 }\n" HOT_ROUTE,
        admin, HOT_LIMIT);
    redisContext *rc;
    int slow = 0;
    int64_t deadline;
    long lost, lost0;

    rig_start(&r, true, 1, yaml);
    cr_assert(harness_wait_port(admin, 5000), "no admin listener");
    /* Takes of 1, 2, 4, ... 32, then 50 (the README's worked example). */
    for (int i = 0; i < 100; i++) {
        cr_assert_eq(status_of(&r, "/hot", NULL), 200);
    }
    rc = redis_sync(&r);
    /* A take of the warm-up that a loaded machine let time out counts
     * apart. */
    lost0 = admin_metric(admin, "sluice_ratelimit_lease_units_total{"
                                "event=\"lost\"}");
    lost0 = lost0 < 0 ? 0 : lost0;
    /* Under the second after which a silent connection is dropped (its
     * queued takes would then never run): about 13 requests from the
     * lease and 4 takes of 50 ms each must fit in it. */
    redis_pause(rc, 900);
    /* One request at a time: those the lease covers pass at once; each
     * after them is a take that waits out redis.timeout. */
    deadline = harness_now_ms() + 5000;
    while (slow < 4 && harness_now_ms() < deadline) {
        int64_t t0 = harness_now_ms();

        cr_assert_eq(status_of(&r, "/hot", NULL), 200);
        slow += harness_now_ms() - t0 >= 40;
    }
    cr_assert_eq(slow, 4, "only %d takes waited out redis.timeout", slow);
    lost = admin_metric(admin, "sluice_ratelimit_lease_units_total{"
                               "event=\"lost\"}") -
           lost0;
    /* The first take asked for the lease (50), the three after it for 1
     * each; one each of 50 lost 200. */
    cr_assert_leq(lost, 53, "%ld units lost to 4 takes", lost);
    cr_assert_geq(lost, 4, "%ld units lost to 4 takes", lost);
    redisFree(rc);
    free(yaml);
    rig_stop(&r);
}

/*
 * Redis slow to answer a take: the requests that waited for it half of
 * redis.timeout or more make their own calls when it lands, rather than
 * wait for another take; every one is admitted once, and the units add
 * up once the lease is back.
 */
Test(ratelimit, requests_that_waited_long_for_a_take_make_their_own_calls)
{
    struct rig r;
    uint16_t admin = harness_free_port();
    char *yaml = harness_strf(HOT_LEASE_50 "admin:\n  listen: 127.0.0.1:%u\n",
                              HOT_LIMIT, admin);
    const char *urls[1];
    char *u;
    struct load_result res;
    struct hot_level hl;
    redisContext *rc;

    rig_start(&r, true, 1, yaml);
    u = gw_url(&r, 0, "/hot");
    urls[0] = u;
    rc = redis_sync(&r);
    /* redis.timeout is 1 s: the take lands after 700 ms, past 500. */
    redis_pause(rc, 700);
    http_load(urls, 1, NULL, 0, 20, 20, 10000, &res);
    cr_assert_eq(res.errors, 0);
    cr_assert_eq(res.status[200], 20);
    /* One take for the first (a new key asks for its cost only), then
     * one call each for the nineteen that waited: the gateway's own count
     * of its script calls, which may travel in batches. */
    cr_assert_eq(admin_metric(admin, "sluice_redis_duration_seconds_count"), 20,
                 "%ld script calls",
                 admin_metric(admin, "sluice_redis_duration_seconds_count"));
    hl = (struct hot_level){&r, false, 0, HOT_LIMIT - 20};
    cr_assert(harness_wait_until(hot_level_is, &hl, 5000),
              "Redis has %lld units", hl.units);
    redisFree(rc);
    free(u);
    free(yaml);
    rig_stop(&r);
}

/*
 * A request that waited behind a take and then takes again (the lease it
 * was given holds fewer units than its cost) returns those units first:
 * they used to vanish with the new take. Cost 3, leases of up to 10.
 */
Test(ratelimit, a_take_from_the_queue_returns_what_the_lease_left)
{
    struct rig r;
    char *yaml = harness_strf(
        GATEWAY_HEAD "limiters:\n"
                     "  hot: { algorithm: token_bucket, rate: 1000/d, "
                     "burst: %d, lease: 10 }\n"
                     "routes:\n"
                     "  - id: api\n"
                     "    uri: http://@ECHO@\n"
                     "    predicates: [Path=/**]\n"
                     "    filters:\n"
                     "      - name: RequestRateLimiter\n"
                     "        args: { key: route, limiter: hot, cost: 3 }\n",
        HOT_LIMIT);
    const char *urls[1];
    char *u;
    struct load_result res;
    struct hot_level hl;
    redisContext *rc;

    rig_start(&r, true, 1, yaml);
    u = gw_url(&r, 0, "/hot");
    urls[0] = u;
    rc = redis_sync(&r);
    /* All ten queue behind the first take. */
    redis_pause(rc, 300);
    http_load(urls, 1, NULL, 0, 10, 10, 10000, &res);
    cr_assert_eq(res.errors, 0);
    cr_assert_eq(res.status[200], 10);
    hl = (struct hot_level){&r, false, 0, HOT_LIMIT - 30};
    cr_assert(harness_wait_until(hot_level_is, &hl, 5000),
              "Redis has %lld units once the leases are back, want %d",
              hl.units, HOT_LIMIT - 30);
    redisFree(rc);
    free(u);
    free(yaml);
    rig_stop(&r);
}

/* Keeps Redis busy for 900 ms, twice, the second as soon as the first
 * ends: a script that loops on TIME. */
#define BUSY_900MS                                                             \
    "local t = redis.call('TIME') "                                            \
    "local s = t[1] * 1000000 + t[2] "                                         \
    "repeat t = redis.call('TIME') "                                           \
    "until t[1] * 1000000 + t[2] - s >= 900000 "                               \
    "return 1"

static void *
busy_twice(void *arg)
{
    redisContext *c = redis_sync(arg);

    for (int i = 0; i < 2; i++) {
        redisReply *rep = redisCommand(c, "EVAL %s 0", BUSY_900MS);

        freeReplyObject(rep);
    }
    redisFree(c);
    return NULL;
}

/* True while Redis does not answer a PING within 50 ms. */
static bool
redis_is_busy(void *arg)
{
    const struct rig *r = arg;
    struct timeval tv = {0, 50000};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", r->redis_port, tv);
    redisReply *rep;
    bool busy;

    cr_assert(c != NULL && c->err == 0);
    redisSetTimeout(c, tv);
    rep = redisCommand(c, "PING");
    busy = rep == NULL;
    freeReplyObject(rep);
    redisFree(c);
    return busy;
}

/*
 * Redis busy while a take is out, and busy again just after answering it:
 * the requests queued behind the take make their own calls within what
 * is left of redis.timeout (1 s), not within a fresh one, so that none
 * waits longer than redis.timeout in all. They waited up to 1.9 s.
 */
Test(ratelimit, no_request_waits_past_redis_timeout_behind_takes, .timeout = 60)
{
    struct rig r;
    char *yaml = harness_strf(HOT_LEASE_50, HOT_LIMIT);
    const char *urls[1];
    char *u;
    struct load_result res;
    pthread_t th;

    rig_start(&r, true, 1, yaml);
    u = gw_url(&r, 0, "/hot");
    urls[0] = u;
    pthread_create(&th, NULL, busy_twice, &r);
    cr_assert(harness_wait_until(redis_is_busy, &r, 5000),
              "Redis never got busy");
    http_load(urls, 1, NULL, 0, 20, 20, 10000, &res);
    pthread_join(th, NULL);
    cr_assert_eq(res.errors, 0);
    /* 1 s, and room for a loaded machine; a fresh timeout is 1.9 s. */
    cr_assert_leq(res.max_ms, 1300, "a request took %ld ms", res.max_ms);
    free(u);
    free(yaml);
    rig_stop(&r);
}

/* A reload gives the leases back at once, not at the end of their time. */
Test(ratelimit, a_reload_gives_the_leases_back)
{
    struct rig r;
    char *yaml = harness_strf(HOT_LEASE_50, HOT_LIMIT);
    struct hot_level hl;
    int64_t take_at = 0, left;

    rig_start(&r, true, 1, yaml);
    for (int i = 1; i <= 70; i++) {
        if (i == 64) {
            take_at = harness_now_ms(); /* the take of 50 goes out */
        }
        cr_assert_eq(status_of(&r, "/hot", NULL), 200, "request %d", i);
    }
    hl = (struct hot_level){&r, false, 0, HOT_LIMIT - 70};
    hot_level_is(&hl);
    cr_assert_eq(hl.units, HOT_LIMIT - 113, "43 units are out on lease");
    cr_assert_eq(kill(r.gw[0].pid, SIGHUP), 0);
    /* Before the lease's own second is up. */
    left = take_at + 1000 - harness_now_ms();
    cr_assert_gt(left, 0, "too slow to tell a reload from the lease's end");
    cr_assert(harness_wait_until(hot_level_is, &hl, (int)left),
              "Redis has %lld units after the reload", hl.units);
    free(yaml);
    rig_stop(&r);
}

/* ---- delay mode ---- */

static int
cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;

    return (x > y) - (x < y);
}

struct fetch {
    const struct rig *r;   /* borrowed */
    long status;           /* the answer */
    long long received_ms; /* echo's received_ms, or -1 */
};

static void *
fetch_one(void *arg)
{
    struct fetch *f = arg;
    struct http_response resp;
    char *ms;

    get_with(f->r, 0, "/smooth", NULL, &resp);
    f->status = resp.status;
    ms = echo_field(resp.body, "received_ms");
    f->received_ms = ms != NULL ? atoll(ms) : -1;
    free(ms);
    http_response_free(&resp);
    return NULL;
}

Test(ratelimit, delay_mode_spaces_requests_at_the_rate)
{
    enum { N = 10 };
    struct rig r;
    struct fetch f[N];
    pthread_t th[N];
    long long arrived[N], sent;

    rig_start(&r, true, 1,
              GATEWAY_HEAD
              "limiters:\n"
              "  smooth: { algorithm: leaky_bucket, rate: 10/s, burst: 50, "
              "mode: delay, max_delay: 2s }\n"
              "routes:\n"
              "  - id: api\n"
              "    uri: http://@ECHO@\n"
              "    predicates: [Path=/**]\n"
              "    filters:\n"
              "      - name: RequestRateLimiter\n"
              "        args: { key: route, limiter: smooth }\n");
    sent = harness_wall_ms();
    for (int i = 0; i < N; i++) {
        f[i].r = &r;
        pthread_create(&th[i], NULL, fetch_one, &f[i]);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(f[i].status, 200);
        cr_assert_neq(f[i].received_ms, -1);
        arrived[i] = f[i].received_ms;
    }
    qsort(arrived, N, sizeof(arrived[0]), cmp_ll);
    /*
     * 10/s: the k-th request admitted is held until k * 100 ms after the
     * first decision, which came after 'sent'; timers never fire early.
     * (Spacing between arrivals is not the measure: a late first forward,
     * on a slow run, makes the gap after it look short.) The slack covers
     * whole-millisecond clocks.
     */
    for (int k = 1; k < N; k++) {
        cr_assert_geq(arrived[k] - sent, k * 100 - 2,
                      "request %d arrived %lld ms after the requests went out",
                      k, arrived[k] - sent);
    }
    rig_stop(&r);
}

/*
 * Delay mode with leases: a take that must wait grants only its own cost,
 * so the requests past the burst are spaced at the rate as without
 * leases, never sooner.
 */
Test(ratelimit, delay_mode_with_leases_still_spaces_requests_at_the_rate)
{
    /* A burst large enough that takes grant more than one unit: with a
     * burst of 3 every grant was the request's own, and no request was
     * ever admitted from a lease. */
    enum { N = 30, BURST = 20 };
    struct rig r;
    struct fetch f[N];
    pthread_t th[N];
    long long arrived[N], sent;
    uint16_t admin = harness_free_port();
    char *yaml = harness_strf(
        GATEWAY_HEAD "admin:\n"
                     "  listen: 127.0.0.1:%u\n"
                     "limiters:\n"
                     "  smooth: { algorithm: token_bucket, rate: 10/s, "
                     "burst: %d, mode: delay, max_delay: 2s, lease: 10 }\n"
                     "routes:\n"
                     "  - id: api\n"
                     "    uri: http://@ECHO@\n"
                     "    predicates: [Path=/**]\n"
                     "    filters:\n"
                     "      - name: RequestRateLimiter\n"
                     "        args: { key: route, limiter: smooth }\n",
        admin, BURST);

    rig_start(&r, true, 1, yaml);
    sent = harness_wall_ms();
    for (int i = 0; i < N; i++) {
        f[i].r = &r;
        pthread_create(&th[i], NULL, fetch_one, &f[i]);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(f[i].status, 200);
        cr_assert_neq(f[i].received_ms, -1);
        arrived[i] = f[i].received_ms;
    }
    qsort(arrived, N, sizeof(arrived[0]), cmp_ll);
    /* The burst at once, then one every 100 ms (see above for the slack). */
    for (int k = BURST; k < N; k++) {
        cr_assert_geq(arrived[k] - sent, (k - BURST + 1) * 100 - 2,
                      "request %d arrived %lld ms after the requests went out",
                      k, arrived[k] - sent);
    }
    cr_assert_gt(admin_metric(admin, "sluice_ratelimit_lease_hits_total"), 0,
                 "no request was admitted from a lease");
    free(yaml);
    rig_stop(&r);
}

struct held_wait {
    uint16_t admin; /* the gateway's admin port */
    long n;         /* the condition: this many held */
};

static bool
held_reached(void *arg)
{
    struct held_wait *hw = arg;

    return admin_metric(hw->admin, "sluice_requests_held") == hw->n;
}

/* A GET of 'path' on a socket of its own, left open unread: -1 if it
 * could not be sent. */
static int
send_and_hold(uint16_t port, const char *path)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    char *req = harness_strf("GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        send(fd, req, strlen(req), MSG_NOSIGNAL) != (ssize_t)strlen(req)) {
        if (fd >= 0) {
            close(fd);
        }
        fd = -1;
    }
    free(req);
    return fd;
}

/*
 * Past server.max_held a request that would be held is refused as one
 * that would wait past max_delay is: with the rate-limit fields, and
 * nothing reserved for it. It was refused after its wait had been
 * reserved, so each such refusal pushed every later request's wait back
 * by one more interval, and it carried no Retry-After.
 *
 * One unit every 10 s, a burst of 1: the first request passes, the
 * second is held 10 s (the one the worker may hold); the next two would
 * each wait 20 s, since nothing is reserved for the refused ones.
 */
Test(ratelimit, past_max_held_a_request_is_refused_without_reserving)
{
    static const char *const backend[] = {"", ", backend: local"};

    for (size_t b = 0; b < 2; b++) {
        uint16_t admin = harness_free_port();
        char *yaml =
            harness_strf("server:\n"
                         "  listen: 127.0.0.1:@PORT@\n"
                         "  workers: 1\n"
                         "  max_held: 1\n"
                         "%s"
                         "admin:\n"
                         "  listen: 127.0.0.1:%u\n"
                         "limiters:\n"
                         "  slow: { algorithm: token_bucket, rate: 6/m, "
                         "burst: 1, mode: delay, max_delay: 1m }\n"
                         "routes:\n"
                         "  - id: api\n"
                         "    uri: http://@ECHO@\n"
                         "    predicates: [Path=/**]\n"
                         "    filters:\n"
                         "      - name: RequestRateLimiter\n"
                         "        args: { key: route, limiter: slow%s }\n",
                         b == 0 ? "redis:\n  url: redis://@REDIS@/0\n" : "",
                         admin, backend[b]);
        struct held_wait one = {admin, 1};
        struct rig r;
        int held;

        rig_start(&r, b == 0, 1, yaml);
        cr_assert_eq(status_of(&r, "/first", NULL), 200);
        held = send_and_hold(r.gw_port[0], "/held");
        cr_assert_geq(held, 0);
        cr_assert(harness_wait_until(held_reached, &one, 5000),
                  "the second request was not held");
        for (int i = 0; i < 2; i++) {
            struct http_response resp;
            char *ra;

            cr_assert_eq(get_with(&r, 0, "/over", NULL, &resp), 429);
            ra = http_response_header(&resp, "Retry-After");
            cr_assert(ra != NULL, "%s refusal %d has no Retry-After",
                      backend[b], i);
            cr_assert(atol(ra) >= 15 && atol(ra) <= 20,
                      "%s refusal %d: Retry-After %s, want about 20 s "
                      "(30: the refused request before it reserved 10 s)",
                      backend[b], i, ra);
            free(ra);
            http_response_free(&resp);
        }
        cr_assert_eq(admin_metric(admin, "sluice_requests_held"), 1);
        close(held);
        free(yaml);
        rig_stop(&r);
    }
}

/* ---- when Redis fails ---- */

#define POLICY_ROUTES                                                          \
    "limiters:\n"                                                              \
    "  five: { algorithm: sliding_window, limit: 5, window: 1h }\n"            \
    "routes:\n"                                                                \
    "  - id: api\n"                                                            \
    "    uri: http://@ECHO@\n"                                                 \
    "    predicates: [Path=/**]\n"                                             \
    "    filters:\n"                                                           \
    "      - name: RequestRateLimiter\n"                                       \
    "        args: { key: route, limiter: five, on_redis_error: @POLICY@ }\n"

static void
run_policy(const char *policy, size_t want_ok, long want_other)
{
    struct rig r;
    struct load_result res;
    char *routes =
        harness_subst(GATEWAY_HEAD POLICY_ROUTES, "@POLICY@", policy);
    char *yaml = harness_subst(routes, "timeout: 1s", "timeout: 200ms");
    const char *urls[1];
    char *u;
    uint16_t port;

    free(routes);
    rig_start(&r, true, 1, yaml);
    cr_assert_eq(status_of(&r, "/x", NULL), 200, "%s: Redis up", policy);
    port = r.redis_port;
    cr_assert_eq(proc_stop(&r.redis, SIGKILL, 5000), 128 + SIGKILL);

    u = gw_url(&r, 0, "/x");
    urls[0] = u;
    http_load(urls, 1, NULL, 0, 4, 12, 10000, &res);
    cr_assert_eq(res.errors, 0, "%s", policy);
    cr_assert_eq(res.status[200], want_ok, "%s: %zu passed", policy,
                 res.status[200]);
    if (want_ok < 12) {
        cr_assert_eq(res.status[want_other], 12 - want_ok, "%s", policy);
    }
    /* redis.timeout is 200 ms; nothing may wait much past it. */
    cr_assert_lt(res.max_ms, 1500, "%s: a request waited %ld ms", policy,
                 res.max_ms);

    /* Redis back on the same port: decisions return to it. */
    redis_start_on(&r.redis, port);
    {
        redisContext *rc = redis_sync(&r);
        int64_t deadline = harness_now_ms() + 10000;
        bool keys = false;

        while (!keys && harness_now_ms() < deadline) {
            redisReply *rep;

            status_of(&r, "/x", NULL);
            rep = redisCommand(rc, "DBSIZE");
            keys = rep != NULL && rep->integer > 0;
            freeReplyObject(rep);
        }
        cr_assert(keys, "%s: the gateway never wrote to Redis again", policy);
        redisFree(rc);
    }
    free(u);
    free(yaml);
    rig_stop(&r);
}

/* sluice_redis_duration_seconds is the time of the script calls Redis
 * answered or let time out. A call answered at once because Redis was
 * down was observed as a sample of about 0 s, so the latency quantiles
 * fell toward 0 in an outage, the time they matter most. */
Test(ratelimit, calls_that_never_reach_redis_are_no_latency_samples,
     .timeout = 60)
{
    struct rig r;
    uint16_t admin = harness_free_port();
    char *routes =
        harness_subst(GATEWAY_HEAD POLICY_ROUTES, "@POLICY@", "allow");
    char *yaml =
        harness_strf("%sadmin:\n  listen: 127.0.0.1:%u\n", routes, admin);

    free(routes);
    rig_start(&r, true, 1, yaml);
    cr_assert(harness_wait_port(admin, 5000), "no admin listener");
    cr_assert_eq(status_of(&r, "/x", NULL), 200);
    cr_assert_eq(admin_metric(admin, "sluice_redis_duration_seconds_count"), 1);
    cr_assert_eq(proc_stop(&r.redis, SIGKILL, 5000), 128 + SIGKILL);
    /* With Redis gone, each is admitted by on_redis_error: allow. */
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(status_of(&r, "/x", NULL), 200, "on_redis_error: allow");
    }
    cr_assert_eq(admin_metric(admin, "sluice_redis_duration_seconds_count"), 1,
                 "calls answered without Redis were timed as Redis calls");
    free(yaml);
    rig_stop(&r);
}

Test(ratelimit, redis_down_with_local_policy_keeps_limiting, .timeout = 60)
{
    /* The twin starts fresh: 5 pass, the rest are refused. */
    run_policy("local", 5, 429);
}

Test(ratelimit, redis_down_with_allow_policy_lets_all_through, .timeout = 60)
{
    run_policy("allow", 12, 200);
}

Test(ratelimit, redis_down_with_deny_policy_answers_503, .timeout = 60)
{
    run_policy("deny", 0, 503);
}

struct flusher {
    uint16_t port;     /* Redis */
    volatile int stop; /* set by the test */
    int flushes;       /* SCRIPT FLUSH sent */
};

static void *
flush_loop(void *arg)
{
    struct flusher *f = arg;
    redisContext *c = redisConnect("127.0.0.1", f->port);

    while (c != NULL && c->err == 0 && !f->stop) {
        redisReply *rep = redisCommand(c, "SCRIPT FLUSH");

        freeReplyObject(rep);
        f->flushes++;
        usleep(5000);
    }
    redisFree(c);
    return NULL;
}

Test(ratelimit, script_flush_under_load_fails_no_request, .timeout = 60)
{
    struct rig r;
    struct load_result res;
    struct flusher fl = {0};
    pthread_t th;
    const char *urls[1];
    char *u, *yaml, *deny;

    /* deny makes any Redis failure visible as a 503. */
    deny = harness_subst(GATEWAY_HEAD POLICY_ROUTES, "@POLICY@", "deny");
    yaml = harness_subst(deny, "limit: 5,", "limit: 1000000,");
    free(deny);
    rig_start(&r, true, 1, yaml);
    fl.port = r.redis_port;
    pthread_create(&th, NULL, flush_loop, &fl);
    u = gw_url(&r, 0, "/x");
    urls[0] = u;
    http_load(urls, 1, NULL, 0, 20, 2000, 10000, &res);
    fl.stop = 1;
    pthread_join(th, NULL);
    cr_assert_gt(fl.flushes, 5, "the scripts were hardly flushed");
    cr_assert_eq(res.errors, 0);
    cr_assert_eq(res.status[200], 2000, "503: %zu", res.status[503]);
    free(u);
    free(yaml);
    rig_stop(&r);
}
