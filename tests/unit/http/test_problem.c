#include <criterion/criterion.h>
#include <stdlib.h>

#include "problem.h"

Test(problem, body_carries_every_field)
{
    char *s = problem_json(404, "Not Found", "no route", "/a");

    cr_assert_str_eq(s, "{\"type\":\"about:blank\",\"title\":\"Not Found\","
                        "\"status\":404,\"detail\":\"no route\","
                        "\"instance\":\"/a\"}");
    free(s);
}

Test(problem, absent_detail_and_instance_are_left_out)
{
    char *s = problem_json(502, "Bad Gateway", NULL, NULL);

    cr_assert_str_eq(s, "{\"type\":\"about:blank\",\"title\":\"Bad Gateway\","
                        "\"status\":502}");
    free(s);
}

Test(problem, strings_are_escaped)
{
    char *s = problem_json(400, "Bad Request", "a\"b\\c\n", "/x\x01");

    cr_assert_str_eq(s, "{\"type\":\"about:blank\",\"title\":\"Bad Request\","
                        "\"status\":400,\"detail\":\"a\\\"b\\\\c\\u000a\","
                        "\"instance\":\"/x\\u0001\"}");
    free(s);
}

Test(problem, reasons_match_the_status)
{
    cr_assert_str_eq(problem_reason(504), "Gateway Timeout");
    cr_assert_str_eq(problem_reason(501), "Not Implemented");
    cr_assert_str_eq(problem_reason(431), "Request Header Fields Too Large");
    cr_assert_str_eq(problem_reason(299), "Error");
}
