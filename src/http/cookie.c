#include "cookie.h"

#include <string.h>
#include <strings.h>

#include "headers.h"

/*
 * Calls 'each' with every cookie called 'name' in the Cookie fields of
 * 'h', in order, until it returns true; returns whether one did.
 */
static bool
scan(const struct headers *h, const char *name, cookie_match_cb *each,
     const void *arg)
{
    size_t namelen = strlen(name);

    for (size_t f = 0; h != NULL && f < h->n; f++) {
        const char *s = h->v[f].value;

        if (strcasecmp(h->v[f].name, "Cookie") != 0) {
            continue;
        }
        while (*s != '\0') {
            size_t n = strcspn(s, ";");
            const char *end = s + n;
            const char *eq = memchr(s, '=', n);
            const char *k = s;
            size_t klen = (size_t)((eq != NULL ? eq : end) - s);

            headers_trim_ows(&k, &klen);
            if (eq != NULL && klen == namelen &&
                memcmp(k, name, namelen) == 0) {
                const char *val = eq + 1;
                size_t vlen = (size_t)(end - val);

                headers_trim_ows(&val, &vlen);
                if (each(val, vlen, arg)) {
                    return true;
                }
            }
            s = *end == ';' ? end + 1 : end;
        }
    }
    return false;
}

/* What cookie_find() gathers. */
struct found {
    size_t n;          /* cookies seen */
    const char *value; /* the first's value */
    size_t len;        /* its length */
};

static bool
on_found(const char *value, size_t len, const void *arg)
{
    struct found *fd = (struct found *)arg;

    if (fd->n++ == 0) {
        fd->value = value;
        fd->len = len;
    }
    return false;
}

size_t
cookie_find(const struct headers *h, const char *name, const char **value,
            size_t *len)
{
    struct found fd = {0, NULL, 0};

    scan(h, name, on_found, &fd);
    if (fd.n > 0) {
        *value = fd.value;
        *len = fd.len;
    }
    return fd.n;
}

bool
cookie_any(const struct headers *h, const char *name, cookie_match_cb *match,
           const void *arg)
{
    return scan(h, name, match, arg);
}
