#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "glob.h"

static bool
path_match(const char *pattern, const char *subject)
{
    return glob_match(pattern, subject, '/', NULL);
}

static bool
host_match(const char *pattern, const char *subject)
{
    return glob_match(pattern, subject, '.', NULL);
}

/* The value of variable 'name' in 'vars' as a new string, or NULL. */
static char *
var_value(const struct glob_vars *vars, const char *name)
{
    for (size_t i = 0; i < vars->n; i++) {
        if (vars->v[i].name_len == strlen(name) &&
            memcmp(vars->v[i].name, name, strlen(name)) == 0) {
            return strndup(vars->v[i].value, vars->v[i].value_len);
        }
    }
    return NULL;
}

Test(glob, literal_paths_match_exactly)
{
    cr_assert(path_match("/api/users", "/api/users"));
    cr_assert_not(path_match("/api/users", "/api/users/"));
    cr_assert_not(path_match("/api/users", "/api/user"));
    cr_assert_not(path_match("/api/users", "/api/users/1"));
    cr_assert_not(path_match("/api/users", "/API/users"));
}

Test(glob, double_star_matches_zero_or_more_segments)
{
    cr_assert(path_match("/api/users/**", "/api/users"));
    cr_assert(path_match("/api/users/**", "/api/users/"));
    cr_assert(path_match("/api/users/**", "/api/users/1"));
    cr_assert(path_match("/api/users/**", "/api/users/1/2"));
    cr_assert_not(path_match("/api/users/**", "/api/usersX"));
    cr_assert_not(path_match("/api/users/**", "/api"));
}

Test(glob, double_star_in_the_middle)
{
    cr_assert(path_match("/a/**/z", "/a/z"));
    cr_assert(path_match("/a/**/z", "/a/b/z"));
    cr_assert(path_match("/a/**/z", "/a/b/c/z"));
    cr_assert(path_match("/a/**/z", "/a/z/z"));
    cr_assert_not(path_match("/a/**/z", "/a/b/c"));
    cr_assert_not(path_match("/a/**/z", "/a/z/"));
}

Test(glob, root_double_star_matches_everything)
{
    cr_assert(path_match("/**", "/"));
    cr_assert(path_match("/**", "/a"));
    cr_assert(path_match("/**", "/a/b/c/"));
}

Test(glob, star_stays_within_one_segment)
{
    cr_assert(path_match("/api/*/x", "/api/a/x"));
    cr_assert(path_match("/api/*/x", "/api//x"));
    cr_assert_not(path_match("/api/*/x", "/api/a/b/x"));
    cr_assert(path_match("/files/*.png", "/files/cat.png"));
    cr_assert(path_match("/files/*.png", "/files/.png"));
    cr_assert_not(path_match("/files/*.png", "/files/cat.jpg"));
    cr_assert_not(path_match("/files/*.png", "/files/a/cat.png"));
    cr_assert(path_match("/f/a*b*c", "/f/abbbc"));
    cr_assert(path_match("/f/a*b*c", "/f/abc"));
    cr_assert_not(path_match("/f/a*b*c", "/f/acb"));
}

Test(glob, question_mark_matches_one_character_within_a_segment)
{
    cr_assert(path_match("/v?/users", "/v1/users"));
    cr_assert(path_match("/v?/users", "/va/users"));
    cr_assert_not(path_match("/v?/users", "/v/users"));
    cr_assert_not(path_match("/v?/users", "/v12/users"));
    cr_assert_not(path_match("/a?b", "/a/b"));
    cr_assert(path_match("/f/?*.png", "/f/a.png"));
    cr_assert_not(path_match("/f/?*.png", "/f/.png"));
    /* Not taken for a literal prefix by the prefix compare. */
    cr_assert(path_match("/v?/**", "/v2/a/b"));
    cr_assert_not(path_match("/v?/**", "/v/a"));
    cr_assert(glob_match("api?.example.org", "API1.example.org", '.', NULL));
    cr_assert_not(glob_match("api?.example.org", "api.example.org", '.', NULL));
}

Test(glob, variables_capture_one_segment)
{
    struct glob_vars vars;
    char *v;

    cr_assert(glob_match("/red/{segment}", "/red/blue", '/', &vars));
    cr_assert_eq(vars.n, 1);
    v = var_value(&vars, "segment");
    cr_assert_str_eq(v, "blue");
    free(v);
    cr_assert_not(glob_match("/red/{segment}", "/red/", '/', &vars));
    cr_assert_eq(vars.n, 0);
    cr_assert_not(glob_match("/red/{segment}", "/red/a/b", '/', &vars));
    cr_assert_not(glob_match("/red/{segment}", "/red", '/', &vars));
}

Test(glob, variables_after_double_star_are_rebound_on_retry)
{
    struct glob_vars vars;
    char *a;
    char *b;

    cr_assert(glob_match("/{a}/**/{b}/end", "/x/1/2/3/end", '/', &vars));
    cr_assert_eq(vars.n, 2);
    a = var_value(&vars, "a");
    b = var_value(&vars, "b");
    cr_assert_str_eq(a, "x");
    cr_assert_str_eq(b, "3");
    free(a);
    free(b);
}

Test(glob, a_match_without_variables_reports_none)
{
    struct glob_vars vars;

    vars.n = 5;
    cr_assert(glob_match("/a/*", "/a/b", '/', &vars));
    cr_assert_eq(vars.n, 0);
}

Test(glob, many_double_stars_do_not_explode)
{
    /* 30 "**" segments against a long non-matching subject would take
     * forever with naive backtracking. */
    char pattern[256] = "";
    char subject[512] = "";

    for (int i = 0; i < 30; i++) {
        strcat(pattern, "/**");
    }
    strcat(pattern, "/zz");
    for (int i = 0; i < 100; i++) {
        strcat(subject, "/a");
    }
    cr_assert_not(path_match(pattern, subject));
    strcat(subject, "/zz");
    cr_assert(path_match(pattern, subject));
}

Test(glob, many_stars_in_a_segment_do_not_explode)
{
    char subject[256];

    memset(subject, 'a', 200);
    subject[0] = '/';
    subject[200] = '\0';
    cr_assert_not(path_match("/*a*a*a*a*a*a*a*a*a*a*a*a*a*b", subject));
}

Test(glob, single_star_host_matches_one_label)
{
    cr_assert(host_match("*.example.org", "a.example.org"));
    cr_assert_not(host_match("*.example.org", "a.b.example.org"));
    cr_assert_not(host_match("*.example.org", "example.org"));
    cr_assert_not(host_match("*.example.org", "a.example.com"));
}

Test(glob, double_star_host_matches_any_number_of_labels)
{
    cr_assert(host_match("**.example.org", "a.example.org"));
    cr_assert(host_match("**.example.org", "a.b.example.org"));
    cr_assert(host_match("**.example.org", "example.org"));
    cr_assert_not(host_match("**.example.org", "badexample.org"));
    cr_assert_not(host_match("**.example.org", "example.org.evil"));
}

Test(glob, hosts_compare_case_insensitively)
{
    cr_assert(host_match("api.Example.org", "API.example.ORG"));
    cr_assert(host_match("*.EXAMPLE.org", "www.example.org"));
}

Test(glob, braces_are_literal_in_hosts)
{
    struct glob_vars vars;

    cr_assert_not(glob_match("{x}.org", "a.org", '.', &vars));
}

Test(glob, validate_accepts_good_patterns)
{
    char err[128] = "";

    cr_assert_eq(glob_validate("/api/{id}/**", '/', err, sizeof(err)), 0);
    cr_assert_eq(glob_validate("/a/*.png", '/', err, sizeof(err)), 0);
    cr_assert_eq(glob_validate("**.example.org", '.', err, sizeof(err)), 0);
    cr_assert_str_eq(err, "");
}

Test(glob, validate_refuses_an_unclosed_brace)
{
    char err[128] = "";

    cr_assert_eq(glob_validate("/a/{id", '/', err, sizeof(err)), -1);
    cr_assert_str_eq(err, "unclosed '{'");
}

Test(glob, validate_refuses_empty_and_duplicate_names)
{
    char err[128] = "";

    cr_assert_eq(glob_validate("/a/{}", '/', err, sizeof(err)), -1);
    cr_assert_str_eq(err, "empty variable name");
    cr_assert_eq(glob_validate("/{id}/{id}", '/', err, sizeof(err)), -1);
    cr_assert_str_eq(err, "duplicate variable \"id\"");
}

Test(glob, validate_refuses_too_many_variables)
{
    char err[128] = "";

    cr_assert_eq(glob_validate("/{a}/{b}/{c}/{d}/{e}/{f}/{g}/{h}", '/', err,
                               sizeof(err)),
                 0);
    cr_assert_eq(glob_validate("/{a}/{b}/{c}/{d}/{e}/{f}/{g}/{h}/{i}", '/', err,
                               sizeof(err)),
                 -1);
    cr_assert_str_eq(err, "more than 8 variables");
}

Test(glob, validate_refuses_partial_segment_variables)
{
    char err[128] = "";

    cr_assert_eq(glob_validate("/a/x{id}", '/', err, sizeof(err)), -1);
    cr_assert_str_eq(err, "a {variable} must be a whole segment");
    cr_assert_eq(glob_validate("/a/{id}.json", '/', err, sizeof(err)), -1);
    cr_assert_eq(glob_validate("/a/id}", '/', err, sizeof(err)), -1);
    cr_assert_eq(glob_validate("/a/{b c}", '/', err, sizeof(err)), -1);
}

Test(glob, validate_refuses_braces_in_hosts)
{
    char err[128] = "";

    cr_assert_eq(glob_validate("{sub}.example.org", '.', err, sizeof(err)), -1);
    cr_assert_str_eq(err, "'{' is not allowed in a host pattern");
}

Test(glob, validate_refuses_double_star_mixed_with_text)
{
    char err[128] = "";

    cr_assert_eq(glob_validate("/a/**x", '/', err, sizeof(err)), -1);
    cr_assert_str_eq(err, "'**' must be a whole segment");
    cr_assert_eq(glob_validate("/a/***", '/', err, sizeof(err)), -1);
    cr_assert_eq(glob_validate("a**.example.org", '.', err, sizeof(err)), -1);
}

Test(glob, expand_substitutes_known_variables)
{
    struct glob_vars vars;
    char *s;

    cr_assert(glob_match("/red/{segment}/{id}", "/red/blue/42", '/', &vars));
    s = glob_expand("/v2/{segment}/item-{id}", &vars);
    cr_assert_str_eq(s, "/v2/blue/item-42");
    free(s);
}

Test(glob, expand_drops_unknown_names_and_keeps_other_braces)
{
    struct glob_vars vars;
    char *s;

    cr_assert(glob_match("/red/{segment}", "/red/blue", '/', &vars));
    s = glob_expand("x{nope}y {\"a\": 1} {segment", &vars);
    cr_assert_str_eq(s, "xy {\"a\": 1} {segment");
    free(s);
    s = glob_expand("{segment}", NULL);
    cr_assert_str_eq(s, "");
    free(s);
    s = glob_expand("", &vars);
    cr_assert_str_eq(s, "");
    free(s);
}

Test(glob, prefix_patterns_agree_with_the_general_walk)
{
    /* A prefix then a last "**" segment is compared, not walked, when
     * the prefix has no star or variable; one with a star is walked:
     * both must say the same. */
    static const char *const subjects[] = {
        "/",       "/a",   "/a/",      "/a/b",   "/ab", "/a//b",
        "/a/b/c/", "/A/b", "/a/b/c/d", "/x/a/b", "//",  "/a/b/",
    };

    for (size_t i = 0; i < sizeof(subjects) / sizeof(subjects[0]); i++) {
        const char *s = subjects[i];

        cr_assert_eq(path_match("/a/**", s),
                     path_match("/*a/**", s) && strncmp(s, "/a", 2) == 0, "%s",
                     s);
        cr_assert_eq(path_match("/a/b/**", s),
                     path_match("/a/b*/**", s) && strncmp(s, "/a/b", 4) == 0 &&
                         (s[4] == '\0' || s[4] == '/'),
                     "%s", s);
    }
    cr_assert(path_match("/a/b/**", "/a/b"));
    cr_assert_not(path_match("/a/b/**", "/a/bc"));
    cr_assert_not(path_match("/a/b/**", "/a"));
    cr_assert(path_match("/**", ""));
}

Test(glob, next_ref_finds_what_expand_would_replace)
{
    const char *s = "{\"a\": 1} {x /{id}/{a-b_2}";
    size_t len = 0;
    const char *r = glob_next_ref(s, &len);

    cr_assert_not_null(r);
    cr_assert_eq(len, 2);
    cr_assert_eq(strncmp(r, "{id}", 4), 0);
    r = glob_next_ref(r + len + 2, &len);
    cr_assert_not_null(r);
    cr_assert_eq(len, 5);
    cr_assert_null(glob_next_ref(r + len + 2, &len));
    cr_assert_null(glob_next_ref("/{x", &len));
    cr_assert_null(glob_next_ref("{}", &len));
}

Test(glob, captures_names_whole_variable_segments_only)
{
    cr_assert(glob_captures("/items/{id}", "id", 2));
    cr_assert(glob_captures("/{seg}/**", "seg", 3));
    cr_assert_not(glob_captures("/items/{id}", "i", 1));
    cr_assert_not(glob_captures("/items/{id}", "idd", 3));
    cr_assert_not(glob_captures("/items/id", "id", 2));
}
