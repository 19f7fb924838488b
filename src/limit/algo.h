/*
 * algo.h - the six rate-limit algorithms in C: the exact twins of the Lua
 * scripts in lua/, used by `backend: local` and when Redis fails. Pure: no
 * I/O, no clock (the caller passes the time), no locking (local_store.h
 * locks). The semantics below are the contract of BOTH implementations;
 * a differential test holds them to it.
 *
 * Arithmetic. Time is integer milliseconds. Every quantity is an integer;
 * fractions of a unit are kept by scaling, never rounded away, so the
 * long-run rate is exactly limit/window:
 *   - bucket levels are kept in "unit-milliseconds": u units = u * W;
 *     per elapsed millisecond a bucket refills or leaks L of them;
 *   - GCRA keeps its theoretical arrival time as (ms, fraction in 1/L ms).
 * Divisions round down (floor) or up (ceil) as written. In Lua (doubles,
 * Lua 5.1) floor(a / b) for a >= 0 is (a - math.fmod(a, b)) / b, which is
 * exact below 2^53; the config keeps every product below 2^50.
 *
 * Notation: now (ms), c = cost (1 <= c; c <= L for windows, c <= B for
 * buckets), L = rule.limit, W = rule.window_ms, B = rule.burst, maxd =
 * max_delay_ms in delay mode and 0 otherwise. A state that is absent
 * (never written, or expired) is "fresh".
 *
 * Per rule, each algorithm computes from its state:
 *   wait_i    ms until c units would conform (0: now)
 *   cap_ok_i  false if c can never fit the rule's capacity right now
 *             (windows: the count; leaky delay mode: the queue)
 *   ok_i      cap_ok_i && wait_i <= maxd
 *   rem_i     units left, after admission if the request is admitted,
 *             else as things stand (never below 0)
 *   reset_i   ms until the rule's state is fresh again, after admission
 *             if admitted, else as things stand
 *   retry_i   when !ok_i: ms until a retry of the same cost would be ok
 * Combining the rules (all-or-nothing):
 *   allowed        = every ok_i
 *   allowed:  every rule's new state is written with its TTL;
 *             remaining = min rem_i, rule = first i with that minimum,
 *             delay_ms = max wait_i, retry_after_ms = 0,
 *             reset_ms = max reset_i
 *   denied:   nothing is written (expired sorted-set members may be
 *             trimmed: that consumes nothing); remaining = min rem_i,
 *             retry_after_ms = max retry_i over the rules that are not ok,
 *             rule = first such i with that maximum, delay_ms = 0,
 *             reset_ms = max reset_i
 *
 * fixed_window: state {w, n}; k = floor(now / W); n = 0 unless w == k.
 *   wait 0; cap_ok: n + c <= L; admitted: n += c, w = k.
 *   rem = L - n; reset = (k + 1) * W - now = TTL; retry = reset.
 * sliding_window: a sorted set of one member per admitted unit, score the
 *   admission time; members in the window are those with score > now - W
 *   (older ones are trimmed). n = members in the window.
 *   wait 0; cap_ok: n + c <= L; admitted: c members with score now, each
 *   unique ("<now>:<request id>:<1..c>").
 *   rem = L - n (after: L - n - c);
 *   reset = newest score + W - now (0 if none) = TTL after admission (W);
 *   retry = score of the member of rank n + c - L - 1 (0 = oldest)
 *           + W - now.
 * sliding_window_counter: state {w, cur, prev}; k = floor(now / W),
 *   e = now - k * W. If w == k: as stored; if w == k - 1: prev = cur,
 *   cur = 0; else both 0. Weighted use, scaled by W:
 *   used = prev * (W - e) + cur * W.
 *   wait 0; cap_ok: used + c * W <= L * W; admitted: cur += c, w = k.
 *   rem = floor((L * W - used') / W) with used' after admission;
 *   reset = cur > 0 ? 2W - e : prev > 0 ? W - e : 0; TTL = 2W - e.
 *   retry: if cur + c <= L (the previous window is what blocks):
 *             e' = W - floor((L - cur - c) * W / prev); retry = e' - e;
 *          else (wait for the next window, where prev = cur, cur = 0):
 *             e'' = W - floor((L - c) * W / cur); retry = (W - e) + e''.
 * token_bucket: state {S, t}, fresh S = B*W; S is in unit-ms.
 *   S' = min(B*W, S + (now - t) * L)   (now < t counts as 0 elapsed;
 *        compute without overflow: if (now - t) >= ceil((B*W - S) / L)
 *        then S' = B*W)
 *   need = c * W; wait = S' >= need ? 0 : ceil((need - S') / L).
 *   cap_ok true. admitted: S = S' - need (may go below 0 in delay mode),
 *   t = now. rem = max(0, floor(S / W)); reset = ceil((B*W - S) / L) = TTL;
 *   retry = wait - maxd.
 * leaky_bucket: state {V, t}, fresh V = 0; V is the water in unit-ms.
 *   V' = max(0, V - (now - t) * L) (same overflow care as above).
 *   need = c * W.
 *   deny mode:  wait = V' + need <= B*W ? 0 : ceil((V' + need - B*W) / L);
 *               cap_ok true.
 *   delay mode: the bucket is a queue drained at the rate: the request
 *               waits for the water ahead of it. cap_ok: V' + need <= B*W;
 *               wait = ceil(V' / L).
 *               retry = max(cap_ok ? 0 : ceil((V' + need - B*W) / L),
 *                           wait - maxd).
 *   admitted: V = V' + need, t = now. rem = floor((B*W - V) / W);
 *   reset = ceil(V / L) = TTL. deny-mode retry = wait.
 * gcra: state tat = tat_ms + f / L (0 <= f < L). In 1/L-ms ticks, the
 *   distance to now is d = max(0, (tat_ms - now) * L + f); one unit costs
 *   W ticks; the bucket holds B*W ticks.
 *   nd = d + c * W; wait = nd <= B*W ? 0 : ceil((nd - B*W) / L).
 *   cap_ok true. admitted: tat = now + nd / L, i.e. tat_ms = now +
 *   floor(nd / L), f = nd mod L. rem = max(0, floor((B*W - nd) / W));
 *   reset = ceil(nd / L) = TTL (denied: ceil(d / L), rem from d);
 *   retry = wait - maxd.
 *   (gcra and token_bucket decide alike by design; they store differently.)
 *
 * Every TTL is at least 1 ms. Keys of one call share a hash tag.
 */
#ifndef SLUICE_ALGO_H
#define SLUICE_ALGO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "limit.h"

/* One rule's state. All zero is "fresh". */
struct algo_state {
    bool present;     /* false: fresh */
    uint64_t expires; /* ms: the state is fresh again from then on */
    int64_t a;        /* fixed/counter: w; buckets: S or V; gcra: tat_ms */
    int64_t b;        /* fixed: n; counter: cur; buckets: t; gcra: f */
    int64_t c;        /* counter: prev */
    uint64_t *log;    /* sliding_window: admission times, oldest first;
                         owned */
    size_t nlog;      /* entries in 'log' */
    size_t cap;       /* slots in 'log' */
};

/*
 * Decides whether 'cost' units may pass every rule of 'def' at 'now_ms'.
 * 'states' holds def->nrules states, each fresh or as a previous call left
 * it; a state past its 'expires' is treated as fresh. Updates the states
 * only when the request is admitted (setting 'expires' = now + TTL).
 * Returns 0, or -1 if 'cost' is 0 or exceeds a rule (nothing changes).
 */
int algo_decide(const struct limiter_def *def, struct algo_state *states,
                uint64_t now_ms, uint64_t cost, struct limit_result *out);

/* Frees what a state owns and makes it fresh. */
void algo_state_reset(struct algo_state *s);

#endif
