#include "jwtcheck.h"

#include <jwt.h>
#include <math.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/obj_mac.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "claims.h"
#include "cookie.h"
#include "headers.h"
#include "xmalloc.h"

struct jwtcheck {
    uint64_t id;         /* unique in the process (jwtcheck_id()) */
    unsigned algorithms; /* JWTCHECK_* bits */
    unsigned char *key;  /* PEM or secret; owned */
    size_t keylen;       /* bytes in 'key' */
    char *issuer;        /* or NULL; owned */
    char *audience;      /* or NULL; owned */
    uint64_t leeway_ms;  /* for exp and nbf */
};

/* libjwt's names and numbers beside ours, in one order. */
static const struct {
    unsigned bit;
    const char *name;
    jwt_alg_t lib;
} algs[] = {
    {JWTCHECK_HS256, "HS256", JWT_ALG_HS256},
    {JWTCHECK_HS384, "HS384", JWT_ALG_HS384},
    {JWTCHECK_HS512, "HS512", JWT_ALG_HS512},
    {JWTCHECK_RS256, "RS256", JWT_ALG_RS256},
    {JWTCHECK_RS384, "RS384", JWT_ALG_RS384},
    {JWTCHECK_RS512, "RS512", JWT_ALG_RS512},
    {JWTCHECK_ES256, "ES256", JWT_ALG_ES256},
    {JWTCHECK_ES384, "ES384", JWT_ALG_ES384},
    {JWTCHECK_ES512, "ES512", JWT_ALG_ES512},
};

#define NALGS (sizeof(algs) / sizeof(algs[0]))

unsigned
jwtcheck_alg_parse(const char *name)
{
    for (size_t i = 0; i < NALGS; i++) {
        if (strcmp(name, algs[i].name) == 0) {
            return algs[i].bit;
        }
    }
    return 0;
}

const char *
jwtcheck_alg_name(unsigned alg)
{
    for (size_t i = 0; i < NALGS; i++) {
        if (alg == algs[i].bit) {
            return algs[i].name;
        }
    }
    return NULL;
}

/* Our bit for what libjwt read in the header; 0 for none or unknown. */
static unsigned
bit_of(jwt_alg_t lib)
{
    for (size_t i = 0; i < NALGS; i++) {
        if (lib == algs[i].lib) {
            return algs[i].bit;
        }
    }
    return 0;
}

void
jwtcheck_conf_free(struct jwtcheck_conf *c)
{
    if (c == NULL) {
        return;
    }
    free(c->header);
    free(c->cookie);
    free(c->key_file);
    free(c->secret_file);
    free(c->issuer);
    free(c->audience);
    free(c->user_claim);
    free(c->role_claim);
    jwtcheck_free(c->verifier);
    free(c);
}

/*
 * Whether the public key in 'pem' suits 'algorithms': RSA for RS*, EC on
 * the matching curve for ES* (P-256 for ES256, P-384, P-521). NULL, or
 * why not.
 */
static const char *
check_public_key(const unsigned char *pem, size_t len, unsigned algorithms)
{
    static const struct {
        unsigned bit;
        const char *curve; /* OpenSSL's group name */
        const char *why;
    } curves[] = {
        {JWTCHECK_ES256, SN_X9_62_prime256v1, "ES256 needs a P-256 key"},
        {JWTCHECK_ES384, SN_secp384r1, "ES384 needs a P-384 key"},
        {JWTCHECK_ES512, SN_secp521r1, "ES512 needs a P-521 key"},
    };
    BIO *bio = BIO_new_mem_buf(pem, (int)len);
    EVP_PKEY *pkey =
        bio != NULL ? PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL) : NULL;
    const char *why = NULL;
    char group[64];

    BIO_free(bio);
    if (pkey == NULL) {
        return "not a PEM public key (-----BEGIN PUBLIC KEY-----)";
    }
    if ((algorithms & JWTCHECK_RSA) != 0) {
        if (EVP_PKEY_base_id(pkey) != EVP_PKEY_RSA) {
            why = "RS256, RS384 and RS512 need an RSA key";
        } else if (EVP_PKEY_get_bits(pkey) < 2048) {
            why = "an RSA key needs at least 2048 bits";
        }
    } else if (EVP_PKEY_base_id(pkey) != EVP_PKEY_EC) {
        why = "ES256, ES384 and ES512 need an EC key";
    } else if (!EVP_PKEY_get_group_name(pkey, group, sizeof(group), NULL)) {
        why = "the EC key names no curve";
    } else {
        for (size_t i = 0; i < sizeof(curves) / sizeof(curves[0]); i++) {
            if ((algorithms & curves[i].bit) != 0 &&
                strcmp(group, curves[i].curve) != 0) {
                why = curves[i].why;
            }
        }
    }
    EVP_PKEY_free(pkey);
    return why;
}

struct jwtcheck *
jwtcheck_new(const struct jwtcheck_conf *conf, const unsigned char *key,
             size_t keylen, char *why, size_t whylen)
{
    static uint64_t next_id;
    unsigned a = conf->algorithms;
    struct jwtcheck *v;
    const char *bad = NULL;

    if (a == 0) {
        bad = "no algorithm";
    } else if ((a & JWTCHECK_HMAC) != 0 && (a & ~JWTCHECK_HMAC) != 0) {
        /* One key is either a secret or a public key: mixing would let a
         * token choose how the key is read. */
        bad = "HS algorithms cannot be mixed with RS or ES ones";
    } else if ((a & JWTCHECK_RSA) != 0 && (a & JWTCHECK_EC) != 0) {
        bad = "RS and ES algorithms cannot share one key";
    } else if (keylen == 0) {
        bad = "the key is empty";
    } else if ((a & JWTCHECK_HMAC) != 0) {
        /* RFC 7518 3.2: a key at least as long as the hash. */
        size_t need = (a & JWTCHECK_HS512)   ? 64
                      : (a & JWTCHECK_HS384) ? 48
                                             : 32;

        if (keylen < need) {
            snprintf(why, whylen,
                     "the secret has %zu bytes; %s needs at least %zu", keylen,
                     (a & JWTCHECK_HS512)   ? "HS512"
                     : (a & JWTCHECK_HS384) ? "HS384"
                                            : "HS256",
                     need);
            return NULL;
        }
    } else {
        bad = check_public_key(key, keylen, a);
    }
    if (bad != NULL) {
        snprintf(why, whylen, "%s", bad);
        return NULL;
    }
    v = xcalloc(1, sizeof(*v));
    v->id = __atomic_add_fetch(&next_id, 1, __ATOMIC_RELAXED);
    v->algorithms = a;
    v->key = xmalloc(keylen);
    memcpy(v->key, key, keylen);
    v->keylen = keylen;
    v->issuer = conf->issuer != NULL ? xstrdup(conf->issuer) : NULL;
    v->audience = conf->audience != NULL ? xstrdup(conf->audience) : NULL;
    v->leeway_ms = conf->leeway_ms;
    return v;
}

void
jwtcheck_free(struct jwtcheck *v)
{
    if (v == NULL) {
        return;
    }
    free(v->key);
    free(v->issuer);
    free(v->audience);
    free(v);
}

uint64_t
jwtcheck_id(const struct jwtcheck *v)
{
    return v->id;
}

static bool
b64url(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
           (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Three non-empty base64url parts joined by dots (JWS compact form,
 * with a signature: an unsigned token has none). */
static bool
well_formed(const char *t, size_t len)
{
    size_t dots = 0;
    size_t part = 0;

    for (size_t i = 0; i < len; i++) {
        if (t[i] == '.') {
            if (part == 0 || ++dots > 2) {
                return false;
            }
            part = 0;
        } else if (b64url((unsigned char)t[i])) {
            part++;
        } else {
            return false;
        }
    }
    return dots == 2 && part > 0;
}

/* Epoch seconds (a JSON number) in ms, kept within int64_t. */
static double
ms_of(double seconds)
{
    return seconds * 1000.0;
}

/* Registered claims must have their RFC 7519 types; NULL or why not. */
static const char *
check_types(const struct claims *c)
{
    static const char *const numbers[] = {"exp", "nbf", "iat"};
    static const char *const strings[] = {"iss", "sub"};
    enum claims_type t;

    for (size_t i = 0; i < 3; i++) {
        t = claims_type(c, numbers[i]);
        if (t != CLAIMS_ABSENT && t != CLAIMS_NUMBER) {
            return i == 0   ? "claim exp is not a number"
                   : i == 1 ? "claim nbf is not a number"
                            : "claim iat is not a number";
        }
    }
    for (size_t i = 0; i < 2; i++) {
        t = claims_type(c, strings[i]);
        if (t != CLAIMS_ABSENT && t != CLAIMS_STRING) {
            return i == 0 ? "claim iss is not a string"
                          : "claim sub is not a string";
        }
    }
    if (claims_type(c, "aud") != CLAIMS_ABSENT &&
        !claims_is_strings(c, "aud")) {
        return "claim aud is not a string or an array of strings";
    }
    return NULL;
}

/* The checks on verified claims; NULL, or why the token is invalid. */
static const char *
check_claims(const struct jwtcheck *v, const struct claims *c, int64_t now_ms,
             int64_t *until_ms)
{
    const char *why = check_types(c);
    double leeway = (double)v->leeway_ms;
    double now = (double)now_ms;
    double exp, nbf;

    if (why != NULL) {
        return why;
    }
    *until_ms = INT64_MAX;
    if (claims_get_number(c, "exp", &exp)) {
        double until = ms_of(exp) + leeway;

        if (!(now < until)) {
            return "expired";
        }
        /* 2^62: far beyond any real exp, and exact in a double. */
        *until_ms = until < 4611686018427387904.0 ? (int64_t)until : INT64_MAX;
    }
    if (claims_get_number(c, "nbf", &nbf) && !(now + leeway >= ms_of(nbf))) {
        return "not yet valid";
    }
    if (v->issuer != NULL && (claims_type(c, "iss") != CLAIMS_STRING ||
                              !claims_has_string(c, "iss", v->issuer))) {
        return "wrong issuer";
    }
    if (v->audience != NULL && !claims_has_string(c, "aud", v->audience)) {
        return "wrong audience";
    }
    return NULL;
}

struct claims *
jwtcheck_verify(const struct jwtcheck *v, const char *token, size_t len,
                int64_t now_ms, int64_t *until_ms, const char **why)
{
    char buf[JWTCHECK_MAX_TOKEN + 1];
    jwt_t *jwt = NULL;
    struct claims *c = NULL;
    char *json;
    const char *named;
    unsigned alg;

    *why = NULL;
    if (len > JWTCHECK_MAX_TOKEN) {
        *why = "token too long";
        return NULL;
    }
    if (!well_formed(token, len)) {
        *why = "malformed token";
        return NULL;
    }
    memcpy(buf, token, len);
    buf[len] = '\0';
    /*
     * libjwt checks the signature by the alg the token names, with our
     * key: an HS256 token would be checked with an RSA key's PEM as its
     * secret. So the alg is checked against ours after the call, and our
     * set never mixes HMAC with public keys (jwtcheck_new()).
     */
    if (jwt_decode(&jwt, buf, v->key, (int)v->keylen) != 0 || jwt == NULL) {
        *why = "malformed token or bad signature";
        return NULL;
    }
    /* RFC 7515 4.1.1: the alg's name is case-sensitive, and libjwt reads
     * it without case ("rs256" checked as RS256); a verifier upstream
     * that names its algorithms refuses such a token. */
    named = jwt_get_header(jwt, "alg");
    alg = named != NULL ? jwtcheck_alg_parse(named) : 0;
    if (alg == 0 || alg != bit_of(jwt_get_alg(jwt)) ||
        (alg & v->algorithms) == 0) {
        *why = "algorithm not accepted";
        jwt_free(jwt);
        return NULL;
    }
    /* RFC 7515 4.1.11: extensions we do not know must not be ignored. */
    json = jwt_get_headers_json(jwt, "crit");
    if (json != NULL) {
        free(json);
        *why = "crit header not understood";
        jwt_free(jwt);
        return NULL;
    }
    json = jwt_get_grants_json(jwt, NULL);
    jwt_free(jwt);
    if (json != NULL) {
        c = claims_parse(json, strlen(json));
        free(json);
    }
    if (c == NULL) {
        *why = "claims are not a JSON object";
        return NULL;
    }
    *why = check_claims(v, c, now_ms, until_ms);
    if (*why != NULL) {
        claims_unref(c);
        return NULL;
    }
    return c;
}

/* 's' ('n' bytes) without the OWS around it, into '*p', '*len'. */
static void
trim(const char *s, size_t n, const char **p, size_t *len)
{
    *p = s;
    *len = n;
    headers_trim_ows(p, len);
}

/* "Bearer <token>": true and the token, or false for another scheme. */
static bool
strip_bearer(const char *s, const char **p, size_t *n)
{
    trim(s, strlen(s), &s, n);
    if (*n < 6 || strncasecmp(s, "Bearer", 6) != 0 ||
        (*n > 6 && !headers_is_ows(s[6]))) {
        return false;
    }
    trim(s + 6, *n - 6, p, n);
    return true;
}

enum jwtcheck_found
jwtcheck_find_token(const struct jwtcheck_conf *conf, const struct headers *h,
                    const char **token, size_t *len)
{
    const char *value = NULL;
    size_t count = 0;

    if (conf->cookie != NULL) {
        const char *p = NULL;
        size_t n = 0;

        count = cookie_find(h, conf->cookie, &p, &n);
        if (count == 0) {
            return JWTCHECK_NO_TOKEN;
        }
        *token = p;
        *len = n;
        return count > 1 || n == 0 ? JWTCHECK_BAD_TOKEN : JWTCHECK_TOKEN;
    }
    for (size_t i = 0; h != NULL && i < h->n; i++) {
        if (strcasecmp(h->v[i].name, conf->header) == 0) {
            value = count++ == 0 ? h->v[i].value : value;
        }
    }
    if (count == 0) {
        return JWTCHECK_NO_TOKEN;
    }
    /* Two fields: which one would be meant is ambiguous. */
    if (count > 1) {
        return JWTCHECK_BAD_TOKEN;
    }
    if (!strip_bearer(value, token, len)) {
        if (strcasecmp(conf->header, "Authorization") == 0) {
            return JWTCHECK_NO_TOKEN; /* Basic and the like: not ours */
        }
        trim(value, strlen(value), token, len);
    }
    return *len > 0 ? JWTCHECK_TOKEN : JWTCHECK_BAD_TOKEN;
}

/*
 * 's' if it can go into a header value as it is and be read back the
 * same, else NULL: no control character, not empty, and no SP or HTAB at
 * either end, which an HTTP parser strips (RFC 9110 5.5), so that " alice"
 * would be a bucket of its own while the upstream read "alice".
 */
static const char *
fit(const char *s)
{
    size_t n;

    if (s == NULL || !headers_valid_value(s)) {
        return NULL;
    }
    n = strlen(s);
    return n > 0 && !headers_is_ows(s[0]) && !headers_is_ows(s[n - 1]) ? s
                                                                       : NULL;
}

void
jwtcheck_identity(const struct jwtcheck_conf *conf, const struct claims *claims,
                  const char **user, const char **role)
{
    *user = conf->user_claim != NULL
                ? fit(claims_get_string(claims, conf->user_claim))
                : NULL;
    *role = conf->role_claim != NULL
                ? fit(claims_get_string(claims, conf->role_claim))
                : NULL;
}
