#include "glob.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "xmalloc.h"

/* Start of the segment after the one at 's', or NULL after the last. */
static const char *
seg_next(const char *s, char sep)
{
    while (*s != '\0' && *s != sep) {
        s++;
    }
    return *s == sep ? s + 1 : NULL;
}

static const char *
seg_end(const char *s, char sep)
{
    while (*s != '\0' && *s != sep) {
        s++;
    }
    return s;
}

static bool
is_double_star(const char *p, const char *pe)
{
    return pe - p == 2 && p[0] == '*' && p[1] == '*';
}

/* Variables exist in paths only; a host pattern treats braces literally. */
static bool
has_double_star(const char *p, const char *pe)
{
    for (; p + 1 < pe; p++) {
        if (p[0] == '*' && p[1] == '*') {
            return true;
        }
    }
    return false;
}

static bool
is_var(const char *p, const char *pe, char sep)
{
    return sep == '/' && pe - p >= 2 && p[0] == '{' && pe[-1] == '}';
}

static bool
is_name_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == '-';
}

static bool
valid_name(const char *name, size_t len)
{
    if (len == 0) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (!is_name_char(name[i])) {
            return false;
        }
    }
    return true;
}

static bool
chars_equal(char a, char b, bool icase)
{
    if (icase) {
        return tolower((unsigned char)a) == tolower((unsigned char)b);
    }
    return a == b;
}

/*
 * One segment with '*' and '?' wildcards. Remembering only the last '*' is
 * enough (a later '*' can absorb whatever an earlier one would have), which
 * keeps this O(|p| * |s|) instead of exponential.
 */
static bool
segment_match(const char *p, const char *pe, const char *s, const char *se,
              bool icase)
{
    const char *star = NULL;
    const char *star_s = NULL;

    while (s < se) {
        if (p < pe && *p == '*') {
            star = ++p;
            star_s = s;
        } else if (p < pe && (*p == '?' || chars_equal(*p, *s, icase))) {
            p++;
            s++;
        } else if (star != NULL) {
            p = star;
            s = ++star_s;
        } else {
            return false;
        }
    }
    while (p < pe && *p == '*') {
        p++;
    }
    return p == pe;
}

/*
 * The same last-star backtracking one level up: "**" is the star, and any
 * other pattern segment consumes exactly one subject segment. Variables
 * are numbered by their position in the pattern, so a retry after a "**"
 * simply overwrites the ones it re-matches.
 */
/*
 * A path pattern of a prefix P then a last segment "**", where P holds no
 * '*', no '?' and no variable, as most routes' patterns are, matches P itself
 * and whatever lies below it: a compare of P instead of the walk. Returns 1 or
 * 0, or -1 for another pattern.
 */
static int
prefix_match(const char *pattern, const char *subject)
{
    size_t len = strlen(pattern), plen;

    if (len < 3 || memcmp(pattern + len - 3, "/**", 3) != 0) {
        return -1;
    }
    plen = len - 3;
    if (strcspn(pattern, "*?{") != plen + 1) {
        return -1;
    }
    return strncmp(subject, pattern, plen) == 0 &&
           (subject[plen] == '\0' || subject[plen] == '/');
}

bool
glob_match(const char *pattern, const char *subject, char sep,
           struct glob_vars *vars)
{
    bool icase = sep != '/';
    const char *p = pattern;
    const char *s = subject;
    const char *star_p = NULL;
    const char *star_s = NULL;
    bool have_star = false;
    size_t nv = 0;
    size_t star_nv = 0;

    if (vars != NULL) {
        vars->n = 0;
    }
    if (sep == '/') {
        int m = prefix_match(pattern, subject);

        if (m >= 0) {
            return m == 1;
        }
    }
    while (s != NULL) {
        const char *pe = p != NULL ? seg_end(p, sep) : NULL;
        const char *se = seg_end(s, sep);

        if (p != NULL && is_double_star(p, pe)) {
            have_star = true;
            star_p = seg_next(p, sep);
            star_s = s;
            star_nv = nv;
            p = star_p;
            continue;
        }
        if (p != NULL && is_var(p, pe, sep)) {
            if (se > s) {
                if (vars != NULL && nv < GLOB_MAX_VARS) {
                    struct glob_var *v = &vars->v[nv];

                    v->name = p + 1;
                    v->name_len = (size_t)(pe - p - 2);
                    v->value = s;
                    v->value_len = (size_t)(se - s);
                }
                nv++;
                p = seg_next(p, sep);
                s = seg_next(s, sep);
                continue;
            }
        } else if (p != NULL && segment_match(p, pe, s, se, icase)) {
            p = seg_next(p, sep);
            s = seg_next(s, sep);
            continue;
        }
        if (!have_star) {
            return false;
        }
        /* Let the last "**" swallow one more segment and retry. */
        star_s = seg_next(star_s, sep);
        s = star_s;
        p = star_p;
        nv = star_nv;
    }
    while (p != NULL && is_double_star(p, seg_end(p, sep))) {
        p = seg_next(p, sep);
    }
    if (p != NULL) {
        return false;
    }
    if (vars != NULL) {
        vars->n = nv < GLOB_MAX_VARS ? nv : GLOB_MAX_VARS;
    }
    return true;
}

static int
fail(char *err, size_t errlen, const char *msg)
{
    snprintf(err, errlen, "%s", msg);
    return -1;
}

int
glob_validate(const char *pattern, char sep, char *err, size_t errlen)
{
    const char *names[GLOB_MAX_VARS];
    size_t lens[GLOB_MAX_VARS];
    size_t nv = 0;

    for (const char *p = pattern; p != NULL; p = seg_next(p, sep)) {
        const char *pe = seg_end(p, sep);
        size_t len = (size_t)(pe - p);
        const char *open = memchr(p, '{', len);
        const char *close = memchr(p, '}', len);

        if (has_double_star(p, pe) && !is_double_star(p, pe)) {
            return fail(err, errlen, "'**' must be a whole segment");
        }
        if (sep != '/') {
            if (open != NULL || close != NULL) {
                return fail(err, errlen,
                            "'{' is not allowed in a host pattern");
            }
            continue;
        }
        if (open == NULL && close == NULL) {
            continue;
        }
        if (open == NULL) {
            return fail(err, errlen, "'}' without '{'");
        }
        if (close == NULL || close < open) {
            return fail(err, errlen, "unclosed '{'");
        }
        if (open != p || close != pe - 1) {
            return fail(err, errlen, "a {variable} must be a whole segment");
        }
        if (len == 2) {
            return fail(err, errlen, "empty variable name");
        }
        if (!valid_name(p + 1, len - 2)) {
            snprintf(err, errlen,
                     "variable name \"%.*s\" may only hold letters, "
                     "digits, '_' and '-'",
                     (int)(len - 2), p + 1);
            return -1;
        }
        for (size_t i = 0; i < nv; i++) {
            if (lens[i] == len - 2 && memcmp(names[i], p + 1, len - 2) == 0) {
                snprintf(err, errlen, "duplicate variable \"%.*s\"",
                         (int)(len - 2), p + 1);
                return -1;
            }
        }
        if (nv == GLOB_MAX_VARS) {
            snprintf(err, errlen, "more than %d variables", GLOB_MAX_VARS);
            return -1;
        }
        names[nv] = p + 1;
        lens[nv] = len - 2;
        nv++;
    }
    return 0;
}

static void
append(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
    *buf = xgrow(*buf, cap, *len + n + 1, 1);
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = '\0';
}

const char *
glob_next_ref(const char *s, size_t *len)
{
    for (const char *open = strchr(s, '{'); open != NULL;
         open = strchr(open + 1, '{')) {
        const char *close = strchr(open + 1, '}');

        if (close != NULL && valid_name(open + 1, (size_t)(close - open - 1))) {
            *len = (size_t)(close - open - 1);
            return open;
        }
    }
    return NULL;
}

bool
glob_captures(const char *pattern, const char *name, size_t len)
{
    for (const char *p = pattern; p != NULL; p = seg_next(p, '/')) {
        const char *pe = seg_end(p, '/');

        if (is_var(p, pe, '/') && (size_t)(pe - p) == len + 2 &&
            memcmp(p + 1, name, len) == 0) {
            return true;
        }
    }
    return false;
}

/*
 * Only "{name}" with a well-formed name is a reference, so that a header
 * value such as '{"a": 1}' passes through untouched.
 */
char *
glob_expand(const char *tmpl, const struct glob_vars *vars)
{
    char *buf = NULL;
    size_t len = 0;
    size_t cap = 0;
    const char *s = tmpl;
    const char *ref;
    size_t nlen;

    append(&buf, &len, &cap, "", 0);
    while ((ref = glob_next_ref(s, &nlen)) != NULL) {
        append(&buf, &len, &cap, s, (size_t)(ref - s));
        for (size_t i = 0; vars != NULL && i < vars->n; i++) {
            const struct glob_var *v = &vars->v[i];

            if (v->name_len == nlen && memcmp(v->name, ref + 1, nlen) == 0) {
                append(&buf, &len, &cap, v->value, v->value_len);
                break;
            }
        }
        s = ref + nlen + 2;
    }
    append(&buf, &len, &cap, s, strlen(s));
    return buf;
}
