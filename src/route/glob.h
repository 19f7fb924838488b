/*
 * glob.h - the pattern language of the Path and Host predicates.
 * Pure: no I/O; only glob_expand() allocates.
 *
 * A pattern is split into segments by 'sep' ('/' for paths, '.' for hosts):
 *   *        any characters within one segment (possibly none)
 *   ?        any one character within one segment
 *   **       a whole segment: zero or more segments ("/api/" then "**"
 *            matches "/api", "/api/" and "/api/a/b")
 *   {name}   a whole segment: exactly one non-empty segment, captured as
 *            a URI variable for SetPath and header templates (paths only)
 *   other    literal; paths compare case-sensitively, hosts do not
 */
#ifndef SLUICE_GLOB_H
#define SLUICE_GLOB_H

#include <stdbool.h>
#include <stddef.h>

#define GLOB_MAX_VARS 8

/* A captured variable; both slices point into the pattern and subject. */
struct glob_var {
    const char *name; /* borrowed from the pattern */
    size_t name_len;
    const char *value; /* borrowed from the subject */
    size_t value_len;
};

struct glob_vars {
    struct glob_var v[GLOB_MAX_VARS];
    size_t n;
};

/*
 * Checks a pattern at load time: 0, or -1 with a message in 'err' (an
 * unclosed '{', an empty or duplicate variable name, more than
 * GLOB_MAX_VARS variables, '{' in a host pattern, "**" mixed with other
 * characters in one segment).
 */
int glob_validate(const char *pattern, char sep, char *err, size_t errlen);

/*
 * True when 'subject' matches the whole 'pattern'. When 'vars' is not NULL
 * it receives the variables of the match (n = 0 when there are none).
 */
bool glob_match(const char *pattern, const char *subject, char sep,
                struct glob_vars *vars);

/*
 * The first reference "{name}" in 's' (a well-formed name between
 * braces, as glob_expand() reads them): a pointer to its '{', with the
 * name's length in '*len'; NULL when there is none.
 */
const char *glob_next_ref(const char *s, size_t *len);

/* True when the path pattern 'pattern' captures the variable 'name'
 * (its 'len' bytes): it has the segment "{name}". */
bool glob_captures(const char *pattern, const char *name, size_t len);

/*
 * Expands "{name}" in 'tmpl' with the values in 'vars' (an unknown name
 * expands to nothing). Returns a new string the caller frees.
 */
char *glob_expand(const char *tmpl, const struct glob_vars *vars);

#endif
