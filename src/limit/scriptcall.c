#include "scriptcall.h"

#include <string.h>

#include "strbuf.h"

int
scriptcall_key(char *buf, size_t size, const char *key_base, size_t rule)
{
    size_t base_len = strlen(key_base);

    /* LIMIT_MAX_RULES <= 10: the rule is one digit. */
    _Static_assert(LIMIT_MAX_RULES <= 10, "one digit per rule index");
    if (rule >= LIMIT_MAX_RULES || base_len + 3 > size) {
        return -1;
    }
    memcpy(buf, key_base, base_len);
    buf[base_len] = ':';
    buf[base_len + 1] = (char)('0' + rule);
    buf[base_len + 2] = '\0';
    return 0;
}

/* Appends the decimal 'v' as the next argument of 'sc'. */
static void
push_number(struct scriptcall *sc, uint64_t v)
{
    _Static_assert(SCRIPTCALL_ARG_MAX >= U64_DEC_MAX, "any number fits");
    size_t i = sc->nargs++;

    sc->args[i] = u64_dec(v, sc->argbuf[i]);
}

int
scriptcall_encode(struct scriptcall *sc, const struct limiter_def *lim,
                  const char *key_base, uint64_t cost, const char *request_id,
                  uint64_t now_ms)
{
    if (lim->nrules == 0 || lim->nrules > LIMIT_MAX_RULES) {
        return -1;
    }
    sc->nkeys = 0;
    sc->nargs = 0;
    for (size_t i = 0; i < lim->nrules; i++) {
        if (scriptcall_key(sc->keybuf[i], sizeof(sc->keybuf[i]), key_base, i) !=
            0) {
            return -1;
        }
        sc->keys[sc->nkeys++] = sc->keybuf[i];
    }
    push_number(sc, now_ms);
    push_number(sc, cost);
    push_number(sc, lim->delay ? 1 : 0);
    push_number(sc, lim->max_delay_ms);
    /* The id is the one argument that is not a number: borrowed as is. */
    sc->args[sc->nargs++] = request_id;
    for (size_t i = 0; i < lim->nrules; i++) {
        push_number(sc, lim->rules[i].limit);
        push_number(sc, lim->rules[i].window_ms);
        push_number(sc, lim->rules[i].burst);
    }
    return 0;
}

/* A count from the script; a negative one (never sent) counts as 0. */
static uint64_t
clamp(long long v)
{
    return v > 0 ? (uint64_t)v : 0;
}

int
scriptcall_decode(const long long *ints, size_t n, struct limit_result *out)
{
    if (ints == NULL || n < SCRIPTCALL_REPLY_LEN ||
        (ints[0] != 0 && ints[0] != 1) || ints[5] >= LIMIT_MAX_RULES) {
        return -1;
    }
    out->allowed = ints[0] == 1;
    out->remaining = (int64_t)clamp(ints[1]);
    out->retry_after_ms = clamp(ints[2]);
    out->reset_ms = clamp(ints[3]);
    out->delay_ms = clamp(ints[4]);
    out->rule = (unsigned)clamp(ints[5]);
    return 0;
}

int
scriptcall_lease(struct scriptcall *sc, enum scriptcall_lease_op op,
                 uint64_t units)
{
    if (sc->nargs != SCRIPTCALL_FIXED_ARGS + 3 * sc->nkeys) {
        return -1;
    }
    sc->args[sc->nargs++] = op == SCRIPTCALL_LEASE_TAKE ? "take" : "return";
    push_number(sc, units);
    return 0;
}

int
scriptcall_decode_lease(const long long *ints, size_t n,
                        struct limit_result *out, uint64_t *units)
{
    struct limit_result res;

    if (n < SCRIPTCALL_LEASE_REPLY_LEN ||
        scriptcall_decode(ints, n, &res) != 0 || (res.allowed && ints[6] < 1)) {
        return -1;
    }
    *out = res;
    *units = clamp(ints[6]);
    return 0;
}
