#include "cookie.h"

#include <string.h>
#include <strings.h>

#include "headers.h"

size_t
cookie_find(const struct headers *h, const char *name, const char **value,
            size_t *len)
{
    size_t namelen = strlen(name);
    size_t found = 0;

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
            const char *kend = eq != NULL ? eq : end;

            while (k < kend && headers_is_ows(*k)) {
                k++;
            }
            while (kend > k && headers_is_ows(kend[-1])) {
                kend--;
            }
            if (eq != NULL && (size_t)(kend - k) == namelen &&
                memcmp(k, name, namelen) == 0) {
                const char *val = eq + 1;
                const char *vend = end;

                while (val < vend && headers_is_ows(*val)) {
                    val++;
                }
                while (vend > val && headers_is_ows(vend[-1])) {
                    vend--;
                }
                if (found++ == 0) {
                    *value = val;
                    *len = (size_t)(vend - val);
                }
            }
            s = *end == ';' ? end + 1 : end;
        }
    }
    return found;
}
