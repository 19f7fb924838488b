#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strbuf.h"

Test(strbuf, u64_in_decimal)
{
    struct strbuf b = STRBUF_INIT;
    char *s;

    strbuf_add_u64(&b, 0);
    strbuf_add(&b, " ", 1);
    strbuf_add_u64(&b, 429);
    strbuf_add(&b, " ", 1);
    strbuf_add_u64(&b, 18446744073709551615ULL);
    s = strbuf_take(&b);
    cr_assert_str_eq(s, "0 429 18446744073709551615");
    free(s);
}

/* Asserts that u64_dec() writes 'v' as printf does, at the buffer's end. */
static void
expect_dec(unsigned long long v)
{
    char buf[U64_DEC_MAX], want[32];
    const char *got = u64_dec(v, buf);

    snprintf(want, sizeof(want), "%llu", v);
    cr_assert_str_eq(got, want);
    cr_assert_eq(got + strlen(want), buf + U64_DEC_MAX - 1,
                 "%llu not at the end of the buffer", v);
    {
        char put[U64_DEC_MAX + 1];
        size_t n;

        cr_assert_eq(u64_dec_n(v, buf, &n), got);
        cr_assert_eq(n, strlen(want), "%llu: length %zu", v, n);
        memset(put, 'x', sizeof(put));
        cr_assert_eq(u64_put(put, v), put + n, "%llu: u64_put() end", v);
        cr_assert(memcmp(put, want, n) == 0 && put[n] == 'x',
                  "%llu: u64_put() wrote %.*s", v, (int)n, put);
    }
}

Test(strbuf, decimal_digits_at_every_length_edge)
{
    unsigned long long p = 1;

    for (unsigned long long v = 0; v < 10000; v++) {
        expect_dec(v);
    }
    for (int k = 1; k <= 19; k++) {
        p *= 10;
        expect_dec(p - 1);
        expect_dec(p);
        expect_dec(p + 1);
        expect_dec(p + 99);
    }
    expect_dec(18446744073709551615ULL);
    expect_dec(18446744073709551614ULL);
    expect_dec(18446744073709551600ULL);
    expect_dec(9223372036854775808ULL);
}

Test(strbuf, json_escapes_only_what_it_must)
{
    struct strbuf b = STRBUF_INIT;
    char *s;

    strbuf_add_json(&b, "plain");
    strbuf_add_json(&b, "");
    strbuf_add_json(&b, "a\"b\\c\nd\x7f"
                        "e");
    strbuf_add_json(&b, "\"");
    strbuf_add_json(&b, NULL);
    s = strbuf_take(&b);
    cr_assert_str_eq(
        s, "\"plain\"\"\"\"a\\\"b\\\\c\\u000ad\\u007fe\"\"\\\"\"null");
    free(s);
}

Test(strbuf, take_of_nothing_is_empty)
{
    struct strbuf b = STRBUF_INIT;
    char *s = strbuf_take(&b);

    cr_assert_str_eq(s, "");
    free(s);
}

Test(strbuf, append_hands_out_room_and_keeps_the_string_terminated)
{
    struct strbuf b = STRBUF_INIT;
    char *p;

    strbuf_adds(&b, "ab");
    p = strbuf_append(&b, 3);
    cr_assert_eq(p, b.p + 2);
    cr_assert_eq(b.n, 5);
    cr_assert_eq(b.p[5], '\0');
    memcpy(p, "cde", 3);
    /* Past the first allocation: the bytes before stay. */
    p = strbuf_append(&b, 300);
    memset(p, 'x', 300);
    cr_assert_eq(b.n, 305);
    cr_assert_eq(strncmp(b.p, "abcdexx", 7), 0);
    cr_assert_eq(strlen(b.p), 305);
    free(b.p);
}
