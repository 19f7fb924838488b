/*
 * fuzz_router.c - libFuzzer target for path_normalize() and router_match()
 * over a fixed set of routes (loaded once from the text below). The input
 * is a request as lines split on LF: the request target (path, then
 * "?query"; any bytes, NUL included), the method, the Host header, the
 * client address, then "Name: value" header lines. Missing lines are left
 * out of the request. Path patterns are also checked against a plain
 * recursive matcher written from glob.h's definition.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fuzz.h"
#include "headers.h"
#include "netaddr.h"
#include "path.h"
#include "predicate.h"
#include "router.h"
#include "xmalloc.h"

/* Every kind of predicate, patterns with '*', '**' and {vars}. */
static const char routes_yaml[] =
    "routes:\n"
    "  - id: user\n"
    "    uri: http://127.0.0.1:9000\n"
    "    predicates:\n"
    "      - Path=/api/users/{id}, /api/users/{id}/items/{item}\n"
    "      - Method=GET, HEAD\n"
    "  - id: files\n"
    "    uri: http://127.0.0.1:9000\n"
    "    predicates:\n"
    "      - Path=/static/**, /img/*.png, /a/**/z\n"
    "  - id: host\n"
    "    uri: http://127.0.0.1:9000\n"
    "    predicates:\n"
    "      - Host=**.example.org, api.*.test\n"
    "      - Path=/v1/{rest}/**, /*.v/{n}\n"
    "  - id: header\n"
    "    uri: http://127.0.0.1:9000\n"
    "    predicates:\n"
    "      - Header=X-Api-Version, v[0-9]+\n"
    "      - Query=debug, (on|1)\n"
    "  - id: query\n"
    "    uri: http://127.0.0.1:9000\n"
    "    predicates:\n"
    "      - Query=q\n"
    "      - Header=X-Present\n"
    "      - Method=POST\n"
    "  - id: remote\n"
    "    uri: http://127.0.0.1:9000\n"
    "    predicates:\n"
    "      - RemoteAddr=10.0.0.0/8, 2001:db8::/32\n"
    "      - Path=/internal/**\n"
    "  - id: trailing\n"
    "    uri: http://127.0.0.1:9000\n"
    "    predicates:\n"
    "      - Path=/exact/, /{a}/{b}/{c}/{d}/{e}/{f}/{g}/{h}\n"
    "  - id: stars\n"
    "    uri: http://127.0.0.1:9000\n"
    "    predicates:\n"
    "      - Path=/**/x/**/{v}/*.y, /a*b*/**/c*, /**/**/{w}\n"
    "  - id: cookie\n"
    "    uri: http://127.0.0.1:9000\n"
    "    predicates:\n"
    "      - Cookie=session, [a-f0-9]+\n"
    "      - Cookie=theme\n"
    "  - id: time\n"
    "    uri: http://127.0.0.1:9000\n"
    "    predicates:\n"
    "      - After=2017-01-20T17:42:47.789-07:00[America/Denver]\n"
    "      - Before=2037-01-20T17:42:47Z\n"
    "      - Path=/t/**\n"
    "  - id: between\n"
    "    uri: http://127.0.0.1:9000\n"
    "    predicates:\n"
    "      - Between=2020-01-01T00:00:00Z, 2030-01-01T00:00:00+01:00\n"
    "  - id: heavy\n"
    "    uri: http://127.0.0.1:9000\n"
    "    predicates: [ 'Weight=canary, 8', 'Path=/w/**' ]\n"
    "  - id: light\n"
    "    uri: http://127.0.0.1:9000\n"
    "    predicates: [ 'Weight=canary, 2', 'Path=/w/**' ]\n"
    "  - id: xff\n"
    "    uri: http://127.0.0.1:9000\n"
    "    predicates:\n"
    "      - XForwardedRemoteAddr=192.168.0.0/16, ::1/128\n";

static struct config *cfg; /* loaded once, never freed */

/* One request read from an input. */
struct input {
    const char *target; /* the first line; not NUL-terminated */
    size_t target_len;  /* its bytes */
    char *method;       /* owned, like every string below */
    char *host;
    char *client;
    struct headers fields;
};

/* The next line of [*p, end): its start, and its length in '*len'. */
static const char *
next_line(const char **p, const char *end, size_t *len)
{
    const char *s = *p;
    const char *nl;

    if (s == NULL) {
        return NULL;
    }
    nl = memchr(s, '\n', (size_t)(end - s));
    if (nl == NULL) {
        *len = (size_t)(end - s);
        *p = NULL;
    } else {
        *len = (size_t)(nl - s);
        *p = nl + 1;
    }
    return s;
}

/* The next line as a C string (cut at a NUL), or NULL past the end. */
static char *
next_string(const char **p, const char *end)
{
    size_t len;
    const char *s = next_line(p, end, &len);

    return s != NULL ? xstrndup(s, len) : NULL;
}

static void
input_init(struct input *in, const uint8_t *data, size_t size)
{
    const char *end = (const char *)data + size;
    const char *p = (const char *)data;
    char *line;

    memset(in, 0, sizeof(*in));
    headers_init(&in->fields);
    in->target = next_line(&p, end, &in->target_len);
    in->method = next_string(&p, end);
    in->host = next_string(&p, end);
    in->client = next_string(&p, end);
    while ((line = next_string(&p, end)) != NULL) {
        char *colon = strchr(line, ':');

        if (colon != NULL) {
            *colon = '\0';
            headers_add(&in->fields, line, colon + 1 + (colon[1] == ' '));
        }
        free(line);
    }
}

static void
input_deinit(struct input *in)
{
    free(in->method);
    free(in->host);
    free(in->client);
    headers_deinit(&in->fields);
}

static bool
is_hex_upper(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F');
}

static bool
is_unreserved(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
           (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
           c == '~';
}

static int
hex_value(char c)
{
    return c <= '9' ? c - '0' : c - 'A' + 10;
}

/*
 * What a normalised path is: absolute, no empty, "." or ".." segment but
 * a trailing slash, no segment starting ".;" or "..;", every escape "%XX"
 * in upper case of a byte that is neither unreserved nor NUL, and no
 * longer than what it came from.
 */
static void
check_normal(const char *path, size_t raw_len)
{
    size_t n = strlen(path);

    FUZZ_CHECK(path[0] == '/' && n <= raw_len);
    FUZZ_CHECK(strstr(path, "//") == NULL);
    for (const char *seg = path + 1; seg <= path + n;) {
        size_t len = strcspn(seg, "/");

        FUZZ_CHECK(!(len == 1 && seg[0] == '.'));
        FUZZ_CHECK(!(len == 2 && seg[0] == '.' && seg[1] == '.'));
        /* Nor one Tomcat would read as a dot-segment: ".;x", "..;". */
        FUZZ_CHECK(!(len >= 2 && seg[0] == '.' && seg[1] == ';'));
        FUZZ_CHECK(
            !(len >= 3 && seg[0] == '.' && seg[1] == '.' && seg[2] == ';'));
        seg += len + 1;
    }
    for (size_t i = 0; i < n; i++) {
        if (path[i] == '%') {
            int c;

            FUZZ_CHECK(i + 2 < n && is_hex_upper(path[i + 1]) &&
                       is_hex_upper(path[i + 2]));
            c = hex_value(path[i + 1]) * 16 + hex_value(path[i + 2]);
            FUZZ_CHECK(c != 0 && !is_unreserved((char)c));
        }
    }
}

/* Longest path, in segments, checked against ref_match(). */
#define REF_SEGMENTS_MAX 48

/* The '/'-separated segments of 's' (a leading '/' gives an empty one). */
struct segments {
    const char *v[REF_SEGMENTS_MAX + 1]; /* starts, in 's' */
    size_t len[REF_SEGMENTS_MAX + 1];    /* lengths */
    size_t n;                            /* entries */
};

/* False when 's' has more than REF_SEGMENTS_MAX segments. */
static bool
split(const char *s, struct segments *out)
{
    out->n = 0;
    for (;;) {
        size_t len = strcspn(s, "/");

        if (out->n == REF_SEGMENTS_MAX + 1) {
            return false;
        }
        out->v[out->n] = s;
        out->len[out->n++] = len;
        if (s[len] == '\0') {
            return true;
        }
        s += len + 1;
    }
}

/* One segment against one with '*', by plain recursion. */
static bool
ref_segment(const char *p, size_t pn, const char *s, size_t sn)
{
    if (pn == 0) {
        return sn == 0;
    }
    if (*p == '*') {
        return ref_segment(p + 1, pn - 1, s, sn) ||
               (sn > 0 && ref_segment(p, pn, s + 1, sn - 1));
    }
    return sn > 0 && *p == *s && ref_segment(p + 1, pn - 1, s + 1, sn - 1);
}

/*
 * The pattern language of glob.h, written as its definition rather than
 * as glob.c's backtracking: "**" takes zero or more segments, "{name}"
 * exactly one non-empty segment, any other segment one segment.
 */
static bool
ref_from(const struct segments *p, size_t i, const struct segments *s, size_t j)
{
    size_t pl;

    if (i == p->n) {
        return j == s->n;
    }
    pl = p->len[i];
    if (pl == 2 && p->v[i][0] == '*' && p->v[i][1] == '*') {
        return ref_from(p, i + 1, s, j) ||
               (j < s->n && ref_from(p, i, s, j + 1));
    }
    if (j == s->n) {
        return false;
    }
    if (pl >= 2 && p->v[i][0] == '{' && p->v[i][pl - 1] == '}') {
        return s->len[j] > 0 && ref_from(p, i + 1, s, j + 1);
    }
    return ref_segment(p->v[i], pl, s->v[j], s->len[j]) &&
           ref_from(p, i + 1, s, j + 1);
}

/* Every Path pattern of every route matches 'path' as the reference
 * says (paths of more than REF_SEGMENTS_MAX segments are left out). */
static void
check_patterns(const char *path)
{
    struct segments ps;
    struct segments ss;

    if (!split(path, &ss)) {
        return;
    }
    for (size_t r = 0; r < cfg->nroutes; r++) {
        const struct route *route = &cfg->routes[r];

        for (size_t k = 0; k < route->npredicates; k++) {
            const struct predicate *pr = &route->predicates[k];

            for (size_t i = 0; pr->kind == PREDICATE_PATH && i < pr->nvalues;
                 i++) {
                FUZZ_CHECK(split(pr->values[i], &ps));
                FUZZ_CHECK(glob_match(pr->values[i], path, '/', NULL) ==
                           ref_from(&ps, 0, &ss, 0));
            }
        }
    }
}

/* The predicates of 'r' all hold for 'req'. */
static bool
route_holds(const struct route *r, const struct request_view *req)
{
    struct glob_vars vars;

    for (size_t i = 0; i < r->npredicates; i++) {
        if (!predicate_test(&r->predicates[i], req, &vars)) {
            return false;
        }
    }
    return true;
}

/* The first route whose predicates hold; its variables lie in the path. */
static void
check_match(const struct request_view *req)
{
    struct glob_vars vars;
    const struct route *r = router_match(cfg->routes, cfg->nroutes, req, &vars);
    size_t plen = strlen(req->path);
    char *expanded;
    size_t i;

    for (i = 0; i < cfg->nroutes && &cfg->routes[i] != r; i++) {
        FUZZ_CHECK(!route_holds(&cfg->routes[i], req));
    }
    if (r == NULL) {
        FUZZ_CHECK(vars.n == 0);
        return;
    }
    FUZZ_CHECK(i < cfg->nroutes && route_holds(r, req));
    FUZZ_CHECK(vars.n <= GLOB_MAX_VARS);
    for (size_t k = 0; k < vars.n; k++) {
        const struct glob_var *v = &vars.v[k];

        FUZZ_CHECK(v->value >= req->path &&
                   v->value + v->value_len <= req->path + plen);
        FUZZ_CHECK(v->value_len > 0 &&
                   memchr(v->value, '/', v->value_len) == NULL);
        FUZZ_CHECK(v->name_len > 0);
    }
    expanded = glob_expand("/x/{id}/{item}/{rest}", &vars);
    FUZZ_CHECK(expanded != NULL && expanded[0] == '/');
    free(expanded);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct input in;
    struct netaddr client;
    struct request_view req;
    const char *query;
    size_t path_len;
    char *q = NULL;
    char *path = NULL;
    char *again = NULL;
    enum path_status st;

    if (cfg == NULL) {
        struct config_errors errs;

        config_errors_init(&errs);
        cfg =
            config_parse(routes_yaml, strlen(routes_yaml), "fuzz.yaml", &errs);
        if (cfg == NULL) {
            fprintf(stderr, "fuzz_router: %s\n", errs.v[0]);
            abort();
        }
        config_errors_deinit(&errs);
    }
    input_init(&in, data, size);
    if (in.target == NULL) {
        input_deinit(&in);
        return 0;
    }
    query = memchr(in.target, '?', in.target_len);
    path_len = query != NULL ? (size_t)(query - in.target) : in.target_len;
    st = path_normalize(in.target, path_len, &path);
    FUZZ_CHECK(st == PATH_OK || st == PATH_NOT_ABSOLUTE ||
               st == PATH_BAD_ESCAPE || st == PATH_ABOVE_ROOT ||
               st == PATH_DOT_PARAMS);
    FUZZ_CHECK(path_status_str(st) != NULL);
    if (st != PATH_OK) {
        FUZZ_CHECK(path == NULL);
        input_deinit(&in);
        return 0;
    }
    check_normal(path, path_len);
    /* Idempotent: what the predicates saw is what the upstream gets, and
     * an upstream that normalises again sees the same. */
    FUZZ_CHECK(path_normalize(path, strlen(path), &again) == PATH_OK);
    FUZZ_CHECK(strcmp(again, path) == 0);
    free(again);
    /* What routes match: no parameter, no empty segment but a trailing
     * one, and itself again once more. */
    again = path_without_params(path);
    FUZZ_CHECK(again[0] == '/' && strchr(again, ';') == NULL &&
               strstr(again, "//") == NULL && strlen(again) <= strlen(path));
    {
        char *twice = path_without_params(again);

        FUZZ_CHECK(strcmp(twice, again) == 0);
        free(twice);
    }
    free(again);

    if (in.client == NULL || netaddr_parse(in.client, &client) < 0) {
        netaddr_parse("10.1.2.3", &client);
    }
    memset(&req, 0, sizeof(req));
    /* The time and the draw from the input's size and first bytes: every
     * side of After, Before, Between and Weight is reached. */
    req.now_ms = 1500000000000LL + (int64_t)(size % 64) * 31536000000LL / 4;
    for (size_t i = 0; i < size && i < 8; i++) {
        req.draw = req.draw << 8 | data[i];
    }
    req.method = in.method != NULL ? in.method : "GET";
    req.path = path;
    if (query != NULL) {
        /* Up to the end of the line, cut at a NUL as a C string is. */
        q = xstrndup(query + 1, in.target_len - path_len - 1);
    }
    req.query = q;
    req.host = in.host;
    req.headers = &in.fields;
    req.client = &client;
    check_patterns(path);
    check_match(&req);
    free(q);
    free(path);
    input_deinit(&in);
    return 0;
}
