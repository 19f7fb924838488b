/*
 * jwtcheck.h - identity.jwt: where a request carries its token, and the
 * verifier that decides whether the token is valid (signature, alg, exp,
 * nbf, iss, aud) and yields its claims. Decoding and signatures are
 * libjwt's (OpenSSL backend), claims are read with jansson; both stay
 * behind this header. Pure: no I/O (the key's bytes are passed in).
 * A verifier is immutable and may be shared between threads.
 */
#ifndef SLUICE_JWTCHECK_H
#define SLUICE_JWTCHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct claims;
struct headers;

/* Longer tokens are refused unread (libjwt decodes on the stack). */
#define JWTCHECK_MAX_TOKEN 8192

/* The algorithms a verifier may accept: bits of jwtcheck_conf.algorithms. */
enum jwtcheck_alg {
    JWTCHECK_HS256 = 1 << 0,
    JWTCHECK_HS384 = 1 << 1,
    JWTCHECK_HS512 = 1 << 2,
    JWTCHECK_RS256 = 1 << 3,
    JWTCHECK_RS384 = 1 << 4,
    JWTCHECK_RS512 = 1 << 5,
    JWTCHECK_ES256 = 1 << 6,
    JWTCHECK_ES384 = 1 << 7,
    JWTCHECK_ES512 = 1 << 8,
};

#define JWTCHECK_HMAC (JWTCHECK_HS256 | JWTCHECK_HS384 | JWTCHECK_HS512)
#define JWTCHECK_RSA (JWTCHECK_RS256 | JWTCHECK_RS384 | JWTCHECK_RS512)
#define JWTCHECK_EC (JWTCHECK_ES256 | JWTCHECK_ES384 | JWTCHECK_ES512)

/* "RS256" and so on (exact case) into a bit; 0 for anything else,
 * "none" included. */
unsigned jwtcheck_alg_parse(const char *name);
/* The name of one bit; NULL if 'alg' is not exactly one. */
const char *jwtcheck_alg_name(unsigned alg);

struct jwtcheck; /* opaque: the verifier */

/* identity.jwt as gateway.yaml says it. Plain data, const after load. */
struct jwtcheck_conf {
    char *header;              /* the field with the token, or NULL when
                                  'cookie' is set; owned */
    char *cookie;              /* the cookie with the token, or NULL;
                                  owned */
    unsigned algorithms;       /* JWTCHECK_* bits accepted; not 0 */
    char *key_file;            /* PEM public key (RS*, ES*), or NULL;
                                  owned */
    char *secret_file;         /* HMAC secret (HS*), or NULL; owned */
    char *issuer;              /* required "iss", or NULL; owned */
    char *audience;            /* required among "aud", or NULL; owned */
    uint64_t leeway_ms;        /* allowance for clock skew, exp and nbf */
    char *user_claim;          /* default "sub"; owned */
    char *role_claim;          /* default "role"; owned */
    bool required;             /* no valid token: 401 */
    bool cache;                /* remember verified tokens per worker
                                  (jwtcache.h); default true */
    struct jwtcheck *verifier; /* built from the key at load; owned */
};

/* Frees what 'c' owns, the verifier included, and 'c'. NULL: no-op. */
void jwtcheck_conf_free(struct jwtcheck_conf *c);

/*
 * A verifier for the algorithms, issuer, audience and leeway of 'conf'
 * (borrowed; copied), with 'key' (borrowed; copied): a PEM public key
 * when the algorithms are RS* or ES*, the secret when they are HS*. NULL,
 * with why in 'why' (at most 'whylen' bytes), when the key does not suit
 * the algorithms: a PEM that does not parse, an RSA key for ES256, a
 * P-384 key for ES256, a secret shorter than the HMAC's hash, HS with
 * RS/ES. Each verifier gets an id of its own, never reused in the process
 * (jwtcheck_id()), so that a cache can tell a new key from the old.
 */
struct jwtcheck *jwtcheck_new(const struct jwtcheck_conf *conf,
                              const unsigned char *key, size_t keylen,
                              char *why, size_t whylen);
void jwtcheck_free(struct jwtcheck *v); /* NULL: no-op */
uint64_t jwtcheck_id(const struct jwtcheck *v);

/*
 * Verifies the 'len' bytes of 'token' at wall-clock time 'now_ms' (epoch
 * ms). A valid token gives its claims (a new reference) and, in
 * '*until_ms', when it stops being valid (exp plus the leeway; INT64_MAX
 * without exp). An invalid one gives NULL and a static reason in '*why'.
 * Invalid: longer than JWTCHECK_MAX_TOKEN, not three base64url parts,
 * undecodable, a signature that does not verify with the key, an alg not
 * in the configured set (so never "none", and never HS256 over an RSA
 * key's PEM), a "crit" header, claims that are not an object, a
 * registered claim of the wrong type (exp, nbf, iat not numbers; iss,
 * sub not strings; aud not a string or array of strings), expired, not
 * yet valid, or the wrong issuer or audience when those are configured.
 */
struct claims *jwtcheck_verify(const struct jwtcheck *v, const char *token,
                               size_t len, int64_t now_ms, int64_t *until_ms,
                               const char **why);

/* Where a request stands with its token. */
enum jwtcheck_found {
    JWTCHECK_NO_TOKEN,  /* none offered */
    JWTCHECK_TOKEN,     /* one, in '*token' */
    JWTCHECK_BAD_TOKEN, /* offered, but unusable: the field or cookie
                           repeated, or empty */
};

/*
 * The token of a request with fields 'h', per 'conf': the value of the
 * conf->cookie cookie, or of the conf->header field. From Authorization
 * the value must be "Bearer <token>" (scheme in any case): another scheme
 * is no token. From another field the value is the token, with an
 * optional "Bearer " before it. '*token' and '*len' borrow from 'h'.
 */
enum jwtcheck_found jwtcheck_find_token(const struct jwtcheck_conf *conf,
                                        const struct headers *h,
                                        const char **token, size_t *len);

/*
 * The user and role of verified 'claims' (conf->user_claim,
 * conf->role_claim; claims_get_string()), NULL for one that is absent,
 * not a string or not fit for a header value: empty, a control
 * character, or SP or HTAB at either end (which the upstream's parser
 * would strip, reading another value than the limiter keyed on).
 * Borrowed from 'claims'.
 */
void jwtcheck_identity(const struct jwtcheck_conf *conf,
                       const struct claims *claims, const char **user,
                       const char **role);

#endif
