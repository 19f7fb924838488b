#include "limit.h"

#include <stdlib.h>
#include <string.h>

/* Indexed by enum limit_algorithm; the names gateway.yaml uses. */
static const char *const algorithm_names[LIMIT_ALGORITHM_COUNT] = {
    [LIMIT_FIXED_WINDOW] = "fixed_window",
    [LIMIT_SLIDING_WINDOW] = "sliding_window",
    [LIMIT_SLIDING_WINDOW_COUNTER] = "sliding_window_counter",
    [LIMIT_TOKEN_BUCKET] = "token_bucket",
    [LIMIT_LEAKY_BUCKET] = "leaky_bucket",
    [LIMIT_GCRA] = "gcra",
};

const char *
limit_algorithm_name(enum limit_algorithm a)
{
    if ((unsigned)a >= LIMIT_ALGORITHM_COUNT) {
        return NULL;
    }
    return algorithm_names[a];
}

int
limit_algorithm_parse(const char *name, enum limit_algorithm *out)
{
    for (unsigned i = 0; i < LIMIT_ALGORITHM_COUNT; i++) {
        if (strcmp(name, algorithm_names[i]) == 0) {
            *out = (enum limit_algorithm)i;
            return 0;
        }
    }
    return -1;
}

bool
limit_algorithm_is_bucket(enum limit_algorithm a)
{
    return a == LIMIT_TOKEN_BUCKET || a == LIMIT_LEAKY_BUCKET ||
           a == LIMIT_GCRA;
}

static void
key_spec_deinit(struct key_spec *k)
{
    for (size_t i = 0; i < k->nparts; i++) {
        free(k->parts[i].name);
    }
    free(k->text);
}

void
rate_limit_conf_free(struct rate_limit_conf *rl)
{
    if (rl == NULL) {
        return;
    }
    for (size_t i = 0; i < rl->ntiers; i++) {
        free(rl->tiers[i].when_role);
        for (size_t j = 0; j < rl->tiers[i].nwhen_claims; j++) {
            free(rl->tiers[i].when_claims[j].name);
            free(rl->tiers[i].when_claims[j].value);
        }
        free(rl->tiers[i].when_claims);
        key_spec_deinit(&rl->tiers[i].key);
        free(rl->tiers[i].label);
    }
    free(rl->tiers);
    free(rl->scope);
    if (rl->derived != NULL) {
        free(rl->derived->name);
        free(rl->derived->policy);
        free(rl->derived);
    }
    free(rl);
}

const char *
limit_redis_failure_name(enum redis_failure f)
{
    switch (f) {
    case REDIS_FAILURE_LOCAL:
        return "local";
    case REDIS_FAILURE_ALLOW:
        return "allow";
    case REDIS_FAILURE_DENY:
        return "deny";
    }
    return "?";
}
