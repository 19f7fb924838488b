/*
 * hash.h - FNV-1a, 64 bits: the hash of the gateway's in-memory tables
 * (metrics series, the local store, the over-limit cache, leases). Fast
 * on short keys and good enough for tables whose keys no client chooses
 * alone; not a defence against crafted collisions. Pure, header only.
 */
#ifndef SLUICE_HASH_H
#define SLUICE_HASH_H

#include <stddef.h>
#include <stdint.h>

/* The value to start from. */
#define HASH_FNV1A_INIT UINT64_C(14695981039346656037)

/* 'h' with one more byte. */
static inline uint64_t
hash_fnv1a_byte(uint64_t h, unsigned b)
{
    return (h ^ b) * UINT64_C(1099511628211);
}

/* 'h' with the 'len' bytes of 'p'. */
static inline uint64_t
hash_fnv1a(uint64_t h, const void *p, size_t len)
{
    const unsigned char *s = p;

    for (size_t i = 0; i < len; i++) {
        h = hash_fnv1a_byte(h, s[i]);
    }
    return h;
}

#endif
