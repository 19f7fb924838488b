/*
 * sentinel_parse.c - Sentinel's address words, read by hand: sscanf's
 * widths silently cut long host names, and strtoul takes a leading
 * space or sign.
 */
#include "sentinel_parse.h"

#include <string.h>

bool
sentinel_parse_port(const char *s, size_t len, uint16_t *port)
{
    unsigned long v = 0;

    if (len == 0 || len > 5) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return false;
        }
        v = v * 10 + (unsigned long)(s[i] - '0');
    }
    if (v == 0 || v > 65535) {
        return false;
    }
    *port = (uint16_t)v;
    return true;
}

bool
sentinel_parse_addr(const char *host, size_t host_len, const char *port,
                    size_t port_len, struct sentinel_addr *out)
{
    if (host_len == 0 || host_len >= sizeof(out->host)) {
        return false;
    }
    for (size_t i = 0; i < host_len; i++) {
        unsigned char ch = (unsigned char)host[i];

        /* Goes into log lines and the resolver: nothing that reads as
         * two words or ends the string early. */
        if (ch <= ' ' || ch == 0x7f) {
            return false;
        }
    }
    if (!sentinel_parse_port(port, port_len, &out->port)) {
        return false;
    }
    memcpy(out->host, host, host_len);
    out->host[host_len] = '\0';
    return true;
}

bool
sentinel_parse_switch(const char *msg, size_t len, const char *master,
                      struct sentinel_addr *from, struct sentinel_addr *to)
{
    const char *word[5];
    size_t wlen[5];
    size_t n = 0;
    size_t start = 0;

    for (size_t i = 0; i <= len; i++) {
        if (i < len && msg[i] != ' ') {
            continue;
        }
        if (n == 5) {
            return false; /* a sixth word */
        }
        word[n] = msg + start;
        wlen[n] = i - start;
        n++;
        start = i + 1;
    }
    if (n != 5 || wlen[0] != strlen(master) ||
        memcmp(word[0], master, wlen[0]) != 0) {
        return false;
    }
    return sentinel_parse_addr(word[1], wlen[1], word[2], wlen[2], from) &&
           sentinel_parse_addr(word[3], wlen[3], word[4], wlen[4], to);
}
