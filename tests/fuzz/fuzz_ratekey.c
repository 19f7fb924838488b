/*
 * fuzz_ratekey.c - libFuzzer target for forwarded_client() and then
 * ratekey_tier() and ratekey_build() over the tiers of a fixed config
 * (loaded once, from the text below), whose key prefix, limiter name and
 * scope are as long as the loader allows. The input is lines split on
 * LF: the socket peer, the trusted CIDR blocks (comma-separated; those
 * that do not parse are left out), the user id, the role, the query, then
 * "Name: value" header lines. The X-Forwarded-For lines are joined with
 * ", " in order into the one value that is walked.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "forwarded.h"
#include "fuzz.h"
#include "headers.h"
#include "netaddr.h"
#include "ratekey.h"
#include "xmalloc.h"

/* 64 bytes each: the longest prefix, limiter name and scope. */
#define PREFIX                                                                 \
    "sluice-fuzz:0123456789abcdef0123456789abcdef0123456789abcdef012:"
#define LONG_NAME                                                              \
    "limiter-0123456789abcdef0123456789abcdef0123456789abcdef01234567"
#define LONG_SCOPE                                                             \
    "scope_0123456789abcdef0123456789abcdef0123456789abcdef0123456789"

_Static_assert(sizeof(PREFIX) == 65 && sizeof(LONG_NAME) == 65 &&
                   sizeof(LONG_SCOPE) == 65,
               "the longest names");

/* Every kind of key part, alone and four at once. */
static const char config_yaml[] =
    "redis:\n"
    "  url: redis://127.0.0.1:6379\n"
    "  key_prefix: '" PREFIX "'\n"
    "limiters:\n"
    "  " LONG_NAME ":\n"
    "    algorithm: token_bucket\n"
    "    rate: 10/s\n"
    "  short:\n"
    "    algorithm: fixed_window\n"
    "    limit: 5\n"
    "    window: 1s\n"
    "routes:\n"
    "  - id: tiers\n"
    "    uri: http://127.0.0.1:9000\n"
    "    filters:\n"
    "      - name: RequestRateLimiter\n"
    "        args:\n"
    "          scope: " LONG_SCOPE "\n"
    "          tiers:\n"
    "            - when: {role: admin}\n"
    "              limiter: none\n"
    "            - when: {role: gold}\n"
    "              key: user+role\n"
    "              limiter: " LONG_NAME "\n"
    "            - key: ip+header:X-K+query:q+cookie:c\n"
    "              limiter: " LONG_NAME "\n"
    "            - key: ip\n"
    "              limiter: short\n"
    "  - id: single\n"
    "    uri: http://127.0.0.1:9000\n"
    "    filters:\n"
    "      - name: RequestRateLimiter\n"
    "        args: {key: 'header:X-Api-Key', limiter: short}\n"
    "      - name: RequestRateLimiter\n"
    "        args: {key: 'query:api_key', limiter: short}\n"
    "      - name: RequestRateLimiter\n"
    "        args: {key: 'cookie:session', limiter: short}\n"
    "      - name: RequestRateLimiter\n"
    "        args: {key: user, limiter: short}\n"
    "      - name: RequestRateLimiter\n"
    "        args: {key: route+role, limiter: short}\n";

static struct config *cfg; /* loaded once, never freed */

/* One request read from an input. */
struct input {
    char *peer;            /* owned, like every string here; NULL: absent */
    char *trusted;         /* "a/n, b/m" */
    char *user;            /* the identity, as if believed */
    char *role;            /* same */
    char *query;           /* raw, without '?' */
    char *xff;             /* the X-Forwarded-For lines, joined */
    struct headers fields; /* every header line, X-Forwarded-For too */
    struct cidr cidrs[16]; /* the blocks of 'trusted' that parse */
    size_t ncidrs;         /* entries in 'cidrs' */
};

/* The next line of [*p, end) as a C string (cut at a NUL), or NULL. */
static char *
next_string(const char **p, const char *end)
{
    const char *s = *p;
    const char *nl;
    size_t len;

    if (s == NULL) {
        return NULL;
    }
    nl = memchr(s, '\n', (size_t)(end - s));
    len = nl != NULL ? (size_t)(nl - s) : (size_t)(end - s);
    *p = nl != NULL ? nl + 1 : NULL;
    return xstrndup(s, len);
}

static void
read_trusted(struct input *in)
{
    char *list = in->trusted;

    while (list != NULL && in->ncidrs < 16) {
        char *comma = strchr(list, ',');
        char *item = list;

        if (comma != NULL) {
            *comma = '\0';
        }
        item += strspn(item, " \t");
        if (netaddr_parse_cidr(item, &in->cidrs[in->ncidrs]) == 0) {
            in->ncidrs++;
        }
        list = comma != NULL ? comma + 1 : NULL;
    }
}

static void
input_init(struct input *in, const uint8_t *data, size_t size)
{
    const char *end = (const char *)data + size;
    const char *p = (const char *)data;
    char *line;

    memset(in, 0, sizeof(*in));
    headers_init(&in->fields);
    in->peer = next_string(&p, end);
    in->trusted = next_string(&p, end);
    in->user = next_string(&p, end);
    in->role = next_string(&p, end);
    in->query = next_string(&p, end);
    while ((line = next_string(&p, end)) != NULL) {
        char *colon = strchr(line, ':');
        const char *value;

        if (colon != NULL) {
            *colon = '\0';
            value = colon + 1 + (colon[1] == ' ');
            headers_add(&in->fields, line, value);
            if (strcasecmp(line, "X-Forwarded-For") == 0) {
                char *joined = in->xff == NULL
                                   ? xstrdup(value)
                                   : xasprintf("%s, %s", in->xff, value);

                free(in->xff);
                in->xff = joined;
            }
        }
        free(line);
    }
    read_trusted(in);
}

static void
input_deinit(struct input *in)
{
    free(in->peer);
    free(in->trusted);
    free(in->user);
    free(in->role);
    free(in->query);
    free(in->xff);
    headers_deinit(&in->fields);
}

static bool
same_addr(const struct netaddr *a, const struct netaddr *b)
{
    return a->family == b->family && memcmp(a->bytes, b->bytes, 16) == 0;
}

/* Entry 'i' of the 'n' comma-separated entries of 'xff', as an address. */
static bool
entry(const char *xff, size_t i, struct netaddr *out)
{
    char tmp[64];
    const char *s = xff;
    size_t len;

    for (size_t k = 0; k < i; k++) {
        s = strchr(s, ',') + 1;
    }
    len = strcspn(s, ",");
    while (len > 0 && (*s == ' ' || *s == '\t')) {
        s++;
        len--;
    }
    while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t')) {
        len--;
    }
    if (len == 0 || len >= sizeof(tmp)) {
        return false;
    }
    memcpy(tmp, s, len);
    tmp[len] = '\0';
    return netaddr_parse(tmp, out) == 0;
}

/*
 * The client is the peer, unless the peer is trusted and X-Forwarded-For
 * is there: then the rightmost entry that is not trusted, or the leftmost
 * when all are, or the last good one before an entry that is not an
 * address (the peer, if that is the rightmost). Walked here by index.
 */
static void
check_client(const struct input *in, const struct netaddr *peer,
             const struct netaddr *got)
{
    struct netaddr want = *peer;
    size_t n = 1;

    if (in->xff != NULL && forwarded_is_trusted(peer, in->cidrs, in->ncidrs)) {
        for (const char *c = in->xff; (c = strchr(c, ',')) != NULL; c++) {
            n++;
        }
        for (size_t i = n; i-- > 0;) {
            struct netaddr a;

            if (!entry(in->xff, i, &a)) {
                break;
            }
            want = a;
            if (!forwarded_is_trusted(&a, in->cidrs, in->ncidrs)) {
                break;
            }
        }
    }
    FUZZ_CHECK(same_addr(got, &want));
}

static bool
value_byte(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
           (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '~' ||
           c == '@' || c == '-';
}

static bool
upper_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F');
}

/* One part's value: escaped and short, or "#" and 32 hex digits. */
static void
check_value(const char *v, size_t n)
{
    FUZZ_CHECK(n > 0);
    if (v[0] == '#') {
        FUZZ_CHECK(n == 33);
        for (size_t i = 1; i < n; i++) {
            FUZZ_CHECK((v[i] >= '0' && v[i] <= '9') ||
                       (v[i] >= 'a' && v[i] <= 'f'));
        }
        return;
    }
    FUZZ_CHECK(n <= RATEKEY_MAX_VALUE);
    for (size_t i = 0; i < n; i++) {
        if (v[i] == '%') {
            FUZZ_CHECK(i + 2 < n && upper_hex(v[i + 1]) && upper_hex(v[i + 2]));
            i += 2;
        } else {
            FUZZ_CHECK(value_byte(v[i]));
        }
    }
}

/*
 * "<prefix><limiter>:<tag>:{<scope>:<key text>:<values>}": the fixed part
 * as configured, one brace of each kind, the values joined by '+'.
 */
static void
check_key(const char *key, const struct tier *t, const char *scope)
{
    size_t len = strlen(key);
    char *head =
        xasprintf("%s%s:%s:{%s:%s:", cfg->redis.key_prefix, t->limiter->name,
                  t->limiter->tag, scope, t->key.text);
    size_t hlen = strlen(head);
    const char *v;
    size_t parts = 0;

    FUZZ_CHECK(len < RATEKEY_MAX);
    FUZZ_CHECK(strncmp(key, head, hlen) == 0 && len > hlen);
    FUZZ_CHECK(key[len - 1] == '}');
    FUZZ_CHECK(strchr(key, '{') == strrchr(key, '{'));
    FUZZ_CHECK(strchr(key, '}') == key + len - 1);
    v = key + hlen;
    while (v < key + len - 1) {
        size_t n = strcspn(v, "+}");

        check_value(v, n);
        parts++;
        v += n;
        if (*v == '+') {
            v++;
            FUZZ_CHECK(*v != '}');
        }
    }
    FUZZ_CHECK(parts == t->key.nparts);
    free(head);
}

/* Every tier of 'rl' for 'who'; the one ratekey_tier() picks builds. */
static void
check_limiter(const struct rate_limit_conf *rl, const struct caller *who)
{
    const struct tier *picked = ratekey_tier(rl, who);
    char buf[RATEKEY_MAX];

    FUZZ_CHECK(picked == NULL ||
               (picked >= rl->tiers && picked < rl->tiers + rl->ntiers));
    if (picked != NULL && picked->when_role != NULL) {
        FUZZ_CHECK(who->role != NULL &&
                   strcmp(who->role, picked->when_role) == 0);
    }
    for (size_t i = 0; i < rl->ntiers; i++) {
        const struct tier *t = &rl->tiers[i];
        bool built;

        if (t->limiter == NULL) {
            continue;
        }
        memset(buf, 'x', sizeof(buf));
        built = ratekey_build(t, who, cfg->redis.key_prefix, rl->scope, buf);
        FUZZ_CHECK(built || t != picked);
        if (built) {
            check_key(buf, t, rl->scope);
        } else {
            FUZZ_CHECK(buf[0] == '\0');
        }
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct input in;
    struct netaddr peer;
    struct netaddr client;
    struct caller who;

    if (cfg == NULL) {
        struct config_errors errs;

        config_errors_init(&errs);
        cfg =
            config_parse(config_yaml, strlen(config_yaml), "fuzz.yaml", &errs);
        if (cfg == NULL) {
            fprintf(stderr, "fuzz_ratekey: %s\n", errs.v[0]);
            abort();
        }
        config_errors_deinit(&errs);
    }
    input_init(&in, data, size);
    if (in.peer == NULL || netaddr_parse(in.peer, &peer) < 0) {
        netaddr_parse("127.0.0.1", &peer);
    }
    forwarded_client(&peer, in.xff, in.cidrs, in.ncidrs, &client);
    check_client(&in, &peer, &client);

    who.client = &client;
    who.user = in.user;
    who.role = in.role;
    who.headers = &in.fields;
    who.query = in.query;
    /* Any prefix, the out-of-range ones included. */
    who.ipv6_prefix = (unsigned)(size % 131);
    for (size_t r = 0; r < cfg->nroutes; r++) {
        for (size_t k = 0; k < cfg->routes[r].nrate_limiters; k++) {
            check_limiter(cfg->routes[r].rate_limiters[k], &who);
        }
    }
    input_deinit(&in);
    return 0;
}
