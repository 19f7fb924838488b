#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "headers.h"
#include "rlheaders.h"

/* "Name: value|Name: value" in list order, for exact comparisons. */
static void
dump(const struct headers *h, char *buf, size_t len)
{
    size_t used = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < h->n; i++) {
        int m = snprintf(buf + used, len - used, "%s%s: %s", i ? "|" : "",
                         h->v[i].name, h->v[i].value);

        cr_assert(m > 0 && (size_t)m < len - used);
        used += (size_t)m;
    }
}

/* A limiter with one rule. */
static struct limiter_def
limiter(const char *name, enum limit_algorithm a, uint64_t limit,
        uint64_t window_ms, uint64_t burst)
{
    struct limiter_def d;

    memset(&d, 0, sizeof(d));
    d.name = (char *)name;
    memcpy(d.tag, "00000000", 9);
    d.algorithm = a;
    d.rules[0].limit = limit;
    d.rules[0].window_ms = window_ms;
    d.rules[0].burst = burst;
    d.nrules = 1;
    return d;
}

static struct limit_result
allowed(int64_t remaining, uint64_t reset_ms)
{
    struct limit_result r = {true, remaining, 0, reset_ms, 0, 0};

    return r;
}

static struct limit_result
denied(unsigned rule, uint64_t retry_ms, uint64_t reset_ms)
{
    struct limit_result r = {false, 0, retry_ms, reset_ms, 0, rule};

    return r;
}

/* The fields 'style' adds for one decision, dumped. */
static void
fields(enum rl_headers style, const struct limiter_def *lim,
       const struct limit_result *r, char *buf, size_t len)
{
    struct headers h;

    headers_init(&h);
    rlheaders_add(&h, style, lim, r);
    dump(&h, buf, len);
    headers_deinit(&h);
}

Test(rlheaders, allowed_bucket_gets_ietf_and_legacy_fields)
{
    struct limiter_def lim =
        limiter("per-user", LIMIT_TOKEN_BUCKET, 10, 1000, 20);
    struct limit_result r = allowed(13, 700);
    char buf[512];

    fields(RL_HEADERS_BOTH, &lim, &r, buf, sizeof(buf));
    /* The example: 20 tokens refill in 2 s. */
    cr_assert_str_eq(buf, "RateLimit-Policy: \"per-user\";q=20;w=2|"
                          "RateLimit: \"per-user\";r=13;t=1|"
                          "X-RateLimit-Limit: 20|"
                          "X-RateLimit-Remaining: 13|"
                          "X-RateLimit-Reset: 1");
}

Test(rlheaders, denial_by_the_second_rule_names_it)
{
    struct limiter_def lim =
        limiter("admin-ip", LIMIT_SLIDING_WINDOW, 5, 1000, 5);
    struct limit_result r = denied(1, 1001, 60000);
    char buf[512];

    lim.rules[1].limit = 100;
    lim.rules[1].window_ms = 60000;
    lim.rules[1].burst = 100;
    lim.nrules = 2;
    fields(RL_HEADERS_BOTH, &lim, &r, buf, sizeof(buf));
    cr_assert_str_eq(buf, "RateLimit-Policy: \"admin-ip\";q=5;w=1, "
                          "\"admin-ip/1\";q=100;w=60|"
                          "RateLimit: \"admin-ip/1\";r=0;t=2|"
                          "X-RateLimit-Limit: 100|"
                          "X-RateLimit-Remaining: 0|"
                          "X-RateLimit-Reset: 2|"
                          "Retry-After: 2");
}

Test(rlheaders, retry_after_rounds_up_to_whole_seconds)
{
    static const struct {
        uint64_t ms;
        const char *want;
    } cases[] = {
        {1001, "2"}, {1000, "1"}, {999, "1"},    {1, "1"},
        {0, "1"},    {2000, "2"}, {59999, "60"},
    };
    struct limiter_def lim = limiter("l", LIMIT_FIXED_WINDOW, 1, 1000, 1);

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct limit_result r = denied(0, cases[i].ms, 0);
        struct headers h;

        headers_init(&h);
        rlheaders_add(&h, RL_HEADERS_NONE, &lim, &r);
        cr_assert_eq(h.n, 1);
        cr_assert_str_eq(headers_get(&h, "Retry-After"), cases[i].want,
                         "%llu ms", (unsigned long long)cases[i].ms);
        headers_deinit(&h);
    }
}

Test(rlheaders, styles_choose_the_fields)
{
    struct limiter_def lim = limiter("per-ip", LIMIT_GCRA, 5, 1000, 10);
    struct limit_result ok = allowed(4, 1200);
    struct limit_result no = denied(0, 150, 2000);
    char buf[512];

    fields(RL_HEADERS_IETF, &lim, &ok, buf, sizeof(buf));
    cr_assert_str_eq(buf, "RateLimit-Policy: \"per-ip\";q=10;w=2|"
                          "RateLimit: \"per-ip\";r=4;t=2");
    fields(RL_HEADERS_LEGACY, &lim, &ok, buf, sizeof(buf));
    cr_assert_str_eq(buf, "X-RateLimit-Limit: 10|X-RateLimit-Remaining: 4|"
                          "X-RateLimit-Reset: 2");
    fields(RL_HEADERS_NONE, &lim, &ok, buf, sizeof(buf));
    cr_assert_str_eq(buf, "");
    /* Retry-After is plain HTTP: even "none" sends it. */
    fields(RL_HEADERS_NONE, &lim, &no, buf, sizeof(buf));
    cr_assert_str_eq(buf, "Retry-After: 1");
    fields(RL_HEADERS_IETF, &lim, &no, buf, sizeof(buf));
    /* Denied: t is the retry time, not the reset. */
    cr_assert_str_eq(buf, "RateLimit-Policy: \"per-ip\";q=10;w=2|"
                          "RateLimit: \"per-ip\";r=0;t=1|Retry-After: 1");
}

Test(rlheaders, bucket_window_is_the_time_to_fill_rounded_up)
{
    static const struct {
        enum limit_algorithm a;
        uint64_t limit, window_ms, burst;
        const char *want;
    } cases[] = {
        {LIMIT_TOKEN_BUCKET, 10, 1000, 20, "\"l\";q=20;w=2"},
        {LIMIT_LEAKY_BUCKET, 10, 1000, 50, "\"l\";q=50;w=5"},
        /* 60000 / 7 = 8571.4 ms: 9 s. */
        {LIMIT_TOKEN_BUCKET, 7, 60000, 1, "\"l\";q=1;w=9"},
        {LIMIT_GCRA, 1000, 1000, 1, "\"l\";q=1;w=1"},
        {LIMIT_GCRA, 1, 86400000, 3, "\"l\";q=3;w=259200"},
        {LIMIT_FIXED_WINDOW, 100, 250, 100, "\"l\";q=100;w=1"},
        {LIMIT_SLIDING_WINDOW_COUNTER, 100, 3600000, 100, "\"l\";q=100;w=3600"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct limiter_def lim = limiter("l", cases[i].a, cases[i].limit,
                                         cases[i].window_ms, cases[i].burst);
        struct limit_result r = allowed(0, 0);
        struct headers h;

        headers_init(&h);
        rlheaders_add(&h, RL_HEADERS_IETF, &lim, &r);
        cr_assert_str_eq(headers_get(&h, "RateLimit-Policy"), cases[i].want);
        /* Allowed with nothing to reset: t=0. */
        cr_assert_str_eq(headers_get(&h, "RateLimit"), "\"l\";r=0;t=0");
        headers_deinit(&h);
    }
}

Test(rlheaders, negative_remaining_is_reported_as_zero)
{
    struct limiter_def lim = limiter("l", LIMIT_TOKEN_BUCKET, 1, 1000, 1);
    struct limit_result r = allowed(-3, 4000);
    char buf[256];

    fields(RL_HEADERS_BOTH, &lim, &r, buf, sizeof(buf));
    cr_assert_str_eq(buf, "RateLimit-Policy: \"l\";q=1;w=1|"
                          "RateLimit: \"l\";r=0;t=4|"
                          "X-RateLimit-Limit: 1|X-RateLimit-Remaining: 0|"
                          "X-RateLimit-Reset: 4");
}

Test(rlheaders, second_limiter_appends_and_legacy_keeps_the_tightest)
{
    struct limiter_def a = limiter("a", LIMIT_FIXED_WINDOW, 10, 60000, 10);
    struct limiter_def b = limiter("b", LIMIT_GCRA, 2, 1000, 4);
    struct limiter_def c = limiter("c", LIMIT_FIXED_WINDOW, 50, 1000, 50);
    struct limit_result ra = allowed(5, 30000);
    struct limit_result rb = allowed(3, 500);
    struct limit_result rc = allowed(9, 1000);
    struct headers h;
    char buf[512];

    headers_init(&h);
    headers_add(&h, "Content-Type", "text/plain");
    rlheaders_add(&h, RL_HEADERS_BOTH, &a, &ra);
    rlheaders_add(&h, RL_HEADERS_BOTH, &b, &rb);
    rlheaders_add(&h, RL_HEADERS_BOTH, &c, &rc);
    dump(&h, buf, sizeof(buf));
    cr_assert_str_eq(buf, "Content-Type: text/plain|"
                          "X-RateLimit-Limit: 4|"
                          "X-RateLimit-Remaining: 3|"
                          "X-RateLimit-Reset: 1|"
                          "RateLimit-Policy: \"a\";q=10;w=60, "
                          "\"b\";q=4;w=2, \"c\";q=50;w=1|"
                          "RateLimit: \"a\";r=5;t=30, \"b\";r=3;t=1, "
                          "\"c\";r=9;t=1");
    headers_deinit(&h);
}

Test(rlheaders, of_two_refusals_the_later_retry_wins)
{
    struct limiter_def a = limiter("a", LIMIT_FIXED_WINDOW, 1, 1000, 1);
    struct limit_result r3 = denied(0, 2500, 0);
    struct limit_result r2 = denied(0, 1500, 0);
    struct limit_result r5 = denied(0, 4001, 0);
    struct headers h;

    headers_init(&h);
    rlheaders_add(&h, RL_HEADERS_NONE, &a, &r3);
    rlheaders_add(&h, RL_HEADERS_NONE, &a, &r2);
    cr_assert_str_eq(headers_get(&h, "Retry-After"), "3");
    rlheaders_add(&h, RL_HEADERS_NONE, &a, &r5);
    cr_assert_str_eq(headers_get(&h, "Retry-After"), "5");
    cr_assert_eq(h.n, 1);
    headers_deinit(&h);
}

Test(rlheaders, problem_body_names_the_policy_and_the_retry)
{
    struct limiter_def lim =
        limiter("per-user", LIMIT_TOKEN_BUCKET, 10, 1000, 20);
    struct limit_result r = denied(0, 1500, 2000);
    char *body = rlheaders_problem(429, &lim, &r, "/images/a.png?x=1");

    cr_assert_str_eq(body, "{\"type\":\"about:blank\","
                           "\"title\":\"Too Many Requests\","
                           "\"status\":429,"
                           "\"detail\":\"Rate limit \\\"per-user\\\" "
                           "exceeded; retry after 2 seconds.\","
                           "\"instance\":\"/images/a.png?x=1\","
                           "\"policy\":\"per-user\","
                           "\"retry_after_ms\":1500}");
    free(body);
}

Test(rlheaders, problem_body_escapes_and_omits_what_it_must)
{
    struct limiter_def lim = limiter("p", LIMIT_GCRA, 1, 1000, 1);
    struct limit_result r = denied(0, 0, 0);
    char *body = rlheaders_problem(503, &lim, &r, NULL);

    cr_assert_str_eq(body, "{\"type\":\"about:blank\","
                           "\"title\":\"Service Unavailable\","
                           "\"status\":503,"
                           "\"detail\":\"Rate limit \\\"p\\\" exceeded; "
                           "retry after 1 second.\","
                           "\"policy\":\"p\","
                           "\"retry_after_ms\":0}");
    free(body);
    body = rlheaders_problem(429, &lim, &r, "/a\"b\\c\n");
    cr_assert_not_null(strstr(body, "\"instance\":\"/a\\\"b\\\\c\\u000a\","));
    free(body);
}

Test(rlheaders, scg_fields_give_the_rate_per_second)
{
    struct limiter_def lim = limiter("s", LIMIT_TOKEN_BUCKET, 1, 1000, 60);
    struct limit_result r = allowed(0, 60000);
    struct headers h;
    char buf[512];

    headers_init(&h);
    rlheaders_add_scg(&h, &lim, 60, &r);
    dump(&h, buf, sizeof(buf));
    cr_assert_str_eq(buf, "X-RateLimit-Remaining: 0|"
                          "X-RateLimit-Burst-Capacity: 60|"
                          "X-RateLimit-Replenish-Rate: 1|"
                          "X-RateLimit-Requested-Tokens: 60");
    headers_deinit(&h);
}

Test(rlheaders, a_limiter_refusing_all_names_no_retry)
{
    struct limiter_def lim = limiter("shut", LIMIT_TOKEN_BUCKET, 5, 1000, 0);
    struct limit_result r = denied(0, 0, 0);
    struct headers h;
    char *body;

    lim.refuse_all = true;
    headers_init(&h);
    rlheaders_add(&h, RL_HEADERS_NONE, &lim, &r);
    cr_assert_eq(h.n, 0);
    headers_deinit(&h);
    body = rlheaders_problem(429, &lim, &r, "/x");
    cr_assert(strstr(body, "\"detail\":\"Rate limit \\\"shut\\\" refuses every "
                           "request.\"") != NULL,
              "%s", body);
    cr_assert(strstr(body, "retry_after_ms") == NULL, "%s", body);
    free(body);
}

Test(rlheaders, a_policy_built_once_is_the_one_every_decision_sends)
{
    struct limiter_def lim = limiter("api", LIMIT_GCRA, 10, 1000, 30);
    struct limit_result r = allowed(4, 2500);
    char built[512], kept[512];
    char *policy;

    lim.rules[1].limit = 100;
    lim.rules[1].window_ms = 60000;
    lim.rules[1].burst = 150;
    lim.nrules = 2;
    fields(RL_HEADERS_BOTH, &lim, &r, built, sizeof(built));
    policy = rlheaders_policy(&lim);
    cr_assert_str_eq(policy, "\"api\";q=30;w=3, \"api/1\";q=150;w=90");
    lim.policy = policy;
    fields(RL_HEADERS_BOTH, &lim, &r, kept, sizeof(kept));
    cr_assert_str_eq(kept, built);
    /* And it is what is sent, not built again: a different text shows. */
    lim.policy = "\"kept\"";
    fields(RL_HEADERS_IETF, &lim, &r, kept, sizeof(kept));
    cr_assert_str_eq(kept, "RateLimit-Policy: \"kept\"|"
                           "RateLimit: \"api\";r=4;t=3");
    free(policy);
}

/* Fields of those names already on the list (an empty RateLimit, a
 * Retry-After that is no number) are replaced, each by one field. */
Test(rlheaders, fields_already_there_are_replaced_once)
{
    struct limiter_def a = limiter("a", LIMIT_FIXED_WINDOW, 1, 1000, 1);
    struct limit_result r = denied(0, 2500, 0);
    struct headers h;
    char buf[512];

    headers_init(&h);
    headers_add(&h, "X-RateLimit-Limit", "99");
    headers_add(&h, "RateLimit", "");
    headers_add(&h, "Retry-After", "soon");
    headers_add(&h, "X-RateLimit-Limit", "98");
    rlheaders_add(&h, RL_HEADERS_BOTH, &a, &r);
    dump(&h, buf, sizeof(buf));
    cr_assert_str_eq(buf, "RateLimit-Policy: \"a\";q=1;w=1|"
                          "RateLimit: \"a\";r=0;t=3|"
                          "X-RateLimit-Limit: 1|"
                          "X-RateLimit-Remaining: 0|"
                          "X-RateLimit-Reset: 3|"
                          "Retry-After: 3");
    headers_deinit(&h);
}

/* A limiter's name of any length: the RateLimit item holds it whole. */
Test(rlheaders, a_long_limiter_name_is_written_whole)
{
    char name[301], want[400];
    struct limiter_def lim;
    struct limit_result r = denied(2, 1000, 0);
    struct headers h;

    memset(name, 'n', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    lim = limiter(name, LIMIT_FIXED_WINDOW, 5, 1000, 5);
    lim.nrules = 3;
    lim.rules[1] = lim.rules[0];
    lim.rules[2] = lim.rules[0];
    headers_init(&h);
    rlheaders_add(&h, RL_HEADERS_IETF, &lim, &r);
    snprintf(want, sizeof(want), "\"%s/2\";r=0;t=1", name);
    cr_assert_str_eq(headers_get(&h, "RateLimit"), want);
    headers_deinit(&h);
}
