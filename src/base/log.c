#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_int min_level = LOG_INFO;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

void
log_set_level(enum log_level level)
{
    atomic_store(&min_level, (int)level);
}

int
log_parse_level(const char *name, enum log_level *out)
{
    for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
        if (strcmp(name, level_names[i]) == 0) {
            *out = (enum log_level)i;
            return 0;
        }
    }
    return -1;
}

void
log_msg(enum log_level level, const char *fmt, ...)
{
    static const char hex[] = "0123456789abcdef";
    char text[2048], line[2048 + 64];
    struct timespec ts;
    struct tm tm;
    size_t n;
    int m;
    va_list ap;

    if ((int)level < atomic_load(&min_level)) {
        return;
    }
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
    m = snprintf(line + n, sizeof(line) - n, ".%03ldZ %s ",
                 ts.tv_nsec / 1000000, level_names[level]);
    n += m > 0 ? (size_t)m : 0;
    va_start(ap, fmt);
    m = vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    /* What a message quotes may come from outside (a server's error, a
     * name in a reply): its control bytes are written as \xNN, so that
     * one event stays one line and no terminal is told anything. */
    for (size_t i = 0; m > 0 && i < (size_t)m && i < sizeof(text) - 1; i++) {
        unsigned char ch = (unsigned char)text[i];

        if (n + 5 > sizeof(line) - 1) {
            break;
        }
        if (ch < 0x20 || ch == 0x7f) {
            line[n++] = '\\';
            line[n++] = 'x';
            line[n++] = hex[ch >> 4];
            line[n++] = hex[ch & 0xf];
        } else {
            line[n++] = (char)ch;
        }
    }
    line[n++] = '\n';
    /* A failed log write has nowhere to be reported. */
    if (write(STDERR_FILENO, line, n) < 0) {
        return;
    }
}
