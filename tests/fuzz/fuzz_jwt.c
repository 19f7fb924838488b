/*
 * fuzz_jwt.c - libFuzzer target for the token parser and claim checks
 * (jwtcheck_verify(), through the token cache too). The input is a token.
 * It is verified by an HS256 verifier (the secret below) and an RS256
 * verifier (the public key below; its private key signed the seed corpus
 * and was not kept), at a fixed time. Invariants, checked with OpenSSL
 * apart from libjwt:
 * - an accepted token is three base64url parts of at most
 *   JWTCHECK_MAX_TOKEN bytes, whose signature verifies with that
 *   verifier's key by that verifier's algorithm (so never alg none, and
 *   never an HS256 token against the RSA key);
 * - an accepted token is not expired and is already valid at that time;
 * - the cache gives the same answer as the verifier, with the same claims.
 */
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <string.h>

#include "claims.h"
#include "fuzz.h"
#include "jwtcache.h"
#include "jwtcheck.h"
#include "xmalloc.h"

/* 2026-01-01T00:00:00Z: the seeds' tokens are valid then. */
#define NOW (1767225600LL * 1000)
#define LEEWAY_MS 30000

static const char secret[] = "0123456789abcdef0123456789abcdef";

static const char rsa_pub[] =
    "-----BEGIN PUBLIC KEY-----\n"
    "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAsgzzpI8gv3DBGB7UrlIe\n"
    "K0qubR6K3RCF8GhsOxezO44VNCk0nBiSYFVuLdwxIcPrfZ3ppu0Hghl7lCATl91z\n"
    "Eer6rHgl5zAlHkSGMAISvpiOgmbQbNA/nmvDHucuJbUUuovse0jkuEXyG7cnPMLj\n"
    "JNWCHideZgbN9HpXQoScOWg9vP5BYMC3aj3H0/n/5chy0g8L0+yyPF1MDHQB66OG\n"
    "sCrmVVO+wFXDWUL4QmjH+Q+nlJJkePCjNKRV9I6qxwuzNNrXS4XAUgkAUI5OjKmM\n"
    "uZUEhUfLex0kxK24lioweBVGZ5tIjoOUkVRjduBIu7WeOtPHY47kj9jxoapNVBx5\n"
    "UwIDAQAB\n"
    "-----END PUBLIC KEY-----\n";

static struct jwtcheck *hs, *rs;
/* One cache per verifier: a cache meeting another verifier forgets all
 * it holds, and the hit path would never run. */
static struct jwtcache *hs_cache, *rs_cache;
static EVP_PKEY *rsa_key;

static struct jwtcheck *
make(unsigned alg, const char *key)
{
    struct jwtcheck_conf c;
    char why[128];
    struct jwtcheck *v;

    memset(&c, 0, sizeof(c));
    c.algorithms = alg;
    c.leeway_ms = LEEWAY_MS;
    v = jwtcheck_new(&c, (const unsigned char *)key, strlen(key), why,
                     sizeof(why));
    FUZZ_CHECK(v != NULL);
    return v;
}

static void
setup(void)
{
    BIO *bio;

    if (hs != NULL) {
        return;
    }
    hs = make(JWTCHECK_HS256, secret);
    rs = make(JWTCHECK_RS256, rsa_pub);
    hs_cache = jwtcache_new(64);
    rs_cache = jwtcache_new(64);
    bio = BIO_new_mem_buf(rsa_pub, -1);
    rsa_key = PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL);
    BIO_free(bio);
    FUZZ_CHECK(rsa_key != NULL);
}

/* base64url (no padding) of 'n' bytes of 'p' into 'out' (4n/3 + 4). */
static void
b64url(const unsigned char *p, size_t n, char *out)
{
    int len = EVP_EncodeBlock((unsigned char *)out, p, (int)n);

    while (len > 0 && out[len - 1] == '=') {
        len--;
    }
    out[len] = '\0';
    for (char *c = out; *c != '\0'; c++) {
        *c = *c == '+' ? '-' : *c == '/' ? '_' : *c;
    }
}

/* The bytes of base64url 's' ('n' chars) into 'out'; their count, or -1. */
static int
unb64url(const char *s, size_t n, unsigned char *out)
{
    char *std = xmalloc(n + 4);
    size_t len = n;
    int got, pad = 0;

    for (size_t i = 0; i < n; i++) {
        std[i] = s[i] == '-' ? '+' : s[i] == '_' ? '/' : s[i];
    }
    while (len % 4 != 0) {
        std[len++] = '=';
        pad++;
    }
    got = EVP_DecodeBlock(out, (const unsigned char *)std, (int)len);
    free(std);
    return got < 0 ? -1 : got - pad;
}

/* The HS256 signature of 'input' ('n' bytes) is 'sig' ('m' chars). */
static bool
hmac_matches(const char *input, size_t n, const char *sig, size_t m)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    char enc[EVP_MAX_MD_SIZE * 2];

    HMAC(EVP_sha256(), secret, (int)strlen(secret),
         (const unsigned char *)input, n, md, &mdlen);
    b64url(md, mdlen, enc);
    return strlen(enc) == m && memcmp(enc, sig, m) == 0;
}

/* The RS256 signature of 'input' is 'sig', by the RSA key. */
static bool
rsa_matches(const char *input, size_t n, const char *sig, size_t m)
{
    unsigned char *raw = xmalloc(m + 4);
    int len = unb64url(sig, m, raw);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    bool ok =
        len > 0 &&
        EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, rsa_key) == 1 &&
        EVP_DigestVerify(ctx, raw, (size_t)len, (const unsigned char *)input,
                         n) == 1;

    EVP_MD_CTX_free(ctx);
    free(raw);
    return ok;
}

static void
check_accepted(const char *t, size_t n, const struct claims *c, bool is_hs,
               int64_t until)
{
    const char *dot = memchr(t, '.', n);
    const char *last = NULL;
    double exp, nbf;

    for (size_t i = 0; i < n; i++) {
        last = t[i] == '.' ? t + i : last;
    }

    FUZZ_CHECK(n <= JWTCHECK_MAX_TOKEN);
    FUZZ_CHECK(dot != NULL && last != NULL && last != dot);
    FUZZ_CHECK(last + 1 < t + n); /* a signature: never alg none */
    if (is_hs) {
        FUZZ_CHECK(hmac_matches(t, (size_t)(last - t), last + 1,
                                (size_t)(t + n - last - 1)));
    } else {
        FUZZ_CHECK(rsa_matches(t, (size_t)(last - t), last + 1,
                               (size_t)(t + n - last - 1)));
    }
    if (claims_get_number(c, "exp", &exp)) {
        FUZZ_CHECK(NOW < exp * 1000 + LEEWAY_MS);
        FUZZ_CHECK(until > NOW);
    }
    if (claims_get_number(c, "nbf", &nbf)) {
        FUZZ_CHECK(NOW + LEEWAY_MS >= nbf * 1000);
    }
    FUZZ_CHECK(claims_type(c, "sub") == CLAIMS_ABSENT ||
               claims_type(c, "sub") == CLAIMS_STRING);
}

static void
verify_with(const struct jwtcheck *v, bool is_hs, const char *t, size_t n)
{
    const char *why = NULL, *cwhy = NULL;
    int64_t until = 0;
    bool hit;
    struct claims *c = jwtcheck_verify(v, t, n, NOW, &until, &why);
    struct claims *cc =
        jwtcache_verify(is_hs ? hs_cache : rs_cache, v, t, n, NOW, &hit, &cwhy);
    const char *s;

    FUZZ_CHECK((c == NULL) == (cc == NULL));
    FUZZ_CHECK((c == NULL) == (why != NULL));
    if (c != NULL) {
        check_accepted(t, n, c, is_hs, until);
        s = claims_get_string(c, "sub");
        FUZZ_CHECK((s == NULL) == (claims_get_string(cc, "sub") == NULL));
        FUZZ_CHECK(s == NULL || strcmp(s, claims_get_string(cc, "sub")) == 0);
        FUZZ_CHECK(s == NULL || s[0] != '\0');
    }
    claims_unref(c);
    claims_unref(cc);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *t = (const char *)data;

    setup();
    verify_with(hs, true, t, size);
    verify_with(rs, false, t, size);
    return 0;
}
