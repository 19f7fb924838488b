#include "urlcode.h"

#include <stdlib.h>
#include <string.h>

#include "xmalloc.h"

static int
hex_value(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

int
urlcode_escape(const char *s, size_t n)
{
    int hi;
    int lo;

    if (n < 3 || s[0] != '%') {
        return -1;
    }
    hi = hex_value(s[1]);
    lo = hex_value(s[2]);
    if (hi < 0 || lo < 0) {
        return -1;
    }
    return hi * 16 + lo;
}

char *
urlcode_percent_decode(const char *s, size_t n)
{
    char *out = xmalloc(n + 1);
    size_t o = 0;

    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s[i];

        if (c == '%') {
            c = urlcode_escape(s + i, n - i);
            i += 2;
        }
        if (c <= 0) {
            free(out);
            return NULL;
        }
        out[o++] = (char)c;
    }
    out[o] = '\0';
    return out;
}

size_t
urlcode_form_byte(const char *s, size_t n, unsigned char *c)
{
    int e;

    if (s[0] == '+') {
        *c = ' ';
        return 1;
    }
    e = urlcode_escape(s, n);
    if (e >= 0) {
        *c = (unsigned char)e;
        return 3;
    }
    *c = (unsigned char)s[0];
    return 1;
}

size_t
urlcode_form_decode(const char *s, size_t n, char *dst)
{
    size_t i = 0;
    size_t o = 0;

    while (i < n) {
        unsigned char c;

        i += urlcode_form_byte(s + i, n - i, &c);
        dst[o++] = (char)c;
    }
    return o;
}

/* Whether (s, n) form-decodes to exactly 'want'. */
static bool
form_equals(const char *s, size_t n, const char *want)
{
    size_t i = 0;

    while (i < n) {
        unsigned char c;

        i += urlcode_form_byte(s + i, n - i, &c);
        /* A decoded NUL never matches: 'want' ends at its first. */
        if (*want == '\0' || c != (unsigned char)*want) {
            return false;
        }
        want++;
    }
    return *want == '\0';
}

/* Whether the form-decoded (s, n) holds a ']' before any NUL. */
static bool
closes_bracket(const char *s, size_t n)
{
    size_t i = 0;

    while (i < n) {
        unsigned char c;

        i += urlcode_form_byte(s + i, n - i, &c);
        if (c == ']') {
            return true;
        }
        if (c == '\0') {
            return false;
        }
    }
    return false;
}

bool
urlcode_php_name_is(const char *s, size_t n, const char *name)
{
    size_t i = 0;
    bool leading = true, mangled = true;

    while (i < n) {
        unsigned char c;
        size_t used = urlcode_form_byte(s + i, n - i, &c);

        if (c == '\0') {
            break;
        }
        i += used;
        if (leading && c == ' ') {
            continue;
        }
        leading = false;
        if (mangled && (c == ' ' || c == '.')) {
            c = '_';
        } else if (mangled && c == '[') {
            if (closes_bracket(s + i, n - i)) {
                break; /* name[...]: an array called 'name' */
            }
            c = '_';
            mangled = false; /* the rest is read as written */
        }
        if (*name == '\0' || c != (unsigned char)*name) {
            return false;
        }
        name++;
    }
    return !leading && *name == '\0';
}

/* urlcode_query_next(), and with 'php' urlcode_query_next_php(). */
static bool
query_next(const char **cursor, const char *name, bool php, const char **value,
           size_t *valuelen)
{
    const char *s = *cursor;

    while (s != NULL) {
        size_t n = strcspn(s, "&");
        const char *eq = memchr(s, '=', n);
        size_t namelen = eq != NULL ? (size_t)(eq - s) : n;
        const char *next = s[n] == '&' ? s + n + 1 : NULL;

        if (form_equals(s, namelen, name) ||
            (php && urlcode_php_name_is(s, namelen, name))) {
            *value = eq != NULL ? eq + 1 : s + n;
            *valuelen = eq != NULL ? n - namelen - 1 : 0;
            *cursor = next;
            return true;
        }
        s = next;
    }
    *cursor = NULL;
    return false;
}

bool
urlcode_query_next(const char **cursor, const char *name, const char **value,
                   size_t *valuelen)
{
    return query_next(cursor, name, false, value, valuelen);
}

bool
urlcode_query_next_php(const char **cursor, const char *name,
                       const char **value, size_t *valuelen)
{
    return query_next(cursor, name, true, value, valuelen);
}

bool
urlcode_query_first(const char *query, const char *name, const char **value,
                    size_t *valuelen)
{
    return urlcode_query_next(&query, name, value, valuelen);
}
