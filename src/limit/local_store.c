/*
 * local_store.c - the per-process table behind `backend: local`.
 *
 * Each shard is a chained hash table behind its own mutex; a key picks
 * its shard from the high bits of its FNV-1a hash and its chain from the
 * low bits, so shards and chains spread independently. An entry holds a
 * copy of the key and one algo_state per rule of its limiter.
 *
 * Memory: there is no hard cap. An entry lives until every one of its
 * states has expired (at most the longest TTL after its last admission;
 * algo.h), then it is dropped by the next decision that walks its chain,
 * or by local_store_sweep(), which the caller runs periodically. So the
 * table holds about the keys seen within the longest TTL. A shard's
 * chain array doubles when it holds more entries than chains and never
 * shrinks. A sliding_window entry keeps one 8-byte time per admitted
 * unit still in the window, at most 'limit' per rule.
 */
#include "local_store.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "algo.h"
#include "hash.h"
#include "xmalloc.h"

#define INITIAL_CHAINS 16
#define MAX_SHARDS 4096

struct entry {
    struct entry *next;             /* in its chain */
    uint64_t hash;                  /* FNV-1a of 'key' */
    char *key;                      /* points past 'states'; same block */
    enum limit_algorithm algorithm; /* of the limiter that wrote it */
    size_t nrules;                  /* states in 'states' */
    struct algo_state states[];     /* one per rule */
};

struct shard {
    pthread_mutex_t lock;  /* guards everything below */
    struct entry **chains; /* 'nchains' heads; owned */
    size_t nchains;        /* a power of two */
    size_t count;          /* entries in the shard */
    char pad[64];          /* keeps neighbouring locks off one cache
                              line under contention */
};

struct local_store {
    struct shard *shards; /* 'nshards' of them; owned */
    unsigned nshards;     /* a power of two */
};

static uint64_t
fnv1a(const char *s)
{
    return hash_fnv1a(HASH_FNV1A_INIT, s, strlen(s));
}

static struct entry *
entry_new(const char *key, uint64_t hash, const struct limiter_def *def)
{
    size_t klen = strlen(key);
    size_t states = def->nrules * sizeof(struct algo_state);
    struct entry *e = xcalloc(1, sizeof(*e) + states + klen + 1);

    e->hash = hash;
    e->key = (char *)e->states + states;
    memcpy(e->key, key, klen + 1);
    e->algorithm = def->algorithm;
    e->nrules = def->nrules;
    return e;
}

static void
entry_free(struct entry *e)
{
    for (size_t i = 0; i < e->nrules; i++) {
        algo_state_reset(&e->states[i]);
    }
    free(e);
}

/* True when every state is fresh at 'now': the entry holds nothing. */
static bool
entry_expired(const struct entry *e, uint64_t now)
{
    for (size_t i = 0; i < e->nrules; i++) {
        if (e->states[i].present && e->states[i].expires > now) {
            return false;
        }
    }
    return true;
}

static void
shard_grow(struct shard *sh)
{
    size_t n = sh->nchains * 2;
    struct entry **chains = xcalloc(n, sizeof(*chains));

    for (size_t i = 0; i < sh->nchains; i++) {
        struct entry *e = sh->chains[i];

        while (e != NULL) {
            struct entry *next = e->next;
            size_t at = e->hash & (n - 1);

            e->next = chains[at];
            chains[at] = e;
            e = next;
        }
    }
    free(sh->chains);
    sh->chains = chains;
    sh->nchains = n;
}

struct local_store *
local_store_new(unsigned nshards)
{
    struct local_store *st = xcalloc(1, sizeof(*st));
    unsigned n = 1;

    while (n < nshards && n < MAX_SHARDS) {
        n *= 2;
    }
    st->nshards = n;
    st->shards = xcalloc(n, sizeof(*st->shards));
    for (unsigned i = 0; i < n; i++) {
        pthread_mutex_init(&st->shards[i].lock, NULL);
        st->shards[i].nchains = INITIAL_CHAINS;
        st->shards[i].chains =
            xcalloc(INITIAL_CHAINS, sizeof(*st->shards[i].chains));
    }
    return st;
}

void
local_store_free(struct local_store *st)
{
    if (st == NULL) {
        return;
    }
    for (unsigned i = 0; i < st->nshards; i++) {
        struct shard *sh = &st->shards[i];

        for (size_t j = 0; j < sh->nchains; j++) {
            struct entry *e = sh->chains[j];

            while (e != NULL) {
                struct entry *next = e->next;

                entry_free(e);
                e = next;
            }
        }
        free(sh->chains);
        pthread_mutex_destroy(&sh->lock);
    }
    free(st->shards);
    free(st);
}

static struct shard *
shard_of(struct local_store *st, uint64_t hash)
{
    return &st->shards[(hash >> 48) & (st->nshards - 1)];
}

int
local_store_decide(struct local_store *st, const char *key,
                   const struct limiter_def *def, uint64_t cost,
                   uint64_t now_ms, struct limit_result *out)
{
    uint64_t hash = fnv1a(key);
    struct shard *sh = shard_of(st, hash);
    struct entry **link;
    struct entry *found = NULL;
    int rc;

    pthread_mutex_lock(&sh->lock);
    link = &sh->chains[hash & (sh->nchains - 1)];
    while (*link != NULL) {
        struct entry *e = *link;
        bool mine = e->hash == hash && strcmp(e->key, key) == 0;

        /* Expired neighbours go while we are here; so does the entry
         * itself if it is expired or belongs to other rules: either way
         * its state reads as fresh. */
        if (entry_expired(e, now_ms) ||
            (mine &&
             (e->nrules != def->nrules || e->algorithm != def->algorithm))) {
            *link = e->next;
            entry_free(e);
            sh->count--;
            continue;
        }
        if (mine) {
            found = e;
        }
        link = &e->next;
    }
    if (found != NULL) {
        rc = algo_decide(def, found->states, now_ms, cost, out);
        pthread_mutex_unlock(&sh->lock);
        return rc;
    }

    found = entry_new(key, hash, def);
    rc = algo_decide(def, found->states, now_ms, cost, out);
    if (rc != 0 || entry_expired(found, now_ms)) {
        /* Nothing was admitted: nothing to remember. */
        entry_free(found);
        pthread_mutex_unlock(&sh->lock);
        return rc;
    }
    if (sh->count >= sh->nchains) {
        shard_grow(sh);
    }
    link = &sh->chains[hash & (sh->nchains - 1)];
    found->next = *link;
    *link = found;
    sh->count++;
    pthread_mutex_unlock(&sh->lock);
    return rc;
}

size_t
local_store_sweep(struct local_store *st, uint64_t now_ms)
{
    size_t dropped = 0;

    for (unsigned i = 0; i < st->nshards; i++) {
        struct shard *sh = &st->shards[i];

        pthread_mutex_lock(&sh->lock);
        for (size_t j = 0; j < sh->nchains; j++) {
            struct entry **link = &sh->chains[j];

            while (*link != NULL) {
                struct entry *e = *link;

                if (entry_expired(e, now_ms)) {
                    *link = e->next;
                    entry_free(e);
                    sh->count--;
                    dropped++;
                } else {
                    link = &e->next;
                }
            }
        }
        pthread_mutex_unlock(&sh->lock);
    }
    return dropped;
}

size_t
local_store_size(struct local_store *st)
{
    size_t n = 0;

    for (unsigned i = 0; i < st->nshards; i++) {
        pthread_mutex_lock(&st->shards[i].lock);
        n += st->shards[i].count;
        pthread_mutex_unlock(&st->shards[i].lock);
    }
    return n;
}
