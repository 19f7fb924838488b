/*
 * load.c - the loader's engine: config_parse() and config_load(), the
 * top-level table of sections, errors in file order, "did you mean"
 * suggestions, node access and the table engine (load_fields()). The
 * sections themselves are in load_*.c; load.h is their shared header.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "config.h"
#include "load.h"
#include "rlheaders.h"
#include "xmalloc.h"

/* Names longer than this get no "did you mean" (and cost no time). */
#define SUGGEST_MAX 64

/* One error, kept with its position so that the list can be put in file
 * order: sections are read in table order, not in the order written. */
struct diag {
    size_t line; /* 1-based */
    size_t col;  /* 1-based */
    size_t seq;  /* order of discovery; keeps the sort stable */
    char *text;  /* "file:line:col: path: what"; owned */
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

void
config_errors_add(struct config_errors *e, char *s)
{
    errors_push(e, s);
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

/* "routes[2].filters[0]": the steps of 'p' from the top down. */
static char *
path_text(const struct load_path *p)
{
    char *parent;
    char *s;

    if (p == NULL) {
        return xstrdup("");
    }
    parent = path_text(p->parent);
    if (p->key == NULL) {
        s = xasprintf("%s[%zu]", parent, p->index);
    } else if (parent[0] == '\0') {
        s = xstrdup(p->key);
    } else {
        s = xasprintf("%s.%s", parent, p->key);
    }
    free(parent);
    return s;
}

/*
 * 's' with its control characters written as "\n", "\t", "\r" or
 * "\xNN": a message quotes what the file says, and a key such as
 * "a\nt.yaml:1:1: x" must not print as a second error. Frees 's'.
 */
static char *
escape_controls(char *s)
{
    size_t n = 0;
    char *out;
    char *p;

    for (const char *c = s; *c != '\0'; c++) {
        n += (unsigned char)*c < 0x20 || *c == 0x7f ? 4 : 1;
    }
    out = xmalloc(n + 1);
    p = out;
    for (const char *c = s; *c != '\0'; c++) {
        unsigned char b = (unsigned char)*c;

        if (b >= 0x20 && b != 0x7f) {
            *p++ = (char)b;
        } else if (b == '\n' || b == '\t' || b == '\r') {
            *p++ = '\\';
            *p++ = b == '\n' ? 'n' : b == '\t' ? 't' : 'r';
        } else {
            p += sprintf(p, "\\x%02x", b);
        }
    }
    *p = '\0';
    free(s);
    return out;
}

void
load_report_at(struct loader *ld, yaml_mark_t mark,
               const struct load_path *path, const char *fmt, ...)
{
    size_t line = mark.line + 1;
    size_t col = mark.column + 1;
    va_list ap;
    char *text;
    char *msg;

    va_start(ap, fmt);
    msg = escape_controls(xvasprintf(fmt, ap));
    va_end(ap);
    text = escape_controls(path_text(path));
    if (text[0] != '\0') {
        add_diag(
            ld, line, col,
            xasprintf("%s:%zu:%zu: %s: %s", ld->name, line, col, text, msg));
    } else {
        add_diag(ld, line, col,
                 xasprintf("%s:%zu:%zu: %s", ld->name, line, col, msg));
    }
    free(text);
    free(msg);
}

void
load_warn_at(struct loader *ld, yaml_mark_t mark, const struct load_path *path,
             const char *fmt, ...)
{
    size_t line = mark.line + 1;
    size_t col = mark.column + 1;
    struct diag *d;
    va_list ap;
    char *text;
    char *msg;

    va_start(ap, fmt);
    msg = escape_controls(xvasprintf(fmt, ap));
    va_end(ap);
    text = escape_controls(path_text(path));
    ld->warns = xgrow(ld->warns, &ld->wcap, ld->nwarns + 1, sizeof(*d));
    d = &ld->warns[ld->nwarns];
    d->line = line;
    d->col = col;
    d->seq = ld->nwarns;
    d->text = xasprintf("%s:%zu:%zu: %s: %s", ld->name, line, col, text, msg);
    ld->nwarns++;
    free(text);
    free(msg);
}

/* Each leaf of an ignored mapping, so that every key is named once. */
static void
warn_ignored(struct loader *ld, yaml_node_t *node, const struct load_path *path,
             size_t depth)
{
    if (node->type != YAML_MAPPING_NODE ||
        node->data.mapping.pairs.start == node->data.mapping.pairs.top ||
        depth == 16) {
        load_warn_at(ld, node->start_mark, path,
                     "ignored (a Spring setting with no meaning to sluice)");
        return;
    }
    for (yaml_node_pair_t *p = node->data.mapping.pairs.start;
         p < node->data.mapping.pairs.top; p++) {
        yaml_node_t *k = load_node_at(ld, p->key);
        const char *key = k->type == YAML_SCALAR_NODE
                              ? (const char *)k->data.scalar.value
                              : "?";

        warn_ignored(ld, load_node_at(ld, p->value), PATH_KEY(path, key),
                     depth + 1);
    }
}

void
load_ignored(struct loader *ld, yaml_node_t *node, const struct field *f,
             void *base, const struct load_path *path)
{
    (void)f;
    (void)base;
    warn_ignored(ld, node, path, 0);
}

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
char *
load_join_names(const void *table, size_t n, size_t stride)
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
char *
load_alternatives(const char *word, const void *table, size_t n, size_t stride,
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
    names = load_join_names(table, n, stride);
    s = xasprintf("(known: %s)", n > 0 ? names : "none");
    free(names);
    return s;
}

/* ------------------------------------------------------------------ */
/* Nodes                                                               */

/* YAML 1.1 nulls: "key:" with nothing after it, "~", "null". */
bool
load_is_null(const yaml_node_t *node)
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

const char *
load_node_desc(const yaml_node_t *node)
{
    if (load_is_null(node)) {
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

yaml_node_t *
load_node_at(struct loader *ld, int index)
{
    return yaml_document_get_node(ld->doc, index);
}

const yaml_node_pair_t *
load_mapping_pair(struct loader *ld, const yaml_node_t *node, const char *key)
{
    if (node->type != YAML_MAPPING_NODE) {
        return NULL;
    }
    for (const yaml_node_pair_t *p = node->data.mapping.pairs.start;
         p < node->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = load_node_at(ld, p->key);

        /* By length too: "id\0x" is another key. */
        if (k->type == YAML_SCALAR_NODE &&
            k->data.scalar.length == strlen(key) &&
            strcmp((const char *)k->data.scalar.value, key) == 0) {
            return p;
        }
    }
    return NULL;
}

/* True when [s, e) is made of the characters of 'set' and '_', with at
 * least one of 'set'. */
static bool
digits_in(const char *s, const char *e, const char *set)
{
    bool any = false;

    for (; s < e; s++) {
        if (*s != '_' && strchr(set, *s) == NULL) {
            return false;
        }
        any = any || *s != '_';
    }
    return any;
}

/* [0-9_]* from 's': where it stops. */
static const char *
skip_digits(const char *s)
{
    while ((*s >= '0' && *s <= '9') || *s == '_') {
        s++;
    }
    return s;
}

/*
 * For yaml11_other_text(): true when 's' (digits from 'd', the end at
 * 'e') is a float to YAML 1.1 and Java's Double.toString() would not
 * give it back as written: a float written as Java writes it, such as
 * 1.5, 2.0 or -0.25 between 0.001 and 10^7, reads the same either way.
 */
static bool
yaml11_float_differs(const char *s, const char *d, const char *e, char *as,
                     size_t aslen)
{
    const char *p = d;
    const char *dot;
    size_t ndigits = 0;

    if (strcmp(d, ".inf") == 0 || strcmp(d, ".Inf") == 0 ||
        strcmp(d, ".INF") == 0 || strcmp(s, ".nan") == 0 ||
        strcmp(s, ".NaN") == 0 || strcmp(s, ".NAN") == 0) {
        snprintf(as, aslen, "a floating-point number");
        return true;
    }
    /* YAML 1.1's floats: \.[0-9]+ or [0-9_]+(\.[0-9_]*)?, then an
     * exponent if any; or base 60 with a fraction. */
    if (*p == '.') {
        p = skip_digits(p + 1);
        if (p == d + 1) {
            return false;
        }
    } else {
        bool base60 = false;

        p = skip_digits(p);
        if (p == d) {
            return false;
        }
        /* Base 60: each further part [0-5]?[0-9], and a fraction. */
        while (*p == ':' && isdigit((unsigned char)p[1])) {
            bool two = isdigit((unsigned char)p[2]);

            if ((two && p[1] > '5') || (two && isdigit((unsigned char)p[3]))) {
                return false;
            }
            p += two ? 3 : 2;
            base60 = true;
        }
        if (*p == '.') {
            p = skip_digits(p + 1);
        } else if (base60) {
            return false;
        }
    }
    if (*p == 'e' || *p == 'E') {
        p += 1 + (p[1] == '-' || p[1] == '+');
        if (*p < '0' || *p > '9') {
            return false;
        }
        while (*p >= '0' && *p <= '9') {
            p++;
        }
    }
    if (p != e) {
        return false;
    }
    dot = strchr(d, '.');
    if (dot == NULL && strpbrk(d, "eE:") == NULL &&
        ((d[0] >= '1' && d[0] <= '9') || strcmp(d, "0") == 0)) {
        return false; /* an integer: [1-9][0-9_]* or 0 */
    }
    /* Java's form: no '+', '_', exponent or base 60; an integer part
     * without leading zeros, under 10^7; a fraction ending in a digit
     * other than 0, or ".0" alone; at least 0.001; 15 digits at most. */
    if (s[0] != '+' && dot != NULL && dot > d && strpbrk(d, "_eE:") == NULL &&
        (d[0] != '0' || dot == d + 1) && dot - d <= 7 && dot[1] != '\0' &&
        (e[-1] != '0' || e == dot + 2)) {
        for (const char *q = d; q < e; q++) {
            ndigits += *q != '.';
        }
        if (ndigits <= 15 && (d[0] != '0' || strncmp(dot, ".000", 4) != 0 ||
                              strspn(dot + 1, "0") == (size_t)(e - dot - 1))) {
            return false;
        }
    }
    snprintf(as, aslen, "a floating-point number");
    return true;
}

/*
 * The value 's' has to Spring Boot, whose SnakeYAML resolves a plain
 * scalar by YAML 1.1's rules before a property is bound from its text,
 * when that text is not 's' itself: written into 'as', and true. Spring
 * Boot leaves timestamps out; the others are YAML 1.1's booleans
 * (yes/no/on/off), integers in octal, hex, binary, with '_' or '+', or
 * in base 60 (1:30 is 90), and floats not in Java's own form.
 */
static bool
yaml11_other_text(const char *s, char *as, size_t aslen)
{
    static const char *const yes[] = {"yes", "Yes", "YES",  "on",
                                      "On",  "ON",  "True", "TRUE"};
    static const char *const no[] = {"no",  "No",  "NO",    "off",
                                     "Off", "OFF", "False", "FALSE"};
    const char *d = s + (s[0] == '-' || s[0] == '+');
    const char *e = s + strlen(s);
    const char *colon = strchr(d, ':');

    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcmp(s, yes[i]) == 0 || strcmp(s, no[i]) == 0) {
            snprintf(as, aslen, "the boolean %s",
                     strcmp(s, yes[i]) == 0 ? "true" : "false");
            return true;
        }
    }
    /* SnakeYAML tries its number types only on a scalar that starts
     * with one of these ("_1" stays a string). */
    if (s[0] == '\0' || strchr("-+0123456789.", s[0]) == NULL) {
        return false;
    }
    if (d[0] == '0' && (d[1] == 'x' || d[1] == 'b') &&
        digits_in(d + 2, e, d[1] == 'x' ? "0123456789abcdefABCDEF" : "01")) {
        snprintf(as, aslen, "a %s number",
                 d[1] == 'x' ? "hexadecimal" : "binary");
        return true;
    }
    if (d[0] == '0' && d[1] != '\0' && digits_in(d + 1, e, "01234567")) {
        snprintf(as, aslen, "an octal number");
        return true;
    }
    if (colon != NULL && d[0] >= '1' && d[0] <= '9' &&
        digits_in(d, colon, "0123456789")) {
        const char *p = colon;

        while (
            p != NULL && p[0] == ':' &&
            ((p[1] >= '0' && p[1] <= '5' && p[2] >= '0' && p[2] <= '9' &&
              (p[3] == ':' || p[3] == '\0')) ||
             (p[1] >= '0' && p[1] <= '9' && (p[2] == ':' || p[2] == '\0')))) {
            p = strchr(p + 1, ':');
        }
        if (p == NULL) {
            snprintf(as, aslen, "a number in base 60");
            return true;
        }
    }
    /* Decimal integers: 0 or [1-9][0-9_]*, after a sign if any. */
    if ((strcmp(d, "0") == 0 ||
         (d[0] >= '1' && d[0] <= '9' && digits_in(d, e, "0123456789"))) &&
        (s[0] == '+' || strchr(d, '_') != NULL || strcmp(s, "-0") == 0)) {
        snprintf(as, aslen, "the number %s",
                 strcmp(d, "0") == 0 ? "0" : "written without '+' and '_'");
        return true;
    }
    return yaml11_float_differs(s, d, e, as, aslen);
}

/* The text of a scalar, or NULL after reporting why there is none. */
const char *
load_scalar(struct loader *ld, yaml_node_t *node, const struct load_path *path)
{
    const char *v;

    if (node->type != YAML_SCALAR_NODE) {
        report(ld, node, path, "expected a scalar, got %s",
               load_node_desc(node));
        return NULL;
    }
    if (load_is_null(node)) {
        report(ld, node, path, "missing value");
        return NULL;
    }
    v = (const char *)node->data.scalar.value;
    /* "\0" in a double-quoted scalar would silently cut the value. */
    if (strlen(v) != node->data.scalar.length) {
        report(ld, node, path, "contains a NUL character");
        return NULL;
    }
    if (ld->spring_reads &&
        node->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
        char as[64];

        if (yaml11_other_text(v, as, sizeof(as))) {
            report(ld, node, path,
                   "Spring Boot reads the plain scalar %s as %s (YAML 1.1); "
                   "write what is meant, or quote it for the text",
                   v, as);
            return NULL;
        }
    }
    return v;
}

/*
 * True for a sequence. A null counts as an empty one ("filters:" with
 * nothing under it); anything else is reported.
 */
bool
load_expect_sequence(struct loader *ld, yaml_node_t *node,
                     const struct load_path *path)
{
    if (node->type == YAML_SEQUENCE_NODE || load_is_null(node)) {
        return true;
    }
    report(ld, node, path, "expected a sequence, got %s", load_node_desc(node));
    return false;
}

size_t
load_sequence_length(const yaml_node_t *node)
{
    if (node->type != YAML_SEQUENCE_NODE) {
        return 0;
    }
    return (size_t)(node->data.sequence.items.top -
                    node->data.sequence.items.start);
}

yaml_node_t *
load_sequence_item(struct loader *ld, const yaml_node_t *node, size_t i)
{
    return load_node_at(ld, node->data.sequence.items.start[i]);
}

/*
 * Walks the mapping 'node' against t->fields: reports keys that are
 * unknown, duplicated or not scalars, then parses each known key in table
 * order (so a later section may rely on an earlier one) and reports the
 * required ones that are absent. A null is an empty mapping ("admin:"
 * alone turns the admin listener on with its defaults). When all of that
 * went without an error (or, with t->check_always, the keys at least were
 * right), t->check applies the rules between fields. With t->keys_first,
 * a wrong key leaves every value unread.
 */
enum load_outcome
load_fields(struct loader *ld, yaml_node_t *node, const struct load_path *path,
            const struct table *t, void *base)
{
    const struct field *fields = t->fields;
    size_t nfields = t->n;
    yaml_node_t **found;
    yaml_node_t **found_key;
    bool *suggested;
    size_t before = ld->ndiags;
    bool bad_keys;
    bool missing = false;

    if (node->type != YAML_MAPPING_NODE && !load_is_null(node)) {
        report(ld, node, path, "expected a mapping, got %s",
               load_node_desc(node));
        return LOAD_BAD_KEYS;
    }
    found = xcalloc(nfields, sizeof(*found));
    found_key = xcalloc(nfields, sizeof(*found_key));
    suggested = xcalloc(nfields, sizeof(*suggested));
    if (node->type == YAML_MAPPING_NODE) {
        for (yaml_node_pair_t *p = node->data.mapping.pairs.start;
             p < node->data.mapping.pairs.top; p++) {
            yaml_node_t *k = load_node_at(ld, p->key);
            const char *key;
            size_t i;

            if (k->type != YAML_SCALAR_NODE) {
                report(ld, k, path, "expected a scalar key, got %s",
                       load_node_desc(k));
                continue;
            }
            key = (const char *)k->data.scalar.value;
            if (strlen(key) != k->data.scalar.length) {
                /* "level\0x" would pass for "level". */
                report(ld, k, path, "a key contains a NUL character");
                continue;
            }
            for (i = 0; i < nfields; i++) {
                if (strcmp(key, fields[i].key) == 0) {
                    break;
                }
            }
            if (i == nfields) {
                size_t near = SIZE_MAX;
                char *alt = load_alternatives(key, fields, nfields,
                                              sizeof(*fields), &near);

                report(ld, k, path, "unknown key \"%s\" %s", key, alt);
                free(alt);
                if (near != SIZE_MAX) {
                    suggested[near] = true;
                }
            } else if (found[i] != NULL) {
                report(ld, k, path, "duplicate key \"%s\" (first at line %zu)",
                       key, (size_t)found_key[i]->start_mark.line + 1);
            } else {
                found[i] = load_node_at(ld, p->value);
                found_key[i] = k;
            }
        }
    }
    bad_keys = ld->ndiags != before;
    for (size_t i = 0; i < nfields; i++) {
        const struct load_path *sub = PATH_KEY(path, fields[i].key);

        if (found[i] != NULL) {
            if (!bad_keys || !t->keys_first) {
                fields[i].parse(ld, found[i], &fields[i], base, sub);
            }
        } else if (fields[i].required && !suggested[i]) {
            /* "url:" for "uri:" is one mistake, reported once. */
            report(ld, node, sub, "required");
            missing = true;
        }
    }
    free(found);
    free(found_key);
    free(suggested);
    if (t->check != NULL && !bad_keys && !missing &&
        (t->check_always || ld->ndiags == before)) {
        t->check(ld, node, path, base);
    }
    if (bad_keys || missing) {
        return LOAD_BAD_KEYS;
    }
    return ld->ndiags == before ? LOAD_OK : LOAD_BAD_VALUES;
}

/* ------------------------------------------------------------------ */
/* Sections                                                            */

/*
 * The top level. Sections are read in this order whatever the order in
 * the file: routes last, because a route's defaults come from upstream:.
 * identity: and limiters: go before routes, so that a route's
 * RequestRateLimiter can name a limiter that is already known.
 */
static const struct field sections[] = {
    {.key = "server",
     .parse = load_table,
     .offset = offsetof(struct config, server),
     .table = &load_server_table},
    {.key = "admin",
     .parse = load_table,
     .offset = offsetof(struct config, admin),
     .table = &load_admin_table},
    {.key = "redis",
     .parse = load_table,
     .offset = offsetof(struct config, redis),
     .table = &load_redis_table},
    {.key = "upstream",
     .parse = load_table,
     .offset = offsetof(struct config, upstream),
     .table = &load_upstream_table},
    {.key = "identity",
     .parse = load_table,
     .offset = offsetof(struct config, identity),
     .table = &load_identity_table},
    {.key = "limiters", .parse = load_limiters},
    {.key = "log", .parse = load_table, .table = &load_log_table},
    {.key = "scg", .parse = load_scg_section},
    {.key = "routes", .parse = load_routes, .required = true},
};

static const struct table section_table = TABLE(sections);

/*
 * The same but scg: and routes (the last two), for sluice: in a Spring
 * file, whose routes are under spring.cloud.gateway and whose scg: sits
 * at the top.
 */
const struct table load_sluice_table = {.fields = sections,
                                        .n = NELEMS(sections) - 2};

/* ------------------------------------------------------------------ */
/* Loading                                                             */

/* Reader errors (bad UTF-8) carry a byte offset rather than a mark. */
static void
report_yaml_error(struct loader *ld, const yaml_parser_t *parser)
{
    yaml_mark_t mark = parser->problem_mark;
    const char *problem = parser->problem;

    if (parser->error == YAML_READER_ERROR) {
        /* The reader gives a byte offset; every other mark counts
         * characters, after a BOM, with CR, LF and CRLF as line breaks. */
        const unsigned char *t = (const unsigned char *)ld->text;
        size_t end =
            parser->problem_offset < ld->len ? parser->problem_offset : ld->len;
        size_t i =
            end >= 3 && t[0] == 0xef && t[1] == 0xbb && t[2] == 0xbf ? 3 : 0;

        mark.line = 0;
        mark.column = 0;
        for (; i < end; i++) {
            if (t[i] == '\n' || t[i] == '\r') {
                if (t[i] == '\r' && i + 1 < end && t[i + 1] == '\n') {
                    i++;
                }
                mark.line++;
                mark.column = 0;
            } else if ((t[i] & 0xc0) != 0x80) {
                mark.column++; /* not a UTF-8 continuation byte */
            }
        }
    }
    if (parser->context != NULL &&
        (parser->context_mark.line != parser->problem_mark.line ||
         parser->context_mark.column != parser->problem_mark.column)) {
        /* Where what went wrong began, when that is elsewhere: "found
         * duplicate anchor; first occurrence" at context_mark, "second
         * occurrence" at problem_mark; "while scanning a quoted scalar"
         * where it opened, "found unexpected end of stream" at the end. */
        load_report_at(ld, mark, NULL, "yaml: %s at line %zu, column %zu; %s",
                       parser->context, parser->context_mark.line + 1,
                       parser->context_mark.column + 1,
                       problem != NULL ? problem : "cannot parse");
        return;
    }
    load_report_at(ld, mark, NULL, "yaml: %s",
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
        report(ld, root, NULL, "only one YAML document is allowed");
    }
    yaml_document_delete(&doc);
}

/*
 * Bounds on the shape of a file, checked on libyaml's events before it
 * builds the document. Its scanner takes time quadratic in the depth of
 * nested flow collections (100,000 '{' take a minute), and an alias
 * stands for a whole node, so that a few kilobytes of aliases to aliases
 * could make the loader walk and build billions of routes, filters or
 * tiers. An alias is looked up among the anchors one by one (here and
 * in libyaml), so their number is bounded too. gateway.yaml itself needs
 * a depth of 9, a few hundred nodes and a few anchors at most.
 */
#define DEPTH_MAX 64
#define NODES_MAX 100000
#define ANCHORS_MAX 1000

/* A node with an anchor: how many nodes an alias to it stands for. */
struct anchor {
    char *name;        /* owned */
    size_t nodes;      /* the node and everything under it, aliases
                          expanded */
    size_t defined_at; /* 1 for the first anchor of the file, 2 for the
                          next, ... */
};

/* What check_shape() keeps while it reads the events. */
struct shape {
    struct anchor *anchors;         /* closed anchors, in document order */
    size_t nanchors;                /* entries in 'anchors' */
    size_t cap;                     /* allocated entries in 'anchors' */
    size_t open[DEPTH_MAX];         /* 'nodes' when each open collection
                                       started */
    char *open_anchor[DEPTH_MAX];   /* its anchor or NULL; owned */
    size_t open_defined[DEPTH_MAX]; /* its anchor's 'defined_at' */
    size_t depth;                   /* open collections */
    size_t nodes;                   /* so far, aliases expanded */
    size_t defined;                 /* anchors met so far, open or closed */
};

static void
shape_anchor(struct shape *sh, const yaml_char_t *name, size_t nodes,
             size_t defined_at)
{
    sh->anchors =
        xgrow(sh->anchors, &sh->cap, sh->nanchors + 1, sizeof(*sh->anchors));
    sh->anchors[sh->nanchors].name = xstrdup((const char *)name);
    sh->anchors[sh->nanchors].nodes = nodes;
    sh->anchors[sh->nanchors].defined_at = defined_at;
    sh->nanchors++;
}

/* What an alias stands for: the anchor of that name defined last (an
 * anchor may be redefined). 1 if there is none: yaml_parser_load() then
 * reports the alias. SIZE_MAX when that anchor is on a collection still
 * open, one that holds the alias: libyaml makes the collection contain
 * itself, and a walk of it would never end. */
static size_t
shape_alias(const struct shape *sh, const yaml_char_t *name)
{
    size_t best = 0, nodes = 1;

    for (size_t i = 0; i < sh->nanchors; i++) {
        if (sh->anchors[i].defined_at > best &&
            strcmp(sh->anchors[i].name, (const char *)name) == 0) {
            best = sh->anchors[i].defined_at;
            nodes = sh->anchors[i].nodes;
        }
    }
    for (size_t d = 0; d < sh->depth; d++) {
        if (sh->open_anchor[d] != NULL && sh->open_defined[d] > best &&
            strcmp(sh->open_anchor[d], (const char *)name) == 0) {
            return SIZE_MAX;
        }
    }
    return nodes;
}

/* Counts an anchor where it is defined; false after reporting one too
 * many. */
static bool
shape_defined(struct loader *ld, struct shape *sh, const yaml_event_t *ev)
{
    if (sh->defined == ANCHORS_MAX) {
        load_report_at(ld, ev->start_mark, NULL, "yaml: more than %d anchors",
                       ANCHORS_MAX);
        return false;
    }
    sh->defined++;
    return true;
}

/* One event; false after reporting that the file is past a bound. */
static bool
shape_event(struct loader *ld, struct shape *sh, const yaml_event_t *ev)
{
    const yaml_char_t *anchor = NULL;
    size_t n;

    switch (ev->type) {
    case YAML_SCALAR_EVENT:
        if (ev->data.scalar.anchor != NULL && !shape_defined(ld, sh, ev)) {
            return false;
        }
        if (ev->data.scalar.anchor != NULL) {
            shape_anchor(sh, ev->data.scalar.anchor, 1, sh->defined);
        }
        sh->nodes++;
        return true;
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT:
        anchor = ev->type == YAML_SEQUENCE_START_EVENT
                     ? ev->data.sequence_start.anchor
                     : ev->data.mapping_start.anchor;
        if (sh->depth == DEPTH_MAX) {
            load_report_at(ld, ev->start_mark, NULL,
                           "yaml: nested deeper than %d levels", DEPTH_MAX);
            return false;
        }
        if (anchor != NULL && !shape_defined(ld, sh, ev)) {
            return false;
        }
        sh->open[sh->depth] = sh->nodes;
        sh->open_anchor[sh->depth] =
            anchor != NULL ? xstrdup((const char *)anchor) : NULL;
        sh->open_defined[sh->depth] = sh->defined;
        sh->depth++;
        sh->nodes++;
        return true;
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
        if (sh->depth == 0) {
            return true;
        }
        sh->depth--;
        if (sh->open_anchor[sh->depth] != NULL) {
            shape_anchor(sh, (const yaml_char_t *)sh->open_anchor[sh->depth],
                         sh->nodes - sh->open[sh->depth],
                         sh->open_defined[sh->depth]);
            free(sh->open_anchor[sh->depth]);
            sh->open_anchor[sh->depth] = NULL;
        }
        return true;
    case YAML_ALIAS_EVENT:
        n = shape_alias(sh, ev->data.alias.anchor);
        if (n == SIZE_MAX) {
            load_report_at(ld, ev->start_mark, NULL,
                           "yaml: alias *%s is inside the node it names",
                           (const char *)ev->data.alias.anchor);
            return false;
        }
        if (sh->nodes > NODES_MAX || n > NODES_MAX - sh->nodes) {
            load_report_at(ld, ev->start_mark, NULL,
                           "yaml: aliases expand the document to more than "
                           "%d nodes",
                           NODES_MAX);
            return false;
        }
        sh->nodes += n;
        return true;
    default:
        return true;
    }
}

/*
 * Reads the events of the text: false after reporting that it is nested
 * too deep or that its aliases expand too far. A syntax error is left to
 * yaml_parser_load(), which meets it again.
 */
static bool
check_shape(struct loader *ld)
{
    yaml_parser_t parser;
    struct shape sh;
    bool ok = true;
    bool done = false;

    memset(&sh, 0, sizeof(sh));
    if (!yaml_parser_initialize(&parser)) {
        fprintf(stderr, "sluice: out of memory starting the YAML parser\n");
        abort();
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)ld->text,
                                 ld->len);
    while (ok && !done) {
        yaml_event_t ev;

        if (!yaml_parser_parse(&parser, &ev)) {
            break;
        }
        done = ev.type == YAML_STREAM_END_EVENT;
        ok = shape_event(ld, &sh, &ev);
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&parser);
    for (size_t i = 0; i < sh.depth; i++) {
        free(sh.open_anchor[i]);
    }
    for (size_t i = 0; i < sh.nanchors; i++) {
        free(sh.anchors[i].name);
    }
    free(sh.anchors);
    return ok;
}

/* Spring Cloud Gateway's application.yml: its top level holds spring:. */
static bool
is_scg_shape(struct loader *ld, yaml_node_t *root)
{
    if (root->type != YAML_MAPPING_NODE) {
        return false;
    }
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start;
         p < root->data.mapping.pairs.top; p++) {
        yaml_node_t *k = load_node_at(ld, p->key);

        if (k->type == YAML_SCALAR_NODE &&
            strcmp((const char *)k->data.scalar.value, "spring") == 0) {
            return true;
        }
    }
    return false;
}

/* What each decision of a limiter would otherwise build again. */
static void
prepare_limiters(struct config *cfg)
{
    for (size_t i = 0; i < cfg->nlimiters; i++) {
        cfg->limiters[i].policy = rlheaders_policy(&cfg->limiters[i]);
    }
    for (size_t i = 0; i < cfg->nroutes; i++) {
        const struct route *route = &cfg->routes[i];

        for (size_t j = 0; j < route->nrate_limiters; j++) {
            struct limiter_def *d = route->rate_limiters[j]->derived;

            if (d != NULL && d->policy == NULL) {
                d->policy = rlheaders_policy(d);
            }
        }
    }
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
    ld.scg_deny_empty = -1;
    if (!yaml_parser_initialize(&parser)) {
        fprintf(stderr, "sluice: out of memory starting the YAML parser\n");
        abort();
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!check_shape(&ld)) {
        /* Too deep, or too many aliases: reported; nothing is built. */
    } else if (!yaml_parser_load(&parser, &doc)) {
        report_yaml_error(&ld, &parser);
    } else {
        ld.doc = &doc;
        root = yaml_document_get_root_node(&doc);
        if (root == NULL || load_is_null(root)) {
            yaml_mark_t start = {0, 0, 0};

            load_report_at(
                &ld, root != NULL ? root->start_mark : start, NULL,
                "the file is empty (expected a mapping with at least "
                "\"routes\")");
        } else if (is_scg_shape(&ld, root)) {
            ld.scg = true;
            ld.spring_reads = true;
            ld.cfg->scg_shape = true;
            load_scg(&ld, root);
            check_single_document(&ld, &parser);
        } else {
            load_fields(&ld, root, NULL, &section_table, ld.cfg);
            check_single_document(&ld, &parser);
        }
        yaml_document_delete(&doc);
    }
    yaml_parser_delete(&parser);
    free(ld.resolvers);
    free(ld.services);
    if (ld.nwarns > 0) {
        qsort(ld.warns, ld.nwarns, sizeof(*ld.warns), diag_cmp);
    }
    for (size_t i = 0; i < ld.nwarns; i++) {
        errors_push(&ld.cfg->warnings, ld.warns[i].text);
    }
    free(ld.warns);
    if (ld.ndiags > 0) {
        flush_diags(&ld, errs);
        config_free(ld.cfg);
        return NULL;
    }
    free(ld.diags);
    prepare_limiters(ld.cfg);
    return ld.cfg;
}

/* What 'st' is, for a refusal: "a FIFO", "a directory", ... (static) */
static const char *
file_kind(const struct stat *st)
{
    if (S_ISDIR(st->st_mode)) {
        return "a directory";
    }
    if (S_ISFIFO(st->st_mode)) {
        return "a FIFO";
    }
    if (S_ISCHR(st->st_mode)) {
        return "a character device";
    }
    if (S_ISBLK(st->st_mode)) {
        return "a block device";
    }
    if (S_ISSOCK(st->st_mode)) {
        return "a socket";
    }
    return "a special file";
}

enum load_read
load_read_file(const char *path, size_t max, char **buf, size_t *len,
               long long *size, char *why, size_t whylen)
{
    /* O_NONBLOCK: opening a FIFO must not wait for a writer. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    size_t cap = 0;

    *buf = NULL;
    *len = 0;
    *size = -1;
    if (fd < 0 || fstat(fd, &st) < 0) {
        snprintf(why, whylen, "cannot read: %s", strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        return LOAD_READ_ERROR;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, whylen, "cannot read: %s, not a regular file",
                 file_kind(&st));
        close(fd);
        return LOAD_READ_ERROR;
    }
    if ((unsigned long long)st.st_size > max) {
        *size = (long long)st.st_size;
        close(fd);
        return LOAD_READ_TOO_BIG;
    }
    /* Up to one byte past the cap, in case the file grew since fstat(). */
    for (;;) {
        ssize_t got;

        *buf = xgrow(*buf, &cap, *len + 4096, 1);
        if (cap > max + 1) {
            cap = max + 1;
        }
        got = read(fd, *buf + *len, cap - *len);
        if (got < 0 && errno == EINTR) {
            continue;
        }
        if (got <= 0 || (*len += (size_t)got) > max) {
            enum load_read r = got == 0  ? LOAD_READ_OK
                               : got > 0 ? LOAD_READ_TOO_BIG
                                         : LOAD_READ_ERROR;

            if (r == LOAD_READ_ERROR) {
                snprintf(why, whylen, "cannot read: %s", strerror(errno));
            }
            close(fd);
            if (r != LOAD_READ_OK) {
                free(*buf);
                *buf = NULL;
                *len = 0;
            }
            return r;
        }
    }
}

struct config *
config_load(const char *path, struct config_errors *errs)
{
    struct config *cfg;
    char why[256];
    long long size;
    char *buf;
    size_t len;

    switch (load_read_file(path, CONFIG_FILE_MAX, &buf, &len, &size, why,
                           sizeof(why))) {
    case LOAD_READ_OK:
        break;
    case LOAD_READ_ERROR:
        errors_push(errs, xasprintf("%s: %s", path, why));
        return NULL;
    case LOAD_READ_TOO_BIG:
        errors_push(errs,
                    size >= 0
                        ? xasprintf("%s: cannot read: %lld bytes, more than "
                                    "the %d MiB a config file may have",
                                    path, size, CONFIG_FILE_MAX >> 20)
                        : xasprintf("%s: cannot read: more than the %d MiB a "
                                    "config file may have",
                                    path, CONFIG_FILE_MAX >> 20));
        return NULL;
    }
    cfg = config_parse(buf, len, path, errs);
    free(buf);
    return cfg;
}
