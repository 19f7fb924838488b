#include "rlheaders.h"

#include <stdlib.h>
#include <string.h>

#include "headers.h"
#include "problem.h"
#include "strbuf.h"
#include "xmalloc.h"

static uint64_t
ceil_seconds(uint64_t ms)
{
    return ms / 1000 + (ms % 1000 != 0);
}

/* What the client may spend at once under rule 'i'. */
static uint64_t
rule_quota(const struct limiter_def *lim, size_t i)
{
    if (limit_algorithm_is_bucket(lim->algorithm)) {
        return lim->rules[i].burst;
    }
    return lim->rules[i].limit;
}

/*
 * The window of rule 'i' in whole seconds, rounded up: a bucket's is the
 * time it takes to fill from empty, burst * W / limit. The config keeps
 * burst * W below 2^50, so nothing overflows.
 */
static uint64_t
rule_window_s(const struct limiter_def *lim, size_t i)
{
    const struct limit_rule *r = &lim->rules[i];
    uint64_t ms;

    if (!limit_algorithm_is_bucket(lim->algorithm)) {
        return ceil_seconds(r->window_ms);
    }
    ms = r->burst * r->window_ms / r->limit +
         (r->burst * r->window_ms % r->limit != 0);
    return ceil_seconds(ms);
}

/* "<name>" for rule 0, "<name>/<i>" after: one policy item per rule. */
static void
add_item_name(struct strbuf *b, const struct limiter_def *lim, size_t i)
{
    strbuf_add(b, "\"", 1);
    strbuf_adds(b, lim->name);
    if (i > 0) {
        strbuf_add(b, "/", 1);
        strbuf_add_u64(b, i);
    }
    strbuf_add(b, "\"", 1);
}

/* Whole seconds a denied client waits, rounded up and at least 1. */
static uint64_t
retry_seconds(const struct limit_result *r)
{
    uint64_t s = ceil_seconds(r->retry_after_ms);

    return s > 0 ? s : 1;
}

/* The rule the result is about; a bad index falls back to the first. */
static size_t
deciding_rule(const struct limiter_def *lim, const struct limit_result *r)
{
    return r->rule < lim->nrules ? r->rule : 0;
}

/* Seconds in RateLimit's t and X-RateLimit-Reset. */
static uint64_t
reset_seconds(const struct limit_result *r)
{
    if (!r->allowed) {
        return retry_seconds(r);
    }
    return ceil_seconds(r->reset_ms);
}

static uint64_t
remaining(const struct limit_result *r)
{
    return r->remaining > 0 ? (uint64_t)r->remaining : 0;
}

/* Sets 'name' to 'b''s text, after what is already there as a list. */
static void
append_list(struct headers *h, const char *name, struct strbuf *b)
{
    const char *old = headers_get(h, name);
    struct strbuf joined = STRBUF_INIT;

    if (old == NULL || old[0] == '\0') {
        headers_set(h, name, b->p);
        return;
    }
    strbuf_adds(&joined, old);
    strbuf_add(&joined, ", ", 2);
    strbuf_add(&joined, b->p, b->n);
    headers_set(h, name, joined.p);
    free(joined.p);
}

static void
add_policy(struct strbuf *policy, const struct limiter_def *lim)
{
    for (size_t i = 0; i < lim->nrules; i++) {
        if (i > 0) {
            strbuf_add(policy, ", ", 2);
        }
        add_item_name(policy, lim, i);
        strbuf_add(policy, ";q=", 3);
        strbuf_add_u64(policy, rule_quota(lim, i));
        strbuf_add(policy, ";w=", 3);
        strbuf_add_u64(policy, rule_window_s(lim, i));
    }
}

char *
rlheaders_policy(const struct limiter_def *lim)
{
    struct strbuf policy = STRBUF_INIT;

    add_policy(&policy, lim);
    return strbuf_take(&policy);
}

static void
add_ietf(struct headers *h, const struct limiter_def *lim,
         const struct limit_result *r)
{
    struct strbuf policy = STRBUF_INIT;
    struct strbuf state = STRBUF_INIT;

    if (lim->policy != NULL) {
        /* Borrowed: append_list() only reads it. */
        policy.p = lim->policy;
        policy.n = strlen(lim->policy);
    } else {
        add_policy(&policy, lim);
    }
    add_item_name(&state, lim, deciding_rule(lim, r));
    strbuf_add(&state, ";r=", 3);
    strbuf_add_u64(&state, remaining(r));
    strbuf_add(&state, ";t=", 3);
    strbuf_add_u64(&state, reset_seconds(r));
    append_list(h, "RateLimit-Policy", &policy);
    append_list(h, "RateLimit", &state);
    if (lim->policy == NULL) {
        free(policy.p);
    }
    free(state.p);
}

/* -1 if 's' is absent or not a plain decimal. */
static int64_t
header_number(const char *s)
{
    char *end;
    unsigned long long v;

    if (s == NULL || *s < '0' || *s > '9') {
        return -1;
    }
    v = strtoull(s, &end, 10);
    if (*end != '\0' || v > INT64_MAX) {
        return -1;
    }
    return (int64_t)v;
}

/* The legacy fields describe one limit: the tightest one seen. */
static void
add_legacy(struct headers *h, const struct limiter_def *lim,
           const struct limit_result *r)
{
    int64_t old = header_number(headers_get(h, "X-RateLimit-Remaining"));
    char num[U64_DEC_MAX];

    if (old >= 0 && (uint64_t)old <= remaining(r)) {
        return;
    }
    headers_set(h, "X-RateLimit-Limit",
                u64_dec(rule_quota(lim, deciding_rule(lim, r)), num));
    headers_set(h, "X-RateLimit-Remaining", u64_dec(remaining(r), num));
    headers_set(h, "X-RateLimit-Reset", u64_dec(reset_seconds(r), num));
}

void
rlheaders_add(struct headers *h, enum rl_headers style,
              const struct limiter_def *lim, const struct limit_result *r)
{
    if (style == RL_HEADERS_BOTH || style == RL_HEADERS_IETF) {
        add_ietf(h, lim, r);
    }
    if (style == RL_HEADERS_BOTH || style == RL_HEADERS_LEGACY) {
        add_legacy(h, lim, r);
    }
    /* Retry-After is plain HTTP, not a rate-limit field: every style
     * sends it, and of two refusals the later retry is the one that
     * can pass both. A limiter that refuses all has no retry to name. */
    if (!r->allowed && !lim->refuse_all) {
        int64_t old = header_number(headers_get(h, "Retry-After"));
        uint64_t secs = retry_seconds(r);
        char num[U64_DEC_MAX];

        if (old < 0 || (uint64_t)old < secs) {
            headers_set(h, "Retry-After", u64_dec(secs, num));
        }
    }
}

void
rlheaders_add_scg(struct headers *h, const struct limiter_def *lim,
                  uint64_t cost, const struct limit_result *r)
{
    char num[U64_DEC_MAX];

    headers_set(h, "X-RateLimit-Remaining", u64_dec(remaining(r), num));
    headers_set(h, "X-RateLimit-Burst-Capacity",
                u64_dec(lim->rules[0].burst, num));
    /* SCG's rate is per second; a derived limiter's window is 1 s. */
    headers_set(
        h, "X-RateLimit-Replenish-Rate",
        u64_dec(lim->rules[0].limit * 1000 / lim->rules[0].window_ms, num));
    headers_set(h, "X-RateLimit-Requested-Tokens", u64_dec(cost, num));
}

char *
rlheaders_problem(int status, const struct limiter_def *lim,
                  const struct limit_result *r, const char *instance)
{
    uint64_t secs = retry_seconds(r);
    struct strbuf detail = STRBUF_INIT;
    struct strbuf body = STRBUF_INIT;
    char *base;

    strbuf_add(&detail, "Rate limit \"", 12);
    strbuf_adds(&detail, lim->name);
    if (lim->refuse_all) {
        strbuf_adds(&detail, "\" refuses every request.");
    } else {
        strbuf_add(&detail, "\" exceeded; retry after ", 24);
        strbuf_add_u64(&detail, secs);
        strbuf_adds(&detail, secs == 1 ? " second." : " seconds.");
    }
    base = problem_json(status, problem_reason(status), detail.p, instance);
    /* problem_json() ends with the object's '}': the extension members
     * go just before it. */
    strbuf_add(&body, base, strlen(base) - 1);
    strbuf_add(&body, ",\"policy\":", 10);
    strbuf_add_json(&body, lim->name);
    if (!lim->refuse_all) {
        strbuf_add(&body, ",\"retry_after_ms\":", 18);
        strbuf_add_u64(&body, r->retry_after_ms);
    }
    strbuf_add(&body, "}", 1);
    free(base);
    free(detail.p);
    return strbuf_take(&body);
}
