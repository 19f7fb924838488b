#include "jwtcache.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "claims.h"
#include "jwtcheck.h"
#include "xmalloc.h"

/* Slots a token may occupy, from its home slot on. */
#define WINDOW 8

struct entry {
    struct claims *claims; /* a reference; NULL: the slot is free */
    int64_t until_ms;      /* valid while now < this */
    unsigned char md[32];  /* SHA-256 of the token */
};

struct jwtcache {
    struct entry *slots; /* NULL when the capacity is 0 */
    size_t mask;         /* slots - 1; slots is a power of two */
    size_t used;         /* slots holding claims */
    uint64_t verifier;   /* jwtcheck_id() of the entries' verifier */
    EVP_MD *sha256;      /* fetched once: EVP_Digest() would look the
                            algorithm up and make a context per token */
    EVP_MD_CTX *ctx;     /* reused for every token */
};

struct jwtcache *
jwtcache_new(size_t capacity)
{
    struct jwtcache *jc = xcalloc(1, sizeof(*jc));
    size_t n = WINDOW;

    if (capacity == 0) {
        return jc;
    }
    jc->sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
    jc->ctx = EVP_MD_CTX_new();
    if (jc->sha256 == NULL || jc->ctx == NULL) {
        fprintf(stderr, "sluice: no SHA-256 in OpenSSL\n");
        abort();
    }
    while (n < capacity) {
        n *= 2;
    }
    jc->slots = xcalloc(n, sizeof(jc->slots[0]));
    jc->mask = n - 1;
    return jc;
}

static void
drop(struct jwtcache *jc, struct entry *e)
{
    claims_unref(e->claims);
    e->claims = NULL;
    jc->used--;
}

static void
clear(struct jwtcache *jc)
{
    for (size_t i = 0; jc->slots != NULL && i <= jc->mask; i++) {
        if (jc->slots[i].claims != NULL) {
            drop(jc, &jc->slots[i]);
        }
    }
}

void
jwtcache_free(struct jwtcache *jc)
{
    if (jc == NULL) {
        return;
    }
    clear(jc);
    free(jc->slots);
    EVP_MD_CTX_free(jc->ctx);
    EVP_MD_free(jc->sha256);
    free(jc);
}

size_t
jwtcache_size(const struct jwtcache *jc)
{
    return jc->used;
}

static void
sha256(struct jwtcache *jc, const char *p, size_t n, unsigned char md[32])
{
    unsigned int len = 0;

    if (!EVP_DigestInit_ex2(jc->ctx, jc->sha256, NULL) ||
        !EVP_DigestUpdate(jc->ctx, p, n) ||
        !EVP_DigestFinal_ex(jc->ctx, md, &len) || len != 32) {
        fprintf(stderr, "sluice: SHA-256 failed\n");
        abort();
    }
}

static size_t
home(const unsigned char md[32])
{
    size_t h;

    memcpy(&h, md, sizeof(h));
    return h;
}

struct claims *
jwtcache_verify(struct jwtcache *jc, const struct jwtcheck *v,
                const char *token, size_t len, int64_t now_ms, bool *hit,
                const char **why)
{
    unsigned char md[32];
    struct claims *c;
    struct entry *victim = NULL;
    int64_t until = 0;
    size_t h;

    *hit = false;
    *why = NULL;
    if (jc->slots == NULL || len > JWTCHECK_MAX_TOKEN) {
        return jwtcheck_verify(v, token, len, now_ms, &until, why);
    }
    if (jc->verifier != jwtcheck_id(v)) {
        clear(jc);
        jc->verifier = jwtcheck_id(v);
    }
    sha256(jc, token, len, md);
    h = home(md);
    for (size_t i = 0; i < WINDOW; i++) {
        struct entry *e = &jc->slots[(h + i) & jc->mask];

        if (e->claims == NULL || memcmp(e->md, md, sizeof(md)) != 0) {
            continue;
        }
        if (now_ms < e->until_ms) {
            *hit = true;
            return claims_ref(e->claims);
        }
        drop(jc, e); /* expired: verify again, which will say why */
        break;
    }
    c = jwtcheck_verify(v, token, len, now_ms, &until, why);
    if (c == NULL) {
        return NULL;
    }
    if (until > now_ms && until - now_ms > JWTCACHE_MAX_AGE_MS) {
        until = now_ms + JWTCACHE_MAX_AGE_MS;
    }
    /* A free slot, else the one that ends first. */
    for (size_t i = 0; i < WINDOW; i++) {
        struct entry *e = &jc->slots[(h + i) & jc->mask];

        if (e->claims == NULL) {
            victim = e;
            break;
        }
        if (victim == NULL || e->until_ms < victim->until_ms) {
            victim = e;
        }
    }
    if (victim->claims != NULL) {
        drop(jc, victim);
    }
    victim->claims = claims_ref(c);
    victim->until_ms = until;
    memcpy(victim->md, md, sizeof(md));
    jc->used++;
    return c;
}
