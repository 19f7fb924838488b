#include "cookie.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "headers.h"
#include "strbuf.h"
#include "urlcode.h"

/* One "name=value" of a Cookie field, both trimmed; the value as sent,
 * quotes and all. */
struct pair {
    const char *k; /* the name */
    size_t klen;
    const char *v; /* the value; meaningful if 'has_eq' */
    size_t vlen;
    const char *end; /* where the pair ends, before its ';' */
    bool has_eq;     /* it has an '=' (one without is no cookie) */
};

/* The pair at '*s' (a Cookie field's value, or what is left of it), and
 * '*s' past it; false at the end. */
static bool
next_pair(const char **s, struct pair *p)
{
    const char *start = *s;
    size_t n = strcspn(start, ";");
    const char *eq = memchr(start, '=', n);

    if (*start == '\0') {
        return false;
    }
    p->k = start;
    p->klen = (size_t)((eq != NULL ? eq : start + n) - start);
    p->v = eq != NULL ? eq + 1 : start + n;
    p->vlen = (size_t)(start + n - p->v);
    p->end = start + n;
    p->has_eq = eq != NULL;
    headers_trim_ows(&p->k, &p->klen);
    headers_trim_ows(&p->v, &p->vlen);
    *s = start + n + (start[n] == ';');
    return true;
}

/* Whether 'p' is a cookie called 'name' ('namelen' bytes), or with 'php'
 * one PHP reads as 'name' (urlcode_php_name_is()). */
static bool
pair_named(const struct pair *p, const char *name, size_t namelen, bool php)
{
    return p->has_eq &&
           ((p->klen == namelen && memcmp(p->k, name, namelen) == 0) ||
            (php && urlcode_php_name_is(p->k, p->klen, name)));
}

/* Where a walk of every pair of the Cookie fields of 'h' is. */
struct walk {
    const struct headers *h; /* borrowed; may be NULL */
    size_t f;                /* the field of 's' */
    const char *s;           /* what is left of it, or NULL before */
};

/* The next pair of the walk, across the fields in order; false after the
 * last. */
static bool
walk_next(struct walk *w, struct pair *p)
{
    while (w->h != NULL) {
        if (w->s != NULL && next_pair(&w->s, p)) {
            return true;
        }
        if (w->s != NULL) {
            w->f++;
        }
        while (w->f < w->h->n &&
               strcasecmp(w->h->v[w->f].name, "Cookie") != 0) {
            w->f++;
        }
        if (w->f >= w->h->n) {
            return false;
        }
        w->s = w->h->v[w->f].value;
    }
    return false;
}

/*
 * Calls 'each' with every cookie called 'name' in the Cookie fields of
 * 'h', in order, until it returns true; returns whether one did. With
 * 'php', also with those PHP reads as 'name'.
 */
static bool
scan(const struct headers *h, const char *name, bool php, cookie_match_cb *each,
     const void *arg)
{
    size_t namelen = strlen(name);
    struct walk w = {h, 0, NULL};
    struct pair p;

    while (walk_next(&w, &p)) {
        if (!pair_named(&p, name, namelen, php)) {
            continue;
        }
        /* cookie-value = *cookie-octet / DQUOTE *cookie-octet DQUOTE
         * (RFC 6265 4.1.1); servers read it unquoted. */
        if (p.vlen >= 2 && p.v[0] == '"' && p.v[p.vlen - 1] == '"') {
            p.v++;
            p.vlen -= 2;
        }
        if (each(p.v, p.vlen, arg)) {
            return true;
        }
    }
    return false;
}

/* What cookie_find() gathers. */
struct found {
    size_t n;          /* cookies seen */
    const char *value; /* the first's value */
    size_t len;        /* its length */
};

static bool
on_found(const char *value, size_t len, const void *arg)
{
    struct found *fd = (struct found *)arg;

    if (fd->n++ == 0) {
        fd->value = value;
        fd->len = len;
    }
    return false;
}

size_t
cookie_find(const struct headers *h, const char *name, const char **value,
            size_t *len)
{
    struct found fd = {0, NULL, 0};

    scan(h, name, true, on_found, &fd);
    if (fd.n > 0) {
        *value = fd.value;
        *len = fd.len;
    }
    return fd.n;
}

bool
cookie_any(const struct headers *h, const char *name, cookie_match_cb *match,
           const void *arg)
{
    return scan(h, name, false, match, arg);
}

/* Whether the cookie value (v, n), trimmed, is one every server reads
 * alike: unquoted, or one pair of quotes around it with neither a quote
 * nor a backslash inside. */
static bool
plainly_quoted(const char *v, size_t n)
{
    if (n == 0 || v[0] != '"') {
        return true; /* quotes inside an unquoted value open nothing */
    }
    return n >= 2 && v[n - 1] == '"' && memchr(v + 1, '"', n - 2) == NULL &&
           memchr(v + 1, '\\', n - 2) == NULL;
}

bool
cookie_quoting_ambiguous(const struct headers *h, const char *name)
{
    size_t namelen = strlen(name);
    struct walk w = {h, 0, NULL};
    struct pair p;

    while (walk_next(&w, &p)) {
        if (pair_named(&p, name, namelen, true)) {
            /* Its own value: a quote anywhere but as the pair. */
            return memchr(p.v, '"', p.vlen) != NULL &&
                   (p.v[0] != '"' || !plainly_quoted(p.v, p.vlen));
        }
        if (!plainly_quoted(p.v, p.vlen)) {
            return true; /* an open quote before it may hide it */
        }
    }
    return false;
}

size_t
cookie_remove(struct headers *h, const char *name)
{
    size_t namelen = strlen(name);
    size_t removed = 0, kept = 0;

    for (size_t f = 0; f < h->n; f++) {
        struct header hf = h->v[f];
        struct strbuf b = STRBUF_INIT;
        size_t gone = 0;

        if (strcasecmp(hf.name, "Cookie") == 0) {
            struct pair p;

            for (const char *s = hf.value; next_pair(&s, &p);) {
                const char *k = p.k;
                size_t klen = (size_t)(p.end - p.k);

                if (pair_named(&p, name, namelen, false)) {
                    gone++;
                    continue;
                }
                headers_trim_ows(&k, &klen);
                if (klen > 0) {
                    strbuf_adds(&b, b.n > 0 ? "; " : "");
                    strbuf_add(&b, k, klen);
                }
            }
        }
        if (gone == 0) {
            h->v[kept++] = hf;
        } else if (b.n > 0) {
            /* The new value goes into the list's own memory; the slot
             * keeps its place among the fields. */
            headers_add_n(h, hf.name, strlen(hf.name), b.p, b.n);
            h->v[kept++] = h->v[--h->n];
        }
        removed += gone;
        free(b.p);
    }
    h->n = kept;
    return removed;
}
