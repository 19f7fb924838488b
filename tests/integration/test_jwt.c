/*
 * identity.jwt end to end: a real gateway, a real Redis and the echo
 * upstream, with tokens and keys made by the test (tests/support/
 * jwtsign.h). For each token: the identity the limiter used, read from
 * the one key it wrote in Redis, and the identity the upstream received,
 * read from the echo. The client also sends X-User-Id: mallory from
 * 127.0.0.1, a trusted proxy: with identity.jwt it must never count.
 */
#include <criterion/criterion.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../support/jwtsign.h"
#include "harness.h"

/* 2 hours from now and 2 hours ago, for exp and nbf. */
#define LATER ((long long)(harness_wall_ms() / 1000) + 7200)
#define EARLIER ((long long)(harness_wall_ms() / 1000) - 7200)

struct rig {
    struct proc redis, echo, gw;
    uint16_t redis_port, echo_port, port, admin;
    char *cfg_path; /* owned */
    char *key_path; /* the key or secret file; owned */
    redisContext *rc;
};

static char *
write_temp(const char *content)
{
    return harness_write_temp(content);
}

static void
write_over(const char *path, const char *content)
{
    FILE *fp = fopen(path, "w");

    cr_assert_not_null(fp);
    fputs(content, fp);
    fclose(fp);
}

static bool
redis_connected(void *arg)
{
    return proc_log_contains(arg, "redis: connected");
}

/*
 * Starts Redis, the echo and a gateway whose identity.jwt is 'jwt' (a flow
 * mapping with @KEY@ for the path of a file holding 'key') and whose one
 * route (every path under /api) has the RequestRateLimiter args 'args'.
 */
/* More lines under server: for the next rig_start(); "" by default. */
static const char *rig_server_extra = "";

static void
rig_start(struct rig *r, const char *key, const char *jwt, const char *args)
{
    char *jwt_text, *yaml;

    memset(r, 0, sizeof(*r));
    redis_start(&r->redis, &r->redis_port);
    echo_start(&r->echo, &r->echo_port);
    r->port = harness_free_port();
    r->admin = harness_free_port();
    r->key_path = write_temp(key);
    jwt_text = harness_subst(jwt, "@KEY@", r->key_path);
    yaml = harness_strf(
        "server:\n"
        "  listen: 127.0.0.1:%u\n"
        "  workers: 1\n"
        "  trusted_proxies: [127.0.0.1/32]\n"
        "%s"
        "admin:\n"
        "  listen: 127.0.0.1:%u\n"
        "redis:\n"
        "  url: redis://127.0.0.1:%u/0\n"
        "  timeout: 1s\n"
        "identity:\n"
        "  jwt: %s\n"
        "limiters:\n"
        "  big: { algorithm: fixed_window, limit: 1000, window: 1h }\n"
        "  tiny: { algorithm: fixed_window, limit: 2, window: 1h }\n"
        "routes:\n"
        "  - id: api\n"
        "    uri: http://127.0.0.1:%u\n"
        "    predicates: [Path=/api/**]\n"
        "    filters:\n"
        "      - name: RequestRateLimiter\n"
        "        args: %s\n",
        r->port, rig_server_extra, r->admin, r->redis_port, jwt_text,
        r->echo_port, args);
    r->cfg_path = write_temp(yaml);
    free(jwt_text);
    free(yaml);
    gateway_start(&r->gw, r->cfg_path, r->port);
    cr_assert(harness_wait_until(redis_connected, &r->gw, 10000),
              "the gateway never connected to Redis");
    r->rc = redisConnect("127.0.0.1", r->redis_port);
    cr_assert(r->rc != NULL && r->rc->err == 0);
}

static void
rig_stop(struct rig *r)
{
    int st = proc_stop(&r->gw, SIGTERM, 15000);

    redisFree(r->rc);
    proc_stop(&r->echo, SIGTERM, 5000);
    proc_stop(&r->redis, SIGTERM, 5000);
    unlink(r->cfg_path);
    unlink(r->key_path);
    free(r->cfg_path);
    free(r->key_path);
    cr_assert_eq(st, 0, "the gateway exited with %d", st);
}

/* What one request did: its status, the key the limiter wrote (what is
 * inside the hash tag, "api:user:alice"), the user and role upstream. */
struct seen {
    long status;
    char key[256];
    char *user;     /* X-User-Id the upstream got, or NULL; owned */
    char *auth;     /* Authorization the upstream got, or NULL; owned */
    char *role;     /* X-User-Role, or NULL; owned */
    char *www_auth; /* WWW-Authenticate of the answer, or NULL; owned */
    char *ctype;    /* Content-Type of the answer, or NULL; owned */
};

static void
seen_free(struct seen *s)
{
    free(s->user);
    free(s->auth);
    free(s->role);
    free(s->www_auth);
    free(s->ctype);
}

/* The one key in Redis, cut to its hash tag; "" if none. */
static void
only_key(redisContext *rc, char *out, size_t cap)
{
    redisReply *rep = redisCommand(rc, "KEYS *");
    const char *open, *close;

    out[0] = '\0';
    cr_assert(rep != NULL && rep->type == REDIS_REPLY_ARRAY);
    cr_assert_leq(rep->elements, 1, "one request, one key");
    if (rep->elements == 1) {
        open = strchr(rep->element[0]->str, '{');
        close = strchr(rep->element[0]->str, '}');
        cr_assert(open != NULL && close != NULL && close > open);
        snprintf(out, cap, "%.*s", (int)(close - open - 1), open + 1);
    }
    freeReplyObject(rep);
}

/* GET /api/x with 'token' (NULL: none) as a Bearer token. */
static void
request(struct rig *r, const char *token, struct seen *s)
{
    char *url = harness_strf("http://127.0.0.1:%u/api/x", r->port);
    char *auth = token != NULL ? harness_strf("Authorization: Bearer %s", token)
                               : harness_strf("X-None: 1");
    const char *headers[] = {auth, "X-User-Id: mallory",
                             "X-User-Role: superadmin", NULL};
    struct http_response resp;

    freeReplyObject(redisCommand(r->rc, "FLUSHALL"));
    memset(s, 0, sizeof(*s));
    http_request(&resp, "GET", url, headers, NULL, 0, 10000);
    s->status = resp.status;
    only_key(r->rc, s->key, sizeof(s->key));
    if (resp.status == 200) {
        s->user = echo_header(resp.body, "X-User-Id");
        s->auth = echo_header(resp.body, "Authorization");
        s->role = echo_header(resp.body, "X-User-Role");
    }
    s->www_auth = http_response_header(&resp, "WWW-Authenticate");
    s->ctype = http_response_header(&resp, "Content-Type");
    http_response_free(&resp);
    free(url);
    free(auth);
}

/* A valid token: the limiter and the upstream both see its user. */
static void
assert_user(struct rig *r, const char *token, const char *user,
            const char *role)
{
    struct seen s;
    char want[64];

    request(r, token, &s);
    snprintf(want, sizeof(want), "api:user:%s", user);
    cr_assert_eq(s.status, 200);
    cr_assert_str_eq(s.key, want);
    cr_assert_not_null(s.user);
    cr_assert_str_eq(s.user, user);
    if (role != NULL) {
        cr_assert_not_null(s.role);
        cr_assert_str_eq(s.role, role);
    } else {
        cr_assert_null(s.role, "upstream got role %s", s.role);
    }
    seen_free(&s);
}

/* An invalid (or no) token: no identity anywhere, the ip tier applies. */
static void
assert_anonymous(struct rig *r, const char *token, const char *what)
{
    struct seen s;

    request(r, token, &s);
    cr_assert_eq(s.status, 200, "%s: status %ld", what, s.status);
    cr_assert_str_eq(s.key, "api:ip:127.0.0.1", "%s", what);
    cr_assert_null(s.user, "%s: upstream got user %s", what, s.user);
    cr_assert_null(s.role, "%s: upstream got role %s", what, s.role);
    /* Nor a credential the caller was not taken for: an upstream that
     * accepted it would serve a user the limiter counted as an address. */
    cr_assert_null(s.auth, "%s: upstream got Authorization %s", what, s.auth);
    seen_free(&s);
}

static const char user_or_ip[] =
    "{ tiers: [ { key: user, limiter: big }, { key: ip, limiter: big } ] }";

static char *
claims(const char *sub, const char *extra)
{
    return harness_strf("{\"sub\":\"%s\",\"role\":\"admin\",\"iss\":\"https://"
                        "auth.example\",\"aud\":\"api\",\"exp\":%lld%s}",
                        sub, LATER, extra);
}

Test(jwt, valid_hs256_rs256_and_es256_tokens_name_the_user_everywhere,
     .timeout = 120)
{
    struct jt_pair rsa = jt_keygen("RSA");
    struct jt_pair ec = jt_keygen("P-256");
    const struct {
        const char *alg;
        const char *verify; /* the key file's content */
        const char *sign;   /* the signing key */
    } kinds[] = {
        {"HS256", JT_SECRET "\n", JT_SECRET},
        {"RS256", rsa.pub, rsa.priv},
        {"ES256", ec.pub, ec.priv},
    };

    for (size_t i = 0; i < 3; i++) {
        struct rig r;
        char *jwt = harness_strf(
            "{ algorithms: [%s], %s: @KEY@, issuer: 'https://auth.example', "
            "audience: api }",
            kinds[i].alg, i == 0 ? "secret_file" : "key_file");
        char *c = claims("alice", "");
        char *t = jt_sign_str(kinds[i].alg, kinds[i].sign, c);

        rig_start(&r, kinds[i].verify, jwt, user_or_ip);
        assert_user(&r, t, "alice", "admin");
        /* Without a token, the trusted peer's X-User-Id is not believed. */
        assert_anonymous(&r, NULL, "no token");
        rig_stop(&r);
        free(jwt);
        free(c);
        free(t);
    }
    jt_pair_free(&rsa);
    jt_pair_free(&ec);
}

Test(jwt, every_invalid_token_yields_no_identity, .timeout = 120)
{
    struct jt_pair rsa = jt_keygen("RSA");
    struct jt_pair other = jt_keygen("RSA");
    struct rig r;
    char *c = claims("alice", "");
    char *good = jt_sign_str("RS256", rsa.priv, c);
    char *expired_c = harness_strf(
        "{\"sub\":\"alice\",\"iss\":\"https://auth.example\",\"aud\":\"api\","
        "\"exp\":%lld}",
        EARLIER);
    char *nbf = harness_strf(",\"nbf\":%lld", LATER);
    char *early_c = claims("alice", nbf);
    char *big = malloc(10000);
    char *truncated = strdup(good);
    struct {
        const char *what;
        char *token;
    } bad[] = {
        {"expired", jt_sign_str("RS256", rsa.priv, expired_c)},
        {"not yet valid", jt_sign_str("RS256", rsa.priv, early_c)},
        {"wrong issuer",
         jt_sign_str("RS256", rsa.priv,
                     "{\"sub\":\"alice\",\"iss\":\"https://evil.example\","
                     "\"aud\":\"api\"}")},
        {"wrong audience",
         jt_sign_str("RS256", rsa.priv,
                     "{\"sub\":\"alice\",\"iss\":\"https://auth.example\","
                     "\"aud\":\"web\"}")},
        {"bad signature", jt_sign_str("RS256", other.priv, c)},
        {"alg none", jt_forge("{\"alg\":\"none\"}", c, "")},
        {"alg none, signed", jt_forge("{\"alg\":\"none\"}", c, "c2ln")},
        {"HS256 keyed with the RSA public key",
         jt_sign_str("HS256", rsa.pub, c)},
        {"truncated", truncated},
        {"oversized", NULL},
        {"exp as a string",
         jt_sign_str("RS256", rsa.priv,
                     "{\"sub\":\"alice\",\"iss\":\"https://auth.example\","
                     "\"aud\":\"api\",\"exp\":\"99999999999\"}")},
        {"sub as a number",
         jt_sign_str("RS256", rsa.priv,
                     "{\"sub\":42,\"iss\":\"https://auth.example\","
                     "\"aud\":\"api\"}")},
    };

    truncated[strlen(truncated) - 8] = '\0';
    snprintf(big, 10000,
             "{\"sub\":\"alice\",\"iss\":\"https://auth.example\","
             "\"aud\":\"api\",\"pad\":\"%0*d\"}",
             8500, 0);
    bad[9].token = jt_sign_str("RS256", rsa.priv, big);
    rig_start(&r, rsa.pub,
              "{ algorithms: [RS256], key_file: @KEY@, issuer: "
              "'https://auth.example', audience: api, leeway: 30s }",
              user_or_ip);
    /* The rig tells identities apart: the good token is a user. */
    assert_user(&r, good, "alice", "admin");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_anonymous(&r, bad[i].token, bad[i].what);
        free(bad[i].token);
    }
    rig_stop(&r);
    free(c);
    free(good);
    free(expired_c);
    free(early_c);
    free(nbf);
    free(big);
    jt_pair_free(&rsa);
    jt_pair_free(&other);
}

/* Two Authorization fields: which one is meant depends on the parser
 * (the first, the last, both), so the request is refused and its
 * connection closed, with or without a valid token among them. */
Test(jwt, a_repeated_token_field_is_refused, .timeout = 60)
{
    struct jt_pair rsa = jt_keygen("RSA");
    struct rig r;
    char *c = claims("dave", "");
    char *good = jt_sign_str("RS256", rsa.priv, c);
    const char *seconds[] = {"Bearer x.y.z", "Basic ZGF2ZTpkYXZl", NULL};

    rig_start(&r, rsa.pub,
              "{ algorithms: [RS256], key_file: @KEY@, issuer: "
              "'https://auth.example', audience: api }",
              user_or_ip);
    for (size_t i = 0; i < 3; i++) {
        const char *second = seconds[i] != NULL ? seconds[i] : "";
        char *req = harness_strf(
            "GET /api/x HTTP/1.1\r\nHost: x\r\n"
            "Authorization: Bearer %s\r\nAuthorization: %s\r\n\r\n"
            "GET /api/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            good, i < 2 ? second : (const char *)good);
        char *reply = raw_http(r.port, req, strlen(req), 5000);

        cr_assert_not_null(reply);
        cr_assert(strncmp(reply, "HTTP/1.1 400", 12) == 0, "%zu: %s", i, reply);
        cr_assert(strstr(reply + 12, "HTTP/1.1 ") == NULL,
                  "the connection went on after the refusal: %s", reply);
        free(reply);
        free(req);
    }
    /* One field with the same token passes. */
    assert_user(&r, good, "dave", "admin");
    rig_stop(&r);
    free(c);
    free(good);
    jt_pair_free(&rsa);
}

static long
echo_requests(struct rig *r)
{
    struct echo_stats st;

    cr_assert_eq(echo_stats(r->echo_port, &st), 0);
    return st.requests;
}

Test(jwt, required_token_missing_or_invalid_is_401_with_a_bearer_challenge,
     .timeout = 60)
{
    struct rig r;
    struct seen s;
    char *good = jt_sign_str("HS256", JT_SECRET, "{\"sub\":\"bob\"}");
    char *expired = harness_strf("{\"sub\":\"bob\",\"exp\":%lld}", EARLIER);
    char *old = jt_sign_str("HS256", JT_SECRET, expired);
    char *at_jwt = jt_forge_hs256("{\"alg\":\"HS256\",\"typ\":\"at+jwt\"}",
                                  "{\"sub\":\"bob\"}", JT_SECRET);

    rig_start(&r, JT_SECRET,
              "{ algorithms: [HS256], secret_file: @KEY@, required: true }",
              user_or_ip);
    request(&r, NULL, &s);
    cr_assert_eq(s.status, 401);
    cr_assert_str_eq(s.www_auth, "Bearer");
    cr_assert_str_eq(s.ctype, "application/problem+json");
    cr_assert_str_eq(s.key, "", "a refused request is not counted");
    seen_free(&s);
    request(&r, old, &s);
    cr_assert_eq(s.status, 401);
    cr_assert_str_eq(s.www_auth, "Bearer error=\"invalid_token\", "
                                 "error_description=\"expired\"");
    seen_free(&s);
    request(&r, "not-a-token", &s);
    cr_assert_eq(s.status, 401);
    cr_assert_not_null(strstr(s.www_auth, "error=\"invalid_token\""));
    seen_free(&s);
    /* An RFC 9068 access token, signed right: libjwt 1.10 refuses any
     * typ but JWT (README, identity.jwt). */
    request(&r, at_jwt, &s);
    cr_assert_eq(s.status, 401);
    cr_assert_str_eq(s.www_auth,
                     "Bearer error=\"invalid_token\", "
                     "error_description=\"malformed token or bad signature\"");
    seen_free(&s);
    cr_assert_eq(echo_requests(&r), 0, "nothing reached the upstream");
    /* A valid token passes, with no role claim: no role upstream. */
    assert_user(&r, good, "bob", NULL);
    rig_stop(&r);
    free(good);
    free(expired);
    free(old);
    free(at_jwt);
}

Test(jwt, a_claim_keys_the_bucket_and_picks_the_tier, .timeout = 60)
{
    struct rig r;
    struct seen s;
    char *a =
        jt_sign_str("HS256", JT_SECRET, "{\"sub\":\"ann\",\"plan\":\"free\"}");
    char *b = jt_sign_str("HS256", JT_SECRET,
                          "{\"sub\":\"ben\",\"plan\":[\"free\",\"x\"]}");
    char *c =
        jt_sign_str("HS256", JT_SECRET, "{\"sub\":\"cat\",\"plan\":\"pro\"}");
    char *url;
    char *auth[3];

    rig_start(&r, JT_SECRET, "{ algorithms: [HS256], secret_file: @KEY@ }",
              "{ tiers: [ { when: { claim: { plan: free } }, key: claim:plan, "
              "limiter: tiny }, { key: user, limiter: big } ] }");
    request(&r, a, &s);
    cr_assert_eq(s.status, 200);
    cr_assert_str_eq(s.key, "api:claim:plan:free");
    seen_free(&s);
    request(&r, c, &s);
    cr_assert_eq(s.status, 200);
    cr_assert_str_eq(s.key, "api:user:cat");
    seen_free(&s);
    /* Free callers share one bucket of 2: the third request is refused,
     * whoever sends it; the pro caller is not. */
    freeReplyObject(redisCommand(r.rc, "FLUSHALL"));
    url = harness_strf("http://127.0.0.1:%u/api/x", r.port);
    auth[0] = harness_strf("Authorization: Bearer %s", a);
    auth[1] = harness_strf("Authorization: Bearer %s", b);
    auth[2] = harness_strf("Authorization: Bearer %s", c);
    for (int i = 0; i < 3; i++) {
        const char *h[] = {auth[i == 2 ? 1 : i % 2], NULL};
        struct http_response resp;

        http_request(&resp, "GET", url, h, NULL, 0, 10000);
        cr_assert_eq(resp.status, i < 2 ? 200 : 429, "request %d: %ld", i,
                     resp.status);
        http_response_free(&resp);
    }
    {
        const char *h[] = {auth[2], NULL};
        struct http_response resp;

        http_request(&resp, "GET", url, h, NULL, 0, 10000);
        cr_assert_eq(resp.status, 200);
        http_response_free(&resp);
    }
    for (int i = 0; i < 3; i++) {
        free(auth[i]);
    }
    free(url);
    rig_stop(&r);
    free(a);
    free(b);
    free(c);
}

struct rotation {
    struct rig *r;
    const char *token;
};

/* The new key's token names its user: the reload is in force. */
static bool
new_key_in_force(void *arg)
{
    struct rotation *ro = arg;
    struct seen s;
    bool ok;

    request(ro->r, ro->token, &s);
    ok = strcmp(s.key, "api:user:new") == 0;
    seen_free(&s);
    return ok;
}

/* The value of the sample 'name' ("x_total{result=\"valid\"}") in
 * /metrics; -1 when there is none. */
static long
metric(struct rig *r, const char *name)
{
    char *url = harness_strf("http://127.0.0.1:%u/metrics", r->admin);
    char *want = harness_strf("\n%s ", name);
    struct http_response resp;
    const char *line;
    long n = -1;

    http_get(&resp, url, 10000);
    line = strstr(resp.body, want);
    if (line != NULL) {
        n = atol(line + strlen(want));
    }
    http_response_free(&resp);
    free(want);
    free(url);
    return n;
}

static long
cache_hits(struct rig *r)
{
    return metric(r, "sluice_jwt_cache_hits_total");
}

Test(jwt, a_reload_reads_a_rotated_key_and_forgets_cached_tokens,
     .timeout = 120)
{
    struct jt_pair k1 = jt_keygen("RSA");
    struct jt_pair k2 = jt_keygen("RSA");
    char *old = jt_sign_str("RS256", k1.priv, "{\"sub\":\"old\"}");
    char *new = jt_sign_str("RS256", k2.priv, "{\"sub\":\"new\"}");
    struct rotation ro;
    struct rig r;
    struct http_response resp;
    char *url;
    long before;

    rig_start(&r, k1.pub, "{ algorithms: [RS256], key_file: @KEY@ }",
              user_or_ip);
    assert_user(&r, old, "old", NULL);
    before = cache_hits(&r);
    cr_assert_geq(before, 0);
    assert_user(&r, old, "old", NULL);
    cr_assert_eq(cache_hits(&r), before + 1, "the second sight is a hit");
    assert_anonymous(&r, new, "a token of the next key, before rotation");

    write_over(r.key_path, k2.pub);
    url = harness_strf("http://127.0.0.1:%u/reload", r.admin);
    http_request(&resp, "POST", url, NULL, "", 0, 10000);
    cr_assert_eq(resp.status, 200, "%s", resp.body);
    http_response_free(&resp);
    free(url);
    ro.r = &r;
    ro.token = new;
    cr_assert(harness_wait_until(new_key_in_force, &ro, 10000));
    /* The old key's token was cached; the new verifier does not believe
     * it. */
    assert_anonymous(&r, old, "a token of the retired key");
    rig_stop(&r);
    free(old);
    free(new);
    jt_pair_free(&k1);
    jt_pair_free(&k2);
}

Test(jwt, cache_false_verifies_every_time_and_never_hits, .timeout = 60)
{
    struct jt_pair k = jt_keygen("RSA");
    char *tok = jt_sign_str("RS256", k.priv, "{\"sub\":\"alice\"}");
    struct rig r;

    rig_start(&r, k.pub,
              "{ algorithms: [RS256], key_file: @KEY@, cache: false }",
              user_or_ip);
    assert_user(&r, tok, "alice", NULL);
    assert_user(&r, tok, "alice", NULL);
    assert_user(&r, tok, "alice", NULL);
    cr_assert_eq(cache_hits(&r), 0, "cache: false remembers nothing");
    assert_anonymous(&r, "x.y.z", "a token that is not one");
    assert_anonymous(&r, NULL, "no token");
    cr_assert_eq(metric(&r, "sluice_jwt_tokens_total{result=\"valid\"}"), 3);
    cr_assert_eq(metric(&r, "sluice_jwt_tokens_total{result=\"invalid\"}"), 1);
    cr_assert_eq(metric(&r, "sluice_jwt_tokens_total{result=\"missing\"}"), 1);
    rig_stop(&r);
    free(tok);
    jt_pair_free(&k);
}

struct log_line {
    const struct proc *gw;
    const char *start; /* what the line holds first, "\"GET /api/a\"" */
    const char *end;   /* what it ends with, " user=alice proto=http" */
};

/* The access log has a line holding 'start' and ending in 'end'. */
static bool
log_has_line(void *arg)
{
    const struct log_line *l = arg;
    char *log = proc_log(l->gw);
    bool found = false;

    for (char *p = strstr(log, l->start); p != NULL && !found;
         p = strstr(p + 1, l->start)) {
        char *nl = strchr(p, '\n');
        size_t n = strlen(l->end);

        found = nl != NULL && (size_t)(nl - p) >= n &&
                memcmp(nl - n, l->end, n) == 0;
    }
    free(log);
    return found;
}

Test(jwt, the_access_log_names_the_decided_user, .timeout = 60)
{
    struct jt_pair k = jt_keygen("RSA");
    char *tok = jt_sign_str("RS256", k.priv, "{\"sub\":\"alice\"}");
    char *auth = harness_strf("Authorization: Bearer %s", tok);
    const char *with[] = {auth, "X-User-Id: mallory", NULL};
    const char *without[] = {"X-User-Id: mallory", NULL};
    struct log_line named = {NULL, "\"GET /api/a\"", " user=alice proto=http"};
    struct log_line none = {NULL, "\"GET /api/b\"", " user=- proto=http"};
    struct http_response resp;
    struct rig r;
    char *url;

    rig_start(&r, k.pub, "{ algorithms: [RS256], key_file: @KEY@ }",
              user_or_ip);
    named.gw = none.gw = &r.gw;
    url = harness_strf("http://127.0.0.1:%u/api/a", r.port);
    http_request(&resp, "GET", url, with, NULL, 0, 10000);
    cr_assert_eq(resp.status, 200);
    http_response_free(&resp);
    free(url);
    url = harness_strf("http://127.0.0.1:%u/api/b", r.port);
    http_request(&resp, "GET", url, without, NULL, 0, 10000);
    cr_assert_eq(resp.status, 200);
    http_response_free(&resp);
    free(url);
    cr_assert(harness_wait_until(log_has_line, &named, 10000),
              "no access-log line naming alice");
    cr_assert(harness_wait_until(log_has_line, &none, 10000),
              "no access-log line without a user for the tokenless request");
    rig_stop(&r);
    free(auth);
    free(tok);
    jt_pair_free(&k);
}

/* With server.underscores_in_headers, X_Access_Token is the token field
 * to a CGI upstream as much as X-Access-Token: the two together are one
 * field twice, refused; and an invalid token goes in neither spelling. */
Test(jwt, the_underscore_spelling_of_the_token_field_counts_too, .timeout = 60)
{
    struct jt_pair rsa = jt_keygen("RSA");
    struct rig r;
    char *c = claims("dave", "");
    char *good = jt_sign_str("RS256", rsa.priv, c);
    char *req = harness_strf("GET /api/x HTTP/1.1\r\nHost: x\r\n"
                             "X-Access-Token: %s\r\nX_Access_Token: %s\r\n"
                             "Connection: close\r\n\r\n",
                             good, good);
    char *reply;

    rig_server_extra = "  underscores_in_headers: true\n";
    rig_start(&r, rsa.pub,
              "{ algorithms: [RS256], key_file: @KEY@, issuer: "
              "'https://auth.example', audience: api, header: X-Access-Token }",
              user_or_ip);
    rig_server_extra = "";
    reply = raw_http(r.port, req, strlen(req), 5000);
    cr_assert_not_null(reply);
    cr_assert(strncmp(reply, "HTTP/1.1 400", 12) == 0, "%s", reply);
    free(reply);
    free(req);
    /* Invalid, alone: the upstream gets it in no spelling. */
    req = harness_strf("GET /api/x HTTP/1.1\r\nHost: x\r\n"
                       "X-Access-Token: x.y.z\r\nConnection: close\r\n\r\n");
    reply = raw_http(r.port, req, strlen(req), 5000);
    cr_assert_not_null(reply);
    cr_assert(strncmp(reply, "HTTP/1.1 200", 12) == 0, "%s", reply);
    cr_assert(strstr(reply, "x.y.z") == NULL,
              "the invalid token reached the upstream: %s", reply);
    free(reply);
    free(req);
    rig_stop(&r);
    free(c);
    free(good);
    jt_pair_free(&rsa);
}

/* With the token in a cookie, an invalid one is taken out of the Cookie
 * field the upstream gets; the other cookies stay. */
Test(jwt, an_invalid_token_in_a_cookie_is_not_forwarded, .timeout = 60)
{
    struct jt_pair rsa = jt_keygen("RSA");
    struct rig r;
    const char *req = "GET /api/x HTTP/1.1\r\nHost: x\r\n"
                      "Cookie: a=1; tok=x.y.z; b=2\r\n"
                      "Connection: close\r\n\r\n";
    char *reply;

    rig_start(&r, rsa.pub,
              "{ algorithms: [RS256], key_file: @KEY@, issuer: "
              "'https://auth.example', audience: api, cookie: tok }",
              user_or_ip);
    reply = raw_http(r.port, req, strlen(req), 5000);
    cr_assert_not_null(reply);
    cr_assert(strncmp(reply, "HTTP/1.1 200", 12) == 0, "%s", reply);
    cr_assert(strstr(reply, "x.y.z") == NULL,
              "the invalid token reached the upstream: %s", reply);
    cr_assert(strstr(reply, "a=1; b=2") != NULL,
              "the other cookies did not: %s", reply);
    free(reply);
    rig_stop(&r);
    jt_pair_free(&rsa);
}
