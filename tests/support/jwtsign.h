/*
 * jwtsign.h - tokens and keys made by the tests themselves: RSA and EC key
 * pairs generated with OpenSSL, tokens signed with libjwt, and tokens
 * forged part by part (alg none, a signature from elsewhere). For the
 * unit, integration and fuzz tests of identity.jwt; header-only, every
 * function static. Returned strings are the caller's to free().
 */
#ifndef SLUICE_TESTS_JWTSIGN_H
#define SLUICE_TESTS_JWTSIGN_H

#include <jwt.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A key pair as PEM text. */
struct jt_pair {
    char *pub;  /* -----BEGIN PUBLIC KEY----- */
    char *priv; /* -----BEGIN PRIVATE KEY----- */
};

/* A secret long enough for HS256 (32 bytes). */
#define JT_SECRET "0123456789abcdef0123456789abcdef"

static inline char *
jt_bio_text(BIO *bio)
{
    char *p = NULL;
    long n = BIO_get_mem_data(bio, &p);
    char *s = malloc((size_t)n + 1);

    memcpy(s, p, (size_t)n);
    s[n] = '\0';
    BIO_free(bio);
    return s;
}

/* A new pair: "RSA" (2048 bits), or "P-256", "P-384" (EC). */
static inline struct jt_pair
jt_keygen(const char *kind)
{
    EVP_PKEY *k = strcmp(kind, "RSA") == 0
                      ? EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048)
                      : EVP_PKEY_Q_keygen(NULL, NULL, "EC", kind);
    BIO *pub = BIO_new(BIO_s_mem());
    BIO *priv = BIO_new(BIO_s_mem());
    struct jt_pair kp;

    if (k == NULL || !PEM_write_bio_PUBKEY(pub, k) ||
        !PEM_write_bio_PrivateKey(priv, k, NULL, NULL, 0, NULL, NULL)) {
        fprintf(stderr, "jwtsign: cannot make a %s key\n", kind);
        abort();
    }
    EVP_PKEY_free(k);
    kp.pub = jt_bio_text(pub);
    kp.priv = jt_bio_text(priv);
    return kp;
}

static inline void
jt_pair_free(struct jt_pair *kp)
{
    free(kp->pub);
    free(kp->priv);
}

/*
 * A token with the claims 'json' (an object), signed with 'alg' ("HS256",
 * "RS256", "ES256", "none"...) and 'key' ('keylen' bytes: the secret, or
 * the private key's PEM), by libjwt.
 */
static inline char *
jt_sign(const char *alg, const void *key, size_t keylen, const char *json)
{
    jwt_t *jwt = NULL;
    char *tok, *out;

    if (jwt_new(&jwt) != 0 ||
        jwt_set_alg(jwt, jwt_str_alg(alg), key, (int)keylen) != 0 ||
        jwt_add_grants_json(jwt, json) != 0) {
        fprintf(stderr, "jwtsign: cannot build a %s token\n", alg);
        abort();
    }
    tok = jwt_encode_str(jwt);
    jwt_free(jwt);
    if (tok == NULL) {
        fprintf(stderr, "jwtsign: cannot sign a %s token\n", alg);
        abort();
    }
    out = strdup(tok);
    free(tok);
    return out;
}

/* A token signed with a string secret or PEM. */
static inline char *
jt_sign_str(const char *alg, const char *key, const char *json)
{
    return jt_sign(alg, key, key != NULL ? strlen(key) : 0, json);
}

/* base64url of 'n' bytes, no padding (OpenSSL's base64, then the
 * URL-safe alphabet). */
static inline char *
jt_b64url(const void *p, size_t n)
{
    char *s = malloc(4 * ((n + 2) / 3) + 1);
    int len = EVP_EncodeBlock((unsigned char *)s, p, (int)n);

    while (len > 0 && s[len - 1] == '=') {
        len--;
    }
    s[len] = '\0';
    for (char *c = s; *c != '\0'; c++) {
        *c = *c == '+' ? '-' : *c == '/' ? '_' : *c;
    }
    return s;
}

/* "b64(header).b64(payload).sig", the signature as given (may be ""). */
static inline char *
jt_forge(const char *header, const char *payload, const char *sig)
{
    char *h = jt_b64url(header, strlen(header));
    char *p = jt_b64url(payload, strlen(payload));
    size_t n = strlen(h) + strlen(p) + strlen(sig) + 3;
    char *t = malloc(n);

    snprintf(t, n, "%s.%s.%s", h, p, sig);
    free(h);
    free(p);
    return t;
}

/*
 * "b64(header).b64(payload)" signed HS256 with 'secret' by OpenSSL's HMAC:
 * for a header libjwt would not write as given (its jwt_encode() always
 * sets typ to JWT).
 */
static inline char *
jt_forge_hs256(const char *header, const char *payload, const char *secret)
{
    char *unsigned_tok = jt_forge(header, payload, "");
    size_t n = strlen(unsigned_tok) - 1; /* without the last '.' */
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    char *sig, *t;

    if (HMAC(EVP_sha256(), secret, (int)strlen(secret),
             (const unsigned char *)unsigned_tok, n, md, &mdlen) == NULL) {
        fprintf(stderr, "jwtsign: cannot compute an HMAC\n");
        abort();
    }
    sig = jt_b64url(md, mdlen);
    unsigned_tok[n] = '\0';
    t = malloc(n + strlen(sig) + 2);
    sprintf(t, "%s.%s", unsigned_tok, sig);
    free(unsigned_tok);
    free(sig);
    return t;
}

/* The signature part of 'token' (a new string). */
static inline char *
jt_signature(const char *token)
{
    return strdup(strrchr(token, '.') + 1);
}

#endif
