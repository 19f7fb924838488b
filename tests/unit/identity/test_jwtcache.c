#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../support/jwtsign.h"
#include "claims.h"
#include "jwtcache.h"
#include "jwtcheck.h"

#define NOW (1767225600LL * 1000)

static struct jwtcheck *
hs256(void)
{
    struct jwtcheck_conf c;
    char why[128];
    struct jwtcheck *v;

    memset(&c, 0, sizeof(c));
    c.algorithms = JWTCHECK_HS256;
    v = jwtcheck_new(&c, (const unsigned char *)JT_SECRET, strlen(JT_SECRET),
                     why, sizeof(why));
    cr_assert_not_null(v, "%s", why);
    return v;
}

/* Verifies 'tok' through the cache: true if valid; '*hit' as it says. */
static bool
check(struct jwtcache *jc, const struct jwtcheck *v, const char *tok,
      int64_t now, bool *hit, const char **why)
{
    struct claims *c = jwtcache_verify(jc, v, tok, strlen(tok), now, hit, why);
    bool valid = c != NULL;

    claims_unref(c);
    return valid;
}

Test(jwtcache, the_second_sight_of_a_valid_token_is_a_hit)
{
    struct jwtcache *jc = jwtcache_new(64);
    struct jwtcheck *v = hs256();
    char *t =
        jt_sign_str("HS256", JT_SECRET, "{\"sub\":\"a\",\"exp\":1767229200}");
    const char *why;
    bool hit;

    cr_assert(check(jc, v, t, NOW, &hit, &why));
    cr_assert_not(hit);
    cr_assert(check(jc, v, t, NOW + 1000, &hit, &why));
    cr_assert(hit);
    cr_assert_eq(jwtcache_size(jc), 1);
    free(t);
    jwtcheck_free(v);
    jwtcache_free(jc);
}

Test(jwtcache, an_entry_ends_when_its_token_expires)
{
    struct jwtcache *jc = jwtcache_new(64);
    struct jwtcheck *v = hs256();
    char *t = jt_sign_str("HS256", JT_SECRET,
                          "{\"sub\":\"a\",\"exp\":1767225660}"); /* +60 s */
    const char *why;
    bool hit;

    cr_assert(check(jc, v, t, NOW, &hit, &why));
    cr_assert(check(jc, v, t, NOW + 59999, &hit, &why));
    cr_assert(hit);
    cr_assert_not(check(jc, v, t, NOW + 60000, &hit, &why));
    cr_assert_not(hit);
    cr_assert_str_eq(why, "expired");
    cr_assert_eq(jwtcache_size(jc), 0);
    free(t);
    jwtcheck_free(v);
    jwtcache_free(jc);
}

Test(jwtcache, an_entry_lives_at_most_the_max_age)
{
    struct jwtcache *jc = jwtcache_new(64);
    struct jwtcheck *v = hs256();
    char *t = jt_sign_str("HS256", JT_SECRET, "{\"sub\":\"a\"}"); /* no exp */
    const char *why;
    bool hit;

    cr_assert(check(jc, v, t, NOW, &hit, &why));
    cr_assert(check(jc, v, t, NOW + JWTCACHE_MAX_AGE_MS - 1, &hit, &why));
    cr_assert(hit);
    cr_assert(check(jc, v, t, NOW + JWTCACHE_MAX_AGE_MS, &hit, &why));
    cr_assert_not(hit, "verified again after the max age");
    free(t);
    jwtcheck_free(v);
    jwtcache_free(jc);
}

Test(jwtcache, invalid_tokens_are_never_remembered)
{
    struct jwtcache *jc = jwtcache_new(64);
    struct jwtcheck *v = hs256();
    char *t = jt_sign_str("HS256", "0123456789abcdef0123456789abcdeX",
                          "{\"sub\":\"a\"}");
    const char *why;
    bool hit;

    cr_assert_not(check(jc, v, t, NOW, &hit, &why));
    cr_assert_not(check(jc, v, t, NOW, &hit, &why));
    cr_assert_not(hit);
    cr_assert_eq(jwtcache_size(jc), 0);
    free(t);
    jwtcheck_free(v);
    jwtcache_free(jc);
}

/* A reload builds a new verifier (a rotated key): nothing of the old
 * one's is believed, even for the same secret. */
Test(jwtcache, another_verifier_forgets_every_entry)
{
    struct jwtcache *jc = jwtcache_new(64);
    struct jwtcheck *v1 = hs256();
    struct jwtcheck *v2 = hs256();
    char *t = jt_sign_str("HS256", JT_SECRET, "{\"sub\":\"a\"}");
    const char *why;
    bool hit;

    cr_assert(check(jc, v1, t, NOW, &hit, &why));
    cr_assert(check(jc, v2, t, NOW, &hit, &why));
    cr_assert_not(hit);
    cr_assert(check(jc, v2, t, NOW, &hit, &why));
    cr_assert(hit);
    free(t);
    jwtcheck_free(v1);
    jwtcheck_free(v2);
    jwtcache_free(jc);
}

Test(jwtcache, size_stays_bounded_by_the_capacity)
{
    struct jwtcache *jc = jwtcache_new(8);
    struct jwtcheck *v = hs256();
    const char *why;
    bool hit;

    for (int i = 0; i < 100; i++) {
        char claims[64];
        char *t;

        snprintf(claims, sizeof(claims), "{\"sub\":\"u%d\"}", i);
        t = jt_sign_str("HS256", JT_SECRET, claims);
        cr_assert(check(jc, v, t, NOW, &hit, &why));
        cr_assert_leq(jwtcache_size(jc), 8);
        free(t);
    }
    jwtcheck_free(v);
    jwtcache_free(jc);
}

Test(jwtcache, capacity_zero_verifies_every_time)
{
    struct jwtcache *jc = jwtcache_new(0);
    struct jwtcheck *v = hs256();
    char *t = jt_sign_str("HS256", JT_SECRET, "{\"sub\":\"a\"}");
    const char *why;
    bool hit;

    cr_assert(check(jc, v, t, NOW, &hit, &why));
    cr_assert(check(jc, v, t, NOW, &hit, &why));
    cr_assert_not(hit);
    free(t);
    jwtcheck_free(v);
    jwtcache_free(jc);
}
