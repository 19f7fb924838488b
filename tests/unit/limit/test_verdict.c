#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "headers.h"
#include "verdict.h"

/* Three limiters, their tiers and filters, for parts to borrow. */
static struct limiter_def lim_a, lim_b, lim_c;
static struct tier tier_a, tier_b, tier_c, tier_none;
static struct rate_limit_conf conf_429, conf_403, conf_dry;
/* The list the verdict's fields go on. */
static struct headers fields;

static void
limiter_init(struct limiter_def *d, const char *name)
{
    memset(d, 0, sizeof(*d));
    d->name = (char *)name;
    memcpy(d->tag, "00000000", 9);
    d->algorithm = LIMIT_SLIDING_WINDOW;
    d->rules[0].limit = 5;
    d->rules[0].window_ms = 60000;
    d->rules[0].burst = 5;
    d->nrules = 1;
}

static void
tier_init(struct tier *t, const struct limiter_def *lim, const char *label)
{
    memset(t, 0, sizeof(*t));
    t->limiter = lim;
    t->label = (char *)label;
}

static void
conf_init(struct rate_limit_conf *c, int deny_status, bool dry_run)
{
    memset(c, 0, sizeof(*c));
    c->cost = 1;
    c->headers = RL_HEADERS_BOTH;
    c->deny_status = deny_status;
    c->dry_run = dry_run;
}

static void
setup(void)
{
    limiter_init(&lim_a, "a");
    limiter_init(&lim_b, "b");
    limiter_init(&lim_c, "c");
    tier_init(&tier_a, &lim_a, "0");
    tier_init(&tier_b, &lim_b, "1");
    tier_init(&tier_c, &lim_c, "2");
    tier_init(&tier_none, NULL, "vip");
    conf_init(&conf_429, 429, false);
    conf_init(&conf_403, 403, false);
    conf_init(&conf_dry, 429, true);
    headers_init(&fields);
}

static void
teardown(void)
{
    headers_deinit(&fields);
}

TestSuite(verdict, .init = setup, .fini = teardown);

/* verdict_assemble() onto 'fields', emptied first. */
static void
assemble(const struct verdict_part *parts, size_t n, struct verdict *v)
{
    headers_clear(&fields);
    verdict_assemble(parts, n, "/x", &fields, v);
}

/* A part a limiter decided: 'delay_ms' > 0 admits after a hold. */
static struct verdict_part
decided(const struct rate_limit_conf *conf, const struct tier *t, bool allowed,
        uint64_t delay_ms, bool fallback)
{
    struct verdict_part p;

    memset(&p, 0, sizeof(p));
    p.conf = conf;
    p.tier = t;
    p.res.allowed = allowed;
    p.res.remaining = allowed ? 1 : 0;
    p.res.retry_after_ms = allowed ? 0 : 30000;
    p.res.reset_ms = 60000;
    p.res.delay_ms = delay_ms;
    p.reason = verdict_reason_of(&p.res, fallback);
    return p;
}

/* A part no limiter decided, for 'reason'. */
static struct verdict_part
undecided(const struct tier *t, enum verdict_reason reason)
{
    struct verdict_part p;

    memset(&p, 0, sizeof(p));
    p.conf = &conf_429;
    p.tier = t;
    p.reason = reason;
    return p;
}

Test(verdict, no_filter_passes_unlimited_and_unlabelled)
{
    struct verdict v;

    assemble(NULL, 0, &v);
    cr_assert(!v.deny);
    cr_assert_eq(v.reason, VERDICT_UNLIMITED);
    cr_assert_null(verdict_reason_name(v.reason));
    cr_assert_null(v.limiter);
    cr_assert_eq(fields.n, 0);
    verdict_deinit(&v);
}

Test(verdict, an_admitting_limiter_passes_with_its_fields)
{
    struct verdict_part p = decided(&conf_429, &tier_a, true, 0, false);
    struct verdict v;

    assemble(&p, 1, &v);
    cr_assert(!v.deny);
    cr_assert_eq(v.delay_ms, 0);
    cr_assert_str_eq(verdict_reason_name(v.reason), "allowed");
    cr_assert_str_eq(v.limiter, "a");
    cr_assert_str_eq(v.tier, "0");
    cr_assert_str_eq(headers_get(&fields, "X-RateLimit-Remaining"), "1");
    cr_assert_null(v.body);
    verdict_deinit(&v);
}

Test(verdict, the_first_refusal_in_filter_order_answers)
{
    struct verdict_part p[3] = {
        decided(&conf_429, &tier_a, true, 0, false),
        decided(&conf_429, &tier_b, false, 0, false),
        decided(&conf_403, &tier_c, false, 0, true),
    };
    struct verdict v;

    assemble(p, 3, &v);
    cr_assert(v.deny);
    cr_assert_eq(v.status, 429);
    cr_assert_str_eq(verdict_reason_name(v.reason), "denied");
    cr_assert_str_eq(v.limiter, "b");
    cr_assert_str_eq(v.tier, "1");
    cr_assert(strstr(v.body, "\"policy\":\"b\"") != NULL, "%s", v.body);
    cr_assert(strstr(v.body, "\"instance\":\"/x\"") != NULL, "%s", v.body);
    verdict_deinit(&v);
}

Test(verdict, a_rule_refusing_with_status_403_is_denied_not_no_key)
{
    struct verdict_part p = decided(&conf_403, &tier_a, false, 0, false);
    struct verdict_part fb = decided(&conf_403, &tier_a, false, 0, true);
    struct verdict v;

    assemble(&p, 1, &v);
    cr_assert(v.deny);
    cr_assert_eq(v.status, 403);
    cr_assert_eq(v.reason, VERDICT_DENIED);
    cr_assert_str_eq(verdict_reason_name(v.reason), "denied");
    verdict_deinit(&v);
    assemble(&fb, 1, &v);
    cr_assert_str_eq(verdict_reason_name(v.reason), "fallback_denied");
    verdict_deinit(&v);
}

Test(verdict, no_key_answers_403_and_leaves_the_names_to_other_parts)
{
    struct verdict_part p[2] = {
        undecided(NULL, VERDICT_NO_KEY),
        decided(&conf_429, &tier_b, true, 0, false),
    };
    struct verdict v;

    assemble(p, 2, &v);
    cr_assert(v.deny);
    cr_assert_eq(v.status, 403);
    cr_assert_str_eq(verdict_reason_name(v.reason), "no_key");
    cr_assert_str_eq(v.limiter, "b");
    cr_assert(strstr(v.body, "no rate-limit key") != NULL, "%s", v.body);
    /* The admitting part still tells its fields. */
    cr_assert_not_null(headers_get(&fields, "RateLimit-Policy"));
    verdict_deinit(&v);
}

Test(verdict, no_key_with_empty_key_allow_passes_unlimited)
{
    struct verdict_part p = undecided(NULL, VERDICT_UNLIMITED);
    struct verdict v;

    assemble(&p, 1, &v);
    cr_assert(!v.deny);
    cr_assert_eq(v.reason, VERDICT_UNLIMITED);
    cr_assert_null(v.tier);
    verdict_deinit(&v);
}

Test(verdict, redis_policy_deny_answers_503_named_by_its_limiter)
{
    struct verdict_part p[2] = {
        undecided(&tier_a, VERDICT_POLICY_DENIED),
        decided(&conf_429, &tier_b, false, 0, false),
    };
    struct verdict v;

    assemble(p, 2, &v);
    cr_assert(v.deny);
    cr_assert_eq(v.status, 503);
    cr_assert_str_eq(verdict_reason_name(v.reason), "policy_denied");
    cr_assert_str_eq(v.limiter, "a");
    cr_assert(strstr(v.body, "unavailable") != NULL, "%s", v.body);
    verdict_deinit(&v);
}

Test(verdict, a_twin_that_cannot_decide_answers_503_labelled_denied)
{
    struct verdict_part p = undecided(&tier_a, VERDICT_TWIN_FAILED);
    struct verdict v;

    assemble(&p, 1, &v);
    cr_assert(v.deny);
    cr_assert_eq(v.status, 503);
    cr_assert_eq(v.reason, VERDICT_TWIN_FAILED);
    cr_assert_str_eq(verdict_reason_name(v.reason), "denied");
    verdict_deinit(&v);
}

Test(verdict, redis_policy_allow_passes_without_fields)
{
    struct verdict_part p = undecided(&tier_a, VERDICT_POLICY_ALLOWED);
    struct verdict v;

    assemble(&p, 1, &v);
    cr_assert(!v.deny);
    cr_assert_str_eq(verdict_reason_name(v.reason), "policy_allowed");
    cr_assert_str_eq(v.limiter, "a");
    cr_assert_eq(fields.n, 0);
    verdict_deinit(&v);
}

Test(verdict, a_pass_is_held_for_the_longest_delay)
{
    struct verdict_part p[3] = {
        decided(&conf_429, &tier_a, true, 100, false),
        decided(&conf_429, &tier_b, true, 300, false),
        decided(&conf_429, &tier_c, true, 200, false),
    };
    struct verdict v;

    assemble(p, 3, &v);
    cr_assert(!v.deny);
    cr_assert_eq(v.delay_ms, 300);
    cr_assert_str_eq(verdict_reason_name(v.reason), "delayed");
    cr_assert_str_eq(v.limiter, "a");
    verdict_deinit(&v);
}

Test(verdict, a_refusal_holds_nothing)
{
    struct verdict_part p[2] = {
        decided(&conf_429, &tier_a, true, 300, false),
        decided(&conf_429, &tier_b, false, 0, false),
    };
    struct verdict v;

    assemble(p, 2, &v);
    cr_assert(v.deny);
    cr_assert_eq(v.delay_ms, 0);
    verdict_deinit(&v);
}

Test(verdict, a_dry_run_filter_never_refuses_nor_holds_but_tells)
{
    struct verdict_part p[2] = {
        decided(&conf_dry, &tier_a, false, 0, false),
        decided(&conf_dry, &tier_b, true, 500, false),
    };
    struct verdict v;

    assemble(p, 2, &v);
    cr_assert(!v.deny);
    cr_assert_eq(v.delay_ms, 0);
    cr_assert(v.dry_run_denied);
    cr_assert_str_eq(verdict_reason_name(v.reason), "dry_run_denied");
    /* It tells by the rate-limit fields; Retry-After would tell the
     * client to wait, and nothing was refused. */
    cr_assert_not_null(headers_get(&fields, "RateLimit"));
    cr_assert_null(headers_get(&fields, "Retry-After"));
    verdict_deinit(&v);
}

Test(verdict, a_dry_run_refusal_outranks_a_delay_in_the_label)
{
    struct verdict_part p[2] = {
        decided(&conf_429, &tier_a, true, 100, false),
        decided(&conf_dry, &tier_b, false, 0, false),
    };
    struct verdict v;

    assemble(p, 2, &v);
    cr_assert_eq(v.delay_ms, 100);
    cr_assert_eq(v.reason, VERDICT_DRY_RUN_DENIED);
    verdict_deinit(&v);
}

Test(verdict, the_first_deciding_part_names_and_labels_a_pass)
{
    struct verdict_part p[3] = {
        undecided(&tier_none, VERDICT_UNLIMITED),
        decided(&conf_429, &tier_b, true, 0, true),
        decided(&conf_429, &tier_c, true, 0, false),
    };
    struct verdict v;

    assemble(p, 3, &v);
    cr_assert_str_eq(verdict_reason_name(v.reason), "fallback_allowed");
    cr_assert_str_eq(v.limiter, "b");
    cr_assert_str_eq(v.tier, "1");
    verdict_deinit(&v);
}

Test(verdict, a_tier_none_alone_is_unlimited_but_names_its_tier)
{
    struct verdict_part p = undecided(&tier_none, VERDICT_UNLIMITED);
    struct verdict v;

    assemble(&p, 1, &v);
    cr_assert(!v.deny);
    cr_assert_null(verdict_reason_name(v.reason));
    cr_assert_null(v.limiter);
    cr_assert_str_eq(v.tier, "vip");
    verdict_deinit(&v);
}

Test(verdict, fields_of_every_decided_part_go_on_the_response)
{
    struct verdict_part p[2] = {
        decided(&conf_429, &tier_a, true, 0, false),
        decided(&conf_429, &tier_b, true, 0, false),
    };
    struct verdict v;
    const char *policy;

    assemble(p, 2, &v);
    policy = headers_get(&fields, "RateLimit-Policy");
    cr_assert_not_null(policy);
    cr_assert(strstr(policy, "\"a\"") != NULL &&
                  strstr(policy, "\"b\"") != NULL,
              "%s", policy);
    verdict_deinit(&v);
}

Test(verdict, every_reason_keeps_its_label)
{
    static const struct {
        enum verdict_reason r;
        const char *label;
    } want[] = {
        {VERDICT_NO_KEY, "no_key"},
        {VERDICT_ALLOWED, "allowed"},
        {VERDICT_DENIED, "denied"},
        {VERDICT_FALLBACK_ALLOWED, "fallback_allowed"},
        {VERDICT_FALLBACK_DENIED, "fallback_denied"},
        {VERDICT_POLICY_ALLOWED, "policy_allowed"},
        {VERDICT_POLICY_DENIED, "policy_denied"},
        {VERDICT_TWIN_FAILED, "denied"},
        {VERDICT_DELAYED, "delayed"},
        {VERDICT_DRY_RUN_DENIED, "dry_run_denied"},
    };

    cr_assert_null(verdict_reason_name(VERDICT_UNLIMITED));
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        cr_assert_str_eq(verdict_reason_name(want[i].r), want[i].label);
    }
}

Test(verdict, no_key_answers_the_filters_empty_key_status)
{
    struct rate_limit_conf conf;
    struct verdict_part p;
    struct verdict v;

    conf_init(&conf, 429, false);
    conf.empty_key_status = 401;
    p = undecided(NULL, VERDICT_NO_KEY);
    p.conf = &conf;
    assemble(&p, 1, &v);
    cr_assert(v.deny);
    cr_assert_eq(v.status, 401);
    cr_assert(strstr(v.body, "\"status\":401") != NULL, "%s", v.body);
    verdict_deinit(&v);
}

/* headers: scg sends Spring's four fields and none of the IETF ones. */
Test(verdict, scg_headers_style_sends_springs_four_fields)
{
    struct rate_limit_conf conf;
    struct limiter_def lim;
    struct tier t;
    struct verdict_part p;
    struct verdict v;

    conf_init(&conf, 429, false);
    conf.headers = RL_HEADERS_SCG;
    conf.cost = 3;
    limiter_init(&lim, "scg.r");
    lim.algorithm = LIMIT_TOKEN_BUCKET;
    lim.rules[0].limit = 10;
    lim.rules[0].window_ms = 1000;
    lim.rules[0].burst = 20;
    tier_init(&t, &lim, "0");
    p = decided(&conf, &t, true, 0, false);
    p.res.remaining = 17;
    assemble(&p, 1, &v);
    cr_assert(!v.deny);
    cr_assert_eq(fields.n, 4);
    cr_assert_str_eq(headers_get(&fields, "X-RateLimit-Remaining"), "17");
    cr_assert_str_eq(headers_get(&fields, "X-RateLimit-Burst-Capacity"), "20");
    cr_assert_str_eq(headers_get(&fields, "X-RateLimit-Replenish-Rate"), "10");
    cr_assert_str_eq(headers_get(&fields, "X-RateLimit-Requested-Tokens"), "3");
    verdict_deinit(&v);

    /* A refusal: the same four, remaining 0, and Retry-After. */
    p = decided(&conf, &t, false, 0, false);
    assemble(&p, 1, &v);
    cr_assert(v.deny);
    cr_assert_eq(v.status, 429);
    cr_assert_str_eq(headers_get(&fields, "X-RateLimit-Remaining"), "0");
    cr_assert_str_eq(headers_get(&fields, "X-RateLimit-Burst-Capacity"), "20");
    cr_assert_not_null(headers_get(&fields, "Retry-After"));
    cr_assert_null(headers_get(&fields, "RateLimit-Policy"));
    verdict_deinit(&v);
}
