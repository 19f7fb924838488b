/*
 * verdict.h - combines the decisions of a route's RequestRateLimiter
 * filters for one request: which filter's outcome answers, the response
 * fields, the status and body, and the reason told to logs and metrics.
 * Pure: no I/O. Depends on limit.h, rlheaders.h, headers.h, problem.h.
 */
#ifndef SLUICE_VERDICT_H
#define SLUICE_VERDICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "headers.h"
#include "limit.h"

/*
 * Why one filter's part of a check, or the whole check, came out as it
 * did. ratelimit.c gives each part one of the first nine where it
 * decides it; verdict_assemble() gives the check one of them, or DELAYED
 * or DRY_RUN_DENIED, which only a whole check can be.
 */
enum verdict_reason {
    VERDICT_UNLIMITED,        /* tier "none", or no tier or key applies
                                 and empty_key: allow; check: no limiter
                                 applied */
    VERDICT_NO_KEY,           /* no tier or key applies, empty_key: deny
                                 (403) */
    VERDICT_ALLOWED,          /* the limiter (Redis or backend: local)
                                 admitted */
    VERDICT_DENIED,           /* a rule of the limiter refused */
    VERDICT_FALLBACK_ALLOWED, /* Redis failed; the local twin admitted */
    VERDICT_FALLBACK_DENIED,  /* Redis failed; the local twin refused */
    VERDICT_POLICY_ALLOWED,   /* Redis failed; on_redis_error: allow */
    VERDICT_POLICY_DENIED,    /* Redis failed; on_redis_error: deny (503) */
    VERDICT_TWIN_FAILED,      /* the local twin could not decide (503) */
    VERDICT_DELAYED,          /* check: admitted, to be held first */
    VERDICT_DRY_RUN_DENIED,   /* check: admitted, but a dry_run filter
                                 would have refused */
};

/* One filter's part of a check, as decided. */
struct verdict_part {
    const struct rate_limit_conf *conf; /* the filter; borrowed */
    const struct tier *tier;            /* the tier that applied, or NULL
                                           (no tier, or no key); borrowed */
    enum verdict_reason reason;         /* one of the part reasons */
    struct limit_result res;            /* ALLOWED, DENIED, FALLBACK_*:
                                           the decision; else unused */
};

/* What the check answers. */
struct verdict {
    bool deny;                  /* refuse with 'status' and 'body'; else
                                   forward, after 'delay_ms' */
    int status;                 /* deny: deny_status, 403 or 503 */
    uint64_t delay_ms;          /* forward: hold this long first */
    char *body;                 /* deny: problem+json body; owned */
    enum verdict_reason reason; /* for logs and metrics */
    const char *limiter;        /* the deciding limiter's name, or NULL;
                                   borrowed from the config */
    const char *tier;           /* the deciding tier's label, or NULL;
                                   borrowed from the config */
    bool dry_run_denied;        /* a dry_run filter would have refused */
};

/* The part reason of a limiter's decision 'r'; 'fallback': by the twin
 * standing in for Redis. */
enum verdict_reason verdict_reason_of(const struct limit_result *r,
                                      bool fallback);

/*
 * Combines 'parts' (n of them, in filter order) into '*out' (overwritten;
 * verdict_deinit() it) and 'fields' (borrowed), the caller's list that
 * receives the fields for the response: pass it empty (an emptied one
 * reuses its memory):
 * - the first refusal in filter order answers: no key 403 (or the
 *   filter's empty_key_status), Redis policy
 *   or twin failure 503, a rule the filter's deny_status; a dry_run
 *   filter never refuses by a rule;
 * - the fields of every part a limiter decided go on the response;
 * - a pass is held for the longest delay of any non-dry-run part;
 * - 'limiter' and 'tier' name the refusing part or else the first part a
 *   limiter or the Redis policy decided (a tier "none" part until one
 *   does); a no-key refusal leaves them to the other parts.
 * 'instance' (the request target, may be NULL) goes into the body.
 */
void verdict_assemble(const struct verdict_part *parts, size_t n,
                      const char *instance, struct headers *fields,
                      struct verdict *out);

void verdict_deinit(struct verdict *v);

/*
 * The label of 'r' in metrics and the access log: allowed, denied,
 * delayed, dry_run_denied, fallback_allowed, fallback_denied,
 * policy_allowed, policy_denied, no_key; NULL for VERDICT_UNLIMITED. A
 * twin failure is labelled denied.
 */
const char *verdict_reason_name(enum verdict_reason r);

#endif
