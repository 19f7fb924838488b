#include <criterion/criterion.h>
#include <string.h>

#include "evreq.h"

/* The example of RFC 9110 5.6.7, and dates around its corners. */
Test(evreq, http_date_is_the_imf_fixdate)
{
    static const struct {
        time_t sec;
        const char *want;
    } cases[] = {
        {784111777, "Sun, 06 Nov 1994 08:49:37 GMT"},
        {0, "Thu, 01 Jan 1970 00:00:00 GMT"},
        {951782400, "Tue, 29 Feb 2000 00:00:00 GMT"},
        {1795046399, "Wed, 18 Nov 2026 23:59:59 GMT"},
        {4102444800, "Fri, 01 Jan 2100 00:00:00 GMT"},
    };
    char out[EVREQ_DATE_LEN];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        memset(out, 'x', sizeof(out));
        evreq_http_date(cases[i].sec, out);
        cr_assert_str_eq(out, cases[i].want);
    }
}
