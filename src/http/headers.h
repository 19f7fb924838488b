/*
 * headers.h - an ordered list of HTTP header fields, names compared
 * case-insensitively. Pure: used by filters and predicates so that they
 * need no event loop. Not thread-safe; one list belongs to one request.
 */
#ifndef SLUICE_HEADERS_H
#define SLUICE_HEADERS_H

#include <stdbool.h>
#include <stddef.h>

struct header {
    char *name;  /* owned */
    char *value; /* owned */
};

struct headers {
    struct header *v; /* fields in arrival order; owned */
    size_t n;         /* fields in use */
    size_t cap;       /* allocated slots */
};

void headers_init(struct headers *h);
void headers_deinit(struct headers *h); /* frees every field */

/* Appends a copy of 'name' and 'value'. */
void headers_add(struct headers *h, const char *name, const char *value);
/* Removes every field called 'name', then appends one. */
void headers_set(struct headers *h, const char *name, const char *value);
/* Removes every field called 'name'; returns how many there were. */
size_t headers_remove(struct headers *h, const char *name);
/* Value of the first field called 'name', or NULL. Borrowed. */
const char *headers_get(const struct headers *h, const char *name);

/* RFC 9110 token: one or more tchar. */
bool headers_valid_name(const char *name);
/* No CR, LF or NUL, and no other control character except HTAB. */
bool headers_valid_value(const char *value);

#endif
