/*
 * headers.h - an ordered list of HTTP header fields, names compared
 * case-insensitively. Pure: used by filters and predicates so that they
 * need no event loop. Not thread-safe; one list belongs to one request.
 */
#ifndef SLUICE_HEADERS_H
#define SLUICE_HEADERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct header {
    char *name;  /* in the list's own memory */
    char *value; /* in the list's own memory */
};

/*
 * The copies of names and values live in a few blocks that the list
 * owns, freed all at once by headers_deinit(), so that a field costs no
 * allocation of its own; a removed field's bytes stay until then. A list
 * may be moved by assignment (the blocks go with it); never copied.
 */
struct headers {
    struct header *v; /* fields in arrival order; owned */
    size_t n;         /* fields in use */
    size_t cap;       /* allocated slots */
    char *mem;        /* newest block of copies, or NULL; each block
                         begins with a pointer to the one before; owned */
    size_t mem_used;  /* bytes used in 'mem', its link included */
    size_t mem_cap;   /* bytes in 'mem' */
};

void headers_init(struct headers *h);
void headers_deinit(struct headers *h); /* frees every field */
/*
 * Removes every field but keeps the memory of the newest block and of the
 * slots, for a list that is filled again and again.
 */
void headers_clear(struct headers *h);

/* Appends a copy of 'name' and 'value'. */
void headers_add(struct headers *h, const char *name, const char *value);
/* The same with the lengths known ('name' and 'value' need no NUL). */
void headers_add_n(struct headers *h, const char *name, size_t name_len,
                   const char *value, size_t value_len);
/* Removes every field called 'name', then appends one. */
void headers_set(struct headers *h, const char *name, const char *value);
/* Removes every field called 'name'; returns how many there were. */
size_t headers_remove(struct headers *h, const char *name);
/* Decides whether a field called 'name' goes; 'arg' is the caller's. */
typedef bool (*headers_match_cb)(const char *name, const void *arg);
/*
 * Removes every field whose name 'match' holds for, keeping the others in
 * order; returns how many went. 'match' runs once per field, in order.
 */
size_t headers_remove_if(struct headers *h, headers_match_cb match,
                         const void *arg);
/* Value of the first field called 'name', or NULL. Borrowed. */
const char *headers_get(const struct headers *h, const char *name);
/* How many fields are called 'name'. */
size_t headers_count(const struct headers *h, const char *name);
/*
 * Every field called 'name' as one comma-separated list, first field
 * first: the one value RFC 9110 5.3 says repeated fields of a list mean.
 * A new string the caller frees, or NULL when there is no such field.
 */
char *headers_join(const struct headers *h, const char *name);

/*
 * True when the field value of 'len' bytes at 'value' lists 'token'
 * (compared without case): cut at ',', each item without the OWS around
 * it (RFC 9110 5.6.1).
 */
bool headers_list_has(const char *value, size_t len, const char *token);

/* RFC 9110 token: one or more tchar. */
bool headers_valid_name(const char *name);
/* No CR, LF or NUL, and no other control character except HTAB. */
bool headers_valid_value(const char *value);
/* strlen('name') when headers_valid_name() holds, else 0. */
size_t headers_name_len(const char *name);
/* strlen('value') when headers_valid_value() holds, else SIZE_MAX. */
size_t headers_value_len(const char *value);
/* The same tests on the 'len' bytes at 'name' / 'value' (not
 * NUL-terminated; a NUL among them fails). */
bool headers_name_ok_n(const char *name, size_t len);
bool headers_value_ok_n(const char *value, size_t len);

/* True for the optional whitespace of RFC 9110 5.6.3: SP and HTAB. */
static inline bool
headers_is_ows(char c)
{
    return c == ' ' || c == '\t';
}

/* Narrows the slice [*p, *p + *len) to leave out the OWS around it. */
void headers_trim_ows(const char **p, size_t *len);

/* Leaves out of every value of 'h' the OWS around it, in place: the value
 * as a recipient reads it (RFC 9112 5). */
void headers_trim_values(struct headers *h);

#endif
