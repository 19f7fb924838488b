#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "filter.h"
#include "xmalloc.h"

#define NARGS(a) (sizeof(a) / sizeof((a)[0]))

static const struct kind_spec *
spec_named(const char *name)
{
    size_t n;
    const struct kind_spec *specs = filter_specs(&n);

    for (size_t i = 0; i < n; i++) {
        if (strcmp(specs[i].name, name) == 0) {
            return &specs[i];
        }
    }
    cr_assert_fail("no filter called %s", name);
    return NULL;
}

static struct filter
make(const char *name, const char *const *args, size_t nargs)
{
    struct filter f;
    char err[256] = "";

    cr_assert_eq(
        filter_init(&f, spec_named(name), args, nargs, err, sizeof(err)), 0,
        "%s refused: %s", name, err);
    return f;
}

/* Expects filter_init() to fail with exactly 'want' and leave 'f' empty. */
static void
assert_refused(const char *name, const char *const *args, size_t nargs,
               const char *want)
{
    struct filter f;
    char err[256] = "";

    cr_assert_eq(
        filter_init(&f, spec_named(name), args, nargs, err, sizeof(err)), -1,
        "%s accepted its arguments", name);
    cr_assert_str_eq(err, want);
    cr_assert_null(f.name);
    cr_assert_null(f.value);
    cr_assert_null(f.re);
    filter_deinit(&f);
}

static void
outgoing_init(struct outgoing *out, const char *path,
              const struct glob_vars *vars)
{
    out->path = xstrdup(path);
    out->query = NULL;
    headers_init(&out->headers);
    out->preserve_host = false;
    out->vars = vars;
}

static void
outgoing_deinit(struct outgoing *out)
{
    free(out->path);
    free(out->query);
    headers_deinit(&out->headers);
}

/* A response filter over 'h' alone, status 200, no client context. */
static int
apply_response(const struct filter *f, struct headers *h)
{
    struct response_edit r = {200, "OK", h, NULL, "/"};

    filter_apply_response(f, &r);
    return r.status;
}

/* Runs one request filter over 'path' and checks the resulting path. */
static void
assert_path(const char *name, const char *const *args, size_t nargs,
            const char *path, const struct glob_vars *vars, const char *want)
{
    struct filter f = make(name, args, nargs);
    struct outgoing out;

    outgoing_init(&out, path, vars);
    filter_apply_request(&f, &out);
    cr_assert_str_eq(out.path, want, "%s on \"%s\"", name, path);
    outgoing_deinit(&out);
    filter_deinit(&f);
}

static void
dump(const struct headers *h, char *buf, size_t len)
{
    size_t used = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < h->n; i++) {
        int m = snprintf(buf + used, len - used, "%s%s: %s", i ? "|" : "",
                         h->v[i].name, h->v[i].value);

        cr_assert(m > 0 && (size_t)m < len - used);
        used += (size_t)m;
    }
}

static void
var(struct glob_vars *vars, const char *name, const char *value)
{
    struct glob_var *v = &vars->v[vars->n++];

    v->name = name;
    v->name_len = strlen(name);
    v->value = value;
    v->value_len = strlen(value);
}

Test(filter, table_lists_spring_names_and_arguments)
{
    static const char *const want[] = {"StripPrefix",
                                       "PrefixPath",
                                       "RewritePath",
                                       "SetPath",
                                       "AddRequestHeader",
                                       "SetRequestHeader",
                                       "RemoveRequestHeader",
                                       "AddResponseHeader",
                                       "SetResponseHeader",
                                       "RemoveResponseHeader",
                                       "PreserveHostHeader",
                                       "AddRequestParameter",
                                       "RemoveRequestParameter",
                                       "MapRequestHeader",
                                       "SetRequestHostHeader",
                                       "DedupeResponseHeader",
                                       "RewriteResponseHeader",
                                       "RewriteLocationResponseHeader",
                                       "SecureHeaders",
                                       "SetStatus",
                                       "RedirectTo",
                                       "RequestSize",
                                       "RequestHeaderSize",
                                       "Retry"};
    size_t n = 0;
    const struct kind_spec *specs = filter_specs(&n);

    cr_assert_eq(n, NARGS(want));
    for (size_t i = 0; i < n; i++) {
        cr_assert_str_eq(specs[i].name, want[i]);
    }
    cr_assert_eq(spec_named("StripPrefix")->kind, FILTER_STRIP_PREFIX);
    cr_assert_str_eq(spec_named("StripPrefix")->args[0].name, "parts");
    cr_assert_str_eq(spec_named("PrefixPath")->args[0].name, "prefix");
    cr_assert_str_eq(spec_named("RewritePath")->args[0].name, "regexp");
    cr_assert_str_eq(spec_named("RewritePath")->args[1].name, "replacement");
    cr_assert_str_eq(spec_named("SetPath")->args[0].name, "template");
    cr_assert_str_eq(spec_named("SetResponseHeader")->args[1].name, "value");
    cr_assert_eq(spec_named("RemoveRequestHeader")->nargs, 1);
    cr_assert_eq(spec_named("PreserveHostHeader")->nargs, 0);
    cr_assert_eq(spec_named("PreserveHostHeader")->kind,
                 FILTER_PRESERVE_HOST_HEADER);
}

/* Spring's override false: the upstream's own field stays alone. */
Test(filter, add_response_header_with_override_false_keeps_the_upstreams)
{
    static const char *const args[] = {"X-B", "White", "false"};
    struct filter f = make("AddResponseHeader", args, 3);
    struct headers h;

    headers_init(&h);
    apply_response(&f, &h);
    cr_assert_str_eq(headers_get(&h, "X-B"), "White");
    headers_deinit(&h);
    headers_init(&h);
    headers_add(&h, "X-B", "Black");
    apply_response(&f, &h);
    cr_assert_str_eq(headers_get(&h, "X-B"), "Black");
    cr_assert_eq(headers_count(&h, "X-B"), 1);
    headers_deinit(&h);
    filter_deinit(&f);
}

Test(filter, strip_prefix_drops_leading_segments)
{
    const char *one[] = {"1"};
    const char *two[] = {"2"};
    const char *zero[] = {"0"};

    assert_path("StripPrefix", one, 1, "/a/b/c", NULL, "/b/c");
    assert_path("StripPrefix", two, 1, "/a/b/c", NULL, "/c");
    assert_path("StripPrefix", zero, 1, "/a/b/c", NULL, "/a/b/c");
}

Test(filter, strip_prefix_keeps_a_trailing_slash)
{
    const char *one[] = {"1"};

    assert_path("StripPrefix", one, 1, "/a/b/", NULL, "/b/");
    assert_path("StripPrefix", one, 1, "/a/b/c/", NULL, "/b/c/");
}

Test(filter, strip_prefix_of_every_segment_leaves_the_root)
{
    const char *one[] = {"1"};
    const char *three[] = {"3"};
    const char *five[] = {"5"};

    assert_path("StripPrefix", three, 1, "/a/b/c", NULL, "/");
    assert_path("StripPrefix", five, 1, "/a/b/c", NULL, "/");
    assert_path("StripPrefix", one, 1, "/a/", NULL, "/");
    assert_path("StripPrefix", one, 1, "/a", NULL, "/");
    assert_path("StripPrefix", one, 1, "/", NULL, "/");
}

Test(filter, strip_prefix_without_argument_drops_one_like_spring)
{
    struct filter f = make("StripPrefix", NULL, 0);

    cr_assert_eq(f.parts, 1);
    filter_deinit(&f);
    assert_path("StripPrefix", NULL, 0, "/svc/users", NULL, "/users");
}

Test(filter, prefix_path_prepends)
{
    const char *api[] = {"/api"};
    const char *slashed[] = {"/api/"};

    assert_path("PrefixPath", api, 1, "/users/7", NULL, "/api/users/7");
    assert_path("PrefixPath", api, 1, "/", NULL, "/api/");
    assert_path("PrefixPath", slashed, 1, "/users", NULL, "/api/users");
}

Test(filter, rewrite_path_follows_the_spring_example)
{
    const char *args[] = {"/red/?(?<segment>.*)", "/$\\{segment}"};

    assert_path("RewritePath", args, 2, "/red/blue", NULL, "/blue");
    assert_path("RewritePath", args, 2, "/red/blue/green", NULL, "/blue/green");
    assert_path("RewritePath", args, 2, "/blue", NULL, "/blue");
}

Test(filter, rewrite_path_to_nothing_gives_the_root)
{
    const char *args[] = {"/red(.*)", "$1"};

    assert_path("RewritePath", args, 2, "/red", NULL, "/");
}

Test(filter, rewrite_path_result_gets_a_leading_slash)
{
    const char *args[] = {"^/api/(?<rest>.*)$", "${rest}"};

    assert_path("RewritePath", args, 2, "/api/users/7", NULL, "/users/7");
}

Test(filter, set_path_expands_uri_variables)
{
    const char *args[] = {"/v2/{segment}/info"};
    const char *fixed[] = {"/fixed"};
    struct glob_vars vars = {.n = 0};

    var(&vars, "other", "x");
    var(&vars, "segment", "bar");
    assert_path("SetPath", args, 1, "/foo/bar", &vars, "/v2/bar/info");
    assert_path("SetPath", fixed, 1, "/foo/bar", &vars, "/fixed");
}

Test(filter, add_request_header_appends_with_variables_expanded)
{
    const char *args[] = {"X-Segment", "seg={segment}"};
    const char *plain[] = {"X-Gateway", "sluice"};
    struct glob_vars vars = {.n = 0};
    struct filter f = make("AddRequestHeader", args, 2);
    struct filter g = make("AddRequestHeader", plain, 2);
    struct outgoing out;
    char buf[256];

    var(&vars, "segment", "blue");
    outgoing_init(&out, "/red/blue", &vars);
    headers_add(&out.headers, "X-Segment", "old");
    filter_apply_request(&f, &out);
    filter_apply_request(&g, &out);
    dump(&out.headers, buf, sizeof(buf));
    cr_assert_str_eq(buf, "X-Segment: old|X-Segment: seg=blue|"
                          "X-Gateway: sluice");
    cr_assert_str_eq(out.path, "/red/blue");
    cr_assert_not(out.preserve_host);
    outgoing_deinit(&out);
    filter_deinit(&f);
    filter_deinit(&g);
}

Test(filter, set_request_header_replaces_every_field_of_that_name)
{
    const char *args[] = {"X-Request-Red", "Blue"};
    struct filter f = make("SetRequestHeader", args, 2);
    struct outgoing out;
    char buf[256];

    outgoing_init(&out, "/", NULL);
    headers_add(&out.headers, "x-request-red", "1");
    headers_add(&out.headers, "Accept", "*/*");
    headers_add(&out.headers, "X-REQUEST-RED", "2");
    filter_apply_request(&f, &out);
    dump(&out.headers, buf, sizeof(buf));
    cr_assert_str_eq(buf, "Accept: */*|X-Request-Red: Blue");
    outgoing_deinit(&out);
    filter_deinit(&f);
}

Test(filter, remove_request_header_removes_every_field_of_that_name)
{
    const char *args[] = {"Cookie"};
    struct filter f = make("RemoveRequestHeader", args, 1);
    struct outgoing out;
    char buf[256];

    outgoing_init(&out, "/", NULL);
    headers_add(&out.headers, "cookie", "a=1");
    headers_add(&out.headers, "Accept", "*/*");
    headers_add(&out.headers, "COOKIE", "b=2");
    filter_apply_request(&f, &out);
    dump(&out.headers, buf, sizeof(buf));
    cr_assert_str_eq(buf, "Accept: */*");
    outgoing_deinit(&out);
    filter_deinit(&f);
}

Test(filter, header_variables_missing_from_the_match_expand_to_nothing)
{
    const char *args[] = {"X-Id", "id={id}"};
    struct filter f = make("SetRequestHeader", args, 2);
    struct outgoing out;

    outgoing_init(&out, "/", NULL);
    filter_apply_request(&f, &out);
    cr_assert_str_eq(headers_get(&out.headers, "x-id"), "id=");
    outgoing_deinit(&out);
    filter_deinit(&f);
}

Test(filter, preserve_host_header_sets_the_flag)
{
    struct filter f = make("PreserveHostHeader", NULL, 0);
    struct outgoing out;

    outgoing_init(&out, "/a", NULL);
    filter_apply_request(&f, &out);
    cr_assert(out.preserve_host);
    cr_assert_str_eq(out.path, "/a");
    cr_assert_eq(out.headers.n, 0);
    cr_assert_not(filter_is_response(&f));
    outgoing_deinit(&out);
    filter_deinit(&f);
}

Test(filter, response_filters_edit_the_response_headers)
{
    const char *add[] = {"X-Served-By", "sluice"};
    const char *set[] = {"Cache-Control", "no-store"};
    const char *rm[] = {"Server"};
    struct filter fa = make("AddResponseHeader", add, 2);
    struct filter fs = make("SetResponseHeader", set, 2);
    struct filter fr = make("RemoveResponseHeader", rm, 1);
    struct headers h;
    char buf[256];

    cr_assert(filter_is_response(&fa));
    cr_assert(filter_is_response(&fs));
    cr_assert(filter_is_response(&fr));
    headers_init(&h);
    headers_add(&h, "Server", "upstream/1.0");
    headers_add(&h, "cache-control", "max-age=60");
    headers_add(&h, "X-Served-By", "backend");
    apply_response(&fa, &h);
    apply_response(&fs, &h);
    apply_response(&fr, &h);
    dump(&h, buf, sizeof(buf));
    cr_assert_str_eq(buf, "X-Served-By: backend|X-Served-By: sluice|"
                          "Cache-Control: no-store");
    headers_deinit(&h);
    filter_deinit(&fa);
    filter_deinit(&fs);
    filter_deinit(&fr);
}

Test(filter, each_side_ignores_the_other_sides_filters)
{
    const char *resp[] = {"X-Resp", "1"};
    const char *req[] = {"X-Req", "1"};
    const char *strip[] = {"1"};
    struct filter fresp = make("SetResponseHeader", resp, 2);
    struct filter freq = make("SetRequestHeader", req, 2);
    struct filter fstrip = make("StripPrefix", strip, 1);
    struct outgoing out;
    struct headers h;

    cr_assert_not(filter_is_response(&freq));
    cr_assert_not(filter_is_response(&fstrip));
    outgoing_init(&out, "/a/b", NULL);
    headers_init(&h);
    filter_apply_request(&fresp, &out);
    apply_response(&freq, &h);
    apply_response(&fstrip, &h);
    cr_assert_str_eq(out.path, "/a/b");
    cr_assert_eq(out.headers.n, 0);
    cr_assert_eq(h.n, 0);
    headers_deinit(&h);
    outgoing_deinit(&out);
    filter_deinit(&fresp);
    filter_deinit(&freq);
    filter_deinit(&fstrip);
}

Test(filter, wrong_argument_counts_are_refused)
{
    const char *a3[] = {"a", "b", "c"};

    assert_refused("StripPrefix", a3, 2,
                   "StripPrefix: expects 0 to 1 arguments (parts), got 2");
    assert_refused("PrefixPath", a3, 0,
                   "PrefixPath: expects 1 argument (prefix), got 0");
    assert_refused("RewritePath", a3, 3,
                   "RewritePath: expects 2 arguments (regexp, replacement), "
                   "got 3");
    assert_refused("AddRequestHeader", a3, 1,
                   "AddRequestHeader: expects 2 arguments (name, value), "
                   "got 1");
    assert_refused("RemoveResponseHeader", a3, 2,
                   "RemoveResponseHeader: expects 1 argument (name), got 2");
    assert_refused("PreserveHostHeader", a3, 1,
                   "PreserveHostHeader: takes no arguments, got 1");
}

Test(filter, strip_prefix_parts_must_be_a_small_non_negative_integer)
{
    static const char *const bad[] = {
        "-1", "65", "abc", "", "1.5", "+1", " 1", "1 ", "99999999999999999999"};
    const char *ok[] = {"64"};
    struct filter f;
    char want[128];

    for (size_t i = 0; i < NARGS(bad); i++) {
        snprintf(want, sizeof(want),
                 "StripPrefix: parts must be an integer from 0 to 64, got "
                 "\"%s\"",
                 bad[i]);
        assert_refused("StripPrefix", &bad[i], 1, want);
    }
    f = make("StripPrefix", ok, 1);
    cr_assert_eq(f.parts, 64);
    filter_deinit(&f);
}

Test(filter, paths_must_start_with_a_slash)
{
    const char *prefix[] = {"api"};
    const char *tmpl[] = {"{segment}"};
    const char *spaced[] = {"/a b"};
    const char *ctl[] = {"/a\r\nX: y"};

    assert_refused("PrefixPath", prefix, 1,
                   "PrefixPath: prefix must start with '/', got \"api\"");
    assert_refused("SetPath", tmpl, 1,
                   "SetPath: template must start with '/', got "
                   "\"{segment}\"");
    assert_refused("PrefixPath", spaced, 1,
                   "PrefixPath: prefix contains a space or control "
                   "character");
    assert_refused("SetPath", ctl, 1,
                   "SetPath: template contains a space or control "
                   "character");
}

Test(filter, header_names_must_be_tokens)
{
    const char *add[] = {"X Bad", "v"};
    const char *rm[] = {"X:Y"};
    const char *empty[] = {"", "v"};

    assert_refused("AddRequestHeader", add, 2,
                   "AddRequestHeader: \"X Bad\" is not a valid header name");
    assert_refused("RemoveResponseHeader", rm, 1,
                   "RemoveResponseHeader: \"X:Y\" is not a valid header "
                   "name");
    assert_refused("SetResponseHeader", empty, 2,
                   "SetResponseHeader: \"\" is not a valid header name");
}

Test(filter, header_values_with_line_breaks_are_refused_at_load)
{
    const char *crlf[] = {"X-A", "v\r\nX-Injected: 1"};
    const char *lf[] = {"X-A", "v\nw"};
    const char *ctl[] = {"X-A", "bell\a"};
    const char *tab[] = {"X-A", "a\tb"};
    struct filter f;

    assert_refused("AddRequestHeader", crlf, 2,
                   "AddRequestHeader: value contains a line break");
    assert_refused("SetResponseHeader", lf, 2,
                   "SetResponseHeader: value contains a line break");
    assert_refused("SetRequestHeader", ctl, 2,
                   "SetRequestHeader: value contains a control character");
    f = make("AddResponseHeader", tab, 2);
    cr_assert_str_eq(f.value, "a\tb");
    filter_deinit(&f);
}

Test(filter, rewrite_path_regexp_must_compile)
{
    const char *args[] = {"/red/(?<segment>.*", "/$\\{segment}"};

    assert_refused("RewritePath", args, 2,
                   "RewritePath: regexp: missing closing parenthesis at "
                   "offset 18");
}

Test(filter, rewrite_path_replacement_must_name_existing_groups)
{
    const char *name[] = {"/red/(?<segment>.*)", "/$\\{segmnet}"};
    const char *num[] = {"/red/(.*)", "/$2"};
    const char *spaced[] = {"/red/(.*)", "/a b/$1"};

    assert_refused("RewritePath", name, 2,
                   "RewritePath: replacement: unknown group \"segmnet\"");
    assert_refused("RewritePath", num, 2,
                   "RewritePath: replacement: unknown group 2 (the pattern "
                   "has 1)");
    assert_refused("RewritePath", spaced, 2,
                   "RewritePath: replacement contains a space or control "
                   "character");
}

Test(filter, null_argument_is_refused)
{
    const char *args[] = {"X-A", NULL};

    assert_refused("AddRequestHeader", args, 2,
                   "AddRequestHeader: value is missing");
}

/* ---- the filters Spring Cloud Gateway users rely on ---- */

#define A(...) ((const char *const[]){__VA_ARGS__})
#define N(...) (sizeof(A(__VA_ARGS__)) / sizeof(const char *))
#define MAKE(name, ...) make(name, A(__VA_ARGS__), N(__VA_ARGS__))
#define REFUSED(name, want, ...)                                               \
    assert_refused(name, A(__VA_ARGS__), N(__VA_ARGS__), want)

/* Runs request filter 'f' over query 'query' and returns the new one. */
static char *
query_after(const struct filter *f, const char *query,
            const struct glob_vars *vars)
{
    struct outgoing out;
    char *q;

    outgoing_init(&out, "/", vars);
    out.query = query != NULL ? xstrdup(query) : NULL;
    filter_apply_request(f, &out);
    q = out.query;
    out.query = NULL;
    outgoing_deinit(&out);
    return q;
}

Test(filter, add_request_parameter_appends_percent_encoded)
{
    struct filter f = MAKE("AddRequestParameter", "red", "blue");
    struct filter g = MAKE("AddRequestParameter", "a b&c", "x=y/{seg}é");
    struct glob_vars vars = {.n = 0};
    char *q;

    cr_assert(!filter_is_response(&f));
    q = query_after(&f, NULL, NULL);
    cr_assert_str_eq(q, "red=blue");
    free(q);
    q = query_after(&f, "x=1", NULL);
    cr_assert_str_eq(q, "x=1&red=blue");
    free(q);
    q = query_after(&f, "x=1&", NULL);
    cr_assert_str_eq(q, "x=1&red=blue");
    free(q);
    var(&vars, "seg", "s 1");
    q = query_after(&g, NULL, &vars);
    cr_assert_str_eq(q, "a%20b%26c=x%3Dy%2Fs%201%C3%A9");
    free(q);
    filter_deinit(&f);
    filter_deinit(&g);
    REFUSED("AddRequestParameter", "AddRequestParameter: empty parameter name",
            "", "v");
}

Test(filter, remove_request_parameter_removes_every_spelling_of_the_name)
{
    struct filter f = MAKE("RemoveRequestParameter", "red");
    char *q;

    q = query_after(&f, "red=1&blue=2&r%65d=3&red&redder=4", NULL);
    cr_assert_str_eq(q, "blue=2&redder=4");
    free(q);
    q = query_after(&f, "red=1", NULL);
    cr_assert_null(q, "an emptied query goes away");
    q = query_after(&f, NULL, NULL);
    cr_assert_null(q);
    filter_deinit(&f);
}

Test(filter, map_request_header_copies_every_value)
{
    struct filter f = MAKE("MapRequestHeader", "Blue", "X-Request-Red");
    struct outgoing out;
    char buf[256];

    outgoing_init(&out, "/", NULL);
    filter_apply_request(&f, &out);
    cr_assert_eq(out.headers.n, 0, "no Blue: no effect");
    headers_add(&out.headers, "X-Request-Red", "old");
    headers_add(&out.headers, "blue", "b1");
    headers_add(&out.headers, "Blue", "b2");
    filter_apply_request(&f, &out);
    dump(&out.headers, buf, sizeof(buf));
    cr_assert_str_eq(buf, "X-Request-Red: old|blue: b1|Blue: b2|"
                          "X-Request-Red: b1|X-Request-Red: b2");
    outgoing_deinit(&out);
    filter_deinit(&f);
    REFUSED("MapRequestHeader",
            "MapRequestHeader: \"X Red\" is not a valid header name", "Blue",
            "X Red");
}

Test(filter, set_request_host_header_replaces_host_and_preserves_it)
{
    struct filter f = MAKE("SetRequestHostHeader", "example.org");
    struct outgoing out;

    outgoing_init(&out, "/", NULL);
    headers_add(&out.headers, "Host", "client.test");
    filter_apply_request(&f, &out);
    cr_assert(out.preserve_host);
    cr_assert_str_eq(headers_get(&out.headers, "Host"), "example.org");
    cr_assert_eq(headers_count(&out.headers, "Host"), 1);
    outgoing_deinit(&out);
    filter_deinit(&f);
    REFUSED("SetRequestHostHeader",
            "SetRequestHostHeader: \"a/b\" is not a host (name or address, "
            "optional :port)",
            "a/b");
}

static void
dedupe_case(const char *strategy, const char *want)
{
    struct filter f =
        strategy != NULL
            ? MAKE("DedupeResponseHeader",
                   "Access-Control-Allow-Credentials "
                   "Access-Control-Allow-Origin",
                   strategy)
            : MAKE("DedupeResponseHeader", "Access-Control-Allow-Credentials "
                                           "Access-Control-Allow-Origin");
    struct headers h;
    char buf[512];

    headers_init(&h);
    headers_add(&h, "Access-Control-Allow-Origin", "https://a");
    headers_add(&h, "Vary", "Origin");
    headers_add(&h, "access-control-allow-origin", "https://b");
    headers_add(&h, "Access-Control-Allow-Origin", "https://a");
    headers_add(&h, "Access-Control-Allow-Credentials", "true");
    cr_assert(filter_is_response(&f));
    apply_response(&f, &h);
    dump(&h, buf, sizeof(buf));
    cr_assert_str_eq(buf, want, "%s", strategy != NULL ? strategy : "default");
    headers_deinit(&h);
    filter_deinit(&f);
}

Test(filter, dedupe_response_header_retains_as_the_strategy_says)
{
    dedupe_case(NULL, "Vary: Origin|Access-Control-Allow-Credentials: true|"
                      "Access-Control-Allow-Origin: https://a");
    dedupe_case("RETAIN_FIRST",
                "Vary: Origin|Access-Control-Allow-Credentials: true|"
                "Access-Control-Allow-Origin: https://a");
    dedupe_case("RETAIN_LAST",
                "Vary: Origin|Access-Control-Allow-Credentials: true|"
                "Access-Control-Allow-Origin: https://a");
    dedupe_case("RETAIN_UNIQUE",
                "Vary: Origin|Access-Control-Allow-Credentials: true|"
                "Access-Control-Allow-Origin: https://a|"
                "Access-Control-Allow-Origin: https://b");
    REFUSED("DedupeResponseHeader",
            "DedupeResponseHeader: strategy must be RETAIN_FIRST, RETAIN_LAST "
            "or RETAIN_UNIQUE, got \"KEEP_ALL\"",
            "X-A", "KEEP_ALL");
}

Test(filter, dedupe_retain_last_keeps_the_last_value)
{
    struct filter f = MAKE("DedupeResponseHeader", "X-A", "RETAIN_LAST");
    struct headers h;
    char buf[256];

    headers_init(&h);
    headers_add(&h, "X-A", "1");
    headers_add(&h, "X-A", "2");
    headers_add(&h, "X-A", "3");
    apply_response(&f, &h);
    dump(&h, buf, sizeof(buf));
    cr_assert_str_eq(buf, "X-A: 3");
    headers_deinit(&h);
    filter_deinit(&f);
}

Test(filter, rewrite_response_header_replaces_in_every_value)
{
    struct filter f = MAKE("RewriteResponseHeader", "X-Response-Red",
                           "password=[^&]+", "password=***");
    struct filter g =
        MAKE("RewriteResponseHeader", "X-Id", "(\\d+)-(\\d+)", "$2-$\\{1}");
    struct headers h;
    char buf[256];

    headers_init(&h);
    headers_add(&h, "X-Response-Red", "/42?user=ford&password=omg!what&flag=1");
    headers_add(&h, "X-Id", "12-34");
    headers_add(&h, "X-Other", "password=x");
    apply_response(&f, &h);
    apply_response(&g, &h);
    dump(&h, buf, sizeof(buf));
    cr_assert_str_eq(buf, "X-Response-Red: /42?user=ford&password=***&flag=1|"
                          "X-Id: 34-12|X-Other: password=x");
    headers_deinit(&h);
    filter_deinit(&f);
    filter_deinit(&g);
    REFUSED("RewriteResponseHeader",
            "RewriteResponseHeader: replacement: unknown group \"id\"", "X-A",
            "(\\d+)", "${id}");
}

static char *
location_after(const struct filter *f, const char *loc, const char *host,
               const char *path)
{
    struct headers h;
    struct response_edit r;
    char *out;

    headers_init(&h);
    headers_add(&h, f->name, loc);
    r.status = 201;
    r.reason = "Created";
    r.headers = &h;
    r.client_host = host;
    r.client_path = path;
    filter_apply_response(f, &r);
    out = xstrdup(headers_get(&h, f->name));
    headers_deinit(&h);
    return out;
}

#define ASSERT_LOCATION(f, loc, host, path, want)                              \
    do {                                                                       \
        char *got_ = location_after(f, loc, host, path);                       \
        cr_assert_str_eq(got_, want);                                          \
        free(got_);                                                            \
    } while (0)

Test(filter, rewrite_location_follows_spring_examples)
{
    struct filter as_in = make("RewriteLocationResponseHeader", NULL, 0);
    struct filter always = MAKE("RewriteLocationResponseHeader", "ALWAYS_STRIP",
                                "Link", "example-api.com");
    struct filter never = MAKE("RewriteLocationResponseHeader", "NEVER_STRIP",
                               NULL, NULL, "https|ftps");

    cr_assert_str_eq(as_in.name, "Location");
    ASSERT_LOCATION(&as_in,
                    "https://object-service.prod.example.net/v2/some/object/id",
                    "api.example.com", "/some/object/name",
                    "https://api.example.com/some/object/id");
    ASSERT_LOCATION(&as_in,
                    "https://object-service.prod.example.net:8443/v2/x/id",
                    "api.example.com:443", "/v1/x/name",
                    "https://api.example.com:443/v2/x/id");
    ASSERT_LOCATION(&always,
                    "https://object-service.prod.example.net/v1/some/object/id",
                    "api.example.com:443", "/v1/some/object/name",
                    "https://example-api.com/some/object/id");
    ASSERT_LOCATION(&never,
                    "https://object-service.prod.example.net/v1/some/object/id",
                    "api.example.com", "/some/object/name",
                    "https://api.example.com/v1/some/object/id");
    ASSERT_LOCATION(&never,
                    "http://object-service.prod.example.net/v1/some/object/id",
                    "api.example.com", "/some/object/name",
                    "http://object-service.prod.example.net/v1/some/object/id");
    /* Relative locations and ones without a path after the host stay. */
    ASSERT_LOCATION(&as_in, "/relative/x", "api.example.com", "/",
                    "/relative/x");
    ASSERT_LOCATION(&as_in, "https://backend.test", "api.example.com", "/",
                    "https://backend.test");
    filter_deinit(&as_in);
    filter_deinit(&always);
    filter_deinit(&never);
    REFUSED("RewriteLocationResponseHeader",
            "RewriteLocationResponseHeader: stripVersion must be "
            "AS_IN_REQUEST, NEVER_STRIP or ALWAYS_STRIP, got \"SOMETIMES\"",
            "SOMETIMES");
}

Test(filter, secure_headers_adds_spring_defaults_unless_present_or_disabled)
{
    struct filter all = make("SecureHeaders", NULL, 0);
    struct filter some =
        MAKE("SecureHeaders", "x-frame-options,strict-transport-security",
             "Content-Security-Policy");
    struct headers h;
    size_t n;
    const struct secure_field *sf = filter_secure_fields(&n);

    cr_assert_eq(n, 8);
    headers_init(&h);
    headers_add(&h, "x-frame-options", "SAMEORIGIN");
    apply_response(&all, &h);
    cr_assert_eq(h.n, 8, "seven added, the one present kept");
    cr_assert_str_eq(headers_get(&h, "X-Frame-Options"), "SAMEORIGIN");
    cr_assert_str_eq(headers_get(&h, "X-Xss-Protection"), "1 ; mode=block");
    cr_assert_str_eq(headers_get(&h, "Strict-Transport-Security"),
                     "max-age=631138519");
    cr_assert_str_eq(headers_get(&h, "Referrer-Policy"), "no-referrer");
    cr_assert_str_eq(headers_get(&h, "Content-Security-Policy"), sf[5].value);
    headers_clear(&h);
    apply_response(&some, &h);
    cr_assert_eq(h.n, 5);
    cr_assert_null(headers_get(&h, "X-Frame-Options"));
    cr_assert_null(headers_get(&h, "Strict-Transport-Security"));
    cr_assert_null(headers_get(&h, "Content-Security-Policy"));
    headers_deinit(&h);
    filter_deinit(&all);
    filter_deinit(&some);
    REFUSED("SecureHeaders",
            "SecureHeaders: cannot disable \"x-powered-by\" (known: "
            "x-xss-protection, strict-transport-security, x-frame-options, "
            "x-content-type-options, referrer-policy, content-security-policy, "
            "x-download-options, x-permitted-cross-domain-policies)",
            "x-powered-by");
}

Test(filter, set_status_takes_numbers_and_spring_names)
{
    struct filter f = MAKE("SetStatus", "UNAUTHORIZED");
    struct filter g = MAKE("SetStatus", "404");
    struct headers h;

    struct response_edit r = {200, "OK", &h, NULL, "/"};

    headers_init(&h);
    filter_apply_response(&f, &r);
    cr_assert_eq(r.status, 401);
    cr_assert_str_eq(r.reason, "Unauthorized");
    filter_apply_response(&g, &r);
    cr_assert_eq(r.status, 404);
    cr_assert_str_eq(r.reason, "Not Found");
    headers_deinit(&h);
    filter_deinit(&f);
    filter_deinit(&g);
    cr_assert_eq(filter_status_code("BAD_GATEWAY"), 502);
    cr_assert_eq(filter_status_code("I_AM_A_TEAPOT"), 418);
    cr_assert_eq(filter_status_code("600"), -1);
    cr_assert_eq(filter_status_code("not_found"), -1);
    REFUSED("SetStatus",
            "SetStatus: status must be a number from 100 to 599 or a name "
            "like NOT_FOUND, got \"NOPE\"",
            "NOPE");
    REFUSED("SetStatus",
            "SetStatus: status 204 cannot carry the upstream's body",
            "NO_CONTENT");
}

Test(filter, redirect_to_answers_with_location)
{
    struct filter f = MAKE("RedirectTo", "302", "https://acme.org");
    struct filter g = MAKE("RedirectTo", "MOVED_PERMANENTLY",
                           "https://acme.org/x?a=1", "true");
    struct request_facts rq = {"skip=10", NULL, 0, NULL};
    struct filter_answer a;

    cr_assert(!filter_is_response(&f));
    cr_assert(filter_answers(&f, &rq, &a));
    cr_assert_eq(a.status, 302);
    cr_assert_str_eq(a.location, "https://acme.org");
    cr_assert_str_eq(a.detail, "");
    filter_answer_deinit(&a);
    cr_assert(filter_answers(&g, &rq, &a));
    cr_assert_eq(a.status, 301);
    cr_assert_str_eq(a.location, "https://acme.org/x?a=1&skip=10");
    filter_answer_deinit(&a);
    filter_deinit(&f);
    filter_deinit(&g);
    REFUSED("RedirectTo",
            "RedirectTo: status must be a 3xx redirect code, got \"200\"",
            "200", "https://acme.org");
    REFUSED("RedirectTo",
            "RedirectTo: includeRequestParams must be true or false, got "
            "\"yes\"",
            "302", "https://acme.org", "yes");
}

Test(filter, request_size_counts_content_length_and_the_body)
{
    struct filter f = MAKE("RequestSize", "5MB");
    struct filter small = MAKE("RequestSize", "1000");
    struct filter dflt = make("RequestSize", NULL, 0);
    struct request_facts rq = {NULL, NULL, 1000, NULL};
    struct filter_answer a;

    cr_assert_eq(f.max_size, 5 * 1024 * 1024);
    cr_assert_eq(dflt.max_size, 5 * 1024 * 1024, "Spring's default");
    cr_assert_not(filter_answers(&small, &rq, &a), "at the limit passes");
    rq.body_bytes = 1001;
    cr_assert(filter_answers(&small, &rq, &a), "a chunked body is counted");
    cr_assert_eq(a.status, 413);
    cr_assert_str_eq(a.field, "errorMessage");
    cr_assert_str_eq(a.field_value,
                     "Request size is larger than permissible limit. Request "
                     "size is 1001 B where permissible limit is 1000 B");
    filter_answer_deinit(&a);
    rq.body_bytes = 0;
    rq.content_length = "6291456";
    cr_assert(filter_answers(&f, &rq, &a), "Content-Length is enough");
    cr_assert_str_eq(a.field_value,
                     "Request size is larger than permissible limit. Request "
                     "size is 6.0 MB where permissible limit is 5.0 MB");
    filter_answer_deinit(&a);
    filter_deinit(&f);
    filter_deinit(&small);
    filter_deinit(&dflt);
    REFUSED("RequestSize",
            "RequestSize: maxSize must be a size above 0 like 5000000, 1000B "
            "or 5MB, got \"5 MB\"",
            "5 MB");
}

Test(filter, request_header_size_sums_each_names_values)
{
    struct filter f = MAKE("RequestHeaderSize", "20B");
    struct filter named = MAKE("RequestHeaderSize", "20B", "X-Why");
    struct headers h;
    struct request_facts rq = {NULL, &h, 0, NULL};
    struct filter_answer a;

    headers_init(&h);
    headers_add(&h, "X-A", "0123456789");
    headers_add(&h, "X-A", "0123456");
    cr_assert_not(filter_answers(&f, &rq, &a), "3 + 17 = 20 is the limit");
    headers_add(&h, "x-a", "7");
    cr_assert(filter_answers(&f, &rq, &a));
    cr_assert_eq(a.status, 431);
    cr_assert_str_eq(a.field, "errorMessage");
    cr_assert(strstr(a.field_value, "'X-A' is 21 B") != NULL, "%s",
              a.field_value);
    filter_answer_deinit(&a);
    cr_assert(filter_answers(&named, &rq, &a));
    cr_assert_str_eq(a.field, "X-Why");
    filter_answer_deinit(&a);
    headers_deinit(&h);
    filter_deinit(&f);
    filter_deinit(&named);
}

Test(filter, retry_has_spring_defaults)
{
    struct filter f = make("Retry", NULL, 0);
    const struct retry_conf *rc = f.retry;
    uint64_t b;

    cr_assert_eq(rc->retries, 3);
    cr_assert_eq(rc->methods, filter_method_bit("GET"));
    cr_assert_eq(filter_method_bit("POST") & rc->methods, 0);
    cr_assert_eq(filter_retry_next(rc, 1, 503, 0, 0, 0, 0.5, &b), 0);
    cr_assert_eq(b, 0, "no backoff unless configured");
    cr_assert_eq(filter_retry_next(rc, 3, 500, 0, 0, 0, 0.5, &b), 0);
    cr_assert_eq(filter_retry_next(rc, 4, 500, 0, 0, 0, 0.5, &b), -1,
                 "three retries, then no more");
    cr_assert_eq(filter_retry_next(rc, 1, 404, 0, 0, 0, 0.5, &b), -1);
    for (int failure = 0; failure < 4; failure++) {
        cr_assert_eq(filter_retry_next(rc, 1, 0, failure, 0, 0, 0.5, &b), 0);
    }
    filter_deinit(&f);
}

Test(filter, retry_shortcut_reads_spring_order_and_backs_off)
{
    struct filter f = MAKE("Retry", "3", "INTERNAL_SERVER_ERROR", "GET,POST",
                           "10ms", "50ms", "2", "false", "0", "100ms");
    const struct retry_conf *rc = f.retry;
    uint64_t b;

    cr_assert(rc->methods & filter_method_bit("POST"));
    cr_assert_eq(filter_retry_next(rc, 1, 500, 0, 0, 0, 0.5, &b), 0);
    cr_assert_eq(b, 10);
    cr_assert_eq(filter_retry_next(rc, 2, 500, 0, 10, 10, 0.5, &b), 0);
    cr_assert_eq(b, 20);
    cr_assert_eq(filter_retry_next(rc, 3, 500, 0, 30, 20, 0.5, &b), 0);
    cr_assert_eq(b, 40);
    /* Past the total time nothing more starts. */
    cr_assert_eq(filter_retry_next(rc, 3, 500, 0, 70, 20, 0.5, &b), -1);
    /* The 5xx series stays Spring's default beside the statuses. */
    cr_assert_eq(filter_retry_next(rc, 1, 503, 0, 0, 0, 0.5, &b), 0);
    filter_deinit(&f);
}

Test(filter, retry_backoff_is_capped_and_jitter_stays_in_its_band)
{
    struct filter f = MAKE("Retry", "10", "BAD_GATEWAY", "GET", "10ms", "50ms",
                           "3", "true", "0.5");
    const struct retry_conf *rc = f.retry;
    uint64_t b;

    cr_assert_eq(filter_retry_next(rc, 1, 502, 0, 0, 0, 0.0, &b), 0);
    cr_assert_eq(b, 5, "10ms - 50%%");
    cr_assert_eq(filter_retry_next(rc, 1, 502, 0, 0, 0, 0.999, &b), 0);
    cr_assert(b >= 14 && b <= 15, "%llu", (unsigned long long)b);
    cr_assert_eq(filter_retry_next(rc, 5, 502, 0, 0, 40, 0.5, &b), 0);
    cr_assert_eq(b, 50, "capped at maxBackoff");
    filter_deinit(&f);
}

Test(filter, retry_series_and_exceptions_narrow_what_is_retried)
{
    struct filter f = MAKE("Retry", "2");
    uint64_t b;

    filter_deinit(&f);
    {
        const char *args[11] = {"2",
                                NULL,
                                NULL,
                                NULL,
                                NULL,
                                NULL,
                                NULL,
                                NULL,
                                NULL,
                                "4",
                                "ConnectException"};
        struct filter g = make("Retry", args, 11);

        cr_assert_eq(filter_retry_next(g.retry, 1, 429, 0, 0, 0, 0, &b), 0);
        cr_assert_eq(filter_retry_next(g.retry, 1, 503, 0, 0, 0, 0, &b), -1);
        cr_assert_eq(filter_retry_next(g.retry, 1, 0, 0, 0, 0, 0, &b), 0);
        cr_assert_eq(filter_retry_next(g.retry, 1, 0, 2, 0, 0, 0, &b), -1,
                     "a timeout is not a ConnectException");
        filter_deinit(&g);
    }
    REFUSED("Retry",
            "Retry: retries must be an integer from 1 to 10, got \"0\"", "0");
    REFUSED("Retry",
            "Retry: statuses: \"BAD\" is not a status (a number or a name like "
            "BAD_GATEWAY)",
            "1", "BAD");
    REFUSED("Retry",
            "Retry: methods: \"FETCH\" is not a method (GET, HEAD, POST, PUT, "
            "PATCH, DELETE, OPTIONS, TRACE)",
            "1", "502", "FETCH");
}

/* 2^53, as every size and duration of gateway.yaml. */
Test(filter, sizes_and_durations_are_at_most_2_to_the_53)
{
    struct filter f = MAKE("RequestSize", "9007199254740992B");
    struct filter tb = MAKE("RequestSize", "8192TB");
    struct filter r =
        MAKE("Retry", "1", NULL, NULL, "9007199254740992", "9007199254740992ms",
             NULL, NULL, NULL, "9007199254740992");

    cr_assert_eq(f.max_size, 1ULL << 53);
    cr_assert_eq(tb.max_size, 1ULL << 53);
    cr_assert_eq(r.retry->timeout_ms, 1ULL << 53);
    filter_deinit(&f);
    filter_deinit(&tb);
    filter_deinit(&r);
    REFUSED("RequestSize",
            "RequestSize: maxSize \"18446744073709551615\" is too large (at "
            "most 2^53 B)",
            "18446744073709551615");
    REFUSED("RequestSize",
            "RequestSize: maxSize \"8388608TB\" is too large (at most 2^53 B)",
            "8388608TB");
    REFUSED("RequestSize",
            "RequestSize: maxSize \"99999999999999999999GiB\" is too large "
            "(at most 2^53 B)",
            "99999999999999999999GiB");
    REFUSED("RequestHeaderSize",
            "RequestHeaderSize: maxSize \"9007199254740993B\" is too large "
            "(at most 2^53 B)",
            "9007199254740993B");
    REFUSED("Retry",
            "Retry: backoff.firstBackoff \"18446744073709551615\" is too "
            "large (at most 2^53 ms)",
            "1", NULL, NULL, "18446744073709551615");
    REFUSED("Retry",
            "Retry: backoff.maxBackoff \"9007199254740993ms\" is too large "
            "(at most 2^53 ms)",
            "1", NULL, NULL, "10ms", "9007199254740993ms");
    REFUSED("Retry",
            "Retry: timeout \"99999999999999999999s\" is too large (at most "
            "2^53 ms)",
            "1", NULL, NULL, NULL, NULL, NULL, NULL, NULL,
            "99999999999999999999s");
    REFUSED("Retry",
            "Retry: timeout must be a duration above 0 like 100ms, got "
            "\"5 s\"",
            "1", NULL, NULL, NULL, NULL, NULL, NULL, NULL, "5 s");
}
