/*
 * lease.h - a worker's leases on hot keys: units of a token_bucket or
 * gcra limiter with `lease: N` that the worker took from Redis in one
 * call (lua/README.md, "Leases") and now admits locally, without a
 * Redis call, until they run out or their time is up; then the unused
 * units go back to Redis. Pure: no I/O, no clock of its own (times are
 * passed in, monotonic microseconds). Depends on limit.h.
 *
 * The rules a caller keeps (ratelimit.c):
 * - One take in flight per key and worker (lease.taking); requests that
 *   come meanwhile queue behind it, so that a worker never holds more
 *   than N units of a key: at most N x workers x instances in all.
 * - A lease is spent only before its deadline, at most
 *   lease_lifetime_ms() after the take was sent; after it, its unused
 *   units are given back (lease_table_expire()), and so are they at a
 *   reload, at drain (lease_table_release()) and when the entry is
 *   evicted (lease_table_add()). A return that fails loses its units:
 *   they count as used, so nothing is ever admitted twice.
 * - The size of the next take (lease_want()) starts at the cost (a cold
 *   key is decided exactly as without leases), doubles each time a lease
 *   is spent before its deadline and the key is asked for again, halves
 *   when a lease ends with units left, falls back to the cost when a
 *   take is not answered (lease_take_failed()), and never exceeds N or
 *   the smallest burst; Redis shrinks the grant itself as the bucket
 *   empties.
 *
 * One table per worker thread; not thread-safe. A fixed number of
 * entries: a key whose neighbourhood is full evicts the entry seen least
 * recently that has no take in flight, whose units the caller returns.
 */
#ifndef SLUICE_LEASE_H
#define SLUICE_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "limit.h"
#include "ratekey.h"

/* The longest a lease lives: min(this, the shortest window). */
#define LEASE_LIFETIME_MAX_MS 1000

/* One key's lease in one worker. */
struct lease {
    uint64_t hash;           /* of 'key'; 0: the slot is free */
    char key[RATEKEY_MAX];   /* the rate-limit key, as ratekey builds it */
    struct limiter_def def;  /* the limiter at the last take: its
                                algorithm, rules and lease, for the
                                return; 'name' and 'policy' are
                                NULL */
    uint64_t units;          /* unused units held, to spend or return */
    uint64_t deadline_us;    /* spend only before this */
    uint64_t want;           /* the units the next take asks for */
    uint64_t seen_us;        /* the last request for the key */
    struct limit_result res; /* Redis's answer to the last take */
    bool taking;             /* a take is in flight: never evicted */
    void *queue_head;        /* the caller's: requests waiting for the
                                take, or NULL; borrowed */
    void *queue_tail;        /* the last of them; borrowed */
};

struct lease_table; /* opaque */

/* A table of 'capacity' entries (rounded up to a power of two, >= 8).
 * Never fails: allocation failure aborts, as xmalloc does. */
struct lease_table *lease_table_new(size_t capacity);
/* Leases still held are dropped: release them first. NULL: no-op. */
void lease_table_free(struct lease_table *t);

/* The lease of 'key', or NULL. Valid until the next lease_table_add()
 * or lease_table_expire() call, and as long as it is 'taking'. */
struct lease *lease_table_find(struct lease_table *t, const char *key);

/*
 * A new entry for 'key' (which has none; borrowed, copied) at 'now_us',
 * with 'want' 1 and nothing held. When the key's neighbourhood is full,
 * the entry seen least recently without a take in flight gives way: it
 * is copied to '*evicted' and '*did_evict' set, so that the caller can
 * return its units. NULL (and nothing evicted) when every neighbour has
 * a take in flight, or the key is longer than RATEKEY_MAX - 1.
 */
struct lease *lease_table_add(struct lease_table *t, const char *key,
                              uint64_t now_us, struct lease *evicted,
                              bool *did_evict);

/*
 * Admits 'cost' units from 'l' at 'now_us' if it holds that many and
 * its time is not up: then fills '*res' (allowed; remaining: what Redis
 * had left at the take plus what the lease still holds; reset and rule
 * as Redis answered the take; no retry, no delay) and returns true.
 */
bool lease_spend(struct lease *l, uint64_t cost, uint64_t now_us,
                 struct limit_result *res);

/*
 * The units a take for a request of 'cost' should ask for, with 'queued'
 * more units of requests waiting: the lease's 'want', or what is queued
 * with the cost if more, never less than 'cost', never more than the
 * limiter's lease nor its smallest burst (but at least 'cost').
 */
uint64_t lease_want(const struct lease *l, const struct limiter_def *def,
                    uint64_t cost, uint64_t queued);

/*
 * A take for 'def' goes out at 'now_us': 'l' becomes 'taking', its
 * 'want' grows if the last lease was spent before its deadline, and
 * 'def' is copied (without its name).
 */
void lease_take_started(struct lease *l, const struct limiter_def *def,
                        uint64_t now_us);

/*
 * The take sent at 'sent_us' was answered: Redis admitted the request's
 * 'cost' and granted 'granted' >= cost units ('res', allowed). The rest
 * is held until sent_us + lease_lifetime_ms(). Clears 'taking'.
 */
void lease_take_granted(struct lease *l, uint64_t cost, uint64_t granted,
                        const struct limit_result *res, uint64_t sent_us);

/*
 * The take in flight was not answered (it timed out, Redis erred or was
 * down). Redis may still grant a timed-out take, and what it asked for
 * counts as used; so the next take of the key asks for the request's
 * cost again, as a new key's does, and grows from there only once takes
 * are answered. A Redis that stalls then costs a key one lease per
 * worker, and one request's cost per take after it. Clears 'taking'.
 */
void lease_take_failed(struct lease *l);

/* How long a lease of 'def' may be spent: min(1 s, the shortest window). */
uint64_t lease_lifetime_ms(const struct limiter_def *def);

/* Called for each lease whose units are to be given back; the entry's
 * units are set to 0 after the call. */
typedef void lease_return_cb(const struct lease *l, void *arg);

/*
 * Ends the leases whose time is up at 'now_us': 'cb' gets each that
 * holds units. Forgets entries idle for 'idle_us' with nothing held and
 * no take in flight.
 */
void lease_table_expire(struct lease_table *t, uint64_t now_us,
                        uint64_t idle_us, lease_return_cb *cb, void *arg);

/* Ends every lease now (reload, drain): 'cb' gets each that holds units. */
void lease_table_release(struct lease_table *t, lease_return_cb *cb, void *arg);

/* Units held in all leases of the table. */
uint64_t lease_table_held(const struct lease_table *t);

#endif
