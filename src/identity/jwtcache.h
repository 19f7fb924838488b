/*
 * jwtcache.h - verified tokens remembered by a worker, so that a client
 * sending the same token again costs a SHA-256 and a lookup instead of a
 * signature check. Keyed by the SHA-256 of the token (OpenSSL); an entry
 * holds the token's claims until the token expires (exp plus the
 * leeway) or JWTCACHE_MAX_AGE_MS has passed, whichever is first. Only
 * valid tokens are remembered. Pure: no I/O, no clock of its own.
 *
 * One cache per worker thread; not thread-safe. A fixed number of
 * entries: when a token's neighbourhood is full, the entry that ends
 * first gives way. Entries belong to the verifier that checked them: a
 * lookup with another verifier (a reload, a rotated key) forgets them all.
 */
#ifndef SLUICE_JWTCACHE_H
#define SLUICE_JWTCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct claims;
struct jwtcheck;

/* The longest an entry lives, whatever the token's exp. */
#define JWTCACHE_MAX_AGE_MS (5 * 60 * 1000)

struct jwtcache; /* opaque */

/* A cache of 'capacity' entries (rounded up to a power of two, >= 8);
 * 0 makes a cache that remembers nothing (every token is verified). */
struct jwtcache *jwtcache_new(size_t capacity);
void jwtcache_free(struct jwtcache *jc); /* NULL: no-op */

/*
 * jwtcheck_verify() through the cache: the claims of 'token' ('len'
 * bytes) at wall-clock 'now_ms', a new reference the caller drops, or
 * NULL and why (static) in '*why'. '*hit' says whether the answer came
 * from the cache. 'v' is borrowed.
 */
struct claims *jwtcache_verify(struct jwtcache *jc, const struct jwtcheck *v,
                               const char *token, size_t len, int64_t now_ms,
                               bool *hit, const char **why);

/* Entries held now (expired ones included until they are met). */
size_t jwtcache_size(const struct jwtcache *jc);

#endif
