#include "denycache.h"

#include <stdlib.h>
#include <string.h>

#include "xmalloc.h"

/* Keys are stored inline; longer ones (rare: ratekey hashes long values)
 * are simply not remembered. */
#define KEY_CAP 192
/* Slots a key may occupy, from its home slot on. Lookups look at all of
 * them, so an emptied slot needs no tombstone. */
#define WINDOW 8
/* A refusal shorter than this is not remembered: the margin below would
 * leave nothing of it. */
#define MIN_RETRY_MS 2

struct entry {
    uint64_t hash; /* of key and cost; 0: the slot is free */
    uint64_t cost;
    uint64_t sent_us;     /* when the refused call went out */
    uint64_t deadline_us; /* refuse locally while now < this */
    struct limit_result res;
    char key[KEY_CAP];
};

struct denycache {
    struct entry *slots;
    size_t mask; /* slots - 1; slots is a power of two */
    size_t used;
};

static uint64_t
hash_of(const char *key, size_t len, uint64_t cost)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */

    for (size_t i = 0; i < len; i++) {
        h = (h ^ (unsigned char)key[i]) * 1099511628211ULL;
    }
    for (int i = 0; i < 8; i++) {
        h = (h ^ ((cost >> (8 * i)) & 0xff)) * 1099511628211ULL;
    }
    return h != 0 ? h : 1;
}

struct denycache *
denycache_new(size_t capacity)
{
    struct denycache *dc = xcalloc(1, sizeof(*dc));
    size_t n = WINDOW;

    while (n < capacity) {
        n *= 2;
    }
    dc->slots = xcalloc(n, sizeof(dc->slots[0]));
    dc->mask = n - 1;
    return dc;
}

void
denycache_free(struct denycache *dc)
{
    if (dc == NULL) {
        return;
    }
    free(dc->slots);
    free(dc);
}

void
denycache_clear(struct denycache *dc)
{
    memset(dc->slots, 0, (dc->mask + 1) * sizeof(dc->slots[0]));
    dc->used = 0;
}

size_t
denycache_size(const struct denycache *dc)
{
    return dc->used;
}

static struct entry *
find(struct denycache *dc, uint64_t h, const char *key, size_t len,
     uint64_t cost)
{
    for (size_t i = 0; i < WINDOW; i++) {
        struct entry *e = &dc->slots[(h + i) & dc->mask];

        if (e->hash == h && e->cost == cost && strncmp(e->key, key, len) == 0 &&
            e->key[len] == '\0') {
            return e;
        }
    }
    return NULL;
}

static void
drop(struct denycache *dc, struct entry *e)
{
    e->hash = 0;
    dc->used--;
}

void
denycache_put(struct denycache *dc, const char *key, uint64_t cost,
              const struct limit_result *res, uint64_t sent_us)
{
    denycache_put_for(dc, key, cost, res, sent_us, UINT64_MAX);
}

void
denycache_put_for(struct denycache *dc, const char *key, uint64_t cost,
                  const struct limit_result *res, uint64_t sent_us,
                  uint64_t hold_ms)
{
    size_t len = strlen(key);
    uint64_t h;
    struct entry *e;

    if (res->allowed || res->retry_after_ms < MIN_RETRY_MS ||
        hold_ms < MIN_RETRY_MS || len >= KEY_CAP) {
        return;
    }
    h = hash_of(key, len, cost);
    e = find(dc, h, key, len, cost);
    if (e == NULL) {
        /* A free slot, else the one whose refusal ends first. */
        for (size_t i = 0; i < WINDOW; i++) {
            struct entry *s = &dc->slots[(h + i) & dc->mask];

            if (s->hash == 0) {
                e = s;
                break;
            }
            if (e == NULL || s->deadline_us < e->deadline_us) {
                e = s;
            }
        }
        if (e->hash == 0) {
            dc->used++;
        }
    }
    e->hash = h;
    e->cost = cost;
    e->sent_us = sent_us;
    e->deadline_us =
        sent_us +
        ((res->retry_after_ms < hold_ms ? res->retry_after_ms : hold_ms) - 1) *
            1000;
    e->res = *res;
    memcpy(e->key, key, len + 1);
}

bool
denycache_get(struct denycache *dc, const char *key, uint64_t cost,
              uint64_t now_us, struct limit_result *res)
{
    size_t len = strlen(key);
    struct entry *e;
    uint64_t elapsed_ms;

    if (dc->used == 0 || len >= KEY_CAP) {
        return false;
    }
    e = find(dc, hash_of(key, len, cost), key, len, cost);
    if (e == NULL) {
        return false;
    }
    if (now_us >= e->deadline_us) {
        drop(dc, e);
        return false;
    }
    elapsed_ms = now_us > e->sent_us ? (now_us - e->sent_us) / 1000 : 0;
    *res = e->res;
    /* elapsed < retry - 1 here, so the retry stays >= 2 ms. */
    res->retry_after_ms -= elapsed_ms;
    res->reset_ms = res->reset_ms > elapsed_ms ? res->reset_ms - elapsed_ms : 0;
    return true;
}
