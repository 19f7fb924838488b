/*
 * strbuf.h - a growable string, for building JSON and text bodies.
 * Pure: allocates, no I/O.
 */
#ifndef SLUICE_STRBUF_H
#define SLUICE_STRBUF_H

#include <stddef.h>

struct strbuf {
    char *p;    /* NUL-terminated once anything was added; owned */
    size_t n;   /* bytes used, without the NUL */
    size_t cap; /* bytes allocated */
};

#define STRBUF_INIT                                                            \
    {                                                                          \
        NULL, 0, 0                                                             \
    }

void strbuf_add(struct strbuf *b, const char *s, size_t len);
void strbuf_adds(struct strbuf *b, const char *s);
/* Makes 'b' 'len' bytes longer (NUL-terminated after them) and returns
 * where those bytes go, for the caller to fill at once. */
char *strbuf_append(struct strbuf *b, size_t len);
void strbuf_addf(struct strbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Room for any unsigned 64-bit number in decimal, NUL included. */
#define U64_DEC_MAX 21

/* 'v' in decimal, without printf: written at the end of 'buf' (of
 * U64_DEC_MAX bytes); returns where the digits begin. */
const char *u64_dec(unsigned long long v, char *buf);
/* u64_dec(), with the number of digits in '*len'. */
const char *u64_dec_n(unsigned long long v, char *buf, size_t *len);
/* 'v' in decimal at 'at' (room for U64_DEC_MAX - 1 bytes), no NUL;
 * returns where the digits end. */
char *u64_put(char *at, unsigned long long v);

/* 'v' in decimal, without printf. */
void strbuf_add_u64(struct strbuf *b, unsigned long long v);
/* Adds 's' as a JSON string, quotes included; NULL adds null. */
void strbuf_add_json(struct strbuf *b, const char *s);
/* Empties 'b' and keeps its memory for what is added next. */
void strbuf_reset(struct strbuf *b);
/* Hands the string over (never NULL: "" when empty); 'b' is reset. */
char *strbuf_take(struct strbuf *b);

#endif
