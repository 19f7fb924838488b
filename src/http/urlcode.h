/*
 * urlcode.h - percent-decoding (RFC 3986 section 2.1) and the query string
 * read as application/x-www-form-urlencoded, over (ptr, len) slices.
 * Pure: no I/O. Depends on base (xmalloc) only.
 */
#ifndef SLUICE_URLCODE_H
#define SLUICE_URLCODE_H

#include <stdbool.h>
#include <stddef.h>

/*
 * The byte that the escape "%XX" at the start of (s, n) stands for, 0 to
 * 255; -1 if (s, n) does not start with '%' and two hex digits (either
 * case).
 */
int urlcode_escape(const char *s, size_t n);

/*
 * Strict percent-decoding of (s, n) into a new NUL-terminated string the
 * caller frees. '+' is a plain '+'. NULL if a '%' is not followed by two
 * hex digits, or if the result would hold a NUL ("%00" or a raw NUL), which
 * would silently truncate it.
 */
char *urlcode_percent_decode(const char *s, size_t n);

/*
 * Lenient form decoding of one byte at the start of (s, n), n > 0: '+' is
 * a space, "%XX" the byte it escapes, and anything else, a malformed '%'
 * included, itself (as browsers and most servers read it). Stores the byte
 * in '*c' and returns how many input bytes it used: 1 or 3.
 */
size_t urlcode_form_byte(const char *s, size_t n, unsigned char *c);

/*
 * Form-decodes all of (s, n) into 'dst', which holds at least 'n' bytes,
 * and returns the decoded length. No NUL is added; "%00" yields a NUL byte.
 */
size_t urlcode_form_decode(const char *s, size_t n, char *dst);

/*
 * Query parameter lookup, the one both the Query predicate and the
 * query:NAME key read. 'query' is the raw string after '?' (no '?', no
 * fragment), or NULL for none. Parameters are split on '&' only; a
 * parameter's name, up to its first '=', matches when it form-decodes to
 * exactly 'name' ("api%5Fkey" and "api+key" are "api_key" and "api key").
 * A parameter without '=' has the empty value.
 *
 * Finds the next parameter named 'name' at or after '*cursor' (start with
 * the query itself), points '*value' and '*valuelen' at its raw, still
 * encoded value (borrowed from the query), and moves '*cursor' past it, so
 * that calling again yields the next value. False, leaving '*value' alone,
 * when no further parameter has that name.
 */
bool urlcode_query_next(const char **cursor, const char *name,
                        const char **value, size_t *valuelen);

/*
 * As urlcode_query_next(), but a parameter also matches when PHP reads
 * its name as 'name' (urlcode_php_name_is()): "api.key", "api key",
 * "api[key" and "api_key[]" are all "api_key" to a PHP upstream, the
 * last also to Rack. For what must count every parameter an upstream may
 * take for 'name' (a rate-limit key).
 */
bool urlcode_query_next_php(const char **cursor, const char *name,
                            const char **value, size_t *valuelen);

/*
 * True when PHP reads the raw name (s, n) of a query parameter or cookie
 * as the top-level variable 'name': form-decoded, cut at a NUL, leading
 * spaces skipped, ' ' and '.' read as '_' up to the first '[', which
 * opens an array of the name before it when a ']' follows, and is read as
 * '_' when none does ("Variables From External Sources", PHP manual).
 */
bool urlcode_php_name_is(const char *s, size_t n, const char *name);

/* The raw value of the first parameter named 'name', as above. */
bool urlcode_query_first(const char *query, const char *name,
                         const char **value, size_t *valuelen);

#endif
