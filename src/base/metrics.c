/*
 * metrics.c - per-thread metric shards summed into a Prometheus scrape.
 *
 * A shard belongs to one worker thread. It maps (metric, label values) to
 * a series through an open-addressing hash table. Only the owner thread
 * changes the table or the values in it, so the owner looks series up
 * without a lock and bumps values with a relaxed load and store (one
 * writer needs no read-modify-write). A scrape runs on any thread: it
 * reads every shard's table under that shard's mutex, which the owner
 * also takes to insert a series or grow the table, so a scrape never sees
 * a half-built series or a table being freed. Insertions are rare (the
 * first time a label combination is seen), so the owner almost never
 * takes the mutex. Series are freed only with the registry, so a scrape
 * may keep pointers to their label strings after unlocking.
 *
 * Histogram sums are kept as integer nanoseconds, which C11 can add
 * atomically and which sum across shards without rounding; a series'
 * _count is derived from its buckets so that it always equals the +Inf
 * bucket, as Prometheus requires.
 */
#include "metrics.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "strbuf.h"
#include "xmalloc.h"

#define INITIAL_SLOTS 64
#define NBUCKETS 15 /* 14 finite bounds and +Inf */
/* 31 years: one observation's nanoseconds stay far inside a uint64. */
#define MAX_OBSERVED_SECONDS 1e9

enum metric_type {
    T_COUNTER,
    T_GAUGE,
    T_HISTOGRAM,
};

struct metric_def {
    const char *name;                       /* with the sluice_ prefix */
    enum metric_type type;                  /* counter, gauge, histogram */
    const char *help;                       /* the HELP text */
    int nlabels;                            /* entries in 'labels' */
    const char *labels[METRICS_MAX_LABELS]; /* label names, in order */
};

static const struct metric_def defs[M_COUNT] = {
    [M_REQUESTS] = {"sluice_requests_total",
                    T_COUNTER,
                    "Requests answered, by route, method class and status.",
                    3,
                    {"route", "method", "status"}},
    [M_RATELIMIT_DECISIONS] = {"sluice_ratelimit_decisions_total",
                               T_COUNTER,
                               "Rate-limit decisions, by route, limiter, tier "
                               "and result.",
                               4,
                               {"route", "limiter", "tier", "result"}},
    [M_UPSTREAM_SECONDS] = {"sluice_upstream_duration_seconds",
                            T_HISTOGRAM,
                            "Seconds from sending the upstream request to "
                            "its response headers.",
                            1,
                            {"route"}},
    [M_REDIS_SECONDS] = {"sluice_redis_duration_seconds",
                         T_HISTOGRAM,
                         "Seconds a Redis script call took.",
                         0,
                         {NULL}},
    [M_REDIS_EVENTS] = {"sluice_redis_events_total",
                        T_COUNTER,
                        "Redis errors, timeouts, reconnects and other "
                        "trouble, by kind.",
                        1,
                        {"kind"}},
    [M_REDIS_NODES] = {"sluice_redis_nodes",
                       T_GAUGE,
                       "Redis Cluster primaries of each worker's slot map, "
                       "by connection state (up, down), summed over "
                       "workers.",
                       1,
                       {"state"}},
    [M_DENY_CACHE_HITS] = {"sluice_ratelimit_deny_cache_hits_total",
                           T_COUNTER,
                           "Refusals answered from the over-limit cache "
                           "without asking Redis.",
                           0,
                           {NULL}},
    [M_LEASE_HITS] = {"sluice_ratelimit_lease_hits_total",
                      T_COUNTER,
                      "Requests admitted from a worker's lease on a hot key "
                      "without asking Redis.",
                      0,
                      {NULL}},
    [M_LEASE_UNITS] = {"sluice_ratelimit_lease_units_total",
                       T_COUNTER,
                       "Units of leases on hot keys: taken from Redis, "
                       "returned unused, or lost by a failed return.",
                       1,
                       {"event"}},
    [M_JWT_CACHE_HITS] = {"sluice_jwt_cache_hits_total",
                          T_COUNTER,
                          "Tokens found valid in the token cache, without "
                          "a signature check.",
                          0,
                          {NULL}},
    [M_JWT_TOKENS] = {"sluice_jwt_tokens_total",
                      T_COUNTER,
                      "Requests by what their token was (identity.jwt): "
                      "valid, invalid or missing.",
                      1,
                      {"result"}},
    [M_CONNECTIONS] = {"sluice_connections_open",
                       T_GAUGE,
                       "Client connections open.",
                       0,
                       {NULL}},
    [M_IN_FLIGHT] = {"sluice_requests_in_flight",
                     T_GAUGE,
                     "Requests being handled.",
                     0,
                     {NULL}},
    [M_HELD] = {"sluice_requests_held",
                T_GAUGE,
                "Requests held in delay mode before being forwarded.",
                0,
                {NULL}},
    [M_RELOADS] = {"sluice_config_reloads_total",
                   T_COUNTER,
                   "Config reloads, by result.",
                   1,
                   {"result"}},
    [M_CONFIG_GENERATION] = {"sluice_config_generation",
                             T_GAUGE,
                             "Generation of the config in force (1 at start).",
                             0,
                             {NULL}},
    [M_TLS_HANDSHAKES] = {"sluice_tls_handshakes_total",
                          T_COUNTER,
                          "TLS handshakes, by side (client: the TLS "
                          "listener; upstream: https upstreams) and result "
                          "(ok, failed, verify_failed).",
                          2,
                          {"side", "result"}},
};

/* Upper bounds of the finite buckets, as printed and in nanoseconds. */
static const char *const bucket_le[NBUCKETS] = {
    "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1",
    "0.25",   "0.5",   "1",      "2.5",   "5",    "10",    "+Inf"};
static const uint64_t bucket_ns[NBUCKETS - 1] = {
    500000,     1000000,    2500000,    5000000,    10000000,
    25000000,   50000000,   100000000,  250000000,  500000000,
    1000000000, 2500000000, 5000000000, 10000000000};

struct histo {
    _Atomic uint64_t buckets[NBUCKETS]; /* observations per bucket, not
                                           cumulative */
    _Atomic uint64_t sum_ns;            /* sum of observations */
};

struct series {
    enum metric_id id;                      /* which metric */
    uint64_t hash;                          /* of id and label values */
    const char *labels[METRICS_MAX_LABELS]; /* values; point into 'text' */
    _Atomic int64_t value;                  /* counters and gauges */
    struct histo *histo;                    /* histograms only; owned */
    char text[]; /* the label values, NUL-separated */
};

struct metrics_shard {
    pthread_mutex_t lock;         /* taken by the owner to change 'slots' and by
                                     a scrape to read them */
    struct series **slots;        /* 'nslots' entries, NULL when free; owned */
    size_t nslots;                /* a power of two */
    size_t count;                 /* series in 'slots' */
    struct series *last[M_COUNT]; /* per metric, the series used last, or
                                     NULL; owner's thread only */
};

struct metrics {
    pthread_mutex_t lock;          /* guards 'shards' and 'nshards' */
    struct metrics_shard **shards; /* 'nshards' of them; owned */
    size_t nshards;                /* shards handed out */
    size_t cap;                    /* allocated entries in 'shards' */
    _Atomic int64_t set[M_COUNT];  /* values given to metrics_set() */
};

/* One series as a scrape sees it, before and after summing shards. */
struct sample {
    enum metric_id id;                      /* which metric */
    const char *labels[METRICS_MAX_LABELS]; /* borrowed from a series */
    int64_t value;                          /* counters and gauges */
    uint64_t buckets[NBUCKETS];             /* histograms: not cumulative */
    uint64_t sum_ns;                        /* histograms */
};

static uint64_t
hash_series(enum metric_id id, const char *const *labels, int n)
{
    uint64_t h = hash_fnv1a_byte(HASH_FNV1A_INIT, (unsigned)id);

    for (int i = 0; i < n; i++) {
        h = hash_fnv1a(h, labels[i], strlen(labels[i]));
        /* A separator no label byte equals: ("ab","") differs from
           ("a","b"). */
        h = hash_fnv1a_byte(h, 0x100);
    }
    return h;
}

static bool
series_matches(const struct series *s, uint64_t hash, enum metric_id id,
               const char *const *labels, int n)
{
    if (s->hash != hash || s->id != id) {
        return false;
    }
    for (int i = 0; i < n; i++) {
        if (strcmp(s->labels[i], labels[i]) != 0) {
            return false;
        }
    }
    return true;
}

static struct series *
series_new(enum metric_id id, uint64_t hash, const char *const *labels, int n)
{
    size_t lens[METRICS_MAX_LABELS];
    size_t total = 0;
    struct series *s;
    char *p;

    for (int i = 0; i < n; i++) {
        lens[i] = strlen(labels[i]);
        total += lens[i] + 1;
    }
    s = xcalloc(1, sizeof(*s) + total);
    s->id = id;
    s->hash = hash;
    p = s->text;
    for (int i = 0; i < n; i++) {
        memcpy(p, labels[i], lens[i] + 1);
        s->labels[i] = p;
        p += lens[i] + 1;
    }
    atomic_init(&s->value, 0);
    if (defs[id].type == T_HISTOGRAM) {
        s->histo = xcalloc(1, sizeof(*s->histo));
        for (int i = 0; i < NBUCKETS; i++) {
            atomic_init(&s->histo->buckets[i], 0);
        }
        atomic_init(&s->histo->sum_ns, 0);
    }
    return s;
}

static void
slots_put(struct series **slots, size_t nslots, struct series *s)
{
    size_t mask = nslots - 1;
    size_t i = (size_t)s->hash & mask;

    while (slots[i] != NULL) {
        i = (i + 1) & mask;
    }
    slots[i] = s;
}

/* Runs on the owner thread with the shard's lock held. */
static void
shard_grow(struct metrics_shard *sh)
{
    size_t nslots = sh->nslots * 2;
    struct series **slots = xcalloc(nslots, sizeof(*slots));

    for (size_t i = 0; i < sh->nslots; i++) {
        if (sh->slots[i] != NULL) {
            slots_put(slots, nslots, sh->slots[i]);
        }
    }
    free(sh->slots);
    sh->slots = slots;
    sh->nslots = nslots;
}

/*
 * The series for (id, labels) in the owner's shard, created on first use.
 * The lookup takes no lock: only this thread changes the table.
 */
static struct series *
shard_series(struct metrics_shard *sh, enum metric_id id,
             const char *const *labels)
{
    const char *vals[METRICS_MAX_LABELS];
    int n = defs[id].nlabels;
    uint64_t hash;
    size_t mask = sh->nslots - 1;
    size_t i;
    struct series *s;

    assert(n == 0 || labels != NULL);
    for (int k = 0; k < n; k++) {
        /* A missing value is recorded as empty rather than crashing the
           worker over a metric. */
        vals[k] = labels[k] != NULL ? labels[k] : "";
    }
    /* A worker mostly records the same series again (one route, 200):
     * compared by value, that skips the hash and the probe. */
    s = sh->last[id];
    if (s != NULL) {
        int k = 0;

        while (k < n && strcmp(s->labels[k], vals[k]) == 0) {
            k++;
        }
        if (k == n) {
            return s;
        }
    }
    hash = hash_series(id, vals, n);
    for (i = (size_t)hash & mask; sh->slots[i] != NULL; i = (i + 1) & mask) {
        if (series_matches(sh->slots[i], hash, id, vals, n)) {
            sh->last[id] = sh->slots[i];
            return sh->slots[i];
        }
    }
    s = series_new(id, hash, vals, n);
    pthread_mutex_lock(&sh->lock);
    /* Load factor at most 1/2 keeps probe sequences short. */
    if ((sh->count + 1) * 2 > sh->nslots) {
        shard_grow(sh);
        slots_put(sh->slots, sh->nslots, s);
    } else {
        sh->slots[i] = s;
    }
    sh->count++;
    pthread_mutex_unlock(&sh->lock);
    sh->last[id] = s;
    return s;
}

struct metrics *
metrics_new(void)
{
    struct metrics *m = xcalloc(1, sizeof(*m));

    pthread_mutex_init(&m->lock, NULL);
    for (int i = 0; i < M_COUNT; i++) {
        atomic_init(&m->set[i], 0);
    }
    return m;
}

static void
shard_free(struct metrics_shard *sh)
{
    for (size_t i = 0; i < sh->nslots; i++) {
        if (sh->slots[i] != NULL) {
            free(sh->slots[i]->histo);
            free(sh->slots[i]);
        }
    }
    free(sh->slots);
    pthread_mutex_destroy(&sh->lock);
    free(sh);
}

void
metrics_free(struct metrics *m)
{
    if (m == NULL) {
        return;
    }
    for (size_t i = 0; i < m->nshards; i++) {
        shard_free(m->shards[i]);
    }
    free(m->shards);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

struct metrics_shard *
metrics_shard(struct metrics *m)
{
    struct metrics_shard *sh = xcalloc(1, sizeof(*sh));

    pthread_mutex_init(&sh->lock, NULL);
    sh->nslots = INITIAL_SLOTS;
    sh->slots = xcalloc(sh->nslots, sizeof(*sh->slots));
    pthread_mutex_lock(&m->lock);
    m->shards = xgrow(m->shards, &m->cap, m->nshards + 1, sizeof(*m->shards));
    m->shards[m->nshards++] = sh;
    pthread_mutex_unlock(&m->lock);
    return sh;
}

/* Only the owner writes, so a relaxed load and store is an exact add. */
static void
add_i64(_Atomic int64_t *a, int64_t by)
{
    int64_t v = atomic_load_explicit(a, memory_order_relaxed);

    /* Wrap rather than overflow (undefined for signed integers). */
    v = (int64_t)((uint64_t)v + (uint64_t)by);
    atomic_store_explicit(a, v, memory_order_relaxed);
}

static void
add_u64(_Atomic uint64_t *a, uint64_t by)
{
    uint64_t v = atomic_load_explicit(a, memory_order_relaxed);

    atomic_store_explicit(a, v + by, memory_order_relaxed);
}

void
metrics_add(struct metrics_shard *s, enum metric_id id,
            const char *const *labels, int64_t by)
{
    assert((unsigned)id < M_COUNT);
    assert(defs[id].type != T_HISTOGRAM);
    assert(defs[id].type != T_COUNTER || by >= 0);
    add_i64(&shard_series(s, id, labels)->value, by);
}

void
metrics_observe(struct metrics_shard *s, enum metric_id id,
                const char *const *labels, double seconds)
{
    struct histo *h;
    uint64_t ns = 0;
    int b = 0;

    assert((unsigned)id < M_COUNT);
    assert(defs[id].type == T_HISTOGRAM);
    h = shard_series(s, id, labels)->histo;
    /* NaN and negative durations (a clock step) count as zero. */
    if (seconds > 0) {
        if (seconds > MAX_OBSERVED_SECONDS) {
            seconds = MAX_OBSERVED_SECONDS;
        }
        ns = (uint64_t)llround(seconds * 1e9);
    }
    while (b < NBUCKETS - 1 && ns > bucket_ns[b]) {
        b++;
    }
    add_u64(&h->buckets[b], 1);
    add_u64(&h->sum_ns, ns);
}

void
metrics_set(struct metrics *m, enum metric_id id, int64_t value)
{
    assert((unsigned)id < M_COUNT);
    assert(defs[id].nlabels == 0 && defs[id].type != T_HISTOGRAM);
    atomic_store_explicit(&m->set[id], value, memory_order_relaxed);
}

/* A label value as the exposition format quotes it. */
static void
out_label_value(struct strbuf *o, const char *v)
{
    for (; *v != '\0'; v++) {
        switch (*v) {
        case '\\':
            strbuf_adds(o, "\\\\");
            break;
        case '"':
            strbuf_adds(o, "\\\"");
            break;
        case '\n':
            strbuf_adds(o, "\\n");
            break;
        default:
            strbuf_add(o, v, 1);
        }
    }
}

/* name{l1="v1",...,extra} with 'extra' (e.g. le="0.1") NULL if none. */
static void
out_name_labels(struct strbuf *o, const char *name, const char *suffix,
                const struct sample *s, const char *extra)
{
    const struct metric_def *d = &defs[s->id];

    strbuf_addf(o, "%s%s", name, suffix);
    if (d->nlabels == 0 && extra == NULL) {
        return;
    }
    strbuf_adds(o, "{");
    for (int i = 0; i < d->nlabels; i++) {
        strbuf_addf(o, "%s%s=\"", i > 0 ? "," : "", d->labels[i]);
        out_label_value(o, s->labels[i]);
        strbuf_adds(o, "\"");
    }
    if (extra != NULL) {
        strbuf_addf(o, "%s%s", d->nlabels > 0 ? "," : "", extra);
    }
    strbuf_adds(o, "}");
}

/* Nanoseconds as exact decimal seconds, without trailing zeros. */
static void
out_seconds(struct strbuf *o, uint64_t ns)
{
    char frac[16];
    int n;

    n = snprintf(frac, sizeof(frac), "%09" PRIu64, ns % 1000000000);
    assert(n == 9);
    while (n > 0 && frac[n - 1] == '0') {
        frac[--n] = '\0';
    }
    strbuf_addf(o, "%" PRIu64 "%s%s", ns / 1000000000, n > 0 ? "." : "", frac);
}

static void
out_sample(struct strbuf *o, const struct sample *s)
{
    const struct metric_def *d = &defs[s->id];
    uint64_t cum = 0;
    char le[32];

    if (d->type != T_HISTOGRAM) {
        out_name_labels(o, d->name, "", s, NULL);
        strbuf_addf(o, " %" PRId64 "\n", s->value);
        return;
    }
    for (int b = 0; b < NBUCKETS; b++) {
        cum += s->buckets[b];
        snprintf(le, sizeof(le), "le=\"%s\"", bucket_le[b]);
        out_name_labels(o, d->name, "_bucket", s, le);
        strbuf_addf(o, " %" PRIu64 "\n", cum);
    }
    out_name_labels(o, d->name, "_sum", s, NULL);
    strbuf_adds(o, " ");
    out_seconds(o, s->sum_ns);
    strbuf_adds(o, "\n");
    out_name_labels(o, d->name, "_count", s, NULL);
    strbuf_addf(o, " %" PRIu64 "\n", cum);
}

static int
cmp_sample(const void *a, const void *b)
{
    const struct sample *x = a;
    const struct sample *y = b;
    int c = strcmp(defs[x->id].name, defs[y->id].name);

    for (int i = 0; c == 0 && i < defs[x->id].nlabels; i++) {
        c = strcmp(x->labels[i], y->labels[i]);
    }
    return c;
}

static void
sample_from_series(struct sample *out, const struct series *s)
{
    memset(out, 0, sizeof(*out));
    out->id = s->id;
    memcpy(out->labels, s->labels, sizeof(out->labels));
    if (s->histo == NULL) {
        out->value = atomic_load_explicit(&s->value, memory_order_relaxed);
        return;
    }
    for (int b = 0; b < NBUCKETS; b++) {
        out->buckets[b] =
            atomic_load_explicit(&s->histo->buckets[b], memory_order_relaxed);
    }
    out->sum_ns = atomic_load_explicit(&s->histo->sum_ns, memory_order_relaxed);
}

static void
sample_merge(struct sample *into, const struct sample *from)
{
    into->value = (int64_t)((uint64_t)into->value + (uint64_t)from->value);
    for (int b = 0; b < NBUCKETS; b++) {
        into->buckets[b] += from->buckets[b];
    }
    into->sum_ns += from->sum_ns;
}

/* Every series of every shard, plus one per unlabeled metric. */
static struct sample *
collect(struct metrics *m, size_t *count)
{
    struct sample *v = NULL;
    size_t n = 0;
    size_t cap = 0;

    /* Unlabeled metrics always show: the value metrics_set() gave, to
       which the shards' metrics_add() amounts are then summed. */
    for (int id = 0; id < M_COUNT; id++) {
        if (defs[id].nlabels == 0) {
            v = xgrow(v, &cap, n + 1, sizeof(*v));
            memset(&v[n], 0, sizeof(v[n]));
            v[n].id = (enum metric_id)id;
            v[n].value =
                atomic_load_explicit(&m->set[id], memory_order_relaxed);
            n++;
        }
    }
    pthread_mutex_lock(&m->lock);
    for (size_t k = 0; k < m->nshards; k++) {
        struct metrics_shard *sh = m->shards[k];

        pthread_mutex_lock(&sh->lock);
        v = xgrow(v, &cap, n + sh->count, sizeof(*v));
        for (size_t i = 0; i < sh->nslots; i++) {
            if (sh->slots[i] != NULL) {
                sample_from_series(&v[n++], sh->slots[i]);
            }
        }
        pthread_mutex_unlock(&sh->lock);
    }
    pthread_mutex_unlock(&m->lock);
    *count = n;
    return v;
}

char *
metrics_render(struct metrics *m)
{
    struct strbuf o = STRBUF_INIT;
    size_t n;
    size_t j = 0;
    struct sample *v = collect(m, &n);
    enum metric_id order[M_COUNT];

    qsort(v, n, sizeof(*v), cmp_sample);
    /* Families in name order too, so the whole text is deterministic. */
    for (int id = 0; id < M_COUNT; id++) {
        int k = id;

        while (k > 0 && strcmp(defs[order[k - 1]].name, defs[id].name) > 0) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = (enum metric_id)id;
    }
    for (int f = 0; f < M_COUNT; f++) {
        const struct metric_def *d = &defs[order[f]];
        static const char *const type_name[] = {
            [T_COUNTER] = "counter",
            [T_GAUGE] = "gauge",
            [T_HISTOGRAM] = "histogram",
        };

        strbuf_addf(&o, "# HELP %s %s\n# TYPE %s %s\n", d->name, d->help,
                    d->name, type_name[d->type]);
        /* Samples are sorted by name, so this family's are next. */
        while (j < n && v[j].id == order[f]) {
            struct sample sum = v[j++];

            while (j < n && cmp_sample(&sum, &v[j]) == 0) {
                sample_merge(&sum, &v[j++]);
            }
            out_sample(&o, &sum);
        }
    }
    assert(j == n);
    free(v);
    return strbuf_take(&o);
}

const char *
metrics_method_class(const char *method)
{
    static const char *const known[] = {"GET",    "HEAD",    "POST", "PUT",
                                        "DELETE", "OPTIONS", "PATCH"};

    if (method == NULL) {
        return "OTHER";
    }
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
        if (strcmp(method, known[i]) == 0) {
            return known[i];
        }
    }
    return "OTHER";
}
