/*
 * load_value.c - the scalar syntaxes of gateway.yaml (decimals, host:port,
 * names) and the field parsers that several sections share: integers,
 * durations, sizes, counts, booleans and words from a list. Pure.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "headers.h"
#include "load.h"
#include "units.h"
#include "xmalloc.h"

/* ------------------------------------------------------------------ */
/* Scalar syntaxes                                                     */

/* Plain decimal, no sign or spaces, at most 'max'. */
int
load_decimal(const char *s, size_t n, uint64_t max, uint64_t *out)
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

    if (load_decimal(s, n, 65535, &v) < 0 || v == 0) {
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
const char *
load_split_host_port(const char *s, size_t n, bool need_port, char **host,
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

/* Letters, digits, '_', '.' and '-': route ids, limiter and scope names,
 * all of which end up in Redis keys. */
bool
load_valid_name(const char *s)
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

char *
load_trim(char *s)
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

/* ------------------------------------------------------------------ */
/* Field parsers                                                       */

/*
 * A number or a boolean is a plain scalar: quoted, YAML reads it as a
 * string, and so does every other YAML reader of the same file. False
 * after reporting a quoted one; 'what' is what was expected. A file in
 * Spring Cloud Gateway's shape is read as Spring Boot binds it, from each
 * scalar's text, so there a quoted number is a number.
 */
static bool
plain_scalar(struct loader *ld, yaml_node_t *node, const struct load_path *path,
             const char *s, const char *what)
{
    if (node->data.scalar.style == YAML_PLAIN_SCALAR_STYLE || ld->scg) {
        return true;
    }
    report(ld, node, path, "expected %s, got the quoted string \"%s\"", what,
           s);
    return false;
}

/* An integer in [f->min, f->max], or with 'auto_ok' also "auto" (0). */
static void
read_uint(struct loader *ld, yaml_node_t *node, const struct field *f,
          void *base, const struct load_path *path, bool auto_ok)
{
    unsigned *out = field_ptr(base, f);
    const char *s = load_scalar(ld, node, path);
    uint64_t v;

    if (s == NULL) {
        return;
    }
    if (auto_ok && strcmp(s, "auto") == 0) {
        *out = 0;
        return;
    }
    if (!plain_scalar(ld, node, path, s, "a number")) {
        return;
    }
    if (load_decimal(s, strlen(s), f->max, &v) < 0 || v < f->min) {
        report(ld, node, path,
               "bad integer \"%s\" (expected %san integer from %llu to %llu)",
               s, auto_ok ? "\"auto\" or " : "", (unsigned long long)f->min,
               (unsigned long long)f->max);
        return;
    }
    *out = (unsigned)v;
}

/* An integer in [f->min, f->max]. */
void
load_uint(struct loader *ld, yaml_node_t *node, const struct field *f,
          void *base, const struct load_path *path)
{
    read_uint(ld, node, f, base, path, false);
}

/* "auto" (stored as 0, for the user of the value to size) or an integer. */
void
load_uint_or_auto(struct loader *ld, yaml_node_t *node, const struct field *f,
                  void *base, const struct load_path *path)
{
    read_uint(ld, node, f, base, path, true);
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

/*
 * Reads a number with a unit through 'parse'; false, with 'bad' (a format
 * taking the text) reported, when it does not parse. '*text' gets the
 * scalar for the caller's own messages.
 */
static bool
unit_value(struct loader *ld, yaml_node_t *node, const struct load_path *path,
           int (*parse)(const char *, uint64_t *), const char *bad, uint64_t *v,
           const char **text)
{
    *text = load_scalar(ld, node, path);
    if (*text == NULL) {
        return false;
    }
    if (parse(*text, v) < 0) {
        report(ld, node, path, bad, *text);
        return false;
    }
    return true;
}

/* A duration in milliseconds, at least f->min (0 or 1), at most
 * LOAD_NUMBER_MAX. */
void
load_duration(struct loader *ld, yaml_node_t *node, const struct field *f,
              void *base, const struct load_path *path)
{
    const char *s;
    uint64_t v;

    if (!unit_value(ld, node, path, units_parse_duration,
                    "bad duration \"%s\" (expected a number and a unit: "
                    "ms, s, m, h or d)",
                    &v, &s)) {
        return;
    }
    if (v > LOAD_NUMBER_MAX) {
        report(ld, node, path, "duration \"%s\" is too large (at most 2^53 ms)",
               s);
        return;
    }
    if (v < f->min) {
        report(ld, node, path, "duration must be greater than 0, got \"%s\"",
               s);
        return;
    }
    if (f->max != 0 && v > f->max) {
        char max[24];

        report(ld, node, path, "at most %s, got \"%s\"",
               units_format_duration(f->max, max, sizeof(max)), s);
        return;
    }
    *(uint64_t *)field_ptr(base, f) = v;
}

/* A size in bytes, at least f->min, at most LOAD_NUMBER_MAX. */
void
load_size(struct loader *ld, yaml_node_t *node, const struct field *f,
          void *base, const struct load_path *path)
{
    const char *s;
    uint64_t v;
    char min[32];

    if (!unit_value(ld, node, path, units_parse_size,
                    "bad size \"%s\" (expected a number and a unit: B, "
                    "KiB, MiB or GiB)",
                    &v, &s)) {
        return;
    }
    if (v > LOAD_NUMBER_MAX) {
        report(ld, node, path, "size \"%s\" is too large (at most 2^53 B)", s);
        return;
    }
    if (v < f->min) {
        format_size(f->min, min, sizeof(min));
        report(ld, node, path, "size must be at least %s, got \"%s\"", min, s);
        return;
    }
    *(uint64_t *)field_ptr(base, f) = v;
}

/* Receives the value of a key whose meaning the caller decides. */
void
load_node(struct loader *ld, yaml_node_t *node, const struct field *f,
          void *base, const struct load_path *path)
{
    (void)ld;
    (void)path;
    *(yaml_node_t **)field_ptr(base, f) = node;
}

/* A count of at least f->min (1 for limits, bursts and costs), at most
 * LOAD_NUMBER_MAX. */
void
load_count(struct loader *ld, yaml_node_t *node, const struct field *f,
           void *base, const struct load_path *path)
{
    uint64_t *out = field_ptr(base, f);
    const char *s = load_scalar(ld, node, path);
    size_t n;
    uint64_t v;

    if (s == NULL || !plain_scalar(ld, node, path, s, "a number")) {
        return;
    }
    n = strlen(s);
    if (n > 0 && strspn(s, "0123456789") == n &&
        load_decimal(s, n, LOAD_NUMBER_MAX, &v) < 0) {
        report(ld, node, path, "integer \"%s\" is too large (at most 2^53)", s);
        return;
    }
    if (load_decimal(s, n, LOAD_NUMBER_MAX, &v) < 0 || v < f->min) {
        report(ld, node, path,
               "bad integer \"%s\" (expected a whole number of at least "
               "%llu)",
               s, (unsigned long long)f->min);
        return;
    }
    *out = v;
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

void
load_bool(struct loader *ld, yaml_node_t *node, const struct field *f,
          void *base, const struct load_path *path)
{
    bool *out = field_ptr(base, f);
    const char *s = load_scalar(ld, node, path);

    if (s == NULL || !plain_scalar(ld, node, path, s, "true or false")) {
        return;
    }
    if (bool_value(s, out) < 0) {
        report(ld, node, path, "bad boolean \"%s\" (expected true or false)",
               s);
    }
}

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

/*
 * Every enumerated value of gateway.yaml comes here, so that all of them
 * answer a wrong word the same ways (c->style says which).
 */
bool
load_choice(struct loader *ld, yaml_node_t *node, const struct load_path *path,
            const struct choices *c, int *out)
{
    const char *s = load_scalar(ld, node, path);
    size_t near = SIZE_MAX;
    char *alt;
    char *list;

    if (s == NULL) {
        return false;
    }
    for (size_t i = 0; i < c->n; i++) {
        if (strcmp(s, c->v[i].name) == 0) {
            *out = c->v[i].value;
            return true;
        }
    }
    alt = load_alternatives(s, c->v, c->n, sizeof(*c->v), &near);
    if (c->style == CHOICE_UNKNOWN) {
        report(ld, node, path, "unknown %s \"%s\" %s", c->what, s, alt);
    } else if (c->style == CHOICE_SUGGEST && near != SIZE_MAX) {
        report(ld, node, path, "bad %s \"%s\" %s", c->what, s, alt);
    } else {
        list = choice_list(c->v, c->n);
        report(ld, node, path, "bad %s \"%s\" (expected %s)", c->what, s, list);
        free(list);
    }
    free(alt);
    return false;
}

/* An int-sized enum from the words of f->choices. */
void
load_enum(struct loader *ld, yaml_node_t *node, const struct field *f,
          void *base, const struct load_path *path)
{
    load_choice(ld, node, path, f->choices, field_ptr(base, f));
}

/* A nested mapping: a section, or a struct within one. */
void
load_table(struct loader *ld, yaml_node_t *node, const struct field *f,
           void *base, const struct load_path *path)
{
    const struct table *t = f->table;
    void *sub = field_ptr(base, f);

    if (t->flag_given) {
        *(bool *)((char *)sub + t->given) = true;
    }
    if (t->flag_pos) {
        struct conf_pos *at = (struct conf_pos *)((char *)sub + t->pos);

        at->line = (unsigned)node->start_mark.line + 1;
        at->col = (unsigned)node->start_mark.column + 1;
    }
    load_fields(ld, node, path, t, sub);
}

void
load_text(struct loader *ld, yaml_node_t *node, const struct field *f,
          void *base, const struct load_path *path)
{
    char **out = field_ptr(base, f);
    const char *s = load_scalar(ld, node, path);

    if (s == NULL) {
        return;
    }
    if (s[0] == '\0') {
        report(ld, node, path, "empty value");
        return;
    }
    free(*out);
    *out = xstrdup(s);
}

void
load_token(struct loader *ld, yaml_node_t *node, const struct field *f,
           void *base, const struct load_path *path)
{
    char **out = field_ptr(base, f);
    const char *s = load_scalar(ld, node, path);

    if (s == NULL) {
        return;
    }
    if (!headers_valid_name(s)) {
        report(ld, node, path,
               "bad name \"%s\" (expected letters, digits and "
               "!#$%%&'*+-.^_`|~)",
               s);
        return;
    }
    free(*out);
    *out = xstrdup(s);
}
