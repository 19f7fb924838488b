/*
 * rlheaders.h - what a rate-limit decision tells the client: the IETF
 * httpapi draft's RateLimit-Policy and RateLimit fields, the legacy
 * X-RateLimit-* fields, Retry-After, and the application/problem+json body
 * of a refusal. Pure: writes into a header list and a string, no I/O.
 */
#ifndef SLUICE_RLHEADERS_H
#define SLUICE_RLHEADERS_H

#include <stdbool.h>
#include <stdint.h>

#include "limit.h"

struct headers;

/*
 * Adds the fields 'style' asks for, for limiter 'lim' after decision 'r':
 *   RateLimit-Policy: "<name>";q=<quota>;w=<window s>   one item per rule,
 *                     items after the first named "<name>/<i>"
 *   RateLimit:        "<name>";r=<remaining>;t=<s>      the deciding rule
 *   X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset (seconds)
 *   Retry-After (whole seconds, rounded up, at least 1) when !r->allowed,
 *               unless the limiter refuses all (lim->refuse_all)
 * Quota is the limit (windows) or the burst (buckets); the window is W for
 * windows and the time to fill the bucket, burst * W / limit, for buckets,
 * both in whole seconds rounded up. t is the seconds until r->reset_ms,
 * or until r->retry_after_ms when denied, rounded up. Fields already
 * present (from another limiter on the same route) are appended to, as
 * lists, for the IETF fields; the legacy fields keep the tightest.
 */
void rlheaders_add(struct headers *h, enum rl_headers style,
                   const struct limiter_def *lim, const struct limit_result *r);

/*
 * rlheaders_add() for a dry run's decision: the same fields, but never
 * Retry-After, which tells a client to wait (RFC 9110, 10.2.3), while a
 * dry run refuses nothing.
 */
void rlheaders_add_dry_run(struct headers *h, enum rl_headers style,
                           const struct limiter_def *lim,
                           const struct limit_result *r);

/*
 * The RateLimit-Policy items of 'lim' (above), which depend on the
 * limiter alone: a new string the caller frees, kept in lim->policy by
 * the config so that no decision builds it again.
 */
char *rlheaders_policy(const struct limiter_def *lim);

/*
 * Spring Cloud Gateway's four fields (headers: scg), set, not appended:
 *   X-RateLimit-Remaining        units left after this decision
 *   X-RateLimit-Burst-Capacity   rules[0].burst
 *   X-RateLimit-Replenish-Rate   rules[0] in units per second
 *   X-RateLimit-Requested-Tokens 'cost'
 * Retry-After is left to rlheaders_add(), which every style calls.
 */
void rlheaders_add_scg(struct headers *h, const struct limiter_def *lim,
                       uint64_t cost, const struct limit_result *r);

/*
 * The problem+json body of a refusal by 'lim' with 'status' (429 unless
 * configured): title, status, detail naming the policy and the retry
 * time, "instance" (the request target, may be NULL), and extension
 * members "policy" (the limiter's name) and "retry_after_ms". A new
 * string the caller frees.
 */
char *rlheaders_problem(int status, const struct limiter_def *lim,
                        const struct limit_result *r, const char *instance);

#endif
