/*
 * The upstream client's writes, seen from a listening socket of the test's
 * own: a head sent on a pooled connection is written when the loop turn
 * ends, and a request given up in that turn is never written at all.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "clock.h"
#include "upstream.h"

#define DEADLINE_MS 5000

static const char RESPONSE[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

struct fixture {
    struct event_base *base;
    struct upstream_client *client;
    int listener;       /* the upstream's listening socket */
    int peer;           /* its side of the one pooled connection */
    uint16_t port;      /* where 'listener' listens */
    struct headers hdr; /* Host only */
    int done;           /* on_done calls */
    int errors;         /* on_error calls */
};

static void
on_head(void *arg, const struct resparse_head *head)
{
    (void)arg;
    (void)head;
}

static void
on_body(void *arg, struct evbuffer *buf)
{
    (void)arg;
    (void)buf;
}

static void
on_done(void *arg)
{
    ((struct fixture *)arg)->done++;
}

static void
on_error(void *arg, enum upstream_error err, const char *detail)
{
    (void)err;
    (void)detail;
    ((struct fixture *)arg)->errors++;
}

static const struct upstream_callbacks callbacks = {
    on_head, on_body, on_done, on_error, NULL,
};

static struct upstream_req *
send_get(struct fixture *f)
{
    struct upstream_request r = {
        .host = "127.0.0.1",
        .port = f->port,
        .method = "GET",
        .target = "/x",
        .headers = &f->hdr,
        .connect_timeout_ms = DEADLINE_MS,
        .response_timeout_ms = DEADLINE_MS,
        .keepalive = 4,
    };

    return upstream_send(f->client, &r, &callbacks, f);
}

/* Waits for 'fd' to be readable; false at the deadline. */
static bool
readable(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};

    return poll(&p, 1, DEADLINE_MS) == 1;
}

/* The bytes waiting on 'fd' now, without waiting: -1 when none. */
static ssize_t
waiting(int fd, char *buf, size_t cap)
{
    return recv(fd, buf, cap, MSG_DONTWAIT | MSG_PEEK);
}

/* Runs the loop until on_done or on_error has been called 'n' times. */
static void
loop_until_ended(struct fixture *f, int n)
{
    int64_t end = clock_mono_ms() + DEADLINE_MS;

    while (f->done + f->errors < n && clock_mono_ms() < end) {
        event_base_loop(f->base, EVLOOP_ONCE);
    }
    cr_assert_eq(f->done + f->errors, n, "the request did not end in time");
}

/*
 * Reads one request head from the upstream's side of the connection,
 * or fails the test.
 */
static void
read_head(int fd)
{
    char buf[4096];
    size_t n = 0;

    while (n < sizeof(buf) - 1) {
        cr_assert(readable(fd), "no request reached the upstream");
        ssize_t k = recv(fd, buf + n, sizeof(buf) - 1 - n, 0);

        cr_assert_gt(k, 0, "the connection closed mid-head");
        n += (size_t)k;
        buf[n] = '\0';
        if (strstr(buf, "\r\n\r\n") != NULL) {
            return;
        }
    }
    cr_assert_fail("no end to the request head");
}

/* Reads one request head on 'fd' and answers it with RESPONSE. */
static void
answer(int fd)
{
    read_head(fd);
    cr_assert_eq(write(fd, RESPONSE, sizeof(RESPONSE) - 1),
                 (ssize_t)(sizeof(RESPONSE) - 1));
}

/*
 * A client with one connection in its pool: one request sent, accepted,
 * read and answered in full.
 */
static void
setup(struct fixture *f)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t len = sizeof(a);

    memset(f, 0, sizeof(*f));
    f->base = event_base_new();
    f->client = upstream_client_new(f->base, NULL);
    headers_init(&f->hdr);
    headers_add(&f->hdr, "Host", "upstream.test");
    f->listener = socket(AF_INET, SOCK_STREAM, 0);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(bind(f->listener, (struct sockaddr *)&a, sizeof(a)), 0);
    cr_assert_eq(listen(f->listener, 4), 0);
    cr_assert_eq(getsockname(f->listener, (struct sockaddr *)&a, &len), 0);
    f->port = ntohs(a.sin_port);

    cr_assert_not_null(send_get(f));
    /* The connect completes in the loop; the head is queued behind it. */
    cr_assert(readable(f->listener), "the client did not connect");
    f->peer = accept(f->listener, NULL, NULL);
    cr_assert_geq(f->peer, 0);
    {
        int64_t end = clock_mono_ms() + DEADLINE_MS;
        char buf[16];

        while (waiting(f->peer, buf, sizeof(buf)) <= 0 &&
               clock_mono_ms() < end) {
            event_base_loop(f->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        }
    }
    answer(f->peer);
    loop_until_ended(f, 1);
    cr_assert_eq(f->done, 1, "the first request failed");
}

static void
teardown(struct fixture *f)
{
    upstream_client_free(f->client);
    event_base_free(f->base);
    headers_deinit(&f->hdr);
    close(f->peer);
    close(f->listener);
}

/* What one loop turn does, run by an event made active. */
struct turn {
    struct fixture *f;
    bool cancel;              /* give the request up in the turn */
    ssize_t in_turn;          /* bytes the upstream had in the turn */
    struct upstream_req *req; /* the request sent in the turn */
};

static void
on_turn(evutil_socket_t fd, short what, void *arg)
{
    struct turn *t = arg;
    char buf[16];

    (void)fd;
    (void)what;
    t->req = send_get(t->f);
    cr_assert_not_null(t->req);
    t->in_turn = waiting(t->f->peer, buf, sizeof(buf));
    if (t->cancel) {
        upstream_cancel(t->req);
    }
}

static void
run_turn(struct turn *t)
{
    struct event *ev = event_new(t->f->base, -1, 0, on_turn, t);

    event_active(ev, EV_TIMEOUT, 1);
    event_base_loop(t->f->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    event_free(ev);
}

Test(upstream, a_head_sent_in_a_turn_is_written_when_the_turn_ends)
{
    struct fixture f;
    struct turn t = {.f = &f};

    setup(&f);
    run_turn(&t);
    cr_assert_not_null(t.req);
    cr_assert_eq(t.in_turn, -1, "the head was written inside the turn");
    cr_assert(upstream_reused(t.req), "the pooled connection went unused");
    answer(f.peer);
    loop_until_ended(&f, 2);
    cr_assert_eq(f.done, 2);
    teardown(&f);
}

Test(upstream, a_request_given_up_in_its_turn_never_reaches_the_upstream)
{
    struct fixture f;
    struct turn t = {.f = &f, .cancel = true};
    struct upstream_req *next;
    char buf[64];

    setup(&f);
    run_turn(&t);
    /* Nothing reached the upstream, and the connection stayed open. */
    event_base_loop(f.base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    cr_assert_eq(waiting(f.peer, buf, sizeof(buf)), -1,
                 "the upstream got a request its client had given up, or "
                 "the connection was closed");
    cr_assert_eq(f.done + f.errors, 1, "a callback ran after the cancel");
    /* The same connection carries the next request. */
    next = send_get(&f);
    cr_assert_not_null(next);
    cr_assert(upstream_reused(next), "the connection was not pooled again");
    /* Sent outside a turn: written when the loop runs next. */
    event_base_loop(f.base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    answer(f.peer);
    loop_until_ended(&f, 2);
    cr_assert_eq(f.done, 2);
    teardown(&f);
}
