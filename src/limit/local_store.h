/*
 * local_store.h - the state of `backend: local` limiters (and of the
 * fallback when Redis fails): one table per process, shared by every
 * worker, so that one gateway instance enforces one budget whichever
 * worker a connection lands on. Sharded, one mutex per shard; no I/O.
 * Entries expire as the algorithms' TTLs say; expired entries are
 * dropped when met and by local_store_sweep().
 */
#ifndef SLUICE_LOCAL_STORE_H
#define SLUICE_LOCAL_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "limit.h"

struct local_store; /* opaque */

/* 'nshards' is rounded up to a power of two (at least 1). */
struct local_store *local_store_new(unsigned nshards);
void local_store_free(struct local_store *st); /* NULL is a no-op */

/*
 * Decides for 'key' (the key ratekey_build() made; borrowed) under 'def'
 * at 'now_ms', exactly as the Lua script would (algo.h). Thread-safe.
 * Returns 0, or -1 if 'cost' is invalid for 'def'.
 */
int local_store_decide(struct local_store *st, const char *key,
                       const struct limiter_def *def, uint64_t cost,
                       uint64_t now_ms, struct limit_result *out);

/* Drops every entry expired at 'now_ms'; returns how many. */
size_t local_store_sweep(struct local_store *st, uint64_t now_ms);

/* Entries currently held (expired ones not yet dropped included). */
size_t local_store_size(struct local_store *st);

#endif
