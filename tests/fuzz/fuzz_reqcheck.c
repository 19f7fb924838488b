/*
 * fuzz_reqcheck.c - libFuzzer target for reqcheck_request(). The input is
 * a request head as text: a request line "METHOD TARGET HTTP/x.y", then
 * "Name: value" lines, split on CRLF (a bare CR or LF stays inside its
 * line, as a lenient parser could leave it), the name ending at the first
 * ':'; an empty line ends the head. HEAD and TRACE get no body read, as
 * with evhttp.
 */
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "fuzz.h"
#include "headers.h"
#include "reqcheck.h"
#include "xmalloc.h"

/* The request read from one input. */
struct input {
    char *text;                   /* the input, NUL-terminated, cut up; owned */
    struct headers fields;        /* header lines, in order */
    struct reqcheck_request rq;   /* points into 'text' and 'fields' */
    struct reqcheck_target split; /* what rq.split gets */
};

/* "HTTP/d.d" gives the version; anything else leaves it HTTP/1.1. */
static void
read_version(const char *s, struct reqcheck_request *rq)
{
    rq->http_major = 1;
    rq->http_minor = 1;
    if (strlen(s) == 8 && strncmp(s, "HTTP/", 5) == 0 && s[5] >= '0' &&
        s[5] <= '9' && s[6] == '.' && s[7] >= '0' && s[7] <= '9') {
        rq->http_major = (unsigned)(s[5] - '0');
        rq->http_minor = (unsigned)(s[7] - '0');
    }
}

/* Cuts the request line: method up to the first SP, version after the
 * last one, the target in between (SPs included). */
static void
read_request_line(char *line, struct reqcheck_request *rq)
{
    char *first = strchr(line, ' ');
    char *last = strrchr(line, ' ');

    rq->method = line;
    rq->target = "";
    read_version("", rq);
    if (first == NULL) {
        return;
    }
    *first = '\0';
    rq->target = first + 1;
    if (last != first) {
        *last = '\0';
        read_version(last + 1, rq);
    }
}

/* Cuts 'line' at the first ':' into a field; no ':' gives a value "". */
static void
read_field(struct headers *h, char *line)
{
    char *colon = strchr(line, ':');

    if (colon == NULL) {
        headers_add(h, line, "");
        return;
    }
    *colon = '\0';
    headers_add(h, line, colon + 1);
}

static void
input_init(struct input *in, const uint8_t *data, size_t size)
{
    char *line, *end;

    /* A NUL ends the text: no C string can carry one past it. */
    in->text = xstrndup((const char *)data, size);
    headers_init(&in->fields);
    line = in->text;
    end = strstr(line, "\r\n");
    if (end != NULL) {
        *end = '\0';
    }
    read_request_line(line, &in->rq);
    while (end != NULL) {
        line = end + 2;
        end = strstr(line, "\r\n");
        if (end != NULL) {
            *end = '\0';
        }
        if (*line == '\0') {
            break; /* the empty line: a body follows, unchecked */
        }
        read_field(&in->fields, line);
    }
    in->rq.headers = &in->fields;
    in->rq.split = &in->split;
    in->rq.body_read = strcmp(in->rq.method, "HEAD") != 0 &&
                       strcmp(in->rq.method, "TRACE") != 0;
}

static void
input_deinit(struct input *in)
{
    headers_deinit(&in->fields);
    free(in->text);
}

/* Runs the check; asserts what holds of any verdict. */
static enum reqcheck_verdict
check(const struct reqcheck_request *rq, const char **why_out)
{
    static const char untouched[] = "untouched";
    const char *why = untouched;
    enum reqcheck_verdict v = reqcheck_request(rq, &why);
    int status = reqcheck_status(v);

    FUZZ_CHECK(v == REQCHECK_OK || v == REQCHECK_BAD_REQUEST ||
               v == REQCHECK_NOT_IMPLEMENTED);
    FUZZ_CHECK(status == (v == REQCHECK_OK            ? 0
                          : v == REQCHECK_BAD_REQUEST ? 400
                                                      : 501));
    if (v == REQCHECK_OK) {
        FUZZ_CHECK(why == untouched);
        why = NULL;
        /* The split handed out is the target's own, or none for "*". */
        if (rq->split != NULL && strcmp(rq->target, "*") == 0) {
            FUZZ_CHECK(rq->split->path == NULL);
        } else if (rq->split != NULL) {
            FUZZ_CHECK(rq->split->path != NULL &&
                       rq->split->path_len <= strlen(rq->target));
        }
    } else {
        size_t n;

        /* A short sentence that a log line and a JSON string can hold. */
        FUZZ_CHECK(why != untouched && why != NULL);
        n = strlen(why);
        FUZZ_CHECK(n > 0 && n < 100);
        for (size_t i = 0; i < n; i++) {
            FUZZ_CHECK(why[i] >= 0x20 && why[i] < 0x7f && why[i] != '"' &&
                       why[i] != '\\');
        }
    }
    *why_out = why;
    return v;
}

/* How many fields are called 'name'. */
static size_t
count(const struct headers *h, const char *name)
{
    size_t n = 0;

    for (size_t i = 0; i < h->n; i++) {
        n += strcasecmp(h->v[i].name, name) == 0;
    }
    return n;
}

static bool
has_byte_below_0x21(const char *s)
{
    for (; *s; s++) {
        if ((unsigned char)*s <= 0x20 || *s == 0x7f) {
            return true;
        }
    }
    return false;
}

/* "chunked" somewhere in 's', any case. */
static bool
mentions_chunked(const char *s)
{
    for (; *s; s++) {
        if (strncasecmp(s, "chunked", 7) == 0) {
            return true;
        }
    }
    return false;
}

/*
 * A few things an accepted request must be, checked here in a simpler
 * way than reqcheck.c does, so that the two can disagree.
 */
static void
check_accepted(const struct reqcheck_request *rq)
{
    const struct headers *h = rq->headers;
    bool http11 =
        rq->http_major > 1 || (rq->http_major == 1 && rq->http_minor >= 1);
    size_t te = count(h, "Transfer-Encoding");
    size_t cl = count(h, "Content-Length");

    FUZZ_CHECK(rq->target[0] != '\0' && !has_byte_below_0x21(rq->target));
    for (size_t i = 0; i < h->n; i++) {
        const char *name = h->v[i].name;

        FUZZ_CHECK(name[0] != '\0' && strpbrk(name, " \t:\r\n") == NULL);
        FUZZ_CHECK(strpbrk(h->v[i].value, "\r\n\x7f") == NULL);
        if (strcasecmp(name, "Content-Length") == 0) {
            const char *v = h->v[i].value;

            FUZZ_CHECK(strspn(v, " \t0123456789") == strlen(v));
            FUZZ_CHECK(strpbrk(v, "0123456789") != NULL);
            if (!rq->body_read) {
                FUZZ_CHECK(strspn(v, " \t0") == strlen(v));
            }
        }
    }
    FUZZ_CHECK(count(h, "Host") == 1 || (!http11 && count(h, "Host") == 0));
    FUZZ_CHECK(te <= 1);
    if (te == 1) {
        FUZZ_CHECK(cl == 0 && http11 && rq->body_read);
        FUZZ_CHECK(mentions_chunked(headers_get(h, "Transfer-Encoding")));
    }
}

/* The verdict must not hang on the order of the fields or their case. */
static void
check_reordered(const struct reqcheck_request *rq, enum reqcheck_verdict v)
{
    struct reqcheck_request other = *rq;
    struct headers h;
    const char *why;

    headers_init(&h);
    for (size_t i = rq->headers->n; i-- > 0;) {
        char *name = xstrdup(rq->headers->v[i].name);

        for (char *p = name; *p; p++) {
            if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')) {
                *p ^= 0x20;
            }
        }
        headers_add(&h, name, rq->headers->v[i].value);
        free(name);
    }
    other.headers = &h;
    FUZZ_CHECK(check(&other, &why) == v);
    headers_deinit(&h);
}

/*
 * Adding a field that is refused on its own never makes a request pass:
 * it is a 400, unless the request ('v' its verdict) is a TRACE refused
 * as such, which is judged before the fields.
 */
static void
check_worse(const struct reqcheck_request *rq, enum reqcheck_verdict v)
{
    enum reqcheck_verdict want =
        v == REQCHECK_NOT_IMPLEMENTED && strcmp(rq->method, "TRACE") == 0
            ? REQCHECK_NOT_IMPLEMENTED
            : REQCHECK_BAD_REQUEST;
    static const char *const bad[][2] = {
        {"Transfer-Encoding ", "chunked"}, /* not a token */
        {"X-Smuggled", "a\rb"},            /* bare CR */
        {"Content-Length", "1, 1"},        /* a list */
    };
    struct reqcheck_request other = *rq;
    struct headers h;
    const char *why;

    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        headers_init(&h);
        for (size_t i = 0; i < rq->headers->n; i++) {
            headers_add(&h, rq->headers->v[i].name, rq->headers->v[i].value);
        }
        headers_add(&h, bad[k][0], bad[k][1]);
        other.headers = &h;
        FUZZ_CHECK(check(&other, &why) == want);
        headers_deinit(&h);
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct input in;
    const char *why, *why2;
    enum reqcheck_verdict v;

    input_init(&in, data, size);
    v = check(&in.rq, &why);
    /* Deterministic: the same verdict for the same reason, every time. */
    FUZZ_CHECK(check(&in.rq, &why2) == v && why2 == why);
    if (v == REQCHECK_OK) {
        check_accepted(&in.rq);
    }
    check_reordered(&in.rq, v);
    check_worse(&in.rq, v);
    input_deinit(&in);
    return 0;
}
