#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "path.h"

/* Normalises 'raw' and checks both the status and, on success, the text. */
static void
expect(const char *raw, enum path_status want_st, const char *want)
{
    char *out = NULL;
    enum path_status st = path_normalize(raw, strlen(raw), &out);

    cr_assert_eq(st, want_st, "path_normalize(\"%s\") = %d, want %d", raw,
                 (int)st, (int)want_st);
    if (want_st == PATH_OK) {
        cr_assert_str_eq(out, want, "path_normalize(\"%s\")", raw);
        free(out);
    } else {
        cr_assert_null(out, "'out' must be untouched on failure");
    }
}

Test(path, plain_paths_pass_through_unchanged)
{
    expect("/", PATH_OK, "/");
    expect("/api/users", PATH_OK, "/api/users");
    expect("/api/users/", PATH_OK, "/api/users/");
}

Test(path, dot_dot_removes_the_segment_before_it)
{
    expect("/api/../admin", PATH_OK, "/admin");
    expect("/a/b/../c", PATH_OK, "/a/c");
    expect("/a/b/../../c", PATH_OK, "/c");
}

Test(path, encoded_dot_dot_is_removed_too)
{
    expect("/api/%2e%2e/admin", PATH_OK, "/admin");
    expect("/api/%2E%2E/admin", PATH_OK, "/admin");
    expect("/api/.%2e/admin", PATH_OK, "/admin");
    expect("/api/%2e/admin", PATH_OK, "/api/admin");
}

Test(path, single_dot_segments_are_dropped)
{
    expect("/./a/./b", PATH_OK, "/a/b");
    expect("/.", PATH_OK, "/");
}

Test(path, trailing_dot_segments_leave_a_trailing_slash)
{
    expect("/a/b/..", PATH_OK, "/a/");
    expect("/a/.", PATH_OK, "/a/");
    expect("/a/..", PATH_OK, "/");
}

Test(path, slash_runs_collapse)
{
    expect("/a//b", PATH_OK, "/a/b");
    expect("//a///b//", PATH_OK, "/a/b/");
    expect("//", PATH_OK, "/");
}

Test(path, unreserved_escapes_are_decoded)
{
    expect("/%41", PATH_OK, "/A");
    expect("/%7e%5F%2d%30", PATH_OK, "/~_-0");
}

Test(path, other_escapes_are_kept_in_upper_case)
{
    expect("/%2f", PATH_OK, "/%2F");
    expect("/a%2Fb", PATH_OK, "/a%2Fb");
    expect("/caf%c3%a9", PATH_OK, "/caf%C3%A9");
    expect("/a%20b", PATH_OK, "/a%20b");
}

Test(path, an_escaped_slash_is_not_a_separator_for_dot_dot)
{
    /* "a%2F.." is one segment, not "a" then "..". */
    expect("/x/a%2F../y", PATH_OK, "/x/a%2F../y");
}

Test(path, climbing_above_the_root_is_refused)
{
    expect("/..", PATH_ABOVE_ROOT, NULL);
    expect("/a/../..", PATH_ABOVE_ROOT, NULL);
    expect("/%2e%2e/etc/passwd", PATH_ABOVE_ROOT, NULL);
}

Test(path, a_dot_segment_with_parameters_is_refused)
{
    /* Tomcat reads "..;" as "..": /admin/a to it, a catch-all route's
     * path to a router that took "..;" for a name. */
    expect("/x/..;/admin/a", PATH_DOT_PARAMS, NULL);
    expect("/x/..;jsessionid=1/admin", PATH_DOT_PARAMS, NULL);
    expect("/x/%2e%2e;/admin/a", PATH_DOT_PARAMS, NULL);
    expect("/x/.%2E;/admin/a", PATH_DOT_PARAMS, NULL);
    expect("/x/.;/admin", PATH_DOT_PARAMS, NULL);
    expect("/..;", PATH_DOT_PARAMS, NULL);
    expect("/.;x", PATH_DOT_PARAMS, NULL);
    /* Parameters on other segments, and dots that are not the whole
     * segment before the ';', are names like any other. */
    expect("/a;v=1/b", PATH_OK, "/a;v=1/b");
    expect("/x/...;/y", PATH_OK, "/x/...;/y");
    expect("/x/..a;/y", PATH_OK, "/x/..a;/y");
    expect("/x/;../y", PATH_OK, "/x/;../y");
    expect("/x/..%3B/y", PATH_OK, "/x/..%3B/y");
    cr_assert_str_neq(path_status_str(PATH_DOT_PARAMS),
                      path_status_str(PATH_ABOVE_ROOT));
}

Test(path, bad_escapes_are_refused)
{
    expect("/%zz", PATH_BAD_ESCAPE, NULL);
    expect("/%4", PATH_BAD_ESCAPE, NULL);
    expect("/%", PATH_BAD_ESCAPE, NULL);
    expect("/a%g1", PATH_BAD_ESCAPE, NULL);
    expect("/a%00b", PATH_BAD_ESCAPE, NULL);
}

Test(path, a_raw_nul_byte_is_refused)
{
    char *out = NULL;

    cr_assert_eq(path_normalize("/a\0b", 4, &out), PATH_BAD_ESCAPE);
    cr_assert_null(out);
}

Test(path, relative_paths_are_refused)
{
    char *out = NULL;

    expect("x", PATH_NOT_ABSOLUTE, NULL);
    expect("a/b", PATH_NOT_ABSOLUTE, NULL);
    cr_assert_eq(path_normalize("", 0, &out), PATH_NOT_ABSOLUTE);
}

Test(path, only_len_bytes_are_read)
{
    char *out = NULL;

    cr_assert_eq(path_normalize("/a/b?q=1", 4, &out), PATH_OK);
    cr_assert_str_eq(out, "/a/b");
    free(out);
}

Test(path, status_strings_differ)
{
    cr_assert_str_eq(path_status_str(PATH_OK), "ok");
    cr_assert_str_neq(path_status_str(PATH_BAD_ESCAPE),
                      path_status_str(PATH_ABOVE_ROOT));
    cr_assert_str_neq(path_status_str(PATH_NOT_ABSOLUTE),
                      path_status_str(PATH_ABOVE_ROOT));
}

Test(path, a_long_path_is_normalised_as_a_short_one)
{
    /* Longer than what is decoded on the stack: the heap takes it. */
    enum { SEGS = 300 };
    char *raw = malloc(SEGS * 4 + 16), *want = malloc(SEGS * 2 + 16);
    char *out = NULL;
    size_t r = 0, w = 0;

    for (int i = 0; i < SEGS; i++) {
        memcpy(raw + r, "/a/.", 4);
        r += 4;
        memcpy(want + w, "/a", 2);
        w += 2;
    }
    memcpy(raw + r, "/b/../%63", 9);
    r += 9;
    memcpy(want + w, "/c", 3);
    cr_assert_eq(path_normalize(raw, r, &out), PATH_OK);
    cr_assert_str_eq(out, want);
    free(out);
    cr_assert_eq(path_normalize("/../x", 5, &out), PATH_ABOVE_ROOT);
    free(raw);
    free(want);
}

/* What routes match: each segment without its ;parameters. */
Test(path, without_params_leaves_each_segment_its_name)
{
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"/admin;x/a", "/admin/a"},
        {"/a;v=1/b;x", "/a/b"},
        {"/a;v=1;w=2/b", "/a/b"},
        {"/a/;x", "/a/"},
        {"/;x/a", "/a"},
        {"/;x", "/"},
        {"/", "/"},
        {"/a/b/", "/a/b/"},
        {"/a/b", "/a/b"},
        {"/a;/b;", "/a/b"},
        {"/a/;x/;y/b", "/a/b"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *got = path_without_params(cases[i].in);

        cr_assert_str_eq(got, cases[i].want, "%s", cases[i].in);
        free(got);
    }
}
