#include "problem.h"

#include <stdio.h>
#include <string.h>

#include "xmalloc.h"

struct buf {
    char *p;    /* owned */
    size_t n;   /* bytes used, without the NUL */
    size_t cap; /* bytes allocated */
};

static void
buf_add(struct buf *b, const char *s, size_t len)
{
    b->p = xgrow(b->p, &b->cap, b->n + len + 1, 1);
    memcpy(b->p + b->n, s, len);
    b->n += len;
    b->p[b->n] = '\0';
}

static void
buf_adds(struct buf *b, const char *s)
{
    buf_add(b, s, strlen(s));
}

static void
buf_add_json_string(struct buf *b, const char *s)
{
    buf_add(b, "\"", 1);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        char esc[8];

        if (*c == '"' || *c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*c;
            buf_add(b, esc, 2);
        } else if (*c < 0x20 || *c == 0x7f) {
            snprintf(esc, sizeof(esc), "\\u%04x", *c);
            buf_add(b, esc, 6);
        } else {
            buf_add(b, (const char *)c, 1);
        }
    }
    buf_add(b, "\"", 1);
}

char *
problem_json(int status, const char *title, const char *detail,
             const char *instance)
{
    struct buf b = {NULL, 0, 0};
    char num[16];

    buf_adds(&b, "{\"type\":\"about:blank\",\"title\":");
    buf_add_json_string(&b, title);
    snprintf(num, sizeof(num), "%d", status);
    buf_adds(&b, ",\"status\":");
    buf_adds(&b, num);
    if (detail != NULL) {
        buf_adds(&b, ",\"detail\":");
        buf_add_json_string(&b, detail);
    }
    if (instance != NULL) {
        buf_adds(&b, ",\"instance\":");
        buf_add_json_string(&b, instance);
    }
    buf_adds(&b, "}");
    return b.p;
}

const char *
problem_reason(int status)
{
    switch (status) {
    case 400:
        return "Bad Request";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 413:
        return "Content Too Large";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    default:
        return "Error";
    }
}
