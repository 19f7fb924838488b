/*
 * denycache.h - the over-limit cache: refusals Redis gave, remembered by
 * a worker so that further requests for the same key and cost are
 * refused without asking Redis again, until the refusal's retry_after
 * has run out. Pure: no I/O, no clock of its own; times are passed in.
 *
 * Exact by the limiter contract (limit.h): a denial consumes nothing,
 * and retry_after_ms is the earliest time a retry of the same cost can
 * pass. Other gateways can only take more units in the meantime, never
 * give any back, so until then Redis would refuse too. The cache counts
 * that time from when the call was sent, which is no later than when
 * Redis decided, less one millisecond for Redis's clock, which counts in
 * whole milliseconds: a local refusal ends no later than Redis's would.
 * Admissions are never cached.
 *
 * One cache per worker thread; not thread-safe. A fixed number of
 * entries: when a key's neighbourhood is full, the entry that expires
 * first gives way, so a flood of new keys costs memory never, and at
 * worst a Redis call that the cache could have saved.
 */
#ifndef SLUICE_DENYCACHE_H
#define SLUICE_DENYCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "limit.h"

struct denycache; /* opaque */

/* A cache of 'capacity' entries (rounded up to a power of two, >= 8).
 * Never fails: allocation failure aborts, as xmalloc does. */
struct denycache *denycache_new(size_t capacity);
void denycache_free(struct denycache *dc); /* NULL: no-op */

/* Forgets everything: the state in Redis may have been lost (a
 * reconnect, a failover), so the refusals may no longer hold. */
void denycache_clear(struct denycache *dc);

/*
 * Remembers that Redis refused 'cost' units for 'key' (borrowed, copied;
 * a key longer than the cache keeps is not remembered) with '*res'
 * (denied), for a call sent at 'sent_us' on a monotonic clock in
 * microseconds. A refusal whose retry_after is under 2 ms is not worth
 * remembering and is dropped.
 */
void denycache_put(struct denycache *dc, const char *key, uint64_t cost,
                   const struct limit_result *res, uint64_t sent_us);

/*
 * The same, but remembered for at most 'hold_ms' (>= 2) from 'sent_us',
 * however long the retry_after: for limiters whose units can come back
 * (leases, lease.h). The answers it gives still count down the refusal's
 * own retry_after and reset.
 */
void denycache_put_for(struct denycache *dc, const char *key, uint64_t cost,
                       const struct limit_result *res, uint64_t sent_us,
                       uint64_t hold_ms);

/*
 * True if a request for 'cost' units of 'key' at 'now_us' (same clock)
 * is known refused; then '*res' is the remembered refusal with
 * retry_after_ms and reset_ms counted down to 'now_us'. An entry whose
 * time has run out is dropped and false returned.
 */
bool denycache_get(struct denycache *dc, const char *key, uint64_t cost,
                   uint64_t now_us, struct limit_result *res);

/* Entries held now (expired ones included until they are met). */
size_t denycache_size(const struct denycache *dc);

#endif
