/*
 * algo.c - the C twins of the scripts in lua/. algo.h holds the contract; the
 * names here follow its notation (L, W, B, c, maxd, S, V, d, nd...).
 */
#include "algo.h"

#include <stdlib.h>
#include <string.h>

#include "xmalloc.h"

/* What one rule says about one request, before the rules are combined. */
struct rule_eval {
    bool ok;              /* cap_ok && wait <= maxd */
    uint64_t wait;        /* ms until 'cost' units conform */
    uint64_t retry;       /* !ok: ms until a retry could be ok */
    int64_t rem;          /* units left as things stand */
    uint64_t reset;       /* ms until fresh, as things stand */
    int64_t rem_after;    /* units left if admitted */
    uint64_t reset_after; /* ms until fresh if admitted; also the TTL */
    int64_t a;            /* the state's 'a' if admitted */
    int64_t b;            /* the state's 'b' if admitted */
    int64_t c;            /* the state's 'c' if admitted */
};

static bool
is_bucket(enum limit_algorithm a)
{
    return a == LIMIT_TOKEN_BUCKET || a == LIMIT_LEAKY_BUCKET ||
           a == LIMIT_GCRA;
}

static uint64_t
ceil_div(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

/* floor(a / b) for a signed 'a' and b > 0. */
static int64_t
floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;

    if (a % b != 0 && a < 0) {
        q--;
    }
    return q;
}

static int64_t
max_i64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

/* Milliseconds elapsed from 't' to 'now'; a clock that went back counts as
 * no time at all. */
static uint64_t
elapsed_ms(uint64_t now, int64_t t)
{
    return (int64_t)now > t ? now - (uint64_t)t : 0;
}

/*
 * Makes an expired state fresh, keeping the log's storage: the state is
 * about to be used again, and algo_state_reset() frees it for good.
 */
static void
make_fresh(struct algo_state *s)
{
    s->present = false;
    s->expires = 0;
    s->a = 0;
    s->b = 0;
    s->c = 0;
    s->nlog = 0;
}

static void
eval_fixed_window(const struct limit_rule *r, const struct algo_state *s,
                  uint64_t now, uint64_t cost, struct rule_eval *ev)
{
    uint64_t k = now / r->window_ms;
    uint64_t n = s->present && s->a == (int64_t)k ? (uint64_t)s->b : 0;

    ev->wait = 0;
    ev->ok = n + cost <= r->limit;
    ev->reset = (k + 1) * r->window_ms - now;
    ev->reset_after = ev->reset;
    ev->retry = ev->reset;
    ev->rem = max_i64(0, (int64_t)r->limit - (int64_t)n);
    ev->rem_after = (int64_t)r->limit - (int64_t)(n + cost);
    ev->a = (int64_t)k;
    ev->b = (int64_t)(n + cost);
    ev->c = 0;
}

/* Drops the log entries that left the window: time <= now - W. */
static void
trim_log(struct algo_state *s, uint64_t now, uint64_t window)
{
    size_t drop = 0;

    while (drop < s->nlog && s->log[drop] + window <= now) {
        drop++;
    }
    if (drop > 0) {
        memmove(s->log, s->log + drop, (s->nlog - drop) * sizeof(*s->log));
        s->nlog -= drop;
    }
}

static void
eval_sliding_window(const struct limit_rule *r, struct algo_state *s,
                    uint64_t now, uint64_t cost, struct rule_eval *ev)
{
    uint64_t n;

    /* Trimming consumes nothing: the Lua script trims on denials too. */
    trim_log(s, now, r->window_ms);
    n = s->nlog;
    ev->wait = 0;
    ev->ok = n + cost <= r->limit;
    ev->rem = max_i64(0, (int64_t)r->limit - (int64_t)n);
    ev->rem_after = (int64_t)r->limit - (int64_t)(n + cost);
    ev->reset = n > 0 ? s->log[n - 1] + r->window_ms - now : 0;
    ev->reset_after = r->window_ms;
    ev->retry = 0;
    if (!ev->ok) {
        /* The member whose expiry frees just enough room for 'cost'. */
        ev->retry = s->log[n + cost - r->limit - 1] + r->window_ms - now;
    }
    ev->a = 0;
    ev->b = 0;
    ev->c = 0;
}

/* Appends 'cost' admissions at 'now', keeping the log sorted even if the
 * clock went back. */
static void
admit_sliding_window(struct algo_state *s, uint64_t now, uint64_t cost)
{
    size_t at = s->nlog;

    s->log = xgrow(s->log, &s->cap, s->nlog + cost, sizeof(*s->log));
    while (at > 0 && s->log[at - 1] > now) {
        at--;
    }
    memmove(s->log + at + cost, s->log + at, (s->nlog - at) * sizeof(*s->log));
    for (uint64_t i = 0; i < cost; i++) {
        s->log[at + i] = now;
    }
    s->nlog += cost;
}

static void
eval_counter(const struct limit_rule *r, const struct algo_state *s,
             uint64_t now, uint64_t cost, struct rule_eval *ev)
{
    uint64_t w = r->window_ms;
    uint64_t lim = r->limit;
    uint64_t k = now / w;
    uint64_t e = now - k * w;
    uint64_t cur = 0;
    uint64_t prev = 0;
    uint64_t used;
    uint64_t used_after;
    uint64_t cur_after = 0;

    if (s->present && s->a == (int64_t)k) {
        cur = (uint64_t)s->b;
        prev = (uint64_t)s->c;
    } else if (s->present && s->a == (int64_t)k - 1) {
        prev = (uint64_t)s->b;
    }
    used = prev * (w - e) + cur * w;
    used_after = used + cost * w;
    cur_after = cur + cost;

    ev->wait = 0;
    ev->ok = used_after <= lim * w;
    ev->rem = used <= lim * w ? (int64_t)((lim * w - used) / w) : 0;
    ev->rem_after =
        used_after <= lim * w ? (int64_t)((lim * w - used_after) / w) : 0;
    ev->reset = cur > 0 ? 2 * w - e : prev > 0 ? w - e : 0;
    ev->reset_after = 2 * w - e;
    ev->retry = 0;
    if (!ev->ok) {
        if (cur + cost <= lim) {
            /* Only the previous window's weight is in the way: wait
             * until enough of it has slid out. prev > 0 here. */
            uint64_t e1 = w - (lim - cur - cost) * w / prev;

            ev->retry = e1 - e;
        } else {
            /* Next window: prev becomes cur, cur 0; cur > 0 here. */
            uint64_t e2 = w - (lim - cost) * w / cur;

            ev->retry = (w - e) + e2;
        }
    }
    ev->a = (int64_t)k;
    ev->b = (int64_t)cur_after;
    ev->c = (int64_t)prev;
}

static void
eval_token_bucket(const struct limit_rule *r, const struct algo_state *s,
                  uint64_t now, uint64_t cost, uint64_t maxd,
                  struct rule_eval *ev)
{
    int64_t full = (int64_t)(r->burst * r->window_ms);
    int64_t lim = (int64_t)r->limit;
    int64_t need = (int64_t)(cost * r->window_ms);
    int64_t sv = full;
    int64_t after;

    if (s->present) {
        uint64_t dt = elapsed_ms(now, s->b);
        uint64_t deficit = (uint64_t)(full - s->a); /* S <= B*W always */

        /* Compare before multiplying: dt * L may not fit. */
        sv = dt >= ceil_div(deficit, (uint64_t)lim) ? full
                                                    : s->a + (int64_t)dt * lim;
    }
    ev->wait = sv >= need ? 0 : ceil_div((uint64_t)(need - sv), (uint64_t)lim);
    ev->ok = ev->wait <= maxd;
    ev->retry = ev->ok ? 0 : ev->wait - maxd;
    after = sv - need;
    ev->rem = max_i64(0, floor_div(sv, (int64_t)r->window_ms));
    ev->rem_after = max_i64(0, floor_div(after, (int64_t)r->window_ms));
    ev->reset = ceil_div((uint64_t)(full - sv), (uint64_t)lim);
    ev->reset_after = ceil_div((uint64_t)(full - after), (uint64_t)lim);
    ev->a = after;
    ev->b = (int64_t)now;
    ev->c = 0;
}

static void
eval_leaky_bucket(const struct limit_rule *r, const struct algo_state *s,
                  uint64_t now, uint64_t cost, bool delay, uint64_t maxd,
                  struct rule_eval *ev)
{
    uint64_t full = r->burst * r->window_ms;
    uint64_t lim = r->limit;
    uint64_t need = cost * r->window_ms;
    uint64_t v = 0;
    uint64_t after;
    uint64_t over;

    if (s->present && s->a > 0) {
        uint64_t dt = elapsed_ms(now, s->b);

        v = dt >= ceil_div((uint64_t)s->a, lim) ? 0 : (uint64_t)s->a - dt * lim;
    }
    over = v + need > full ? ceil_div(v + need - full, lim) : 0;
    if (!delay) {
        ev->wait = over;
        ev->ok = over == 0;
        ev->retry = over;
    } else {
        /* A queue drained at the rate: wait for the water ahead. */
        bool cap_ok = v + need <= full;

        ev->wait = ceil_div(v, lim);
        ev->ok = cap_ok && ev->wait <= maxd;
        ev->retry = ev->wait > maxd ? ev->wait - maxd : 0;
        if (over > ev->retry) {
            ev->retry = over;
        }
        if (ev->ok) {
            ev->retry = 0;
        }
    }
    after = v + need;
    ev->rem = (int64_t)((full - v) / r->window_ms);
    ev->rem_after =
        after <= full ? (int64_t)((full - after) / r->window_ms) : 0;
    ev->reset = ceil_div(v, lim);
    ev->reset_after = ceil_div(after, lim);
    ev->a = (int64_t)after;
    ev->b = (int64_t)now;
    ev->c = 0;
}

static void
eval_gcra(const struct limit_rule *r, const struct algo_state *s, uint64_t now,
          uint64_t cost, uint64_t maxd, struct rule_eval *ev)
{
    uint64_t full = r->burst * r->window_ms;
    uint64_t lim = r->limit;
    uint64_t d = 0;
    uint64_t nd;

    /* tat_ms < now means the tat is in the past (f < L): d = 0. */
    if (s->present && s->a >= (int64_t)now) {
        d = ((uint64_t)s->a - now) * lim + (uint64_t)s->b;
    }
    nd = d + cost * r->window_ms;
    ev->wait = nd <= full ? 0 : ceil_div(nd - full, lim);
    ev->ok = ev->wait <= maxd;
    ev->retry = ev->ok ? 0 : ev->wait - maxd;
    ev->rem = d <= full ? (int64_t)((full - d) / r->window_ms) : 0;
    ev->rem_after = nd <= full ? (int64_t)((full - nd) / r->window_ms) : 0;
    ev->reset = ceil_div(d, lim);
    ev->reset_after = ceil_div(nd, lim);
    ev->a = (int64_t)(now + nd / lim);
    ev->b = (int64_t)(nd % lim);
    ev->c = 0;
}

/* Cost and rules a decision can be made with; the rules come from the
 * config, which validates them, so this only guards against misuse. */
static bool
valid_request(const struct limiter_def *def, uint64_t cost)
{
    bool bucket = is_bucket(def->algorithm);

    if (cost == 0 || def->nrules == 0 || def->nrules > LIMIT_MAX_RULES) {
        return false;
    }
    for (size_t i = 0; i < def->nrules; i++) {
        const struct limit_rule *r = &def->rules[i];

        if (r->limit == 0 || r->window_ms == 0) {
            return false;
        }
        if (cost > (bucket ? r->burst : r->limit)) {
            return false;
        }
    }
    return true;
}

int
algo_decide(const struct limiter_def *def, struct algo_state *states,
            uint64_t now_ms, uint64_t cost, struct limit_result *out)
{
    struct rule_eval ev[LIMIT_MAX_RULES];
    bool bucket = is_bucket(def->algorithm);
    bool delay = bucket && def->delay;
    uint64_t maxd = delay ? def->max_delay_ms : 0;
    bool allowed = true;

    if (!valid_request(def, cost)) {
        return -1;
    }
    for (size_t i = 0; i < def->nrules; i++) {
        const struct limit_rule *r = &def->rules[i];
        struct algo_state *s = &states[i];

        if (s->present && s->expires <= now_ms) {
            make_fresh(s);
        }
        switch (def->algorithm) {
        case LIMIT_FIXED_WINDOW:
            eval_fixed_window(r, s, now_ms, cost, &ev[i]);
            break;
        case LIMIT_SLIDING_WINDOW:
            eval_sliding_window(r, s, now_ms, cost, &ev[i]);
            break;
        case LIMIT_SLIDING_WINDOW_COUNTER:
            eval_counter(r, s, now_ms, cost, &ev[i]);
            break;
        case LIMIT_TOKEN_BUCKET:
            eval_token_bucket(r, s, now_ms, cost, maxd, &ev[i]);
            break;
        case LIMIT_LEAKY_BUCKET:
            eval_leaky_bucket(r, s, now_ms, cost, delay, maxd, &ev[i]);
            break;
        case LIMIT_GCRA:
            eval_gcra(r, s, now_ms, cost, maxd, &ev[i]);
            break;
        default:
            return -1;
        }
        allowed = allowed && ev[i].ok;
    }

    memset(out, 0, sizeof(*out));
    out->allowed = allowed;
    out->remaining = INT64_MAX;
    for (size_t i = 0; i < def->nrules; i++) {
        int64_t rem = allowed ? ev[i].rem_after : ev[i].rem;
        uint64_t reset = allowed ? ev[i].reset_after : ev[i].reset;

        rem = max_i64(0, rem);
        if (rem < out->remaining) {
            out->remaining = rem;
            if (allowed) {
                out->rule = (unsigned)i;
            }
        }
        if (reset > out->reset_ms) {
            out->reset_ms = reset;
        }
        if (allowed && ev[i].wait > out->delay_ms) {
            out->delay_ms = ev[i].wait;
        }
    }
    if (!allowed) {
        bool first = true;

        for (size_t i = 0; i < def->nrules; i++) {
            if (!ev[i].ok && (first || ev[i].retry > out->retry_after_ms)) {
                out->retry_after_ms = ev[i].retry;
                out->rule = (unsigned)i;
                first = false;
            }
        }
        return 0;
    }

    for (size_t i = 0; i < def->nrules; i++) {
        struct algo_state *s = &states[i];
        uint64_t ttl = ev[i].reset_after > 0 ? ev[i].reset_after : 1;

        if (def->algorithm == LIMIT_SLIDING_WINDOW) {
            admit_sliding_window(s, now_ms, cost);
        }
        s->present = true;
        s->expires = now_ms + ttl;
        s->a = ev[i].a;
        s->b = ev[i].b;
        s->c = ev[i].c;
    }
    return 0;
}

void
algo_state_reset(struct algo_state *s)
{
    free(s->log);
    memset(s, 0, sizeof(*s));
}
