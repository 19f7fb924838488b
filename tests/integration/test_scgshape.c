/*
 * A Spring Cloud Gateway application.yml run as it is, end to end: a real
 * Redis, the echo upstream and one gateway, seen from the client. The
 * limits are SCG's redis-rate-limiter args; the fields are SCG's four.
 * Timing bounds come from Redis's own clock (the limiter's clock), read
 * before and after, so that a slow run widens them rather than failing.
 */
#include <criterion/criterion.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

struct scg_rig {
    struct proc redis;   /* the limiter's Redis */
    uint16_t redis_port; /* its port */
    struct proc echo;    /* the upstream */
    uint16_t echo_port;  /* its port */
    struct proc gw;      /* the gateway */
    uint16_t gw_port;    /* its port (server.port) */
    char *cfg_path;      /* the application.yml; owned */
};

#define RRL(args)                                                              \
    "          filters:\n"                                                     \
    "            - name: RequestRateLimiter\n"                                 \
    "              args:\n" args

#define ROUTE(id, args)                                                        \
    "        - id: " id "\n"                                                   \
    "          uri: http://@ECHO@/**\n"                                        \
    "          predicates: [Path=/" id "/**]\n" args

/* Written from SCG's reference: server.port, spring.redis, default
 * filters, RequestRateLimiter with redis-rate-limiter and key-resolver;
 * sluice's own words under sluice: and scg:. */
static const char app_yml[] =
    "sluice:\n"
    "  server:\n"
    "    workers: 1\n"
    "scg:\n"
    "  key_resolvers:\n"
    "    tenantKeyResolver: \"header:X-Tenant\"\n"
    "server:\n"
    "  port: @PORT@\n"
    "spring:\n"
    "  application:\n"
    "    name: scg-it\n"
    "  redis:\n"
    "    host: 127.0.0.1\n"
    "    port: @REDIS_PORT@\n"
    "    timeout: 1s\n"
    "  cloud:\n"
    "    gateway:\n"
    "      default-filters:\n"
    "        - AddRequestHeader=X-Edge, sluice\n"
    "      routes:\n" ROUTE(
        "burst", RRL("                key-resolver: \"#{@ipKeyResolver}\"\n"
                     "                redis-rate-limiter.replenishRate: 10\n"
                     "                redis-rate-limiter.burstCapacity: 20\n"))
        ROUTE("minute",
              RRL("                key-resolver: \"#{@ipKeyResolver}\"\n"
                  "                redis-rate-limiter:\n"
                  "                  replenishRate: 1\n"
                  "                  requestedTokens: 60\n"
                  "                  burstCapacity: 60\n"))
            ROUTE("closed",
                  RRL("                key-resolver: \"#{@ipKeyResolver}\"\n"
                      "                redis-rate-limiter.replenishRate: 5\n"
                      "                redis-rate-limiter.burstCapacity: 0\n"))
                ROUTE("users",
                      RRL("                key-resolver: "
                          "\"#{@userKeyResolver}\"\n"
                          "                redis-rate-limiter.replenishRate: "
                          "1\n"
                          "                redis-rate-limiter.burstCapacity: "
                          "1\n"))
                    ROUTE("open", RRL("                key-resolver: "
                                      "\"#{@userKeyResolver}\"\n"
                                      "                deny-empty-key: false\n"
                                      "                redis-rate-limiter."
                                      "replenishRate: 1\n"))
                        ROUTE("tenants",
                              RRL("                key-resolver: "
                                  "\"#{@tenantKeyResolver}\"\n"
                                  "                empty-key-status-code: "
                                  "401\n"
                                  "                redis-rate-limiter."
                                  "replenishRate: 1\n")) ROUTE("plain", "");

static bool
redis_connected(void *arg)
{
    return proc_log_contains(arg, "redis: connected");
}

static void
rig_start(struct scg_rig *r)
{
    char num[32];
    char *a, *b, *c;

    memset(r, 0, sizeof(*r));
    redis_start(&r->redis, &r->redis_port);
    echo_start(&r->echo, &r->echo_port);
    r->gw_port = harness_free_port();
    snprintf(num, sizeof(num), "%u", r->gw_port);
    a = harness_subst(app_yml, "@PORT@", num);
    snprintf(num, sizeof(num), "%u", r->redis_port);
    b = harness_subst(a, "@REDIS_PORT@", num);
    snprintf(num, sizeof(num), "127.0.0.1:%u", r->echo_port);
    c = harness_subst(b, "@ECHO@", num);
    r->cfg_path = harness_write_temp(c);
    free(a);
    free(b);
    free(c);
    gateway_start(&r->gw, r->cfg_path, r->gw_port);
    /* Before its connection is up, the local twin would decide. */
    cr_assert(harness_wait_until(redis_connected, &r->gw, 10000),
              "the gateway never connected to Redis");
}

static void
rig_stop(struct scg_rig *r)
{
    int st = proc_stop(&r->gw, SIGTERM, 15000);

    unlink(r->cfg_path);
    free(r->cfg_path);
    proc_stop(&r->echo, SIGTERM, 5000);
    proc_stop(&r->redis, SIGTERM, 5000);
    cr_assert_eq(st, 0, "the gateway exited with %d", st);
}

static long
get(const struct scg_rig *r, const char *path, const char *const *headers,
    struct http_response *out)
{
    char *u = harness_strf("http://127.0.0.1:%u%s", r->gw_port, path);

    http_request(out, "GET", u, headers, NULL, 0, 10000);
    free(u);
    return out->status;
}

static long
status_of(const struct scg_rig *r, const char *path, const char *const *headers)
{
    struct http_response resp;
    long st = get(r, path, headers, &resp);

    http_response_free(&resp);
    return st;
}

/* The value of field 'name', which must be there; compared as a string. */
static void
assert_field(const struct http_response *resp, const char *name,
             const char *want)
{
    char *v = http_response_header(resp, name);

    cr_assert(v != NULL, "no %s in:\n%s", name, resp->headers);
    cr_assert_str_eq(v, want, "%s", name);
    free(v);
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

/*
 * replenishRate 10, burstCapacity 20: a burst of 25 at once admits the 20
 * of the bucket (and one more per 100 ms the burst took, by Redis's
 * clock); after that, requests a few milliseconds apart are admitted at
 * 10 per second.
 */
Test(scg_shape, burst_of_20_then_10_per_second, .timeout = 60)
{
    struct scg_rig r;
    redisContext *rc;
    char *u;
    const char *urls[1];
    struct load_result res;
    long long t0, t_burst, t_last = 0, t_end;
    long long burst_refill_max;
    size_t refill = 0;
    size_t asked = 0;

    rig_start(&r);
    rc = redisConnect("127.0.0.1", r.redis_port);
    cr_assert(rc != NULL && rc->err == 0);
    u = harness_strf("http://127.0.0.1:%u/burst/x", r.gw_port);
    urls[0] = u;
    t0 = redis_now_ms(rc);
    http_load(urls, 1, NULL, 0, 25, 25, 10000, &res);
    t_burst = redis_now_ms(rc);
    cr_assert_eq(res.errors, 0);
    cr_assert_eq(res.status[200] + res.status[429], 25, "only 200 or 429");
    burst_refill_max = (t_burst - t0) * 10 / 1000;
    if (burst_refill_max == 0) {
        cr_assert_eq(res.status[200], 20, "the burst took %lld ms",
                     t_burst - t0);
    } else {
        cr_assert(res.status[200] >= 20 &&
                      (long long)res.status[200] <= 20 + burst_refill_max,
                  "%zu admitted in a burst of %lld ms", res.status[200],
                  t_burst - t0);
    }
    cr_assert_gt(res.status[429], 0, "the bucket was emptied");

    /* Then about 1.5 s of requests a few ms apart. */
    do {
        t_last = redis_now_ms(rc);
        refill += status_of(&r, "/burst/x", NULL) == 200;
        asked++;
        usleep(5000);
        t_end = redis_now_ms(rc);
    } while (t_end - t_burst < 1500);
    /* Every token made after the burst's refusals is taken within a few
     * ms, but the last part-made one; none beyond the clock's count. */
    cr_assert(refill + 1 >= (size_t)((t_last - t_burst) * 10 / 1000),
              "%zu admitted of %zu in %lld ms", refill, asked,
              t_last - t_burst);
    cr_assert(refill <=
                  (size_t)((t_end - t0) * 10 / 1000) - (res.status[200] - 20),
              "%zu admitted of %zu in %lld ms", refill, asked, t_end - t0);
    cr_assert_gt(asked, refill + 10, "requests came faster than the rate");
    cr_log_info("burst: %zu of 25 in %lld ms; then %zu of %zu in %lld ms",
                res.status[200], t_burst - t0, refill, asked, t_end - t_burst);
    free(u);
    redisFree(rc);
    rig_stop(&r);
}

/* SCG's one request a minute: 1 token a second, 60 a request, 60 held. */
Test(scg_shape, requested_tokens_60_admit_one_request_a_minute)
{
    struct scg_rig r;
    struct http_response resp;

    rig_start(&r);
    cr_assert_eq(get(&r, "/minute/a", NULL, &resp), 200);
    assert_field(&resp, "X-RateLimit-Remaining", "0");
    assert_field(&resp, "X-RateLimit-Requested-Tokens", "60");
    http_response_free(&resp);
    cr_assert_eq(get(&r, "/minute/a", NULL, &resp), 429);
    assert_field(&resp, "X-RateLimit-Remaining", "0");
    assert_field(&resp, "X-RateLimit-Replenish-Rate", "1");
    assert_field(&resp, "X-RateLimit-Burst-Capacity", "60");
    http_response_free(&resp);
    cr_assert_eq(status_of(&r, "/minute/b", NULL), 429, "one bucket per ip");
    rig_stop(&r);
}

Test(scg_shape, burst_capacity_0_refuses_every_request)
{
    struct scg_rig r;
    struct http_response resp;

    rig_start(&r);
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(get(&r, "/closed/x", NULL, &resp), 429, "request %d", i);
        assert_field(&resp, "X-RateLimit-Remaining", "0");
        assert_field(&resp, "X-RateLimit-Burst-Capacity", "0");
        assert_field(&resp, "X-RateLimit-Replenish-Rate", "5");
        assert_field(&resp, "X-RateLimit-Requested-Tokens", "1");
        cr_assert_eq(http_response_header_count(&resp, "Retry-After"), 0,
                     "no retry can pass");
        cr_assert(strstr(resp.body, "refuses every request") != NULL, "%s",
                  resp.body);
        http_response_free(&resp);
    }
    rig_stop(&r);
}

/* The four fields, and none of the IETF ones (headers: scg). */
Test(scg_shape, springs_four_fields_field_by_field)
{
    struct scg_rig r;
    struct http_response resp;

    rig_start(&r);
    cr_assert_eq(get(&r, "/burst/x", NULL, &resp), 200);
    assert_field(&resp, "X-RateLimit-Remaining", "19");
    assert_field(&resp, "X-RateLimit-Burst-Capacity", "20");
    assert_field(&resp, "X-RateLimit-Replenish-Rate", "10");
    assert_field(&resp, "X-RateLimit-Requested-Tokens", "1");
    cr_assert_eq(http_response_header_count(&resp, "X-RateLimit-Remaining"), 1);
    cr_assert_eq(http_response_header_count(&resp, "RateLimit-Policy"), 0);
    cr_assert_eq(http_response_header_count(&resp, "RateLimit"), 0);
    cr_assert_eq(http_response_header_count(&resp, "X-RateLimit-Limit"), 0);
    http_response_free(&resp);
    cr_assert_eq(get(&r, "/burst/x", NULL, &resp), 200);
    assert_field(&resp, "X-RateLimit-Remaining", "18");
    http_response_free(&resp);
    rig_stop(&r);
}

/*
 * userKeyResolver is the query parameter "user": each user has a bucket;
 * without one, deny-empty-key (true by default) answers 403, or
 * empty-key-status-code; with deny-empty-key false the request passes.
 */
Test(scg_shape, key_resolvers_and_the_empty_key_rules)
{
    struct scg_rig r;
    struct http_response resp;
    const char *tenant_a[] = {"X-Tenant: a", NULL};

    rig_start(&r);
    cr_assert_eq(status_of(&r, "/users/x?user=ann", NULL), 200);
    cr_assert_eq(status_of(&r, "/users/x?user=ann", NULL), 429);
    cr_assert_eq(status_of(&r, "/users/x?user=bob", NULL), 200);
    cr_assert_eq(get(&r, "/users/x", NULL, &resp), 403);
    cr_assert_eq(http_response_header_count(&resp, "X-RateLimit-Remaining"), 0);
    http_response_free(&resp);
    cr_assert_eq(get(&r, "/open/x", NULL, &resp), 200);
    cr_assert_eq(http_response_header_count(&resp, "X-RateLimit-Remaining"), 0,
                 "no key, no limit: no fields");
    http_response_free(&resp);
    cr_assert_eq(status_of(&r, "/open/x?user=ann", NULL), 200);
    cr_assert_eq(status_of(&r, "/open/x?user=ann", NULL), 429,
                 "a key is limited");
    cr_assert_eq(status_of(&r, "/tenants/x", NULL), 401);
    cr_assert_eq(status_of(&r, "/tenants/x", tenant_a), 200);
    cr_assert_eq(status_of(&r, "/tenants/x", tenant_a), 429);
    rig_stop(&r);
}

/* default-filters apply to every route, and the uri's path (a glob) is not
 * put before the request's. */
Test(scg_shape, default_filters_apply_to_every_route)
{
    struct scg_rig r;
    const char *paths[] = {"/plain/p", "/burst/b", "/open/o"};

    rig_start(&r);
    for (size_t i = 0; i < 3; i++) {
        struct http_response resp;
        char *path;

        cr_assert_eq(get(&r, paths[i], NULL, &resp), 200, "%s", paths[i]);
        cr_assert(echo_has_header(resp.body, "X-Edge", "sluice"), "%s: %s",
                  paths[i], resp.body);
        path = echo_field(resp.body, "path");
        cr_assert_not_null(path, "%s", resp.body);
        cr_assert_str_eq(path, paths[i]);
        free(path);
        http_response_free(&resp);
    }
    /* The ignored key is told at start, as a warning. */
    cr_assert(proc_log_contains(&r.gw, " warn config: "),
              "no warning in the gateway's log");
    cr_assert(proc_log_contains(&r.gw, "spring.application.name: ignored"));
    rig_stop(&r);
}

static bool
warned_twice(void *arg)
{
    char *log = proc_log(arg);
    const char *first = strstr(log, "spring.application.name: ignored");
    bool twice = first != NULL &&
                 strstr(first + 1, "spring.application.name: ignored") != NULL;

    free(log);
    return twice;
}

/* A reload tells the ignored keys again, as the start did. */
Test(scg_shape, a_reload_warns_of_the_ignored_keys_again)
{
    struct scg_rig r;

    rig_start(&r);
    cr_assert(proc_log_contains(&r.gw, "spring.application.name: ignored"));
    cr_assert(!warned_twice(&r.gw));
    kill(r.gw.pid, SIGHUP);
    cr_assert(harness_wait_until(warned_twice, &r.gw, 10000),
              "no warning after the reload");
    cr_assert_eq(status_of(&r, "/plain/x", NULL), 200);
    rig_stop(&r);
}
