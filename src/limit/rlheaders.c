#include "rlheaders.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "headers.h"
#include "problem.h"
#include "xmalloc.h"

/* "<name>" for rule 0, "<name>/<i>" after: one policy item per rule. */
#define ITEM_NAME_MAX 96

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

static void
item_name(const struct limiter_def *lim, size_t i, char *buf)
{
    if (i == 0) {
        snprintf(buf, ITEM_NAME_MAX, "%s", lim->name);
    } else {
        snprintf(buf, ITEM_NAME_MAX, "%s/%zu", lim->name, i);
    }
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

/* Sets 'name' to 'value', after what is already there as a list. */
static void
append_list(struct headers *h, const char *name, const char *value)
{
    const char *old = headers_get(h, name);
    char *joined;

    if (old == NULL || old[0] == '\0') {
        headers_set(h, name, value);
        return;
    }
    joined = xasprintf("%s, %s", old, value);
    headers_set(h, name, joined);
    free(joined);
}

static void
add_ietf(struct headers *h, const struct limiter_def *lim,
         const struct limit_result *r)
{
    char name[ITEM_NAME_MAX];
    char *policy = NULL;
    char *state;

    for (size_t i = 0; i < lim->nrules; i++) {
        char *item;

        item_name(lim, i, name);
        item = xasprintf("%s\"%s\";q=%" PRIu64 ";w=%" PRIu64,
                         policy != NULL ? ", " : "", name, rule_quota(lim, i),
                         rule_window_s(lim, i));
        if (policy == NULL) {
            policy = item;
        } else {
            char *both = xasprintf("%s%s", policy, item);

            free(policy);
            free(item);
            policy = both;
        }
    }
    item_name(lim, deciding_rule(lim, r), name);
    state = xasprintf("\"%s\";r=%" PRIu64 ";t=%" PRIu64, name, remaining(r),
                      reset_seconds(r));
    append_list(h, "RateLimit-Policy", policy);
    append_list(h, "RateLimit", state);
    free(policy);
    free(state);
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
    char num[24];

    if (old >= 0 && (uint64_t)old <= remaining(r)) {
        return;
    }
    snprintf(num, sizeof(num), "%" PRIu64,
             rule_quota(lim, deciding_rule(lim, r)));
    headers_set(h, "X-RateLimit-Limit", num);
    snprintf(num, sizeof(num), "%" PRIu64, remaining(r));
    headers_set(h, "X-RateLimit-Remaining", num);
    snprintf(num, sizeof(num), "%" PRIu64, reset_seconds(r));
    headers_set(h, "X-RateLimit-Reset", num);
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
     * can pass both. */
    if (!r->allowed) {
        int64_t old = header_number(headers_get(h, "Retry-After"));
        uint64_t secs = retry_seconds(r);
        char num[24];

        if (old < 0 || (uint64_t)old < secs) {
            snprintf(num, sizeof(num), "%" PRIu64, secs);
            headers_set(h, "Retry-After", num);
        }
    }
}

/* 's' as a JSON string; limiter names are plain, but nothing relies on
 * it. The caller frees the result. */
static char *
json_string(const char *s)
{
    size_t n = strlen(s);
    char *out = xmalloc(6 * n + 3);
    char *p = out;

    *p++ = '"';
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') {
            *p++ = '\\';
            *p++ = (char)*c;
        } else if (*c < 0x20 || *c == 0x7f) {
            p += sprintf(p, "\\u%04x", *c);
        } else {
            *p++ = (char)*c;
        }
    }
    *p++ = '"';
    *p = '\0';
    return out;
}

char *
rlheaders_problem(int status, const struct limiter_def *lim,
                  const struct limit_result *r, const char *instance)
{
    uint64_t secs = retry_seconds(r);
    char *detail;
    char *base;
    char *policy;
    char *body;
    size_t n;

    detail = xasprintf("Rate limit \"%s\" exceeded; retry after %" PRIu64
                       " second%s.",
                       lim->name, secs, secs == 1 ? "" : "s");
    base = problem_json(status, problem_reason(status), detail, instance);
    /* problem_json() ends with the object's '}': the extension members
     * go just before it. */
    n = strlen(base);
    policy = json_string(lim->name);
    body = xasprintf("%.*s,\"policy\":%s,\"retry_after_ms\":%" PRIu64 "}",
                     (int)(n - 1), base, policy, r->retry_after_ms);
    free(policy);
    free(base);
    free(detail);
    return body;
}
