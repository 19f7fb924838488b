#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "urlcode.h"

/* Strict-decodes 's' and compares with 'want' (NULL: refused). */
static void
expect_strict(const char *s, const char *want)
{
    char *got = urlcode_percent_decode(s, strlen(s));

    if (want == NULL) {
        cr_assert_null(got, "urlcode_percent_decode(\"%s\") = \"%s\"", s, got);
        return;
    }
    cr_assert_not_null(got, "urlcode_percent_decode(\"%s\") refused it", s);
    cr_assert_str_eq(got, want, "urlcode_percent_decode(\"%s\")", s);
    free(got);
}

/* Form-decodes 's' and compares with the 'wantlen' bytes of 'want'. */
static void
expect_form(const char *s, const char *want, size_t wantlen)
{
    char buf[64];
    size_t n = urlcode_form_decode(s, strlen(s), buf);

    cr_assert_eq(n, wantlen, "urlcode_form_decode(\"%s\"): %zu bytes", s, n);
    cr_assert_arr_eq(buf, want, wantlen, "urlcode_form_decode(\"%s\")", s);
}

/* The first value of 'name' in 'query', as a new string; NULL if absent. */
static char *
first(const char *query, const char *name)
{
    const char *v = NULL;
    size_t n = 0;

    if (!urlcode_query_first(query, name, &v, &n)) {
        return NULL;
    }
    return strndup(v, n);
}

static void
expect_first(const char *query, const char *name, const char *want)
{
    char *got = first(query, name);

    if (want == NULL) {
        cr_assert_null(got, "\"%s\" in \"%s\" = \"%s\"", name, query, got);
        return;
    }
    cr_assert_not_null(got, "\"%s\" not found in \"%s\"", name, query);
    cr_assert_str_eq(got, want, "\"%s\" in \"%s\"", name, query);
    free(got);
}

Test(urlcode, an_escape_is_a_percent_sign_and_two_hex_digits_of_either_case)
{
    cr_assert_eq(urlcode_escape("%41", 3), 0x41);
    cr_assert_eq(urlcode_escape("%7e", 3), 0x7e);
    cr_assert_eq(urlcode_escape("%7E", 3), 0x7e);
    cr_assert_eq(urlcode_escape("%ff", 3), 0xff);
    cr_assert_eq(urlcode_escape("%00", 3), 0);
    cr_assert_eq(urlcode_escape("%4142", 5), 0x41, "only three bytes");
}

Test(urlcode, an_escape_cut_short_or_not_hex_is_not_an_escape)
{
    cr_assert_eq(urlcode_escape("%4", 2), -1);
    cr_assert_eq(urlcode_escape("%41", 2), -1, "the slice ends first");
    cr_assert_eq(urlcode_escape("%", 1), -1);
    cr_assert_eq(urlcode_escape("%g1", 3), -1);
    cr_assert_eq(urlcode_escape("%1g", 3), -1);
    cr_assert_eq(urlcode_escape("% 1", 3), -1);
    cr_assert_eq(urlcode_escape("x41", 3), -1);
}

Test(urlcode, strict_decoding_decodes_every_escape)
{
    expect_strict("", "");
    expect_strict("plain", "plain");
    expect_strict("p%40ss%3Aw%2Fo%25rd", "p@ss:w/o%rd");
    expect_strict("%e2%82%ac", "\xe2\x82\xac");
}

Test(urlcode, strict_decoding_keeps_a_plus_sign)
{
    expect_strict("a+b", "a+b");
    expect_strict("a%2Bb", "a+b");
}

Test(urlcode, strict_decoding_refuses_an_invalid_escape)
{
    expect_strict("%", NULL);
    expect_strict("ab%", NULL);
    expect_strict("ab%4", NULL);
    expect_strict("%zz", NULL);
    expect_strict("a%4g", NULL);
}

Test(urlcode, strict_decoding_refuses_a_nul)
{
    expect_strict("a%00b", NULL);
    cr_assert_null(urlcode_percent_decode("a\0b", 3));
}

Test(urlcode, strict_decoding_reads_only_the_slice)
{
    char *got = urlcode_percent_decode("ab%41cd", 5);

    cr_assert_str_eq(got, "abA");
    free(got);
    cr_assert_null(urlcode_percent_decode("ab%41", 4),
                   "an escape cut by the slice's end is refused");
}

Test(urlcode, form_decoding_reads_a_plus_sign_as_a_space)
{
    expect_form("a+b", "a b", 3);
    expect_form("+", " ", 1);
    expect_form("a%2Bb", "a+b", 3);
    expect_form("a%20b", "a b", 3);
}

Test(urlcode, form_decoding_keeps_an_invalid_escape_as_it_is)
{
    expect_form("100%", "100%", 4);
    expect_form("%4", "%4", 2);
    expect_form("%zz%41", "%zzA", 4);
    expect_form("%%41", "%A", 2);
}

Test(urlcode, form_decoding_yields_a_nul_for_an_escaped_nul)
{
    expect_form("a%00b", "a\0b", 3);
}

Test(urlcode, form_byte_says_how_much_input_it_used)
{
    unsigned char c = 0;

    cr_assert_eq(urlcode_form_byte("%41x", 4, &c), 3);
    cr_assert_eq(c, 'A');
    cr_assert_eq(urlcode_form_byte("+x", 2, &c), 1);
    cr_assert_eq(c, ' ');
    cr_assert_eq(urlcode_form_byte("%41", 2, &c), 1, "the slice ends first");
    cr_assert_eq(c, '%');
}

Test(urlcode, query_lookup_finds_the_first_value_of_a_parameter)
{
    expect_first("a=1&b=2&a=3", "a", "1");
    expect_first("a=1&b=2&a=3", "b", "2");
    expect_first("a=1", "b", NULL);
    expect_first("", "a", NULL);
    cr_assert_not(
        urlcode_query_first(NULL, "a", &(const char *){NULL}, &(size_t){0}));
}

Test(urlcode, query_lookup_returns_the_value_still_encoded)
{
    expect_first("q=a+b%20c", "q", "a+b%20c");
    expect_first("q=x=y", "q", "x=y");
}

Test(urlcode, query_lookup_compares_the_decoded_name)
{
    expect_first("api%5Fkey=v", "api_key", "v");
    expect_first("a+b=v", "a b", "v");
    expect_first("a%2bb=v", "a+b", "v");
    expect_first("a+b=v", "a+b", NULL);
    expect_first("a%00=v", "a", NULL);
}

Test(urlcode, query_lookup_gives_an_empty_value_to_a_bare_or_empty_parameter)
{
    expect_first("flag&x=1", "flag", "");
    expect_first("flag=&x=1", "flag", "");
    expect_first("x=1&flag", "flag", "");
}

Test(urlcode, query_lookup_does_not_match_a_name_that_is_a_prefix_of_another)
{
    expect_first("api_keyx=no&api_key=yes", "api_key", "yes");
    expect_first("api=no&api_key=yes", "api_key", "yes");
    expect_first("api_key=yes", "api", NULL);
    expect_first("ab%=no&ab=yes", "ab", "yes");
}

Test(urlcode, query_lookup_skips_empty_parameters)
{
    expect_first("&&a=1&", "a", "1");
    expect_first("&", "a", NULL);
}

Test(urlcode, query_lookup_splits_on_ampersands_only)
{
    expect_first("a=1;b=2", "a", "1;b=2");
    expect_first("a=1;b=2", "b", NULL);
    expect_first("a=1%26b=2", "b", NULL);
}

Test(urlcode, query_lookup_walks_every_value_of_a_parameter_in_order)
{
    const char *want[] = {"1", "", "3", ""};
    const char *cursor = "a=1&b=2&a=&a=3&c&a";
    const char *v;
    size_t n;
    size_t i = 0;

    while (urlcode_query_next(&cursor, "a", &v, &n)) {
        cr_assert_lt(i, 4, "more values than there are");
        cr_assert_eq(n, strlen(want[i]), "value %zu", i);
        cr_assert_arr_eq(v, want[i], n, "value %zu", i);
        i++;
    }
    cr_assert_eq(i, 4);
    cr_assert_null(cursor, "the cursor ends at the end");
    cr_assert_not(urlcode_query_next(&cursor, "a", &v, &n), "and stays");
}

/* What PHP registers a raw parameter or cookie name as ($_GET, $_COOKIE). */
Test(urlcode, names_are_read_as_php_reads_them)
{
    static const char *const api_key[] = {
        "api_key",    "api.key",       "api key",      "api+key",
        "api%2Ekey",  "%20%20api_key", "api[key",      "api_key[]",
        "api_key[0]", "api_key[a][b]", "api_key%00.x", "api_key[x%5D",
    };
    static const char *const other[] = {
        "api_keyx",   "api[key]", "xapi_key", "api_key_", "api[k.ey",
        "api_key%20", "",         "[]",       "   ",
    };

    for (size_t i = 0; i < sizeof(api_key) / sizeof(api_key[0]); i++) {
        cr_assert(
            urlcode_php_name_is(api_key[i], strlen(api_key[i]), "api_key"),
            "%s", api_key[i]);
    }
    for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
        cr_assert_not(
            urlcode_php_name_is(other[i], strlen(other[i]), "api_key"), "%s",
            other[i]);
    }
    /* After an unmatched '[', the rest is read as written. */
    cr_assert(urlcode_php_name_is("api[k.ey", 8, "api_k.ey"));
}
