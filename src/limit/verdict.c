#include "verdict.h"

#include <stdlib.h>
#include <string.h>

#include "problem.h"
#include "rlheaders.h"

enum verdict_reason
verdict_reason_of(const struct limit_result *r, bool fallback)
{
    if (fallback) {
        return r->allowed ? VERDICT_FALLBACK_ALLOWED : VERDICT_FALLBACK_DENIED;
    }
    return r->allowed ? VERDICT_ALLOWED : VERDICT_DENIED;
}

/* A limiter's decision is in 'res'. */
static bool
decided(enum verdict_reason r)
{
    return r == VERDICT_ALLOWED || r == VERDICT_DENIED ||
           r == VERDICT_FALLBACK_ALLOWED || r == VERDICT_FALLBACK_DENIED;
}

/* A limiter or the Redis policy decided: the part can name the verdict. */
static bool
leads(enum verdict_reason r)
{
    return decided(r) || r == VERDICT_POLICY_ALLOWED ||
           r == VERDICT_POLICY_DENIED;
}

static void
name_by(struct verdict *v, const struct tier *t)
{
    v->limiter = t->limiter != NULL ? t->limiter->name : NULL;
    v->tier = t->label;
}

static void
refuse(struct verdict *v, enum verdict_reason reason, int status, char *body)
{
    v->deny = true;
    v->reason = reason;
    v->status = status;
    v->body = body;
}

static char *
problem_for(int status, const char *detail, const char *instance)
{
    return problem_json(status, problem_reason(status), detail, instance);
}

void
verdict_assemble(const struct verdict_part *parts, size_t n,
                 const char *instance, struct headers *fields,
                 struct verdict *out)
{
    /* The part naming a pass: the first that 'leads', or none. */
    const struct verdict_part *lead = NULL;

    memset(out, 0, sizeof(*out));
    for (size_t i = 0; i < n; i++) {
        const struct verdict_part *pt = &parts[i];
        const struct rate_limit_conf *conf = pt->conf;
        bool first_denial = !out->deny;

        if (pt->tier != NULL && lead == NULL) {
            name_by(out, pt->tier);
            lead = leads(pt->reason) ? pt : NULL;
        }
        switch (pt->reason) {
        case VERDICT_NO_KEY:
            if (first_denial) {
                int status =
                    conf->empty_key_status != 0 ? conf->empty_key_status : 403;

                refuse(out, VERDICT_NO_KEY, status,
                       problem_for(status,
                                   "no rate-limit key applies to this caller",
                                   instance));
            }
            continue;
        case VERDICT_POLICY_DENIED:
        case VERDICT_TWIN_FAILED:
            if (first_denial) {
                refuse(out, pt->reason, 503,
                       problem_for(503, "the rate limiter is unavailable",
                                   instance));
                name_by(out, pt->tier);
                lead = leads(pt->reason) ? pt : NULL;
            }
            continue;
        default:
            break;
        }
        if (!decided(pt->reason)) {
            continue;
        }
        if (conf->headers == RL_HEADERS_SCG) {
            rlheaders_add_scg(fields, pt->tier->limiter, conf->cost, &pt->res);
        }
        if (conf->dry_run) {
            rlheaders_add_dry_run(fields, conf->headers, pt->tier->limiter,
                                  &pt->res);
        } else {
            rlheaders_add(fields, conf->headers, pt->tier->limiter, &pt->res);
        }
        if (pt->res.allowed) {
            if (!conf->dry_run && pt->res.delay_ms > out->delay_ms) {
                out->delay_ms = pt->res.delay_ms;
            }
        } else if (conf->dry_run) {
            out->dry_run_denied = true;
        } else if (first_denial) {
            refuse(out, pt->reason, conf->deny_status,
                   rlheaders_problem(conf->deny_status, pt->tier->limiter,
                                     &pt->res, instance));
            name_by(out, pt->tier);
            lead = pt;
        }
    }
    if (out->deny) {
        out->delay_ms = 0;
    } else if (lead == NULL) {
        out->reason = VERDICT_UNLIMITED;
    } else if (out->dry_run_denied) {
        out->reason = VERDICT_DRY_RUN_DENIED;
    } else if (out->delay_ms > 0) {
        out->reason = VERDICT_DELAYED;
    } else {
        /* A lead that refused has denied or set dry_run_denied: this one
         * admitted, by the limiter, the twin or the policy. */
        out->reason = lead->reason;
    }
}

void
verdict_deinit(struct verdict *v)
{
    free(v->body);
    v->body = NULL;
}

const char *
verdict_reason_name(enum verdict_reason r)
{
    switch (r) {
    case VERDICT_UNLIMITED:
        return NULL;
    case VERDICT_NO_KEY:
        return "no_key";
    case VERDICT_ALLOWED:
        return "allowed";
    case VERDICT_DENIED:
    case VERDICT_TWIN_FAILED: /* labelled so since before the reasons */
        return "denied";
    case VERDICT_FALLBACK_ALLOWED:
        return "fallback_allowed";
    case VERDICT_FALLBACK_DENIED:
        return "fallback_denied";
    case VERDICT_POLICY_ALLOWED:
        return "policy_allowed";
    case VERDICT_POLICY_DENIED:
        return "policy_denied";
    case VERDICT_DELAYED:
        return "delayed";
    case VERDICT_DRY_RUN_DENIED:
        return "dry_run_denied";
    }
    return NULL;
}
