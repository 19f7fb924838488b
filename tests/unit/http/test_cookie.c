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
