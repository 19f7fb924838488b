/*
 * identity.jwt in gateway.yaml, and the claims it lets a rate limiter
 * use: what loads, and each mistake reported with its position. Keys are
 * written by the test into temporary files.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../support/jwtsign.h"
#include "config.h"
#include "jwtcheck.h"
#include "xmalloc.h"

/* 'content' in a new temporary file; the caller unlinks and frees. */
static char *
temp_file(const char *content)
{
    char *path = xstrdup("/tmp/sluice-jwt-XXXXXX");
    int fd = mkstemp(path);

    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, content, strlen(content)), (ssize_t)strlen(content));
    close(fd);
    return path;
}

/* A config whose identity.jwt is 'jwt' (flow mapping) and whose one
 * route has the rate limiter 'filter' (or none). */
static char *
yaml_of(const char *jwt, const char *filter)
{
    return xasprintf("limiters:\n"
                     "  l: {algorithm: gcra, rate: 5/s}\n"
                     "identity:\n"
                     "  jwt: %s\n"
                     "routes:\n"
                     "  - id: r\n"
                     "    uri: http://x\n"
                     "    filters: [%s]\n",
                     jwt, filter != NULL ? filter : "");
}

static struct config *
load(const char *yaml, struct config_errors *e)
{
    config_errors_init(e);
    return config_parse(yaml, strlen(yaml), "t.yaml", e);
}

/* Exactly one error, which starts with 'prefix' and contains 'also'. */
static void
assert_error(const char *yaml, const char *prefix, const char *also)
{
    struct config_errors e;
    struct config *cfg = load(yaml, &e);

    cr_assert_null(cfg, "accepted: %s", yaml);
    cr_assert_eq(e.n, 1, "%zu errors, first: %s", e.n, e.n > 0 ? e.v[0] : "");
    cr_assert(strncmp(e.v[0], prefix, strlen(prefix)) == 0,
              "\"%s\" does not start with \"%s\"", e.v[0], prefix);
    cr_assert_not_null(strstr(e.v[0], also), "\"%s\" lacks \"%s\"", e.v[0],
                       also);
    config_errors_deinit(&e);
}

static struct config *
load_ok(const char *yaml)
{
    struct config_errors e;
    struct config *cfg = load(yaml, &e);

    cr_assert_not_null(cfg, "refused: %s", e.n > 0 ? e.v[0] : "");
    config_errors_deinit(&e);
    return cfg;
}

Test(load_identity, hs256_with_a_secret_file_loads_with_its_defaults)
{
    char *secret = temp_file(JT_SECRET "\n");
    char *jwt = xasprintf("{algorithms: [HS256], secret_file: %s}", secret);
    char *yaml = yaml_of(jwt, NULL);
    struct config *cfg = load_ok(yaml);
    const struct jwtcheck_conf *c = cfg->identity.jwt;

    cr_assert_not_null(c);
    cr_assert_not_null(c->verifier);
    cr_assert_eq(c->algorithms, JWTCHECK_HS256);
    cr_assert_str_eq(c->header, "Authorization");
    cr_assert_null(c->cookie);
    cr_assert_str_eq(c->user_claim, "sub");
    cr_assert_str_eq(c->role_claim, "role");
    cr_assert_eq(c->leeway_ms, 0);
    cr_assert_not(c->required);
    config_unref(cfg);
    unlink(secret);
    free(secret);
    free(jwt);
    free(yaml);
}

Test(load_identity, rs256_with_every_key_loads)
{
    struct jt_pair kp = jt_keygen("RSA");
    char *key = temp_file(kp.pub);
    char *jwt =
        xasprintf("{cookie: session, algorithms: [RS256, RS512], key_file: %s, "
                  "issuer: 'https://auth.example', audience: api, leeway: 30s, "
                  "user_claim: uid, role_claim: roles, required: true}",
                  key);
    char *yaml = yaml_of(jwt, NULL);
    struct config *cfg = load_ok(yaml);
    const struct jwtcheck_conf *c = cfg->identity.jwt;

    cr_assert_eq(c->algorithms, JWTCHECK_RS256 | JWTCHECK_RS512);
    cr_assert_null(c->header);
    cr_assert_str_eq(c->cookie, "session");
    cr_assert_str_eq(c->issuer, "https://auth.example");
    cr_assert_str_eq(c->audience, "api");
    cr_assert_eq(c->leeway_ms, 30000);
    cr_assert_str_eq(c->user_claim, "uid");
    cr_assert_str_eq(c->role_claim, "roles");
    cr_assert(c->required);
    config_unref(cfg);
    unlink(key);
    free(key);
    free(jwt);
    free(yaml);
    jt_pair_free(&kp);
}

/* Each broken identity.jwt, one error each, at its key. */
Test(load_identity, each_mistake_is_reported_at_its_key)
{
    struct jt_pair kp = jt_keygen("RSA");
    char *pem = temp_file(kp.pub);
    char *secret = temp_file(JT_SECRET);
    char *empty = temp_file("\n");
    char *junk = temp_file("-----BEGIN PUBLIC KEY-----\nnope\n");
    const struct {
        char *jwt;
        const char *prefix;
        const char *also;
    } cases[] = {
        {xasprintf("{algorithms: [RS256], key_file: %s}", junk),
         "t.yaml:4:40: identity.jwt.key_file: ", "not a PEM public key"},
        {xasprintf("{algorithms: [HS256], secret_file: %s}", empty),
         "t.yaml:4:43: identity.jwt.secret_file: ", "the file is empty"},
        {xasprintf("{algorithms: [HS256], secret_file: /nonexistent/s}"),
         "t.yaml:4:43: identity.jwt.secret_file: ",
         "cannot read: No such file"},
        {xasprintf("{algorithms: [RS256], key_file: %s, secret_file: %s}", pem,
                   secret),
         "t.yaml:4:", "key_file and secret_file are exclusive"},
        {xasprintf("{algorithms: [RS256]}"),
         "t.yaml:4:8: identity.jwt.key_file", "required (or secret_file"},
        {xasprintf("{algorithms: [HS256, RS256], key_file: %s}", pem),
         "t.yaml:4:21: identity.jwt.algorithms: ",
         "HS algorithms cannot be mixed with RS or ES ones"},
        {xasprintf("{algorithms: [RS256, ES256], key_file: %s}", pem),
         "t.yaml:4:21: identity.jwt.algorithms: ",
         "RS and ES algorithms cannot share one key"},
        {xasprintf("{algorithms: [HS256], key_file: %s}", pem),
         "t.yaml:4:40: identity.jwt.key_file: ",
         "HS algorithms take a secret_file"},
        {xasprintf("{algorithms: [RS256], secret_file: %s}", secret),
         "t.yaml:4:43: identity.jwt.secret_file: ",
         "RS and ES algorithms take a key_file"},
        {xasprintf("{algorithms: [ES256], key_file: %s}", pem),
         "t.yaml:4:40: identity.jwt.key_file: ", "need an EC key"},
        {xasprintf("{algorithms: [HS257], secret_file: %s}", secret),
         "t.yaml:4:22: identity.jwt.algorithms[0]: ",
         "unknown algorithm \"HS257\""},
        {xasprintf("{algorithms: [none], secret_file: %s}", secret),
         "t.yaml:4:22: identity.jwt.algorithms[0]: ",
         "refused algorithm \"none\""},
        {xasprintf("{algorithms: [], secret_file: %s}", secret),
         "t.yaml:4:21: identity.jwt.algorithms: ", "empty"},
        {xasprintf("{secret_file: %s}", secret),
         "t.yaml:4:8: identity.jwt.algorithms: ", "required"},
        {xasprintf("{algorithms: [HS256], secret_file: %s, leeway: -1s}",
                   secret),
         "t.yaml:4:", "identity.jwt.leeway: bad duration \"-1s\""},
        {xasprintf("{algorithms: [HS256], secret_file: %s, leeway: 2h}",
                   secret),
         "t.yaml:4:", "identity.jwt.leeway: at most 1h"},
        {xasprintf("{algorithms: [HS256], secret_file: %s, header: X-T, "
                   "cookie: t}",
                   secret),
         "t.yaml:4:", "header and cookie are exclusive"},
        {xasprintf("{algorithms: [HS256], secret_file: %s, header: 'a b'}",
                   secret),
         "t.yaml:4:", "identity.jwt.header: bad name \"a b\""},
        {xasprintf("{algorithms: [HS256], secret_file: %s, user_claim: ''}",
                   secret),
         "t.yaml:4:", "identity.jwt.user_claim: empty value"},
        {xasprintf("{algorithms: [HS256], secret_file: %s, requird: true}",
                   secret),
         "t.yaml:4:", "unknown key \"requird\" (did you mean \"required\"?)"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *yaml = yaml_of(cases[i].jwt, NULL);

        assert_error(yaml, cases[i].prefix, cases[i].also);
        free(yaml);
        free(cases[i].jwt);
    }
    unlink(pem);
    unlink(secret);
    unlink(empty);
    unlink(junk);
    free(pem);
    free(secret);
    free(empty);
    free(junk);
    jt_pair_free(&kp);
}

static const char rl_claim[] =
    "{name: RequestRateLimiter, args: {tiers: ["
    "{when: {claim: {plan: free, region: eu}}, key: claim:plan+user, "
    "limiter: l}, {when: {role: admin, claim: {plan: pro}}, limiter: none}, "
    "{key: ip, limiter: l}]}}";

Test(load_identity, claims_serve_as_key_parts_and_tier_conditions)
{
    char *secret = temp_file(JT_SECRET);
    char *jwt = xasprintf("{algorithms: [HS256], secret_file: %s}", secret);
    char *yaml = yaml_of(jwt, rl_claim);
    struct config *cfg = load_ok(yaml);
    const struct rate_limit_conf *rl = cfg->routes[0].rate_limiters[0];
    const struct tier *t = &rl->tiers[0];

    cr_assert_eq(rl->ntiers, 3);
    cr_assert_eq(t->nwhen_claims, 2);
    cr_assert_str_eq(t->when_claims[0].name, "plan");
    cr_assert_str_eq(t->when_claims[0].value, "free");
    cr_assert_str_eq(t->when_claims[1].name, "region");
    cr_assert_str_eq(t->when_claims[1].value, "eu");
    cr_assert_null(t->when_role);
    cr_assert_eq(t->key.parts[0].kind, KEY_CLAIM);
    cr_assert_str_eq(t->key.parts[0].name, "plan");
    cr_assert_str_eq(t->key.text, "claim:plan+user");
    cr_assert_str_eq(rl->tiers[1].when_role, "admin");
    cr_assert_eq(rl->tiers[1].nwhen_claims, 1);
    config_unref(cfg);
    unlink(secret);
    free(secret);
    free(jwt);
    free(yaml);
}

Test(load_identity, claims_without_identity_jwt_are_refused)
{
    static const char head[] = "limiters:\n"
                               "  l: {algorithm: gcra, rate: 5/s}\n"
                               "routes:\n"
                               "  - id: r\n"
                               "    uri: http://x\n"
                               "    filters:\n"
                               "      - ";
    char *a = xasprintf("%s{name: RequestRateLimiter, args: {key: claim:plan, "
                        "limiter: l}}\n",
                        head);
    char *b = xasprintf("%s{name: RequestRateLimiter, args: {tiers: [{when: "
                        "{claim: {plan: free}}, key: ip, limiter: l}]}}\n",
                        head);
    char *c = xasprintf("%s{name: RequestRateLimiter, args: {key: 'claim:', "
                        "limiter: l}}\n",
                        head);

    assert_error(a, "t.yaml:7:48: routes[0].filters[0].args.key: ",
                 "claim:plan needs identity.jwt");
    assert_error(b,
                 "t.yaml:7:66: routes[0].filters[0].args.tiers[0].when."
                 "claim: ",
                 "needs identity.jwt");
    assert_error(c, "t.yaml:7:48: routes[0].filters[0].args.key: ",
                 "claim needs a name (claim:NAME)");
    free(a);
    free(b);
    free(c);
}

Test(load_identity, a_claim_condition_must_name_claims_and_values)
{
    char *secret = temp_file(JT_SECRET);
    char *jwt = xasprintf("{algorithms: [HS256], secret_file: %s}", secret);
    char *empty = yaml_of(
        jwt, "{name: RequestRateLimiter, args: {tiers: [{when: {claim: {}}, "
             "key: ip, limiter: l}]}}");
    char *scalar = yaml_of(
        jwt, "{name: RequestRateLimiter, args: {tiers: [{when: {claim: plan}, "
             "key: ip, limiter: l}]}}");
    char *blank = yaml_of(
        jwt, "{name: RequestRateLimiter, args: {tiers: [{when: {claim: {plan: "
             "''}}, key: ip, limiter: l}]}}");

    assert_error(empty, "t.yaml:8:", "expected at least one claim");
    assert_error(scalar, "t.yaml:8:",
                 "expected a mapping of claim: value, got a scalar");
    assert_error(blank, "t.yaml:8:", "when.claim.plan: empty claim value");
    unlink(secret);
    free(secret);
    free(jwt);
    free(empty);
    free(scalar);
    free(blank);
}

/* A key file that is no file: a FIFO blocked the loader (and a reload the
 * main thread) until someone wrote to it; a directory read as empty. */
Test(load_identity, a_key_file_that_is_not_a_regular_file_is_refused,
     .timeout = 20)
{
    char dir[] = "/tmp/sluice-jwt-dir-XXXXXX";
    char *fifo, *jwt, *yaml;

    cr_assert_not_null(mkdtemp(dir));
    fifo = xasprintf("%s/key", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    jwt = xasprintf("{algorithms: [HS256], secret_file: %s}", fifo);
    yaml = yaml_of(jwt, NULL);
    assert_error(
        yaml, "t.yaml:4:43: identity.jwt.secret_file: ", "not a regular file");
    free(yaml);
    free(jwt);
    jwt = xasprintf("{algorithms: [HS256], secret_file: %s}", dir);
    yaml = yaml_of(jwt, NULL);
    assert_error(
        yaml, "t.yaml:4:43: identity.jwt.secret_file: ", "not a regular file");
    free(yaml);
    free(jwt);
    unlink(fifo);
    rmdir(dir);
    free(fifo);
}
