/*
 * xmalloc.h - allocation that cannot fail.
 * Running out of memory aborts the process with a message; every other
 * NULL in sluice is a real error. No I/O beyond that message.
 */
#ifndef SLUICE_XMALLOC_H
#define SLUICE_XMALLOC_H

#include <stdarg.h>
#include <stddef.h>

void *xmalloc(size_t size);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *ptr, size_t size);
/* Grows an array to at least 'need' elements of 'size'; updates '*cap'. */
void *xgrow(void *ptr, size_t *cap, size_t need, size_t size);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
/* printf into a new string; the caller frees it. */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same with a va_list, which it consumes. */
char *xvasprintf(const char *fmt, va_list ap)
    __attribute__((format(printf, 1, 0)));

/*
 * 1, or 0 under AddressSanitizer: whether freed objects may be kept on a
 * list for reuse. With no reuse, a use after free touches freed memory,
 * which AddressSanitizer reports, and never a recycled object, which it
 * could not tell from a live one.
 */
#if defined(__SANITIZE_ADDRESS__)
#define XMALLOC_REUSE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define XMALLOC_REUSE 0
#endif
#endif
#ifndef XMALLOC_REUSE
#define XMALLOC_REUSE 1
#endif

#endif
