/*
 * accesslog.h - one line per request: time, client, method, path, route,
 * status, bytes, upstream and total time, the rate-limit decision, the
 * user and the protocol the client spoke (http, or https on the TLS
 * listener).
 * Text or JSON, to stdout or a file. Each line is one write(2) on an
 * O_APPEND descriptor, so workers log without a lock and lines never
 * interleave; reopening (SIGUSR1, for log rotation) swaps the file under
 * the same descriptor number with dup2(2). Does I/O.
 */
#ifndef SLUICE_ACCESSLOG_H
#define SLUICE_ACCESSLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h" /* enum accesslog_format */

/* What is logged of one request. Strings are borrowed; NULL is "-". */
struct access_entry {
    int64_t time_ms;      /* when the request arrived, epoch ms */
    const char *client;   /* resolved client address */
    const char *method;   /* "GET" */
    const char *path;     /* the request target as received */
    const char *route;    /* route id, or NULL when none matched */
    int status;           /* status sent to the client */
    uint64_t bytes;       /* response body bytes sent */
    int64_t upstream_ms;  /* request sent to response headers; -1 if
                             there was no upstream exchange */
    int64_t total_ms;     /* arrival to the last byte */
    const char *decision; /* rate-limit result (see metrics.h), or NULL */
    const char *tier;     /* the deciding tier's label, or NULL */
    const char *user;     /* the user the gateway decided (Identity in
                             the README), or NULL: none */
    bool tls;             /* came over the TLS listener: proto=https */
};

struct accesslog; /* opaque */

/*
 * Opens the log: 'path' NULL or "-" is stdout, "off" disables logging
 * (accesslog_write does nothing), anything else a file opened for append
 * (created 0644). Returns NULL with a message in 'err' when the file
 * cannot be opened.
 */
struct accesslog *accesslog_open(const char *path, enum accesslog_format format,
                                 char *err, size_t errlen);
void accesslog_close(struct accesslog *al); /* NULL is a no-op */

/* Reopens the file at the same path (after rotation); 0 or -1 (the old
 * file stays in use). Safe while other threads write. */
int accesslog_reopen(struct accesslog *al);

/* Writes one line for 'e'. Thread-safe. */
void accesslog_write(struct accesslog *al, const struct access_entry *e);

/*
 * Formats one line (with its '\n') into 'buf'; returns its length, cut
 * short (but still ending in '\n') if 'len' is too small. Pure.
 *   text: 2026-11-22T10:00:00.123Z 203.0.113.7 "GET /a?b=1" route=users
 *         status=200 bytes=512 upstream_ms=3 total_ms=4 rl=allowed tier=0
 *         user=alice proto=http
 *   json: {"time":"...","client":"...","method":"GET","path":"/a?b=1",
 *         "route":"users","status":200,"bytes":512,"upstream_ms":3,
 *         "total_ms":4,"rl":"allowed","tier":"0","user":"alice",
 *         "proto":"http"}
 * Values are escaped: a path cannot forge a field or a line.
 */
size_t accesslog_format(enum accesslog_format format,
                        const struct access_entry *e, char *buf, size_t len);

#endif
