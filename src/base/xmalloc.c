#include "xmalloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
out_of_memory(size_t size)
{
    fprintf(stderr, "sluice: out of memory allocating %zu bytes\n", size);
    abort();
}

void *
xmalloc(size_t size)
{
    void *p = malloc(size ? size : 1);

    if (p == NULL) {
        out_of_memory(size);
    }
    return p;
}

void *
xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);

    if (p == NULL) {
        out_of_memory(n * size);
    }
    return p;
}

void *
xrealloc(void *ptr, size_t size)
{
    void *p = realloc(ptr, size ? size : 1);

    if (p == NULL) {
        out_of_memory(size);
    }
    return p;
}

void *
xgrow(void *ptr, size_t *cap, size_t need, size_t size)
{
    size_t n = *cap ? *cap : 4;

    if (need <= *cap) {
        return ptr;
    }
    while (n < need) {
        n *= 2;
    }
    ptr = xrealloc(ptr, n * size);
    *cap = n;
    return ptr;
}

char *
xstrdup(const char *s)
{
    return xstrndup(s, strlen(s));
}

char *
xstrndup(const char *s, size_t n)
{
    char *p = xmalloc(n + 1);

    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *
xvasprintf(const char *fmt, va_list ap)
{
    va_list again;
    int n;
    char *p;

    va_copy(again, ap);
    n = vsnprintf(NULL, 0, fmt, ap);
    if (n < 0) {
        abort();
    }
    p = xmalloc((size_t)n + 1);
    vsnprintf(p, (size_t)n + 1, fmt, again);
    va_end(again);
    return p;
}

char *
xasprintf(const char *fmt, ...)
{
    va_list ap;
    char *p;

    va_start(ap, fmt);
    p = xvasprintf(fmt, ap);
    va_end(ap);
    return p;
}
