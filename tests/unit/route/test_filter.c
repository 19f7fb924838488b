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
    headers_init(&out->headers);
    out->preserve_host = false;
    out->vars = vars;
}

static void
outgoing_deinit(struct outgoing *out)
{
    free(out->path);
    headers_deinit(&out->headers);
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
    static const char *const want[] = {
        "StripPrefix",         "PrefixPath",
        "RewritePath",         "SetPath",
        "AddRequestHeader",    "SetRequestHeader",
        "RemoveRequestHeader", "AddResponseHeader",
        "SetResponseHeader",   "RemoveResponseHeader",
        "PreserveHostHeader"};
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
    filter_apply_response(&fa, &h);
    filter_apply_response(&fs, &h);
    filter_apply_response(&fr, &h);
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
    filter_apply_response(&freq, &h);
    filter_apply_response(&fstrip, &h);
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
