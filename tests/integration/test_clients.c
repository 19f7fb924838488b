/*
 * Client connections seen from outside: the request-head deadline
 * (server.header_timeout) against slowloris clients, the connection cap
 * (server.max_connections) and running out of descriptors (EMFILE). The
 * real gateway in front of the real sluice-echo, driven over raw sockets;
 * each test stops the gateway with SIGTERM, which must exit 0 (so that,
 * under ASan, a leak fails the test).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

/*
 * The echo and a one-worker gateway, through 'wrapper' (NULL: none; see
 * gateway_start_wrapped), with 'server_extra' as more keys under server:,
 * one route to the echo, no admin listener, no Redis, and the access log
 * off so that the gateway's output holds only its diagnostics.
 */
static void
stack_start(struct echo_stack *st, const char *server_extra,
            const char *const *wrapper)
{
    echo_stack_start_wrapped(st, wrapper, server_extra,
                             "log:\n"
                             "  access: off\n",
                             "  - id: all\n"
                             "    uri: http://@ECHO@\n"
                             "    predicates: [Path=/**]\n");
}

/* Lines the gateway has written so far; read in pieces, since a gateway
 * that logs every failed accept() writes millions. */
static size_t
log_lines(const struct proc *p)
{
    FILE *f = fopen(p->log_path, "rb");
    char chunk[65536];
    size_t n, lines = 0;

    while (f != NULL && (n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        for (size_t i = 0; i < n; i++) {
            lines += chunk[i] == '\n';
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    return lines;
}

/* The last 'max' bytes of the gateway's output, for a failure message; the
 * caller frees it. */
static char *
log_tail(const struct proc *p, long max)
{
    FILE *f = fopen(p->log_path, "rb");
    char *s = calloc(1, (size_t)max + 1);
    size_t n = 0;

    if (f != NULL) {
        if (fseek(f, -max, SEEK_END) != 0) {
            rewind(f);
        }
        n = fread(s, 1, (size_t)max, f);
        fclose(f);
    }
    s[n] = '\0';
    return s;
}

/*
 * Raw connections: curl retries, pools and times out on its own terms;
 * these tests need to hold sockets open, send by the byte and tell "no
 * answer yet" from "closed".
 */

/* A non-blocking connection to 127.0.0.1:'port'; fails the test if the
 * connect does not succeed (a full backlog still completes it). */
static int
tcp_connect(uint16_t port)
{
    struct sockaddr_in sa = {0};
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    cr_assert(fd >= 0, "socket: %s", strerror(errno));
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0,
                 "connect to %u: %s", (unsigned)port, strerror(errno));
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

/* Sends all of 's'; false if the connection failed. Requests are small:
 * the socket buffer takes them at once. */
static bool
send_str(int fd, const char *s)
{
    size_t len = strlen(s), off = 0;

    while (off < len) {
        ssize_t n = send(fd, s + off, len - off, MSG_NOSIGNAL);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return false;
        }
        off += (size_t)n;
    }
    return true;
}

/* What reading one response on a connection gave. */
enum reply_end {
    REPLY_DONE,   /* a complete response arrived */
    REPLY_NONE,   /* the deadline passed first; the connection is open */
    REPLY_CLOSED, /* the peer closed or reset it first */
};

static int64_t
left_ms(int64_t deadline)
{
    int64_t left = deadline - harness_now_ms();

    return left > 0 ? left : 0;
}

/* The value of header 'name' in the head 'head' (up to 'end'), or NULL. */
static const char *
head_value(const char *head, const char *end, const char *name)
{
    size_t nlen = strlen(name);

    for (const char *l = strstr(head, "\r\n"); l != NULL && l < end;
         l = strstr(l + 2, "\r\n")) {
        if (strncasecmp(l + 2, name, nlen) == 0 && l[2 + nlen] == ':') {
            return l + 3 + nlen;
        }
    }
    return NULL;
}

/* True once 'buf' holds a whole response (Content-Length or chunked);
 * sets '*status'. */
static bool
response_complete(const char *buf, size_t len, long *status)
{
    const char *end = strstr(buf, "\r\n\r\n");
    const char *cl, *te;
    size_t head_len;

    if (end == NULL || strncmp(buf, "HTTP/1.", 7) != 0) {
        return false;
    }
    *status = strtol(buf + 9, NULL, 10);
    head_len = (size_t)(end - buf) + 4;
    cl = head_value(buf, end, "Content-Length");
    te = head_value(buf, end, "Transfer-Encoding");
    if (cl != NULL) {
        return len >= head_len + strtoul(cl, NULL, 10);
    }
    if (te != NULL && strncasecmp(te + strspn(te, " "), "chunked", 7) == 0) {
        return len >= head_len + 5 &&
               memcmp(buf + len - 5, "0\r\n\r\n", 5) == 0;
    }
    return true; /* no body (204, 304) */
}

/*
 * Reads one response from 'fd' until 'deadline' (harness_now_ms()); on
 * REPLY_DONE '*status' is its status code.
 */
static enum reply_end
read_response(int fd, int64_t deadline, long *status)
{
    char buf[65536];
    size_t len = 0;

    *status = 0;
    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        ssize_t n;

        if (poll(&pfd, 1, (int)left_ms(deadline)) == 0) {
            return REPLY_NONE;
        }
        n = recv(fd, buf + len, sizeof(buf) - 1 - len, 0);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
            continue;
        }
        if (n <= 0) {
            return REPLY_CLOSED;
        }
        len += (size_t)n;
        buf[len] = '\0';
        if (response_complete(buf, len, status)) {
            return REPLY_DONE;
        }
        cr_assert_lt(len, sizeof(buf) - 1, "response too large");
    }
}

/* Sends a keep-alive GET 'path' on 'fd' and expects a 200 by 'timeout_ms'. */
static void
assert_served(int fd, const char *path, int timeout_ms, const char *what)
{
    char *req =
        harness_strf("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path);
    long status;
    enum reply_end end;

    cr_assert(send_str(fd, req), "%s: send failed: %s", what, strerror(errno));
    end = read_response(fd, harness_now_ms() + timeout_ms, &status);
    cr_assert_eq(end, REPLY_DONE, "%s: %s within %d ms", what,
                 end == REPLY_NONE ? "no response" : "closed, no response",
                 timeout_ms);
    cr_assert_eq(status, 200, "%s: status %ld", what, status);
    free(req);
}

/* ---- the request-head deadline ---- */

#define SLOW_CONNS 100
#define TRICKLE_MS 250
#define HEADER_TIMEOUT_MS 1000
/* Closed no sooner than this after the first byte: the deadline is the
 * whole head's, not a premature cut... */
#define CUT_NOT_BEFORE_MS 500
/* ...and no later than this: a generous margin over header_timeout for a
 * loaded machine or a sanitizer build, yet far short of the ~22 s that
 * trickling the whole head takes, or of client_timeout (30 s), which each
 * byte renews. */
#define CUT_BY_MS 5000

/* A valid head that takes 22 s to send at one byte per TRICKLE_MS. */
static const char slow_head[] = "GET /slowloris HTTP/1.1\r\n"
                                "Host: 127.0.0.1\r\n"
                                "User-Agent: trickle\r\n"
                                "X-Slow: one byte every quarter second\r\n"
                                "\r\n";

struct trickler {
    int fd;           /* -1 once closed */
    size_t sent;      /* bytes of slow_head sent */
    int64_t first_ms; /* when its first byte went out */
    int64_t cut_ms;   /* when the gateway closed it; 0: still open */
};

/* A client that sends a whole request at once and reads to the end. */
struct plain_client {
    int fd;          /* -1 when not started or finished */
    char buf[65536]; /* what arrived */
    size_t len;      /* bytes in 'buf' */
    long status;     /* of its response; 0 if none */
    int64_t done_ms; /* when the response was complete; 0: not yet */
};

static void
on_trickler_readable(struct trickler *t, int64_t now)
{
    char scratch[4096];
    ssize_t n = recv(t->fd, scratch, sizeof(scratch), 0);

    /* Bytes (say, a 408) may precede the close; the close is what counts. */
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        close(t->fd);
        t->fd = -1;
        t->cut_ms = now;
    }
}

static void
on_plain_readable(struct plain_client *c, int64_t now)
{
    ssize_t n = recv(c->fd, c->buf + c->len, sizeof(c->buf) - 1 - c->len, 0);

    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        return;
    }
    if (n > 0) {
        c->len += (size_t)n;
        c->buf[c->len] = '\0';
        if (!response_complete(c->buf, c->len, &c->status) &&
            c->len < sizeof(c->buf) - 1) {
            return;
        }
    }
    if (c->status == 0) {
        response_complete(c->buf, c->len, &c->status);
    }
    close(c->fd);
    c->fd = -1;
    c->done_ms = now;
}

Test(clients, slowloris_heads_are_cut_at_header_timeout_while_others_are_served)
{
    struct echo_stack st;
    static struct trickler t[SLOW_CONNS];
    static struct plain_client plain;
    struct pollfd pfds[SLOW_CONNS + 1];
    int64_t start, next_tick, end;
    size_t open_count;

    stack_start(&st,
                "  header_timeout: 1s\n"
                "  client_timeout: 30s\n",
                NULL);
    for (int i = 0; i < SLOW_CONNS; i++) {
        t[i].fd = tcp_connect(st.gw_port);
        t[i].sent = 0;
        t[i].cut_ms = 0;
    }
    memset(&plain, 0, sizeof(plain));
    plain.fd = -1;

    start = harness_now_ms();
    next_tick = start;
    end = start + CUT_BY_MS;
    open_count = SLOW_CONNS;
    for (int tick = 0;;) {
        int64_t now = harness_now_ms();
        nfds_t n = 0;
        int slot[SLOW_CONNS + 1];

        if (now >= next_tick) {
            for (int i = 0; i < SLOW_CONNS; i++) {
                if (t[i].fd < 0 || t[i].sent >= sizeof(slow_head) - 1) {
                    continue;
                }
                if (send(t[i].fd, slow_head + t[i].sent, 1, MSG_NOSIGNAL) ==
                    1) {
                    if (t[i].sent++ == 0) {
                        t[i].first_ms = harness_now_ms();
                    }
                } else if (errno == EPIPE || errno == ECONNRESET) {
                    close(t[i].fd);
                    t[i].fd = -1;
                    t[i].cut_ms = now;
                }
            }
            /* A normal client once every trickler is part-way through. */
            if (++tick == 2) {
                plain.fd = tcp_connect(st.gw_port);
                cr_assert(send_str(plain.fd, "GET /plain HTTP/1.1\r\n"
                                             "Host: 127.0.0.1\r\n"
                                             "Connection: close\r\n\r\n"));
            }
            next_tick += TRICKLE_MS;
        }
        open_count = 0;
        for (int i = 0; i < SLOW_CONNS; i++) {
            if (t[i].fd >= 0) {
                pfds[n] = (struct pollfd){.fd = t[i].fd, .events = POLLIN};
                slot[n++] = i;
                open_count++;
            }
        }
        if (plain.fd >= 0) {
            pfds[n] = (struct pollfd){.fd = plain.fd, .events = POLLIN};
            slot[n++] = -1;
        }
        if ((open_count == 0 && plain.done_ms != 0) || now >= end) {
            break;
        }
        if (poll(pfds, n, (int)left_ms(next_tick < end ? next_tick : end)) <=
            0) {
            continue;
        }
        now = harness_now_ms();
        for (nfds_t k = 0; k < n; k++) {
            if (pfds[k].revents == 0) {
                continue;
            }
            if (slot[k] < 0) {
                on_plain_readable(&plain, now);
            } else {
                on_trickler_readable(&t[slot[k]], now);
            }
        }
    }

    cr_assert_eq(
        plain.status, 200,
        "a normal client during the trickle got status %ld "
        "(0: no complete response) after %lld ms",
        plain.status,
        (long long)((plain.done_ms ? plain.done_ms : harness_now_ms()) -
                    start));
    for (int i = 0; i < SLOW_CONNS; i++) {
        cr_assert_neq(t[i].cut_ms, 0,
                      "trickling connection %d (and %zu in all) still open "
                      "%d ms after its first byte, %zu head bytes sent, "
                      "with header_timeout 1s",
                      i, open_count, CUT_BY_MS, t[i].sent);
        cr_assert_geq(t[i].cut_ms - t[i].first_ms, CUT_NOT_BEFORE_MS,
                      "trickling connection %d closed %lld ms after its "
                      "first byte, before header_timeout (1s)",
                      i, (long long)(t[i].cut_ms - t[i].first_ms));
    }
    for (int i = 0; i < SLOW_CONNS; i++) {
        if (t[i].fd >= 0) {
            close(t[i].fd);
        }
    }
    if (plain.fd >= 0) {
        close(plain.fd);
    }
    echo_stack_stop(&st);
}

/* Fails the test if either connection is closed within 'ms'. */
static void
assert_stay_open(const int fd[2], const char *const what[2], int ms)
{
    int64_t start = harness_now_ms();
    int64_t deadline = start + ms;

    while (harness_now_ms() < deadline) {
        struct pollfd pfds[2] = {{.fd = fd[0], .events = POLLIN},
                                 {.fd = fd[1], .events = POLLIN}};

        if (poll(pfds, 2, (int)left_ms(deadline)) <= 0) {
            continue;
        }
        for (int i = 0; i < 2; i++) {
            char c;

            ssize_t n;

            if (pfds[i].revents == 0) {
                continue;
            }
            n = recv(fd[i], &c, 1, MSG_PEEK);
            if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
                continue;
            }
            cr_assert(n > 0,
                      "%s was closed after %lld ms of silence "
                      "(header_timeout 1s, client_timeout 30s)",
                      what[i], (long long)(harness_now_ms() - start));
            cr_assert_fail("%s: unexpected bytes from the gateway: %c...",
                           what[i], c);
        }
    }
}

Test(clients, silent_connections_answer_to_client_timeout_not_header_timeout)
{
    struct echo_stack st;
    const char *what[2] = {"a keep-alive connection idle after a reply",
                           "a new connection that sent nothing"};
    int fd[2];

    stack_start(&st,
                "  header_timeout: 1s\n"
                "  client_timeout: 30s\n",
                NULL);
    fd[0] = tcp_connect(st.gw_port);
    assert_served(fd[0], "/first", 5000, what[0]);
    fd[1] = tcp_connect(st.gw_port);
    /* The head deadline runs from a head's first byte: silence, before
     * a first request or between two, is client_timeout's business. */
    assert_stay_open(fd, what, HEADER_TIMEOUT_MS * 5 / 2);
    assert_served(fd[0], "/second", 5000, what[0]);
    assert_served(fd[1], "/first", 5000, what[1]);
    close(fd[0]);
    close(fd[1]);
    echo_stack_stop(&st);
}

/* ---- max_connections ---- */

#define MAX_CONNS 4

Test(clients, past_max_connections_new_clients_wait_until_one_closes)
{
    struct echo_stack st;
    int idle[MAX_CONNS];
    int fifth;
    long status;
    enum reply_end end;
    size_t lines;
    char *log;

    stack_start(&st, "  max_connections: 4\n", NULL);
    /* The kernel queues connections in order: the gateway accepts these
     * four before the fifth. */
    for (int i = 0; i < MAX_CONNS; i++) {
        idle[i] = tcp_connect(st.gw_port);
    }
    fifth = tcp_connect(st.gw_port);
    cr_assert(send_str(fifth, "GET /fifth HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                              "\r\n"));
    end = read_response(fifth, harness_now_ms() + 1000, &status);
    cr_assert_eq(end, REPLY_NONE,
                 "a fifth connection, past max_connections: 4, was %s",
                 end == REPLY_DONE ? "answered" : "closed");

    close(idle[0]);
    end = read_response(fifth, harness_now_ms() + 5000, &status);
    cr_assert_eq(end, REPLY_DONE,
                 "the fifth connection was %s within 5 s of a slot freeing",
                 end == REPLY_NONE ? "not answered" : "closed unanswered");
    cr_assert_eq(status, 200);

    for (int i = 1; i < MAX_CONNS; i++) {
        close(idle[i]);
    }
    close(fifth);
    lines = log_lines(&st.gw);
    log = log_tail(&st.gw, 2000);
    cr_assert_leq(lines, 10, "the gateway wrote %zu lines while full:\n%s",
                  lines, log);
    free(log);
    echo_stack_stop(&st);
}

/*
 * A connection closed between requests, with nothing more from the client
 * (here after an answer with "Connection: close"), is not kept open to
 * linger: kept, it held the worker's one connection for 5 s, though the
 * client that keeps its socket will send nothing more.
 */
Test(clients, a_closed_idle_connection_does_not_hold_a_slot)
{
    struct echo_stack st;
    int first, second;
    long status;

    stack_start(&st, "  max_connections: 1\n", NULL);
    first = tcp_connect(st.gw_port);
    cr_assert(send_str(first, "GET /a HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                              "Connection: close\r\n\r\n"));
    cr_assert_eq(read_response(first, harness_now_ms() + 5000, &status),
                 REPLY_DONE);
    /* 'first' stays open. */
    second = tcp_connect(st.gw_port);
    cr_assert(send_str(second, "GET /b HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                               "\r\n"));
    cr_assert_eq(read_response(second, harness_now_ms() + 2000, &status),
                 REPLY_DONE,
                 "the next client waited: the closed connection still held "
                 "the slot");
    cr_assert_eq(status, 200);
    close(first);
    close(second);
    echo_stack_stop(&st);
}

/* ---- running out of descriptors ---- */

#define FD_LIMIT 64 /* the gateway's RLIMIT_NOFILE, soft and hard */
#define STR_(x) #x
#define STR(x) STR_(x)
#define MAX_FILL 200 /* more than FD_LIMIT can ever accept */
#define HOLD_MS 2000
#define MAX_HOLD_LINES 20 /* the log may say so, not repeat it */

Test(clients, out_of_descriptors_the_listener_pauses_instead_of_spinning)
{
    static const char *const wrapper[] = {
        "prlimit", "--nofile=" STR(FD_LIMIT) ":" STR(FD_LIMIT), "--", NULL};
    struct echo_stack st;
    int fill[MAX_FILL];
    int nfill = 0;
    int keep, waiting = -1, fresh;
    long status, cpu0, cpu1;
    int64_t t0, t1;
    size_t lines0, lines1;
    char *log;

    /* max_connections set high, so that the descriptors run out first. */
    stack_start(&st, "  max_connections: 10000\n", wrapper);
    keep = tcp_connect(st.gw_port);
    assert_served(keep, "/keep", 5000, "the first keep-alive connection");

    /* Fill the gateway's descriptor table: each connection asks once and
     * is answered, until one is not: accept() fails for it, and it waits
     * in the backlog. */
    while (nfill < MAX_FILL) {
        enum reply_end end;
        int fd = tcp_connect(st.gw_port);

        fill[nfill++] = fd;
        cr_assert(send_str(fd, "GET /fill HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                               "\r\n"));
        end = read_response(fd, harness_now_ms() + 1500, &status);
        if (end == REPLY_NONE) {
            waiting = fd;
            break;
        }
        cr_assert_eq(end, REPLY_DONE, "fill connection %d closed", nfill);
        cr_assert_eq(status, 200, "fill connection %d: status %ld", nfill,
                     status);
    }
    cr_assert_geq(waiting, 0,
                  "%d connections were all served under a limit of %d "
                  "descriptors",
                  nfill, FD_LIMIT);
    cr_assert_gt(nfill, 10, "only %d connections before the limit", nfill);

    /* Hold the gateway out of descriptors, with a connection pending. */
    lines0 = log_lines(&st.gw);
    cpu0 = proc_cpu_ms(st.gw.pid);
    t0 = harness_now_ms();
    {
        struct pollfd pfd = {.fd = waiting, .events = POLLIN};

        cr_assert_eq(poll(&pfd, 1, HOLD_MS), 0,
                     "the pending connection saw an answer or a close while "
                     "the gateway was out of descriptors");
    }
    cpu1 = proc_cpu_ms(st.gw.pid);
    t1 = harness_now_ms();
    lines1 = log_lines(&st.gw);
    cr_assert(cpu0 >= 0 && cpu1 >= 0, "no /proc/%d/stat", (int)st.gw.pid);
    /* Paused, it waits on a timer and uses next to nothing; spinning on
     * accept() burns a whole core. A quarter leaves room for a loaded
     * machine and a sanitizer build, and still catches a spinning gateway
     * that shares its core with others. */
    cr_assert_lt((cpu1 - cpu0) * 4, t1 - t0,
                 "the gateway used %ld ms of CPU in %lld ms out of "
                 "descriptors",
                 cpu1 - cpu0, (long long)(t1 - t0));
    log = log_tail(&st.gw, 2000);
    cr_assert_leq(lines1 - lines0, MAX_HOLD_LINES,
                  "the gateway wrote %zu lines in %lld ms out of "
                  "descriptors; the last of them:\n%s",
                  lines1 - lines0, (long long)(t1 - t0), log);
    free(log);

    /* Still serving what it has. */
    assert_served(keep, "/keep-again", 5000,
                  "a keep-alive connection while out of descriptors");

    /* Descriptors free up: the pending connection and new ones are served. */
    for (int i = 0; i < nfill; i++) {
        if (fill[i] != waiting) {
            close(fill[i]);
        }
    }
    status = 0;
    cr_assert_eq(read_response(waiting, harness_now_ms() + 5000, &status),
                 REPLY_DONE,
                 "the pending connection was not served once descriptors "
                 "were free");
    cr_assert_eq(status, 200);
    fresh = tcp_connect(st.gw_port);
    assert_served(fresh, "/fresh", 5000,
                  "a new connection once descriptors were free");
    close(fresh);
    close(waiting);
    close(keep);
    echo_stack_stop(&st);
}

/* The admin listener, out of descriptors, rests as the workers do. */
Test(clients, out_of_descriptors_the_admin_listener_pauses_too)
{
    static const char *const wrapper[] = {
        "prlimit", "--nofile=" STR(FD_LIMIT) ":" STR(FD_LIMIT), "--", NULL};
    static const char health[] =
        "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    struct echo_stack st;
    uint16_t admin = harness_free_port();
    char *sections = harness_strf("admin:\n"
                                  "  listen: 127.0.0.1:%u\n"
                                  "log:\n"
                                  "  access: off\n",
                                  admin);
    int fill[MAX_FILL];
    int nfill = 0;
    int waiting = -1, fresh;
    long status, cpu0, cpu1;
    int64_t t0, t1;
    size_t lines0, lines1;
    char *log;

    echo_stack_start_wrapped(&st, wrapper, "", sections,
                             "  - id: all\n"
                             "    uri: http://@ECHO@\n"
                             "    predicates: [Path=/**]\n");
    free(sections);
    cr_assert(harness_wait_port(admin, 5000), "no admin listener");

    /* Idle admin connections, each answered once, until one is not: the
     * one the gateway logged it could not accept. A slow answer on a
     * loaded machine is waited for, not taken for that. */
    while (nfill < MAX_FILL && waiting < 0) {
        enum reply_end end = REPLY_NONE;
        int fd = tcp_connect(admin);
        int64_t deadline = harness_now_ms() + 20000;

        fill[nfill++] = fd;
        cr_assert(send_str(fd, health));
        while (harness_now_ms() < deadline) {
            end = read_response(fd, harness_now_ms() + 200, &status);
            if (end != REPLY_NONE) {
                break;
            }
            if (proc_log_contains(&st.gw, "admin: accept: Too many open")) {
                waiting = fd;
                break;
            }
        }
        if (waiting >= 0) {
            break;
        }
        cr_assert_eq(end, REPLY_DONE,
                     "admin connection %d closed or unanswered", nfill);
        cr_assert_eq(status, 200);
    }
    cr_assert_geq(waiting, 0,
                  "%d admin connections were all served under a limit of "
                  "%d descriptors",
                  nfill, FD_LIMIT);

    lines0 = log_lines(&st.gw);
    cpu0 = proc_cpu_ms(st.gw.pid);
    t0 = harness_now_ms();
    {
        struct pollfd pfd = {.fd = waiting, .events = POLLIN};

        cr_assert_eq(poll(&pfd, 1, HOLD_MS), 0,
                     "the pending admin connection saw an answer or a close "
                     "while the gateway was out of descriptors");
    }
    cpu1 = proc_cpu_ms(st.gw.pid);
    t1 = harness_now_ms();
    lines1 = log_lines(&st.gw);
    cr_assert(cpu0 >= 0 && cpu1 >= 0, "no /proc/%d/stat", (int)st.gw.pid);
    cr_assert_lt((cpu1 - cpu0) * 4, t1 - t0,
                 "the gateway used %ld ms of CPU in %lld ms with its admin "
                 "listener out of descriptors",
                 cpu1 - cpu0, (long long)(t1 - t0));
    log = log_tail(&st.gw, 2000);
    cr_assert_leq(lines1 - lines0, MAX_HOLD_LINES,
                  "the gateway wrote %zu lines in %lld ms with its admin "
                  "listener out of descriptors; the last of them:\n%s",
                  lines1 - lines0, (long long)(t1 - t0), log);
    cr_assert(strstr(log, "admin: accept: Too many open files") != NULL,
              "the pause was not logged:\n%s", log);
    free(log);

    /* Descriptors free up: the pending connection and new ones are served
     * (the admin listener rests at most 1.6 s at a time). */
    for (int i = 0; i < nfill; i++) {
        if (fill[i] != waiting) {
            close(fill[i]);
        }
    }
    cr_assert_eq(read_response(waiting, harness_now_ms() + 5000, &status),
                 REPLY_DONE,
                 "the pending admin connection was not served once "
                 "descriptors were free");
    cr_assert_eq(status, 200);
    fresh = tcp_connect(admin);
    cr_assert(send_str(fresh, health));
    cr_assert_eq(read_response(fresh, harness_now_ms() + 5000, &status),
                 REPLY_DONE, "a new admin connection was not served");
    cr_assert_eq(status, 200);
    close(fresh);
    close(waiting);
    echo_stack_stop(&st);
}
