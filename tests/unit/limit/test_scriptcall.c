#include <criterion/criterion.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scriptcall.h"

static struct limiter_def
def(enum limit_algorithm a, size_t nrules, const struct limit_rule *rules)
{
    struct limiter_def d;

    memset(&d, 0, sizeof(d));
    d.name = (char *)"test";
    memcpy(d.tag, "00000000", 9);
    d.algorithm = a;
    d.nrules = nrules;
    for (size_t i = 0; i < nrules; i++) {
        d.rules[i] = rules[i];
    }
    return d;
}

/* Asserts that 'sc' holds exactly the 'n' arguments 'want'. */
static void
expect_args(const struct scriptcall *sc, const char *const *want, size_t n)
{
    cr_assert_eq(sc->nargs, n, "%zu arguments, want %zu", sc->nargs, n);
    for (size_t i = 0; i < n; i++) {
        cr_assert_str_eq(sc->args[i], want[i], "ARGV[%zu]", i + 1);
        cr_assert_eq(sc->arg_lens[i], strlen(want[i]), "length of ARGV[%zu]",
                     i + 1);
    }
    for (size_t i = 0; i < sc->nkeys; i++) {
        cr_assert_eq(sc->key_lens[i], strlen(sc->keys[i]),
                     "length of KEYS[%zu]", i + 1);
    }
}

Test(scriptcall, one_rule_gives_one_key_and_the_arguments_in_order)
{
    struct limit_rule r = {10, 1000, 20};
    struct limiter_def d = def(LIMIT_TOKEN_BUCKET, 1, &r);
    struct scriptcall sc;
    const char *want[] = {"0", "3", "0", "0", "req-1", "10", "1000", "20"};

    cr_assert_eq(scriptcall_encode(&sc, &d, "p:{s:ip:1}", 3, "req-1", 0), 0);
    cr_assert_eq(sc.nkeys, 1);
    cr_assert_str_eq(sc.keys[0], "p:{s:ip:1}:0");
    expect_args(&sc, want, 8);
}

Test(scriptcall, several_rules_give_a_key_and_a_triple_each_in_rule_order)
{
    struct limit_rule r[] = {{5, 1000, 5}, {100, 60000, 100}, {7, 3, 7}};
    struct limiter_def d = def(LIMIT_SLIDING_WINDOW, 3, r);
    struct scriptcall sc;
    const char *want[] = {"0", "1",   "0",     "0",   "id", "5", "1000",
                          "5", "100", "60000", "100", "7",  "3", "7"};

    cr_assert_eq(scriptcall_encode(&sc, &d, "k:{a}", 1, "id", 0), 0);
    cr_assert_eq(sc.nkeys, 3);
    cr_assert_str_eq(sc.keys[0], "k:{a}:0");
    cr_assert_str_eq(sc.keys[1], "k:{a}:1");
    cr_assert_str_eq(sc.keys[2], "k:{a}:2");
    expect_args(&sc, want, 14);
}

Test(scriptcall, eight_rules_are_suffixed_zero_to_seven)
{
    struct limit_rule r[LIMIT_MAX_RULES];
    struct limiter_def d;
    struct scriptcall sc;

    for (size_t i = 0; i < LIMIT_MAX_RULES; i++) {
        r[i] = (struct limit_rule){i + 1, 1000, i + 1};
    }
    d = def(LIMIT_FIXED_WINDOW, LIMIT_MAX_RULES, r);
    cr_assert_eq(scriptcall_encode(&sc, &d, "b", 1, "id", 0), 0);
    cr_assert_eq(sc.nkeys, LIMIT_MAX_RULES);
    cr_assert_eq(sc.nargs, SCRIPTCALL_FIXED_ARGS + 3 * LIMIT_MAX_RULES);
    for (size_t i = 0; i < LIMIT_MAX_RULES; i++) {
        char want[8];

        snprintf(want, sizeof(want), "b:%zu", i);
        cr_assert_str_eq(sc.keys[i], want);
    }
    cr_assert_str_eq(sc.args[sc.nargs - 3], "8");
}

Test(scriptcall, delay_mode_sends_mode_one_and_the_longest_hold)
{
    struct limit_rule r = {10, 1000, 50};
    struct limiter_def d = def(LIMIT_LEAKY_BUCKET, 1, &r);
    struct scriptcall sc;

    d.delay = true;
    d.max_delay_ms = 2000;
    cr_assert_eq(scriptcall_encode(&sc, &d, "k", 2, "id", 0), 0);
    cr_assert_str_eq(sc.args[2], "1");
    cr_assert_str_eq(sc.args[3], "2000");
}

Test(scriptcall, deny_mode_still_sends_max_delay)
{
    struct limit_rule r = {10, 1000, 50};
    struct limiter_def d = def(LIMIT_GCRA, 1, &r);
    struct scriptcall sc;

    d.max_delay_ms = 750;
    cr_assert_eq(scriptcall_encode(&sc, &d, "k", 2, "id", 0), 0);
    cr_assert_str_eq(sc.args[2], "0");
    cr_assert_str_eq(sc.args[3], "750");
}

Test(scriptcall, the_time_override_is_the_first_argument)
{
    struct limit_rule r = {10, 1000, 10};
    struct limiter_def d = def(LIMIT_GCRA, 1, &r);
    struct scriptcall sc;

    cr_assert_eq(scriptcall_encode(&sc, &d, "k", 1, "id", 1700000040123), 0);
    cr_assert_str_eq(sc.args[0], "1700000040123");
    cr_assert_eq(scriptcall_encode(&sc, &d, "k", 1, "id", 0), 0);
    cr_assert_str_eq(sc.args[0], "0");
}

Test(scriptcall, the_largest_values_are_written_in_full)
{
    struct limit_rule r = {UINT64_MAX, UINT64_MAX, UINT64_MAX};
    struct limiter_def d = def(LIMIT_TOKEN_BUCKET, 1, &r);
    struct scriptcall sc;

    d.max_delay_ms = UINT64_MAX;
    cr_assert_eq(scriptcall_encode(&sc, &d, "k", UINT64_MAX, "id", UINT64_MAX),
                 0);
    for (size_t i = 0; i < sc.nargs; i++) {
        if (i != 2 && i != 4) {
            cr_assert_str_eq(sc.args[i], "18446744073709551615", "ARGV[%zu]",
                             i + 1);
        }
    }
}

Test(scriptcall, the_request_id_is_borrowed_as_the_fifth_argument)
{
    struct limit_rule r = {10, 1000, 10};
    struct limiter_def d = def(LIMIT_FIXED_WINDOW, 1, &r);
    struct scriptcall sc;
    const char *id = "0123456789abcdef-3-42";

    cr_assert_eq(scriptcall_encode(&sc, &d, "k", 1, id, 0), 0);
    cr_assert_eq(sc.args[4], id);
}

Test(scriptcall, a_limiter_without_rules_or_with_too_many_is_refused)
{
    struct limit_rule r = {10, 1000, 10};
    struct limiter_def d = def(LIMIT_FIXED_WINDOW, 1, &r);
    struct scriptcall sc;

    d.nrules = 0;
    cr_assert_eq(scriptcall_encode(&sc, &d, "k", 1, "id", 0), -1);
    d.nrules = LIMIT_MAX_RULES + 1;
    cr_assert_eq(scriptcall_encode(&sc, &d, "k", 1, "id", 0), -1);
}

Test(scriptcall, a_key_base_too_long_for_its_suffix_is_refused)
{
    struct limit_rule r = {10, 1000, 10};
    struct limiter_def d = def(LIMIT_FIXED_WINDOW, 1, &r);
    struct scriptcall sc;
    char base[SCRIPTCALL_KEY_MAX];

    /* The longest base that fits: 2 bytes for ":0", 1 for the NUL. */
    memset(base, 'x', sizeof(base));
    base[SCRIPTCALL_KEY_MAX - 3] = '\0';
    cr_assert_eq(scriptcall_encode(&sc, &d, base, 1, "id", 0), 0);
    cr_assert_eq(strlen(sc.keys[0]), SCRIPTCALL_KEY_MAX - 1);
    base[SCRIPTCALL_KEY_MAX - 3] = 'x';
    base[SCRIPTCALL_KEY_MAX - 2] = '\0';
    cr_assert_eq(scriptcall_encode(&sc, &d, base, 1, "id", 0), -1);
}

Test(scriptcall, a_key_is_its_base_and_the_rule_index)
{
    char buf[16];

    cr_assert_eq(scriptcall_key(buf, sizeof(buf), "a:{b}", 7), 0);
    cr_assert_str_eq(buf, "a:{b}:7");
    cr_assert_eq(scriptcall_key(buf, sizeof(buf), "a:{b}", LIMIT_MAX_RULES),
                 -1);
    cr_assert_eq(scriptcall_key(buf, 7, "a:{b}", 0), -1);
}

/* A token_bucket limiter of 'nrules' rules, in delay mode with
 * 'max_delay_ms' or, when that is 0, in deny mode. */
static struct limiter_def
bucket(size_t nrules, uint64_t max_delay_ms)
{
    struct limit_rule r[LIMIT_MAX_RULES];
    struct limiter_def d;

    for (size_t i = 0; i < LIMIT_MAX_RULES; i++) {
        r[i] = (struct limit_rule){5, 1000, 5};
    }
    d = def(LIMIT_TOKEN_BUCKET, nrules, r);
    d.delay = max_delay_ms > 0;
    d.max_delay_ms = max_delay_ms;
    return d;
}

Test(scriptcall, a_good_reply_decodes_field_by_field)
{
    struct limiter_def d = bucket(2, 300);
    const long long denied[] = {0, 0, 250, 1000, 0, 1};
    const long long allowed[] = {1, 4, 0, 600, 300, 0};
    struct limit_result r;

    cr_assert_eq(scriptcall_decode(&d, denied, 6, &r), 0);
    cr_assert(!r.allowed);
    cr_assert_eq(r.remaining, 0);
    cr_assert_eq(r.retry_after_ms, 250);
    cr_assert_eq(r.reset_ms, 1000);
    cr_assert_eq(r.delay_ms, 0);
    cr_assert_eq(r.rule, 1);

    cr_assert_eq(scriptcall_decode(&d, allowed, 6, &r), 0);
    cr_assert(r.allowed);
    cr_assert_eq(r.remaining, 4);
    cr_assert_eq(r.retry_after_ms, 0);
    cr_assert_eq(r.reset_ms, 600);
    cr_assert_eq(r.delay_ms, 300);
    cr_assert_eq(r.rule, 0);
}

Test(scriptcall, integers_past_the_sixth_are_ignored)
{
    struct limiter_def d = bucket(7, 5);
    const long long ints[] = {1, 2, 3, 4, 5, 6, 7, 8};
    struct limit_result r;

    cr_assert_eq(scriptcall_decode(&d, ints, 8, &r), 0);
    cr_assert(r.allowed && r.remaining == 2 && r.rule == 6);
}

Test(scriptcall, a_short_reply_is_refused_and_leaves_the_result_alone)
{
    struct limiter_def d = bucket(1, 10);
    const long long ints[] = {1, 2, 3, 4, 5, 0};
    struct limit_result r = {false, 77, 77, 77, 77, 7};

    for (size_t n = 0; n < SCRIPTCALL_REPLY_LEN; n++) {
        cr_assert_eq(scriptcall_decode(&d, ints, n, &r), -1, "%zu integers", n);
        cr_assert(!r.allowed && r.remaining == 77 && r.retry_after_ms == 77 &&
                      r.reset_ms == 77 && r.delay_ms == 77 && r.rule == 7,
                  "%zu integers: the result was written", n);
    }
    cr_assert_eq(scriptcall_decode(&d, NULL, 6, &r), -1);
}

Test(scriptcall, allowed_other_than_zero_or_one_is_refused)
{
    struct limiter_def d = bucket(1, 0);
    const long long two[] = {2, 0, 0, 0, 0, 0};
    const long long minus[] = {-1, 0, 0, 0, 0, 0};
    struct limit_result r;

    cr_assert_eq(scriptcall_decode(&d, two, 6, &r), -1);
    cr_assert_eq(scriptcall_decode(&d, minus, 6, &r), -1);
}

/* Asserts that 'lim' refuses 'ints' (six) and leaves the result alone. */
static void
expect_refused(const struct limiter_def *lim, const long long *ints)
{
    struct limit_result r = {false, 77, 77, 77, 77, 7};

    cr_assert_eq(scriptcall_decode(lim, ints, 6, &r), -1,
                 "{%lld, %lld, %lld, %lld, %lld, %lld} was accepted", ints[0],
                 ints[1], ints[2], ints[3], ints[4], ints[5]);
    cr_assert(!r.allowed && r.remaining == 77 && r.retry_after_ms == 77 &&
                  r.reset_ms == 77 && r.delay_ms == 77 && r.rule == 7,
              "the result was written");
}

Test(scriptcall, a_rule_index_past_the_limiters_rules_is_refused)
{
    struct limiter_def one = bucket(1, 0);
    struct limiter_def three = bucket(3, 0);
    struct limiter_def all = bucket(LIMIT_MAX_RULES, 0);
    const long long rule0[] = {1, 0, 0, 0, 0, 0};
    const long long rule2[] = {1, 0, 0, 0, 0, 2};
    const long long rule7[] = {1, 0, 0, 0, 0, 7};
    const long long past[] = {1, 0, 0, 0, 0, LIMIT_MAX_RULES};
    struct limit_result r;

    cr_assert_eq(scriptcall_decode(&one, rule0, 6, &r), 0);
    cr_assert_eq(r.rule, 0);
    expect_refused(&one, rule2);
    expect_refused(&one, rule7);
    cr_assert_eq(scriptcall_decode(&three, rule2, 6, &r), 0);
    cr_assert_eq(r.rule, 2);
    expect_refused(&three, rule7);
    cr_assert_eq(scriptcall_decode(&all, rule7, 6, &r), 0);
    cr_assert_eq(r.rule, LIMIT_MAX_RULES - 1);
    expect_refused(&all, past);
}

Test(scriptcall, a_delay_from_a_limiter_in_deny_mode_is_refused)
{
    struct limiter_def deny = bucket(1, 0);
    const long long held[] = {1, 4, 0, 1000, 3000, 0};
    const long long forever[] = {1, 4, 0, 1000, LLONG_MAX, 0};
    const long long one_ms[] = {1, 4, 0, 1000, 1, 0};
    const long long none[] = {1, 4, 0, 1000, 0, 0};
    struct limit_result r;

    expect_refused(&deny, held);
    expect_refused(&deny, forever);
    expect_refused(&deny, one_ms);
    /* max_delay_ms is sent, and ignored, in deny mode: it allows nothing. */
    deny.max_delay_ms = 5000;
    expect_refused(&deny, held);
    cr_assert_eq(scriptcall_decode(&deny, none, 6, &r), 0);
    cr_assert(r.allowed && r.delay_ms == 0);
}

Test(scriptcall, a_delay_above_max_delay_is_refused)
{
    struct limiter_def d = bucket(1, 1000);
    const long long at_max[] = {1, 0, 0, 2000, 1000, 0};
    const long long above[] = {1, 0, 0, 2000, 1001, 0};
    const long long five_s[] = {1, 0, 0, 6000, 5000, 0};
    const long long forever[] = {1, 0, 0, 2000, LLONG_MAX, 0};
    struct limit_result r;

    cr_assert_eq(scriptcall_decode(&d, at_max, 6, &r), 0);
    cr_assert_eq(r.delay_ms, 1000);
    expect_refused(&d, above);
    expect_refused(&d, five_s);
    expect_refused(&d, forever);
}

Test(scriptcall, an_integer_above_two_to_the_50_is_refused)
{
    struct limiter_def d = bucket(1, 1000);
    const long long max = 1LL << 50;
    const long long remaining[] = {1, max, 0, 0, 0, 0};
    const long long remaining_past[] = {1, max + 1, 0, 0, 0, 0};
    /* A time may add two spans of up to 2^50 ms (scriptcall.h). */
    const long long times[] = {0, 0, 2 * max, 2 * max, 0, 0};
    const long long retry_past[] = {0, 0, 2 * max + 1, 0, 0, 0};
    const long long reset_past[] = {0, 0, 0, 2 * max + 1, 0, 0};
    struct limit_result r;

    cr_assert_eq(scriptcall_decode(&d, remaining, 6, &r), 0);
    cr_assert_eq(r.remaining, max);
    expect_refused(&d, remaining_past);
    cr_assert_eq(scriptcall_decode(&d, times, 6, &r), 0);
    cr_assert(r.retry_after_ms == (uint64_t)(2 * max) &&
              r.reset_ms == (uint64_t)(2 * max));
    expect_refused(&d, retry_past);
    expect_refused(&d, reset_past);
    /* And a delay above 2^50 even where max_delay_ms is larger. */
    d.max_delay_ms = UINT64_MAX;
    {
        const long long delay_past[] = {1, 0, 0, 0, max + 1, 0};

        expect_refused(&d, delay_past);
    }
}

Test(scriptcall, a_remaining_of_llong_max_is_refused)
{
    struct limiter_def d = bucket(1, 0);
    const long long plain[] = {1, LLONG_MAX, 0, 1000, 0, 0};
    const long long lease[] = {1, LLONG_MAX, 0, 1000, 0, 0, 5};
    struct limit_result res = {false, 77, 77, 77, 77, 7};
    uint64_t units = 99;

    d.lease = 10;
    expect_refused(&d, plain);
    cr_assert_eq(scriptcall_decode_lease(&d, lease, 7, &res, &units), -1);
    cr_assert(res.remaining == 77 && units == 99, "the result was written");
}

Test(scriptcall, negative_integers_are_refused)
{
    struct limiter_def d = bucket(1, 1000);
    const long long good[] = {0, 3, 250, 1000, 0, 0};

    for (size_t i = 1; i < SCRIPTCALL_REPLY_LEN; i++) {
        long long ints[SCRIPTCALL_REPLY_LEN];

        memcpy(ints, good, sizeof(ints));
        ints[i] = -1;
        expect_refused(&d, ints);
        ints[i] = LLONG_MIN;
        expect_refused(&d, ints);
    }
}

Test(scriptcall, a_lease_call_appends_the_operation_and_the_units)
{
    struct limit_rule r = {100, 1000, 100};
    struct limiter_def d = def(LIMIT_TOKEN_BUCKET, 1, &r);
    struct scriptcall sc;

    cr_assert_eq(scriptcall_encode(&sc, &d, "b", 2, "id", 0), 0);
    cr_assert_eq(scriptcall_lease(&sc, SCRIPTCALL_LEASE_TAKE, 40), 0);
    cr_assert_eq(sc.nargs, SCRIPTCALL_FIXED_ARGS + 3 + 2);
    cr_assert_str_eq(sc.args[8], "take");
    cr_assert_str_eq(sc.args[9], "40");
    /* Once only. */
    cr_assert_eq(scriptcall_lease(&sc, SCRIPTCALL_LEASE_RETURN, 3), -1);
    cr_assert_eq(scriptcall_encode(&sc, &d, "b", 1, "id", 0), 0);
    cr_assert_eq(scriptcall_lease(&sc, SCRIPTCALL_LEASE_RETURN, 3), 0);
    cr_assert_str_eq(sc.args[8], "return");
    cr_assert_str_eq(sc.args[9], "3");
}

/* Asserts that every word of 'sc' carries its own length. */
static void
expect_lengths(const struct scriptcall *sc)
{
    for (size_t i = 0; i < sc->nkeys; i++) {
        cr_assert_eq(sc->key_lens[i], strlen(sc->keys[i]),
                     "length of KEYS[%zu]", i + 1);
    }
    for (size_t i = 0; i < sc->nargs; i++) {
        cr_assert_eq(sc->arg_lens[i], strlen(sc->args[i]),
                     "length of ARGV[%zu]", i + 1);
    }
}

Test(scriptcall, every_word_carries_its_length)
{
    struct limit_rule r[LIMIT_MAX_RULES];
    struct limiter_def d;
    struct scriptcall sc;
    char base[SCRIPTCALL_KEY_MAX - 2];

    for (size_t i = 0; i < LIMIT_MAX_RULES; i++) {
        r[i] = (struct limit_rule){i == 0 ? UINT64_MAX : 9, 10 + i, 100 * i};
    }
    d = def(LIMIT_SLIDING_WINDOW, LIMIT_MAX_RULES, r);
    d.max_delay_ms = 99;
    memset(base, 'k', sizeof(base) - 1);
    base[sizeof(base) - 1] = '\0';
    cr_assert_eq(scriptcall_encode(&sc, &d, base, 0, "req-77", UINT64_MAX), 0);
    expect_lengths(&sc);
    cr_assert_eq(sc.key_lens[0], sizeof(base) + 1);
    d = def(LIMIT_TOKEN_BUCKET, 1, r);
    cr_assert_eq(scriptcall_encode(&sc, &d, "", 10, "", 1000), 0);
    cr_assert_eq(scriptcall_lease(&sc, SCRIPTCALL_LEASE_TAKE, 100), 0);
    expect_lengths(&sc);
    cr_assert_eq(scriptcall_encode(&sc, &d, "b", 1, "id", 0), 0);
    cr_assert_eq(scriptcall_lease(&sc, SCRIPTCALL_LEASE_RETURN, 12345), 0);
    expect_lengths(&sc);
}

Test(scriptcall, a_lease_reply_carries_the_units_in_the_seventh_integer)
{
    struct limiter_def d = bucket(1, 0);
    const long long granted[] = {1, 50, 0, 900, 0, 0, 25};
    const long long denied[] = {0, 0, 70, 900, 0, 0, 0};
    const long long nothing[] = {1, 50, 0, 900, 0, 0, 0};
    struct limit_result res;
    uint64_t units = 99;

    d.lease = 25;
    cr_assert_eq(scriptcall_decode_lease(&d, granted, 7, &res, &units), 0);
    cr_assert(res.allowed);
    cr_assert_eq(res.remaining, 50);
    cr_assert_eq(units, 25);
    cr_assert_eq(scriptcall_decode_lease(&d, denied, 7, &res, &units), 0);
    cr_assert(!res.allowed);
    cr_assert_eq(res.retry_after_ms, 70);
    cr_assert_eq(units, 0);
    /* Six integers are a plain decision, not a lease's reply. */
    cr_assert_eq(scriptcall_decode_lease(&d, granted, 6, &res, &units), -1);
    /* An admission always grants at least the cost. */
    cr_assert_eq(scriptcall_decode_lease(&d, nothing, 7, &res, &units), -1);
}

Test(scriptcall, a_lease_reply_is_checked_as_a_plain_one_and_its_units_too)
{
    struct limiter_def d = bucket(1, 0);
    const long long delayed[] = {1, 50, 0, 900, 3000, 0, 25};
    const long long rule1[] = {1, 50, 0, 900, 0, 1, 25};
    const long long huge[] = {1, 50, 0, 900, 0, 0, (1LL << 50) + 1};
    const long long minus[] = {0, 0, 70, 900, 0, 0, -1};
    struct limit_result res = {false, 77, 77, 77, 77, 7};
    uint64_t units = 99;

    d.lease = 25;
    cr_assert_eq(scriptcall_decode_lease(&d, delayed, 7, &res, &units), -1);
    cr_assert_eq(scriptcall_decode_lease(&d, rule1, 7, &res, &units), -1);
    cr_assert_eq(scriptcall_decode_lease(&d, huge, 7, &res, &units), -1);
    cr_assert_eq(scriptcall_decode_lease(&d, minus, 7, &res, &units), -1);
    cr_assert(res.remaining == 77 && units == 99, "the result was written");
}

/* The batch reply's reader as it was with strtoll(): what
 * scriptcall_unpack() must accept and refuse alike. 's' holds 'len'
 * bytes and a NUL after them, as a hiredis reply does. */
static size_t
unpack_by_strtoll(const char *s, size_t len, long long *ints, size_t max)
{
    const char *p;
    char *end;
    size_t n = 0;

    for (p = s;; p = end + 1) {
        if (n == max || !(*p == '-' || (*p >= '0' && *p <= '9'))) {
            return 0;
        }
        errno = 0;
        ints[n++] = strtoll(p, &end, 10);
        if (end == p || errno != 0 || (*end != ':' && *end != '\0')) {
            return 0;
        }
        if (*end == '\0') {
            break;
        }
    }
    return (size_t)(end - s) == len ? n : 0;
}

/* Asserts that 'len' bytes of 's' unpack as unpack_by_strtoll() has it. */
static void
expect_unpack_as_strtoll(const char *s, size_t len, size_t max)
{
    long long got[16], want[16];
    size_t n = scriptcall_unpack(s, len, got, max);

    cr_assert_eq(n, unpack_by_strtoll(s, len, want, max),
                 "\"%.*s\" (%zu bytes): %zu integers", (int)len, s, len, n);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(got[i], want[i], "\"%.*s\": integer %zu", (int)len, s, i);
    }
}

Test(scriptcall, a_batch_reply_unpacks_into_its_integers)
{
    long long ints[8];

    cr_assert_eq(scriptcall_unpack("1:9:0:1000:0:0", 14, ints, 8), 6);
    cr_assert_eq(ints[0], 1);
    cr_assert_eq(ints[1], 9);
    cr_assert_eq(ints[3], 1000);
    cr_assert_eq(ints[5], 0);
    cr_assert_eq(scriptcall_unpack("-9223372036854775808:9223372036854775807",
                                   40, ints, 8),
                 2);
    cr_assert_eq(ints[0], LLONG_MIN);
    cr_assert_eq(ints[1], LLONG_MAX);
    cr_assert_eq(scriptcall_unpack("-0:007", 6, ints, 8), 2);
    cr_assert_eq(ints[0], 0);
    cr_assert_eq(ints[1], 7);
}

Test(scriptcall, a_malformed_batch_reply_is_refused)
{
    static const char *const bad[] = {
        "",
        ":",
        "1:",
        ":1",
        "1::2",
        "-",
        "1:-",
        "--1",
        "+1",
        " 1",
        "1 ",
        "1:2 ",
        "0x10",
        "1.5",
        "1:a",
        "9223372036854775808",
        "-9223372036854775809",
        "99999999999999999999",
        "1:18446744073709551616",
        "1:2:3:4:5:6:7:8:9",
    };
    long long ints[8];

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_assert_eq(scriptcall_unpack(bad[i], strlen(bad[i]), ints, 8), 0,
                     "\"%s\" accepted", bad[i]);
        expect_unpack_as_strtoll(bad[i], strlen(bad[i]), 8);
    }
    /* A NUL inside, and bytes past the length, are not read as more. */
    cr_assert_eq(scriptcall_unpack("1\0"
                                   "2",
                                   3, ints, 8),
                 0);
    cr_assert_eq(scriptcall_unpack("12:34", 4, ints, 8), 2);
    cr_assert_eq(ints[1], 3);
    cr_assert_eq(scriptcall_unpack("12:34", 3, ints, 8), 0);
    /* Longer than any reply: refused, however it is padded. */
    {
        char padded[SCRIPTCALL_PACKED_MAX + 2];

        memset(padded, '0', sizeof(padded) - 1);
        padded[sizeof(padded) - 2] = '7';
        cr_assert_eq(scriptcall_unpack(padded, SCRIPTCALL_PACKED_MAX, ints, 8),
                     1);
        cr_assert_eq(ints[0], 0);
        cr_assert_eq(
            scriptcall_unpack(padded, SCRIPTCALL_PACKED_MAX + 1, ints, 8), 0);
    }
}

Test(scriptcall, a_batch_reply_unpacks_as_strtoll_read_it)
{
    static const char alphabet[] = "0123456789:-+ x";
    static const char *const edges[] = {
        "9223372036854775807",
        "9223372036854775806",
        "-9223372036854775808",
        "-9223372036854775807",
        "922337203685477580",
        "0009223372036854775807",
        "1:2:3:4:5:6:7:8",
        "0:0:0:0:0:0:0:0:0",
        "0000922337203685477580",
        "00009223372036854775808",
        "-00009223372036854775808",
        "-00009223372036854775809",
        "999999999999999999",
        "9999999999999999999",
        "1:00000000000000000000000000000000000000000001",
    };
    char s[40];
    uint64_t x = 88172645463325252ULL;

    for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++) {
        expect_unpack_as_strtoll(edges[i], strlen(edges[i]), 8);
        expect_unpack_as_strtoll(edges[i], strlen(edges[i]), 7);
    }
    /* Random strings, mostly digits and ':', some with other bytes;
     * about one in ten parses. */
    for (int round = 0; round < 200000; round++) {
        size_t len;

        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        len = (size_t)(x % 30);
        for (size_t i = 0; i < len; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            s[i] = x % 8 == 0   ? alphabet[x / 8 % (sizeof(alphabet) - 1)]
                   : x % 8 == 1 ? ':'
                                : (char)('0' + x / 8 % 10);
        }
        s[len] = '\0';
        expect_unpack_as_strtoll(s, len, 8);
    }
}
