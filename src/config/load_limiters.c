/*
 * load_limiters.c - the limiters: section of gateway.yaml: each named
 * limiter's algorithm, rules, mode and the tag that keys its state. Pure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "load.h"
#include "units.h"
#include "xmalloc.h"

/* Longest limiter name: it goes into every Redis key (ratekey.h). */
#define LIMITER_NAME_MAX 64

/*
 * Every product of a count and a window (unit-milliseconds) stays below
 * this, so that the Lua scripts' doubles stay exact (algo.h).
 */
#define RULE_PRODUCT_MAX (1ULL << 50)

/* "10/s" into a limit_rule's limit and window_ms ('base' is the rule). */
static void
parse_rate(struct loader *ld, yaml_node_t *node, const struct field *f,
           void *base, const struct load_path *path)
{
    struct limit_rule *rule = base;
    const char *s = load_scalar(ld, node, path);
    struct rate r;

    (void)f;
    if (s == NULL) {
        return;
    }
    if (units_parse_rate(s, &r) < 0) {
        report(ld, node, path,
               "bad rate \"%s\" (expected a count above 0 per period: N/s, "
               "N/m, N/h or N/d)",
               s);
        return;
    }
    rule->limit = r.count;
    rule->window_ms = r.period_ms;
}

/*
 * One limiter while it is read: the algorithm goes straight into the
 * def; the other keys are kept as nodes, because what they mean depends
 * on the algorithm (check_limiter()).
 */
struct limiter_form {
    struct limiter_def *def; /* being built; borrowed */
    yaml_node_t *limit;      /* windows: units per window; borrowed, like
                                every node here */
    yaml_node_t *window;     /* windows: the window */
    yaml_node_t *rate;       /* buckets: "N/period" */
    yaml_node_t *burst;      /* buckets: capacity */
    yaml_node_t *rules;      /* several rules instead of the four above */
    yaml_node_t *mode;       /* deny | delay */
    yaml_node_t *max_delay;  /* delay mode: longest hold */
    yaml_node_t *lease;      /* token_bucket, gcra: units per lease */
};

/* A rule of a window algorithm: at most 'limit' per 'window'. */
static const struct field window_rule_fields[] = {
    {.key = "limit",
     .parse = load_count,
     .offset = offsetof(struct limit_rule, limit),
     .min = 1,
     .required = true},
    {.key = "window",
     .parse = load_duration,
     .offset = offsetof(struct limit_rule, window_ms),
     .min = 1,
     .required = true},
};

/* A rule of a bucket algorithm: refill 'rate', hold at most 'burst'. */
static const struct field bucket_rule_fields[] = {
    {.key = "rate", .parse = parse_rate, .required = true},
    {.key = "burst",
     .parse = load_count,
     .offset = offsetof(struct limit_rule, burst),
     .min = 1},
};

static const struct choice mode_words[] = {
    {"deny", 0},
    {"delay", 1},
};

static const struct choices mode_choices =
    CHOICES("mode", mode_words, CHOICE_EXPECTED);

/* limit_algorithm_name()'s names, in the order of enum limit_algorithm. */
static const struct choice algorithm_words[] = {
    {"fixed_window", LIMIT_FIXED_WINDOW},
    {"sliding_window", LIMIT_SLIDING_WINDOW},
    {"sliding_window_counter", LIMIT_SLIDING_WINDOW_COUNTER},
    {"token_bucket", LIMIT_TOKEN_BUCKET},
    {"leaky_bucket", LIMIT_LEAKY_BUCKET},
    {"gcra", LIMIT_GCRA},
};

_Static_assert(NELEMS(algorithm_words) == LIMIT_ALGORITHM_COUNT,
               "every algorithm has its word");

static const struct choices algorithm_choices =
    CHOICES("algorithm", algorithm_words, CHOICE_UNKNOWN);

/* a * b < RULE_PRODUCT_MAX, without overflowing on the way. */
static bool
product_fits(uint64_t a, uint64_t b)
{
    return b == 0 || a < (RULE_PRODUCT_MAX + b - 1) / b;
}

/*
 * The scripts compute in doubles (exact below 2^53) and the C twins in
 * 64-bit integers; keeping every product of a count and a window below
 * 2^50 leaves room for the sums they form.
 */
static bool
check_rule_size(struct loader *ld, yaml_node_t *node,
                const struct load_path *path, const struct limit_rule *r)
{
    if (!product_fits(r->limit, r->window_ms)) {
        report(ld, node, path,
               "rule too large: limit %llu x window %llu ms must stay "
               "below 2^50",
               (unsigned long long)r->limit, (unsigned long long)r->window_ms);
        return false;
    }
    if (!product_fits(r->burst, r->window_ms)) {
        report(ld, node, path,
               "rule too large: burst %llu x window %llu ms must stay "
               "below 2^50",
               (unsigned long long)r->burst, (unsigned long long)r->window_ms);
        return false;
    }
    return true;
}

/* A window's burst is its limit (limit.h). */
static void
check_window_rule(struct loader *ld, yaml_node_t *node,
                  const struct load_path *path, void *base)
{
    struct limit_rule *r = base;

    r->burst = r->limit;
    check_rule_size(ld, node, path, r);
}

/* A bucket's burst defaults to the count of its rate (limit.h). */
static void
check_bucket_rule(struct loader *ld, yaml_node_t *node,
                  const struct load_path *path, void *base)
{
    struct limit_rule *r = base;

    if (r->burst == 0) {
        r->burst = r->limit;
    }
    check_rule_size(ld, node, path, r);
}

static const struct table window_rule_table = {
    .fields = window_rule_fields,
    .n = NELEMS(window_rule_fields),
    .check = check_window_rule,
};

static const struct table bucket_rule_table = {
    .fields = bucket_rule_fields,
    .n = NELEMS(bucket_rule_fields),
    .check = check_bucket_rule,
};

/* One rule of "rules: [...]"; false after reporting. */
static bool
parse_rule(struct loader *ld, yaml_node_t *node, const struct load_path *path,
           bool bucket, struct limit_rule *r)
{
    memset(r, 0, sizeof(*r));
    return load_fields(ld, node, path,
                       bucket ? &bucket_rule_table : &window_rule_table,
                       r) == LOAD_OK;
}

/* The single-rule form: the rule's keys sit in the limiter itself. */
static bool
parse_inline_rule(struct loader *ld, yaml_node_t *node,
                  const struct load_path *path, const struct limiter_form *lf,
                  bool bucket, struct limit_rule *r)
{
    const struct table *t = bucket ? &bucket_rule_table : &window_rule_table;
    const struct field *fields = t->fields;
    yaml_node_t *values[2];
    size_t before = ld->ndiags;

    values[0] = bucket ? lf->rate : lf->limit;
    values[1] = bucket ? lf->burst : lf->window;
    memset(r, 0, sizeof(*r));
    for (size_t i = 0; i < t->n; i++) {
        const struct load_path *sub = PATH_KEY(path, fields[i].key);

        if (values[i] != NULL) {
            fields[i].parse(ld, values[i], &fields[i], r, sub);
        } else if (fields[i].required) {
            report(ld, node, sub, "required");
        }
    }
    if (ld->ndiags != before) {
        return false;
    }
    t->check(ld, node, path, r);
    return ld->ndiags == before;
}

/* "rules: [...]": one to LIMIT_MAX_RULES rules. */
static bool
parse_rule_list(struct loader *ld, yaml_node_t *node,
                const struct load_path *path, bool bucket,
                struct limiter_def *def)
{
    size_t n = load_sequence_length(node);
    bool ok = true;

    if (node->type != YAML_SEQUENCE_NODE) {
        report(ld, node, path, "expected a sequence, got %s",
               load_node_desc(node));
        return false;
    }
    if (n == 0 || n > LIMIT_MAX_RULES) {
        report(ld, node, path, "expected 1 to %d rules, got %zu",
               LIMIT_MAX_RULES, n);
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        const struct load_path *sub = PATH_INDEX(path, i);

        ok = parse_rule(ld, load_sequence_item(ld, node, i), sub, bucket,
                        &def->rules[i]) &&
             ok;
    }
    def->nrules = ok ? n : 0;
    return ok;
}

/* FNV-1a, 32 bits, over 'len' bytes of 's', continuing from 'h'. */
static uint32_t
fnv1a(uint32_t h, const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 16777619u;
    }
    return h;
}

/*
 * The layout in which an algorithm's script stores a rule's state
 * (lua/README.md, "State"). Layout 2: one string of integers joined by
 * ':', read with GET and written with SET ... PX, where layout 1 was a
 * hash (HMGET, HSET, PEXPIRE). A GET on a key that an older gateway wrote
 * as a hash fails with WRONGTYPE, so a script must never meet a key of
 * another layout: the layout is part of the tag, and on upgrade every key
 * of a limiter whose layout changed takes a new name. Its state starts
 * afresh once, as after an idle spell. Layout 1 adds nothing to the hash,
 * so the tags of sliding_window, whose sorted set never changed, and with
 * them its state, stay as they were.
 */
static unsigned
state_layout(enum limit_algorithm a)
{
    return a == LIMIT_SLIDING_WINDOW ? 1 : 2;
}

/*
 * The tag hashes everything that shapes the stored state, and nothing
 * else (not the name): a changed rule must not read state written under
 * the old one, and an unchanged limiter keeps its state across reloads.
 * What shapes the state includes the layout the script stores it in.
 */
void
load_limiter_tag(struct limiter_def *def)
{
    uint32_t h = 2166136261u;
    char buf[96];
    int n;

    n = snprintf(
        buf, sizeof(buf), "%s|%s|%llu", limit_algorithm_name(def->algorithm),
        def->delay ? "delay" : "deny", (unsigned long long)def->max_delay_ms);
    h = fnv1a(h, buf, (size_t)n);
    for (size_t i = 0; i < def->nrules; i++) {
        const struct limit_rule *r = &def->rules[i];

        n = snprintf(
            buf, sizeof(buf), "|%llu/%llu/%llu", (unsigned long long)r->limit,
            (unsigned long long)r->window_ms, (unsigned long long)r->burst);
        h = fnv1a(h, buf, (size_t)n);
    }
    if (state_layout(def->algorithm) > 1) {
        n = snprintf(buf, sizeof(buf), "|layout %u",
                     state_layout(def->algorithm));
        h = fnv1a(h, buf, (size_t)n);
    }
    snprintf(def->tag, sizeof(def->tag), "%08x", (unsigned)h);
}

static void
parse_algorithm(struct loader *ld, yaml_node_t *node, const struct field *f,
                void *base, const struct load_path *path)
{
    struct limiter_form *lf = base;
    int a;

    (void)f;
    if (load_choice(ld, node, path, &algorithm_choices, &a)) {
        lf->def->algorithm = (enum limit_algorithm)a;
    }
}

/* Keys that belong to the other family of algorithms. */
static bool
check_family_keys(struct loader *ld, const struct limiter_form *lf,
                  const struct load_path *path, enum limit_algorithm a)
{
    const char *name = limit_algorithm_name(a);
    yaml_node_t *wrong[2];
    const char *keys[2];
    bool ok = true;

    if (limit_algorithm_is_bucket(a)) {
        wrong[0] = lf->limit;
        wrong[1] = lf->window;
        keys[0] = "limit";
        keys[1] = "window";
    } else {
        wrong[0] = lf->rate;
        wrong[1] = lf->burst;
        keys[0] = "rate";
        keys[1] = "burst";
    }
    for (size_t i = 0; i < 2; i++) {
        const struct load_path *sub;

        if (wrong[i] == NULL) {
            continue;
        }
        sub = PATH_KEY(path, keys[i]);
        if (limit_algorithm_is_bucket(a)) {
            report(ld, wrong[i], sub,
                   "%s takes rate and burst, not limit and window", name);
        } else {
            report(ld, wrong[i], sub,
                   "%s takes limit and window; rate and burst are for "
                   "token_bucket, leaky_bucket and gcra",
                   name);
        }
        ok = false;
    }
    return ok;
}

/* mode: and max_delay:. */
static bool
parse_mode(struct loader *ld, yaml_node_t *node, const struct limiter_form *lf,
           const struct load_path *path, struct limiter_def *def)
{
    struct field delay_field = {.parse = load_duration, .min = 1};
    size_t before = ld->ndiags;
    int delay = 0;
    const struct load_path *sub;

    if (lf->mode != NULL) {
        sub = PATH_KEY(path, "mode");
        if (load_choice(ld, lf->mode, sub, &mode_choices, &delay) && delay &&
            !limit_algorithm_is_bucket(def->algorithm)) {
            report(ld, lf->mode, sub,
                   "mode: delay needs token_bucket, leaky_bucket or gcra, "
                   "not %s",
                   limit_algorithm_name(def->algorithm));
        }
    }
    if (ld->ndiags != before) {
        return false;
    }
    def->delay = delay != 0;
    sub = PATH_KEY(path, "max_delay");
    if (lf->max_delay == NULL && def->delay) {
        report(ld, node, sub, "required with mode: delay");
    } else if (lf->max_delay != NULL && !def->delay) {
        report(ld, lf->max_delay, sub, "only allowed with mode: delay");
    } else if (lf->max_delay != NULL) {
        load_duration(ld, lf->max_delay, &delay_field, &def->max_delay_ms, sub);
    }
    return ld->ndiags == before;
}

/* lease: only where the script can lease (lua/README.md, "Leases"). */
static bool
parse_lease(struct loader *ld, const struct limiter_form *lf,
            const struct load_path *path, struct limiter_def *def)
{
    struct field lease_field = {
        .parse = load_uint, .min = 1, .max = LIMIT_LEASE_MAX};
    size_t before = ld->ndiags;
    const struct load_path *sub;

    if (lf->lease == NULL) {
        return true;
    }
    sub = PATH_KEY(path, "lease");
    if (def->algorithm != LIMIT_TOKEN_BUCKET && def->algorithm != LIMIT_GCRA) {
        report(ld, lf->lease, sub, "lease needs token_bucket or gcra, not %s",
               limit_algorithm_name(def->algorithm));
        return false;
    }
    load_uint(ld, lf->lease, &lease_field, &def->lease, sub);
    return ld->ndiags == before;
}

/*
 * The rules between a limiter's keys, once its keys and algorithm are
 * right. On any error nrules stays 0, so that a route naming this
 * limiter reports nothing more about it.
 */
static void
check_limiter(struct loader *ld, yaml_node_t *node,
              const struct load_path *path, void *base)
{
    const struct limiter_form *lf = base;
    struct limiter_def *def = lf->def;
    bool bucket;
    bool ok;
    const struct load_path *sub;

    bucket = limit_algorithm_is_bucket(def->algorithm);
    ok = check_family_keys(ld, lf, path, def->algorithm);
    ok = parse_mode(ld, node, lf, path, def) && ok;
    ok = parse_lease(ld, lf, path, def) && ok;
    if (!ok) {
        return;
    }
    if (lf->rules != NULL) {
        if (lf->limit != NULL || lf->window != NULL || lf->rate != NULL ||
            lf->burst != NULL) {
            sub = PATH_KEY(path, "rules");
            report(ld, lf->rules, sub, "give either rules or %s, not both",
                   bucket ? "rate and burst" : "limit and window");
            return;
        }
        sub = PATH_KEY(path, "rules");
        ok = parse_rule_list(ld, lf->rules, sub, bucket, def);
    } else {
        ok = parse_inline_rule(ld, node, path, lf, bucket, &def->rules[0]);
        def->nrules = ok ? 1 : 0;
    }
    if (!ok) {
        def->nrules = 0;
        return;
    }
    for (size_t i = 0; def->delay && i < def->nrules; i++) {
        if (!product_fits(def->max_delay_ms, def->rules[i].limit)) {
            sub = PATH_KEY(path, "max_delay");
            report(ld, lf->max_delay, sub,
                   "too large: max_delay %llu ms x limit %llu must stay "
                   "below 2^50",
                   (unsigned long long)def->max_delay_ms,
                   (unsigned long long)def->rules[i].limit);
            def->nrules = 0;
            return;
        }
    }
    load_limiter_tag(def);
}

#define LIMITER_NODE(k)                                                        \
    {                                                                          \
        .key = #k, .parse = load_node,                                         \
        .offset = offsetof(struct limiter_form, k)                             \
    }

static const struct field limiter_fields[] = {
    {.key = "algorithm", .parse = parse_algorithm, .required = true},
    LIMITER_NODE(limit),
    LIMITER_NODE(window),
    LIMITER_NODE(rate),
    LIMITER_NODE(burst),
    LIMITER_NODE(rules),
    LIMITER_NODE(mode),
    LIMITER_NODE(max_delay),
    LIMITER_NODE(lease),
};

/* A wrong key or algorithm ends the reading: the rest depends on them. */
static const struct table limiter_table = {
    .fields = limiter_fields,
    .n = NELEMS(limiter_fields),
    .check = check_limiter,
    .keys_first = true,
};

/* Builds 'def' (its name already set). */
static void
parse_limiter(struct loader *ld, yaml_node_t *node,
              const struct load_path *path, struct limiter_def *def)
{
    struct limiter_form lf;

    memset(&lf, 0, sizeof(lf));
    lf.def = def;
    load_fields(ld, node, path, &limiter_table, &lf);
}

void
load_limiters(struct loader *ld, yaml_node_t *node, const struct field *f,
              void *base, const struct load_path *path)
{
    struct config *cfg = base;
    size_t n;

    (void)f;
    if (load_is_null(node)) {
        return;
    }
    if (node->type != YAML_MAPPING_NODE) {
        report(ld, node, path, "expected a mapping, got %s",
               load_node_desc(node));
        return;
    }
    n = (size_t)(node->data.mapping.pairs.top - node->data.mapping.pairs.start);
    /* Allocated once: tiers keep pointers into this array. */
    cfg->limiters = xcalloc(n, sizeof(*cfg->limiters));
    for (yaml_node_pair_t *p = node->data.mapping.pairs.start;
         p < node->data.mapping.pairs.top; p++) {
        yaml_node_t *k = load_node_at(ld, p->key);
        struct limiter_def *def;
        const char *name;
        const struct load_path *sub;
        bool dup = false;

        if (k->type != YAML_SCALAR_NODE) {
            report(ld, k, path, "expected a scalar key, got %s",
                   load_node_desc(k));
            continue;
        }
        name = (const char *)k->data.scalar.value;
        if (strlen(name) != k->data.scalar.length) {
            /* "a\0b" would pass for "a". */
            report(ld, k, path, "a key contains a NUL character");
            continue;
        }
        if (!load_valid_name(name) || strlen(name) > LIMITER_NAME_MAX) {
            report(ld, k, path,
                   "bad limiter name \"%s\" (use up to %d letters, digits, "
                   "'_', '.' and '-')",
                   name, LIMITER_NAME_MAX);
            continue;
        }
        if (strcmp(name, "none") == 0) {
            report(ld, k, path,
                   "\"none\" is reserved: a tier with limiter: none is never "
                   "limited");
            continue;
        }
        if (strncmp(name, "scg.", 4) == 0) {
            /* A limiter of that name would share the Redis keys of a
             * redis-rate-limiter's (\"scg.<route>\"). */
            report(ld, k, path,
                   "bad limiter name \"%s\": names starting with \"scg.\" "
                   "are the redis-rate-limiter's",
                   name);
            continue;
        }
        /* libyaml keeps both of two equal keys: the second is refused. */
        for (yaml_node_pair_t *q = node->data.mapping.pairs.start;
             q < p && !dup; q++) {
            yaml_node_t *qk = load_node_at(ld, q->key);

            if (qk->type == YAML_SCALAR_NODE &&
                strcmp((const char *)qk->data.scalar.value, name) == 0) {
                report(ld, k, path,
                       "duplicate limiter \"%s\" (first at line %zu)", name,
                       (size_t)qk->start_mark.line + 1);
                dup = true;
            }
        }
        if (dup) {
            continue;
        }
        def = &cfg->limiters[cfg->nlimiters++];
        def->name = xstrdup(name);
        sub = PATH_KEY(path, name);
        parse_limiter(ld, load_node_at(ld, p->value), sub, def);
    }
}
