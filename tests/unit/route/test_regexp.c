#include <criterion/criterion.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "regexp.h"

static struct regexp *
compile_ok(const char *pattern)
{
    char err[256] = "";
    struct regexp *re = regexp_new(pattern, err, sizeof(err));

    cr_assert_not_null(re, "\"%s\" did not compile: %s", pattern, err);
    return re;
}

static bool
full(const struct regexp *re, const char *s)
{
    return regexp_full_match(re, s, strlen(s));
}

/* Replaces and checks the result; the string is freed here. */
static void
assert_replace(const char *pattern, const char *subject, const char *repl,
               const char *want)
{
    struct regexp *re = compile_ok(pattern);
    char err[256] = "";
    char *got = regexp_replace(re, subject, repl, err, sizeof(err));

    cr_assert_not_null(got, "s/%s/%s/ failed: %s", pattern, repl, err);
    cr_assert_str_eq(got, want, "s/%s/%s/ on \"%s\"", pattern, repl, subject);
    free(got);
    regexp_free(re);
}

static void
assert_replace_fails(const char *pattern, const char *subject, const char *repl,
                     const char *want_err)
{
    struct regexp *re = compile_ok(pattern);
    char err[256] = "";
    char *got = regexp_replace(re, subject, repl, err, sizeof(err));

    cr_assert_null(got, "s/%s/%s/ gave \"%s\"", pattern, repl, got ? got : "");
    cr_assert_str_eq(err, want_err);
    regexp_free(re);
}

Test(regexp, full_match_needs_the_whole_string)
{
    struct regexp *re = compile_ok("/api/[0-9]+");

    cr_assert(full(re, "/api/12"));
    cr_assert_not(full(re, "/api/12/x"));
    cr_assert_not(full(re, "x/api/12"));
    cr_assert_not(full(re, "/api/"));
    regexp_free(re);
}

Test(regexp, full_match_backtracks_into_alternatives_to_reach_the_end)
{
    struct regexp *re = compile_ok("a|ab");

    /* An unanchored search would stop at "a" and call it a partial. */
    cr_assert(full(re, "ab"));
    cr_assert(full(re, "a"));
    cr_assert_not(full(re, "abc"));
    regexp_free(re);
}

Test(regexp, full_match_uses_the_given_length)
{
    struct regexp *re = compile_ok("ab");

    cr_assert(regexp_full_match(re, "abc", 2));
    cr_assert_not(regexp_full_match(re, "abc", 3));
    cr_assert_not(regexp_full_match(re, "abc", 1));
    regexp_free(re);
}

Test(regexp, full_match_of_an_empty_pattern_is_only_the_empty_string)
{
    struct regexp *re = compile_ok("");

    cr_assert(regexp_full_match(re, "", 0));
    cr_assert_not(full(re, "x"));
    regexp_free(re);
}

Test(regexp, bad_pattern_reports_what_and_where)
{
    char err[256] = "";

    cr_assert_null(regexp_new("(abc", err, sizeof(err)));
    cr_assert_str_eq(err, "missing closing parenthesis at offset 4");
    cr_assert_null(regexp_new("a{2,1}", err, sizeof(err)));
    cr_assert(strstr(err, "at offset 5") != NULL, "got \"%s\"", err);
    regexp_free(NULL);
}

Test(regexp, replace_substitutes_every_match_with_numbered_groups)
{
    assert_replace("(\\w+)=(\\w+)", "a=1&b=2", "$2=$1", "1=a&2=b");
    assert_replace("(\\w+)=(\\w+)", "a=1&b=2", "${2}x", "1x&2x");
    assert_replace("o", "foo", "0", "f00");
    assert_replace("o", "bar", "0", "bar");
    assert_replace("b(a)r", "bar", "[$0]", "[bar]");
}

Test(regexp, replace_accepts_named_groups_in_both_forms)
{
    assert_replace("/red/(?<segment>.*)", "/red/blue/x", "/${segment}",
                   "/blue/x");
    assert_replace("/red/(?<segment>.*)", "/red/blue/x", "/$segment",
                   "/blue/x");
}

Test(regexp, replace_understands_springs_escaped_brace)
{
    /* The example from Spring's RewritePath documentation. */
    assert_replace("/red/?(?<segment>.*)", "/red/blue", "/$\\{segment}",
                   "/blue");
    assert_replace("/red/?(?<segment>.*)", "/red", "/$\\{segment}", "/");
}

Test(regexp, double_dollar_is_a_literal_dollar)
{
    assert_replace("x", "axb", "$$", "a$b");
    /* "$$" first, so the brace after it stays text. */
    assert_replace("x", "x", "$$\\{a}", "$\\{a}");
}

Test(regexp, unset_groups_insert_nothing)
{
    assert_replace("(a)|(b)", "ab", "[$1$2]", "[a][b]");
}

Test(regexp, empty_matches_advance_through_the_subject)
{
    assert_replace("x*", "abc", "-", "-a-b-c-");
}

Test(regexp, replace_grows_past_its_first_guess)
{
    struct regexp *re = compile_ok("a");
    char subject[1001];
    char err[64];
    char *got;

    memset(subject, 'a', 1000);
    subject[1000] = '\0';
    got = regexp_replace(re, subject, "xyzxyz", err, sizeof(err));
    cr_assert_not_null(got);
    cr_assert_eq(strlen(got), 6000);
    cr_assert_eq(strncmp(got, "xyzxyzxyz", 9), 0);
    cr_assert_str_eq(got + 5994, "xyzxyz");
    free(got);
    regexp_free(re);
}

Test(regexp, unknown_group_name_is_an_error)
{
    assert_replace_fails("/red/(?<segment>.*)", "/red/x", "/${segmnet}",
                         "unknown group \"segmnet\"");
    assert_replace_fails("/red/(?<segment>.*)", "/red/x", "/$\\{segmnet}",
                         "unknown group \"segmnet\"");
    assert_replace_fails("/red/(?<segment>.*)", "/red/x", "/$other",
                         "unknown group \"other\"");
}

Test(regexp, unknown_group_number_is_an_error)
{
    assert_replace_fails("(a)(b)", "ab", "$3",
                         "unknown group 3 (the "
                         "pattern has 2)");
    assert_replace_fails("(a)(b)", "ab", "${12}",
                         "unknown group 12 (the pattern has 2)");
}

Test(regexp, replacement_errors_show_even_when_nothing_matches)
{
    /* filter_init() relies on this to check a replacement at load time. */
    assert_replace_fails("/red/(?<segment>.*)", "", "/${nope}",
                         "unknown group \"nope\"");
}

Test(regexp, malformed_dollar_forms_are_errors)
{
    assert_replace_fails("a", "a", "x$",
                         "\"$\" at offset 1 is not followed "
                         "by a group number or name (write "
                         "\"$$\" for a dollar)");
    assert_replace_fails("a", "a", "$-",
                         "\"$\" at offset 0 is not followed "
                         "by a group number or name (write "
                         "\"$$\" for a dollar)");
    assert_replace_fails("(?<n>a)", "a", "${n",
                         "missing \"}\" after the "
                         "\"${\" at offset 0");
}

struct worker {
    const struct regexp *re; /* shared by every worker; borrowed */
    int hits;                /* full matches seen */
};

static void *
match_many(void *arg)
{
    struct worker *w = arg;
    char buf[32];

    for (int i = 0; i < 2000; i++) {
        int n = snprintf(buf, sizeof(buf), "/api/%d", i);

        if (regexp_full_match(w->re, buf, (size_t)n)) {
            w->hits++;
        }
        if (regexp_full_match(w->re, "/api/x", 6)) {
            w->hits += 1000000;
        }
    }
    return NULL;
}

Test(regexp, one_compiled_pattern_serves_many_threads)
{
    struct regexp *re = compile_ok("/api/(?<id>[0-9]+)");
    struct worker w[4];
    pthread_t t[4];

    for (int i = 0; i < 4; i++) {
        w[i].re = re;
        w[i].hits = 0;
        cr_assert_eq(pthread_create(&t[i], NULL, match_many, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(pthread_join(t[i], NULL), 0);
        cr_assert_eq(w[i].hits, 2000);
    }
    regexp_free(re);
}
