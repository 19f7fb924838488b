#include <criterion/criterion.h>

#include <string.h>

#include "claims.h"

static struct claims *
parse(const char *json)
{
    return claims_parse(json, strlen(json));
}

Test(claims, only_a_json_object_is_claims)
{
    cr_assert_null(parse("[1,2]"));
    cr_assert_null(parse("\"sub\""));
    cr_assert_null(parse("{\"sub\":"));
    cr_assert_null(parse(""));
    claims_unref(parse("{}"));
}

Test(claims, duplicate_names_and_nul_in_strings_are_refused)
{
    cr_assert_null(parse("{\"sub\":\"a\",\"sub\":\"b\"}"));
    cr_assert_null(parse("{\"sub\":\"a\\u0000b\"}"));
}

Test(claims, identity_string_is_a_string_or_an_array_s_first_string)
{
    struct claims *c = parse("{\"s\":\"x\",\"a\":[\"y\",\"z\"],\"n\":42,"
                             "\"b\":true,\"o\":{\"k\":\"v\"},\"e\":\"\","
                             "\"an\":[1,\"w\"],\"ae\":[]}");

    cr_assert_str_eq(claims_get_string(c, "s"), "x");
    cr_assert_str_eq(claims_get_string(c, "a"), "y");
    cr_assert_null(claims_get_string(c, "n"));
    cr_assert_null(claims_get_string(c, "b"));
    cr_assert_null(claims_get_string(c, "o"));
    cr_assert_null(claims_get_string(c, "e"));
    cr_assert_null(claims_get_string(c, "an"));
    cr_assert_null(claims_get_string(c, "ae"));
    cr_assert_null(claims_get_string(c, "missing"));
    cr_assert_null(claims_get_string(NULL, "s"));
    claims_unref(c);
}

Test(claims, types_numbers_and_audiences_read_as_rfc_7519_says)
{
    struct claims *c = parse("{\"exp\":1.5e9,\"iat\":7,\"aud\":[\"a\",\"b\"],"
                             "\"iss\":\"i\",\"x\":null}");
    double d = 0;

    cr_assert_eq(claims_type(c, "exp"), CLAIMS_NUMBER);
    cr_assert_eq(claims_type(c, "aud"), CLAIMS_ARRAY);
    cr_assert_eq(claims_type(c, "iss"), CLAIMS_STRING);
    cr_assert_eq(claims_type(c, "x"), CLAIMS_OTHER);
    cr_assert_eq(claims_type(c, "nope"), CLAIMS_ABSENT);
    cr_assert(claims_get_number(c, "exp", &d));
    cr_assert_float_eq(d, 1.5e9, 1e-6);
    cr_assert(claims_get_number(c, "iat", &d));
    cr_assert_float_eq(d, 7.0, 1e-9);
    cr_assert_not(claims_get_number(c, "iss", &d));
    cr_assert(claims_has_string(c, "aud", "b"));
    cr_assert_not(claims_has_string(c, "aud", "c"));
    cr_assert(claims_has_string(c, "iss", "i"));
    cr_assert(claims_is_strings(c, "aud"));
    cr_assert(claims_is_strings(c, "iss"));
    cr_assert_not(claims_is_strings(c, "exp"));
    claims_unref(c);
}

Test(claims, a_reference_keeps_the_strings_alive)
{
    struct claims *c = parse("{\"sub\":\"alice\"}");
    struct claims *r = claims_ref(c);
    const char *s = claims_get_string(r, "sub");

    claims_unref(c);
    cr_assert_str_eq(s, "alice");
    claims_unref(r);
}
