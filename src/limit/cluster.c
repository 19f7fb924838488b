#include "cluster.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "xmalloc.h"

struct cluster_map {
    int16_t slots[CLUSTER_SLOTS]; /* node index per slot, -1 if none */
    struct cluster_node *nodes;   /* owned, 'nnodes' of them */
    size_t nnodes;                /* in use */
    size_t cap;                   /* allocated */
};

_Static_assert(CLUSTER_MAP_MAX_NODES - 1 <= INT16_MAX,
               "a node index fits the slot table");

/* CRC16-CCITT as Redis Cluster uses it (XMODEM: polynomial 0x1021, zero
 * initial value, no reflection, no final xor). Bitwise: the keys are
 * short, and no table has to be shared between threads. */
static uint16_t
crc16(const unsigned char *p, size_t len)
{
    uint16_t crc = 0;

    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)(p[i] << 8);
        for (int bit = 0; bit < 8; bit++) {
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021)
                                 : (uint16_t)(crc << 1);
        }
    }
    return crc;
}

unsigned
cluster_slot(const char *key, size_t len)
{
    const char *open = len > 0 ? memchr(key, '{', len) : NULL;

    if (open != NULL) {
        size_t rest = len - (size_t)(open - key) - 1;
        const char *close = memchr(open + 1, '}', rest);

        /* "{}" is no tag: the whole key is hashed. */
        if (close != NULL && close > open + 1) {
            key = open + 1;
            len = (size_t)(close - key);
        }
    }
    return crc16((const unsigned char *)key, len) % CLUSTER_SLOTS;
}

/* 's' ('len' bytes) as a decimal number in 0..'max': no sign, no leading
 * zero. Returns false if it is not one. */
static bool
parse_number(const char *s, size_t len, unsigned max, unsigned *out)
{
    unsigned v = 0;

    if (len == 0 || len > 5 || (len > 1 && s[0] == '0')) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return false;
        }
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (v > max) {
        return false;
    }
    *out = v;
    return true;
}

/* "<slot> <host>:<port>", the whole of 's'. */
static bool
parse_target(const char *s, size_t len, struct cluster_redirect *out)
{
    const char *space = memchr(s, ' ', len);
    const char *end = s + len;
    const char *host, *colon = NULL;
    unsigned slot, port;
    size_t hostlen;

    if (space == NULL ||
        !parse_number(s, (size_t)(space - s), CLUSTER_SLOTS - 1, &slot)) {
        return false;
    }
    host = space + 1;
    for (const char *p = host; p < end; p++) {
        if ((unsigned char)*p <= 0x20 || *p == 0x7f) {
            return false;
        }
        if (*p == ':') {
            colon = p;
        }
    }
    if (colon == NULL ||
        !parse_number(colon + 1, (size_t)(end - colon - 1), 65535, &port) ||
        port == 0) {
        return false;
    }
    hostlen = (size_t)(colon - host);
    if (hostlen >= CLUSTER_HOST_MAX) {
        return false;
    }
    out->slot = slot;
    memcpy(out->host, host, hostlen);
    out->host[hostlen] = '\0';
    out->port = (uint16_t)port;
    return true;
}

/* Whether 'err' starts with the word 'word', followed by a space or the
 * end; '*rest' is then what follows the space (or the end). */
static bool
starts_with_word(const char *err, size_t len, const char *word,
                 const char **rest)
{
    size_t n = strlen(word);

    if (len < n || memcmp(err, word, n) != 0 || (len > n && err[n] != ' ')) {
        return false;
    }
    *rest = err + (len > n ? n + 1 : n);
    return true;
}

enum cluster_reply
cluster_redirect_parse(const char *err, size_t len,
                       struct cluster_redirect *out)
{
    static const struct {
        const char *word;
        enum cluster_reply reply;
    } words[] = {
        {"MOVED", CLUSTER_REPLY_MOVED},
        {"ASK", CLUSTER_REPLY_ASK},
        {"TRYAGAIN", CLUSTER_REPLY_TRYAGAIN},
        {"CLUSTERDOWN", CLUSTER_REPLY_CLUSTERDOWN},
        {"READONLY", CLUSTER_REPLY_READONLY},
    };
    const char *rest;

    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        enum cluster_reply r = words[i].reply;
        struct cluster_redirect target;

        if (!starts_with_word(err, len, words[i].word, &rest)) {
            continue;
        }
        if (r != CLUSTER_REPLY_MOVED && r != CLUSTER_REPLY_ASK) {
            return r;
        }
        /* Parsed aside, so that '*out' is untouched by a bad one. */
        if (!parse_target(rest, len - (size_t)(rest - err), &target)) {
            return CLUSTER_REPLY_MALFORMED;
        }
        *out = target;
        return r;
    }
    return CLUSTER_REPLY_OTHER;
}

static bool
host_ok(const char *host)
{
    return host != NULL && host[0] != '\0' && strlen(host) < CLUSTER_HOST_MAX;
}

/* The index of host:port, added if new; -1 if the map is full. */
static int
node_index(struct cluster_map *m, const char *host, uint16_t port)
{
    for (size_t i = 0; i < m->nnodes; i++) {
        if (m->nodes[i].port == port && strcmp(m->nodes[i].host, host) == 0) {
            return (int)i;
        }
    }
    if (m->nnodes == CLUSTER_MAP_MAX_NODES) {
        return -1;
    }
    m->nodes = xgrow(m->nodes, &m->cap, m->nnodes + 1, sizeof(*m->nodes));
    m->nodes[m->nnodes].host = xstrdup(host);
    m->nodes[m->nnodes].port = port;
    return (int)m->nnodes++;
}

struct cluster_map *
cluster_map_new(const struct cluster_range *ranges, size_t n, const char **why)
{
    struct cluster_map *m = xcalloc(1, sizeof(*m));

    for (size_t s = 0; s < CLUSTER_SLOTS; s++) {
        m->slots[s] = -1;
    }
    for (size_t i = 0; i < n; i++) {
        const struct cluster_range *r = &ranges[i];
        int node;

        if (r->first > r->last || r->last >= CLUSTER_SLOTS) {
            *why = "a slot range is out of order or past the last slot";
            goto fail;
        }
        if (!host_ok(r->host) || r->port == 0) {
            *why = "a node has an empty or too long host, or port 0";
            goto fail;
        }
        for (unsigned s = r->first; s <= r->last; s++) {
            if (m->slots[s] != -1) {
                *why = "a slot is in two ranges";
                goto fail;
            }
        }
        node = node_index(m, r->host, r->port);
        if (node < 0) {
            *why = "more primaries than the 1000 a map holds";
            goto fail;
        }
        for (unsigned s = r->first; s <= r->last; s++) {
            m->slots[s] = (int16_t)node;
        }
    }
    return m;
fail:
    cluster_map_free(m);
    return NULL;
}

void
cluster_map_free(struct cluster_map *m)
{
    if (m == NULL) {
        return;
    }
    for (size_t i = 0; i < m->nnodes; i++) {
        free(m->nodes[i].host);
    }
    free(m->nodes);
    free(m);
}

int
cluster_map_node(const struct cluster_map *m, unsigned slot)
{
    if (slot >= CLUSTER_SLOTS) {
        return -1;
    }
    return m->slots[slot];
}

size_t
cluster_map_nnodes(const struct cluster_map *m)
{
    return m->nnodes;
}

const struct cluster_node *
cluster_map_node_at(const struct cluster_map *m, size_t i)
{
    return i < m->nnodes ? &m->nodes[i] : NULL;
}

size_t
cluster_map_uncovered(const struct cluster_map *m, unsigned *first,
                      unsigned *last)
{
    size_t count = 0;
    bool in_first_run = false;

    for (unsigned s = 0; s < CLUSTER_SLOTS; s++) {
        if (m->slots[s] != -1) {
            in_first_run = false;
            continue;
        }
        if (count == 0) {
            *first = s;
            in_first_run = true;
        }
        if (in_first_run) {
            *last = s;
        }
        count++;
    }
    return count;
}

int
cluster_map_moved(struct cluster_map *m, unsigned slot, const char *host,
                  uint16_t port)
{
    int node;

    if (slot >= CLUSTER_SLOTS || !host_ok(host) || port == 0) {
        return -1;
    }
    node = node_index(m, host, port);
    if (node >= 0) {
        m->slots[slot] = (int16_t)node;
    }
    return node;
}

/* The primary of one CLUSTER SLOTS element, into 'r' ('host' a new
 * string the caller frees). Returns a reason, or NULL. */
static const char *
slots_range(const struct cluster_value *e, const char *asked_host,
            struct cluster_range *r)
{
    const struct cluster_value *primary;
    const struct cluster_value *host;
    const struct cluster_value *port;
    char *copy;

    if (e->type != CLUSTER_VALUE_ARRAY || e->n < 3 ||
        e->elems[0].type != CLUSTER_VALUE_INTEGER ||
        e->elems[1].type != CLUSTER_VALUE_INTEGER ||
        e->elems[2].type != CLUSTER_VALUE_ARRAY) {
        return "a range is not [first, last, primary, ...]";
    }
    if (e->elems[0].integer < 0 || e->elems[1].integer < e->elems[0].integer ||
        e->elems[1].integer >= CLUSTER_SLOTS) {
        return "a range has slots out of order or out of range";
    }
    primary = &e->elems[2];
    if (primary->n < 2 || primary->elems[0].type != CLUSTER_VALUE_STRING ||
        primary->elems[1].type != CLUSTER_VALUE_INTEGER) {
        return "a primary is not [host, port, ...]";
    }
    host = &primary->elems[0];
    port = &primary->elems[1];
    if (port->integer < 1 || port->integer > 65535) {
        return "a primary's port is not in 1..65535";
    }
    if (host->len >= CLUSTER_HOST_MAX) {
        return "a primary's host is too long";
    }
    if (host->len == 1 && host->str[0] == '?') {
        return "a primary announces no host (\"?\")";
    }
    for (size_t i = 0; i < host->len; i++) {
        unsigned char ch = (unsigned char)host->str[i];

        if (ch <= 0x20 || ch == 0x7f) {
            return "a primary's host holds a space or control byte";
        }
    }
    if (host->len == 0) {
        copy = xstrdup(asked_host);
    } else {
        copy = xmalloc(host->len + 1);
        memcpy(copy, host->str, host->len);
        copy[host->len] = '\0';
    }
    r->first = (unsigned)e->elems[0].integer;
    r->last = (unsigned)e->elems[1].integer;
    r->host = copy;
    r->port = (uint16_t)port->integer;
    return NULL;
}

struct cluster_map *
cluster_map_from_slots(const struct cluster_value *reply,
                       const char *asked_host, const char **why)
{
    struct cluster_range *ranges;
    struct cluster_map *m = NULL;
    size_t n = 0;

    if (reply->type != CLUSTER_VALUE_ARRAY) {
        *why = "the reply is not an array";
        return NULL;
    }
    ranges = xcalloc(reply->n > 0 ? reply->n : 1, sizeof(*ranges));
    *why = NULL;
    for (; n < reply->n; n++) {
        *why = slots_range(&reply->elems[n], asked_host, &ranges[n]);
        if (*why != NULL) {
            break;
        }
    }
    if (*why == NULL) {
        m = cluster_map_new(ranges, n, why);
    }
    for (size_t i = 0; i < n; i++) {
        free((char *)ranges[i].host);
    }
    free(ranges);
    return m;
}
