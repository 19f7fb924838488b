/*
 * fuzz_cluster.c - libFuzzer target for cluster_redirect_parse() and
 * cluster_slot(). The whole input is an error reply and a key. It is also
 * cut in three (at a third and at two thirds of its length) into a prefix
 * (its '{' dropped), a tag (its '}' dropped) and a suffix, from which
 * keys that share that tag are built. Read as a tree of values (a type
 * byte, then its length or value), it is a CLUSTER SLOTS reply for
 * cluster_map_from_slots().
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cluster.h"
#include "fuzz.h"
#include "xmalloc.h"

/* The first word of an error reply and what it says. */
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

/* Which word 's' starts with (followed by a space or its end), told
 * apart with strncmp rather than as cluster.c does. */
static enum cluster_reply
first_word(const char *s, size_t len)
{
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        size_t n = strlen(words[i].word);

        if (len >= n && strncmp(s, words[i].word, n) == 0 &&
            (len == n || s[n] == ' ')) {
            return words[i].reply;
        }
    }
    return CLUSTER_REPLY_OTHER;
}

static const char *
word_of(enum cluster_reply r)
{
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        if (words[i].reply == r) {
            return words[i].word;
        }
    }
    return NULL;
}

static void
check_redirect(const char *s, size_t len)
{
    struct cluster_redirect r, again, untouched;
    enum cluster_reply reply, said = first_word(s, len);
    char *text;

    memset(&untouched, 0xa5, sizeof(untouched));
    r = untouched;
    reply = cluster_redirect_parse(s, len, &r);
    if (reply != CLUSTER_REPLY_MOVED && reply != CLUSTER_REPLY_ASK) {
        FUZZ_CHECK(memcmp(&r, &untouched, sizeof(r)) == 0);
        if (reply == CLUSTER_REPLY_MALFORMED) {
            FUZZ_CHECK(said == CLUSTER_REPLY_MOVED ||
                       said == CLUSTER_REPLY_ASK);
        } else {
            FUZZ_CHECK(reply == said);
        }
        return;
    }
    FUZZ_CHECK(reply == said);
    FUZZ_CHECK(r.slot < CLUSTER_SLOTS && r.port > 0);
    FUZZ_CHECK(memchr(r.host, '\0', sizeof(r.host)) != NULL);
    for (const char *p = r.host; *p; p++) {
        FUZZ_CHECK((unsigned char)*p > 0x20 && *p != 0x7f);
    }

    /* Written out again, it is the same reply: the parser accepts one
     * spelling only, and what it read is all there was. */
    text = xasprintf("%s %u %s:%u", word_of(reply), r.slot, r.host,
                     (unsigned)r.port);

    FUZZ_CHECK(strlen(text) == len && memcmp(text, s, len) == 0);
    FUZZ_CHECK(cluster_redirect_parse(text, strlen(text), &again) == reply);
    FUZZ_CHECK(again.slot == r.slot && again.port == r.port &&
               strcmp(again.host, r.host) == 0);
    free(text);
}

/* 'len' bytes of 's' without the byte 'drop', appended to 'out' at
 * '*n'. */
static void
append_without(char *out, size_t *n, const char *s, size_t len, char drop)
{
    for (size_t i = 0; i < len; i++) {
        if (s[i] != drop) {
            out[(*n)++] = s[i];
        }
    }
}

static void
check_tags(const char *s, size_t len)
{
    size_t a = len / 3, b = 2 * len / 3;
    char *key = xmalloc(len + 3), *tag = xmalloc(len + 3);
    size_t nkey = 0, ntag = 0, tag_only;
    unsigned slot;

    FUZZ_CHECK(cluster_slot(s, len) < CLUSTER_SLOTS);

    /* prefix "{" tag "}" suffix, and "{" tag "}" alone. */
    append_without(key, &nkey, s, a, '{');
    key[nkey++] = '{';
    tag[ntag++] = '{';
    append_without(key, &nkey, s + a, b - a, '}');
    append_without(tag, &ntag, s + a, b - a, '}');
    tag_only = ntag - 1;
    key[nkey++] = '}';
    tag[ntag++] = '}';
    memcpy(key + nkey, s + b, len - b);
    nkey += len - b;

    slot = cluster_slot(key, nkey);
    FUZZ_CHECK(slot < CLUSTER_SLOTS);
    if (tag_only > 0) {
        /* The same non-empty tag: the same slot, and the slot of the
         * tag's bytes alone (they hold no '}', so no tag of their own). */
        FUZZ_CHECK(cluster_slot(tag, ntag) == slot);
        FUZZ_CHECK(cluster_slot(tag + 1, tag_only) == slot);
    }
    free(key);
    free(tag);
}

/* Values decoded so far, and what is left of the input. */
struct decoder {
    const uint8_t *p;               /* the next byte */
    size_t n;                       /* bytes left */
    struct cluster_value pool[512]; /* every value of the tree */
    size_t used;                    /* of pool */
};

static unsigned
next_byte(struct decoder *d)
{
    if (d->n == 0) {
        return 0;
    }
    d->n--;
    return *d->p++;
}

/* One value into 'v': a type byte, then an integer (two bytes, with a
 * sign from the type byte), a string (a length byte, then as many bytes
 * as are left of it), an array (a count byte, then its elements) or
 * neither. Arrays stop growing 4 deep or when the pool is full. */
static void
decode(struct decoder *d, struct cluster_value *v, unsigned depth)
{
    unsigned type = next_byte(d);
    size_t n;

    memset(v, 0, sizeof(*v));
    switch (type % 4) {
    case 0:
        v->type = CLUSTER_VALUE_INTEGER;
        v->integer = (long long)next_byte(d) << 8;
        v->integer |= next_byte(d);
        if (type & 0x80) {
            v->integer = -v->integer;
        }
        break;
    case 1:
        v->type = CLUSTER_VALUE_STRING;
        n = next_byte(d) % 32;
        v->len = n < d->n ? n : d->n;
        v->str = (const char *)d->p;
        d->p += v->len;
        d->n -= v->len;
        break;
    case 2:
        v->type = CLUSTER_VALUE_ARRAY;
        n = depth < 4 ? next_byte(d) % 8 : 0;
        if (n > sizeof(d->pool) / sizeof(d->pool[0]) - d->used) {
            n = 0;
        }
        v->elems = &d->pool[d->used];
        v->n = n;
        d->used += n;
        for (size_t i = 0; i < n; i++) {
            decode(d, &d->pool[v->elems - d->pool + i], depth + 1);
        }
        break;
    default:
        v->type = CLUSTER_VALUE_OTHER;
        break;
    }
}

/* A map from the reply maps each range's first and last slot to the
 * range's primary, as the reply spelled it (an empty host: the seed). */
static void
check_slots(const uint8_t *data, size_t size)
{
    static struct decoder d;
    struct cluster_value root;
    const char *why = NULL;
    struct cluster_map *m;

    d.p = data;
    d.n = size;
    d.used = 0;
    decode(&d, &root, 0);
    m = cluster_map_from_slots(&root, "seed", &why);
    if (m == NULL) {
        FUZZ_CHECK(why != NULL && why[0] != '\0');
        return;
    }
    FUZZ_CHECK(root.type == CLUSTER_VALUE_ARRAY);
    for (size_t i = 0; i < cluster_map_nnodes(m); i++) {
        const struct cluster_node *n = cluster_map_node_at(m, i);

        FUZZ_CHECK(n->host[0] != '\0' && strlen(n->host) < CLUSTER_HOST_MAX);
        FUZZ_CHECK(n->port > 0);
    }
    for (size_t i = 0; i < root.n; i++) {
        const struct cluster_value *e = &root.elems[i];
        const struct cluster_value *host = &e->elems[2].elems[0];
        long long port = e->elems[2].elems[1].integer;

        for (size_t k = 0; k < 2; k++) {
            int idx = cluster_map_node(m, (unsigned)e->elems[k].integer);
            const struct cluster_node *n;

            FUZZ_CHECK(idx >= 0 && (size_t)idx < cluster_map_nnodes(m));
            n = cluster_map_node_at(m, (size_t)idx);
            FUZZ_CHECK(n->port == port);
            if (host->len == 0) {
                FUZZ_CHECK(strcmp(n->host, "seed") == 0);
            } else {
                FUZZ_CHECK(strlen(n->host) == host->len &&
                           memcmp(n->host, host->str, host->len) == 0);
            }
        }
    }
    cluster_map_free(m);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;

    check_redirect(s, size);
    check_tags(s, size);
    check_slots(data, size);
    return 0;
}
