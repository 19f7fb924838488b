#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "lease.h"

static struct limiter_def
bucket(unsigned lease, uint64_t burst, uint64_t window_ms)
{
    struct limiter_def d;

    memset(&d, 0, sizeof(d));
    d.name = "hot";
    d.algorithm = LIMIT_TOKEN_BUCKET;
    d.rules[0] = (struct limit_rule){1000, window_ms, burst};
    d.nrules = 1;
    d.lease = lease;
    return d;
}

static const struct limit_result granted_res = {
    .allowed = true, .remaining = 500, .reset_ms = 700, .rule = 0};

/* Makes 'l' hold 'granted' - cost units from a take sent at 'at'. */
static void
grant(struct lease *l, const struct limiter_def *d, uint64_t cost,
      uint64_t granted, uint64_t at)
{
    lease_take_started(l, d, at);
    cr_assert(l->taking);
    lease_take_granted(l, cost, granted, &granted_res, at);
    cr_assert(!l->taking);
}

Test(lease, a_new_key_asks_for_its_cost_only)
{
    struct lease_table *t = lease_table_new(16);
    struct limiter_def d = bucket(100, 1000, 60000);
    struct lease ev;
    bool evicted;
    struct lease *l = lease_table_add(t, "k", 10, &ev, &evicted);

    cr_assert_not_null(l);
    cr_assert(!evicted);
    cr_assert_eq(lease_table_find(t, "k"), l);
    cr_assert_null(lease_table_find(t, "other"));
    cr_assert_eq(lease_want(l, &d, 1, 0), 1);
    cr_assert_eq(lease_want(l, &d, 3, 0), 3);
    lease_table_free(t);
}

Test(lease, spending_admits_while_units_last_and_before_the_deadline)
{
    struct lease_table *t = lease_table_new(16);
    struct limiter_def d = bucket(100, 1000, 60000);
    struct lease ev;
    bool evicted;
    struct lease *l = lease_table_add(t, "k", 0, &ev, &evicted);
    struct limit_result res;

    grant(l, &d, 1, 4, 1000);
    cr_assert_eq(l->units, 3);
    cr_assert_eq(lease_table_held(t), 3);
    cr_assert(lease_spend(l, 2, 2000, &res));
    cr_assert(res.allowed);
    /* What Redis had left at the take, plus what the lease still holds. */
    cr_assert_eq(res.remaining, 501);
    cr_assert_eq(res.reset_ms, 700);
    cr_assert_eq(res.retry_after_ms, 0);
    cr_assert_eq(res.delay_ms, 0);
    /* One unit left: a cost of 2 is not covered. */
    cr_assert_not(lease_spend(l, 2, 2000, &res));
    cr_assert_eq(l->units, 1);
    /* The deadline is the take's time plus 1 s (a 60 s window). */
    cr_assert_not(lease_spend(l, 1, 1000 + 1000000, &res));
    cr_assert(lease_spend(l, 1, 1000 + 999999, &res));
    cr_assert_eq(l->units, 0);
    lease_table_free(t);
}

Test(lease, a_lease_lives_one_second_or_the_shortest_window)
{
    struct limiter_def d = bucket(10, 100, 60000);

    cr_assert_eq(lease_lifetime_ms(&d), 1000);
    d.rules[1] = (struct limit_rule){10, 250, 10};
    d.nrules = 2;
    cr_assert_eq(lease_lifetime_ms(&d), 250);
}

Test(lease, want_doubles_while_leases_run_out_early_up_to_the_lease)
{
    struct lease_table *t = lease_table_new(16);
    struct limiter_def d = bucket(20, 1000, 60000);
    struct lease ev;
    bool evicted;
    struct lease *l = lease_table_add(t, "k", 0, &ev, &evicted);
    uint64_t now = 1000;
    uint64_t seen[8];

    for (size_t i = 0; i < 8; i++) {
        struct limit_result res;

        lease_take_started(l, &d, now);
        seen[i] = lease_want(l, &d, 1, 0);
        lease_take_granted(l, 1, seen[i], &granted_res, now);
        while (lease_spend(l, 1, now, &res)) {
        }
        now += 1000; /* well within the 1 s lease */
    }
    cr_assert_eq(seen[0], 1);
    cr_assert_eq(seen[1], 2);
    cr_assert_eq(seen[2], 4);
    cr_assert_eq(seen[3], 8);
    cr_assert_eq(seen[4], 16);
    cr_assert_eq(seen[5], 20, "capped at lease: 20, got %llu",
                 (unsigned long long)seen[5]);
    cr_assert_eq(seen[7], 20);
    lease_table_free(t);
}

Test(lease, want_is_capped_by_the_smallest_burst_and_grows_with_the_queue)
{
    struct lease_table *t = lease_table_new(16);
    struct limiter_def d = bucket(100, 10, 60000);
    struct lease ev;
    bool evicted;
    struct lease *l = lease_table_add(t, "k", 0, &ev, &evicted);

    cr_assert_eq(lease_want(l, &d, 1, 5), 6);
    cr_assert_eq(lease_want(l, &d, 1, 50), 10);
    /* The cost always, even past the cap (config keeps cost <= burst). */
    cr_assert_eq(lease_want(l, &d, 12, 0), 12);
    lease_table_free(t);
}

struct returned {
    uint64_t units[16]; /* as the callback saw them */
    size_t n;
};

static void
on_return(const struct lease *l, void *arg)
{
    struct returned *r = arg;

    cr_assert_null(l->def.name, "the copy keeps no borrowed name");
    r->units[r->n++] = l->units;
}

Test(lease, expiry_returns_unused_units_and_halves_want)
{
    struct lease_table *t = lease_table_new(16);
    struct limiter_def d = bucket(100, 1000, 60000);
    struct lease ev;
    bool evicted;
    struct lease *l = lease_table_add(t, "k", 0, &ev, &evicted);
    struct returned r = {{0}, 0};

    l->want = 8;
    grant(l, &d, 1, 8, 0);
    lease_table_expire(t, 999999, 10000000, on_return, &r);
    cr_assert_eq(r.n, 0, "not yet");
    lease_table_expire(t, 1000000, 10000000, on_return, &r);
    cr_assert_eq(r.n, 1);
    cr_assert_eq(r.units[0], 7);
    cr_assert_eq(l->units, 0);
    cr_assert_eq(l->want, 4);
    cr_assert_eq(lease_table_held(t), 0);
    /* Idle long enough with nothing held: forgotten. */
    lease_table_expire(t, 20000000, 10000000, on_return, &r);
    cr_assert_eq(r.n, 1);
    cr_assert_null(lease_table_find(t, "k"));
    lease_table_free(t);
}

Test(lease, release_returns_every_lease_but_none_with_a_take_in_flight)
{
    struct lease_table *t = lease_table_new(16);
    struct limiter_def d = bucket(100, 1000, 60000);
    struct lease ev;
    bool evicted;
    struct lease *a = lease_table_add(t, "a", 0, &ev, &evicted);
    struct lease *b = lease_table_add(t, "b", 0, &ev, &evicted);
    struct returned r = {{0}, 0};

    grant(a, &d, 1, 5, 0);
    lease_take_started(b, &d, 0);
    lease_table_release(t, on_return, &r);
    cr_assert_eq(r.n, 1);
    cr_assert_eq(r.units[0], 4);
    cr_assert_eq(lease_table_held(t), 0);
    lease_table_free(t);
}

Test(lease, a_full_neighbourhood_evicts_the_least_recent_without_a_take)
{
    /* Eight slots: every key shares the one neighbourhood. */
    struct lease_table *t = lease_table_new(8);
    struct limiter_def d = bucket(100, 1000, 60000);
    struct lease ev;
    bool evicted;
    char key[16];
    struct lease *l;

    for (uint64_t i = 0; i < 8; i++) {
        snprintf(key, sizeof(key), "k%llu", (unsigned long long)i);
        l = lease_table_add(t, key, 100 + i, &ev, &evicted);
        cr_assert_not_null(l);
        cr_assert(!evicted);
        if (i == 0) {
            lease_take_started(l, &d, 100); /* k0 is oldest but taking */
        } else if (i == 1) {
            grant(l, &d, 1, 6, 101); /* k1 holds 5 units */
        }
    }
    l = lease_table_add(t, "new", 200, &ev, &evicted);
    cr_assert_not_null(l);
    cr_assert(evicted);
    cr_assert_str_eq(ev.key, "k1");
    cr_assert_eq(ev.units, 5, "the caller returns what it held");
    cr_assert_not_null(lease_table_find(t, "k0"));
    cr_assert_null(lease_table_find(t, "k1"));
    lease_table_free(t);
}

Test(lease, no_entry_when_every_neighbour_is_taking)
{
    struct lease_table *t = lease_table_new(8);
    struct limiter_def d = bucket(100, 1000, 60000);
    struct lease ev;
    bool evicted;
    char key[16];

    for (int i = 0; i < 8; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        lease_take_started(lease_table_add(t, key, 1, &ev, &evicted), &d, 1);
    }
    cr_assert_null(lease_table_add(t, "new", 2, &ev, &evicted));
    cr_assert(!evicted);
    lease_table_free(t);
}

/* A take that was not answered may still be granted: the next asks for
 * the cost again, and does not double, however hot the key was. */
Test(lease, a_take_not_answered_falls_back_to_the_cost)
{
    struct lease_table *t = lease_table_new(16);
    struct limiter_def d = bucket(50, 1000, 60000);
    struct lease ev;
    bool evicted;
    struct lease *l = lease_table_add(t, "k", 0, &ev, &evicted);
    struct limit_result res;
    uint64_t now = 1000;

    for (size_t i = 0; i < 8; i++) {
        grant(l, &d, 1, lease_want(l, &d, 1, 0), now);
        while (lease_spend(l, 1, now, &res)) {
        }
        now += 1000;
    }
    lease_take_started(l, &d, now);
    cr_assert_eq(lease_want(l, &d, 1, 0), 50, "hot: takes of the lease");
    lease_take_failed(l);
    cr_assert(!l->taking);
    now += 1000;
    for (size_t i = 0; i < 3; i++) {
        lease_take_started(l, &d, now);
        cr_assert_eq(lease_want(l, &d, 1, 0), 1, "take %zu after a failure", i);
        cr_assert_eq(lease_want(l, &d, 3, 2), 5, "its cost and the queue's");
        lease_take_failed(l);
        now += 1000;
    }
    /* Answered again: it grows as a new key's takes do. */
    grant(l, &d, 1, 1, now);
    lease_take_started(l, &d, now + 1000);
    cr_assert_eq(lease_want(l, &d, 1, 0), 2);
    lease_table_free(t);
}
