#include <criterion/criterion.h>

#include <stdint.h>

#include "units.h"

Test(units, durations_scale_to_milliseconds)
{
    uint64_t ms = 1;

    cr_assert_eq(units_parse_duration("250ms", &ms), 0);
    cr_assert_eq(ms, 250);
    cr_assert_eq(units_parse_duration("2s", &ms), 0);
    cr_assert_eq(ms, 2000);
    cr_assert_eq(units_parse_duration("3m", &ms), 0);
    cr_assert_eq(ms, 180000);
    cr_assert_eq(units_parse_duration("1h", &ms), 0);
    cr_assert_eq(ms, 3600000);
    cr_assert_eq(units_parse_duration("2d", &ms), 0);
    cr_assert_eq(ms, 172800000);
    cr_assert_eq(units_parse_duration("0s", &ms), 0);
    cr_assert_eq(ms, 0);
}

Test(units, durations_refuse_anything_but_integer_and_unit)
{
    static const char *const bad[] = {"",      "s",    "10",  "10 s", " 10s",
                                      "10s ",  "-1s",  "+1s", "1.5s", "10sec",
                                      "10S",   "10mS", "1w",  "ms",   "1s1",
                                      "0x10s", "10Ms", "1/s", "10mss"};
    uint64_t ms = 77;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_assert_eq(units_parse_duration(bad[i], &ms), -1, "accepted \"%s\"",
                     bad[i]);
    }
    cr_assert_eq(ms, 77, "a failed parse must not store a value");
}

Test(units, durations_refuse_overflow)
{
    uint64_t ms = 0;

    /* UINT64_MAX itself fits in ms, but not once scaled to seconds. */
    cr_assert_eq(units_parse_duration("18446744073709551615ms", &ms), 0);
    cr_assert_eq(ms, UINT64_MAX);
    cr_assert_eq(units_parse_duration("18446744073709551616ms", &ms), -1);
    cr_assert_eq(units_parse_duration("18446744073709552s", &ms), -1);
    cr_assert_eq(units_parse_duration("18446744073709551s", &ms), 0);
    cr_assert_eq(ms, UINT64_C(18446744073709551000));
    cr_assert_eq(units_parse_duration("99999999999999999999999d", &ms), -1);
}

Test(units, sizes_use_binary_multiples)
{
    uint64_t b = 0;

    cr_assert_eq(units_parse_size("512B", &b), 0);
    cr_assert_eq(b, 512);
    cr_assert_eq(units_parse_size("16KiB", &b), 0);
    cr_assert_eq(b, 16384);
    cr_assert_eq(units_parse_size("2MiB", &b), 0);
    cr_assert_eq(b, 2097152);
    cr_assert_eq(units_parse_size("3GiB", &b), 0);
    cr_assert_eq(b, UINT64_C(3221225472));
    cr_assert_eq(units_parse_size("0B", &b), 0);
    cr_assert_eq(b, 0);
}

Test(units, sizes_refuse_other_spellings_and_overflow)
{
    static const char *const bad[] = {"16",     "16KB", "16kib",         "16K",
                                      "16 KiB", "-1B",  "1.5MiB",        "KiB",
                                      "16KiBs", "1TiB", "17179869184GiB"};
    uint64_t b = 0;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_assert_eq(units_parse_size(bad[i], &b), -1, "accepted \"%s\"",
                     bad[i]);
    }
    /* 2^34 GiB = 2^64 bytes: one past the limit; 2^34 - 1 fits. */
    cr_assert_eq(units_parse_size("17179869183GiB", &b), 0);
    cr_assert_eq(b, UINT64_C(17179869183) * 1073741824u);
}

Test(units, rates_give_count_and_period)
{
    struct rate r = {0, 0};

    cr_assert_eq(units_parse_rate("10/s", &r), 0);
    cr_assert_eq(r.count, 10);
    cr_assert_eq(r.period_ms, 1000);
    cr_assert_eq(units_parse_rate("100/m", &r), 0);
    cr_assert_eq(r.count, 100);
    cr_assert_eq(r.period_ms, 60000);
    cr_assert_eq(units_parse_rate("5000/h", &r), 0);
    cr_assert_eq(r.count, 5000);
    cr_assert_eq(r.period_ms, 3600000);
    cr_assert_eq(units_parse_rate("1/d", &r), 0);
    cr_assert_eq(r.count, 1);
    cr_assert_eq(r.period_ms, 86400000);
}

Test(units, rates_refuse_zero_and_malformed_input)
{
    static const char *const bad[] = {
        "0/s",   "00/m",  "10",     "/s",
        "10/",   "10/ms", "10/sec", "10 /s",
        "10/ s", "-1/s",  "1.5/s",  "10/S",
        "10/w",  "10s",   "10//s",  "18446744073709551616/s"};
    struct rate r = {7, 7};

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_assert_eq(units_parse_rate(bad[i], &r), -1, "accepted \"%s\"",
                     bad[i]);
    }
    cr_assert_eq(r.count, 7);
    cr_assert_eq(r.period_ms, 7);
}

Test(units, durations_format_in_their_largest_whole_unit)
{
    static const struct {
        uint64_t ms;
        const char *want;
    } cases[] = {{0, "0ms"},       {250, "250ms"},          {1000, "1s"},
                 {90000, "90s"},   {120000, "2m"},          {3600000, "1h"},
                 {86400000, "1d"}, {90061001, "90061001ms"}};
    char buf[24];
    uint64_t back;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cr_assert_str_eq(units_format_duration(cases[i].ms, buf, sizeof(buf)),
                         cases[i].want);
        cr_assert_eq(units_parse_duration(buf, &back), 0);
        cr_assert_eq(back, cases[i].ms);
    }
}
