#include "scriptcall.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "strbuf.h"

/* scriptcall_key() of a base of 'base_len' bytes. */
static int
put_key(char *buf, size_t size, const char *key_base, size_t base_len,
        size_t rule)
{
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

int
scriptcall_key(char *buf, size_t size, const char *key_base, size_t rule)
{
    return put_key(buf, size, key_base, strlen(key_base), rule);
}

/* Appends the decimal 'v' as the next argument of 'sc'. */
static void
push_number(struct scriptcall *sc, uint64_t v)
{
    _Static_assert(SCRIPTCALL_ARG_MAX >= U64_DEC_MAX, "any number fits");
    size_t i = sc->nargs++;

    sc->args[i] = u64_dec_n(v, sc->argbuf[i], &sc->arg_lens[i]);
}

/* Appends the string 's' (borrowed) of 'len' bytes as the next argument. */
static void
push_string(struct scriptcall *sc, const char *s, size_t len)
{
    sc->args[sc->nargs] = s;
    sc->arg_lens[sc->nargs++] = len;
}

int
scriptcall_encode(struct scriptcall *sc, const struct limiter_def *lim,
                  const char *key_base, uint64_t cost, const char *request_id,
                  uint64_t now_ms)
{
    size_t base_len;

    if (lim->nrules == 0 || lim->nrules > LIMIT_MAX_RULES) {
        return -1;
    }
    base_len = strlen(key_base);
    sc->nkeys = 0;
    sc->nargs = 0;
    for (size_t i = 0; i < lim->nrules; i++) {
        if (put_key(sc->keybuf[i], sizeof(sc->keybuf[i]), key_base, base_len,
                    i) != 0) {
            return -1;
        }
        sc->keys[sc->nkeys] = sc->keybuf[i];
        sc->key_lens[sc->nkeys++] = base_len + 2;
    }
    push_number(sc, now_ms);
    push_number(sc, cost);
    push_number(sc, lim->delay ? 1 : 0);
    push_number(sc, lim->max_delay_ms);
    /* The id is the one argument that is not a number: borrowed as is. */
    push_string(sc, request_id, strlen(request_id));
    for (size_t i = 0; i < lim->nrules; i++) {
        push_number(sc, lim->rules[i].limit);
        push_number(sc, lim->rules[i].window_ms);
        push_number(sc, lim->rules[i].burst);
    }
    return 0;
}

/* 0 <= v <= max. */
static bool
within(long long v, long long max)
{
    return v >= 0 && v <= max;
}

int
scriptcall_decode(const struct limiter_def *lim, const long long *ints,
                  size_t n, struct limit_result *out)
{
    /* Only delay mode holds a request: in deny mode the script ignores
     * max_delay_ms and admits only without a wait. */
    long long max_delay = 0;

    if (lim->delay) {
        max_delay = lim->max_delay_ms < SCRIPTCALL_COUNT_MAX
                        ? (long long)lim->max_delay_ms
                        : SCRIPTCALL_COUNT_MAX;
    }
    if (ints == NULL || n < SCRIPTCALL_REPLY_LEN ||
        (ints[0] != 0 && ints[0] != 1) ||
        !within(ints[1], SCRIPTCALL_COUNT_MAX) ||
        !within(ints[2], SCRIPTCALL_TIME_MAX) ||
        !within(ints[3], SCRIPTCALL_TIME_MAX) || !within(ints[4], max_delay) ||
        !within(ints[5], (long long)lim->nrules - 1)) {
        return -1;
    }
    out->allowed = ints[0] == 1;
    out->remaining = ints[1];
    out->retry_after_ms = (uint64_t)ints[2];
    out->reset_ms = (uint64_t)ints[3];
    out->delay_ms = (uint64_t)ints[4];
    out->rule = (unsigned)ints[5];
    return 0;
}

size_t
scriptcall_unpack(const char *s, size_t len, long long *ints, size_t max)
{
    char buf[SCRIPTCALL_PACKED_MAX + 1];
    const char *p;
    char *end;
    size_t n = 0;

    /* strtoll() reads up to a NUL: the reply is copied with one. */
    if (len == 0 || len > SCRIPTCALL_PACKED_MAX) {
        return 0;
    }
    memcpy(buf, s, len);
    buf[len] = '\0';
    for (p = buf;; p = end + 1) {
        /* strtoll() would also skip spaces and take a '+'. */
        if (n == max || !(*p == '-' || (*p >= '0' && *p <= '9'))) {
            return 0;
        }
        errno = 0;
        ints[n++] = strtoll(p, &end, 10);
        if (end == p || errno != 0) {
            return 0;
        }
        if (*end == '\0') {
            /* A NUL inside the reply is not its end. */
            return end == buf + len ? n : 0;
        }
        if (*end != ':') {
            return 0;
        }
    }
}

int
scriptcall_lease(struct scriptcall *sc, enum scriptcall_lease_op op,
                 uint64_t units)
{
    if (sc->nargs != SCRIPTCALL_FIXED_ARGS + 3 * sc->nkeys) {
        return -1;
    }
    if (op == SCRIPTCALL_LEASE_TAKE) {
        push_string(sc, "take", 4);
    } else {
        push_string(sc, "return", 6);
    }
    push_number(sc, units);
    return 0;
}

int
scriptcall_decode_lease(const struct limiter_def *lim, const long long *ints,
                        size_t n, struct limit_result *out, uint64_t *units)
{
    struct limit_result res;

    if (n < SCRIPTCALL_LEASE_REPLY_LEN ||
        scriptcall_decode(lim, ints, n, &res) != 0 ||
        !within(ints[6], SCRIPTCALL_COUNT_MAX) ||
        (res.allowed && ints[6] < 1)) {
        return -1;
    }
    *out = res;
    *units = (uint64_t)ints[6];
    return 0;
}
