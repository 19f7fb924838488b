#include "accesslog.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "xmalloc.h"

/*
 * The longest line accesslog_write() sends. No larger than PIPE_BUF, so
 * that a line to a pipe (stdout under a supervisor) is written atomically
 * too, and small enough to live on a worker's stack.
 */
#define LINE_MAX_BYTES 4096

/*
 * What any string but the path may take, escaped. These are short by
 * nature (an address, a method, a route id, a word); the cap keeps the
 * fixed part of a line well inside LINE_MAX_BYTES, so that the path, the
 * one value a client controls in length, is what gets cut.
 */
#define FIELD_MAX 256

/* Appended to a value that was cut. */
#define CUT_MARK "..."
#define CUT_MARK_LEN (sizeof(CUT_MARK) - 1)

#define NO_LIMIT ((size_t)-1)

struct accesslog {
    int fd;                       /* -1 when off; may be STDOUT_FILENO */
    bool owns_fd;                 /* close it in accesslog_close() */
    char *path;                   /* the file, for reopen; NULL when not
                                     a file; owned */
    enum accesslog_format format; /* of every line */
};

/* ------------------------------------------------------------------ */
/* Formatting                                                          */

/*
 * A line being built. 'n' keeps counting past 'cap' (nothing more is
 * stored then), so that a first pass learns how long the whole line would
 * be and a second can cut the path by exactly the excess.
 */
struct out {
    char *buf;  /* caller's buffer; borrowed */
    size_t cap; /* bytes 'buf' holds */
    size_t n;   /* bytes the line needs so far */
};

static void
put(struct out *o, const char *s, size_t k)
{
    if (o->n + k <= o->cap) {
        memcpy(o->buf + o->n, s, k);
    }
    o->n += k;
}

static void
put_str(struct out *o, const char *s)
{
    put(o, s, strlen(s));
}

/* Decimal, zero-padded to 'width' digits. */
static void
put_u64(struct out *o, uint64_t v, unsigned width)
{
    char tmp[24];
    size_t i = sizeof(tmp);

    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0 || sizeof(tmp) - i < width);
    put(o, tmp + i, sizeof(tmp) - i);
}

static void
put_i64(struct out *o, int64_t v)
{
    if (v < 0) {
        put(o, "-", 1);
        /* Negating INT64_MIN overflows; its magnitude fits a uint64. */
        put_u64(o, (uint64_t)0 - (uint64_t)v, 1);
        return;
    }
    put_u64(o, (uint64_t)v, 1);
}

/* 2026-11-22T10:00:00.123Z; epoch milliseconds, any sign. */
static void
put_time(struct out *o, int64_t ms)
{
    int64_t secs = ms / 1000;
    int64_t frac = ms % 1000;
    time_t t;
    struct tm tm;

    /* Floor, not truncation: -1 ms is 23:59:59.999 of the day before. */
    if (frac < 0) {
        frac += 1000;
        secs -= 1;
    }
    t = (time_t)secs;
    if (gmtime_r(&t, &tm) == NULL || tm.tm_year + 1900 < 0) {
        put_str(o, "-");
        return;
    }
    put_u64(o, (uint64_t)tm.tm_year + 1900, 4);
    put(o, "-", 1);
    put_u64(o, (uint64_t)tm.tm_mon + 1, 2);
    put(o, "-", 1);
    put_u64(o, (uint64_t)tm.tm_mday, 2);
    put(o, "T", 1);
    put_u64(o, (uint64_t)tm.tm_hour, 2);
    put(o, ":", 1);
    put_u64(o, (uint64_t)tm.tm_min, 2);
    put(o, ":", 1);
    put_u64(o, (uint64_t)tm.tm_sec, 2);
    put(o, ".", 1);
    put_u64(o, (uint64_t)frac, 3);
    put(o, "Z", 1);
}

/*
 * Length of the well-formed UTF-8 sequence at 's' (of 'n' bytes), or 0:
 * no overlongs, surrogates or code points above U+10FFFF, which JSON
 * readers refuse or misread.
 */
static size_t
utf8_len(const unsigned char *s, size_t n)
{
    size_t len;
    unsigned char lo = 0x80;
    unsigned char hi = 0xbf;

    if (s[0] >= 0xc2 && s[0] <= 0xdf) {
        len = 2;
    } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
        len = 3;
        if (s[0] == 0xe0) {
            lo = 0xa0;
        } else if (s[0] == 0xed) {
            hi = 0x9f;
        }
    } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
        len = 4;
        if (s[0] == 0xf0) {
            lo = 0x90;
        } else if (s[0] == 0xf4) {
            hi = 0x8f;
        }
    } else {
        return 0;
    }
    if (n < len || s[1] < lo || s[1] > hi) {
        return 0;
    }
    for (size_t i = 2; i < len; i++) {
        if (s[i] < 0x80 || s[i] > 0xbf) {
            return 0;
        }
    }
    return len;
}

/* How a value is quoted. */
enum esc {
    ESC_TEXT_QUOTED, /* inside "..." of a text line: space is fine */
    ESC_TEXT_BARE,   /* a bare text value: a space would end the field */
    ESC_JSON,        /* inside a JSON string */
};

/*
 * The escaped form of the byte (or UTF-8 sequence) at 's' into 'unit';
 * returns its length and sets '*used' to the input bytes it stands for.
 * Text lines are ASCII only: any other byte is \xNN, so that neither a
 * quote, a newline nor a terminal escape from a client reaches the file
 * as itself.
 */
static size_t
escape_unit(enum esc esc, const unsigned char *s, size_t n, char unit[8],
            size_t *used)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char c = s[0];
    size_t k;

    *used = 1;
    if (c == '"' || c == '\\') {
        unit[0] = '\\';
        unit[1] = (char)c;
        return 2;
    }
    if (esc != ESC_JSON) {
        if (c < 0x20 || c >= 0x7f || (c == ' ' && esc == ESC_TEXT_BARE)) {
            unit[0] = '\\';
            unit[1] = 'x';
            unit[2] = hex[c >> 4];
            unit[3] = hex[c & 0xf];
            return 4;
        }
        unit[0] = (char)c;
        return 1;
    }
    if (c == '\n' || c == '\r' || c == '\t') {
        unit[0] = '\\';
        unit[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
        return 2;
    }
    if (c < 0x20 || c == 0x7f) {
        memcpy(unit, "\\u00", 4);
        unit[4] = hex[c >> 4];
        unit[5] = hex[c & 0xf];
        return 6;
    }
    if (c < 0x80) {
        unit[0] = (char)c;
        return 1;
    }
    k = utf8_len(s, n);
    if (k == 0) {
        /* Not text: JSON cannot carry the raw byte. */
        memcpy(unit, "\\ufffd", 6);
        return 6;
    }
    memcpy(unit, s, k);
    *used = k;
    return k;
}

/*
 * Escapes 's' into 'o', at most 'limit' bytes of escaped text; a value
 * that does not fit ends in CUT_MARK (within the limit). An escape or a
 * UTF-8 sequence is never split. Returns the escaped length the whole
 * value needs.
 */
static size_t
put_escaped(struct out *o, enum esc esc, const char *s, size_t limit)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    size_t full = 0;
    size_t safe = o->n; /* where a cut value's mark would go */
    bool cut = false;

    while (n > 0) {
        char unit[8];
        size_t used;
        size_t k = escape_unit(esc, p, n, unit, &used);

        full += k;
        /* Past the limit only the length is wanted. */
        if (!cut && (limit == NO_LIMIT || full <= limit)) {
            put(o, unit, k);
            if (limit != NO_LIMIT && full + CUT_MARK_LEN <= limit) {
                safe = o->n;
            }
        } else {
            cut = true;
        }
        p += used;
        n -= used;
    }
    if (cut) {
        o->n = safe;
        if (limit >= CUT_MARK_LEN) {
            put(o, CUT_MARK, CUT_MARK_LEN);
        }
    }
    return full;
}

/* A text value: "-" for NULL or empty, so that fields stay countable. */
static size_t
put_text(struct out *o, enum esc esc, const char *s, size_t limit)
{
    if (s == NULL || s[0] == '\0') {
        put(o, "-", 1);
        return 1;
    }
    return put_escaped(o, esc, s, limit);
}

/* A JSON string value, or null. */
static size_t
put_json_str(struct out *o, const char *key, const char *s, size_t limit)
{
    size_t full;

    put_str(o, key);
    if (s == NULL) {
        put_str(o, "null");
        return 0;
    }
    put(o, "\"", 1);
    full = put_escaped(o, ESC_JSON, s, limit);
    put(o, "\"", 1);
    return full;
}

/* Lays out the whole line; returns the escaped length of the whole path. */
static size_t
format_line(enum accesslog_format format, const struct access_entry *e,
            struct out *o, size_t path_limit)
{
    size_t path_len;

    if (format == ACCESSLOG_JSON) {
        put_str(o, "{\"time\":\"");
        put_time(o, e->time_ms);
        put(o, "\"", 1);
        put_json_str(o, ",\"client\":", e->client, FIELD_MAX);
        put_json_str(o, ",\"method\":", e->method, FIELD_MAX);
        path_len = put_json_str(o, ",\"path\":", e->path, path_limit);
        put_json_str(o, ",\"route\":", e->route, FIELD_MAX);
        put_str(o, ",\"status\":");
        put_i64(o, e->status);
        put_str(o, ",\"bytes\":");
        put_u64(o, e->bytes, 1);
        put_str(o, ",\"upstream_ms\":");
        if (e->upstream_ms < 0) {
            put_str(o, "null");
        } else {
            put_i64(o, e->upstream_ms);
        }
        put_str(o, ",\"total_ms\":");
        put_i64(o, e->total_ms);
        put_json_str(o, ",\"rl\":", e->decision, FIELD_MAX);
        put_json_str(o, ",\"tier\":", e->tier, FIELD_MAX);
        put_json_str(o, ",\"user\":", e->user, FIELD_MAX);
        put_json_str(o, ",\"proto\":", e->tls ? "https" : "http", FIELD_MAX);
        put_str(o, "}\n");
        return path_len;
    }
    put_time(o, e->time_ms);
    put(o, " ", 1);
    put_text(o, ESC_TEXT_BARE, e->client, FIELD_MAX);
    put(o, " \"", 2);
    put_text(o, ESC_TEXT_QUOTED, e->method, FIELD_MAX);
    put(o, " ", 1);
    path_len = put_text(o, ESC_TEXT_QUOTED, e->path, path_limit);
    put_str(o, "\" route=");
    put_text(o, ESC_TEXT_BARE, e->route, FIELD_MAX);
    put_str(o, " status=");
    put_i64(o, e->status);
    put_str(o, " bytes=");
    put_u64(o, e->bytes, 1);
    put_str(o, " upstream_ms=");
    if (e->upstream_ms < 0) {
        put(o, "-", 1);
    } else {
        put_i64(o, e->upstream_ms);
    }
    put_str(o, " total_ms=");
    put_i64(o, e->total_ms);
    put_str(o, " rl=");
    put_text(o, ESC_TEXT_BARE, e->decision, FIELD_MAX);
    put_str(o, " tier=");
    put_text(o, ESC_TEXT_BARE, e->tier, FIELD_MAX);
    put_str(o, " user=");
    put_text(o, ESC_TEXT_BARE, e->user, FIELD_MAX);
    put_str(o, e->tls ? " proto=https\n" : " proto=http\n");
    return path_len;
}

size_t
accesslog_format(enum accesslog_format format, const struct access_entry *e,
                 char *buf, size_t len)
{
    struct out o = {buf, len, 0};
    size_t path_len;
    size_t excess;

    if (len == 0) {
        return 0;
    }
    path_len = format_line(format, e, &o, NO_LIMIT);
    if (o.n <= len) {
        return o.n;
    }
    /* Too long: the path gives up the excess (the mark included). */
    excess = o.n - len;
    o.n = 0;
    format_line(format, e, &o, path_len > excess ? path_len - excess : 0);
    if (o.n <= len) {
        return o.n;
    }
    /* Only a buffer too small for the fixed fields gets here. */
    buf[len - 1] = '\n';
    return len;
}

/* ------------------------------------------------------------------ */
/* The log                                                             */

static int
open_file(const char *path)
{
    return open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

struct accesslog *
accesslog_open(const char *path, enum accesslog_format format, char *err,
               size_t errlen)
{
    struct accesslog *al;
    int fd = -1;

    if (path != NULL && strcmp(path, "-") != 0 && strcmp(path, "off") != 0) {
        fd = open_file(path);
        if (fd < 0) {
            snprintf(err, errlen, "accesslog: cannot open %s: %s", path,
                     strerror(errno));
            return NULL;
        }
    }
    al = xcalloc(1, sizeof(*al));
    al->format = format;
    if (fd >= 0) {
        al->fd = fd;
        al->owns_fd = true;
        al->path = xstrdup(path);
    } else if (path != NULL && strcmp(path, "off") == 0) {
        al->fd = -1;
    } else {
        al->fd = STDOUT_FILENO;
    }
    return al;
}

void
accesslog_close(struct accesslog *al)
{
    if (al == NULL) {
        return;
    }
    if (al->owns_fd) {
        close(al->fd);
    }
    free(al->path);
    free(al);
}

int
accesslog_reopen(struct accesslog *al)
{
    int fd;

    if (al->path == NULL) {
        return 0; /* stdout or off: nothing was rotated */
    }
    fd = open_file(al->path);
    if (fd < 0) {
        return -1;
    }
    /*
     * dup2() swaps the file under the number every worker writes to, in
     * one step: a write already under way finishes on the old file, the
     * next goes to the new one, and no thread ever sees a closed number.
     */
    if (dup2(fd, al->fd) < 0) {
        int saved = errno;

        close(fd);
        errno = saved;
        return -1;
    }
    close(fd);
    return 0;
}

void
accesslog_write(struct accesslog *al, const struct access_entry *e)
{
    char line[LINE_MAX_BYTES];
    size_t n;

    if (al->fd < 0) {
        return;
    }
    n = accesslog_format(al->format, e, line, sizeof(line));
    /*
     * One write(2), never a second for a remainder: on an O_APPEND file or
     * a pipe a single write is what keeps lines from interleaving. A short
     * write (disk full) loses the rest of this line only; an error loses
     * the line. Neither is worth failing a request over.
     */
    while (write(al->fd, line, n) < 0 && errno == EINTR) {
    }
}
