/*
 * jwtcheck: tokens signed here with libjwt and keys made here with
 * OpenSSL (tests/support/jwtsign.h); each case is one way a token can be
 * valid or wrong.
 */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "../../support/jwtsign.h"
#include "claims.h"
#include "headers.h"
#include "jwtcheck.h"

/* 2026-01-01T00:00:00Z, in ms: the tests' "now". */
#define NOW_S 1767225600LL
#define NOW (NOW_S * 1000)

static struct jt_pair rsa, rsa2, ec, ec384;

/* RSA key generation takes a while: once per process. */
static void
keys(void)
{
    if (rsa.pub == NULL) {
        rsa = jt_keygen("RSA");
        rsa2 = jt_keygen("RSA");
        ec = jt_keygen("P-256");
        ec384 = jt_keygen("P-384");
    }
}

static struct jwtcheck_conf
conf_of(unsigned algs)
{
    struct jwtcheck_conf c;

    memset(&c, 0, sizeof(c));
    c.algorithms = algs;
    c.user_claim = "sub";
    c.role_claim = "role";
    c.header = "Authorization";
    return c;
}

static struct jwtcheck *
verifier(unsigned algs, const char *key, const char *issuer,
         const char *audience, uint64_t leeway_ms)
{
    struct jwtcheck_conf c = conf_of(algs);
    struct jwtcheck *v;
    char why[256] = "";

    c.issuer = (char *)issuer;
    c.audience = (char *)audience;
    c.leeway_ms = leeway_ms;
    v = jwtcheck_new(&c, (const unsigned char *)key, strlen(key), why,
                     sizeof(why));
    cr_assert_not_null(v, "verifier refused: %s", why);
    return v;
}

/* The reason 'token' is refused; NULL if it is accepted. */
static const char *
refusal(const struct jwtcheck *v, const char *token)
{
    const char *why = NULL;
    int64_t until;
    struct claims *c =
        jwtcheck_verify(v, token, strlen(token), NOW, &until, &why);

    if (c != NULL) {
        cr_assert_null(why);
        claims_unref(c);
        return NULL;
    }
    cr_assert_not_null(why);
    return why;
}

static void
assert_refused(const struct jwtcheck *v, const char *token, const char *want)
{
    const char *why = refusal(v, token);

    cr_assert_not_null(why, "accepted: %s", token);
    cr_assert_str_eq(why, want);
}

#define VALID_CLAIMS "{\"sub\":\"alice\",\"role\":\"admin\",\"exp\":1767229200}"

Test(jwtcheck, valid_hs256_token_yields_its_claims)
{
    struct jwtcheck *v = verifier(JWTCHECK_HS256, JT_SECRET, NULL, NULL, 0);
    char *t = jt_sign_str("HS256", JT_SECRET, VALID_CLAIMS);
    const char *why = NULL;
    int64_t until = 0;
    struct claims *c = jwtcheck_verify(v, t, strlen(t), NOW, &until, &why);

    cr_assert_not_null(c, "refused: %s", why);
    cr_assert_str_eq(claims_get_string(c, "sub"), "alice");
    cr_assert_str_eq(claims_get_string(c, "role"), "admin");
    cr_assert_eq(until, 1767229200LL * 1000);
    claims_unref(c);
    free(t);
    jwtcheck_free(v);
}

Test(jwtcheck, valid_rs256_and_es256_tokens_are_accepted)
{
    struct jwtcheck *rs, *es;
    char *a, *b;

    keys();
    rs = verifier(JWTCHECK_RS256, rsa.pub, NULL, NULL, 0);
    es = verifier(JWTCHECK_ES256, ec.pub, NULL, NULL, 0);
    a = jt_sign_str("RS256", rsa.priv, VALID_CLAIMS);
    b = jt_sign_str("ES256", ec.priv, VALID_CLAIMS);
    cr_assert_null(refusal(rs, a));
    cr_assert_null(refusal(es, b));
    /* And not across: each key verifies its own kind only. */
    cr_assert_not_null(refusal(rs, b));
    cr_assert_not_null(refusal(es, a));
    free(a);
    free(b);
    jwtcheck_free(rs);
    jwtcheck_free(es);
}

Test(jwtcheck, expired_token_is_refused_unless_within_the_leeway)
{
    struct jwtcheck *strict =
        verifier(JWTCHECK_HS256, JT_SECRET, NULL, NULL, 0);
    struct jwtcheck *lenient =
        verifier(JWTCHECK_HS256, JT_SECRET, NULL, NULL, 30000);
    char *t = jt_sign_str("HS256", JT_SECRET,
                          "{\"sub\":\"a\",\"exp\":1767225590}"); /* -10 s */
    char *at = jt_sign_str("HS256", JT_SECRET,
                           "{\"sub\":\"a\",\"exp\":1767225600}"); /* now */

    assert_refused(strict, t, "expired");
    assert_refused(strict, at, "expired");
    cr_assert_null(refusal(lenient, t));
    free(t);
    free(at);
    jwtcheck_free(strict);
    jwtcheck_free(lenient);
}

Test(jwtcheck, token_not_yet_valid_is_refused_unless_within_the_leeway)
{
    struct jwtcheck *strict =
        verifier(JWTCHECK_HS256, JT_SECRET, NULL, NULL, 0);
    struct jwtcheck *lenient =
        verifier(JWTCHECK_HS256, JT_SECRET, NULL, NULL, 30000);
    char *t = jt_sign_str("HS256", JT_SECRET,
                          "{\"sub\":\"a\",\"nbf\":1767225610}"); /* +10 s */

    assert_refused(strict, t, "not yet valid");
    cr_assert_null(refusal(lenient, t));
    free(t);
    jwtcheck_free(strict);
    jwtcheck_free(lenient);
}

Test(jwtcheck, issuer_is_checked_when_configured)
{
    struct jwtcheck *v =
        verifier(JWTCHECK_HS256, JT_SECRET, "https://auth.example", NULL, 0);
    struct jwtcheck *any = verifier(JWTCHECK_HS256, JT_SECRET, NULL, NULL, 0);
    char *good = jt_sign_str(
        "HS256", JT_SECRET, "{\"sub\":\"a\",\"iss\":\"https://auth.example\"}");
    char *bad = jt_sign_str("HS256", JT_SECRET,
                            "{\"sub\":\"a\",\"iss\":\"https://evil.example\"}");
    char *none = jt_sign_str("HS256", JT_SECRET, "{\"sub\":\"a\"}");

    cr_assert_null(refusal(v, good));
    assert_refused(v, bad, "wrong issuer");
    assert_refused(v, none, "wrong issuer");
    cr_assert_null(refusal(any, bad));
    free(good);
    free(bad);
    free(none);
    jwtcheck_free(v);
    jwtcheck_free(any);
}

Test(jwtcheck, audience_is_checked_as_a_string_or_within_an_array)
{
    struct jwtcheck *v = verifier(JWTCHECK_HS256, JT_SECRET, NULL, "api", 0);
    char *one = jt_sign_str("HS256", JT_SECRET, "{\"aud\":\"api\"}");
    char *many = jt_sign_str("HS256", JT_SECRET, "{\"aud\":[\"web\",\"api\"]}");
    char *other = jt_sign_str("HS256", JT_SECRET, "{\"aud\":\"web\"}");
    char *prefix = jt_sign_str("HS256", JT_SECRET, "{\"aud\":\"api2\"}");
    char *none = jt_sign_str("HS256", JT_SECRET, "{\"sub\":\"a\"}");

    cr_assert_null(refusal(v, one));
    cr_assert_null(refusal(v, many));
    assert_refused(v, other, "wrong audience");
    assert_refused(v, prefix, "wrong audience");
    assert_refused(v, none, "wrong audience");
    free(one);
    free(many);
    free(other);
    free(prefix);
    free(none);
    jwtcheck_free(v);
}

Test(jwtcheck, bad_signatures_are_refused)
{
    struct jwtcheck *rs, *hs;
    char *other_key, *tampered, *good, *sig, *forged;

    keys();
    rs = verifier(JWTCHECK_RS256, rsa.pub, NULL, NULL, 0);
    hs = verifier(JWTCHECK_HS256, JT_SECRET, NULL, NULL, 0);
    other_key = jt_sign_str("RS256", rsa2.priv, VALID_CLAIMS);
    assert_refused(rs, other_key, "malformed token or bad signature");
    /* A valid signature over other claims. */
    good = jt_sign_str("HS256", JT_SECRET, VALID_CLAIMS);
    sig = jt_signature(good);
    tampered = jt_forge("{\"alg\":\"HS256\",\"typ\":\"JWT\"}",
                        "{\"sub\":\"mallory\",\"role\":\"admin\"}", sig);
    assert_refused(hs, tampered, "malformed token or bad signature");
    free(sig);
    /* A wrong secret. */
    forged =
        jt_sign_str("HS256", "0123456789abcdef0123456789abcdeX", VALID_CLAIMS);
    assert_refused(hs, forged, "malformed token or bad signature");
    cr_assert_null(refusal(hs, good));
    free(other_key);
    free(tampered);
    free(good);
    free(forged);
    jwtcheck_free(rs);
    jwtcheck_free(hs);
}

Test(jwtcheck, alg_none_is_refused_with_or_without_a_signature)
{
    struct jwtcheck *hs = verifier(JWTCHECK_HS256, JT_SECRET, NULL, NULL, 0);
    char *unsigned_tok = jt_sign_str("none", NULL, VALID_CLAIMS);
    char *with_sig = jt_forge("{\"alg\":\"none\"}", VALID_CLAIMS, "c2ln");
    char *lower = jt_forge("{\"alg\":\"None\"}", VALID_CLAIMS, "c2ln");

    /* libjwt writes "header.payload." with an empty signature. */
    cr_assert_not_null(strstr(unsigned_tok, "."));
    cr_assert_not_null(refusal(hs, unsigned_tok));
    cr_assert_not_null(refusal(hs, with_sig));
    cr_assert_not_null(refusal(hs, lower));
    free(unsigned_tok);
    free(with_sig);
    free(lower);
    jwtcheck_free(hs);
}

/*
 * The classic confusion: the RSA public key is public, so an attacker can
 * HMAC a token with its PEM text as the secret. libjwt would check that
 * HMAC with the same PEM bytes and accept it.
 */
Test(jwtcheck, hs256_token_keyed_with_the_rsa_public_key_is_refused)
{
    struct jwtcheck *rs;
    char *t;

    keys();
    rs = verifier(JWTCHECK_RS256, rsa.pub, NULL, NULL, 0);
    t = jt_sign_str("HS256", rsa.pub, VALID_CLAIMS);
    assert_refused(rs, t, "algorithm not accepted");
    free(t);
    jwtcheck_free(rs);
}

Test(jwtcheck, algorithm_outside_the_configured_set_is_refused)
{
    struct jwtcheck *rs;
    char *t;

    keys();
    rs = verifier(JWTCHECK_RS256, rsa.pub, NULL, NULL, 0);
    /* The right key, another hash. */
    t = jt_sign_str("RS512", rsa.priv, VALID_CLAIMS);
    assert_refused(rs, t, "algorithm not accepted");
    free(t);
    jwtcheck_free(rs);
}

/*
 * An algorithm's name is case-sensitive (RFC 7515 4.1.1). libjwt reads
 * it without case, so a token naming "hs256", signed as HS256, passed
 * where a verifier that names its algorithms (PyJWT's, jose's) refuses it.
 */
Test(jwtcheck, an_algorithm_named_in_another_case_is_refused)
{
    static const char *const headers[] = {
        "{\"alg\":\"hs256\",\"typ\":\"JWT\"}",
        "{\"alg\":\"Hs256\",\"typ\":\"JWT\"}",
        "{\"alg\":\"HS256 \",\"typ\":\"JWT\"}",
    };
    struct jwtcheck *hs = verifier(JWTCHECK_HS256, JT_SECRET, NULL, NULL, 0);
    char *good = jt_forge_hs256("{\"alg\":\"HS256\",\"typ\":\"JWT\"}",
                                VALID_CLAIMS, JT_SECRET);

    /* The same forge, as the spec writes the name: accepted. */
    cr_assert_null(refusal(hs, good), "%s", refusal(hs, good));
    for (size_t i = 0; i < sizeof(headers) / sizeof(headers[0]); i++) {
        char *t = jt_forge_hs256(headers[i], VALID_CLAIMS, JT_SECRET);
        const char *why = refusal(hs, t);

        cr_assert_not_null(why, "%s accepted", headers[i]);
        free(t);
    }
    free(good);
    jwtcheck_free(hs);
}

Test(jwtcheck, truncated_oversized_and_malformed_tokens_are_refused)
{
    struct jwtcheck *hs = verifier(JWTCHECK_HS256, JT_SECRET, NULL, NULL, 0);
    char *good = jt_sign_str("HS256", JT_SECRET, VALID_CLAIMS);
    char *big_claims = malloc(JWTCHECK_MAX_TOKEN + 64);
    char *big;

    /* Cut inside the signature, and before it. */
    good[strlen(good) - 5] = '\0';
    assert_refused(hs, good, "malformed token or bad signature");
    *strrchr(good, '.') = '\0';
    assert_refused(hs, good, "malformed token");
    assert_refused(hs, "", "malformed token");
    assert_refused(hs, "a.b", "malformed token");
    assert_refused(hs, "a..c", "malformed token");
    assert_refused(hs, "a.b.c.d", "malformed token");
    assert_refused(hs, "eyJ=.eyJ.sig", "malformed token");
    assert_refused(hs, "a b.c.d", "malformed token");
    /* Signed and otherwise valid, but longer than the limit. */
    snprintf(big_claims, JWTCHECK_MAX_TOKEN + 64, "{\"sub\":\"%0*d\"}",
             JWTCHECK_MAX_TOKEN, 0);
    big = jt_sign_str("HS256", JT_SECRET, big_claims);
    cr_assert_gt(strlen(big), JWTCHECK_MAX_TOKEN);
    assert_refused(hs, big, "token too long");
    free(big_claims);
    free(big);
    free(good);
    jwtcheck_free(hs);
}

Test(jwtcheck, registered_claims_of_the_wrong_type_are_refused)
{
    static const struct {
        const char *claims;
        const char *why;
    } cases[] = {
        {"{\"exp\":\"1767229200\"}", "claim exp is not a number"},
        {"{\"nbf\":true}", "claim nbf is not a number"},
        {"{\"iat\":[1]}", "claim iat is not a number"},
        {"{\"sub\":42}", "claim sub is not a string"},
        {"{\"iss\":{\"a\":1}}", "claim iss is not a string"},
        {"{\"aud\":7}", "claim aud is not a string or an array of strings"},
        {"{\"aud\":[\"api\",7]}",
         "claim aud is not a string or an array of strings"},
    };
    struct jwtcheck *hs = verifier(JWTCHECK_HS256, JT_SECRET, NULL, NULL, 0);

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *t = jt_sign_str("HS256", JT_SECRET, cases[i].claims);

        assert_refused(hs, t, cases[i].why);
        free(t);
    }
    jwtcheck_free(hs);
}

Test(jwtcheck, a_crit_header_is_refused)
{
    struct jwtcheck *hs = verifier(JWTCHECK_HS256, JT_SECRET, NULL, NULL, 0);
    jwt_t *jwt = NULL;
    char *t;

    cr_assert_eq(jwt_new(&jwt), 0);
    jwt_set_alg(jwt, JWT_ALG_HS256, (const unsigned char *)JT_SECRET,
                strlen(JT_SECRET));
    jwt_add_grant(jwt, "sub", "a");
    jwt_add_headers_json(jwt, "{\"crit\":[\"exp\"]}");
    t = jwt_encode_str(jwt);
    cr_assert_not_null(t);
    assert_refused(hs, t, "crit header not understood");
    free(t);
    jwt_free(jwt);
    jwtcheck_free(hs);
}

/*
 * libjwt 1.10's jwt_decode() refuses a typ other than JWT (any case), so
 * an RFC 9068 access token (at+jwt) gives no identity (README,
 * identity.jwt). Pinned so that a library that starts accepting them is
 * noticed, and the README changed with it.
 */
Test(jwtcheck, a_typ_other_than_jwt_is_refused_by_the_library)
{
    struct jwtcheck *hs = verifier(JWTCHECK_HS256, JT_SECRET, NULL, NULL, 0);
    static const char *const refused[] = {
        "{\"alg\":\"HS256\",\"typ\":\"at+jwt\"}",
        "{\"alg\":\"HS256\",\"typ\":\"application/at+jwt\"}",
        "{\"alg\":\"HS256\",\"typ\":\"JOSE\"}",
    };
    static const char *const accepted[] = {
        "{\"alg\":\"HS256\",\"typ\":\"JWT\"}",
        "{\"alg\":\"HS256\",\"typ\":\"jwt\"}",
        "{\"alg\":\"HS256\"}",
    };
    char *t;

    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        t = jt_forge_hs256(refused[i], VALID_CLAIMS, JT_SECRET);
        assert_refused(hs, t, "malformed token or bad signature");
        free(t);
    }
    /* The same claims signed the same way, with typ JWT or none, are
     * valid: the refusals above are the typ's. */
    for (size_t i = 0; i < sizeof(accepted) / sizeof(accepted[0]); i++) {
        t = jt_forge_hs256(accepted[i], VALID_CLAIMS, JT_SECRET);
        cr_assert_null(refusal(hs, t), "%s: %s", accepted[i], refusal(hs, t));
        free(t);
    }
    jwtcheck_free(hs);
}

static const char *
new_refusal(unsigned algs, const char *key)
{
    static char why[256];
    struct jwtcheck_conf c = conf_of(algs);
    struct jwtcheck *v = jwtcheck_new(&c, (const unsigned char *)key,
                                      strlen(key), why, sizeof(why));

    if (v != NULL) {
        jwtcheck_free(v);
        return NULL;
    }
    return why;
}

Test(jwtcheck, a_key_that_does_not_suit_the_algorithms_is_refused)
{
    keys();
    cr_assert_null(new_refusal(JWTCHECK_RS256 | JWTCHECK_RS512, rsa.pub));
    cr_assert_null(new_refusal(JWTCHECK_ES384, ec384.pub));
    cr_assert_str_eq(new_refusal(JWTCHECK_HS256 | JWTCHECK_RS256, rsa.pub),
                     "HS algorithms cannot be mixed with RS or ES ones");
    cr_assert_str_eq(new_refusal(JWTCHECK_RS256 | JWTCHECK_ES256, rsa.pub),
                     "RS and ES algorithms cannot share one key");
    cr_assert_str_eq(new_refusal(JWTCHECK_ES256, rsa.pub),
                     "ES256, ES384 and ES512 need an EC key");
    cr_assert_str_eq(new_refusal(JWTCHECK_RS256, ec.pub),
                     "RS256, RS384 and RS512 need an RSA key");
    cr_assert_str_eq(new_refusal(JWTCHECK_ES256, ec384.pub),
                     "ES256 needs a P-256 key");
    cr_assert_str_eq(new_refusal(JWTCHECK_RS256, "not a key"),
                     "not a PEM public key (-----BEGIN PUBLIC KEY-----)");
    /* A private key is not a public key. */
    cr_assert_str_eq(new_refusal(JWTCHECK_RS256, rsa.priv),
                     "not a PEM public key (-----BEGIN PUBLIC KEY-----)");
    cr_assert_str_eq(new_refusal(JWTCHECK_HS256, "short"),
                     "the secret has 5 bytes; HS256 needs at least 32");
    cr_assert_str_eq(new_refusal(JWTCHECK_HS512, JT_SECRET),
                     "the secret has 32 bytes; HS512 needs at least 64");
}

Test(jwtcheck, every_verifier_has_an_id_of_its_own)
{
    struct jwtcheck *a = verifier(JWTCHECK_HS256, JT_SECRET, NULL, NULL, 0);
    struct jwtcheck *b = verifier(JWTCHECK_HS256, JT_SECRET, NULL, NULL, 0);

    cr_assert_neq(jwtcheck_id(a), jwtcheck_id(b));
    jwtcheck_free(a);
    jwtcheck_free(b);
}

/* ---- where the token is ---- */

static enum jwtcheck_found
find(const struct jwtcheck_conf *c, const char *const *fields, char *out)
{
    struct headers h;
    const char *tok = NULL;
    size_t len = 0;
    enum jwtcheck_found f;

    headers_init(&h);
    for (size_t i = 0; fields[i] != NULL; i += 2) {
        headers_add(&h, fields[i], fields[i + 1]);
    }
    f = jwtcheck_find_token(c, &h, &tok, &len);
    out[0] = '\0';
    if (f == JWTCHECK_TOKEN) {
        memcpy(out, tok, len);
        out[len] = '\0';
    }
    headers_deinit(&h);
    return f;
}

Test(jwtcheck, token_comes_from_a_bearer_authorization_field)
{
    struct jwtcheck_conf c = conf_of(JWTCHECK_HS256);
    char tok[64];

    cr_assert_eq(
        find(&c, (const char *[]){"Authorization", "Bearer a.b.c", NULL}, tok),
        JWTCHECK_TOKEN);
    cr_assert_str_eq(tok, "a.b.c");
    cr_assert_eq(find(&c,
                      (const char *[]){"authorization", "bEaReR  a.b.c ", NULL},
                      tok),
                 JWTCHECK_TOKEN);
    cr_assert_str_eq(tok, "a.b.c");
    cr_assert_eq(
        find(&c, (const char *[]){"Authorization", "Basic YTpi", NULL}, tok),
        JWTCHECK_NO_TOKEN);
    cr_assert_eq(
        find(&c, (const char *[]){"Authorization", "Bearera.b.c", NULL}, tok),
        JWTCHECK_NO_TOKEN);
    cr_assert_eq(
        find(&c, (const char *[]){"X-Other", "Bearer a.b.c", NULL}, tok),
        JWTCHECK_NO_TOKEN);
    cr_assert_eq(
        find(&c, (const char *[]){"Authorization", "Bearer ", NULL}, tok),
        JWTCHECK_BAD_TOKEN);
    /* Two fields: which one is meant is ambiguous. */
    cr_assert_eq(find(&c,
                      (const char *[]){"Authorization", "Bearer a.b.c",
                                       "Authorization", "Bearer d.e.f", NULL},
                      tok),
                 JWTCHECK_BAD_TOKEN);
}

Test(jwtcheck, token_comes_from_another_field_bare_or_bearer)
{
    struct jwtcheck_conf c = conf_of(JWTCHECK_HS256);
    char tok[64];

    c.header = "X-Token";
    cr_assert_eq(find(&c, (const char *[]){"x-token", "a.b.c", NULL}, tok),
                 JWTCHECK_TOKEN);
    cr_assert_str_eq(tok, "a.b.c");
    cr_assert_eq(
        find(&c, (const char *[]){"X-Token", "Bearer a.b.c", NULL}, tok),
        JWTCHECK_TOKEN);
    cr_assert_str_eq(tok, "a.b.c");
}

Test(jwtcheck, token_comes_from_a_cookie_named_once)
{
    struct jwtcheck_conf c = conf_of(JWTCHECK_HS256);
    char tok[64];

    c.header = NULL;
    c.cookie = "session";
    cr_assert_eq(find(&c,
                      (const char *[]){"Cookie", "a=1; session=a.b.c; b=2",
                                       "Authorization", "Bearer x.y.z", NULL},
                      tok),
                 JWTCHECK_TOKEN);
    cr_assert_str_eq(tok, "a.b.c");
    cr_assert_eq(find(&c, (const char *[]){"Cookie", "a=1", NULL}, tok),
                 JWTCHECK_NO_TOKEN);
    cr_assert_eq(find(&c,
                      (const char *[]){"Cookie", "session=a.b.c", "Cookie",
                                       "session=d.e.f", NULL},
                      tok),
                 JWTCHECK_BAD_TOKEN);
}

Test(jwtcheck, identity_takes_strings_fit_for_a_header_only)
{
    struct jwtcheck_conf c = conf_of(JWTCHECK_HS256);
    const char *user, *role;
    static const char ok[] = "{\"sub\":\"alice\",\"role\":[\"admin\",\"ops\"]}";
    static const char bad[] = "{\"sub\":\"al\\r\\nX-Evil: 1\",\"role\":7}";
    struct claims *a = claims_parse(ok, strlen(ok));
    struct claims *b = claims_parse(bad, strlen(bad));

    jwtcheck_identity(&c, a, &user, &role);
    cr_assert_str_eq(user, "alice");
    cr_assert_str_eq(role, "admin");
    jwtcheck_identity(&c, b, &user, &role);
    cr_assert_null(user);
    cr_assert_null(role);
    c.role_claim = "plan";
    jwtcheck_identity(&c, a, &user, &role);
    cr_assert_null(role);
    claims_unref(a);
    claims_unref(b);
}

Test(jwtcheck, identity_with_blanks_at_either_end_is_no_identity)
{
    struct jwtcheck_conf c = conf_of(JWTCHECK_HS256);
    /* Each would be a bucket of its own, while the upstream's parser
     * strips the blanks and reads "alice". */
    static const char *const unfit[] = {
        "{\"sub\":\" alice\",\"role\":\"admin \"}",
        "{\"sub\":\"\\talice \",\"role\":[\"\\tadmin\"]}",
        "{\"sub\":\"alice\\t\",\"role\":\" \"}",
        "{\"sub\":\"\",\"role\":\"\"}",
    };
    static const char inner[] = "{\"sub\":\"alice smith\",\"role\":\"a\\tb\"}";
    const char *user, *role;
    struct claims *k;

    for (size_t i = 0; i < sizeof(unfit) / sizeof(unfit[0]); i++) {
        k = claims_parse(unfit[i], strlen(unfit[i]));
        cr_assert_not_null(k, "%s", unfit[i]);
        jwtcheck_identity(&c, k, &user, &role);
        cr_assert_null(user, "%s gave user \"%s\"", unfit[i], user);
        cr_assert_null(role, "%s gave role \"%s\"", unfit[i], role);
        claims_unref(k);
    }
    /* Blanks inside are the value's own. */
    k = claims_parse(inner, strlen(inner));
    jwtcheck_identity(&c, k, &user, &role);
    cr_assert_str_eq(user, "alice smith");
    cr_assert_str_eq(role, "a\tb");
    claims_unref(k);
}
