/*
 * regexp.h - regular expressions for predicates and RewritePath, on PCRE2
 * (Perl syntax, named groups "(?<name>...)", as Spring users write them).
 * The only module that includes pcre2.h. Compiled patterns are immutable
 * and may be shared by threads; each call allocates its own match data.
 */
#ifndef SLUICE_REGEXP_H
#define SLUICE_REGEXP_H

#include <stdbool.h>
#include <stddef.h>

struct regexp; /* opaque */

/*
 * Compiles 'pattern'. On error returns NULL and writes a message such as
 * "missing closing parenthesis at offset 4" into 'err'.
 */
struct regexp *regexp_new(const char *pattern, char *err, size_t errlen);
void regexp_free(struct regexp *re); /* NULL is a no-op */

/* The pattern as written. Borrowed from 're'. */
const char *regexp_pattern(const struct regexp *re);

/* True when the whole of 's' matches (anchored at both ends). */
bool regexp_full_match(const struct regexp *re, const char *s, size_t len);

/*
 * Replaces every match of 're' in 's' with 'replacement', where "$1",
 * "${1}", "${name}" and Spring's "$\{name}" refer to groups and "$$" is a
 * dollar. Returns a new string the caller frees, or NULL with a message in
 * 'err' when the replacement names a group the pattern lacks.
 */
char *regexp_replace(const struct regexp *re, const char *s,
                     const char *replacement, char *err, size_t errlen);

#endif
