#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <yaml.h>

#include "headers.h"
#include "log.h"
#include "ratekey.h"
#include "units.h"
#include "xmalloc.h"

#define NELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* Names longer than this get no "did you mean" (and cost no time). */
#define SUGGEST_MAX 64

/* Lengths of what goes into every Redis key (ratekey.h). */
#define KEY_PREFIX_MAX 64
#define LIMITER_NAME_MAX 64
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

/*
 * Every product of a count and a window (unit-milliseconds) stays below
 * this, so that the Lua scripts' doubles stay exact (algo.h).
 */
#define RULE_PRODUCT_MAX (1ULL << 50)

/* The filter config.c builds itself (parse_filters()). */
#define RATE_LIMITER_NAME "RequestRateLimiter"

/* One error, kept with its position so that the list can be put in file
 * order: sections are read in table order, not in the order written. */
struct diag {
    size_t line; /* 1-based */
    size_t col;  /* 1-based */
    size_t seq;  /* order of discovery; keeps the sort stable */
    char *text;  /* "file:line:col: path: what"; owned */
};

/* State of one config_parse() call; never outlives it. */
struct loader {
    const char *name;     /* the file as named in messages; borrowed */
    const char *text;     /* the input, for reader-error positions */
    size_t len;           /* bytes in 'text' */
    yaml_document_t *doc; /* the document being read; borrowed */
    struct config *cfg;   /* being built; freed if any error */
    struct diag *diags;   /* errors found so far; owned */
    size_t ndiags;        /* entries in 'diags' */
    size_t cap;           /* allocated entries in 'diags' */
};

struct field;

/*
 * Reads 'node', the value of the key 'f', into the struct at 'base'
 * (f->offset says where). Reports its own errors; 'path' names the value
 * in them.
 */
typedef void field_parse_cb(struct loader *ld, yaml_node_t *node,
                            const struct field *f, void *base,
                            const char *path);

/* One key of a mapping; each section is a table of these. */
struct field {
    const char *key;       /* must stay the first member: see table_name() */
    field_parse_cb *parse; /* reads the value */
    size_t offset;         /* of the value in the struct being filled */
    uint64_t min;          /* numbers: least value accepted */
    uint64_t max;          /* numbers: greatest value accepted; 0: none */
    bool required;         /* "path.key: required" when absent */
};

/* What a route's "predicates:" or "filters:" list holds. */
struct kind_table {
    const char *noun;                            /* "predicate" */
    const struct kind_spec *(*specs)(size_t *n); /* the module's table */
    int (*init)(void *obj, const struct kind_spec *spec,
                const char *const *args, size_t nargs, char *err,
                size_t errlen);     /* builds one element */
    size_t size;                    /* of one element */
    const struct kind_table *other; /* for "X is a filter" */
    const char *extra;              /* a kind built here rather than by
                                       the module, or NULL: known to the
                                       suggestions all the same */
};

/* Arguments of one predicate or filter, in shortcut order. */
struct arglist {
    const char **v; /* borrowed from 'buf' or the document */
    size_t n;       /* arguments in 'v' */
    size_t cap;     /* allocated entries in 'v' */
    char *buf;      /* the shortcut text, cut in place; owned */
};

/* The names of these tables are found by the same code (table_name()). */
_Static_assert(offsetof(struct field, key) == 0, "key first");
_Static_assert(offsetof(struct kind_spec, name) == 0, "name first");
_Static_assert(offsetof(struct arg_spec, name) == 0, "name first");

/* ------------------------------------------------------------------ */
/* Errors                                                              */

void
config_errors_init(struct config_errors *e)
{
    e->v = NULL;
    e->n = 0;
    e->cap = 0;
}

void
config_errors_deinit(struct config_errors *e)
{
    for (size_t i = 0; i < e->n; i++) {
        free(e->v[i]);
    }
    free(e->v);
    config_errors_init(e);
}

/* Takes ownership of 's'. A NULL list means the caller wants no details. */
static void
errors_push(struct config_errors *e, char *s)
{
    if (e == NULL) {
        free(s);
        return;
    }
    e->v = xgrow(e->v, &e->cap, e->n + 1, sizeof(*e->v));
    e->v[e->n++] = s;
}

/* Takes ownership of 'text'. */
static void
add_diag(struct loader *ld, size_t line, size_t col, char *text)
{
    struct diag *d;

    ld->diags = xgrow(ld->diags, &ld->cap, ld->ndiags + 1, sizeof(*d));
    d = &ld->diags[ld->ndiags];
    d->line = line;
    d->col = col;
    d->seq = ld->ndiags;
    d->text = text;
    ld->ndiags++;
}

static void report_at(struct loader *ld, yaml_mark_t mark, const char *path,
                      const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void
report_at(struct loader *ld, yaml_mark_t mark, const char *path,
          const char *fmt, ...)
{
    size_t line = mark.line + 1;
    size_t col = mark.column + 1;
    va_list ap;
    char *msg;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        abort();
    }
    msg = xmalloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(msg, (size_t)n + 1, fmt, ap);
    va_end(ap);
    if (path[0] != '\0') {
        add_diag(
            ld, line, col,
            xasprintf("%s:%zu:%zu: %s: %s", ld->name, line, col, path, msg));
    } else {
        add_diag(ld, line, col,
                 xasprintf("%s:%zu:%zu: %s", ld->name, line, col, msg));
    }
    free(msg);
}

#define report(ld, node, path, ...)                                            \
    report_at((ld), (node)->start_mark, (path), __VA_ARGS__)

static int
diag_cmp(const void *a, const void *b)
{
    const struct diag *x = a;
    const struct diag *y = b;

    if (x->line != y->line) {
        return x->line < y->line ? -1 : 1;
    }
    if (x->col != y->col) {
        return x->col < y->col ? -1 : 1;
    }
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Hands the errors over to 'errs' in file order. */
static void
flush_diags(struct loader *ld, struct config_errors *errs)
{
    qsort(ld->diags, ld->ndiags, sizeof(*ld->diags), diag_cmp);
    for (size_t i = 0; i < ld->ndiags; i++) {
        errors_push(errs, ld->diags[i].text);
    }
    free(ld->diags);
    ld->diags = NULL;
    ld->ndiags = 0;
}

/* ------------------------------------------------------------------ */
/* Suggestions                                                         */

/* Levenshtein distance, ignoring case: "path" is one step from "Path". */
static size_t
edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a);
    size_t lb = strlen(b);
    size_t row[SUGGEST_MAX + 1];

    if (la > SUGGEST_MAX || lb > SUGGEST_MAX) {
        return SIZE_MAX;
    }
    for (size_t j = 0; j <= lb; j++) {
        row[j] = j;
    }
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];

        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t cost = tolower((unsigned char)a[i - 1]) !=
                          tolower((unsigned char)b[j - 1]);
            size_t best = diag + cost;

            if (up + 1 < best) {
                best = up + 1;
            }
            if (row[j - 1] + 1 < best) {
                best = row[j - 1] + 1;
            }
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/*
 * The i-th name of a table of fields, kind_specs or arg_specs: each starts
 * with its name (checked by the _Static_asserts above), so one routine
 * serves all three.
 */
static const char *
table_name(const void *table, size_t stride, size_t i)
{
    const char *const *name =
        (const char *const *)(const void *)((const char *)table + i * stride);

    return *name;
}

/* "a, b, c" from a table of fields, kind_specs or arg_specs. */
static char *
join_names(const void *table, size_t n, size_t stride)
{
    size_t len = 1;
    char *s;
    char *p;

    for (size_t i = 0; i < n; i++) {
        len += strlen(table_name(table, stride, i)) + 2;
    }
    s = xmalloc(len);
    p = s;
    *p = '\0';
    for (size_t i = 0; i < n; i++) {
        const char *name = table_name(table, stride, i);
        size_t m = strlen(name);

        if (i > 0) {
            memcpy(p, ", ", 2);
            p += 2;
        }
        memcpy(p, name, m + 1);
        p += m;
    }
    return s;
}

/*
 * "(did you mean "listen"?)" when one name is close to 'word' (at most two
 * edits, and fewer than half the letters, so that "ab" does not suggest
 * "id"), with its index in '*suggested' if that is not NULL; otherwise
 * "(known: a, b, c)". The caller frees the result.
 */
static char *
alternatives(const char *word, const void *table, size_t n, size_t stride,
             size_t *suggested)
{
    const char *best = NULL;
    size_t best_d = SIZE_MAX;
    char *names;
    char *s;

    for (size_t i = 0; i < n; i++) {
        const char *name = table_name(table, stride, i);
        size_t d = edit_distance(word, name);
        size_t longest =
            strlen(word) > strlen(name) ? strlen(word) : strlen(name);

        if (d <= 2 && 2 * d < longest && d < best_d) {
            best = name;
            best_d = d;
            if (suggested != NULL) {
                *suggested = i;
            }
        }
    }
    if (best != NULL) {
        return xasprintf("(did you mean \"%s\"?)", best);
    }
    names = join_names(table, n, stride);
    s = xasprintf("(known: %s)", n > 0 ? names : "none");
    free(names);
    return s;
}

/* ------------------------------------------------------------------ */
/* Nodes                                                               */

static char *
child_path(const char *parent, const char *key)
{
    if (parent[0] == '\0') {
        return xstrdup(key);
    }
    return xasprintf("%s.%s", parent, key);
}

static char *
index_path(const char *parent, size_t i)
{
    return xasprintf("%s[%zu]", parent, i);
}

/* YAML 1.1 nulls: "key:" with nothing after it, "~", "null". */
static bool
is_null(const yaml_node_t *node)
{
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL"};
    const char *v;

    if (node->type != YAML_SCALAR_NODE ||
        node->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) {
        return false;
    }
    v = (const char *)node->data.scalar.value;
    for (size_t i = 0; i < NELEMS(nulls); i++) {
        if (strcmp(v, nulls[i]) == 0) {
            return true;
        }
    }
    return false;
}

static const char *
node_desc(const yaml_node_t *node)
{
    if (is_null(node)) {
        return "nothing";
    }
    switch (node->type) {
    case YAML_MAPPING_NODE:
        return "a mapping";
    case YAML_SEQUENCE_NODE:
        return "a sequence";
    default:
        return "a scalar";
    }
}

static yaml_node_t *
node_at(struct loader *ld, int index)
{
    return yaml_document_get_node(ld->doc, index);
}

/* The text of a scalar, or NULL after reporting why there is none. */
static const char *
scalar_value(struct loader *ld, yaml_node_t *node, const char *path)
{
    const char *v;

    if (node->type != YAML_SCALAR_NODE) {
        report(ld, node, path, "expected a scalar, got %s", node_desc(node));
        return NULL;
    }
    if (is_null(node)) {
        report(ld, node, path, "missing value");
        return NULL;
    }
    v = (const char *)node->data.scalar.value;
    /* "\0" in a double-quoted scalar would silently cut the value. */
    if (strlen(v) != node->data.scalar.length) {
        report(ld, node, path, "contains a NUL character");
        return NULL;
    }
    return v;
}

/*
 * True for a sequence. A null counts as an empty one ("filters:" with
 * nothing under it); anything else is reported.
 */
static bool
expect_sequence(struct loader *ld, yaml_node_t *node, const char *path)
{
    if (node->type == YAML_SEQUENCE_NODE || is_null(node)) {
        return true;
    }
    report(ld, node, path, "expected a sequence, got %s", node_desc(node));
    return false;
}

static size_t
sequence_length(const yaml_node_t *node)
{
    if (node->type != YAML_SEQUENCE_NODE) {
        return 0;
    }
    return (size_t)(node->data.sequence.items.top -
                    node->data.sequence.items.start);
}

static yaml_node_t *
sequence_item(struct loader *ld, const yaml_node_t *node, size_t i)
{
    return node_at(ld, node->data.sequence.items.start[i]);
}

/*
 * Walks the mapping 'node' against 'fields': reports keys that are
 * unknown, duplicated or not scalars, then parses each known key in table
 * order (so a later section may rely on an earlier one) and reports the
 * required ones that are absent. A null is an empty mapping ("admin:"
 * alone turns the admin listener on with its defaults). Returns false when
 * this mapping's own keys had errors.
 */
static bool
parse_fields(struct loader *ld, yaml_node_t *node, const char *path,
             const struct field *fields, size_t nfields, void *base)
{
    yaml_node_t **found;
    yaml_node_t **found_key;
    bool *suggested;
    size_t before = ld->ndiags;

    if (node->type != YAML_MAPPING_NODE && !is_null(node)) {
        report(ld, node, path, "expected a mapping, got %s", node_desc(node));
        return false;
    }
    found = xcalloc(nfields, sizeof(*found));
    found_key = xcalloc(nfields, sizeof(*found_key));
    suggested = xcalloc(nfields, sizeof(*suggested));
    if (node->type == YAML_MAPPING_NODE) {
        for (yaml_node_pair_t *p = node->data.mapping.pairs.start;
             p < node->data.mapping.pairs.top; p++) {
            yaml_node_t *k = node_at(ld, p->key);
            const char *key;
            size_t i;

            if (k->type != YAML_SCALAR_NODE) {
                report(ld, k, path, "expected a scalar key, got %s",
                       node_desc(k));
                continue;
            }
            key = (const char *)k->data.scalar.value;
            for (i = 0; i < nfields; i++) {
                if (strcmp(key, fields[i].key) == 0) {
                    break;
                }
            }
            if (i == nfields) {
                size_t near = SIZE_MAX;
                char *alt =
                    alternatives(key, fields, nfields, sizeof(*fields), &near);

                report(ld, k, path, "unknown key \"%s\" %s", key, alt);
                free(alt);
                if (near != SIZE_MAX) {
                    suggested[near] = true;
                }
            } else if (found[i] != NULL) {
                report(ld, k, path, "duplicate key \"%s\" (first at line %zu)",
                       key, (size_t)found_key[i]->start_mark.line + 1);
            } else {
                found[i] = node_at(ld, p->value);
                found_key[i] = k;
            }
        }
    }
    for (size_t i = 0; i < nfields; i++) {
        char *sub = child_path(path, fields[i].key);

        if (found[i] != NULL) {
            fields[i].parse(ld, found[i], &fields[i], base, sub);
        } else if (fields[i].required && !suggested[i]) {
            /* "url:" for "uri:" is one mistake, reported once. */
            report(ld, node, sub, "required");
        }
        free(sub);
    }
    free(found);
    free(found_key);
    free(suggested);
    return ld->ndiags == before;
}

/* ------------------------------------------------------------------ */
/* Scalar syntaxes                                                     */

static void *
field_ptr(void *base, const struct field *f)
{
    return (char *)base + f->offset;
}

/* Plain decimal, no sign or spaces, at most 'max'. */
static int
parse_decimal(const char *s, size_t n, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;

    if (n == 0) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return -1;
        }
        uint64_t d = (uint64_t)(s[i] - '0');

        if (v > (max - d) / 10) {
            return -1;
        }
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

static int
parse_port(const char *s, size_t n, uint16_t *port)
{
    uint64_t v;

    if (parse_decimal(s, n, 65535, &v) < 0 || v == 0) {
        return -1;
    }
    *port = (uint16_t)v;
    return 0;
}

/* Letters, digits, '.', '-' and '_': names and IPv4 literals. */
static bool
valid_hostname(const char *s, size_t n)
{
    if (n == 0) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        if (!isalnum(c) && c != '.' && c != '-' && c != '_') {
            return false;
        }
    }
    return true;
}

static bool
valid_ipv6(const char *s, size_t n)
{
    char buf[64];
    struct netaddr a;

    if (n == 0 || n >= sizeof(buf)) {
        return false;
    }
    memcpy(buf, s, n);
    buf[n] = '\0';
    return netaddr_parse(buf, &a) == 0 && a.family == AF_INET6;
}

/*
 * Splits "host[:port]" or "[v6][:port]" (s, n). Stores the host without
 * brackets in '*host' (the caller frees it) and the port, if written, in
 * '*port'. Returns NULL, or why the text is wrong.
 */
static const char *
split_host_port(const char *s, size_t n, bool need_port, char **host,
                uint16_t *port)
{
    const char *end = s + n;
    const char *h = s;
    const char *colon;
    size_t hlen;

    if (n > 0 && s[0] == '[') {
        const char *close = memchr(s, ']', n);

        if (close == NULL) {
            return "missing ']'";
        }
        h = s + 1;
        hlen = (size_t)(close - h);
        if (!valid_ipv6(h, hlen)) {
            return "bad IPv6 address";
        }
        if (close + 1 == end) {
            colon = NULL;
        } else if (close[1] == ':') {
            colon = close + 1;
        } else {
            return "unexpected text after ']'";
        }
    } else {
        colon = memchr(s, ':', n);
        if (colon != NULL &&
            memchr(colon + 1, ':', (size_t)(end - colon - 1)) != NULL) {
            return "an IPv6 address must be in brackets";
        }
        hlen = colon != NULL ? (size_t)(colon - s) : n;
        if (hlen == 0) {
            return "missing host";
        }
        if (!valid_hostname(s, hlen)) {
            return "bad host name";
        }
    }
    if (colon != NULL) {
        if (parse_port(colon + 1, (size_t)(end - colon - 1), port) < 0) {
            return "the port must be from 1 to 65535";
        }
    } else if (need_port) {
        return "missing port (expected host:port or [ipv6]:port)";
    }
    *host = xstrndup(h, hlen);
    return NULL;
}

static int
hex_value(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/* Decodes %XX in (s, n) into a new string; NULL on a bad or NUL escape. */
static char *
percent_decode(const char *s, size_t n)
{
    char *out = xmalloc(n + 1);
    size_t o = 0;

    for (size_t i = 0; i < n; i++) {
        if (s[i] != '%') {
            out[o++] = s[i];
            continue;
        }
        if (i + 2 >= n) {
            free(out);
            return NULL;
        }
        {
            int hi = hex_value(s[i + 1]);
            int lo = hex_value(s[i + 2]);

            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
                free(out);
                return NULL;
            }
            out[o++] = (char)(hi * 16 + lo);
            i += 2;
        }
    }
    out[o] = '\0';
    return out;
}

/* ------------------------------------------------------------------ */
/* Field parsers                                                       */

static void
parse_listen(struct loader *ld, yaml_node_t *node, const struct field *f,
             void *base, const char *path)
{
    struct listen_addr *la = field_ptr(base, f);
    const char *s = scalar_value(ld, node, path);
    const char *why;
    char *host = NULL;
    uint16_t port = 0;

    if (s == NULL) {
        return;
    }
    why = split_host_port(s, strlen(s), true, &host, &port);
    if (why != NULL) {
        report(ld, node, path, "bad listen address \"%s\": %s", s, why);
        return;
    }
    free(la->host);
    la->host = host;
    la->port = port;
}

/* An integer in [f->min, f->max]. */
static void
parse_uint(struct loader *ld, yaml_node_t *node, const struct field *f,
           void *base, const char *path)
{
    unsigned *out = field_ptr(base, f);
    const char *s = scalar_value(ld, node, path);
    uint64_t v;

    if (s == NULL) {
        return;
    }
    if (parse_decimal(s, strlen(s), f->max, &v) < 0 || v < f->min) {
        report(ld, node, path,
               "bad integer \"%s\" (expected an integer from %llu to %llu)", s,
               (unsigned long long)f->min, (unsigned long long)f->max);
        return;
    }
    *out = (unsigned)v;
}

/* "auto" (stored as 0, for the user of the value to size) or an integer. */
static void
parse_uint_or_auto(struct loader *ld, yaml_node_t *node, const struct field *f,
                   void *base, const char *path)
{
    unsigned *out = field_ptr(base, f);
    const char *s = scalar_value(ld, node, path);
    uint64_t v;

    if (s == NULL) {
        return;
    }
    if (strcmp(s, "auto") == 0) {
        *out = 0;
        return;
    }
    if (parse_decimal(s, strlen(s), f->max, &v) < 0 || v < f->min) {
        report(ld, node, path,
               "bad integer \"%s\" (expected \"auto\" or an integer from "
               "%llu to %llu)",
               s, (unsigned long long)f->min, (unsigned long long)f->max);
        return;
    }
    *out = (unsigned)v;
}

/* Durations and sizes in this file only need "> 0" or a whole unit. */
static void
format_size(uint64_t bytes, char *buf, size_t len)
{
    static const char *const units[] = {"GiB", "MiB", "KiB"};
    uint64_t factor = 1024ULL * 1024 * 1024;

    for (size_t i = 0; i < NELEMS(units); i++, factor /= 1024) {
        if (bytes >= factor && bytes % factor == 0) {
            snprintf(buf, len, "%llu%s", (unsigned long long)(bytes / factor),
                     units[i]);
            return;
        }
    }
    snprintf(buf, len, "%lluB", (unsigned long long)bytes);
}

/* A duration in milliseconds, at least f->min (0 or 1). */
static void
parse_duration(struct loader *ld, yaml_node_t *node, const struct field *f,
               void *base, const char *path)
{
    uint64_t *out = field_ptr(base, f);
    const char *s = scalar_value(ld, node, path);
    uint64_t v;

    if (s == NULL) {
        return;
    }
    if (units_parse_duration(s, &v) < 0) {
        report(ld, node, path,
               "bad duration \"%s\" (expected a number and a unit: ms, s, "
               "m, h or d)",
               s);
        return;
    }
    if (v < f->min) {
        report(ld, node, path, "duration must be greater than 0, got \"%s\"",
               s);
        return;
    }
    *out = v;
}

/* A size in bytes, at least f->min. */
static void
parse_size(struct loader *ld, yaml_node_t *node, const struct field *f,
           void *base, const char *path)
{
    uint64_t *out = field_ptr(base, f);
    const char *s = scalar_value(ld, node, path);
    uint64_t v;

    if (s == NULL) {
        return;
    }
    if (units_parse_size(s, &v) < 0) {
        report(ld, node, path,
               "bad size \"%s\" (expected a number and a unit: B, KiB, MiB "
               "or GiB)",
               s);
        return;
    }
    if (v < f->min) {
        char min[32];

        format_size(f->min, min, sizeof(min));
        report(ld, node, path, "size must be at least %s, got \"%s\"", min, s);
        return;
    }
    *out = v;
}

/* Receives the value of a key whose meaning the caller decides. */
static void
store_node(struct loader *ld, yaml_node_t *node, const struct field *f,
           void *base, const char *path)
{
    (void)ld;
    (void)path;
    *(yaml_node_t **)field_ptr(base, f) = node;
}

/* A count of at least f->min (1 for limits, bursts and costs). */
static void
parse_count(struct loader *ld, yaml_node_t *node, const struct field *f,
            void *base, const char *path)
{
    uint64_t *out = field_ptr(base, f);
    const char *s = scalar_value(ld, node, path);
    uint64_t v;

    if (s == NULL) {
        return;
    }
    if (parse_decimal(s, strlen(s), UINT64_MAX, &v) < 0 || v < f->min) {
        report(ld, node, path,
               "bad integer \"%s\" (expected a whole number of at least "
               "%llu)",
               s, (unsigned long long)f->min);
        return;
    }
    *out = v;
}

/* "10/s" into a limit_rule's limit and window_ms ('base' is the rule). */
static void
parse_rate(struct loader *ld, yaml_node_t *node, const struct field *f,
           void *base, const char *path)
{
    struct limit_rule *rule = base;
    const char *s = scalar_value(ld, node, path);
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

/* YAML 1.1's spellings, as Spring's SnakeYAML reads them. */
static int
bool_value(const char *s, bool *out)
{
    static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes",
                                      "YES",  "on",   "On",   "ON"};
    static const char *const no[] = {"false", "False", "FALSE", "no", "No",
                                     "NO",    "off",   "Off",   "OFF"};

    for (size_t i = 0; i < NELEMS(yes); i++) {
        if (strcmp(s, yes[i]) == 0) {
            *out = true;
            return 0;
        }
    }
    for (size_t i = 0; i < NELEMS(no); i++) {
        if (strcmp(s, no[i]) == 0) {
            *out = false;
            return 0;
        }
    }
    return -1;
}

static void
parse_bool(struct loader *ld, yaml_node_t *node, const struct field *f,
           void *base, const char *path)
{
    bool *out = field_ptr(base, f);
    const char *s = scalar_value(ld, node, path);

    if (s != NULL && bool_value(s, out) < 0) {
        report(ld, node, path, "bad boolean \"%s\" (expected true or false)",
               s);
    }
}

/* A header name that replaces a default (identity:). */
static void
parse_header_name(struct loader *ld, yaml_node_t *node, const struct field *f,
                  void *base, const char *path)
{
    char **out = field_ptr(base, f);
    const char *s = scalar_value(ld, node, path);

    if (s == NULL) {
        return;
    }
    if (!headers_valid_name(s)) {
        report(ld, node, path,
               "bad header name \"%s\" (expected letters, digits and "
               "!#$%%&'*+-.^_`|~)",
               s);
        return;
    }
    free(*out);
    *out = xstrdup(s);
}

/*
 * Every Redis key starts with the prefix. A '{' in it would become the
 * Redis Cluster hash tag of every key, and a space or control character
 * has no business in a key name.
 */
static void
parse_key_prefix(struct loader *ld, yaml_node_t *node, const struct field *f,
                 void *base, const char *path)
{
    char **out = field_ptr(base, f);
    const char *s = scalar_value(ld, node, path);

    if (s == NULL) {
        return;
    }
    if (strlen(s) > KEY_PREFIX_MAX) {
        report(ld, node, path, "key prefix is longer than %d bytes",
               KEY_PREFIX_MAX);
        return;
    }
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p <= 0x20 || *p == 0x7f || *p == '{' || *p == '}') {
            report(ld, node, path,
                   "bad key prefix \"%s\" (no braces, spaces or control "
                   "characters)",
                   s);
            return;
        }
    }
    free(*out);
    *out = xstrdup(s);
}

/* One of a few words; e.g. on_redis_error: local | allow | deny. */
struct choice {
    const char *name; /* as written in gateway.yaml */
    int value;        /* the enum it stands for */
};

/* "a, b or c". */
static char *
choice_list(const struct choice *c, size_t n)
{
    char *s = xstrdup(c[0].name);

    for (size_t i = 1; i < n; i++) {
        char *t = xasprintf("%s%s%s", s, i + 1 < n ? ", " : " or ", c[i].name);

        free(s);
        s = t;
    }
    return s;
}

/* Stores the value of the word in '*out'; false after reporting. */
static bool
parse_choice(struct loader *ld, yaml_node_t *node, const char *path,
             const char *what, const struct choice *c, size_t n, int *out)
{
    const char *s = scalar_value(ld, node, path);
    char *list;

    if (s == NULL) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (strcmp(s, c[i].name) == 0) {
            *out = c[i].value;
            return true;
        }
    }
    list = choice_list(c, n);
    report(ld, node, path, "bad %s \"%s\" (expected %s)", what, s, list);
    free(list);
    return false;
}

static void
parse_log_level(struct loader *ld, yaml_node_t *node, const struct field *f,
                void *base, const char *path)
{
    int *out = field_ptr(base, f);
    const char *s = scalar_value(ld, node, path);
    enum log_level level;

    if (s == NULL) {
        return;
    }
    if (log_parse_level(s, &level) < 0) {
        report(ld, node, path,
               "bad log level \"%s\" (expected debug, info, warn or error)", s);
        return;
    }
    *out = (int)level;
}

/* log.access: where access-log lines go. */
static void
parse_access_log(struct loader *ld, yaml_node_t *node, const struct field *f,
                 void *base, const char *path)
{
    char **out = field_ptr(base, f);
    const char *s = scalar_value(ld, node, path);

    if (s == NULL) {
        return;
    }
    if (s[0] == '\0') {
        report(ld, node, path,
               "empty access log (expected stdout, -, off or a file path)");
        return;
    }
    free(*out);
    /* One spelling of stdout, so that readers of the field check one. */
    *out = xstrdup(strcmp(s, "stdout") == 0 ? "-" : s);
}

/* alternatives() reads the names of a table of choices. */
_Static_assert(offsetof(struct choice, name) == 0, "name first");

static const struct choice access_format_choices[] = {
    {"text", ACCESSLOG_TEXT},
    {"json", ACCESSLOG_JSON},
};

/* log.access_format: a near miss ("jsn") gets a suggestion. */
static void
parse_access_format(struct loader *ld, yaml_node_t *node, const struct field *f,
                    void *base, const char *path)
{
    const struct choice *c = access_format_choices;
    size_t n = NELEMS(access_format_choices);
    int *out = field_ptr(base, f);
    const char *s = scalar_value(ld, node, path);
    size_t near = SIZE_MAX;
    char *alt;
    char *list;

    if (s == NULL) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (strcmp(s, c[i].name) == 0) {
            *out = c[i].value;
            return;
        }
    }
    alt = alternatives(s, c, n, sizeof(*c), &near);
    list = choice_list(c, n);
    if (near != SIZE_MAX) {
        report(ld, node, path, "bad access format \"%s\" %s", s, alt);
    } else {
        report(ld, node, path, "bad access format \"%s\" (expected %s)", s,
               list);
    }
    free(alt);
    free(list);
}

static void
parse_trusted_proxies(struct loader *ld, yaml_node_t *node,
                      const struct field *f, void *base, const char *path)
{
    struct server_conf *server = base;
    size_t n = sequence_length(node);

    (void)f;
    if (!expect_sequence(ld, node, path)) {
        return;
    }
    server->trusted_proxies = xcalloc(n, sizeof(struct cidr));
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *item = sequence_item(ld, node, i);
        char *sub = index_path(path, i);
        const char *s = scalar_value(ld, item, sub);

        if (s != NULL &&
            netaddr_parse_cidr(s, &server->trusted_proxies[i]) < 0) {
            report(ld, item, sub,
                   "bad CIDR \"%s\" (expected an address, or address/prefix "
                   "with no bits set past the prefix)",
                   s);
        }
        free(sub);
    }
    server->ntrusted_proxies = n;
}

/*
 * redis://[user[:password]@]host[:port][/db]. The URL is not quoted in
 * messages: it may hold a password, and errors end up in logs.
 */
static const char *
split_redis_url(const char *s, struct redis_conf *r)
{
    const char *hp;
    const char *at;
    const char *slash;
    const char *why;
    uint64_t db = 0;

    if (strncasecmp(s, "rediss://", 9) == 0) {
        return "TLS (rediss://) is not supported";
    }
    if (strncasecmp(s, "redis://", 8) != 0) {
        return "expected redis://[user[:password]@]host[:port][/db]";
    }
    hp = s + 8;
    /* The last '@': a password with a raw '@' or '/' still works. */
    at = strrchr(hp, '@');
    if (at != NULL) {
        const char *colon = memchr(hp, ':', (size_t)(at - hp));
        size_t ulen = colon != NULL ? (size_t)(colon - hp) : (size_t)(at - hp);

        if (ulen > 0) {
            r->user = percent_decode(hp, ulen);
            if (r->user == NULL) {
                return "bad percent-encoding in the user name";
            }
        }
        if (colon != NULL && colon + 1 < at) {
            r->password = percent_decode(colon + 1, (size_t)(at - colon - 1));
            if (r->password == NULL) {
                return "bad percent-encoding in the password";
            }
        }
        hp = at + 1;
    }
    slash = strchr(hp, '/');
    r->port = 6379;
    why = split_host_port(hp, slash != NULL ? (size_t)(slash - hp) : strlen(hp),
                          false, &r->host, &r->port);
    if (why != NULL) {
        return why;
    }
    if (slash != NULL && slash[1] != '\0' &&
        parse_decimal(slash + 1, strlen(slash + 1), 1000000, &db) < 0) {
        return "bad database number";
    }
    r->db = (unsigned)db;
    return NULL;
}

static void
parse_redis_url(struct loader *ld, yaml_node_t *node, const struct field *f,
                void *base, const char *path)
{
    struct redis_conf *r = base;
    const char *s = scalar_value(ld, node, path);
    const char *why;

    (void)f;
    if (s == NULL) {
        return;
    }
    why = split_redis_url(s, r);
    if (why != NULL) {
        report(ld, node, path, "bad redis url: %s", why);
    }
}

/* ------------------------------------------------------------------ */
/* Limiters                                                            */

/* Letters, digits, '_', '.' and '-': route ids, limiter and scope names,
 * all of which end up in Redis keys. */
static bool
valid_name(const char *s)
{
    if (*s == '\0') {
        return false;
    }
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;

        if (!isalnum(c) && c != '_' && c != '.' && c != '-') {
            return false;
        }
    }
    return true;
}

/* The keys of one limiter; what they mean depends on the algorithm. */
struct limiter_form {
    yaml_node_t *algorithm; /* borrowed, like every node here */
    yaml_node_t *limit;     /* windows: units per window */
    yaml_node_t *window;    /* windows: the window */
    yaml_node_t *rate;      /* buckets: "N/period" */
    yaml_node_t *burst;     /* buckets: capacity */
    yaml_node_t *rules;     /* several rules instead of the four above */
    yaml_node_t *mode;      /* deny | delay */
    yaml_node_t *max_delay; /* delay mode: longest hold */
};

static const struct field limiter_fields[] = {
    {.key = "algorithm",
     .parse = store_node,
     .offset = offsetof(struct limiter_form, algorithm),
     .required = true},
    {.key = "limit",
     .parse = store_node,
     .offset = offsetof(struct limiter_form, limit)},
    {.key = "window",
     .parse = store_node,
     .offset = offsetof(struct limiter_form, window)},
    {.key = "rate",
     .parse = store_node,
     .offset = offsetof(struct limiter_form, rate)},
    {.key = "burst",
     .parse = store_node,
     .offset = offsetof(struct limiter_form, burst)},
    {.key = "rules",
     .parse = store_node,
     .offset = offsetof(struct limiter_form, rules)},
    {.key = "mode",
     .parse = store_node,
     .offset = offsetof(struct limiter_form, mode)},
    {.key = "max_delay",
     .parse = store_node,
     .offset = offsetof(struct limiter_form, max_delay)},
};

/* A rule of a window algorithm: at most 'limit' per 'window'. */
static const struct field window_rule_fields[] = {
    {.key = "limit",
     .parse = parse_count,
     .offset = offsetof(struct limit_rule, limit),
     .min = 1,
     .required = true},
    {.key = "window",
     .parse = parse_duration,
     .offset = offsetof(struct limit_rule, window_ms),
     .min = 1,
     .required = true},
};

/* A rule of a bucket algorithm: refill 'rate', hold at most 'burst'. */
static const struct field bucket_rule_fields[] = {
    {.key = "rate", .parse = parse_rate, .required = true},
    {.key = "burst",
     .parse = parse_count,
     .offset = offsetof(struct limit_rule, burst),
     .min = 1},
};

static const struct choice mode_choices[] = {
    {"deny", 0},
    {"delay", 1},
};

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
check_rule_size(struct loader *ld, yaml_node_t *node, const char *path,
                const struct limit_rule *r)
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

/* One rule from the keys 'fields' names; burst defaults as limit.h says. */
static bool
parse_rule(struct loader *ld, yaml_node_t *node, const char *path, bool bucket,
           struct limit_rule *r)
{
    const struct field *fields =
        bucket ? bucket_rule_fields : window_rule_fields;
    size_t before = ld->ndiags;

    memset(r, 0, sizeof(*r));
    parse_fields(ld, node, path, fields, 2, r);
    if (ld->ndiags != before) {
        return false;
    }
    if (!bucket || r->burst == 0) {
        r->burst = r->limit;
    }
    return check_rule_size(ld, node, path, r);
}

/* The single-rule form: the rule's keys sit in the limiter itself. */
static bool
parse_inline_rule(struct loader *ld, yaml_node_t *node, const char *path,
                  const struct limiter_form *lf, bool bucket,
                  struct limit_rule *r)
{
    const struct field *fields =
        bucket ? bucket_rule_fields : window_rule_fields;
    yaml_node_t *values[2];
    size_t before = ld->ndiags;

    values[0] = bucket ? lf->rate : lf->limit;
    values[1] = bucket ? lf->burst : lf->window;
    memset(r, 0, sizeof(*r));
    for (size_t i = 0; i < 2; i++) {
        char *sub = child_path(path, fields[i].key);

        if (values[i] != NULL) {
            fields[i].parse(ld, values[i], &fields[i], r, sub);
        } else if (fields[i].required) {
            report(ld, node, sub, "required");
        }
        free(sub);
    }
    if (ld->ndiags != before) {
        return false;
    }
    if (!bucket || r->burst == 0) {
        r->burst = r->limit;
    }
    return check_rule_size(ld, node, path, r);
}

/* "rules: [...]": one to LIMIT_MAX_RULES rules. */
static bool
parse_rule_list(struct loader *ld, yaml_node_t *node, const char *path,
                bool bucket, struct limiter_def *def)
{
    size_t n = sequence_length(node);
    bool ok = true;

    if (node->type != YAML_SEQUENCE_NODE) {
        report(ld, node, path, "expected a sequence, got %s", node_desc(node));
        return false;
    }
    if (n == 0 || n > LIMIT_MAX_RULES) {
        report(ld, node, path, "expected 1 to %d rules, got %zu",
               LIMIT_MAX_RULES, n);
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char *sub = index_path(path, i);

        ok = parse_rule(ld, sequence_item(ld, node, i), sub, bucket,
                        &def->rules[i]) &&
             ok;
        free(sub);
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
 * The tag hashes everything that shapes the stored state, and nothing
 * else (not the name): a changed rule must not read state written under
 * the old one, and an unchanged limiter keeps its state across reloads.
 */
static void
compute_tag(struct limiter_def *def)
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
    snprintf(def->tag, sizeof(def->tag), "%08x", (unsigned)h);
}

static bool
parse_algorithm(struct loader *ld, yaml_node_t *node, const char *path,
                enum limit_algorithm *out)
{
    const char *names[LIMIT_ALGORITHM_COUNT];
    const char *s = scalar_value(ld, node, path);
    char *alt;

    if (s == NULL) {
        return false;
    }
    if (limit_algorithm_parse(s, out) == 0) {
        return true;
    }
    for (size_t i = 0; i < LIMIT_ALGORITHM_COUNT; i++) {
        names[i] = limit_algorithm_name((enum limit_algorithm)i);
    }
    alt = alternatives(s, names, LIMIT_ALGORITHM_COUNT, sizeof(*names), NULL);
    report(ld, node, path, "unknown algorithm \"%s\" %s", s, alt);
    free(alt);
    return false;
}

/* Keys that belong to the other family of algorithms. */
static bool
check_family_keys(struct loader *ld, const struct limiter_form *lf,
                  const char *path, enum limit_algorithm a)
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
        char *sub;

        if (wrong[i] == NULL) {
            continue;
        }
        sub = child_path(path, keys[i]);
        if (limit_algorithm_is_bucket(a)) {
            report(ld, wrong[i], sub,
                   "%s takes rate and burst, not limit and window", name);
        } else {
            report(ld, wrong[i], sub,
                   "%s takes limit and window; rate and burst are for "
                   "token_bucket, leaky_bucket and gcra",
                   name);
        }
        free(sub);
        ok = false;
    }
    return ok;
}

/* mode: and max_delay:. */
static bool
parse_mode(struct loader *ld, yaml_node_t *node, const struct limiter_form *lf,
           const char *path, struct limiter_def *def)
{
    struct field delay_field = {.parse = parse_duration, .min = 1};
    size_t before = ld->ndiags;
    int delay = 0;
    char *sub;

    if (lf->mode != NULL) {
        sub = child_path(path, "mode");
        if (parse_choice(ld, lf->mode, sub, "mode", mode_choices,
                         NELEMS(mode_choices), &delay) &&
            delay && !limit_algorithm_is_bucket(def->algorithm)) {
            report(ld, lf->mode, sub,
                   "mode: delay needs token_bucket, leaky_bucket or gcra, "
                   "not %s",
                   limit_algorithm_name(def->algorithm));
        }
        free(sub);
    }
    if (ld->ndiags != before) {
        return false;
    }
    def->delay = delay != 0;
    sub = child_path(path, "max_delay");
    if (lf->max_delay == NULL && def->delay) {
        report(ld, node, sub, "required with mode: delay");
    } else if (lf->max_delay != NULL && !def->delay) {
        report(ld, lf->max_delay, sub, "only allowed with mode: delay");
    } else if (lf->max_delay != NULL) {
        parse_duration(ld, lf->max_delay, &delay_field, &def->max_delay_ms,
                       sub);
    }
    free(sub);
    return ld->ndiags == before;
}

/*
 * Builds 'def' (its name already set). On any error nrules stays 0, so
 * that a route naming this limiter reports nothing more about it.
 */
static void
parse_limiter(struct loader *ld, yaml_node_t *node, const char *path,
              struct limiter_def *def)
{
    struct limiter_form lf;
    bool bucket;
    bool ok;
    char *sub;

    memset(&lf, 0, sizeof(lf));
    if (!parse_fields(ld, node, path, limiter_fields, NELEMS(limiter_fields),
                      &lf) ||
        lf.algorithm == NULL) {
        return;
    }
    sub = child_path(path, "algorithm");
    ok = parse_algorithm(ld, lf.algorithm, sub, &def->algorithm);
    free(sub);
    if (!ok) {
        return;
    }
    bucket = limit_algorithm_is_bucket(def->algorithm);
    ok = check_family_keys(ld, &lf, path, def->algorithm);
    ok = parse_mode(ld, node, &lf, path, def) && ok;
    if (!ok) {
        return;
    }
    if (lf.rules != NULL) {
        if (lf.limit != NULL || lf.window != NULL || lf.rate != NULL ||
            lf.burst != NULL) {
            sub = child_path(path, "rules");
            report(ld, lf.rules, sub, "give either rules or %s, not both",
                   bucket ? "rate and burst" : "limit and window");
            free(sub);
            return;
        }
        sub = child_path(path, "rules");
        ok = parse_rule_list(ld, lf.rules, sub, bucket, def);
        free(sub);
    } else {
        ok = parse_inline_rule(ld, node, path, &lf, bucket, &def->rules[0]);
        def->nrules = ok ? 1 : 0;
    }
    if (!ok) {
        def->nrules = 0;
        return;
    }
    for (size_t i = 0; def->delay && i < def->nrules; i++) {
        if (!product_fits(def->max_delay_ms, def->rules[i].limit)) {
            sub = child_path(path, "max_delay");
            report(ld, lf.max_delay, sub,
                   "too large: max_delay %llu ms x limit %llu must stay "
                   "below 2^50",
                   (unsigned long long)def->max_delay_ms,
                   (unsigned long long)def->rules[i].limit);
            free(sub);
            def->nrules = 0;
            return;
        }
    }
    compute_tag(def);
}

static void
parse_limiters(struct loader *ld, yaml_node_t *node, const struct field *f,
               void *base, const char *path)
{
    struct config *cfg = base;
    size_t n;

    (void)f;
    if (is_null(node)) {
        return;
    }
    if (node->type != YAML_MAPPING_NODE) {
        report(ld, node, path, "expected a mapping, got %s", node_desc(node));
        return;
    }
    n = (size_t)(node->data.mapping.pairs.top - node->data.mapping.pairs.start);
    /* Allocated once: tiers keep pointers into this array. */
    cfg->limiters = xcalloc(n, sizeof(*cfg->limiters));
    for (yaml_node_pair_t *p = node->data.mapping.pairs.start;
         p < node->data.mapping.pairs.top; p++) {
        yaml_node_t *k = node_at(ld, p->key);
        struct limiter_def *def;
        const char *name;
        char *sub;
        bool dup = false;

        if (k->type != YAML_SCALAR_NODE) {
            report(ld, k, path, "expected a scalar key, got %s", node_desc(k));
            continue;
        }
        name = (const char *)k->data.scalar.value;
        if (!valid_name(name) || strlen(name) > LIMITER_NAME_MAX) {
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
        /* libyaml keeps both of two equal keys: the second is refused. */
        for (yaml_node_pair_t *q = node->data.mapping.pairs.start;
             q < p && !dup; q++) {
            yaml_node_t *qk = node_at(ld, q->key);

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
        sub = child_path(path, name);
        parse_limiter(ld, node_at(ld, p->value), sub, def);
        free(sub);
    }
}

/* ------------------------------------------------------------------ */
/* Routes                                                              */

static void
parse_route_id(struct loader *ld, yaml_node_t *node, const struct field *f,
               void *base, const char *path)
{
    struct route *route = base;
    const char *s = scalar_value(ld, node, path);

    (void)f;
    if (s == NULL) {
        return;
    }
    if (!valid_name(s)) {
        report(ld, node, path,
               "bad route id \"%s\" (use letters, digits, '_', '.' and '-')",
               s);
        return;
    }
    /* Routes are parsed in order, so every earlier one is complete. */
    for (const struct route *r = ld->cfg->routes; r < route; r++) {
        if (r->id != NULL && strcmp(r->id, s) == 0) {
            report(ld, node, path,
                   "duplicate route id \"%s\" (first used by routes[%zu])", s,
                   (size_t)(r - ld->cfg->routes));
            return;
        }
    }
    route->id = xstrdup(s);
}

/* Path bytes go into the request line as they are. */
static bool
valid_path_text(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        if (c <= 0x20 || c == 0x7f) {
            return false;
        }
    }
    return true;
}

static const char *
split_uri(const char *s, struct upstream_uri *u)
{
    const char *auth = s + 7;
    size_t alen = strcspn(auth, "/");
    const char *p = auth + alen;
    size_t plen = strlen(p);
    const char *why;
    bool v6;

    if (strchr(s, '?') != NULL) {
        return "a query is not allowed";
    }
    if (strchr(s, '#') != NULL) {
        return "a fragment is not allowed";
    }
    if (memchr(auth, '@', alen) != NULL) {
        return "user info is not allowed";
    }
    u->port = 80;
    why = split_host_port(auth, alen, false, &u->host, &u->port);
    if (why != NULL) {
        return why;
    }
    if (!valid_path_text(p, plen)) {
        return "the path contains a space or control character";
    }
    while (plen > 0 && p[plen - 1] == '/') {
        plen--;
    }
    u->base_path = xstrndup(p, plen);
    v6 = strchr(u->host, ':') != NULL;
    if (u->port == 80) {
        u->authority = xasprintf(v6 ? "[%s]" : "%s", u->host);
    } else {
        u->authority =
            xasprintf(v6 ? "[%s]:%u" : "%s:%u", u->host, (unsigned)u->port);
    }
    return NULL;
}

static void
parse_uri(struct loader *ld, yaml_node_t *node, const struct field *f,
          void *base, const char *path)
{
    struct route *route = base;
    const char *s = scalar_value(ld, node, path);
    const char *why;

    (void)f;
    if (s == NULL) {
        return;
    }
    if (strncasecmp(s, "https://", 8) == 0) {
        report(ld, node, path, "https upstreams are not supported");
        return;
    }
    if (strncasecmp(s, "http://", 7) != 0) {
        report(ld, node, path,
               "bad uri \"%s\": expected http://host[:port][/path]", s);
        return;
    }
    why = split_uri(s, &route->uri);
    if (why != NULL) {
        report(ld, node, path, "bad uri \"%s\": %s", s, why);
    }
}

static void
arglist_push(struct arglist *al, const char *arg)
{
    al->v = xgrow(al->v, &al->cap, al->n + 1, sizeof(*al->v));
    al->v[al->n++] = arg;
}

static void
arglist_deinit(struct arglist *al)
{
    free(al->v);
    free(al->buf);
}

static char *
trim(char *s)
{
    char *end;

    while (*s == ' ' || *s == '\t') {
        s++;
    }
    end = s + strlen(s);
    while (end > s && (end[-1] == ' ' || end[-1] == '\t')) {
        end--;
    }
    *end = '\0';
    return s;
}

/* The spec called 'name', or NULL after reporting an unknown name. */
static const struct kind_spec *
find_kind(struct loader *ld, yaml_node_t *node, const char *path,
          const struct kind_table *kt, const char *name)
{
    size_t n;
    const struct kind_spec *specs = kt->specs(&n);
    const char **names;
    char *alt;

    if (name[0] == '\0') {
        report(ld, node, path, "missing %s name", kt->noun);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (strcmp(specs[i].name, name) == 0) {
            return &specs[i];
        }
    }
    if (kt->other != NULL) {
        size_t m;
        const struct kind_spec *others = kt->other->specs(&m);
        bool other =
            kt->other->extra != NULL && strcmp(kt->other->extra, name) == 0;

        for (size_t i = 0; i < m && !other; i++) {
            other = strcmp(others[i].name, name) == 0;
        }
        if (other) {
            report(ld, node, path, "unknown %s \"%s\" (%s is a %s)", kt->noun,
                   name, name, kt->other->noun);
            return NULL;
        }
    }
    names = xcalloc(n + 1, sizeof(*names));
    for (size_t i = 0; i < n; i++) {
        names[i] = specs[i].name;
    }
    if (kt->extra != NULL) {
        names[n] = kt->extra;
    }
    alt = alternatives(name, names, n + (kt->extra != NULL), sizeof(*names),
                       NULL);
    report(ld, node, path, "unknown %s \"%s\" %s", kt->noun, name, alt);
    free(alt);
    free(names);
    return NULL;
}

static bool
last_gathers(const struct kind_spec *spec)
{
    return spec->nargs > 0 && spec->args[spec->nargs - 1].gather;
}

/*
 * Spring's shortcut "Name=a, b": the name is what precedes the first '=';
 * the rest is cut at ',' into at most nargs pieces (the last keeps its
 * commas, so "AddRequestHeader=X-A, a,b" has the value "a,b"), or into
 * every piece when the last argument gathers.
 */
static const struct kind_spec *
parse_shortcut(struct loader *ld, yaml_node_t *node, const char *path,
               const struct kind_table *kt, const char *text,
               struct arglist *al)
{
    const struct kind_spec *spec;
    char *eq;
    char *p;
    size_t max;

    al->buf = xstrdup(text);
    eq = strchr(al->buf, '=');
    if (eq != NULL) {
        *eq = '\0';
    }
    spec = find_kind(ld, node, path, kt, trim(al->buf));
    if (spec == NULL || eq == NULL) {
        return spec;
    }
    max = last_gathers(spec) ? SIZE_MAX : spec->nargs > 0 ? spec->nargs : 1;
    p = eq + 1;
    for (;;) {
        char *comma = al->n + 1 < max ? strchr(p, ',') : NULL;
        char *piece;

        if (comma != NULL) {
            *comma = '\0';
        }
        piece = trim(p);
        if (*piece == '\0') {
            report(ld, node, path, "%s: argument %zu is empty", spec->name,
                   al->n + 1);
            return NULL;
        }
        arglist_push(al, piece);
        if (comma == NULL) {
            return spec;
        }
        p = comma + 1;
    }
}

/* The keys of the long form. */
struct long_form {
    yaml_node_t *name; /* value of "name:"; borrowed */
    yaml_node_t *args; /* value of "args:" or NULL; borrowed */
};

static const struct field long_form_fields[] = {
    {.key = "name",
     .parse = store_node,
     .offset = offsetof(struct long_form, name),
     .required = true},
    {.key = "args",
     .parse = store_node,
     .offset = offsetof(struct long_form, args)},
};

/*
 * Puts the values of the long form's args (nodes[i] for spec->args[i],
 * NULL when left out) in shortcut order. Arguments are scalars, and a
 * gathering one may be a sequence of them. RequestRateLimiter, whose
 * args nest, never comes here (parse_rate_limiter()).
 */
static bool
spread_args(struct loader *ld, yaml_node_t *node, const char *path,
            const struct kind_spec *spec, yaml_node_t **nodes,
            struct arglist *al)
{
    const char *left_out = NULL;

    for (size_t i = 0; i < spec->nargs; i++) {
        const struct arg_spec *as = &spec->args[i];
        yaml_node_t *v = nodes[i];
        char *sub;
        bool ok = true;

        if (v == NULL) {
            if (!as->optional) {
                report(ld, node, path, "%s: missing argument \"%s\"",
                       spec->name, as->name);
                return false;
            }
            if (left_out == NULL) {
                left_out = as->name;
            }
            continue;
        }
        if (left_out != NULL) {
            report(ld, node, path,
                   "%s: missing argument \"%s\" (needed before \"%s\")",
                   spec->name, left_out, as->name);
            return false;
        }
        sub = xasprintf("%s.args.%s", path, as->name);
        if (as->gather && v->type == YAML_SEQUENCE_NODE) {
            for (size_t j = 0; ok && j < sequence_length(v); j++) {
                char *isub = index_path(sub, j);
                const char *s = scalar_value(ld, sequence_item(ld, v, j), isub);

                if (s != NULL) {
                    arglist_push(al, s);
                }
                ok = s != NULL;
                free(isub);
            }
        } else {
            const char *s = scalar_value(ld, v, sub);

            if (s != NULL) {
                arglist_push(al, s);
            }
            ok = s != NULL;
        }
        free(sub);
        if (!ok) {
            return false;
        }
    }
    return true;
}

/* "{name: Header, args: {header: X-Id, regexp: '\d+'}}". */
static const struct kind_spec *
parse_long_form(struct loader *ld, yaml_node_t *node, const char *path,
                const struct kind_table *kt, struct arglist *al)
{
    struct long_form lf = {NULL, NULL};
    const struct kind_spec *spec;
    struct field *fields;
    yaml_node_t **nodes;
    const char *name;
    char *sub;
    bool ok;

    if (!parse_fields(ld, node, path, long_form_fields,
                      NELEMS(long_form_fields), &lf)) {
        return NULL;
    }
    sub = child_path(path, "name");
    name = scalar_value(ld, lf.name, sub);
    free(sub);
    if (name == NULL) {
        return NULL;
    }
    spec = find_kind(ld, lf.name, path, kt, name);
    if (spec == NULL) {
        return NULL;
    }
    if (lf.args == NULL) {
        return spec;
    }
    /* The arg names become the keys of a table made for this spec, so
     * that unknown and repeated keys are caught as everywhere else. */
    fields = xcalloc(spec->nargs, sizeof(*fields));
    nodes = xcalloc(spec->nargs, sizeof(*nodes));
    for (size_t i = 0; i < spec->nargs; i++) {
        fields[i].key = spec->args[i].name;
        fields[i].parse = store_node;
        fields[i].offset = i * sizeof(*nodes);
    }
    sub = child_path(path, "args");
    ok = parse_fields(ld, lf.args, sub, fields, spec->nargs, nodes) &&
         spread_args(ld, node, path, spec, nodes, al);
    free(sub);
    free(fields);
    free(nodes);
    return ok ? spec : NULL;
}

/* "Header takes 1 to 2 arguments (header, regexp), got 3". */
static bool
check_count(struct loader *ld, yaml_node_t *node, const char *path,
            const struct kind_spec *spec, size_t n)
{
    size_t min = 0;
    size_t max = last_gathers(spec) ? SIZE_MAX : spec->nargs;
    char *names;

    for (size_t i = 0; i < spec->nargs; i++) {
        min += !spec->args[i].optional;
    }
    if (n >= min && n <= max) {
        return true;
    }
    names = join_names(spec->args, spec->nargs, sizeof(*spec->args));
    if (spec->nargs == 0) {
        report(ld, node, path, "%s takes no arguments, got %zu", spec->name, n);
    } else if (max == SIZE_MAX) {
        report(ld, node, path, "%s takes %zu or more arguments (%s), got %zu",
               spec->name, min, names, n);
    } else if (min == max) {
        report(ld, node, path, "%s takes %zu argument%s (%s), got %zu",
               spec->name, min, min == 1 ? "" : "s", names, n);
    } else {
        report(ld, node, path, "%s takes %zu to %zu arguments (%s), got %zu",
               spec->name, min, max, names, n);
    }
    free(names);
    return false;
}

/* Builds one predicate or filter in 'obj'; true when it was built. */
static bool
parse_element(struct loader *ld, yaml_node_t *node, const char *path,
              const struct kind_table *kt, void *obj)
{
    struct arglist al = {NULL, 0, 0, NULL};
    const struct kind_spec *spec = NULL;
    char err[256];
    bool ok = false;

    if (node->type == YAML_SCALAR_NODE && !is_null(node)) {
        const char *text = scalar_value(ld, node, path);

        if (text != NULL) {
            spec = parse_shortcut(ld, node, path, kt, text, &al);
        }
    } else if (node->type == YAML_MAPPING_NODE) {
        spec = parse_long_form(ld, node, path, kt, &al);
    } else {
        report(ld, node, path,
               "expected \"Name=args\" or a mapping with name and args, got "
               "%s",
               node_desc(node));
    }
    if (spec != NULL && check_count(ld, node, path, spec, al.n)) {
        err[0] = '\0';
        if (kt->init(obj, spec, al.v, al.n, err, sizeof(err)) == 0) {
            ok = true;
        } else {
            report(ld, node, path, "%s", err);
        }
    }
    arglist_deinit(&al);
    return ok;
}

/* The elements that were built, packed; '*count' of them. */
static void *
parse_list(struct loader *ld, yaml_node_t *node, const char *path,
           const struct kind_table *kt, size_t *count)
{
    size_t n = sequence_length(node);
    char *v;

    *count = 0;
    if (!expect_sequence(ld, node, path)) {
        return NULL;
    }
    v = xcalloc(n, kt->size);
    for (size_t i = 0; i < n; i++) {
        char *sub = index_path(path, i);

        if (parse_element(ld, sequence_item(ld, node, i), sub, kt,
                          v + *count * kt->size)) {
            (*count)++;
        }
        free(sub);
    }
    return v;
}

static int
init_predicate(void *obj, const struct kind_spec *spec, const char *const *args,
               size_t nargs, char *err, size_t errlen)
{
    return predicate_init(obj, spec, args, nargs, err, errlen);
}

static int
init_filter(void *obj, const struct kind_spec *spec, const char *const *args,
            size_t nargs, char *err, size_t errlen)
{
    return filter_init(obj, spec, args, nargs, err, errlen);
}

static const struct kind_table filter_kinds;

static const struct kind_table predicate_kinds = {
    .noun = "predicate",
    .specs = predicate_specs,
    .init = init_predicate,
    .size = sizeof(struct predicate),
    .other = &filter_kinds,
};

/* RequestRateLimiter is not in filter.c's table: its args are nested,
 * and parse_filters() builds it here. */
static const struct kind_table filter_kinds = {
    .noun = "filter",
    .specs = filter_specs,
    .init = init_filter,
    .size = sizeof(struct filter),
    .other = &predicate_kinds,
    .extra = RATE_LIMITER_NAME,
};

/* ------------------------------------------------------------------ */
/* RequestRateLimiter                                                  */

/* A route's RequestRateLimiter, while its args are read. */
struct rl_ctx {
    const struct config *cfg; /* limiters:, redis: already read */
    const char *scope;        /* the resolved scope; borrowed */
    uint64_t cost;            /* as read; 0 if it was wrong */
};

/* The keys of RequestRateLimiter's args. */
struct rl_form {
    yaml_node_t *key;            /* short form; borrowed, like all here */
    yaml_node_t *limiter;        /* short form */
    yaml_node_t *tiers;          /* long form */
    yaml_node_t *cost;           /* units per request */
    yaml_node_t *on_redis_error; /* local | allow | deny */
    yaml_node_t *dry_run;        /* bool */
    yaml_node_t *empty_key;      /* deny | allow */
    yaml_node_t *scope;          /* route | NAME */
    yaml_node_t *backend;        /* redis | local */
    yaml_node_t *headers;        /* ietf | legacy | both | none */
    yaml_node_t *status;         /* 400..599 */
};

#define RL_NODE(k)                                                             \
    {                                                                          \
        .key = #k, .parse = store_node, .offset = offsetof(struct rl_form, k)  \
    }

static const struct field rl_fields[] = {
    RL_NODE(key),       RL_NODE(limiter),        RL_NODE(tiers),
    RL_NODE(cost),      RL_NODE(on_redis_error), RL_NODE(dry_run),
    RL_NODE(empty_key), RL_NODE(scope),          RL_NODE(backend),
    RL_NODE(headers),   RL_NODE(status),
};

/* One entry of tiers:. */
struct tier_form {
    yaml_node_t *when;    /* {role: R} or NULL; borrowed, like all here */
    yaml_node_t *key;     /* "ip+user"... or NULL */
    yaml_node_t *limiter; /* a name from limiters:, or "none" */
};

static const struct field tier_fields[] = {
    {.key = "when",
     .parse = store_node,
     .offset = offsetof(struct tier_form, when)},
    {.key = "key",
     .parse = store_node,
     .offset = offsetof(struct tier_form, key)},
    {.key = "limiter",
     .parse = store_node,
     .offset = offsetof(struct tier_form, limiter)},
};

static const struct field when_fields[] = {
    {.key = "role", .parse = store_node, .required = true},
};

static const struct choice redis_failure_choices[] = {
    {"local", REDIS_FAILURE_LOCAL},
    {"allow", REDIS_FAILURE_ALLOW},
    {"deny", REDIS_FAILURE_DENY},
};

static const struct choice empty_key_choices[] = {
    {"deny", 0},
    {"allow", 1},
};

static const struct choice backend_choices[] = {
    {"redis", 0},
    {"local", 1},
};

static const struct choice headers_choices[] = {
    {"ietf", RL_HEADERS_IETF},
    {"legacy", RL_HEADERS_LEGACY},
    {"both", RL_HEADERS_BOTH},
    {"none", RL_HEADERS_NONE},
};

/* The kinds of key part, as written before any ':'. */
struct key_kind_name {
    const char *name;   /* must stay first: alternatives() reads it */
    enum key_kind kind; /* what it stands for */
    bool named;         /* takes ":NAME" */
};

static const struct key_kind_name key_kinds[] = {
    {"ip", KEY_IP, false},        {"user", KEY_USER, false},
    {"role", KEY_ROLE, false},    {"route", KEY_ROUTE, false},
    {"header", KEY_HEADER, true}, {"query", KEY_QUERY, true},
    {"cookie", KEY_COOKIE, true},
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
        alt = alternatives(s, key_kinds, NELEMS(key_kinds), sizeof(*key_kinds),
                           NULL);
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

/* "ip+header:X-Api-Key" into 'out'; false after reporting. */
static bool
parse_key_spec(struct loader *ld, yaml_node_t *node, const char *path,
               struct key_spec *out)
{
    const char *text = scalar_value(ld, node, path);
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
        piece = trim(p);
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
               "role, route, header:NAME, query:NAME, cookie:NAME)",
               text, err);
        key_spec_clear(out);
        return false;
    }
    return true;
}

/*
 * The limiter called by 'node': "none" leaves '*out' NULL. False after
 * reporting an unknown name.
 */
static bool
find_limiter(struct loader *ld, yaml_node_t *node, const char *path,
             const struct config *cfg, const struct limiter_def **out)
{
    const char *s = scalar_value(ld, node, path);
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
    if (cfg->nlimiters == 0) {
        report(ld, node, path,
               "unknown limiter \"%s\" (no limiters are defined under "
               "limiters:)",
               s);
        return false;
    }
    alt = alternatives(s, cfg->limiters, cfg->nlimiters, sizeof(*cfg->limiters),
                       NULL);
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

/*
 * Builds 't' from its nodes. 'node' and 'path' are the tier's, or the
 * args' for the short form. What was built stays in 't' even on an error,
 * for rate_limit_conf_free().
 */
static bool
parse_tier(struct loader *ld, yaml_node_t *node, const char *path,
           const struct tier_form *tf, const struct rl_ctx *ctx, struct tier *t)
{
    size_t before = ld->ndiags;
    char *sub;

    if (tf->when != NULL) {
        yaml_node_t *role = NULL;

        sub = child_path(path, "when");
        if (parse_fields(ld, tf->when, sub, when_fields, NELEMS(when_fields),
                         &role) &&
            role != NULL) {
            char *rsub = child_path(sub, "role");
            const char *s = scalar_value(ld, role, rsub);

            if (s != NULL && (s[0] == '\0' || !headers_valid_value(s))) {
                report(ld, role, rsub, "bad role \"%s\"", s);
            } else if (s != NULL) {
                t->when_role = xstrdup(s);
            }
            free(rsub);
        }
        free(sub);
    }
    sub = child_path(path, "limiter");
    if (tf->limiter == NULL) {
        report(ld, node, sub, "required");
    } else if (find_limiter(ld, tf->limiter, sub, ctx->cfg, &t->limiter) &&
               t->limiter != NULL && t->limiter->nrules > 0) {
        size_t rule;
        uint64_t cap = limiter_capacity(t->limiter, &rule);
        const char *what = limit_algorithm_is_bucket(t->limiter->algorithm)
                               ? "burst"
                               : "limit";

        if (ctx->cost > cap && t->limiter->nrules > 1) {
            report(ld, tf->limiter, sub,
                   "limiter \"%s\" can never admit cost %llu (%s %llu in "
                   "rules[%zu])",
                   t->limiter->name, (unsigned long long)ctx->cost, what,
                   (unsigned long long)cap, rule);
        } else if (ctx->cost > cap) {
            report(ld, tf->limiter, sub,
                   "limiter \"%s\" can never admit cost %llu (%s %llu)",
                   t->limiter->name, (unsigned long long)ctx->cost, what,
                   (unsigned long long)cap);
        }
    }
    free(sub);
    sub = child_path(path, "key");
    if (tf->key != NULL) {
        parse_key_spec(ld, tf->key, sub, &t->key);
    } else if (tf->limiter != NULL && t->limiter != NULL) {
        report(ld, node, sub, "required");
    }
    if (t->key.text != NULL && t->limiter != NULL) {
        size_t fixed = strlen(ctx->cfg->redis.key_prefix) +
                       strlen(t->limiter->name) + sizeof(t->limiter->tag) - 1 +
                       strlen(ctx->scope) + strlen(t->key.text);

        if (fixed > KEY_FIXED_MAX) {
            report(ld, tf->key, sub,
                   "the Redis key would be too long: key prefix, limiter "
                   "name, tag, scope and key take %zu bytes (at most %d)",
                   fixed, KEY_FIXED_MAX);
        }
    }
    free(sub);
    return ld->ndiags == before;
}

/* "tiers:": a non-empty sequence of mappings. */
static bool
parse_tiers(struct loader *ld, yaml_node_t *node, const char *path,
            const struct rl_ctx *ctx, struct rate_limit_conf *rl)
{
    size_t n = sequence_length(node);
    bool ok = true;

    if (node->type != YAML_SEQUENCE_NODE) {
        report(ld, node, path, "expected a sequence, got %s", node_desc(node));
        return false;
    }
    if (n == 0) {
        report(ld, node, path, "expected at least one tier");
        return false;
    }
    rl->tiers = xcalloc(n, sizeof(*rl->tiers));
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *item = sequence_item(ld, node, i);
        char *sub = index_path(path, i);
        struct tier_form tf = {NULL, NULL, NULL};
        struct tier *t = &rl->tiers[rl->ntiers++];

        t->label = xasprintf("%zu", i);
        if (parse_fields(ld, item, sub, tier_fields, NELEMS(tier_fields),
                         &tf)) {
            ok = parse_tier(ld, item, sub, &tf, ctx, t) && ok;
        } else {
            ok = false;
        }
        free(sub);
    }
    return ok;
}

/* scope: "route" (the route's id) or a name shared by routes. */
static char *
parse_scope(struct loader *ld, yaml_node_t *node, const char *path,
            const struct route *route)
{
    const char *s = node != NULL ? scalar_value(ld, node, path) : "route";

    if (s == NULL) {
        return NULL;
    }
    if (strcmp(s, "route") == 0) {
        /* A bad route id is reported on its own; "" stands in. */
        return xstrdup(route->id != NULL ? route->id : "");
    }
    if (!valid_name(s) || strlen(s) > SCOPE_NAME_MAX) {
        report(ld, node, path,
               "bad scope \"%s\" (expected \"route\", or a name of up to %d "
               "letters, digits, '_', '.' and '-')",
               s, SCOPE_NAME_MAX);
        return NULL;
    }
    return xstrdup(s);
}

/* Reads one optional word into '*out' (an int-sized enum or a bool). */
static void
read_choice(struct loader *ld, yaml_node_t *node, const char *args_path,
            const char *key, const struct choice *c, size_t n, int *out)
{
    char *sub;

    if (node == NULL) {
        return;
    }
    sub = child_path(args_path, key);
    parse_choice(ld, node, sub, key, c, n, out);
    free(sub);
}

/*
 * The args of a RequestRateLimiter on 'route' ('node' is the args
 * mapping). Returns the conf, or NULL after reporting every problem.
 */
static struct rate_limit_conf *
parse_rl_args(struct loader *ld, yaml_node_t *node, const char *path,
              const struct route *route)
{
    static const struct field cost_field = {.parse = parse_count, .min = 1};
    static const struct field status_field = {
        .parse = parse_uint, .min = 400, .max = 599};
    static const struct field dry_run_field = {.parse = parse_bool};
    struct rate_limit_conf *rl;
    struct rl_form form;
    struct rl_ctx ctx;
    size_t before = ld->ndiags;
    int failure = REDIS_FAILURE_LOCAL;
    int empty_allow = 0;
    int local = !ld->cfg->redis.enabled;
    int headers = RL_HEADERS_BOTH;
    unsigned status = 429;
    char *sub;

    memset(&form, 0, sizeof(form));
    if (!parse_fields(ld, node, path, rl_fields, NELEMS(rl_fields), &form)) {
        return NULL;
    }
    rl = xcalloc(1, sizeof(*rl));
    rl->cost = 1;
    if (form.cost != NULL) {
        size_t b = ld->ndiags;

        sub = child_path(path, "cost");
        cost_field.parse(ld, form.cost, &cost_field, &rl->cost, sub);
        free(sub);
        if (ld->ndiags != b) {
            rl->cost = 0;
        }
    }
    if (form.dry_run != NULL) {
        sub = child_path(path, "dry_run");
        dry_run_field.parse(ld, form.dry_run, &dry_run_field, &rl->dry_run,
                            sub);
        free(sub);
    }
    if (form.status != NULL) {
        sub = child_path(path, "status");
        status_field.parse(ld, form.status, &status_field, &status, sub);
        free(sub);
    }
    read_choice(ld, form.on_redis_error, path, "on_redis_error",
                redis_failure_choices, NELEMS(redis_failure_choices), &failure);
    read_choice(ld, form.empty_key, path, "empty_key", empty_key_choices,
                NELEMS(empty_key_choices), &empty_allow);
    read_choice(ld, form.backend, path, "backend", backend_choices,
                NELEMS(backend_choices), &local);
    read_choice(ld, form.headers, path, "headers", headers_choices,
                NELEMS(headers_choices), &headers);
    if (form.backend != NULL && !local && !ld->cfg->redis.enabled) {
        sub = child_path(path, "backend");
        report(ld, form.backend, sub,
               "backend: redis needs a redis: section (or use backend: "
               "local)");
        free(sub);
    }
    rl->on_redis_error = (enum redis_failure)failure;
    rl->empty_key_allow = empty_allow != 0;
    rl->local = local != 0;
    rl->headers = (enum rl_headers)headers;
    rl->deny_status = (int)status;

    sub = child_path(path, "scope");
    rl->scope = parse_scope(ld, form.scope, sub, route);
    free(sub);
    ctx.cfg = ld->cfg;
    ctx.scope = rl->scope != NULL ? rl->scope : "";
    ctx.cost = rl->cost;

    if (form.tiers != NULL && (form.key != NULL || form.limiter != NULL)) {
        sub = child_path(path, "tiers");
        report(ld, form.tiers, sub,
               "give either tiers or key and limiter, not both");
        free(sub);
    } else if (form.tiers != NULL) {
        sub = child_path(path, "tiers");
        parse_tiers(ld, form.tiers, sub, &ctx, rl);
        free(sub);
    } else if (form.key != NULL || form.limiter != NULL) {
        struct tier_form tf = {NULL, form.key, form.limiter};

        rl->tiers = xcalloc(1, sizeof(*rl->tiers));
        rl->ntiers = 1;
        rl->tiers[0].label = xstrdup("0");
        parse_tier(ld, node, path, &tf, &ctx, &rl->tiers[0]);
    } else {
        report(ld, node, path,
               "RequestRateLimiter needs a key and a limiter, or tiers");
    }
    if (ld->ndiags != before) {
        rate_limit_conf_free(rl);
        return NULL;
    }
    return rl;
}

/* True if 'node' is a RequestRateLimiter, in the long or the short form. */
static bool
is_rate_limiter(struct loader *ld, yaml_node_t *node)
{
    if (node->type == YAML_SCALAR_NODE) {
        const char *s = (const char *)node->data.scalar.value;
        size_t n = strcspn(s, "=");

        while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) {
            n--;
        }
        s += strspn(s, " \t");
        return strncmp(s, RATE_LIMITER_NAME, n) == 0 &&
               n == strlen(RATE_LIMITER_NAME);
    }
    if (node->type != YAML_MAPPING_NODE) {
        return false;
    }
    for (yaml_node_pair_t *p = node->data.mapping.pairs.start;
         p < node->data.mapping.pairs.top; p++) {
        yaml_node_t *k = node_at(ld, p->key);
        yaml_node_t *v = node_at(ld, p->value);

        if (k->type == YAML_SCALAR_NODE && v->type == YAML_SCALAR_NODE &&
            strcmp((const char *)k->data.scalar.value, "name") == 0 &&
            strcmp((const char *)v->data.scalar.value, RATE_LIMITER_NAME) ==
                0) {
            return true;
        }
    }
    return false;
}

/* A RequestRateLimiter into 'f'; true when it was built. */
static bool
parse_rate_limiter(struct loader *ld, yaml_node_t *node, const char *path,
                   const struct route *route, struct filter *f)
{
    struct long_form lf = {NULL, NULL};
    struct rate_limit_conf *rl;
    char *sub;

    if (node->type == YAML_SCALAR_NODE) {
        /* Its args are nested (tiers, a limiter from limiters:), which
         * "Name=a, b" cannot say. */
        report(ld, node, path,
               "RequestRateLimiter has no shortcut form: write \"name: "
               "RequestRateLimiter\" with \"args: {key: ip, limiter: "
               "NAME}\"");
        return false;
    }
    if (!parse_fields(ld, node, path, long_form_fields,
                      NELEMS(long_form_fields), &lf)) {
        return false;
    }
    if (lf.args == NULL) {
        report(ld, node, path,
               "RequestRateLimiter: missing args (a key and a limiter, or "
               "tiers)");
        return false;
    }
    sub = child_path(path, "args");
    rl = parse_rl_args(ld, lf.args, sub, route);
    free(sub);
    if (rl == NULL) {
        return false;
    }
    memset(f, 0, sizeof(*f));
    f->kind = FILTER_REQUEST_RATE_LIMITER;
    f->rl = rl;
    return true;
}

static void
parse_predicates(struct loader *ld, yaml_node_t *node, const struct field *f,
                 void *base, const char *path)
{
    struct route *route = base;

    (void)f;
    route->predicates =
        parse_list(ld, node, path, &predicate_kinds, &route->npredicates);
}

/* parse_list(), but a RequestRateLimiter is built here, not by filter.c. */
static void
parse_filters(struct loader *ld, yaml_node_t *node, const struct field *f,
              void *base, const char *path)
{
    struct route *route = base;
    size_t n = sequence_length(node);

    (void)f;
    if (!expect_sequence(ld, node, path)) {
        return;
    }
    route->filters = xcalloc(n, sizeof(*route->filters));
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *item = sequence_item(ld, node, i);
        struct filter *slot = &route->filters[route->nfilters];
        char *sub = index_path(path, i);
        bool ok;

        if (is_rate_limiter(ld, item)) {
            ok = parse_rate_limiter(ld, item, sub, route, slot);
        } else {
            ok = parse_element(ld, item, sub, &filter_kinds, slot);
        }
        if (ok) {
            route->nfilters++;
        }
        free(sub);
    }
}

static const struct field route_fields[] = {
    {.key = "id", .parse = parse_route_id, .required = true},
    {.key = "uri", .parse = parse_uri, .required = true},
    {.key = "predicates", .parse = parse_predicates},
    {.key = "filters", .parse = parse_filters},
    {.key = "connect_timeout",
     .parse = parse_duration,
     .offset = offsetof(struct route, connect_timeout_ms),
     .min = 1},
    {.key = "response_timeout",
     .parse = parse_duration,
     .offset = offsetof(struct route, response_timeout_ms),
     .min = 1},
};

static void
parse_routes(struct loader *ld, yaml_node_t *node, const struct field *f,
             void *base, const char *path)
{
    struct config *cfg = base;
    size_t n = sequence_length(node);

    (void)f;
    if (!expect_sequence(ld, node, path)) {
        return;
    }
    /* One slot per item, even a broken one, so that routes[i] in a
     * message is the i-th item of the file. */
    cfg->routes = xcalloc(n, sizeof(struct route));
    for (size_t i = 0; i < n; i++) {
        struct route *route = &cfg->routes[i];
        char *sub = index_path(path, i);

        cfg->nroutes = i + 1;
        /* upstream: comes before routes in the section table. */
        route->connect_timeout_ms = cfg->upstream.connect_timeout_ms;
        route->response_timeout_ms = cfg->upstream.response_timeout_ms;
        parse_fields(ld, sequence_item(ld, node, i), sub, route_fields,
                     NELEMS(route_fields), route);
        free(sub);
    }
}

/* ------------------------------------------------------------------ */
/* Sections                                                            */

static const struct field server_fields[] = {
    {.key = "listen",
     .parse = parse_listen,
     .offset = offsetof(struct server_conf, listen)},
    {.key = "workers",
     .parse = parse_uint_or_auto,
     .offset = offsetof(struct server_conf, workers),
     .min = 1,
     .max = 256},
    {.key = "trusted_proxies", .parse = parse_trusted_proxies},
    {.key = "max_header_bytes",
     .parse = parse_size,
     .offset = offsetof(struct server_conf, max_header_bytes),
     .min = 1024},
    {.key = "max_body_bytes",
     .parse = parse_size,
     .offset = offsetof(struct server_conf, max_body_bytes)},
    {.key = "client_timeout",
     .parse = parse_duration,
     .offset = offsetof(struct server_conf, client_timeout_ms),
     .min = 1},
    {.key = "header_timeout",
     .parse = parse_duration,
     .offset = offsetof(struct server_conf, header_timeout_ms),
     .min = 1},
    {.key = "max_connections",
     .parse = parse_uint_or_auto,
     .offset = offsetof(struct server_conf, max_connections),
     .min = 1,
     .max = 100000000},
    {.key = "drain_timeout",
     .parse = parse_duration,
     .offset = offsetof(struct server_conf, drain_timeout_ms)},
    {.key = "watch",
     .parse = parse_bool,
     .offset = offsetof(struct server_conf, watch)},
};

static const struct field admin_fields[] = {
    {.key = "listen",
     .parse = parse_listen,
     .offset = offsetof(struct admin_conf, listen)},
};

static const struct field redis_fields[] = {
    {.key = "url", .parse = parse_redis_url, .required = true},
    {.key = "timeout",
     .parse = parse_duration,
     .offset = offsetof(struct redis_conf, timeout_ms),
     .min = 1},
    {.key = "key_prefix",
     .parse = parse_key_prefix,
     .offset = offsetof(struct redis_conf, key_prefix)},
    {.key = "max_in_flight",
     .parse = parse_uint,
     .offset = offsetof(struct redis_conf, max_in_flight),
     .min = 1,
     .max = 1000000},
};

static const struct field identity_fields[] = {
    {.key = "user_header",
     .parse = parse_header_name,
     .offset = offsetof(struct identity_conf, user_header)},
    {.key = "role_header",
     .parse = parse_header_name,
     .offset = offsetof(struct identity_conf, role_header)},
    {.key = "ipv6_prefix",
     .parse = parse_uint,
     .offset = offsetof(struct identity_conf, ipv6_prefix),
     .min = 1,
     .max = 128},
};

static const struct field upstream_fields[] = {
    {.key = "connect_timeout",
     .parse = parse_duration,
     .offset = offsetof(struct upstream_conf, connect_timeout_ms),
     .min = 1},
    {.key = "response_timeout",
     .parse = parse_duration,
     .offset = offsetof(struct upstream_conf, response_timeout_ms),
     .min = 1},
    {.key = "keepalive",
     .parse = parse_uint,
     .offset = offsetof(struct upstream_conf, keepalive),
     .max = 100000},
};

static const struct field log_fields[] = {
    {.key = "level",
     .parse = parse_log_level,
     .offset = offsetof(struct config, log_level)},
    {.key = "access",
     .parse = parse_access_log,
     .offset = offsetof(struct config, access_log)},
    {.key = "access_format",
     .parse = parse_access_format,
     .offset = offsetof(struct config, access_format)},
};

static void
parse_server(struct loader *ld, yaml_node_t *node, const struct field *f,
             void *base, const char *path)
{
    parse_fields(ld, node, path, server_fields, NELEMS(server_fields),
                 field_ptr(base, f));
}

static void
parse_admin(struct loader *ld, yaml_node_t *node, const struct field *f,
            void *base, const char *path)
{
    struct admin_conf *admin = field_ptr(base, f);

    admin->enabled = true;
    parse_fields(ld, node, path, admin_fields, NELEMS(admin_fields), admin);
}

static void
parse_redis(struct loader *ld, yaml_node_t *node, const struct field *f,
            void *base, const char *path)
{
    struct redis_conf *redis = field_ptr(base, f);

    redis->enabled = true;
    parse_fields(ld, node, path, redis_fields, NELEMS(redis_fields), redis);
}

static void
parse_upstream(struct loader *ld, yaml_node_t *node, const struct field *f,
               void *base, const char *path)
{
    parse_fields(ld, node, path, upstream_fields, NELEMS(upstream_fields),
                 field_ptr(base, f));
}

static void
parse_identity(struct loader *ld, yaml_node_t *node, const struct field *f,
               void *base, const char *path)
{
    parse_fields(ld, node, path, identity_fields, NELEMS(identity_fields),
                 field_ptr(base, f));
}

static void
parse_log(struct loader *ld, yaml_node_t *node, const struct field *f,
          void *base, const char *path)
{
    (void)f;
    parse_fields(ld, node, path, log_fields, NELEMS(log_fields), base);
}

/*
 * The top level. Sections are read in this order whatever the order in
 * the file: routes last, because a route's defaults come from upstream:.
 * identity: and limiters: go before routes, so that a route's
 * RequestRateLimiter can name a limiter that is already known.
 */
static const struct field sections[] = {
    {.key = "server",
     .parse = parse_server,
     .offset = offsetof(struct config, server)},
    {.key = "admin",
     .parse = parse_admin,
     .offset = offsetof(struct config, admin)},
    {.key = "redis",
     .parse = parse_redis,
     .offset = offsetof(struct config, redis)},
    {.key = "upstream",
     .parse = parse_upstream,
     .offset = offsetof(struct config, upstream)},
    {.key = "identity",
     .parse = parse_identity,
     .offset = offsetof(struct config, identity)},
    {.key = "limiters", .parse = parse_limiters},
    {.key = "log", .parse = parse_log},
    {.key = "routes", .parse = parse_routes, .required = true},
};

/* ------------------------------------------------------------------ */
/* Loading                                                             */

static struct config *
config_new(const char *name)
{
    struct config *cfg = xcalloc(1, sizeof(*cfg));

    cfg->refs = 1;
    cfg->path = xstrdup(name);
    cfg->server.listen.host = xstrdup("0.0.0.0");
    cfg->server.listen.port = 8080;
    cfg->server.workers = 0;
    cfg->server.max_header_bytes = 16 * 1024;
    cfg->server.max_body_bytes = 8 * 1024 * 1024;
    cfg->server.client_timeout_ms = 60 * 1000;
    cfg->server.header_timeout_ms = 10 * 1000;
    cfg->server.max_connections = 0;
    cfg->server.drain_timeout_ms = 10 * 1000;
    cfg->admin.listen.host = xstrdup("127.0.0.1");
    cfg->admin.listen.port = 9090;
    cfg->redis.port = 6379;
    cfg->redis.timeout_ms = 50;
    cfg->redis.key_prefix = xstrdup("sluice:");
    cfg->redis.max_in_flight = 1024;
    cfg->identity.user_header = xstrdup("X-User-Id");
    cfg->identity.role_header = xstrdup("X-User-Role");
    cfg->identity.ipv6_prefix = 64;
    cfg->upstream.connect_timeout_ms = 5 * 1000;
    cfg->upstream.response_timeout_ms = 60 * 1000;
    cfg->upstream.keepalive = 256;
    cfg->log_level = LOG_INFO;
    cfg->access_log = xstrdup("-");
    cfg->access_format = ACCESSLOG_TEXT;
    return cfg;
}

static void
route_deinit(struct route *r)
{
    free(r->id);
    free(r->uri.host);
    free(r->uri.base_path);
    free(r->uri.authority);
    for (size_t i = 0; i < r->npredicates; i++) {
        predicate_deinit(&r->predicates[i]);
    }
    free(r->predicates);
    for (size_t i = 0; i < r->nfilters; i++) {
        filter_deinit(&r->filters[i]);
    }
    free(r->filters);
}

static void
config_free(struct config *cfg)
{
    free(cfg->path);
    free(cfg->server.listen.host);
    free(cfg->server.trusted_proxies);
    free(cfg->admin.listen.host);
    free(cfg->redis.host);
    free(cfg->redis.user);
    free(cfg->redis.password);
    free(cfg->redis.key_prefix);
    free(cfg->identity.user_header);
    free(cfg->identity.role_header);
    free(cfg->access_log);
    /* Routes first: their tiers point into the limiters. */
    for (size_t i = 0; i < cfg->nroutes; i++) {
        route_deinit(&cfg->routes[i]);
    }
    free(cfg->routes);
    for (size_t i = 0; i < cfg->nlimiters; i++) {
        free(cfg->limiters[i].name);
    }
    free(cfg->limiters);
    free(cfg);
}

/* Reader errors (bad UTF-8) carry a byte offset rather than a mark. */
static void
report_yaml_error(struct loader *ld, const yaml_parser_t *parser)
{
    yaml_mark_t mark = parser->problem_mark;
    const char *problem = parser->problem;

    if (parser->error == YAML_READER_ERROR) {
        size_t end =
            parser->problem_offset < ld->len ? parser->problem_offset : ld->len;

        mark.line = 0;
        mark.column = 0;
        for (size_t i = 0; i < end; i++) {
            if (ld->text[i] == '\n') {
                mark.line++;
                mark.column = 0;
            } else {
                mark.column++;
            }
        }
    }
    report_at(ld, mark, "", "yaml: %s",
              problem != NULL ? problem : "cannot parse");
}

/* A stream is one document; a second one is refused, not ignored. */
static void
check_single_document(struct loader *ld, yaml_parser_t *parser)
{
    yaml_document_t doc;
    yaml_node_t *root;

    if (!yaml_parser_load(parser, &doc)) {
        report_yaml_error(ld, parser);
        return;
    }
    root = yaml_document_get_root_node(&doc);
    if (root != NULL) {
        report(ld, root, "", "only one YAML document is allowed");
    }
    yaml_document_delete(&doc);
}

struct config *
config_parse(const char *text, size_t len, const char *name,
             struct config_errors *errs)
{
    struct loader ld;
    yaml_parser_t parser;
    yaml_document_t doc;
    yaml_node_t *root;

    memset(&ld, 0, sizeof(ld));
    ld.name = name;
    ld.text = text;
    ld.len = len;
    ld.cfg = config_new(name);
    if (!yaml_parser_initialize(&parser)) {
        fprintf(stderr, "sluice: out of memory starting the YAML parser\n");
        abort();
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        report_yaml_error(&ld, &parser);
    } else {
        ld.doc = &doc;
        root = yaml_document_get_root_node(&doc);
        if (root == NULL || is_null(root)) {
            yaml_mark_t start = {0, 0, 0};

            report_at(&ld, root != NULL ? root->start_mark : start, "",
                      "the file is empty (expected a mapping with at least "
                      "\"routes\")");
        } else {
            parse_fields(&ld, root, "", sections, NELEMS(sections), ld.cfg);
            check_single_document(&ld, &parser);
        }
        yaml_document_delete(&doc);
    }
    yaml_parser_delete(&parser);
    if (ld.ndiags > 0) {
        flush_diags(&ld, errs);
        config_free(ld.cfg);
        return NULL;
    }
    free(ld.diags);
    return ld.cfg;
}

struct config *
config_load(const char *path, struct config_errors *errs)
{
    FILE *fp = fopen(path, "rb");
    struct config *cfg;
    char *buf = NULL;
    size_t cap = 0;
    size_t len = 0;

    if (fp == NULL) {
        errors_push(errs,
                    xasprintf("%s: cannot read: %s", path, strerror(errno)));
        return NULL;
    }
    for (;;) {
        size_t got;

        buf = xgrow(buf, &cap, len + 4096, 1);
        got = fread(buf + len, 1, cap - len, fp);
        len += got;
        if (got == 0) {
            break;
        }
    }
    if (ferror(fp)) {
        /* fopen() succeeds on a directory; the read says EISDIR. */
        int err = errno;

        errors_push(errs,
                    xasprintf("%s: cannot read: %s", path, strerror(err)));
        fclose(fp);
        free(buf);
        return NULL;
    }
    fclose(fp);
    cfg = config_parse(buf, len, path, errs);
    free(buf);
    return cfg;
}

struct config *
config_ref(struct config *cfg)
{
    __atomic_add_fetch(&cfg->refs, 1, __ATOMIC_RELAXED);
    return cfg;
}

void
config_unref(struct config *cfg)
{
    if (cfg == NULL) {
        return;
    }
    /* Release so that this thread's reads happen before the free; acquire
     * so that the freeing thread sees every other thread's. */
    if (__atomic_sub_fetch(&cfg->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        config_free(cfg);
    }
}

const struct route *
config_find_route(const struct config *cfg, const char *id)
{
    for (size_t i = 0; i < cfg->nroutes; i++) {
        if (cfg->routes[i].id != NULL && strcmp(cfg->routes[i].id, id) == 0) {
            return &cfg->routes[i];
        }
    }
    return NULL;
}
