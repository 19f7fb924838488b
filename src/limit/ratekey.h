/*
 * ratekey.h - which tier of a RequestRateLimiter applies to a caller, and
 * the Redis key of its bucket:
 *     <prefix><limiter>:<tag>:{<scope>:<kind>:<value>}
 * with ":<rule index>" appended per rule, so every key of one decision
 * shares the hash tag (one Redis Cluster slot). Values are escaped so that
 * no input can break out of the tag, and hashed (SHA-256, truncated) when
 * long. Pure: no I/O.
 */
#ifndef SLUICE_RATEKEY_H
#define SLUICE_RATEKEY_H

#include <stdbool.h>
#include <stddef.h>

#include "limit.h"

struct claims;
struct headers;
struct netaddr;

/* The longest key ratekey_build() writes, NUL included. */
#define RATEKEY_MAX 512
/* Values longer than this (after escaping) are replaced by a hash. */
#define RATEKEY_MAX_VALUE 64

/* What is known of the caller. All borrowed. */
struct caller {
    const struct netaddr *client;  /* resolved client address */
    const char *user;              /* user id, or NULL if not believed */
    const char *role;              /* role, or NULL if not believed */
    const struct claims *claims;   /* the verified token's claims, or
                                      NULL (identity.jwt) */
    const struct headers *headers; /* request headers */
    const char *query;             /* raw query string, or NULL */
    unsigned ipv6_prefix;          /* identity.ipv6_prefix */
};

/*
 * The first tier of 'rl' whose 'when' holds for 'who' (its role, and each
 * of its claims as claims_get_string() reads them) and whose key resolves
 * to non-empty values; NULL if none applies.
 */
const struct tier *ratekey_tier(const struct rate_limit_conf *rl,
                                const struct caller *who);

/*
 * True when a tier of 'rl' that limits and whose 'when' holds for 'who'
 * would have applied but for a key part that 'who' named more than once
 * (a header, query parameter or cookie sent twice), which names no one:
 * every other part resolves. For a request that no tier applies
 * to: it is not one that names no key, and empty_key: allow must not let
 * it pass unlimited, since the upstream may read either copy.
 */
bool ratekey_ambiguous(const struct rate_limit_conf *rl,
                       const struct caller *who);

/*
 * Writes the key of 'tier' (which must have a limiter) for 'who' into
 * 'buf' (RATEKEY_MAX bytes): "<prefix><limiter>:<tag>:{<scope>:<kind>:
 * <value>}" where kind is the key's text and value the parts' values
 * joined with '+'. Returns false if a part resolves to nothing, or if the
 * key would not fit (config_load() refuses a config where it could not).
 *   ip      the address; IPv6 masked to the prefix, as "2001:db8::/64"
 *   user    who->user; role: who->role
 *   header:NAME / query:NAME / cookie:NAME   the first such value
 *   claim:NAME   the claim, when it is a string or an array whose first
 *                element is one (claims_get_string())
 *   route   "-" (one bucket for the scope)
 * Escaping: bytes outside [A-Za-z0-9._~@-] become %XX; an escaped value
 * longer than RATEKEY_MAX_VALUE becomes "#" + 32 hex digits of its
 * SHA-256.
 */
bool ratekey_build(const struct tier *tier, const struct caller *who,
                   const char *prefix, const char *scope, char *buf);

#endif
