#include "strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "xmalloc.h"

/* The first allocation: most strings built here are a header value or a
 * short body, and growing 4, 8, 16... bytes at a time costs more. */
#define STRBUF_FIRST 128

void
strbuf_add(struct strbuf *b, const char *s, size_t len)
{
    size_t need = b->n + len + 1;

    if (need > b->cap) {
        b->p =
            xgrow(b->p, &b->cap, need < STRBUF_FIRST ? STRBUF_FIRST : need, 1);
    }
    memcpy(b->p + b->n, s, len);
    b->n += len;
    b->p[b->n] = '\0';
}

char *
strbuf_append(struct strbuf *b, size_t len)
{
    size_t need = b->n + len + 1;
    char *at;

    if (need > b->cap) {
        b->p =
            xgrow(b->p, &b->cap, need < STRBUF_FIRST ? STRBUF_FIRST : need, 1);
    }
    at = b->p + b->n;
    b->n += len;
    b->p[b->n] = '\0';
    return at;
}

void
strbuf_adds(struct strbuf *b, const char *s)
{
    strbuf_add(b, s, strlen(s));
}

void
strbuf_addf(struct strbuf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n <= 0) {
        return;
    }
    b->p = xgrow(b->p, &b->cap, b->n + (size_t)n + 1, 1);
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)n;
}

/* "00" to "99": two digits per division, half the divisions. */
static const char dec_pairs[201] =
    "000102030405060708091011121314151617181920212223242526272829"
    "303132333435363738394041424344454647484950515253545556575859"
    "606162636465666768697071727374757677787980818283848586878889"
    "90919293949596979899";

const char *
u64_dec(unsigned long long v, char *buf)
{
    char *p = buf + U64_DEC_MAX - 1;

    *p = '\0';
    while (v >= 100) {
        const char *d = dec_pairs + (v % 100) * 2;

        v /= 100;
        p -= 2;
        p[0] = d[0];
        p[1] = d[1];
    }
    if (v >= 10) {
        p -= 2;
        p[0] = dec_pairs[v * 2];
        p[1] = dec_pairs[v * 2 + 1];
    } else {
        *--p = (char)('0' + v);
    }
    return p;
}

const char *
u64_dec_n(unsigned long long v, char *buf, size_t *len)
{
    const char *digits = u64_dec(v, buf);

    /* u64_dec() ends the digits where the buffer ends. */
    *len = (size_t)(buf + U64_DEC_MAX - 1 - digits);
    return digits;
}

char *
u64_put(char *at, unsigned long long v)
{
    char buf[U64_DEC_MAX];
    const char *digits;
    size_t n;

    /* Most are short: a RESP length, a count. */
    if (v < 10) {
        *at = (char)('0' + v);
        return at + 1;
    }
    if (v < 100) {
        at[0] = dec_pairs[v * 2];
        at[1] = dec_pairs[v * 2 + 1];
        return at + 2;
    }
    digits = u64_dec_n(v, buf, &n);
    memcpy(at, digits, n);
    return at + n;
}

void
strbuf_add_u64(struct strbuf *b, unsigned long long v)
{
    char buf[U64_DEC_MAX];
    size_t n;
    const char *digits = u64_dec_n(v, buf, &n);

    strbuf_add(b, digits, n);
}

void
strbuf_add_json(struct strbuf *b, const char *s)
{
    const unsigned char *run;

    if (s == NULL) {
        strbuf_add(b, "null", 4);
        return;
    }
    strbuf_add(b, "\"", 1);
    run = (const unsigned char *)s;
    for (const unsigned char *c = run; *c; c++) {
        char esc[8];

        if (*c != '"' && *c != '\\' && *c >= 0x20 && *c != 0x7f) {
            continue; /* copied with its run */
        }
        strbuf_add(b, (const char *)run, (size_t)(c - run));
        run = c + 1;
        if (*c == '"' || *c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*c;
            strbuf_add(b, esc, 2);
        } else {
            snprintf(esc, sizeof(esc), "\\u%04x", *c);
            strbuf_add(b, esc, 6);
        }
    }
    strbuf_adds(b, (const char *)run);
    strbuf_add(b, "\"", 1);
}

void
strbuf_reset(struct strbuf *b)
{
    b->n = 0;
    if (b->p != NULL) {
        b->p[0] = '\0';
    }
}

char *
strbuf_take(struct strbuf *b)
{
    char *p = b->p != NULL ? b->p : xstrdup("");

    b->p = NULL;
    b->n = 0;
    b->cap = 0;
    return p;
}
