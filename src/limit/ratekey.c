#include "ratekey.h"

#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "claims.h"
#include "cookie.h"
#include "forward.h"
#include "headers.h"
#include "netaddr.h"
#include "urlcode.h"
#include "xmalloc.h"

/* Hex digits of the SHA-256 kept in a hashed value: 128 bits. */
#define HASH_HEX 32

/* Longest text of an address part: an IPv6 address, '/', a prefix. */
#define IP_TEXT_MAX 64

/* One part's value, found in the request; borrowed or in 'buf'. */
struct part_value {
    const char *p;         /* the bytes; NULL: nothing */
    size_t n;              /* their length */
    bool form_encoded;     /* query: decode %XX and '+' before escaping */
    bool repeated;         /* nothing, because the request named it more
                              than once (an ambiguous key) */
    char buf[IP_TEXT_MAX]; /* the text of an address */
};

/* Where escaped bytes go: a bounded buffer, a counter, or a digest. */
struct sink {
    char *buf;       /* NULL: only count or hash */
    size_t cap;      /* bytes 'buf' holds, NUL included */
    size_t len;      /* bytes written (or counted) so far */
    bool overflow;   /* something did not fit in 'buf' */
    EVP_MD_CTX *md;  /* hashing instead of writing, or NULL */
    char chunk[256]; /* bytes not yet hashed */
    size_t nchunk;   /* bytes in 'chunk' */
};

static void
sink_put(struct sink *s, const char *p, size_t n)
{
    if (s->md != NULL) {
        for (size_t i = 0; i < n; i++) {
            if (s->nchunk == sizeof(s->chunk)) {
                EVP_DigestUpdate(s->md, s->chunk, s->nchunk);
                s->nchunk = 0;
            }
            s->chunk[s->nchunk++] = p[i];
        }
    } else if (s->buf != NULL) {
        if (s->len + n >= s->cap) {
            s->overflow = true;
            return;
        }
        memcpy(s->buf + s->len, p, n);
        s->buf[s->len + n] = '\0';
    }
    s->len += n;
}

static void
sink_puts(struct sink *s, const char *str)
{
    sink_put(s, str, strlen(str));
}

/* sink_put() of one byte, into a key. */
static void
sink_putc(struct sink *s, char c)
{
    if (s->md != NULL || s->buf == NULL) {
        sink_put(s, &c, 1);
        return;
    }
    if (s->len + 1 >= s->cap) {
        s->overflow = true;
        return;
    }
    s->buf[s->len++] = c;
    s->buf[s->len] = '\0';
}

/* [A-Za-z0-9._~@-], one entry per byte: escape_value() asks of every
 * byte (the unit test checks each). */
static const unsigned char unreserved_bytes[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1,
    0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
};

static bool
unreserved(unsigned char c)
{
    return unreserved_bytes[c] != 0;
}

/*
 * The escaped form of 'v' into 's'. Escaping is injective and leaves no
 * '{', '}', ':', '+' or '#' in the output, so no value can close the hash
 * tag, pass for another part, or pass for a hashed value.
 */
static void
escape_value(struct sink *s, const struct part_value *v)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t i = 0;

    while (i < v->n) {
        unsigned char c = (unsigned char)v->p[i];
        char esc[3];

        if (!v->form_encoded && unreserved(c)) {
            /* A run that needs no escaping goes in one piece. */
            size_t run = i + 1;

            while (run < v->n && unreserved((unsigned char)v->p[run])) {
                run++;
            }
            sink_put(s, v->p + i, run - i);
            i = run;
            continue;
        }
        if (v->form_encoded) {
            i += urlcode_form_byte(v->p + i, v->n - i, &c);
        } else {
            i++;
        }

        if (unreserved(c)) {
            sink_put(s, (const char *)&c, 1);
        } else {
            esc[0] = '%';
            esc[1] = hex[c >> 4];
            esc[2] = hex[c & 15];
            sink_put(s, esc, 3);
        }
    }
}

/* The escaped value, or "#" and a hash of it when it is long. */
static void
put_value_measured(struct sink *out, const struct part_value *v)
{
    struct sink count = {0};
    struct sink hash = {0};
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    char hexbuf[HASH_HEX + 2];

    escape_value(&count, v);
    if (count.len <= RATEKEY_MAX_VALUE) {
        escape_value(out, v);
        return;
    }
    /* Collision-resistant: a caller who picks a long value must not be
     * able to aim it at somebody else's bucket. */
    hash.md = EVP_MD_CTX_new();
    if (hash.md == NULL || !EVP_DigestInit_ex(hash.md, EVP_sha256(), NULL)) {
        fprintf(stderr, "sluice: cannot start SHA-256\n");
        abort();
    }
    escape_value(&hash, v);
    EVP_DigestUpdate(hash.md, hash.chunk, hash.nchunk);
    EVP_DigestFinal_ex(hash.md, md, &mdlen);
    EVP_MD_CTX_free(hash.md);
    hexbuf[0] = '#';
    for (size_t i = 0; i < HASH_HEX / 2; i++) {
        snprintf(hexbuf + 1 + 2 * i, 3, "%02x", md[i]);
    }
    sink_put(out, hexbuf, HASH_HEX + 1);
}

/*
 * put_value_measured(), in one pass for a value that turns out short
 * (most are): escaped straight into 'out', taken back and measured first
 * when it is long or did not fit.
 */
static void
put_value(struct sink *out, const struct part_value *v)
{
    size_t start = out->len;

    if (out->overflow) {
        /* The key is refused whatever comes now. */
        return;
    }
    escape_value(out, v);
    if (!out->overflow && out->len - start <= RATEKEY_MAX_VALUE) {
        return;
    }
    out->len = start;
    out->overflow = false;
    out->buf[start] = '\0';
    put_value_measured(out, v);
}

/* True for ::ffff:a.b.c.d, which is the IPv4 client a.b.c.d. */
static bool
is_v4_mapped(const struct netaddr *a)
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0,    0,
                                       0, 0, 0, 0, 0xff, 0xff};

    return a->family == AF_INET6 && memcmp(a->bytes, prefix, 12) == 0;
}

/*
 * The client's address: IPv4 as is, IPv6 masked to the prefix, since one
 * IPv6 client commonly holds a whole /64 and could rotate through it.
 */
static void
format_ip(const struct netaddr *client, unsigned prefix, char *buf)
{
    struct netaddr a = *client;
    size_t n;

    if (is_v4_mapped(&a)) {
        a.family = AF_INET;
        memmove(a.bytes, a.bytes + 12, 4);
        memset(a.bytes + 4, 0, 12);
    }
    if (a.family != AF_INET6) {
        netaddr_format(&a, buf, IP_TEXT_MAX);
        return;
    }
    /* 0 comes from a caller built without a config: the default. */
    if (prefix == 0 || prefix > 128) {
        prefix = 64;
    }
    for (unsigned bit = prefix; bit < 128; bit++) {
        a.bytes[bit / 8] &= (uint8_t) ~(0x80u >> (bit % 8));
    }
    netaddr_format(&a, buf, IP_TEXT_MAX);
    n = strlen(buf);
    snprintf(buf + n, IP_TEXT_MAX - n, "/%u", prefix);
}

/* How many parameters of 'q' are named 'name' (0, 1, or 2 for more). */
static int
query_count(const char *q, const char *name)
{
    const char *cursor = q, *value;
    size_t len;
    int n = 0;

    while (n < 2 && urlcode_query_next_php(&cursor, name, &value, &len)) {
        n++;
    }
    return n;
}

/*
 * Whether a parser that also splits on ';' (Rack 2, Python before
 * 3.9.2, Go before 1.17) reads 'name' in 'q' otherwise: more than once,
 * or where the '&' split has none, or with a value that holds a ';'.
 */
static bool
semicolons_disagree(const char *q, const char *name, const struct part_value *v)
{
    char *split;
    int n;

    if (strchr(q, ';') == NULL) {
        return false;
    }
    if (v->p != NULL && memchr(v->p, ';', v->n) != NULL) {
        return true;
    }
    split = xstrdup(q);
    for (char *p = strchr(split, ';'); p != NULL; p = strchr(p + 1, ';')) {
        *p = '&';
    }
    n = query_count(split, name);
    free(split);
    return n > 1 || (n == 1 && v->p == NULL);
}

/*
 * The value of query parameter 'name' in 'q' (raw, encoded). A parameter
 * sent twice names no one (as find_header()): frameworks differ on which
 * of them the upstream reads. Twice counts as PHP counts: "api.key",
 * "api key", "api[key" and "api_key[]" are "api_key" there (PHP reads
 * the last of them). So does one that an upstream splitting on ';' as
 * well would read otherwise ("k=junk;k=victim").
 */
static bool
find_query(const char *q, const char *name, struct part_value *v)
{
    const char *cursor = q, *again;
    size_t again_len;
    bool found;

    if (q == NULL) {
        return false;
    }
    found = urlcode_query_next_php(&cursor, name, &v->p, &v->n);
    if ((found && urlcode_query_next_php(&cursor, name, &again, &again_len)) ||
        semicolons_disagree(q, name, v)) {
        v->p = NULL;
        v->n = 0;
        v->repeated = true;
        return false;
    }
    v->form_encoded = found;
    return found;
}

/*
 * The value of cookie 'name' in the Cookie fields ("a=b; c=d"), read as
 * PHP, Rack and Express read it: form-decoded ("%6Dine" and "mine" are
 * one key). A cookie sent twice, counted as PHP counts it
 * (cookie_find()), names no one (as find_header()); so does every cookie
 * of fields whose quoting servers read differently
 * (cookie_quoting_ambiguous()).
 */
static bool
find_cookie(const struct headers *h, const char *name, struct part_value *v)
{
    size_t n = cookie_find(h, name, &v->p, &v->n);

    if (n > 1 || (n == 1 && cookie_quoting_ambiguous(h, name))) {
        v->p = NULL;
        v->n = 0;
        v->repeated = true;
    }
    v->form_encoded = v->p != NULL;
    return v->p != NULL;
}

static void
set_string(struct part_value *v, const char *s)
{
    v->p = s;
    v->n = s != NULL ? strlen(s) : 0;
}

/*
 * A field sent twice is ambiguous: the key would read one while the
 * upstream, which gets both, may read the other (an API key after a junk
 * one, each junk value a fresh bucket). It names no one, so the tier does
 * not apply. Twice counts as a CGI, WSGI or PHP upstream counts, '_' read
 * as '-' (forward_same_to_cgi()): with server.underscores_in_headers,
 * X_Api_Key reaches the upstream as a second X-Api-Key. Without it no
 * '_' spelling is left by now.
 */
static void
find_header(const struct headers *h, const char *name, struct part_value *v)
{
    const char *value = NULL;
    size_t n = 0;

    for (size_t i = 0; h != NULL && i < h->n; i++) {
        if (forward_same_to_cgi(h->v[i].name, name)) {
            value = h->v[i].value;
            n++;
        }
    }
    if (n == 1) {
        set_string(v, value);
    }
    v->repeated = n > 1;
}

/* What 'part' names in the request; false if nothing, or empty. */
static bool
resolve(const struct key_part *part, const struct caller *who,
        struct part_value *v)
{
    /* 'buf' is written before it is read. */
    v->p = NULL;
    v->n = 0;
    v->form_encoded = false;
    v->repeated = false;
    switch (part->kind) {
    case KEY_IP:
        if (who->client != NULL) {
            format_ip(who->client, who->ipv6_prefix, v->buf);
            set_string(v, v->buf);
        }
        break;
    case KEY_USER:
        set_string(v, who->user);
        break;
    case KEY_ROLE:
        set_string(v, who->role);
        break;
    case KEY_HEADER:
        find_header(who->headers, part->name, v);
        break;
    case KEY_QUERY:
        find_query(who->query, part->name, v);
        break;
    case KEY_COOKIE:
        find_cookie(who->headers, part->name, v);
        break;
    case KEY_ROUTE:
        set_string(v, "-");
        break;
    case KEY_CLAIM:
        set_string(v, claims_get_string(who->claims, part->name));
        break;
    }
    return v->p != NULL && v->n > 0;
}

/*
 * resolve() without the value where it is known at once: an address
 * always has a text, and "-" is never empty.
 */
static bool
resolves(const struct key_part *part, const struct caller *who)
{
    struct part_value v;

    switch (part->kind) {
    case KEY_IP:
        return who->client != NULL;
    case KEY_ROUTE:
        return true;
    case KEY_USER:
        return who->user != NULL && who->user[0] != '\0';
    case KEY_ROLE:
        return who->role != NULL && who->role[0] != '\0';
    default:
        return resolve(part, who, &v);
    }
}

/* Every claim condition of 't' holds for 'who'. */
static bool
claims_hold(const struct tier *t, const struct caller *who)
{
    for (size_t i = 0; i < t->nwhen_claims; i++) {
        const char *v = claims_get_string(who->claims, t->when_claims[i].name);

        if (v == NULL || strcmp(v, t->when_claims[i].value) != 0) {
            return false;
        }
    }
    return true;
}

/* True when the 'when' of 't' holds for 'who'. */
static bool
tier_holds(const struct tier *t, const struct caller *who)
{
    if (t->when_role != NULL &&
        (who->role == NULL || strcmp(who->role, t->when_role) != 0)) {
        return false;
    }
    return claims_hold(t, who);
}

const struct tier *
ratekey_tier(const struct rate_limit_conf *rl, const struct caller *who)
{
    for (size_t i = 0; i < rl->ntiers; i++) {
        const struct tier *t = &rl->tiers[i];
        bool ok = tier_holds(t, who);

        for (size_t j = 0; ok && j < t->key.nparts; j++) {
            ok = resolves(&t->key.parts[j], who);
        }
        if (ok) {
            return t;
        }
    }
    return NULL;
}

bool
ratekey_ambiguous(const struct rate_limit_conf *rl, const struct caller *who)
{
    for (size_t i = 0; i < rl->ntiers; i++) {
        const struct tier *t = &rl->tiers[i];
        bool repeated = false, whole = true;

        /* A tier that would not limit, or whose key misses a part,
         * would not have applied with each field sent once. */
        if (t->limiter == NULL || !tier_holds(t, who)) {
            continue;
        }
        for (size_t j = 0; whole && j < t->key.nparts; j++) {
            struct part_value v;

            if (!resolve(&t->key.parts[j], who, &v)) {
                repeated = repeated || v.repeated;
                whole = v.repeated;
            }
        }
        if (whole && repeated) {
            return true;
        }
    }
    return false;
}

bool
ratekey_build(const struct tier *tier, const struct caller *who,
              const char *prefix, const char *scope, char *buf)
{
    struct sink out = {.buf = buf, .cap = RATEKEY_MAX};

    buf[0] = '\0';
    sink_puts(&out, prefix);
    sink_puts(&out, tier->limiter->name);
    sink_putc(&out, ':');
    sink_puts(&out, tier->limiter->tag);
    sink_putc(&out, ':');
    sink_putc(&out, '{');
    sink_puts(&out, scope);
    sink_putc(&out, ':');
    sink_puts(&out, tier->key.text);
    sink_putc(&out, ':');
    for (size_t i = 0; i < tier->key.nparts; i++) {
        struct part_value v;

        if (!resolve(&tier->key.parts[i], who, &v)) {
            buf[0] = '\0';
            return false;
        }
        if (i > 0) {
            sink_putc(&out, '+');
        }
        put_value(&out, &v);
    }
    sink_putc(&out, '}');
    if (out.overflow) {
        buf[0] = '\0';
        return false;
    }
    return true;
}
