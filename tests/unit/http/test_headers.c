#include <criterion/criterion.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "headers.h"

/* "Name: value|Name: value" in list order, for exact comparisons. */
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

Test(headers, add_keeps_arrival_order_and_duplicates)
{
    struct headers h;
    char buf[256];

    headers_init(&h);
    cr_assert_eq(h.n, 0);
    headers_add(&h, "Accept", "text/html");
    headers_add(&h, "X-Trace", "1");
    headers_add(&h, "accept", "application/json");
    dump(&h, buf, sizeof(buf));
    cr_assert_str_eq(buf, "Accept: text/html|X-Trace: 1|"
                          "accept: application/json");
    headers_deinit(&h);
    cr_assert_eq(h.n, 0);
    cr_assert_null(h.v);
}

Test(headers, get_ignores_case_and_returns_the_first_field)
{
    struct headers h;

    headers_init(&h);
    headers_add(&h, "Content-Type", "text/plain");
    headers_add(&h, "content-type", "text/html");
    cr_assert_str_eq(headers_get(&h, "CONTENT-TYPE"), "text/plain");
    cr_assert_str_eq(headers_get(&h, "content-type"), "text/plain");
    cr_assert_null(headers_get(&h, "Content-Length"));
    cr_assert_null(headers_get(&h, "Content-Typ"));
    headers_deinit(&h);
}

Test(headers, count_counts_every_field_of_a_name_in_any_case)
{
    struct headers h;

    headers_init(&h);
    cr_assert_eq(headers_count(&h, "X-A"), 0);
    headers_add(&h, "X-A", "1");
    headers_add(&h, "X-B", "2");
    headers_add(&h, "x-a", "3");
    cr_assert_eq(headers_count(&h, "X-A"), 2);
    cr_assert_eq(headers_count(&h, "X-B"), 1);
    cr_assert_eq(headers_count(&h, "X-A-"), 0);
    headers_deinit(&h);
}

Test(headers, join_makes_repeated_fields_one_list_first_field_first)
{
    struct headers h;
    char *v;

    headers_init(&h);
    cr_assert_null(headers_join(&h, "X-Forwarded-For"));
    headers_add(&h, "X-Forwarded-For", "6.6.6.6");
    headers_add(&h, "Via", "1.1 lb");
    headers_add(&h, "x-forwarded-for", "203.0.113.9, 10.0.0.1");
    v = headers_join(&h, "X-Forwarded-For");
    cr_assert_str_eq(v, "6.6.6.6, 203.0.113.9, 10.0.0.1");
    free(v);
    v = headers_join(&h, "Via");
    cr_assert_str_eq(v, "1.1 lb");
    free(v);
    /* An empty field is there, with an empty value. */
    headers_add(&h, "X-Empty", "");
    v = headers_join(&h, "X-Empty");
    cr_assert_str_eq(v, "");
    free(v);
    headers_deinit(&h);
}

static bool
starts_with(const char *name, const void *arg)
{
    return strncmp(name, arg, strlen(arg)) == 0;
}

Test(headers, remove_if_drops_what_the_callback_names_and_keeps_order)
{
    struct headers h;
    char buf[256];

    headers_init(&h);
    cr_assert_eq(headers_remove_if(&h, starts_with, "X-"), 0);
    headers_add(&h, "X-A", "1");
    headers_add(&h, "B", "2");
    headers_add(&h, "X-C", "3");
    headers_add(&h, "D", "4");
    cr_assert_eq(headers_remove_if(&h, starts_with, "X-"), 2);
    dump(&h, buf, sizeof(buf));
    cr_assert_str_eq(buf, "B: 2|D: 4");
    cr_assert_eq(headers_remove_if(&h, starts_with, ""), 2);
    cr_assert_eq(h.n, 0);
    headers_deinit(&h);
}

Test(headers, remove_drops_every_match_and_keeps_the_rest_in_order)
{
    struct headers h;
    char buf[256];

    headers_init(&h);
    headers_add(&h, "A", "1");
    headers_add(&h, "Cookie", "x");
    headers_add(&h, "B", "2");
    headers_add(&h, "COOKIE", "y");
    headers_add(&h, "C", "3");
    cr_assert_eq(headers_remove(&h, "cookie"), 2);
    dump(&h, buf, sizeof(buf));
    cr_assert_str_eq(buf, "A: 1|B: 2|C: 3");
    cr_assert_eq(headers_remove(&h, "cookie"), 0);
    cr_assert_eq(h.n, 3);
    headers_deinit(&h);
}

Test(headers, set_replaces_every_field_and_appends_one)
{
    struct headers h;
    char buf[256];

    headers_init(&h);
    headers_add(&h, "X-Id", "a");
    headers_add(&h, "Host", "example.com");
    headers_add(&h, "x-id", "b");
    headers_set(&h, "X-ID", "c");
    dump(&h, buf, sizeof(buf));
    cr_assert_str_eq(buf, "Host: example.com|X-ID: c");
    headers_set(&h, "New", "d");
    dump(&h, buf, sizeof(buf));
    cr_assert_str_eq(buf, "Host: example.com|X-ID: c|New: d");
    headers_deinit(&h);
}

Test(headers, grows_past_the_first_allocation)
{
    struct headers h;
    char name[16];

    headers_init(&h);
    for (int i = 0; i < 100; i++) {
        snprintf(name, sizeof(name), "H%d", i);
        headers_add(&h, name, name);
    }
    cr_assert_eq(h.n, 100);
    cr_assert_geq(h.cap, 100);
    cr_assert_str_eq(headers_get(&h, "h0"), "H0");
    cr_assert_str_eq(headers_get(&h, "h99"), "H99");
    headers_deinit(&h);
}

Test(headers, add_copies_its_arguments)
{
    struct headers h;
    char name[] = "X-Copy";
    char value[] = "before";

    headers_init(&h);
    headers_add(&h, name, value);
    name[0] = 'Y';
    value[0] = 'B';
    cr_assert_str_eq(headers_get(&h, "X-Copy"), "before");
    headers_deinit(&h);
}

Test(headers, names_must_be_tokens)
{
    static const char *const good[] = {"Host", "X-Request-Id", "a",
                                       "!#$%&'*+-.^_`|~09azAZ"};
    static const char *const bad[] = {"",      "X Bad",       "X:Y", "X\r\n",
                                      "X\tY",  "(x)",         "a/b", "a@b",
                                      "\"q\"", "caf\xc3\xa9", "a,b", "{x}"};

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        cr_assert(headers_valid_name(good[i]), "refused \"%s\"", good[i]);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_assert_not(headers_valid_name(bad[i]), "accepted \"%s\"", bad[i]);
    }
}

Test(headers, values_refuse_control_characters_but_tab)
{
    static const char *const good[] = {"",         "plain value",
                                       "a\tb",     "caf\xc3\xa9",
                                       "\x80\xff", "{\"json\": [1, 2]}"};
    static const char *const bad[] = {
        "a\rb", "a\nb", "a\r\nX-Evil: 1", "\x01", "bell\a", "del\x7f", "\x1f"};

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        cr_assert(headers_valid_value(good[i]), "refused value %zu", i);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_assert_not(headers_valid_value(bad[i]), "accepted value %zu", i);
    }
}

Test(headers, a_name_of_one_byte_is_a_token_exactly_when_rfc_9110_says)
{
    for (int c = 1; c < 256; c++) {
        char name[2] = {(char)c, '\0'};
        bool want = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                    (c >= 'A' && c <= 'Z') ||
                    strchr("!#$%&'*+-.^_`|~", c) != NULL;

        cr_assert_eq(headers_valid_name(name), want, "byte 0x%02x", c);
    }
}

Test(headers, long_fields_and_many_rounds_of_clear_keep_every_byte)
{
    struct headers h;
    char big[5000];
    char name[16];

    memset(big, 'v', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    headers_init(&h);
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 40; i++) {
            snprintf(name, sizeof(name), "N%d", i);
            headers_add(&h, name, i % 7 == 0 ? big : name);
        }
        headers_add_n(&h, "Cut-Here", 3, "value-cut", 5);
        cr_assert_eq(headers_remove(&h, "N1"), 1);
        cr_assert_eq(h.n, 40);
        cr_assert_str_eq(headers_get(&h, "N0"), big);
        cr_assert_str_eq(headers_get(&h, "N35"), big);
        cr_assert_str_eq(headers_get(&h, "N39"), "N39");
        cr_assert_str_eq(headers_get(&h, "Cut"), "value");
        cr_assert_null(headers_get(&h, "N1"));
        headers_clear(&h);
        cr_assert_eq(h.n, 0);
        cr_assert_null(headers_get(&h, "N0"));
    }
    headers_deinit(&h);
    cr_assert_null(h.mem);
}

Test(headers, lengths_are_those_of_valid_names_and_values_only)
{
    cr_assert_eq(headers_name_len("X-Trace"), 7);
    cr_assert_eq(headers_name_len(""), 0);
    cr_assert_eq(headers_name_len("X Trace"), 0);
    cr_assert_eq(headers_name_len(NULL), 0);
    cr_assert_eq(headers_value_len("a\tb c"), 5);
    cr_assert_eq(headers_value_len(""), 0);
    cr_assert_eq(headers_value_len("a\r\nX: 1"), SIZE_MAX);
    cr_assert_eq(headers_value_len("\x7f"), SIZE_MAX);
    cr_assert_eq(headers_value_len(NULL), SIZE_MAX);
}

/* The rule itself, byte by byte, for the tests below. */
static bool
value_ok(const char *v)
{
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
        if ((*p < 0x20 && *p != '\t') || *p == 0x7f) {
            return false;
        }
    }
    return true;
}

Test(headers, every_byte_in_every_position_of_a_value_is_judged_alike)
{
    char v[22];

    for (int c = 1; c < 256; c++) {
        for (int pos = 0; pos < 21; pos++) {
            memset(v, 'a', 21);
            v[21] = '\0';
            v[pos] = (char)c;
            cr_assert_eq(headers_valid_value(v), value_ok(v),
                         "byte 0x%02x at %d", c, pos);
        }
    }
}

Test(headers, random_values_are_judged_as_byte_by_byte)
{
    char v[48];
    unsigned seed = 12345;

    for (int i = 0; i < 20000; i++) {
        size_t n = (size_t)(rand_r(&seed) % 47);

        for (size_t k = 0; k < n; k++) {
            /* Mostly high and printable bytes, a few controls. */
            int r = rand_r(&seed) % 16;

            v[k] = (char)(r == 0   ? 1 + rand_r(&seed) % 31
                          : r < 8  ? 0x80 + rand_r(&seed) % 128
                          : r == 8 ? 0x7f
                                   : 0x20 + rand_r(&seed) % 95);
        }
        v[n] = '\0';
        cr_assert_eq(headers_value_len(v), value_ok(v) ? n : SIZE_MAX,
                     "case %d", i);
    }
}

Test(headers, names_differing_only_in_a_non_letter_are_different)
{
    struct headers h;

    headers_init(&h);
    /* '[' and '{' differ by the bit that folds a letter's case. */
    headers_add(&h, "[a", "1");
    headers_add(&h, "X-1", "2");
    cr_assert_null(headers_get(&h, "{a"));
    cr_assert_str_eq(headers_get(&h, "[A"), "1");
    cr_assert_null(headers_get(&h, "x-\x11"));
    cr_assert_eq(headers_count(&h, "x-1"), 1);
    headers_deinit(&h);
}

Test(headers, trim_values_leaves_out_the_ows_around_each_value)
{
    struct headers h;

    headers_init(&h);
    headers_add(&h, "A", "\tvalue");
    headers_add(&h, "B", "value \t ");
    headers_add(&h, "C", " \t in \t side \t");
    headers_add(&h, "D", "\t");
    headers_add(&h, "E", "plain");
    headers_trim_values(&h);
    cr_assert_eq(h.n, 5);
    cr_assert_str_eq(headers_get(&h, "A"), "value");
    cr_assert_str_eq(headers_get(&h, "B"), "value");
    cr_assert_str_eq(headers_get(&h, "C"), "in \t side");
    cr_assert_str_eq(headers_get(&h, "D"), "");
    cr_assert_str_eq(headers_get(&h, "E"), "plain");
    /* The list stays usable. */
    headers_add(&h, "F", " f ");
    cr_assert_str_eq(headers_get(&h, "F"), " f ");
    headers_deinit(&h);
}

Test(headers, list_has_reads_items_without_their_ows)
{
    static const char v[] = "foo, Close\t,bar";

    cr_assert(headers_list_has(v, strlen(v), "close"));
    cr_assert(headers_list_has(v, strlen(v), "bar"));
    cr_assert(headers_list_has(v, strlen(v), "FOO"));
    cr_assert_not(headers_list_has(v, strlen(v), "clos"));
    /* Only the 'len' bytes count. */
    cr_assert_not(headers_list_has(v, 3, "foo,"));
    cr_assert(headers_list_has(v, 3, "foo"));
    cr_assert_not(headers_list_has(v, 9, "close"));
    cr_assert_not(headers_list_has("", 0, "close"));
}
