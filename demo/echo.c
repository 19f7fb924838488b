/*
 * echo.c - sluice-echo, the demo backend and the integration tests' upstream.
 * Answers every request with a JSON description of it; query parameters make
 * it slow, change the status, stream large or truncated bodies, or add
 * headers. Depends on libevent (evhttp) and, for --tls-cert, OpenSSL;
 * single-threaded; does I/O.
 *
 * Usage: sluice-echo [--listen HOST:PORT] [--name NAME]
 *                    [--tls-cert FILE --tls-key FILE [--tls-client-ca FILE]]
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/bufferevent_ssl.h>
#include <event2/util.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#define ECHO_DEFAULT_LISTEN "127.0.0.1:9000"
#define ECHO_DEFAULT_NAME "sluice-echo"
/* Streamed bodies go out one piece at a time, the next one only once the
 * previous piece has left the output buffer, so memory stays bounded. */
#define ECHO_PIECE (64 * 1024)
#define ECHO_BODY_TEXT_MAX (64 * 1024) /* larger bodies show as null */
#define ECHO_MAX_BODY (64 * 1024 * 1024)
#define ECHO_MAX_HEADERS (1024 * 1024)
#define ECHO_MAX_SLEEP_MS (3600 * 1000)
#define ECHO_MAX_HEADER_BYTES (1024 * 1024)
#define ECHO_MAX_BYTES ((uint64_t)1 << 40)

struct conn;
struct job;

struct echo {
    struct event_base *base;   /* owned */
    struct evhttp *http;       /* owned */
    const char *name;          /* "server" field; borrowed from argv */
    struct conn *conns;        /* connections seen so far, newest first */
    uint64_t requests;         /* requests received, /__stats excluded */
    uint64_t aborted;          /* clients gone before their reply was done */
    uint64_t open_connections; /* entries in 'conns' */
    uint64_t connections;      /* connections ever seen */
    uint64_t buffered;         /* bytes= body bytes queued, not yet written */
    uint64_t max_buffered;     /* highest 'buffered' so far */
    SSL_CTX *tls;              /* --tls-cert: every connection speaks TLS;
                                  owned, or NULL */
    uint64_t tls_handshakes;   /* TLS handshakes completed */
    uint64_t tls_resumed;      /* of which resumed a session */
};

/* Where the info callback finds the counters (one echo per process). */
static struct echo *the_echo;

/*
 * A client connection that has sent at least one request. evhttp gives no
 * hook at accept time, so connections are learnt from their first request
 * and forgotten in their close callback, which evhttp runs whenever it frees
 * an incoming connection.
 */
struct conn {
    struct echo *echo;               /* borrowed */
    struct evhttp_connection *evcon; /* borrowed; evhttp owns it */
    struct job *job;                 /* reply in progress, or NULL */
    struct conn *prev;               /* in echo->conns */
    struct conn *next;               /* in echo->conns */
};

/* What the query string asked for. */
struct plan {
    int status;           /* response status */
    uint64_t sleep_ms;    /* delay before answering */
    bool has_bytes;       /* bytes= given: generated body, not JSON */
    uint64_t bytes;       /* length of the generated body */
    bool chunked;         /* no Content-Length: chunked encoding */
    bool has_break;       /* break_after= given */
    uint64_t break_after; /* close abruptly after this many body bytes */
};

enum job_state {
    JOB_SLEEPING, /* sleep_ms timer armed, client watched for close */
    JOB_REPLYING, /* body going out piece by piece */
    JOB_BREAKING, /* closing the connection on purpose (break_after) */
};

/* One request whose reply is not finished; owned by its conn. */
struct job {
    struct conn *conn;          /* borrowed; conn->job points back */
    struct evhttp_request *req; /* borrowed; evhttp owns it */
    enum job_state state;       /* what the job waits for */
    struct plan plan;           /* parsed query parameters */
    struct evbuffer *json;      /* owned; the JSON body, NULL for bytes= */
    uint64_t total;             /* full body length */
    uint64_t limit;             /* body bytes to send before end or break */
    uint64_t sent;              /* body bytes handed to evhttp so far */
    struct event *timer;        /* owned; sleep_ms, NULL when not sleeping */
    struct event *closed;       /* owned; EV_CLOSED watch while sleeping */
};

/* 'a'..'z' repeating; piece k starts at offset k % 26 of this array. */
static char pattern[ECHO_PIECE + 26];

static void job_reply(struct job *job);

static void *
echo_alloc(size_t size)
{
    void *p = calloc(1, size);

    if (p == NULL) {
        fprintf(stderr, "sluice-echo: out of memory\n");
        abort();
    }
    return p;
}

/*
 * JSON output. Strings are escaped per RFC 8259; bytes that are not valid
 * UTF-8 are written as \u00XX (their Latin-1 reading) so that the document
 * stays valid whatever the client sent.
 */

/* Length of the valid UTF-8 sequence at 'p', or 0 if it is not valid. */
static size_t
utf8_seq_len(const unsigned char *p, size_t n)
{
    unsigned char c = p[0];
    unsigned char lo = 0x80;
    unsigned char hi = 0xBF;
    size_t len;
    size_t i;

    if (c < 0x80) {
        return 1;
    }
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) {
            lo = 0xA0; /* overlong */
        } else if (c == 0xED) {
            hi = 0x9F; /* surrogates */
        }
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) {
            lo = 0x90; /* overlong */
        } else if (c == 0xF4) {
            hi = 0x8F; /* above U+10FFFF */
        }
    } else {
        return 0;
    }
    if (n < len || p[1] < lo || p[1] > hi) {
        return 0;
    }
    for (i = 2; i < len; i++) {
        if (p[i] < 0x80 || p[i] > 0xBF) {
            return 0;
        }
    }
    return len;
}

static bool
utf8_valid(const unsigned char *p, size_t n)
{
    size_t i = 0;

    while (i < n) {
        size_t len = utf8_seq_len(p + i, n - i);

        if (len == 0) {
            return false;
        }
        i += len;
    }
    return true;
}

static void
json_string(struct evbuffer *out, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t run = 0; /* start of the bytes copied verbatim */
    size_t i = 0;

    evbuffer_add(out, "\"", 1);
    while (i < n) {
        unsigned char c = p[i];
        size_t len = utf8_seq_len(p + i, n - i);
        const char *esc = NULL;

        if (len > 1 ||
            (len == 1 && c >= 0x20 && c != '"' && c != '\\' && c != 0x7F)) {
            i += len;
            continue;
        }
        evbuffer_add(out, s + run, i - run);
        switch (c) {
        case '"':
            esc = "\\\"";
            break;
        case '\\':
            esc = "\\\\";
            break;
        case '\n':
            esc = "\\n";
            break;
        case '\r':
            esc = "\\r";
            break;
        case '\t':
            esc = "\\t";
            break;
        default:
            break;
        }
        if (esc != NULL) {
            evbuffer_add(out, esc, strlen(esc));
        } else {
            evbuffer_add_printf(out, "\\u%04x", (unsigned)c);
        }
        i++;
        run = i;
    }
    evbuffer_add(out, s + run, n - run);
    evbuffer_add(out, "\"", 1);
}

static void
json_cstring(struct evbuffer *out, const char *s)
{
    if (s == NULL) {
        evbuffer_add(out, "null", 4);
    } else {
        json_string(out, s, strlen(s));
    }
}

static const char *
method_name(enum evhttp_cmd_type cmd)
{
    switch (cmd) {
    case EVHTTP_REQ_GET:
        return "GET";
    case EVHTTP_REQ_POST:
        return "POST";
    case EVHTTP_REQ_HEAD:
        return "HEAD";
    case EVHTTP_REQ_PUT:
        return "PUT";
    case EVHTTP_REQ_DELETE:
        return "DELETE";
    case EVHTTP_REQ_OPTIONS:
        return "OPTIONS";
    case EVHTTP_REQ_TRACE:
        return "TRACE";
    case EVHTTP_REQ_CONNECT:
        return "CONNECT";
    case EVHTTP_REQ_PATCH:
        return "PATCH";
    }
    return "UNKNOWN";
}

static uint64_t
wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static struct evbuffer *
request_json(const struct echo *echo, struct evhttp_request *req)
{
    struct evbuffer *out = evbuffer_new();
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    struct evbuffer *body = evhttp_request_get_input_buffer(req);
    size_t body_len = evbuffer_get_length(body);
    struct evkeyval *h;
    char *peer_addr = NULL;
    ev_uint16_t peer_port = 0;
    const char *sep = "";

    evbuffer_add_printf(out, "{\"server\":");
    json_cstring(out, echo->name);
    evbuffer_add_printf(out, ",\"method\":\"%s\",\"uri\":",
                        method_name(evhttp_request_get_command(req)));
    json_cstring(out, evhttp_request_get_uri(req));
    evbuffer_add_printf(out, ",\"path\":");
    json_cstring(out, uri != NULL ? evhttp_uri_get_path(uri) : NULL);
    evbuffer_add_printf(out, ",\"query\":");
    json_cstring(out, uri != NULL ? evhttp_uri_get_query(uri) : NULL);
    evbuffer_add_printf(out, ",\"headers\":[");
    for (h = evhttp_request_get_input_headers(req)->tqh_first; h != NULL;
         h = h->next.tqe_next) {
        evbuffer_add_printf(out, "%s[", sep);
        json_cstring(out, h->key);
        evbuffer_add(out, ",", 1);
        json_cstring(out, h->value);
        evbuffer_add(out, "]", 1);
        sep = ",";
    }
    evbuffer_add_printf(out, "],\"body_bytes\":%zu,\"body\":", body_len);
    if (body_len <= ECHO_BODY_TEXT_MAX &&
        utf8_valid(evbuffer_pullup(body, -1), body_len)) {
        json_string(out, (const char *)evbuffer_pullup(body, -1), body_len);
    } else {
        evbuffer_add(out, "null", 4);
    }
    evbuffer_add_printf(out, ",\"peer\":");
    evhttp_connection_get_peer(evhttp_request_get_connection(req), &peer_addr,
                               &peer_port);
    if (peer_addr == NULL) {
        evbuffer_add(out, "null", 4);
    } else {
        /* IPv6 peers get brackets so that the port stays unambiguous. */
        bool v6 = strchr(peer_addr, ':') != NULL;
        char *peer = NULL;
        int n = snprintf(NULL, 0, "%s%s%s:%u", v6 ? "[" : "", peer_addr,
                         v6 ? "]" : "", (unsigned)peer_port);

        peer = echo_alloc((size_t)n + 1);
        snprintf(peer, (size_t)n + 1, "%s%s%s:%u", v6 ? "[" : "", peer_addr,
                 v6 ? "]" : "", (unsigned)peer_port);
        json_cstring(out, peer);
        free(peer);
    }
    /* When the request arrived, so that tests can see its spacing. */
    evbuffer_add_printf(out, ",\"received_ms\":%" PRIu64, wall_ms());
    evbuffer_add(out, "}\n", 2);
    return out;
}

/*
 * Query parameters.
 */

/* Whole-string unsigned decimal in [min, max]. */
static int
parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    char *end = NULL;
    unsigned long long v;

    if (*s < '0' || *s > '9') {
        return -1;
    }
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max) {
        return -1;
    }
    *out = v;
    return 0;
}

static bool
is_token(const char *s, size_t n)
{
    size_t i;

    if (n == 0) {
        return false;
    }
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        if (c <= 0x20 || c >= 0x7F || strchr("\"(),/:;<=>?@[\\]{}", c)) {
            return false;
        }
    }
    return true;
}

/* Adds "Name:Value" to 'headers'; the value may start with spaces. */
static int
add_header_spec(struct evkeyvalq *headers, const char *spec)
{
    const char *colon = strchr(spec, ':');
    const char *value;
    char *name;
    int rc;

    if (colon == NULL || !is_token(spec, (size_t)(colon - spec))) {
        return -1;
    }
    value = colon + 1;
    while (*value == ' ' || *value == '\t') {
        value++;
    }
    name = echo_alloc((size_t)(colon - spec) + 1);
    memcpy(name, spec, (size_t)(colon - spec));
    rc = evhttp_add_header(headers, name, value); /* refuses CR and LF */
    free(name);
    return rc;
}

/* Applies one decoded parameter; unknown names are ignored. */
static int
plan_param(struct plan *plan, struct evkeyvalq *headers, const char *key,
           const char *value)
{
    uint64_t v = 0;

    if (strcmp(key, "status") == 0) {
        if (parse_u64(value, 200, 599, &v) < 0) {
            return -1;
        }
        plan->status = (int)v;
    } else if (strcmp(key, "sleep_ms") == 0) {
        return parse_u64(value, 0, ECHO_MAX_SLEEP_MS, &plan->sleep_ms);
    } else if (strcmp(key, "bytes") == 0) {
        plan->has_bytes = true;
        return parse_u64(value, 0, ECHO_MAX_BYTES, &plan->bytes);
    } else if (strcmp(key, "chunked") == 0) {
        if (parse_u64(value, 0, 1, &v) < 0) {
            return -1;
        }
        plan->chunked = v == 1;
    } else if (strcmp(key, "break_after") == 0) {
        plan->has_break = true;
        return parse_u64(value, 0, ECHO_MAX_BYTES, &plan->break_after);
    } else if (strcmp(key, "header_bytes") == 0) {
        char *big;
        int rc;

        if (parse_u64(value, 0, ECHO_MAX_HEADER_BYTES, &v) < 0) {
            return -1;
        }
        big = echo_alloc(v + 1);
        memset(big, 'x', v);
        rc = evhttp_add_header(headers, "X-Big", big);
        free(big);
        return rc;
    } else if (strcmp(key, "set_header") == 0) {
        return add_header_spec(headers, value);
    }
    return 0;
}

/*
 * Parses 'query' (raw, may be NULL) into 'plan' and adds the requested
 * response headers to 'headers'. On error returns -1 with the offending
 * parameter, decoded, in '*bad' (caller frees).
 */
static int
plan_parse(struct plan *plan, const char *query, struct evkeyvalq *headers,
           char **bad)
{
    const char *p = query;

    memset(plan, 0, sizeof(*plan));
    plan->status = 200;
    while (p != NULL && *p != '\0') {
        size_t len = strcspn(p, "&");
        char *item = echo_alloc(len + 1);
        char *eq;
        char *key;
        char *value;
        int rc;

        memcpy(item, p, len);
        p += len + (p[len] == '&');
        eq = strchr(item, '=');
        if (eq != NULL) {
            *eq = '\0';
        }
        key = evhttp_uridecode(item, 1, NULL);
        value = evhttp_uridecode(eq != NULL ? eq + 1 : "", 1, NULL);
        free(item);
        rc = plan_param(plan, headers, key, value);
        if (rc < 0) {
            size_t n = strlen(key) + strlen(value) + 2;

            *bad = echo_alloc(n);
            snprintf(*bad, n, "%s=%s", key, value);
        }
        free(key);
        free(value);
        if (rc < 0) {
            return -1;
        }
    }
    return 0;
}

/*
 * Connections and jobs.
 */

static void
job_free(struct job *job)
{
    if (job->timer != NULL) {
        event_free(job->timer);
    }
    if (job->closed != NULL) {
        event_free(job->closed);
    }
    if (job->json != NULL) {
        evbuffer_free(job->json);
    }
    free(job);
}

/*
 * evhttp frees every incoming connection through evhttp_connection_free(),
 * which runs this first: on client EOF or error, on Connection: close, when
 * we break a connection on purpose, and in evhttp_free() at exit.
 */
static void
on_conn_close(struct evhttp_connection *evcon, void *arg)
{
    struct conn *conn = arg;
    struct echo *echo = conn->echo;
    struct job *job = conn->job;

    (void)evcon;
    if (job != NULL) {
        struct evhttp_request *req = job->req;

        conn->job = NULL;
        if (job->state != JOB_BREAKING) {
            echo->aborted++;
        }
        job_free(job);
        /* A request cut off mid-reply has been detached from its connection
         * and is ours to free; an attached one dies with the connection. */
        if (evhttp_request_get_connection(req) == NULL) {
            evhttp_send_reply_end(req);
        }
    }
    if (conn->prev != NULL) {
        conn->prev->next = conn->next;
    } else {
        echo->conns = conn->next;
    }
    if (conn->next != NULL) {
        conn->next->prev = conn->prev;
    }
    echo->open_connections--;
    free(conn);
}

static struct conn *
conn_for(struct echo *echo, struct evhttp_connection *evcon)
{
    struct conn *conn;
    struct bufferevent *bev;
    int one = 1;

    for (conn = echo->conns; conn != NULL; conn = conn->next) {
        if (conn->evcon == evcon) {
            return conn;
        }
    }
    conn = echo_alloc(sizeof(*conn));
    conn->echo = echo;
    conn->evcon = evcon;
    conn->next = echo->conns;
    if (echo->conns != NULL) {
        echo->conns->prev = conn;
    }
    echo->conns = conn;
    echo->open_connections++;
    echo->connections++;
    evhttp_connection_set_closecb(evcon, on_conn_close, conn);
    /* Replies are written whole; Nagle would only add latency. */
    bev = evhttp_connection_get_bufferevent(evcon);
    setsockopt(bufferevent_getfd(bev), IPPROTO_TCP, TCP_NODELAY, &one,
               sizeof(one));
    return conn;
}

static bool
reply_has_body(const struct job *job)
{
    int status = job->plan.status;

    return evhttp_request_get_command(job->req) != EVHTTP_REQ_HEAD &&
           status != 204 && status != 304;
}

static void
set_content_length(struct evhttp_request *req, uint64_t n)
{
    char len[32];

    snprintf(len, sizeof(len), "%" PRIu64, n);
    evhttp_remove_header(evhttp_request_get_output_headers(req),
                         "Content-Length");
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Length",
                      len);
}

/* Ends the reply normally; frees the job. */
static void
job_finish(struct job *job)
{
    struct evhttp_request *req = job->req;

    job->conn->job = NULL;
    job_free(job);
    /* May free the connection (Connection: close), running on_conn_close. */
    evhttp_send_reply_end(req);
}

/* Closes the connection without finishing the reply; frees the job. */
static void
job_break(struct job *job)
{
    job->state = JOB_BREAKING;
    evhttp_connection_free(evhttp_request_get_connection(job->req));
}

static void on_piece_drained(struct evhttp_connection *evcon, void *arg);

static void
on_piece_freed(const void *data, size_t len, void *arg)
{
    struct echo *echo = arg;

    (void)data;
    echo->buffered -= len;
}

static void
job_send_piece(struct job *job)
{
    struct evbuffer *piece = evbuffer_new();
    uint64_t left = job->limit - job->sent;
    size_t n = left < ECHO_PIECE ? (size_t)left : ECHO_PIECE;

    if (job->json != NULL) {
        evbuffer_remove_buffer(job->json, piece, n);
    } else {
        /* Referenced, not copied; the cleanup runs once evhttp has written
         * the piece out (or dropped it), which keeps 'buffered' exact. */
        struct echo *echo = job->conn->echo;

        evbuffer_add_reference(piece, pattern + job->sent % 26, n,
                               on_piece_freed, echo);
        echo->buffered += n;
        if (echo->buffered > echo->max_buffered) {
            echo->max_buffered = echo->buffered;
        }
    }
    job->sent += n;
    evhttp_send_reply_chunk_with_cb(job->req, piece, on_piece_drained, job);
    evbuffer_free(piece);
}

/* The output buffer is empty again: the previous piece reached the kernel. */
static void
on_piece_drained(struct evhttp_connection *evcon, void *arg)
{
    struct job *job = arg;

    (void)evcon;
    if (job->sent < job->limit) {
        job_send_piece(job);
    } else if (job->plan.has_break) {
        job_break(job);
    } else {
        job_finish(job);
    }
}

static void
job_reply(struct job *job)
{
    struct evhttp_request *req = job->req;
    struct evkeyvalq *out = evhttp_request_get_output_headers(req);
    bool body = reply_has_body(job);

    job->state = JOB_REPLYING;
    if (evhttp_find_header(out, "Content-Type") == NULL) {
        evhttp_add_header(out, "Content-Type",
                          job->plan.has_bytes ? "application/octet-stream"
                                              : "application/json");
    }
    if (job->plan.has_bytes) {
        job->total = job->plan.bytes;
    } else {
        job->total = evbuffer_get_length(job->json);
    }
    if (job->plan.has_break && job->plan.break_after == 0) {
        /* Nothing at all, not even a status line. */
        job_break(job);
        return;
    }
    if (!job->plan.has_bytes && !job->plan.chunked && !job->plan.has_break) {
        /* The plain case: evhttp adds Content-Length except for HEAD. */
        if (evhttp_request_get_command(req) == EVHTTP_REQ_HEAD) {
            set_content_length(req, job->total);
        }
        job->conn->job = NULL;
        evhttp_send_reply(req, job->plan.status, NULL, body ? job->json : NULL);
        job_free(job);
        return;
    }
    if (!job->plan.chunked &&
        (body || evhttp_request_get_command(req) == EVHTTP_REQ_HEAD)) {
        set_content_length(req, job->total);
    }
    job->limit = job->total;
    if (job->plan.has_break && job->plan.break_after < job->total) {
        job->limit = job->plan.break_after;
    }
    evhttp_send_reply_start(req, job->plan.status, NULL);
    if (!body || job->limit == 0) {
        if (job->plan.has_break && body) {
            job_break(job);
        } else {
            job_finish(job);
        }
        return;
    }
    job_send_piece(job);
}

/* The client went away while its reply was being delayed. */
static void
on_client_closed(evutil_socket_t fd, short what, void *arg)
{
    struct job *job = arg;

    (void)fd;
    (void)what;
    /* Runs on_conn_close, which counts the abort and frees the job. */
    evhttp_connection_free(job->conn->evcon);
}

static void
on_sleep_done(evutil_socket_t fd, short what, void *arg)
{
    struct job *job = arg;

    (void)fd;
    (void)what;
    event_free(job->timer);
    job->timer = NULL;
    event_free(job->closed);
    job->closed = NULL;
    job_reply(job);
}

/*
 * evhttp stops reading a connection once a request is complete, so it would
 * not notice the client leaving while the reply is delayed: watch the socket
 * for EV_CLOSED ourselves.
 */
static void
job_sleep(struct job *job)
{
    struct echo *echo = job->conn->echo;
    struct bufferevent *bev =
        evhttp_connection_get_bufferevent(job->conn->evcon);
    struct timeval tv = {
        .tv_sec = (time_t)(job->plan.sleep_ms / 1000),
        .tv_usec = (suseconds_t)(job->plan.sleep_ms % 1000 * 1000),
    };

    job->state = JOB_SLEEPING;
    job->timer = evtimer_new(echo->base, on_sleep_done, job);
    job->closed = event_new(echo->base, bufferevent_getfd(bev), EV_CLOSED,
                            on_client_closed, job);
    evtimer_add(job->timer, &tv);
    event_add(job->closed, NULL);
}

static void
reply_json_text(struct evhttp_request *req, int status, struct evbuffer *body)
{
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "application/json");
    evhttp_send_reply(req, status, NULL, body);
    evbuffer_free(body);
}

static void
reply_stats(struct echo *echo, struct evhttp_request *req)
{
    struct evbuffer *body = evbuffer_new();

    /* The connection asking is not counted: a test wants to see 0 once
     * everything else has gone (nor its handshake, over TLS). */
    evbuffer_add_printf(
        body,
        "{\"requests\":%" PRIu64 ",\"aborted\":%" PRIu64
        ",\"open_connections\":%" PRIu64 ",\"connections\":%" PRIu64
        ",\"buffered_bytes\":%" PRIu64 ",\"max_buffered_bytes\":%" PRIu64
        ",\"tls_handshakes\":%" PRIu64 ",\"tls_resumed\":%" PRIu64 "}\n",
        echo->requests, echo->aborted, echo->open_connections - 1,
        echo->connections - 1, echo->buffered, echo->max_buffered,
        echo->tls != NULL ? echo->tls_handshakes - 1 : 0, echo->tls_resumed);
    reply_json_text(req, 200, body);
}

static void
reply_bad_param(struct echo *echo, struct evhttp_request *req, const char *bad)
{
    struct evbuffer *body = evbuffer_new();

    evhttp_clear_headers(evhttp_request_get_output_headers(req));
    evbuffer_add_printf(body, "{\"server\":");
    json_cstring(body, echo->name);
    evbuffer_add_printf(body, ",\"error\":\"bad query parameter\",\"param\":");
    json_cstring(body, bad);
    evbuffer_add(body, "}\n", 2);
    reply_json_text(req, 400, body);
}

static void
on_request(struct evhttp_request *req, void *arg)
{
    struct echo *echo = arg;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri != NULL ? evhttp_uri_get_path(uri) : NULL;
    struct conn *conn = conn_for(echo, evhttp_request_get_connection(req));
    struct job *job;
    char *bad = NULL;

    if (path != NULL && strcmp(path, "/__stats") == 0 &&
        evhttp_request_get_command(req) == EVHTTP_REQ_GET) {
        reply_stats(echo, req);
        return;
    }
    echo->requests++;
    job = echo_alloc(sizeof(*job));
    job->conn = conn;
    job->req = req;
    if (plan_parse(&job->plan, uri != NULL ? evhttp_uri_get_query(uri) : NULL,
                   evhttp_request_get_output_headers(req), &bad) < 0) {
        reply_bad_param(echo, req, bad);
        free(bad);
        free(job);
        return;
    }
    if (!job->plan.has_bytes) {
        job->json = request_json(echo, req);
    }
    conn->job = job;
    if (job->plan.sleep_ms > 0) {
        job_sleep(job);
    } else {
        job_reply(job);
    }
}

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)sig;
    (void)what;
    event_base_loopexit(arg, NULL);
}

static void
usage(FILE *f)
{
    fprintf(f,
            "usage: sluice-echo [--listen HOST:PORT] [--name NAME]\n"
            "                   [--tls-cert FILE --tls-key FILE "
            "[--tls-client-ca FILE]]\n"
            "  --listen HOST:PORT  address to bind (default %s;\n"
            "                      port 0 picks a free port)\n"
            "  --name NAME         \"server\" field of each reply "
            "(default %s)\n"
            "  --tls-cert FILE     speak HTTPS with this certificate chain "
            "(PEM)\n"
            "  --tls-key FILE      and its private key\n"
            "  --tls-client-ca FILE  require a client certificate issued "
            "by this CA\n",
            ECHO_DEFAULT_LISTEN, ECHO_DEFAULT_NAME);
}

/* Counts each completed handshake once (TLS 1.3 reports it again after
 * its session tickets). */
static void
on_tls_info(const SSL *ssl, int where, int ret)
{
    (void)ret;
    if ((where & SSL_CB_HANDSHAKE_DONE) && SSL_get_app_data(ssl) == NULL) {
        SSL_set_app_data((SSL *)ssl, the_echo);
        the_echo->tls_handshakes++;
        if (SSL_session_reused((SSL *)ssl)) {
            the_echo->tls_resumed++;
        }
    }
}

static struct bufferevent *
on_tls_bev(struct event_base *base, void *arg)
{
    struct echo *echo = arg;
    SSL *ssl = SSL_new(echo->tls);

    if (ssl == NULL) {
        return NULL;
    }
    return bufferevent_openssl_socket_new(
        base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
}

static SSL_CTX *
tls_context(const char *cert, const char *key, const char *client_ca)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    static const unsigned char sid[] = "sluice-echo";

    if (ctx == NULL || SSL_CTX_use_certificate_chain_file(ctx, cert) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ctx) != 1) {
        char err[256];

        ERR_error_string_n(ERR_get_error(), err, sizeof(err));
        fprintf(stderr, "sluice-echo: --tls-cert %s --tls-key %s: %s\n", cert,
                key, err);
        SSL_CTX_free(ctx);
        return NULL;
    }
    /* Resumption works with client certificates only with an id. */
    SSL_CTX_set_session_id_context(ctx, sid, sizeof(sid) - 1);
    if (client_ca != NULL) {
        if (SSL_CTX_load_verify_locations(ctx, client_ca, NULL) != 1) {
            fprintf(stderr, "sluice-echo: --tls-client-ca %s: unreadable\n",
                    client_ca);
            SSL_CTX_free(ctx);
            return NULL;
        }
        SSL_CTX_set_verify(
            ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    }
    SSL_CTX_set_info_callback(ctx, on_tls_info);
    return ctx;
}

/*
 * Splits "HOST:PORT" or "[V6]:PORT". 'host' gets the address without
 * brackets, 'shown' the address as given; both are freed by the caller.
 */
static int
parse_listen(const char *spec, char **host, char **shown, uint16_t *port)
{
    const char *colon = strrchr(spec, ':');
    size_t hlen;
    uint64_t v = 0;

    if (colon == NULL || colon == spec ||
        parse_u64(colon + 1, 0, 65535, &v) < 0) {
        return -1;
    }
    hlen = (size_t)(colon - spec);
    *shown = echo_alloc(hlen + 1);
    memcpy(*shown, spec, hlen);
    if (spec[0] == '[') {
        if (hlen < 3 || spec[hlen - 1] != ']') {
            free(*shown);
            return -1;
        }
        *host = echo_alloc(hlen - 1);
        memcpy(*host, spec + 1, hlen - 2);
    } else {
        *host = echo_alloc(hlen + 1);
        memcpy(*host, spec, hlen);
    }
    *port = (uint16_t)v;
    return 0;
}

static uint16_t
bound_port(struct evhttp_bound_socket *bound)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);

    if (getsockname(evhttp_bound_socket_get_fd(bound), (struct sockaddr *)&ss,
                    &len) < 0) {
        return 0;
    }
    if (ss.ss_family == AF_INET6) {
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    }
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

int
main(int argc, char **argv)
{
    const char *listen = ECHO_DEFAULT_LISTEN;
    struct echo echo = {.name = ECHO_DEFAULT_NAME};
    const char *cert = NULL, *key = NULL, *client_ca = NULL;
    struct evhttp_bound_socket *bound;
    struct event *on_term;
    struct event *on_int;
    char *host = NULL;
    char *shown = NULL;
    uint16_t port = 0;
    int i;

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--listen") == 0 && i + 1 < argc) {
            listen = argv[++i];
        } else if (strcmp(argv[i], "--name") == 0 && i + 1 < argc) {
            echo.name = argv[++i];
        } else if (strcmp(argv[i], "--tls-cert") == 0 && i + 1 < argc) {
            cert = argv[++i];
        } else if (strcmp(argv[i], "--tls-key") == 0 && i + 1 < argc) {
            key = argv[++i];
        } else if (strcmp(argv[i], "--tls-client-ca") == 0 && i + 1 < argc) {
            client_ca = argv[++i];
        } else if (strcmp(argv[i], "--help") == 0 ||
                   strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (parse_listen(listen, &host, &shown, &port) < 0) {
        fprintf(stderr, "sluice-echo: --listen %s: expected HOST:PORT\n",
                listen);
        return 2;
    }
    if ((cert == NULL) != (key == NULL)) {
        fprintf(stderr, "sluice-echo: --tls-cert and --tls-key go together\n");
        return 2;
    }
    if (cert != NULL &&
        (echo.tls = tls_context(cert, key, client_ca)) == NULL) {
        return 1;
    }
    the_echo = &echo;
    for (i = 0; i < (int)sizeof(pattern); i++) {
        pattern[i] = (char)('a' + i % 26);
    }
    /* A client that leaves mid-reply must cost an EPIPE, not the process. */
    signal(SIGPIPE, SIG_IGN);

    echo.base = event_base_new();
    if (echo.base == NULL) {
        fprintf(stderr, "sluice-echo: cannot create the event loop\n");
        return 1;
    }
    if (!(event_base_get_features(echo.base) & EV_FEATURE_EARLY_CLOSE)) {
        fprintf(stderr,
                "sluice-echo: warning: event backend %s has no "
                "EV_CLOSED; clients leaving during sleep_ms go "
                "unnoticed\n",
                event_base_get_method(echo.base));
    }
    echo.http = evhttp_new(echo.base);
    evhttp_set_allowed_methods(
        echo.http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
                       EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS |
                       EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT |
                       EVHTTP_REQ_PATCH);
    evhttp_set_default_content_type(echo.http, NULL);
    evhttp_set_max_body_size(echo.http, ECHO_MAX_BODY);
    evhttp_set_max_headers_size(echo.http, ECHO_MAX_HEADERS);
    evhttp_set_flags(echo.http, EVHTTP_SERVER_LINGERING_CLOSE);
    evhttp_set_gencb(echo.http, on_request, &echo);
    if (echo.tls != NULL) {
        evhttp_set_bevcb(echo.http, on_tls_bev, &echo);
    }

    /* Before the port opens: whoever sees it open may signal at once. */
    on_term = evsignal_new(echo.base, SIGTERM, on_signal, echo.base);
    on_int = evsignal_new(echo.base, SIGINT, on_signal, echo.base);
    event_add(on_term, NULL);
    event_add(on_int, NULL);

    bound = evhttp_bind_socket_with_handle(echo.http, host, port);
    if (bound == NULL) {
        fprintf(stderr, "sluice-echo: cannot listen on %s: %s\n", listen,
                strerror(errno));
        event_free(on_term);
        event_free(on_int);
        evhttp_free(echo.http);
        event_base_free(echo.base);
        free(host);
        free(shown);
        return 1;
    }
    printf("sluice-echo: listening on %s:%u\n", shown,
           (unsigned)bound_port(bound));
    fflush(stdout);
    event_base_dispatch(echo.base);

    /* Frees every connection, and through on_conn_close every job. */
    evhttp_free(echo.http);
    event_free(on_term);
    event_free(on_int);
    event_base_free(echo.base);
    SSL_CTX_free(echo.tls);
    libevent_global_shutdown();
    free(host);
    free(shown);
    return 0;
}
