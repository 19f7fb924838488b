#include "headers.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "xmalloc.h"

void
headers_init(struct headers *h)
{
    h->v = NULL;
    h->n = 0;
    h->cap = 0;
}

void
headers_deinit(struct headers *h)
{
    for (size_t i = 0; i < h->n; i++) {
        free(h->v[i].name);
        free(h->v[i].value);
    }
    free(h->v);
    headers_init(h);
}

void
headers_add(struct headers *h, const char *name, const char *value)
{
    h->v = xgrow(h->v, &h->cap, h->n + 1, sizeof(h->v[0]));
    h->v[h->n].name = xstrdup(name);
    h->v[h->n].value = xstrdup(value);
    h->n++;
}

void
headers_set(struct headers *h, const char *name, const char *value)
{
    headers_remove(h, name);
    headers_add(h, name, value);
}

size_t
headers_remove(struct headers *h, const char *name)
{
    size_t kept = 0;
    size_t removed = 0;

    /* Compact in place so that the remaining fields keep their order. */
    for (size_t i = 0; i < h->n; i++) {
        if (strcasecmp(h->v[i].name, name) == 0) {
            free(h->v[i].name);
            free(h->v[i].value);
            removed++;
        } else {
            h->v[kept++] = h->v[i];
        }
    }
    h->n = kept;
    return removed;
}

const char *
headers_get(const struct headers *h, const char *name)
{
    for (size_t i = 0; i < h->n; i++) {
        if (strcasecmp(h->v[i].name, name) == 0) {
            return h->v[i].value;
        }
    }
    return NULL;
}

/* RFC 9110 5.6.2: tchar = "!" / "#" / ... / DIGIT / ALPHA. */
static bool
is_tchar(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
        (c >= '0' && c <= '9')) {
        return true;
    }
    return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

bool
headers_valid_name(const char *name)
{
    if (name == NULL || *name == '\0') {
        return false;
    }
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        if (!is_tchar(*p)) {
            return false;
        }
    }
    return true;
}

bool
headers_valid_value(const char *value)
{
    if (value == NULL) {
        return false;
    }
    /* obs-text (0x80-0xFF) stays allowed: RFC 9110 still accepts it. */
    for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
        if ((*p < 0x20 && *p != '\t') || *p == 0x7f) {
            return false;
        }
    }
    return true;
}
