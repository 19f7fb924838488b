/*
 * cookie.h - finds a cookie by name in a request's Cookie fields
 * ("a=b; c=d", RFC 6265 section 5.4), and takes one out. Pure: no I/O;
 * only cookie_remove() allocates. Depends on headers.h.
 */
#ifndef SLUICE_COOKIE_H
#define SLUICE_COOKIE_H

#include <stdbool.h>
#include <stddef.h>

struct headers;

/*
 * How many cookies called 'name' (case-sensitive) the Cookie fields of
 * 'h' hold, across every Cookie field, counting those PHP reads as
 * 'name' too (urlcode_php_name_is(): "s%69d", "api.key" for "api_key"),
 * for a caller that must know whether an upstream may read another
 * cookie than the first one; when there is at least one,
 * '*value' and '*len' are the first one's value with blanks trimmed, and
 * without the double quotes RFC 6265 allows around it ("v" is v, as
 * Netty, Spring Cloud Gateway's server, reads it) (borrowed from 'h'; not
 * NUL-terminated).
 * 'h' may be NULL.
 */
size_t cookie_find(const struct headers *h, const char *name,
                   const char **value, size_t *len);

/*
 * True when servers may read cookie 'name' of the Cookie fields of 'h'
 * differently for its quoting: the first cookie 'name' (as cookie_find()
 * counts it) with a double quote in its value other than one pair
 * around all of it, or a quote or a backslash inside that pair; or a
 * value before it that opens a quote it does not close so. Python's
 * http.cookies and Werkzeug read a quoted value across ';' and take "\155" for
 * 'm'; others split at every ';' and keep the backslash. So in 'x="; sid=a;
 * y="' one reads a cookie sid and the other none, and 'sid="\155ine"' is "mine"
 * to one and not to another. Values after it, and quotes inside an unquoted
 * value (a JSON cookie), change nothing. 'h' may be NULL.
 */
bool cookie_quoting_ambiguous(const struct headers *h, const char *name);

/* Answers whether one cookie's value ('len' bytes, borrowed) is wanted. */
typedef bool cookie_match_cb(const char *value, size_t len, const void *arg);

/*
 * True when 'match' holds for one of the cookies called 'name' in the
 * Cookie fields of 'h', tried in order, values trimmed and unquoted as
 * for cookie_find(); 'arg' is passed on. 'h' may be NULL.
 */
bool cookie_any(const struct headers *h, const char *name,
                cookie_match_cb *match, const void *arg);

/*
 * Removes every cookie called 'name' from the Cookie fields of 'h': each
 * field holding one is written again without it ("a=1; t=x; b=2" ->
 * "a=1; b=2"), and a field left with no cookie is removed. Returns how
 * many cookies went. Allocates: the new values live in 'h'.
 */
size_t cookie_remove(struct headers *h, const char *name);

#endif
