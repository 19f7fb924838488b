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

/*
 * Sets 'name' ('name_len' bytes) to the 'len' bytes at 'value'. 'fresh':
 * the list was empty when this decision's fields began, so no field of
 * that name can be there to replace, and none is looked for.
 */
static void
put_field(struct headers *h, bool fresh, const char *name, size_t name_len,
          const char *value, size_t len)
{
    if (!fresh) {
        headers_remove(h, name);
    }
    headers_add_n(h, name, name_len, value, len);
}

/* A number in decimal, written once for the fields that show it. */
struct dec {
    const char *p;         /* the digits, in 'buf' */
    size_t n;              /* how many */
    char buf[U64_DEC_MAX]; /* room for them */
};

static void
dec_set(struct dec *d, uint64_t v)
{
    d->p = u64_dec_n(v, d->buf, &d->n);
}

/* put_field() of a number. */
static void
put_number(struct headers *h, bool fresh, const char *name, size_t name_len,
           uint64_t v)
{
    struct dec d;

    dec_set(&d, v);
    put_field(h, fresh, name, name_len, d.p, d.n);
}

/* put_number() and put_field() of a number written before, for a name
 * that is a string literal. */
#define PUT_NUMBER(h, fresh, lit, v)                                           \
    put_number((h), (fresh), (lit), sizeof(lit) - 1, (v))
#define PUT_DEC(h, fresh, lit, d)                                              \
    put_field((h), (fresh), (lit), sizeof(lit) - 1, (d)->p, (d)->n)

/* Sets 'name' to the 'len' bytes at 'value', after what is already there
 * as a list. */
static void
append_list(struct headers *h, bool fresh, const char *name, size_t name_len,
            const char *value, size_t len)
{
    const char *old = fresh ? NULL : headers_get(h, name);
    struct strbuf joined = STRBUF_INIT;

    if (old == NULL) {
        /* None of that name: nothing to remove either. */
        headers_add_n(h, name, name_len, value, len);
        return;
    }
    if (old[0] == '\0') {
        headers_remove(h, name);
        headers_add_n(h, name, name_len, value, len);
        return;
    }
    strbuf_adds(&joined, old);
    strbuf_add(&joined, ", ", 2);
    strbuf_add(&joined, value, len);
    headers_set(h, name, joined.p);
    free(joined.p);
}

#define APPEND_LIST(h, fresh, lit, value, len)                                 \
    append_list((h), (fresh), (lit), sizeof(lit) - 1, (value), (len))

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

/* Copies 'len' bytes to 'at'; returns where the next go. */
static char *
put(char *at, const char *s, size_t len)
{
    memcpy(at, s, len);
    return at + len;
}

/* A RateLimit item whose limiter's name is this long or shorter is
 * written on the stack. */
#define STATE_NAME_MAX 160
/* The rest of an item: two quotes, '/', ";r=", ";t=", three numbers. */
#define STATE_EXTRA (3 + 6 + 3 * U64_DEC_MAX)

/* 'rem' and 'reset': remaining(r) and reset_seconds(r). */
static void
add_ietf(struct headers *h, bool fresh, const struct limiter_def *lim,
         const struct limit_result *r, const struct dec *rem,
         const struct dec *reset)
{
    size_t rule = deciding_rule(lim, r);
    size_t name_len = strlen(lim->name);
    size_t need = name_len + STATE_EXTRA;
    char stack[STATE_NAME_MAX + STATE_EXTRA];
    char *state = need <= sizeof(stack) ? stack : xmalloc(need);
    char *at = state;

    at = put(at, "\"", 1);
    at = put(at, lim->name, name_len);
    if (rule > 0) {
        at = put(at, "/", 1);
        at = u64_put(at, rule);
    }
    at = put(at, "\";r=", 4);
    at = put(at, rem->p, rem->n);
    at = put(at, ";t=", 3);
    at = put(at, reset->p, reset->n);
    if (lim->policy != NULL) {
        APPEND_LIST(h, fresh, "RateLimit-Policy", lim->policy,
                    strlen(lim->policy));
    } else {
        struct strbuf policy = STRBUF_INIT;

        add_policy(&policy, lim);
        APPEND_LIST(h, fresh, "RateLimit-Policy", policy.p, policy.n);
        free(policy.p);
    }
    APPEND_LIST(h, fresh, "RateLimit", state, (size_t)(at - state));
    if (state != stack) {
        free(state);
    }
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

/* The legacy fields describe one limit: the tightest one seen. 'rem'
 * and 'reset' as for add_ietf(). */
static void
add_legacy(struct headers *h, bool fresh, const struct limiter_def *lim,
           const struct limit_result *r, const struct dec *rem,
           const struct dec *reset)
{
    int64_t old =
        fresh ? -1 : header_number(headers_get(h, "X-RateLimit-Remaining"));

    if (old >= 0 && (uint64_t)old <= remaining(r)) {
        return;
    }
    PUT_NUMBER(h, fresh, "X-RateLimit-Limit",
               rule_quota(lim, deciding_rule(lim, r)));
    PUT_DEC(h, fresh, "X-RateLimit-Remaining", rem);
    PUT_DEC(h, fresh, "X-RateLimit-Reset", reset);
}

/* rlheaders_add(), and Retry-After only when 'retry'. */
static void
add_fields(struct headers *h, enum rl_headers style,
           const struct limiter_def *lim, const struct limit_result *r,
           bool retry)
{
    /* Mostly one limiter on a route: its fields go on an empty list. */
    bool fresh = h->n == 0;
    bool ietf = style == RL_HEADERS_BOTH || style == RL_HEADERS_IETF;
    bool legacy = style == RL_HEADERS_BOTH || style == RL_HEADERS_LEGACY;
    struct dec rem, reset;

    if (ietf || legacy) {
        /* Each shows twice: written once. */
        dec_set(&rem, remaining(r));
        dec_set(&reset, reset_seconds(r));
    }
    if (ietf) {
        add_ietf(h, fresh, lim, r, &rem, &reset);
    }
    if (legacy) {
        add_legacy(h, fresh, lim, r, &rem, &reset);
    }
    /* Retry-After is plain HTTP, not a rate-limit field: every style
     * sends it, and of two refusals the later retry is the one that
     * can pass both. A limiter that refuses all has no retry to name. */
    if (retry && !r->allowed && !lim->refuse_all) {
        int64_t old = fresh ? -1 : header_number(headers_get(h, "Retry-After"));
        uint64_t secs = retry_seconds(r);

        if (old >= 0 && (uint64_t)old >= secs) {
            return;
        }
        if (ietf || legacy) {
            /* A refusal's reset is its retry: the same digits. */
            PUT_DEC(h, fresh, "Retry-After", &reset);
        } else {
            PUT_NUMBER(h, fresh, "Retry-After", secs);
        }
    }
}

void
rlheaders_add(struct headers *h, enum rl_headers style,
              const struct limiter_def *lim, const struct limit_result *r)
{
    add_fields(h, style, lim, r, true);
}

void
rlheaders_add_dry_run(struct headers *h, enum rl_headers style,
                      const struct limiter_def *lim,
                      const struct limit_result *r)
{
    add_fields(h, style, lim, r, false);
}

void
rlheaders_add_scg(struct headers *h, const struct limiter_def *lim,
                  uint64_t cost, const struct limit_result *r)
{
    bool fresh = h->n == 0;

    PUT_NUMBER(h, fresh, "X-RateLimit-Remaining", remaining(r));
    PUT_NUMBER(h, fresh, "X-RateLimit-Burst-Capacity", lim->rules[0].burst);
    /* SCG's rate is per second; a derived limiter's window is 1 s. */
    PUT_NUMBER(h, fresh, "X-RateLimit-Replenish-Rate",
               lim->rules[0].limit * 1000 / lim->rules[0].window_ms);
    PUT_NUMBER(h, fresh, "X-RateLimit-Requested-Tokens", cost);
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
