/*
 * errbuf.h - writes an error message into a caller's fixed buffer, the
 * (err, errlen) pair that the route layer's init functions take.
 * Pure: no I/O, no allocation. Depends on nothing.
 */
#ifndef SLUICE_ERRBUF_H
#define SLUICE_ERRBUF_H

#include <stddef.h>

/*
 * Formats into 'err', truncated to 'errlen' bytes with the NUL. A NULL
 * 'err' or a zero 'errlen' means the caller wants no message: nothing is
 * written.
 */
void errbuf_printf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
