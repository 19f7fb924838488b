/*
 * scriptcall.h - the calling convention of the rate-limit scripts
 * (lua/README.md): a limiter's KEYS and ARGV out, the reply's integers in.
 * Pure: no I/O, no allocation. Depends on limit.h.
 */
#ifndef SLUICE_SCRIPTCALL_H
#define SLUICE_SCRIPTCALL_H

#include <stddef.h>
#include <stdint.h>

#include "limit.h"

/* ARGV before the per-rule triples: time, cost, mode, max_delay, id. */
#define SCRIPTCALL_FIXED_ARGS 5
/* A lease call (token_bucket, gcra) adds two: the operation, the units. */
#define SCRIPTCALL_LEASE_ARGS 2
#define SCRIPTCALL_MAX_ARGS                                                    \
    (SCRIPTCALL_FIXED_ARGS + 3 * LIMIT_MAX_RULES + SCRIPTCALL_LEASE_ARGS)
/* The longest key, NUL included: a key base and ":<rule>". */
#define SCRIPTCALL_KEY_MAX 520
/* The longest numeric argument, NUL included (2^64 - 1 has 20 digits). */
#define SCRIPTCALL_ARG_MAX 24
/* The integers of a reply: allowed, remaining, retry_after_ms, reset_ms,
 * delay_ms, rule. */
#define SCRIPTCALL_REPLY_LEN 6
/* A lease call's reply adds one: the units granted (take) or given back
 * (return). */
#define SCRIPTCALL_LEASE_REPLY_LEN 7

/* What a lease call asks of the script (lua/README.md, "Leases"). */
enum scriptcall_lease_op {
    SCRIPTCALL_LEASE_TAKE,   /* admit 'cost' and grant up to 'units' */
    SCRIPTCALL_LEASE_RETURN, /* give 'units' unused units back */
};

/*
 * The words of one script call, in caller-provided storage. 'keys' and
 * 'args' point into the struct itself, except args[4], which is the
 * request id passed to scriptcall_encode() (borrowed). So the struct must
 * not be copied, and both must outlive the use of the words. Each word
 * is NUL-terminated, and its length is kept beside it.
 */
struct scriptcall {
    const char *keys[LIMIT_MAX_RULES];     /* KEYS[1..nkeys] */
    size_t key_lens[LIMIT_MAX_RULES];      /* of each key */
    size_t nkeys;                          /* the limiter's nrules */
    const char *args[SCRIPTCALL_MAX_ARGS]; /* ARGV[1..nargs] */
    size_t arg_lens[SCRIPTCALL_MAX_ARGS];  /* of each arg */
    size_t nargs; /* 5 + 3 * nkeys, + 2 for a lease call */
    char keybuf[LIMIT_MAX_RULES][SCRIPTCALL_KEY_MAX];     /* the keys' text */
    char argbuf[SCRIPTCALL_MAX_ARGS][SCRIPTCALL_ARG_MAX]; /* numbers */
};

/*
 * Writes the key of rule 'rule' (0-based) of a limiter whose keys start
 * with 'key_base': "<key_base>:<rule>", into 'buf' of 'size' bytes.
 * Returns 0, or -1 if 'rule' >= LIMIT_MAX_RULES or the key does not fit
 * (then 'buf' holds no usable key).
 */
int scriptcall_key(char *buf, size_t size, const char *key_base, size_t rule);

/*
 * Fills '*sc' with the KEYS and ARGV of one decision of 'lim' for 'cost'
 * units: one key per rule (scriptcall_key()), then ARGV as lua/README.md
 * orders it. 'now_ms' is the time override: 0 in production (the script
 * reads Redis TIME); tests inject a time. 'request_id' (borrowed, unique
 * per request) becomes args[4]. Values are not validated: the script
 * refuses what it does not accept. Returns 0, or -1 if the limiter has
 * no rules or more than LIMIT_MAX_RULES, or a key does not fit
 * SCRIPTCALL_KEY_MAX; '*sc' is then unusable.
 */
int scriptcall_encode(struct scriptcall *sc, const struct limiter_def *lim,
                      const char *key_base, uint64_t cost,
                      const char *request_id, uint64_t now_ms);

/*
 * Turns the call encoded in '*sc' into a lease call: appends the
 * operation and 'units' (take: the most to grant, >= the cost; return:
 * the units given back). Returns 0, or -1 if '*sc' holds a lease call
 * already.
 */
int scriptcall_lease(struct scriptcall *sc, enum scriptcall_lease_op op,
                     uint64_t units);

/*
 * Reads the reply of a lease call of 'lim': the first six integers as
 * scriptcall_decode() does, the seventh into '*units' (granted by a take,
 * 0 when denied; given back by a return), which must be within 0..2^50.
 * Returns 0, or -1 for a malformed reply (what scriptcall_decode()
 * refuses, fewer than SCRIPTCALL_LEASE_REPLY_LEN integers, a seventh out
 * of range, or an allowed take that granted nothing); '*out' and
 * '*units' are then left alone.
 */
int scriptcall_decode_lease(const struct limiter_def *lim,
                            const long long *ints, size_t n,
                            struct limit_result *out, uint64_t *units);

/* The longest packed reply scriptcall_unpack() reads. */
#define SCRIPTCALL_PACKED_MAX 255

/*
 * Reads one call's reply from a batch (lua/README.md, "Batches"): the
 * 'len' bytes at 's' (borrowed) are integers in decimal joined by ':',
 * each an optional '-' and one or more digits, within the range of long
 * long. Writes them to 'ints' (room for 'max'). Returns how many (at
 * least one), or 0 for anything else: nothing, an empty field, any other
 * byte (a sign '+', a space, a NUL), a value out of range, or more than
 * 'max' integers, or more than SCRIPTCALL_PACKED_MAX bytes (eight
 * integers of 20 characters, the most a reply holds, take 167); 'ints'
 * may then be partly written.
 */
size_t scriptcall_unpack(const char *s, size_t len, long long *ints,
                         size_t max);

/* The largest count in a reply (lua/README.md): 2^50, the scripts' MAX. */
#define SCRIPTCALL_COUNT_MAX (1LL << 50)
/*
 * The largest retry_after_ms or reset_ms: a time in a reply may add two
 * spans of up to 2^50 ms each (sliding_window_counter's 2W - e; a
 * bucket's time to fill plus a delay-mode backlog).
 */
#define SCRIPTCALL_TIME_MAX (1LL << 51)

/*
 * Reads the reply of a call of 'lim' (borrowed: the limiter the call was
 * encoded for), the 'n' integers 'ints' (borrowed), into '*out'.
 * Integers past the sixth are ignored. Returns 0, or -1 for a malformed
 * reply, which no correct script sends (lua/README.md): fewer than
 * SCRIPTCALL_REPLY_LEN integers; 'allowed' neither 0 nor 1; a negative
 * integer; remaining or delay_ms above SCRIPTCALL_COUNT_MAX; retry_after_ms
 * or reset_ms above SCRIPTCALL_TIME_MAX; a delay_ms above 0 when 'lim' is
 * not in delay mode, or above its max_delay_ms; or a rule index of
 * 'lim->nrules' or more. '*out' is written only on success, so a caller
 * never holds a wait or a count that 'lim' could not have produced.
 */
int scriptcall_decode(const struct limiter_def *lim, const long long *ints,
                      size_t n, struct limit_result *out);

#endif
