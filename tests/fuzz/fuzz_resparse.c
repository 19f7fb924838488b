/*
 * fuzz_resparse.c - libFuzzer target for resparse. The input is two bytes
 * of settings, then the bytes of an upstream's response:
 *   byte 0: bit 0 the request was a HEAD; bit 1 the stopping run stops in
 *           on_head (else in the first on_body); bits 2-7 the head limit,
 *           in units of 16 bytes (0: 64 KiB);
 *   byte 1: the pieces: each 1 to (byte1 & 15) + 1 bytes long, sizes drawn
 *           from a generator seeded with the byte.
 * The response is parsed in one piece, then again in pieces, then again
 * with a callback that stops the parse; each run ends with resparse_eof()
 * if the response is not over. The stopping runs share one parser, so
 * that resparse_reset() is seen to forget a run.
 */
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "headers.h"
#include "resparse.h"
#include "strbuf.h"

/* Where the stopping run's callback returns -1. */
enum stop_at {
    STOP_NEVER,
    STOP_AT_HEAD,
    STOP_AT_BODY,
};

/* What the callbacks saw in one run. */
struct seen {
    bool head_request;             /* the run's resparse_reset() said HEAD */
    enum stop_at stop;             /* which callback returns -1 */
    bool stopped;                  /* a callback returned -1 */
    int heads;                     /* on_head calls */
    int completes;                 /* on_complete calls */
    struct strbuf head;            /* the head, written out to compare */
    enum resparse_framing framing; /* from on_head */
    uint64_t content_length;       /* from on_head */
    struct strbuf body;            /* body bytes in order */
};

/* No control character but HTAB: what a head may hold (resparse.h). */
static bool
clean(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p < 0x20 && *p != '\t') || *p == 0x7f) {
            return false;
        }
    }
    return true;
}

static int
on_head(void *arg, const struct resparse_head *h)
{
    struct seen *s = arg;

    FUZZ_CHECK(!s->stopped);
    FUZZ_CHECK(s->heads == 0 && s->completes == 0 && s->body.n == 0);
    s->heads++;
    FUZZ_CHECK(h->status >= 200 && h->status <= 599);
    FUZZ_CHECK(h->reason != NULL && clean(h->reason));
    FUZZ_CHECK(h->http_minor <= 1);
    FUZZ_CHECK(h->headers != NULL);
    for (size_t i = 0; i < h->headers->n; i++) {
        FUZZ_CHECK(headers_valid_name(h->headers->v[i].name));
        FUZZ_CHECK(clean(h->headers->v[i].value));
    }
    FUZZ_CHECK(h->framing == RESPARSE_NO_BODY ||
               h->framing == RESPARSE_LENGTH ||
               h->framing == RESPARSE_CHUNKED || h->framing == RESPARSE_CLOSE);
    if (s->head_request || h->status == 204 || h->status == 304) {
        FUZZ_CHECK(h->framing == RESPARSE_NO_BODY);
    }
    if (h->framing != RESPARSE_LENGTH) {
        FUZZ_CHECK(h->content_length == 0);
    }
    /* The end of a close-delimited body is the end of the connection. */
    if (h->framing == RESPARSE_CLOSE) {
        FUZZ_CHECK(!h->keep_alive);
    }
    s->framing = h->framing;
    s->content_length = h->content_length;
    strbuf_addf(&s->head, "%d|%s|%u|%d|%llu|%d", h->status, h->reason,
                h->http_minor, (int)h->framing,
                (unsigned long long)h->content_length, (int)h->keep_alive);
    for (size_t i = 0; i < h->headers->n; i++) {
        strbuf_addf(&s->head, "|%s: %s", h->headers->v[i].name,
                    h->headers->v[i].value);
    }
    if (s->stop == STOP_AT_HEAD) {
        s->stopped = true;
        return -1;
    }
    return 0;
}

static int
on_body(void *arg, const char *data, size_t len)
{
    struct seen *s = arg;

    FUZZ_CHECK(!s->stopped);
    FUZZ_CHECK(s->heads == 1 && s->completes == 0);
    FUZZ_CHECK(data != NULL && len > 0);
    FUZZ_CHECK(s->framing != RESPARSE_NO_BODY);
    if (s->framing == RESPARSE_LENGTH) {
        FUZZ_CHECK(len <= s->content_length - s->body.n);
    }
    strbuf_add(&s->body, data, len);
    if (s->stop == STOP_AT_BODY) {
        s->stopped = true;
        return -1;
    }
    return 0;
}

static int
on_complete(void *arg)
{
    struct seen *s = arg;

    FUZZ_CHECK(!s->stopped);
    FUZZ_CHECK(s->heads == 1 && s->completes == 0);
    s->completes++;
    if (s->framing == RESPARSE_LENGTH) {
        FUZZ_CHECK(s->body.n == s->content_length);
    }
    if (s->framing == RESPARSE_NO_BODY) {
        FUZZ_CHECK(s->body.n == 0);
    }
    return 0;
}

static const struct resparse_callbacks callbacks = {on_head, on_body,
                                                    on_complete};

/* A small generator for the piece sizes: xorshift32. */
static uint32_t
next_random(uint32_t *state)
{
    uint32_t x = *state;

    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    *state = x;
    return x;
}

/*
 * Parses 'len' bytes of 'data' with 'rp', freshly reset, in pieces of up
 * to 'max_piece' bytes (0: in one piece), then the end of the connection
 * if the response is not over. '*used' gets the bytes consumed.
 */
static enum resparse_status
run(struct resparse *rp, struct seen *s, const char *data, size_t len,
    uint8_t seed, size_t max_piece, size_t *used)
{
    uint32_t state = 0x9e3779b9u ^ seed;
    enum resparse_status st = RESPARSE_MORE;
    size_t off = 0;

    resparse_reset(rp, s->head_request);
    FUZZ_CHECK(!resparse_head_seen(rp) && resparse_consumed(rp) == 0);
    *used = 0;
    while (off < len && st == RESPARSE_MORE) {
        size_t n = len - off;
        size_t u = (size_t)-1;

        if (max_piece > 0) {
            size_t piece = 1 + next_random(&state) % max_piece;

            n = n < piece ? n : piece;
        }
        st = resparse_feed(rp, data + off, n, &u);
        FUZZ_CHECK(u <= n);
        if (st == RESPARSE_MORE) {
            FUZZ_CHECK(u == n);
        }
        *used += u;
        off += n;
    }
    if (st == RESPARSE_MORE) {
        st = resparse_eof(rp);
        FUZZ_CHECK(st != RESPARSE_MORE);
    }
    switch (st) {
    case RESPARSE_DONE:
        FUZZ_CHECK(s->heads == 1 && s->completes == 1 && !s->stopped);
        FUZZ_CHECK(resparse_consumed(rp) == *used);
        break;
    case RESPARSE_ERROR:
        FUZZ_CHECK(s->completes == 0 && !s->stopped);
        FUZZ_CHECK(resparse_error(rp) != NULL && *resparse_error(rp) != '\0');
        break;
    case RESPARSE_STOPPED:
        FUZZ_CHECK(s->stopped && s->completes == 0);
        break;
    case RESPARSE_MORE:
        FUZZ_CHECK(!"MORE after resparse_eof()");
        break;
    }
    /* "True once the final response's head has been reported." */
    FUZZ_CHECK(resparse_head_seen(rp) == (s->heads == 1));
    return st;
}

static void
seen_init(struct seen *s, bool head_request, enum stop_at stop)
{
    memset(s, 0, sizeof(*s));
    s->head_request = head_request;
    s->stop = stop;
}

static void
seen_deinit(struct seen *s)
{
    free(s->head.p);
    free(s->body.p);
}

static bool
same_buf(const struct strbuf *a, const struct strbuf *b)
{
    return a->n == b->n && (a->n == 0 || memcmp(a->p, b->p, a->n) == 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct resparse *rp;
    struct seen whole, pieces, stopping;
    enum resparse_status st_whole, st_pieces, st_stopping;
    size_t used_whole, used_pieces, used_stopping, max_head;
    bool head_request;
    const char *in;
    size_t len;

    if (size < 2) {
        return 0;
    }
    head_request = data[0] & 1;
    max_head = (data[0] >> 2) == 0 ? 65536 : (size_t)(data[0] >> 2) * 16;
    in = (const char *)data + 2;
    len = size - 2;

    seen_init(&whole, head_request, STOP_NEVER);
    rp = resparse_new(&callbacks, &whole, max_head);
    st_whole = run(rp, &whole, in, len, data[1], 0, &used_whole);
    resparse_free(rp);

    seen_init(&pieces, head_request, STOP_NEVER);
    rp = resparse_new(&callbacks, &pieces, max_head);
    st_pieces =
        run(rp, &pieces, in, len, data[1], (data[1] & 15u) + 1, &used_pieces);
    FUZZ_CHECK(st_pieces == st_whole);
    FUZZ_CHECK(pieces.heads == whole.heads);
    FUZZ_CHECK(same_buf(&pieces.head, &whole.head));
    if (st_whole == RESPARSE_DONE) {
        FUZZ_CHECK(used_pieces == used_whole);
        FUZZ_CHECK(same_buf(&pieces.body, &whole.body));
    }
    resparse_free(rp);

    seen_init(&stopping, head_request,
              (data[0] & 2) ? STOP_AT_HEAD : STOP_AT_BODY);
    rp = resparse_new(&callbacks, &stopping, max_head);
    /* Reused after a run of its own: reset must forget all of it. */
    (void)run(rp, &stopping, in, len, data[1], 0, &used_stopping);
    seen_deinit(&stopping);
    seen_init(&stopping, head_request,
              (data[0] & 2) ? STOP_AT_HEAD : STOP_AT_BODY);
    st_stopping = run(rp, &stopping, in, len, data[1], (data[1] & 15u) + 1,
                      &used_stopping);
    if (st_whole == RESPARSE_DONE &&
        (stopping.stop == STOP_AT_HEAD || whole.body.n > 0)) {
        FUZZ_CHECK(st_stopping == RESPARSE_STOPPED);
    }
    if (st_stopping != RESPARSE_STOPPED) {
        FUZZ_CHECK(st_stopping == st_whole);
    }
    resparse_free(rp);

    seen_deinit(&whole);
    seen_deinit(&pieces);
    seen_deinit(&stopping);
    return 0;
}
