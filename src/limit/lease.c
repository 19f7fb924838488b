#include "lease.h"

#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "xmalloc.h"

/* Slots a key may occupy, from its home slot on. Lookups look at all of
 * them, so an emptied slot needs no tombstone. */
#define WINDOW 8

struct lease_table {
    struct lease *slots;
    size_t mask; /* slots - 1; slots is a power of two */
};

static uint64_t
hash_of(const char *key, size_t len)
{
    uint64_t h = hash_fnv1a(HASH_FNV1A_INIT, key, len);

    return h != 0 ? h : 1;
}

struct lease_table *
lease_table_new(size_t capacity)
{
    struct lease_table *t = xcalloc(1, sizeof(*t));
    size_t n = WINDOW;

    while (n < capacity) {
        n *= 2;
    }
    t->slots = xcalloc(n, sizeof(t->slots[0]));
    t->mask = n - 1;
    return t;
}

void
lease_table_free(struct lease_table *t)
{
    if (t == NULL) {
        return;
    }
    free(t->slots);
    free(t);
}

struct lease *
lease_table_find(struct lease_table *t, const char *key)
{
    size_t len = strlen(key);
    uint64_t h;

    if (len >= RATEKEY_MAX) {
        return NULL;
    }
    h = hash_of(key, len);
    for (size_t i = 0; i < WINDOW; i++) {
        struct lease *l = &t->slots[(h + i) & t->mask];

        if (l->hash == h && strcmp(l->key, key) == 0) {
            return l;
        }
    }
    return NULL;
}

struct lease *
lease_table_add(struct lease_table *t, const char *key, uint64_t now_us,
                struct lease *evicted, bool *did_evict)
{
    size_t len = strlen(key);
    uint64_t h;
    struct lease *l = NULL;

    *did_evict = false;
    if (len >= RATEKEY_MAX) {
        return NULL;
    }
    h = hash_of(key, len);
    /* A free slot, else the one seen least recently, held units or not:
     * the caller gives them back. */
    for (size_t i = 0; i < WINDOW; i++) {
        struct lease *s = &t->slots[(h + i) & t->mask];

        if (s->hash == 0) {
            l = s;
            break;
        }
        if (!s->taking && (l == NULL || s->seen_us < l->seen_us)) {
            l = s;
        }
    }
    if (l == NULL) {
        return NULL;
    }
    if (l->hash != 0) {
        *evicted = *l;
        *did_evict = true;
    }
    memset(l, 0, sizeof(*l));
    l->hash = h;
    memcpy(l->key, key, len + 1);
    l->want = 1;
    l->seen_us = now_us;
    return l;
}

bool
lease_spend(struct lease *l, uint64_t cost, uint64_t now_us,
            struct limit_result *res)
{
    l->seen_us = now_us;
    if (l->units < cost || now_us >= l->deadline_us) {
        return false;
    }
    l->units -= cost;
    *res = l->res;
    res->allowed = true;
    res->remaining = l->res.remaining + (int64_t)l->units;
    res->retry_after_ms = 0;
    res->delay_ms = 0;
    return true;
}

/* The most a take of 'def' may ask for: its lease and smallest burst. */
static uint64_t
want_cap(const struct limiter_def *def)
{
    uint64_t cap = def->lease > 0 ? def->lease : 1;

    for (size_t i = 0; i < def->nrules; i++) {
        if (def->rules[i].burst < cap) {
            cap = def->rules[i].burst;
        }
    }
    return cap;
}

uint64_t
lease_want(const struct lease *l, const struct limiter_def *def, uint64_t cost,
           uint64_t queued)
{
    uint64_t w = l->want;
    uint64_t cap = want_cap(def);

    if (cost + queued > w) {
        w = cost + queued;
    }
    if (w > cap) {
        w = cap;
    }
    return w > cost ? w : cost;
}

void
lease_take_started(struct lease *l, const struct limiter_def *def,
                   uint64_t now_us)
{
    /* Spent before its time was up, and asked for again: a hot key. */
    if (l->units == 0 && l->deadline_us != 0 && now_us < l->deadline_us) {
        l->want *= 2;
    }
    if (l->want > want_cap(def)) {
        l->want = want_cap(def);
    }
    l->def = *def;
    l->def.name = NULL;
    l->def.policy = NULL;
    l->taking = true;
    l->seen_us = now_us;
}

uint64_t
lease_lifetime_ms(const struct limiter_def *def)
{
    uint64_t ms = LEASE_LIFETIME_MAX_MS;

    for (size_t i = 0; i < def->nrules; i++) {
        if (def->rules[i].window_ms < ms) {
            ms = def->rules[i].window_ms;
        }
    }
    return ms;
}

void
lease_take_granted(struct lease *l, uint64_t cost, uint64_t granted,
                   const struct limit_result *res, uint64_t sent_us)
{
    l->taking = false;
    l->units = granted > cost ? granted - cost : 0;
    l->deadline_us = sent_us + lease_lifetime_ms(&l->def) * 1000;
    l->res = *res;
}

void
lease_take_failed(struct lease *l)
{
    l->taking = false;
    l->want = 1;
    /* No lease to have run out early: the next take does not double. */
    l->deadline_us = 0;
}

void
lease_table_expire(struct lease_table *t, uint64_t now_us, uint64_t idle_us,
                   lease_return_cb *cb, void *arg)
{
    for (size_t i = 0; i <= t->mask; i++) {
        struct lease *l = &t->slots[i];

        if (l->hash == 0 || l->taking) {
            continue;
        }
        if (l->units > 0 && now_us >= l->deadline_us) {
            cb(l, arg);
            l->units = 0;
            /* Left over: the key is cooler than the lease was big. */
            l->want = l->want > 1 ? l->want / 2 : 1;
        }
        if (l->units == 0 && now_us - l->seen_us >= idle_us &&
            now_us >= l->deadline_us) {
            l->hash = 0;
        }
    }
}

void
lease_table_release(struct lease_table *t, lease_return_cb *cb, void *arg)
{
    for (size_t i = 0; i <= t->mask; i++) {
        struct lease *l = &t->slots[i];

        if (l->hash != 0 && !l->taking && l->units > 0) {
            cb(l, arg);
            l->units = 0;
        }
    }
}

uint64_t
lease_table_held(const struct lease_table *t)
{
    uint64_t n = 0;

    for (size_t i = 0; i <= t->mask; i++) {
        if (t->slots[i].hash != 0) {
            n += t->slots[i].units;
        }
    }
    return n;
}
