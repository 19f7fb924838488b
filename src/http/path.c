#include "path.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "urlcode.h"
#include "xmalloc.h"

/* A path this long or shorter is decoded on the stack. */
#define PATH_LOCAL 512

/* RFC 3986 section 2.3. */
static bool
is_unreserved(int c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
           (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
           c == '~';
}

/*
 * Decodes the escapes that RFC 3986 section 6.2.2.2 says are equivalent to
 * the plain character, and canonicalises the rest. Decoding has to come
 * before dot-segment removal, or "%2e%2e" would survive as a segment that
 * an upstream later decodes into "..". 'dst' holds at least 'len' bytes.
 */
static enum path_status
decode_unreserved(const char *raw, size_t len, char *dst, size_t *dstlen)
{
    size_t n = 0;

    for (size_t i = 0; i < len; i++) {
        int c;

        if (raw[i] == '\0') {
            /* A raw NUL is as dangerous as "%00": C code upstream would
             * truncate the path at it. */
            return PATH_BAD_ESCAPE;
        }
        if (raw[i] != '%') {
            dst[n++] = raw[i];
            continue;
        }
        c = urlcode_escape(raw + i, len - i);
        if (c <= 0) {
            return PATH_BAD_ESCAPE;
        }
        if (is_unreserved(c)) {
            dst[n++] = (char)c;
        } else {
            dst[n++] = '%';
            dst[n++] = "0123456789ABCDEF"[c >> 4];
            dst[n++] = "0123456789ABCDEF"[c & 15];
        }
        i += 2;
    }
    *dstlen = n;
    return PATH_OK;
}

/*
 * True when the segment 'seg' ('len' bytes) is "." or ".." with path
 * parameters: ".;x", "..;". Tomcat and Jetty strip the parameters first
 * and then read a dot-segment, so "/x/..;/admin" is "/admin" to them but
 * a segment named "..;" to a router: which one is meant is ambiguous.
 */
static bool
is_dot_with_params(const char *seg, size_t len)
{
    return (len >= 2 && seg[0] == '.' && seg[1] == ';') ||
           (len >= 3 && seg[0] == '.' && seg[1] == '.' && seg[2] == ';');
}

enum path_status
path_normalize(const char *raw, size_t len, char **out)
{
    enum path_status st;
    char local[PATH_LOCAL]; /* the decoded path, when it fits */
    char *buf;
    char *res;
    size_t n;
    size_t rn = 0;
    size_t pos = 1;
    bool trailing = false;

    if (len == 0 || raw[0] != '/') {
        return PATH_NOT_ABSOLUTE;
    }
    buf = len < sizeof(local) ? local : xmalloc(len + 1);
    st = decode_unreserved(raw, len, buf, &n);
    if (st != PATH_OK) {
        if (buf != local) {
            free(buf);
        }
        return st;
    }
    /* Every segment kept is written as "/seg", so 'res' never outgrows
     * the decoded input, plus one byte for the trailing slash. */
    res = xmalloc(n + 2);
    for (;;) {
        const char *seg = buf + pos;
        const char *slash = memchr(seg, '/', n - pos);
        size_t seglen = slash ? (size_t)(slash - seg) : n - pos;
        bool last = slash == NULL;

        if (seglen == 0) {
            /* An empty segment is either part of a '/' run, which
             * collapses, or the one after a trailing slash. */
            if (last) {
                trailing = true;
            }
        } else if (seglen == 1 && seg[0] == '.') {
            trailing = true;
        } else if (seglen == 2 && seg[0] == '.' && seg[1] == '.') {
            if (rn == 0) {
                st = PATH_ABOVE_ROOT;
                break;
            }
            while (res[--rn] != '/') {
            }
            trailing = true;
        } else if (is_dot_with_params(seg, seglen)) {
            st = PATH_DOT_PARAMS;
            break;
        } else {
            res[rn++] = '/';
            memcpy(res + rn, seg, seglen);
            rn += seglen;
            trailing = false;
        }
        if (last) {
            break;
        }
        pos += seglen + 1;
    }
    if (st != PATH_OK) {
        if (buf != local) {
            free(buf);
        }
        free(res);
        return st;
    }
    if (rn == 0 || trailing) {
        res[rn++] = '/';
    }
    res[rn] = '\0';
    if (buf != local) {
        free(buf);
    }
    *out = res;
    return PATH_OK;
}

const char *
path_status_str(enum path_status st)
{
    switch (st) {
    case PATH_OK:
        return "ok";
    case PATH_NOT_ABSOLUTE:
        return "path does not start with '/'";
    case PATH_BAD_ESCAPE:
        return "bad percent-escape in path";
    case PATH_ABOVE_ROOT:
        return "path climbs above the root";
    case PATH_DOT_PARAMS:
        return "dot-segment with parameters in path";
    }
    return "unknown path status";
}

char *
path_without_params(const char *path)
{
    size_t len = strlen(path);
    char *out = xmalloc(len + 1);
    size_t n = 0;
    const char *p = path;

    while (*p != '\0') {
        /* *p is '/': one segment, up to the next '/' or the end */
        const char *seg = p + 1;
        size_t name = strcspn(seg, ";/");
        const char *next = seg + strcspn(seg, "/");

        if (name > 0 || *next == '\0') {
            out[n++] = '/';
            memcpy(out + n, seg, name);
            n += name;
        }
        p = next;
    }
    if (n == 0) {
        out[n++] = '/';
    }
    out[n] = '\0';
    return out;
}
