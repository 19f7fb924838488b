#include "headers.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "strbuf.h"
#include "xmalloc.h"

/* The first block of a list; a larger one when a field needs it. */
#define HEADERS_BLOCK 1024

void
headers_init(struct headers *h)
{
    h->v = NULL;
    h->n = 0;
    h->cap = 0;
    h->mem = NULL;
    h->mem_used = 0;
    h->mem_cap = 0;
}

/* Frees every block older than the newest. */
static void
free_older_blocks(struct headers *h)
{
    char *b;

    if (h->mem == NULL) {
        return;
    }
    memcpy(&b, h->mem, sizeof(b));
    while (b != NULL) {
        char *prev;

        memcpy(&prev, b, sizeof(prev));
        free(b);
        b = prev;
    }
    b = NULL;
    memcpy(h->mem, &b, sizeof(b));
}

void
headers_deinit(struct headers *h)
{
    free_older_blocks(h);
    free(h->mem);
    free(h->v);
    headers_init(h);
}

void
headers_clear(struct headers *h)
{
    free_older_blocks(h);
    h->n = 0;
    h->mem_used = h->mem != NULL ? sizeof(char *) : 0;
}

/* 'len' bytes of the list's memory. */
static char *
mem_take(struct headers *h, size_t len)
{
    char *p;

    if (h->mem == NULL || h->mem_cap - h->mem_used < len) {
        size_t cap =
            h->mem_cap * 2 > HEADERS_BLOCK ? h->mem_cap * 2 : HEADERS_BLOCK;
        char *b;

        if (cap - sizeof(char *) < len) {
            cap = len + sizeof(char *);
        }
        b = xmalloc(cap);
        memcpy(b, &h->mem, sizeof(h->mem));
        h->mem = b;
        h->mem_cap = cap;
        h->mem_used = sizeof(char *);
    }
    p = h->mem + h->mem_used;
    h->mem_used += len;
    return p;
}

void
headers_add_n(struct headers *h, const char *name, size_t name_len,
              const char *value, size_t value_len)
{
    char *p = mem_take(h, name_len + value_len + 2);

    if (h->n == h->cap) {
        h->v = xgrow(h->v, &h->cap, h->n + 1, sizeof(h->v[0]));
    }
    memcpy(p, name, name_len);
    p[name_len] = '\0';
    memcpy(p + name_len + 1, value, value_len);
    p[name_len + 1 + value_len] = '\0';
    h->v[h->n].name = p;
    h->v[h->n].value = p + name_len + 1;
    h->n++;
}

void
headers_add(struct headers *h, const char *name, const char *value)
{
    headers_add_n(h, name, strlen(name), value, strlen(value));
}

void
headers_set(struct headers *h, const char *name, const char *value)
{
    headers_remove(h, name);
    headers_add(h, name, value);
}

size_t
headers_remove(struct headers *h, const char *name)
{
    size_t kept = 0;
    size_t removed = 0;

    /* Compact in place so that the remaining fields keep their order. */
    for (size_t i = 0; i < h->n; i++) {
        if (strcasecmp(h->v[i].name, name) == 0) {
            removed++;
        } else {
            h->v[kept++] = h->v[i];
        }
    }
    h->n = kept;
    return removed;
}

size_t
headers_remove_if(struct headers *h, headers_match_cb match, const void *arg)
{
    size_t kept = 0, removed;

    for (size_t i = 0; i < h->n; i++) {
        if (!match(h->v[i].name, arg)) {
            h->v[kept++] = h->v[i];
        }
    }
    removed = h->n - kept;
    h->n = kept;
    return removed;
}

/*
 * 'a' is 'b' in any case. The first bytes are compared first, folded as
 * letters fold: equal names always pass that, and most others stop there.
 */
static bool
same_name(const char *a, const char *b)
{
    return (a[0] | 0x20) == (b[0] | 0x20) && strcasecmp(a, b) == 0;
}

const char *
headers_get(const struct headers *h, const char *name)
{
    for (size_t i = 0; i < h->n; i++) {
        if (same_name(h->v[i].name, name)) {
            return h->v[i].value;
        }
    }
    return NULL;
}

size_t
headers_count(const struct headers *h, const char *name)
{
    size_t n = 0;

    for (size_t i = 0; i < h->n; i++) {
        if (same_name(h->v[i].name, name)) {
            n++;
        }
    }
    return n;
}

char *
headers_join(const struct headers *h, const char *name)
{
    struct strbuf b = STRBUF_INIT;
    bool any = false;

    for (size_t i = 0; i < h->n; i++) {
        if (same_name(h->v[i].name, name)) {
            if (any) {
                strbuf_add(&b, ", ", 2);
            }
            strbuf_adds(&b, h->v[i].value);
            any = true;
        }
    }
    /* strbuf_add() allocates even for no bytes: a lone empty field is
     * "", not NULL. */
    return b.p;
}

/*
 * RFC 9110 5.6.2: tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" /
 * "-" / "." / "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA, one entry per
 * byte (the unit test checks every byte).
 */
static const unsigned char tchar[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, 1, 1, 0,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
};

size_t
headers_name_len(const char *name)
{
    const unsigned char *p = (const unsigned char *)name;

    if (name == NULL) {
        return 0;
    }
    while (tchar[*p]) {
        p++;
    }
    /* A valid name ends at its NUL, the one byte that is not a tchar. */
    return *p == '\0' ? (size_t)(p - (const unsigned char *)name) : 0;
}

bool
headers_valid_name(const char *name)
{
    return headers_name_len(name) > 0;
}

/* True when a byte of the 8 in 'w' is below 0x20 or is 0x7f (DEL). */
static bool
word_has_control(uint64_t w)
{
    const uint64_t ones = 0x0101010101010101u, high = 0x8080808080808080u;
    uint64_t del = w ^ (0x7fu * ones);

    return (((w - 0x20u * ones) & ~w) | ((del - ones) & ~del)) & high;
}

/* True when a byte in [p, p + n) is a control character but HTAB. */
static bool
has_control(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if ((p[i] < 0x20 && p[i] != '\t') || p[i] == 0x7f) {
            return true;
        }
    }
    return false;
}

bool
headers_name_ok_n(const char *name, size_t len)
{
    const unsigned char *p = (const unsigned char *)name;

    for (size_t i = 0; i < len; i++) {
        if (!tchar[p[i]]) {
            return false;
        }
    }
    return len > 0;
}

bool
headers_value_ok_n(const char *value, size_t len)
{
    const unsigned char *p = (const unsigned char *)value;
    size_t i = 0;

    for (; i + 8 <= len; i += 8) {
        uint64_t w;

        memcpy(&w, p + i, 8);
        if (word_has_control(w) && has_control(p + i, 8)) {
            return false;
        }
    }
    return !has_control(p + i, len - i);
}

size_t
headers_value_len(const char *value)
{
    const unsigned char *p = (const unsigned char *)value;
    size_t len, i = 0;

    if (value == NULL) {
        return SIZE_MAX;
    }
    /* obs-text (0x80-0xFF) stays allowed: RFC 9110 still accepts it. */
    len = strlen(value);
    /* Eight bytes at a time; a word that may hold one, byte by byte (an
       HTAB, or a byte of 0xa0-0xff, makes the word test say maybe). */
    for (; i + 8 <= len; i += 8) {
        uint64_t w;

        memcpy(&w, p + i, 8);
        if (word_has_control(w) && has_control(p + i, 8)) {
            return SIZE_MAX;
        }
    }
    return has_control(p + i, len - i) ? SIZE_MAX : len;
}

bool
headers_valid_value(const char *value)
{
    return headers_value_len(value) != SIZE_MAX;
}

void
headers_trim_ows(const char **p, size_t *len)
{
    while (*len > 0 && headers_is_ows(**p)) {
        (*p)++;
        (*len)--;
    }
    while (*len > 0 && headers_is_ows((*p)[*len - 1])) {
        (*len)--;
    }
}

void
headers_trim_values(struct headers *h)
{
    for (size_t i = 0; i < h->n; i++) {
        const char *v = h->v[i].value;
        size_t len = strlen(v);

        headers_trim_ows(&v, &len);
        h->v[i].value += v - h->v[i].value;
        h->v[i].value[len] = '\0';
    }
}

bool
headers_list_has(const char *value, size_t len, const char *token)
{
    size_t tlen = strlen(token);
    const char *end = value + len;

    while (value <= end) {
        const char *comma = memchr(value, ',', (size_t)(end - value));
        const char *item = value;
        size_t n = (size_t)((comma != NULL ? comma : end) - value);

        headers_trim_ows(&item, &n);
        if (n == tlen && strncasecmp(item, token, tlen) == 0) {
            return true;
        }
        if (comma == NULL) {
            break;
        }
        value = comma + 1;
    }
    return false;
}
