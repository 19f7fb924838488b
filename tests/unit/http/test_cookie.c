#include <criterion/criterion.h>

#include <string.h>

#include "cookie.h"
#include "headers.h"

Test(cookie, finds_the_first_and_counts_every_one_across_fields)
{
    struct headers h;
    const char *v = NULL;
    size_t n = 0;

    headers_init(&h);
    headers_add(&h, "Cookie", "a=1;  sid = x y ; b");
    headers_add(&h, "cookie", "sid=second");
    headers_add(&h, "X-Cookie", "sid=no");
    cr_assert_eq(cookie_find(&h, "sid", &v, &n), 2);
    cr_assert_eq(n, 3);
    cr_assert(memcmp(v, "x y", 3) == 0);
    cr_assert_eq(cookie_find(&h, "a", &v, &n), 1);
    cr_assert_eq(cookie_find(&h, "b", &v, &n), 0, "no '=': not a cookie");
    cr_assert_eq(cookie_find(&h, "SID", &v, &n), 0, "names are exact");
    cr_assert_eq(cookie_find(NULL, "sid", &v, &n), 0);
    headers_deinit(&h);
}

/* A value in double quotes (RFC 6265 4.1.1) is found without them; a
 * quote that is not one of a pair stays. */
Test(cookie, a_value_in_double_quotes_is_found_without_them)
{
    static const struct {
        const char *field, *want;
    } cases[] = {
        {"k=\"v\"", "v"}, {"k= \"v w\" ", "v w"}, {"k=\"\"", ""},
        {"k=\"v", "\"v"}, {"k=v\"", "v\""},       {"k=\"", "\""},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct headers h;
        const char *v = NULL;
        size_t n = 0;

        headers_init(&h);
        headers_add(&h, "Cookie", cases[i].field);
        cr_assert_eq(cookie_find(&h, "k", &v, &n), 1);
        cr_assert(n == strlen(cases[i].want) &&
                      memcmp(v, cases[i].want, n) == 0,
                  "%s: got \"%.*s\", want \"%s\"", cases[i].field, (int)n, v,
                  cases[i].want);
        headers_deinit(&h);
    }
}

/* A cookie taken out of every Cookie field; the others stay in order. */
Test(cookie, remove_takes_one_name_out_of_every_field)
{
    struct headers h;

    headers_init(&h);
    headers_add(&h, "Cookie", "a=1; t=x.y.z; b=2");
    headers_add(&h, "X-Other", "t=keep");
    headers_add(&h, "cookie", "t=again");
    headers_add(&h, "Cookie", " tt=1 ;t = 3;c=4 ");
    headers_add(&h, "Cookie", "d=5");
    cr_assert_eq(cookie_remove(&h, "t"), 3);
    cr_assert_eq(h.n, 4);
    cr_assert_str_eq(h.v[0].name, "Cookie");
    cr_assert_str_eq(h.v[0].value, "a=1; b=2");
    cr_assert_str_eq(h.v[1].value, "t=keep");
    cr_assert_str_eq(h.v[2].value, "tt=1; c=4");
    cr_assert_str_eq(h.v[3].value, "d=5");
    cr_assert_eq(cookie_remove(&h, "t"), 0);
    cr_assert_eq(cookie_remove(&h, "d"), 1);
    cr_assert_eq(h.n, 3);
    headers_deinit(&h);
}
