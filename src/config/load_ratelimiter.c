/*
 * load_ratelimiter.c - the args of a route's RequestRateLimiter filter:
 * key or tiers, limiter names from limiters:, cost, scope, backend and
 * the reply's headers and status, into a rate_limit_conf (limit.h) for
 * the route's rate limiters. Pure.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "filter.h"
#include "headers.h"
#include "load.h"
#include "ratekey.h"
#include "xmalloc.h"

/* Longest scope name: it goes into every Redis key (ratekey.h). */
#define SCOPE_NAME_MAX 64
/*
 * The fixed part of a key: prefix, limiter name, tag, scope and the key's
 * text. Whatever the values, the key then fits in RATEKEY_MAX with room
 * for the ":<rule>" suffix: each value is at most RATEKEY_MAX_VALUE bytes,
 * plus a '+' between two, plus ":" ":" "{" ":" ":" "}", the suffix (8 to
 * spare) and the NUL.
 */
#define KEY_FIXED_MAX                                                          \
    (RATEKEY_MAX - KEY_MAX_PARTS * (RATEKEY_MAX_VALUE + 1) - 6 - 8 - 1)

/* A route's RequestRateLimiter, while its args are read. */
struct rl_ctx {
    const struct config *cfg; /* limiters:, redis: already read */
    const char *scope;        /* the resolved scope; borrowed */
    uint64_t cost;            /* as read; 1 if it was wrong (a limiter
                                 admits at least 1, so no more is said) */
    bool local;               /* backend: local (no leases there) */
};

static const struct choice redis_failure_words[] = {
    {"local", REDIS_FAILURE_LOCAL},
    {"allow", REDIS_FAILURE_ALLOW},
    {"deny", REDIS_FAILURE_DENY},
};

static const struct choices redis_failure_choices =
    CHOICES("on_redis_error", redis_failure_words, CHOICE_EXPECTED);

static const struct choice empty_key_words[] = {
    {"deny", 0},
    {"allow", 1},
};

static const struct choices empty_key_choices =
    CHOICES("empty_key", empty_key_words, CHOICE_EXPECTED);

static const struct choice backend_words[] = {
    {"redis", 0},
    {"local", 1},
};

static const struct choices backend_choices =
    CHOICES("backend", backend_words, CHOICE_EXPECTED);

static const struct choice headers_words[] = {
    {"ietf", RL_HEADERS_IETF}, {"legacy", RL_HEADERS_LEGACY},
    {"both", RL_HEADERS_BOTH}, {"none", RL_HEADERS_NONE},
    {"scg", RL_HEADERS_SCG},
};

static const struct choices headers_choices =
    CHOICES("headers", headers_words, CHOICE_EXPECTED);

/*
 * RequestRateLimiter's args: the options, read by the table, and the
 * nodes that need the route, the limiters or each other.
 */
struct rl_form {
    yaml_node_t *key;          /* short form; borrowed, like every node here */
    yaml_node_t *limiter;      /* short form */
    yaml_node_t *tiers;        /* long form */
    uint64_t cost;             /* units per request; default 1 */
    int on_redis_error;        /* enum redis_failure; default local */
    bool dry_run;              /* count but never refuse */
    int empty_key;             /* 1: allow a request with an empty key,
                                  0: deny, -1: not given */
    yaml_node_t *scope;        /* route | NAME */
    int local;                 /* backend: 1 local, 0 redis */
    int headers;               /* enum rl_headers; default both */
    unsigned status;           /* of a refusal: 400..599, default 429 */
    yaml_node_t *scg_rl;       /* Spring's redis-rate-limiter: {replenishRate,
                                  burstCapacity, requestedTokens} */
    yaml_node_t *scg_flat[6];  /* the same as dotted keys, in the order
                                  of scg_rl_fields: "redis-rate-limiter.
                                  replenishRate", burstCapacity,
                                  requestedTokens, then kebab-case */
    yaml_node_t *key_resolver; /* Spring's "#{@beanName}" */
    yaml_node_t *deny_empty;   /* Spring's deny-empty-key */
    yaml_node_t *empty_status; /* Spring's empty-key-status-code */
    yaml_node_t *status_code;  /* Spring's status-code: of a refusal */
};

/* backend: redis needs somewhere to go. */
static void
parse_backend(struct loader *ld, yaml_node_t *node, const struct field *f,
              void *base, const struct load_path *path)
{
    int *local = field_ptr(base, f);

    if (load_choice(ld, node, path, f->choices, local) && !*local &&
        !ld->cfg->redis.enabled) {
        report(ld, node, path,
               "backend: redis needs a redis: section (or use backend: "
               "local)");
    }
}

#define RL_NODE(k)                                                             \
    {                                                                          \
        .key = #k, .parse = load_node, .offset = offsetof(struct rl_form, k)   \
    }

#define RL_ENUM(k, words)                                                      \
    {                                                                          \
        .key = #k, .parse = load_enum, .offset = offsetof(struct rl_form, k),  \
        .choices = &(words)                                                    \
    }

static const struct field rl_fields[] = {
    RL_NODE(key),
    RL_NODE(limiter),
    RL_NODE(tiers),
    {.key = "cost",
     .parse = load_count,
     .offset = offsetof(struct rl_form, cost),
     .min = 1},
    RL_ENUM(on_redis_error, redis_failure_choices),
    {.key = "dry_run",
     .parse = load_bool,
     .offset = offsetof(struct rl_form, dry_run)},
    RL_ENUM(empty_key, empty_key_choices),
    RL_NODE(scope),
    {.key = "backend",
     .parse = parse_backend,
     .offset = offsetof(struct rl_form, local),
     .choices = &backend_choices},
    RL_ENUM(headers, headers_choices),
    {.key = "status",
     .parse = load_uint,
     .offset = offsetof(struct rl_form, status),
     .min = 400,
     .max = 599},
    {.key = "redis-rate-limiter",
     .parse = load_node,
     .offset = offsetof(struct rl_form, scg_rl)},
#define SCG_FLAT(k, i)                                                         \
    {                                                                          \
        .key = "redis-rate-limiter." k, .parse = load_node,                    \
        .offset = offsetof(struct rl_form, scg_flat) + (i) * sizeof(void *)    \
    }
    SCG_FLAT("replenishRate", 0),
    SCG_FLAT("burstCapacity", 1),
    SCG_FLAT("requestedTokens", 2),
    SCG_FLAT("replenish-rate", 3),
    SCG_FLAT("burst-capacity", 4),
    SCG_FLAT("requested-tokens", 5),
    {.key = "key-resolver",
     .parse = load_node,
     .offset = offsetof(struct rl_form, key_resolver)},
    {.key = "deny-empty-key",
     .parse = load_node,
     .offset = offsetof(struct rl_form, deny_empty)},
    {.key = "empty-key-status-code",
     .parse = load_node,
     .offset = offsetof(struct rl_form, empty_status)},
    {.key = "status-code",
     .parse = load_node,
     .offset = offsetof(struct rl_form, status_code)},
};

/* A wrong key ("limter") leaves every value unread: what the rest would
 * report follows from that one mistake. */
static const struct table rl_table = {
    .fields = rl_fields,
    .n = NELEMS(rl_fields),
    .keys_first = true,
};

/* The kinds of key part, as written before any ':'. */
struct key_kind_name {
    const char *name;   /* must stay first: load_alternatives() reads it */
    enum key_kind kind; /* what it stands for */
    bool named;         /* takes ":NAME" */
};

static const struct key_kind_name key_kinds[] = {
    {"ip", KEY_IP, false},        {"user", KEY_USER, false},
    {"role", KEY_ROLE, false},    {"route", KEY_ROUTE, false},
    {"header", KEY_HEADER, true}, {"query", KEY_QUERY, true},
    {"cookie", KEY_COOKIE, true}, {"claim", KEY_CLAIM, true},
};

_Static_assert(offsetof(struct key_kind_name, name) == 0, "name first");
_Static_assert(offsetof(struct limiter_def, name) == 0, "name first");

static void
key_spec_clear(struct key_spec *k)
{
    for (size_t i = 0; i < k->nparts; i++) {
        free(k->parts[i].name);
    }
    free(k->text);
    memset(k, 0, sizeof(*k));
}

/*
 * One part of a key ('s', cut out of the text) into 'part'. Header names
 * are lowercased: they are case-insensitive, and the key text must be one
 * spelling so that routes sharing a scope share the bucket.
 */
static const char *
parse_key_part(char *s, struct key_part *part, char *why, size_t whylen)
{
    char *colon = strchr(s, ':');
    const struct key_kind_name *kn = NULL;
    char *alt;

    if (colon != NULL) {
        *colon = '\0';
    }
    for (size_t i = 0; i < NELEMS(key_kinds); i++) {
        if (strcmp(s, key_kinds[i].name) == 0) {
            kn = &key_kinds[i];
        }
    }
    if (kn == NULL) {
        alt = load_alternatives(s, key_kinds, NELEMS(key_kinds),
                                sizeof(*key_kinds), NULL);
        snprintf(why, whylen, "unknown part \"%s\" %s", s, alt);
        free(alt);
        return why;
    }
    if (kn->named && (colon == NULL || colon[1] == '\0')) {
        snprintf(why, whylen, "%s needs a name (%s:NAME)", kn->name, kn->name);
        return why;
    }
    if (!kn->named && colon != NULL) {
        snprintf(why, whylen, "%s takes no name", kn->name);
        return why;
    }
    if (kn->named && !headers_valid_name(colon + 1)) {
        snprintf(why, whylen, "bad %s name \"%s\" (expected a token)", kn->name,
                 colon + 1);
        return why;
    }
    part->kind = kn->kind;
    part->name = kn->named ? xstrdup(colon + 1) : NULL;
    if (kn->kind == KEY_HEADER) {
        for (char *p = part->name; *p != '\0'; p++) {
            *p = (char)tolower((unsigned char)*p);
        }
    }
    return NULL;
}

static bool
same_part(const struct key_part *a, const struct key_part *b)
{
    if (a->kind != b->kind) {
        return false;
    }
    return a->name == NULL || strcmp(a->name, b->name) == 0;
}

/* Appends the normalised text of 'part' to 'text' (a new string). */
static char *
append_part(char *text, const struct key_part *part)
{
    const char *kind = NULL;
    char *s;

    for (size_t i = 0; i < NELEMS(key_kinds); i++) {
        if (key_kinds[i].kind == part->kind) {
            kind = key_kinds[i].name;
        }
    }
    s = xasprintf("%s%s%s%s%s", text != NULL ? text : "",
                  text != NULL ? "+" : "", kind, part->name != NULL ? ":" : "",
                  part->name != NULL ? part->name : "");
    free(text);
    return s;
}

static bool parse_key_text(struct loader *ld, yaml_node_t *node,
                           const struct load_path *path, const char *text,
                           struct key_spec *out);

/* "ip+header:X-Api-Key" into 'out'; false after reporting. */
static bool
parse_key_spec(struct loader *ld, yaml_node_t *node,
               const struct load_path *path, struct key_spec *out)
{
    return parse_key_text(ld, node, path, load_scalar(ld, node, path), out);
}

/* The same from 'text' (NULL: already reported), found at 'node'. */
static bool
parse_key_text(struct loader *ld, yaml_node_t *node,
               const struct load_path *path, const char *text,
               struct key_spec *out)
{
    char why[256];
    const char *err = NULL;
    char *buf;
    char *p;

    memset(out, 0, sizeof(*out));
    if (text == NULL) {
        return false;
    }
    buf = xstrdup(text);
    p = buf;
    for (;;) {
        char *plus = strchr(p, '+');
        char *piece;
        struct key_part part;

        if (plus != NULL) {
            *plus = '\0';
        }
        piece = load_trim(p);
        if (*piece == '\0') {
            err = "empty part";
            break;
        }
        if (out->nparts == KEY_MAX_PARTS) {
            snprintf(why, sizeof(why), "at most %d parts", KEY_MAX_PARTS);
            err = why;
            break;
        }
        err = parse_key_part(piece, &part, why, sizeof(why));
        if (err != NULL) {
            break;
        }
        for (size_t i = 0; i < out->nparts; i++) {
            if (same_part(&out->parts[i], &part)) {
                char *t = append_part(NULL, &part);

                snprintf(why, sizeof(why), "\"%s\" appears twice", t);
                free(t);
                err = why;
            }
        }
        if (err != NULL) {
            free(part.name);
            break;
        }
        out->parts[out->nparts++] = part;
        out->text = append_part(out->text, &part);
        if (plus == NULL) {
            break;
        }
        p = plus + 1;
    }
    free(buf);
    if (err != NULL) {
        report(ld, node, path,
               "bad key \"%s\": %s (expected parts joined by '+': ip, user, "
               "role, route, header:NAME, query:NAME, cookie:NAME, "
               "claim:NAME)",
               text, err);
        key_spec_clear(out);
        return false;
    }
    for (size_t i = 0; i < out->nparts; i++) {
        if (out->parts[i].kind == KEY_CLAIM && ld->cfg->identity.jwt == NULL) {
            report(ld, node, path,
                   "bad key \"%s\": claim:%s needs identity.jwt (claims come "
                   "from a verified token)",
                   text, out->parts[i].name);
            key_spec_clear(out);
            return false;
        }
    }
    return true;
}

/*
 * True when 'name' is a key of the file's top-level limiters: although no
 * limiter of that name loaded: its name was refused there, and said so.
 */
static bool
named_under_limiters(struct loader *ld, const char *name)
{
    yaml_node_t *root = yaml_document_get_root_node(ld->doc);
    const yaml_node_pair_t *p;
    yaml_node_t *map;

    if (root == NULL || root->type != YAML_MAPPING_NODE) {
        return false;
    }
    p = load_mapping_pair(ld, root, "limiters");
    map = p != NULL ? load_node_at(ld, p->value) : NULL;
    return map != NULL && map->type == YAML_MAPPING_NODE &&
           load_mapping_pair(ld, map, name) != NULL;
}

/*
 * The limiter called by 'node': "none" leaves '*out' NULL. False after
 * reporting an unknown name.
 */
static bool
find_limiter(struct loader *ld, yaml_node_t *node, const struct load_path *path,
             const struct config *cfg, const struct limiter_def **out)
{
    const char *s = load_scalar(ld, node, path);
    char *alt;

    *out = NULL;
    if (s == NULL) {
        return false;
    }
    if (strcmp(s, "none") == 0) {
        return true;
    }
    for (size_t i = 0; i < cfg->nlimiters; i++) {
        if (strcmp(cfg->limiters[i].name, s) == 0) {
            *out = &cfg->limiters[i];
            return true;
        }
    }
    if (named_under_limiters(ld, s)) {
        report(ld, node, path,
               "unknown limiter \"%s\" (its name under limiters: was refused)",
               s);
        return false;
    }
    if (cfg->nlimiters == 0) {
        report(ld, node, path,
               "unknown limiter \"%s\" (no limiters are defined under "
               "limiters:)",
               s);
        return false;
    }
    alt = load_alternatives(s, cfg->limiters, cfg->nlimiters,
                            sizeof(*cfg->limiters), NULL);
    report(ld, node, path, "unknown limiter \"%s\" %s", s, alt);
    free(alt);
    return false;
}

/* What a limiter can ever admit at once: its smallest capacity. */
static uint64_t
limiter_capacity(const struct limiter_def *def, size_t *rule)
{
    uint64_t cap = UINT64_MAX;

    *rule = 0;
    for (size_t i = 0; i < def->nrules; i++) {
        uint64_t c = limit_algorithm_is_bucket(def->algorithm)
                         ? def->rules[i].burst
                         : def->rules[i].limit;

        if (c < cap) {
            cap = c;
            *rule = i;
        }
    }
    return cap;
}

/* One tier while it is read: the tier, and what its rules need. */
struct tier_form {
    struct tier *t;           /* being filled; borrowed */
    const struct rl_ctx *ctx; /* the args read so far; borrowed */
    yaml_node_t *key;         /* as written, or NULL; borrowed */
    yaml_node_t *limiter;     /* as written, or NULL; borrowed */
};

/* when: {role: R}: the tier applies to callers with that role. */
static void
parse_role(struct loader *ld, yaml_node_t *node, const struct field *f,
           void *base, const struct load_path *path)
{
    struct tier *t = base;
    const char *s = load_scalar(ld, node, path);

    (void)f;
    if (s != NULL && (s[0] == '\0' || !headers_valid_value(s))) {
        report(ld, node, path, "bad role \"%s\"", s);
    } else if (s != NULL) {
        t->when_role = xstrdup(s);
    }
}

/* when: {claim: {NAME: VALUE, ...}}: each claim must be that string. */
static void
parse_when_claims(struct loader *ld, yaml_node_t *node, const struct field *f,
                  void *base, const struct load_path *path)
{
    struct tier *t = base;
    size_t n;

    (void)f;
    if (node->type != YAML_MAPPING_NODE) {
        report(ld, node, path, "expected a mapping of claim: value, got %s",
               load_node_desc(node));
        return;
    }
    if (ld->cfg->identity.jwt == NULL) {
        report(ld, node, path,
               "needs identity.jwt (claims come from a verified token)");
        return;
    }
    n = (size_t)(node->data.mapping.pairs.top - node->data.mapping.pairs.start);
    if (n == 0) {
        report(ld, node, path, "expected at least one claim");
        return;
    }
    t->when_claims = xcalloc(n, sizeof(*t->when_claims));
    for (yaml_node_pair_t *p = node->data.mapping.pairs.start;
         p < node->data.mapping.pairs.top; p++) {
        yaml_node_t *k = load_node_at(ld, p->key);
        yaml_node_t *v = load_node_at(ld, p->value);
        const char *name = load_scalar(ld, k, path);
        const char *value;
        const struct load_path *sub;

        if (name == NULL) {
            continue;
        }
        sub = PATH_KEY(path, name);
        value = load_scalar(ld, v, sub);
        if (value == NULL) {
            continue;
        }
        if (name[0] == '\0' || value[0] == '\0') {
            report(ld, name[0] == '\0' ? k : v, sub, "empty claim %s",
                   name[0] == '\0' ? "name" : "value");
            continue;
        }
        for (size_t i = 0; i < t->nwhen_claims; i++) {
            if (strcmp(t->when_claims[i].name, name) == 0) {
                report(ld, k, path, "duplicate claim \"%s\"", name);
                name = NULL;
                break;
            }
        }
        if (name != NULL) {
            t->when_claims[t->nwhen_claims].name = xstrdup(name);
            t->when_claims[t->nwhen_claims].value = xstrdup(value);
            t->nwhen_claims++;
        }
    }
}

/* A condition says something: a role, claims, or both (all must hold);
 * without claims the role is what is missing. */
static void
check_when(struct loader *ld, yaml_node_t *node, const struct load_path *path,
           void *base)
{
    struct tier *t = base;

    if (t->when_role == NULL && t->nwhen_claims == 0) {
        report(ld, node, PATH_KEY(path, "role"), "required");
    }
}

static const struct field when_fields[] = {
    {.key = "role", .parse = parse_role},
    {.key = "claim", .parse = parse_when_claims},
};

static const struct table when_table = {
    .fields = when_fields,
    .n = NELEMS(when_fields),
    .check = check_when,
    .keys_first = true,
};

static void
parse_when(struct loader *ld, yaml_node_t *node, const struct field *f,
           void *base, const struct load_path *path)
{
    struct tier_form *tf = base;

    (void)f;
    load_fields(ld, node, path, &when_table, tf->t);
}

static void
parse_tier_key(struct loader *ld, yaml_node_t *node, const struct field *f,
               void *base, const struct load_path *path)
{
    struct tier_form *tf = base;

    (void)f;
    tf->key = node;
    parse_key_spec(ld, node, path, &tf->t->key);
}

/* A limiter that can never admit the cost is refused here. */
static void
parse_tier_limiter(struct loader *ld, yaml_node_t *node, const struct field *f,
                   void *base, const struct load_path *path)
{
    struct tier_form *tf = base;
    struct tier *t = tf->t;
    uint64_t cost = tf->ctx->cost;
    size_t rule;
    uint64_t cap;
    const char *what;

    (void)f;
    tf->limiter = node;
    if (!find_limiter(ld, node, path, tf->ctx->cfg, &t->limiter) ||
        t->limiter == NULL || t->limiter->nrules == 0) {
        return;
    }
    if (tf->ctx->local && t->limiter->lease > 0) {
        report(ld, node, path,
               "limiter \"%s\" has lease: %u, and leases need backend: "
               "redis%s",
               t->limiter->name, t->limiter->lease,
               ld->cfg->redis.enabled ? "" : " (there is no redis: section)");
    }
    cap = limiter_capacity(t->limiter, &rule);
    what = limit_algorithm_is_bucket(t->limiter->algorithm) ? "burst" : "limit";
    if (cost > cap && t->limiter->nrules > 1) {
        report(ld, node, path,
               "limiter \"%s\" can never admit cost %llu (%s %llu in "
               "rules[%zu])",
               t->limiter->name, (unsigned long long)cost, what,
               (unsigned long long)cap, rule);
    } else if (cost > cap) {
        report(ld, node, path,
               "limiter \"%s\" can never admit cost %llu (%s %llu)",
               t->limiter->name, (unsigned long long)cost, what,
               (unsigned long long)cap);
    }
}

/*
 * The rules between a tier's fields. 'node' and 'path' are the tier's,
 * or the args' for the short form.
 */
static void
check_tier(struct loader *ld, yaml_node_t *node, const struct load_path *path,
           void *base)
{
    struct tier_form *tf = base;
    struct tier *t = tf->t;
    const struct load_path *sub = PATH_KEY(path, "key");

    if (tf->limiter == NULL) {
        report(ld, node, PATH_KEY(path, "limiter"), "required");
    } else if (tf->key == NULL && t->limiter != NULL) {
        report(ld, node, sub, "required");
    }
    if (t->key.text != NULL && t->limiter != NULL) {
        size_t fixed = strlen(tf->ctx->cfg->redis.key_prefix) +
                       strlen(t->limiter->name) + sizeof(t->limiter->tag) - 1 +
                       strlen(tf->ctx->scope) + strlen(t->key.text);

        if (fixed > KEY_FIXED_MAX) {
            report(ld, tf->key, sub,
                   "the Redis key would be too long: key prefix, limiter "
                   "name, tag, scope and key take %zu bytes (at most %d)",
                   fixed, KEY_FIXED_MAX);
        }
    }
}

static const struct field tier_fields[] = {
    {.key = "when", .parse = parse_when},
    {.key = "key", .parse = parse_tier_key},
    {.key = "limiter", .parse = parse_tier_limiter},
};

/* What was built stays in the tier even on an error, for
 * rate_limit_conf_free(). */
static const struct table tier_table = {
    .fields = tier_fields,
    .n = NELEMS(tier_fields),
    .check = check_tier,
    .check_always = true,
    .keys_first = true,
};

/* The short form: a tier's key and limiter sit in the args themselves. */
static void
parse_short_tier(struct loader *ld, yaml_node_t *node,
                 const struct load_path *path, yaml_node_t *key,
                 yaml_node_t *limiter, struct tier_form *tf)
{
    if (key != NULL) {
        parse_tier_key(ld, key, &tier_fields[1], tf, PATH_KEY(path, "key"));
    }
    if (limiter != NULL) {
        parse_tier_limiter(ld, limiter, &tier_fields[2], tf,
                           PATH_KEY(path, "limiter"));
    }
    check_tier(ld, node, path, tf);
}

/* "tiers:": a non-empty sequence of mappings. */
static bool
parse_tiers(struct loader *ld, yaml_node_t *node, const struct load_path *path,
            const struct rl_ctx *ctx, struct rate_limit_conf *rl)
{
    size_t n = load_sequence_length(node);
    bool ok = true;

    if (node->type != YAML_SEQUENCE_NODE) {
        report(ld, node, path, "expected a sequence, got %s",
               load_node_desc(node));
        return false;
    }
    if (n == 0) {
        report(ld, node, path, "expected at least one tier");
        return false;
    }
    rl->tiers = xcalloc(n, sizeof(*rl->tiers));
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *item = load_sequence_item(ld, node, i);
        const struct load_path *sub = PATH_INDEX(path, i);
        struct tier *t = &rl->tiers[rl->ntiers++];
        struct tier_form tf = {t, ctx, NULL, NULL};

        t->label = xasprintf("%zu", i);
        ok = load_fields(ld, item, sub, &tier_table, &tf) == LOAD_OK && ok;
    }
    return ok;
}

/* scope: "route" (the route's id) or a name shared by routes. */
static char *
parse_scope(struct loader *ld, yaml_node_t *node, const struct load_path *path,
            const struct route *route)
{
    const char *s = node != NULL ? load_scalar(ld, node, path) : "route";

    if (s == NULL) {
        return NULL;
    }
    if (strcmp(s, "route") == 0) {
        /* A bad route id is reported on its own; "" stands in. */
        return xstrdup(route->id != NULL ? route->id : "");
    }
    if (!load_valid_name(s) || strlen(s) > SCOPE_NAME_MAX) {
        report(ld, node, path,
               "bad scope \"%s\" (expected \"route\", or a name of up to %d "
               "letters, digits, '_', '.' and '-')",
               s, SCOPE_NAME_MAX);
        return NULL;
    }
    /* Route ids are unique (or reported): another route's id is any
     * equal one but this route's own. */
    for (size_t i = 0; i < ld->nroute_ids; i++) {
        const char *id = ld->route_ids[i];

        if (id != NULL && strcmp(id, s) == 0 &&
            (route->id == NULL || strcmp(route->id, s) != 0)) {
            report(ld, node, path,
                   "scope \"%s\" is the id of routes[%zu]: a route's own "
                   "budget (scope: route) is kept under its id, so the two "
                   "would share buckets; name the scope after no route",
                   s, i);
            return NULL;
        }
    }
    return xstrdup(s);
}

/* ------------------------------------------------------------------ */
/* Spring Cloud Gateway's arguments                                    */

/* Most units per second or in a bucket: rule sizes stay below 2^50
 * (load_limiters.c) with the window of 1 s. */
#define SCG_RATE_MAX 1000000000000ULL

/* The key 'key' of the mapping 'node', or NULL. */
static yaml_node_t *
key_node(struct loader *ld, yaml_node_t *node, const char *key)
{
    const yaml_node_pair_t *p = load_mapping_pair(ld, node, key);

    return p != NULL ? load_node_at(ld, p->key) : NULL;
}

static bool
has_key(struct loader *ld, yaml_node_t *node, const char *key)
{
    return key_node(ld, node, key) != NULL;
}

/*
 * Two spellings of one setting ("status" and Spring's "status-code",
 * "replenishRate" and "replenish-rate") in the mapping 'node' are the
 * key given twice: reported at the later one, like any repeated key.
 * True when at most one is there.
 */
static bool
check_same_key(struct loader *ld, yaml_node_t *node,
               const struct load_path *path, const char *a, const char *b)
{
    yaml_node_t *ka = key_node(ld, node, a);
    yaml_node_t *kb = key_node(ld, node, b);
    yaml_node_t *first;
    yaml_node_t *later;

    if (ka == NULL || kb == NULL) {
        return true;
    }
    first = ka->start_mark.index < kb->start_mark.index ? ka : kb;
    later = first == ka ? kb : ka;
    report(ld, later, path,
           "duplicate key \"%s\" (the same as \"%s\" at line %zu)",
           (const char *)later->data.scalar.value,
           (const char *)first->data.scalar.value,
           (size_t)first->start_mark.line + 1);
    return false;
}

/* The names SCG users give their KeyResolver beans, mapped by default. */
static const struct load_resolver default_resolvers[] = {
    {"ipKeyResolver", "ip"},
    {"userKeyResolver", "query:user"},
    {"principalNameKeyResolver", "user"},
};

/* redis-rate-limiter: {replenishRate, burstCapacity, requestedTokens}. */
struct scg_rl_form {
    uint64_t replenish; /* tokens per second */
    uint64_t burst;     /* bucket size; 0 refuses everything */
    uint64_t requested; /* tokens per request; 0: not given (cost:) */
};

#define SCG_COUNT(k, member, lo, req)                                          \
    {                                                                          \
        .key = k, .parse = load_count,                                         \
        .offset = offsetof(struct scg_rl_form, member), .min = (lo),           \
        .required = (req)                                                      \
    }

/* Spring binds the kebab-case spelling as well. */
static const struct field scg_rl_fields[] = {
    SCG_COUNT("replenishRate", replenish, 1, false),
    SCG_COUNT("burstCapacity", burst, 0, false),
    SCG_COUNT("requestedTokens", requested, 1, false),
    SCG_COUNT("replenish-rate", replenish, 1, false),
    SCG_COUNT("burst-capacity", burst, 0, false),
    SCG_COUNT("requested-tokens", requested, 1, false),
};

static const struct table scg_rl_table = TABLE(scg_rl_fields);

/*
 * A status code, plain or quoted (Spring reads a string): a number or
 * Spring's HttpStatus name ("FORBIDDEN"), from 400 to 599.
 */
static bool
parse_status_text(struct loader *ld, yaml_node_t *node,
                  const struct load_path *path, int *out)
{
    const char *s = load_scalar(ld, node, path);
    int v;

    if (s == NULL) {
        return false;
    }
    v = filter_status_code(s);
    if (v < 400 || v > 599) {
        report(ld, node, path,
               "bad status \"%s\" (expected a number from 400 to 599, or "
               "Spring's name of one, like FORBIDDEN)",
               s);
        return false;
    }
    *out = v;
    return true;
}

/* deny-empty-key, empty-key-status-code and status-code. */
static void
parse_scg_options(struct loader *ld, const struct rl_form *form,
                  const struct load_path *path, struct rate_limit_conf *rl)
{
    if (form->deny_empty != NULL) {
        struct field bf = {.offset = 0};
        bool deny = true;

        load_bool(ld, form->deny_empty, &bf, &deny,
                  PATH_KEY(path, "deny-empty-key"));
        rl->empty_key_allow = !deny;
    }
    if (form->empty_status != NULL) {
        parse_status_text(ld, form->empty_status,
                          PATH_KEY(path, "empty-key-status-code"),
                          &rl->empty_key_status);
    }
    if (form->status_code != NULL) {
        parse_status_text(ld, form->status_code, PATH_KEY(path, "status-code"),
                          &rl->deny_status);
    }
}

/* The key of "#{@beanName}", or NULL after reporting. */
static const char *
resolve_bean(struct loader *ld, yaml_node_t *node, const struct load_path *path)
{
    const char *s = load_scalar(ld, node, path);
    size_t n = NELEMS(default_resolvers) + ld->nresolvers;
    struct load_resolver *all;
    const char *key = NULL;
    char *name;
    char *alt;

    if (s == NULL) {
        return NULL;
    }
    if (strncmp(s, "#{@", 3) != 0 || strlen(s) < 5 || s[strlen(s) - 1] != '}') {
        report(ld, node, path,
               "bad key-resolver \"%s\" (expected \"#{@beanName}\", a name "
               "from scg.key_resolvers)",
               s);
        return NULL;
    }
    name = xstrndup(s + 3, strlen(s) - 4);
    /* The file's own names first: they may redefine a conventional one. */
    all = xcalloc(n, sizeof(*all));
    if (ld->nresolvers > 0) {
        memcpy(all, ld->resolvers, ld->nresolvers * sizeof(*all));
    }
    memcpy(all + ld->nresolvers, default_resolvers, sizeof(default_resolvers));
    for (size_t i = 0; i < n && key == NULL; i++) {
        if (strcmp(all[i].name, name) == 0) {
            key = all[i].key;
        }
    }
    if (key == NULL) {
        alt = load_alternatives(name, all, n, sizeof(*all), NULL);
        report(ld, node, path,
               "unknown key resolver \"%s\" %s (name it in scg.key_resolvers)",
               name, alt);
        free(alt);
    }
    free(name);
    free(all);
    return key;
}

/*
 * "scg.<route id>" for the first RequestRateLimiter of a route,
 * "scg.<id>.<i>" for the i-th after it; "scg.<scope>" for one with a
 * scope of its own, so that routes naming the same scope (and the same
 * rules) share one bucket, as the name is part of the key.
 */
static char *
derived_name(const struct route *route, const char *scope, size_t i)
{
    const char *id = route->id != NULL ? route->id : "";

    if (scope != NULL && strcmp(scope, id) != 0) {
        return xasprintf("scg.%s", scope);
    }
    return i == 0 ? xasprintf("scg.%s", id) : xasprintf("scg.%s.%zu", id, i);
}

void
load_name_derived(struct route *route)
{
    for (size_t i = 0; i < route->nrate_limiters; i++) {
        struct limiter_def *def = route->rate_limiters[i]->derived;

        if (def != NULL) {
            free(def->name);
            def->name = derived_name(route, route->rate_limiters[i]->scope, i);
        }
    }
}

static bool
has_flat(const struct rl_form *form)
{
    for (size_t i = 0; i < NELEMS(form->scg_flat); i++) {
        if (form->scg_flat[i] != NULL) {
            return true;
        }
    }
    return false;
}

/*
 * redis-rate-limiter: a token_bucket of burstCapacity refilled at
 * replenishRate per second, requestedTokens a request, keyed by the
 * key-resolver (SCG's default: the principal's name, "user"), owned by
 * the filter (rl->derived).
 */
static void
parse_scg_limiter(struct loader *ld, const struct rl_form *form,
                  yaml_node_t *node, const struct load_path *path,
                  const struct rl_ctx *ctx, const struct route *route,
                  struct rate_limit_conf *rl)
{
    struct scg_rl_form sf = {0, 1, 0};
    const struct load_path *sub = PATH_KEY(path, "redis-rate-limiter");
    struct limiter_def *def;
    struct tier_form tf;
    yaml_node_t *key_node = node;
    yaml_node_t *rl_node = form->scg_rl != NULL ? form->scg_rl : node;
    const char *key = "user";

    if (form->tiers != NULL || form->limiter != NULL) {
        report(ld, rl_node, sub,
               "give either redis-rate-limiter or limiter (or tiers), not "
               "both");
        return;
    }
    if (form->key != NULL && form->key_resolver != NULL) {
        report(ld, form->key_resolver, PATH_KEY(path, "key-resolver"),
               "give either key-resolver or key, not both");
        return;
    }
    if (form->scg_rl != NULL && has_flat(form)) {
        report(ld, form->scg_rl, sub,
               "give redis-rate-limiter as a mapping or as dotted keys "
               "(redis-rate-limiter.replenishRate), not both");
        return;
    }
    if (form->scg_rl != NULL) {
        bool once = true;

        for (size_t i = 0; i < 3; i++) {
            once &= check_same_key(ld, form->scg_rl, sub, scg_rl_fields[i].key,
                                   scg_rl_fields[i + 3].key);
        }
        if (!once ||
            load_fields(ld, form->scg_rl, sub, &scg_rl_table, &sf) != LOAD_OK) {
            return;
        }
    } else {
        size_t before = ld->ndiags;

        for (size_t i = 0; i < 6; i++) {
            const struct field *f = &scg_rl_fields[i];

            /* Named as written: "redis-rate-limiter.replenish-rate". */
            if (form->scg_flat[i] != NULL) {
                f->parse(ld, form->scg_flat[i], f, &sf, PATH_KEY(sub, f->key));
            }
        }
        if (ld->ndiags != before) {
            return;
        }
    }
    if (sf.replenish == 0) {
        report(ld, rl_node, PATH_KEY(sub, "replenishRate"), "required");
        return;
    }
    if (sf.replenish > SCG_RATE_MAX || sf.burst > SCG_RATE_MAX) {
        report(ld, rl_node, sub,
               "replenishRate and burstCapacity are at most %llu",
               (unsigned long long)SCG_RATE_MAX);
        return;
    }
    if (sf.requested != 0 && has_key(ld, node, "cost")) {
        report(ld, rl_node, sub,
               "give either requestedTokens or cost, not both");
        return;
    }
    if (sf.requested == 0) {
        sf.requested = rl->cost; /* cost:, or its default 1 */
    }
    if (sf.burst > 0 && sf.requested > sf.burst) {
        report(ld, rl_node, sub,
               "requestedTokens %llu is above burstCapacity %llu: no request "
               "could ever pass (burstCapacity: 0 refuses all on purpose)",
               (unsigned long long)sf.requested, (unsigned long long)sf.burst);
        return;
    }
    if (form->key_resolver != NULL) {
        key_node = form->key_resolver;
        key = resolve_bean(ld, key_node, PATH_KEY(path, "key-resolver"));
        if (key == NULL) {
            return;
        }
    } else if (form->key != NULL) {
        key_node = form->key;
        key = load_scalar(ld, key_node, PATH_KEY(path, "key"));
        if (key == NULL) {
            return;
        }
    }
    rl->cost = sf.requested;
    def = xcalloc(1, sizeof(*def));
    def->name = derived_name(route, rl->scope, route->nrate_limiters);
    def->algorithm = LIMIT_TOKEN_BUCKET;
    def->rules[0].limit = sf.replenish;
    def->rules[0].window_ms = 1000;
    def->rules[0].burst = sf.burst;
    def->nrules = 1;
    def->refuse_all = sf.burst == 0;
    load_limiter_tag(def);
    rl->derived = def;
    rl->tiers = xcalloc(1, sizeof(*rl->tiers));
    rl->ntiers = 1;
    rl->tiers[0].label = xstrdup("0");
    rl->tiers[0].limiter = def;
    tf.t = &rl->tiers[0];
    tf.ctx = ctx;
    tf.key = key_node;
    tf.limiter = rl_node;
    if (parse_key_text(
            ld, key_node,
            PATH_KEY(path, form->key_resolver != NULL ? "key-resolver" : "key"),
            key, &rl->tiers[0].key)) {
        check_tier(ld, node, path, &tf);
    }
}

static void
parse_default_deny(struct loader *ld, yaml_node_t *node, const struct field *f,
                   void *base, const struct load_path *path)
{
    struct field bf = {.offset = 0};
    bool deny = true;
    size_t before = ld->ndiags;

    (void)f;
    (void)base;
    load_bool(ld, node, &bf, &deny, path);
    if (ld->ndiags == before) {
        ld->scg_deny_empty = deny;
    }
}

static void
parse_default_status(struct loader *ld, yaml_node_t *node,
                     const struct field *f, void *base,
                     const struct load_path *path)
{
    (void)f;
    (void)base;
    parse_status_text(ld, node, path, &ld->scg_empty_status);
}

static const struct field rrl_default_fields[] = {
    {.key = "deny-empty-key", .parse = parse_default_deny},
    {.key = "empty-key-status-code", .parse = parse_default_status},
};

static const struct table rrl_default_table = TABLE(rrl_default_fields);

static const struct field gateway_filter_fields[] = {
    {.key = "request-rate-limiter",
     .parse = load_table,
     .table = &rrl_default_table},
};

static const struct table gateway_filter_table = TABLE(gateway_filter_fields);

void
load_scg_rrl_defaults(struct loader *ld, yaml_node_t *node,
                      const struct field *f, void *base,
                      const struct load_path *path)
{
    (void)f;
    (void)base;
    load_fields(ld, node, path, &gateway_filter_table, ld);
}

/* scg.key_resolvers: { beanName: key, ... }. */
static void
parse_resolvers(struct loader *ld, yaml_node_t *node, const struct field *f,
                void *base, const struct load_path *path)
{
    size_t n;

    (void)f;
    (void)base;
    if (node->type != YAML_MAPPING_NODE) {
        report(ld, node, path, "expected a mapping of bean name: key, got %s",
               load_node_desc(node));
        return;
    }
    n = (size_t)(node->data.mapping.pairs.top - node->data.mapping.pairs.start);
    ld->resolvers = xcalloc(n, sizeof(*ld->resolvers));
    for (yaml_node_pair_t *p = node->data.mapping.pairs.start;
         p < node->data.mapping.pairs.top; p++) {
        yaml_node_t *k = load_node_at(ld, p->key);
        yaml_node_t *v = load_node_at(ld, p->value);
        const char *name = load_scalar(ld, k, path);
        const struct load_path *sub;
        struct key_spec spec;
        const char *text;

        if (name == NULL) {
            continue;
        }
        sub = PATH_KEY(path, name);
        if (name[0] == '\0') {
            report(ld, k, path, "empty bean name");
            continue;
        }
        for (yaml_node_pair_t *q = node->data.mapping.pairs.start; q < p; q++) {
            yaml_node_t *qk = load_node_at(ld, q->key);

            if (qk->type == YAML_SCALAR_NODE &&
                strcmp((const char *)qk->data.scalar.value, name) == 0) {
                report(ld, k, path, "duplicate key \"%s\" (first at line %zu)",
                       name, (size_t)qk->start_mark.line + 1);
                name = NULL;
                break;
            }
        }
        if (name == NULL) {
            continue;
        }
        text = load_scalar(ld, v, sub);
        if (!parse_key_text(ld, v, sub, text, &spec)) {
            continue;
        }
        key_spec_clear(&spec);
        ld->resolvers[ld->nresolvers].name = name;
        ld->resolvers[ld->nresolvers].key = text;
        ld->nresolvers++;
    }
}

static const struct field scg_fields[] = {
    {.key = "key_resolvers", .parse = parse_resolvers},
    {.key = "services", .parse = load_scg_services},
};

static const struct table scg_table = TABLE(scg_fields);

void
load_scg_section(struct loader *ld, yaml_node_t *node, const struct field *f,
                 void *base, const struct load_path *path)
{
    (void)f;
    (void)base;
    if (ld->resolvers != NULL || ld->services != NULL) {
        report(ld, node, path, "scg: is given twice");
        return;
    }
    load_fields(ld, node, path, &scg_table, ld);
}

/* sluice's and Spring's spelling of one setting, both in 'node'. */
static bool
check_same_keys(struct loader *ld, yaml_node_t *node,
                const struct load_path *path)
{
    static const char *const pairs[][2] = {
        {"status", "status-code"},
        {"empty_key", "deny-empty-key"},
        {"redis-rate-limiter.replenishRate",
         "redis-rate-limiter.replenish-rate"},
        {"redis-rate-limiter.burstCapacity",
         "redis-rate-limiter.burst-capacity"},
        {"redis-rate-limiter.requestedTokens",
         "redis-rate-limiter.requested-tokens"},
    };
    bool ok = true;

    for (size_t i = 0; i < NELEMS(pairs); i++) {
        ok &= check_same_key(ld, node, path, pairs[i][0], pairs[i][1]);
    }
    return ok;
}

/*
 * The args of a RequestRateLimiter on 'route' ('node' is the args
 * mapping). Returns the conf, or NULL after reporting every problem.
 */
static struct rate_limit_conf *
parse_rl_args(struct loader *ld, yaml_node_t *node,
              const struct load_path *path, const struct route *route)
{
    struct rate_limit_conf *rl;
    struct rl_form form;
    struct rl_ctx ctx;
    size_t before = ld->ndiags;
    const struct load_path *sub;

    memset(&form, 0, sizeof(form));
    form.cost = 1;
    form.on_redis_error = REDIS_FAILURE_LOCAL;
    form.local = !ld->cfg->redis.enabled;
    form.headers = ld->scg ? RL_HEADERS_SCG : RL_HEADERS_BOTH;
    form.status = 429;
    form.empty_key = -1;
    if (load_fields(ld, node, path, &rl_table, &form) == LOAD_BAD_KEYS) {
        return NULL;
    }
    if (!check_same_keys(ld, node, path)) {
        return NULL;
    }
    rl = xcalloc(1, sizeof(*rl));
    rl->cost = form.cost;
    rl->dry_run = form.dry_run;
    rl->on_redis_error = (enum redis_failure)form.on_redis_error;
    rl->local = form.local != 0;
    rl->headers = (enum rl_headers)form.headers;
    rl->deny_status = (int)form.status;
    /* The file's default, then the filter's own word (empty_key here,
     * deny-empty-key in parse_scg_options()). */
    if (form.empty_key >= 0) {
        rl->empty_key_allow = form.empty_key != 0;
    } else if (ld->scg_deny_empty >= 0) {
        rl->empty_key_allow = !ld->scg_deny_empty;
    }
    rl->empty_key_status = ld->scg_empty_status;

    sub = PATH_KEY(path, "scope");
    rl->scope = parse_scope(ld, form.scope, sub, route);
    ctx.cfg = ld->cfg;
    ctx.scope = rl->scope != NULL ? rl->scope : "";
    ctx.cost = rl->cost;
    ctx.local = rl->local;

    parse_scg_options(ld, &form, path, rl);
    if (form.scg_rl != NULL || has_flat(&form)) {
        parse_scg_limiter(ld, &form, node, path, &ctx, route, rl);
    } else if (form.key_resolver != NULL) {
        report(ld, form.key_resolver, PATH_KEY(path, "key-resolver"),
               "key-resolver goes with redis-rate-limiter (with limiter, "
               "use key)");
    } else if (form.tiers != NULL &&
               (form.key != NULL || form.limiter != NULL)) {
        sub = PATH_KEY(path, "tiers");
        report(ld, form.tiers, sub,
               "give either tiers or key and limiter, not both");
    } else if (form.tiers != NULL) {
        sub = PATH_KEY(path, "tiers");
        parse_tiers(ld, form.tiers, sub, &ctx, rl);
    } else if (form.key != NULL || form.limiter != NULL) {
        struct tier_form tf = {NULL, &ctx, NULL, NULL};

        rl->tiers = xcalloc(1, sizeof(*rl->tiers));
        rl->ntiers = 1;
        rl->tiers[0].label = xstrdup("0");
        tf.t = &rl->tiers[0];
        parse_short_tier(ld, node, path, form.key, form.limiter, &tf);
    } else {
        report(ld, node, path,
               "RequestRateLimiter needs a key and a limiter, tiers, or "
               "redis-rate-limiter");
    }
    if (ld->ndiags != before) {
        rate_limit_conf_free(rl);
        return NULL;
    }
    return rl;
}

/* True if 'node' is a RequestRateLimiter, in the long or the short form. */
bool
load_is_rate_limiter(struct loader *ld, yaml_node_t *node)
{
    if (node->type == YAML_SCALAR_NODE) {
        const char *s = (const char *)node->data.scalar.value;
        size_t n;

        /* The name as parse_shortcut() cuts it: blanks both sides. */
        s += strspn(s, " \t");
        n = strcspn(s, "=");
        while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) {
            n--;
        }
        return strncmp(s, RATE_LIMITER_NAME, n) == 0 &&
               n == strlen(RATE_LIMITER_NAME);
    }
    if (node->type != YAML_MAPPING_NODE) {
        return false;
    }
    for (yaml_node_pair_t *p = node->data.mapping.pairs.start;
         p < node->data.mapping.pairs.top; p++) {
        yaml_node_t *k = load_node_at(ld, p->key);
        yaml_node_t *v = load_node_at(ld, p->value);

        /* By length too: "RequestRateLimiter\0" is another name. */
        if (k->type == YAML_SCALAR_NODE && v->type == YAML_SCALAR_NODE &&
            strcmp((const char *)k->data.scalar.value, "name") == 0 &&
            v->data.scalar.length == strlen(RATE_LIMITER_NAME) &&
            strcmp((const char *)v->data.scalar.value, RATE_LIMITER_NAME) ==
                0) {
            return true;
        }
    }
    return false;
}

/* A RequestRateLimiter's conf; NULL after reporting why there is none. */
struct rate_limit_conf *
load_rate_limiter(struct loader *ld, yaml_node_t *node,
                  const struct load_path *path, const struct route *route)
{
    struct long_form lf = {NULL, NULL};
    const struct load_path *sub;

    if (node->type == YAML_SCALAR_NODE) {
        /* Its args are nested (tiers, a limiter from limiters:), which
         * "Name=a, b" cannot say. */
        report(ld, node, path,
               "RequestRateLimiter has no shortcut form: write \"name: "
               "RequestRateLimiter\" with \"args: {key: ip, limiter: "
               "NAME}\"");
        return NULL;
    }
    if (load_fields(ld, node, path, &load_long_form_table, &lf) != LOAD_OK) {
        return NULL;
    }
    if (lf.args == NULL) {
        report(ld, node, path,
               "RequestRateLimiter: missing args (a key and a limiter, or "
               "tiers)");
        return NULL;
    }
    sub = PATH_KEY(path, "args");
    return parse_rl_args(ld, lf.args, sub, route);
}
