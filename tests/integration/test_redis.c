/*
 * The Redis client (src/limit/redis.c) against a real redis-server: each test
 * starts its own Redis on a free port, drives the client from an event
 * loop of its own until a condition holds or a deadline passes, frees the
 * client and stops Redis with SIGTERM, which must exit 0. The scripts are
 * tiny ones of the test's own, so that only the client is under test.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "config.h"
#include "harness.h"
#include "redis.h"
#include "scripts.h"

#include <hiredis/hiredis.h>

/*
 * Time bounds. An answer "at once" comes well before any connect timeout
 * (1 s; the status tells DOWN from a command timeout) yet leaves room for
 * a test process that the machine, or AddressSanitizer, holds back for a
 * while; SLACK_MS is what a timeout may be overrun by on such a run.
 */
#define AT_ONCE_MS 100
#define SLACK_MS 100

#define SCRIPT(name, src, batch)                                               \
    {                                                                          \
        name, src, sizeof(src) - 1, batch                                      \
    }

/*
 * A script that takes batches as lua/README.md ("Batches") has them:
 * each call answers {#KEYS, ARGV[1], calls in its batch} (1 alone; in a
 * batch, the three joined by ':'), or the error "boom" when ARGV[1] is
 * "fail". In a batch, a call whose ARGV[1] is "junk" is answered
 * "1:2x:3", which the client must refuse.
 */
#define ECHO_BATCH_SRC                                                         \
    "local function one(k, a, n)\n"                                            \
    "  if a[1] == 'fail' then return redis.error_reply('boom') end\n"          \
    "  return {#k, tonumber(a[1]) or 0, n}\n"                                  \
    "end\n"                                                                    \
    "if ARGV[1] ~= 'batch' then return one(KEYS, ARGV, 1) end\n"               \
    "local n, out, k, at = tonumber(ARGV[2]), {}, 1, 3\n"                      \
    "for i = 1, n do\n"                                                        \
    "  local nk, na = tonumber(ARGV[at]), tonumber(ARGV[at + 1])\n"            \
    "  local r = one({unpack(KEYS, k, k + nk - 1)},\n"                         \
    "                {unpack(ARGV, at + 2, at + 1 + na)}, n)\n"                \
    "  if r.err then out[i] = r else out[i] = table.concat(r, ':') end\n"      \
    "  if ARGV[at + 2] == 'junk' then out[i] = '1:2x:3' end\n"                 \
    "  k, at = k + nk, at + 2 + na\n"                                          \
    "end\n"                                                                    \
    "return out\n"

/* INCR of each call's key, alone or in a batch (answers "<count>"). */
#define INCR_BATCH_SRC                                                         \
    "local function one(k) return {redis.call('INCR', k[1])} end\n"            \
    "if ARGV[1] ~= 'batch' then return one(KEYS) end\n"                        \
    "local n, out, k, at = tonumber(ARGV[2]), {}, 1, 3\n"                      \
    "for i = 1, n do\n"                                                        \
    "  local nk, na = tonumber(ARGV[at]), tonumber(ARGV[at + 1])\n"            \
    "  out[i] = table.concat(one({unpack(KEYS, k, k + nk - 1)}), ':')\n"       \
    "  k, at = k + nk, at + 2 + na\n"                                          \
    "end\n"                                                                    \
    "return out\n"

static const struct lua_script test_scripts[] = {
    SCRIPT("echo_keys", "return {#KEYS, tonumber(ARGV[1])}", false),
    SCRIPT("incr_key", "return {redis.call('INCR', KEYS[1])}", false),
    SCRIPT("fails", "return redis.error_reply('boom')", false),
    SCRIPT("string", "return 'hello'", false),
    SCRIPT("echo_batch", ECHO_BATCH_SRC, true),
    SCRIPT("incr_batch", INCR_BATCH_SRC, true),
};

#define ECHO_KEYS (&test_scripts[0])
#define INCR_KEY (&test_scripts[1])
#define FAILS (&test_scripts[2])
#define STRING (&test_scripts[3])
#define ECHO_BATCH (&test_scripts[4])
#define INCR_BATCH (&test_scripts[5])

struct fx {
    struct proc redis;       /* the server; pid 0 once stopped */
    uint16_t port;           /* where it listens */
    struct event_base *base; /* the client's loop */
    struct event *tick;      /* keeps each loop turn short */
    struct redis_client *c;  /* under test */
    struct redis_conf conf;  /* strings borrowed from literals */
    size_t max_in_flight;    /* for fx_client() */
};

/* What one call was answered. */
struct answer {
    int count;                      /* callbacks run: must end as 1 */
    enum redis_status status;       /* of the last one */
    long long ints[REDIS_MAX_INTS]; /* copied out */
    size_t nints;                   /* of ints */
    char error[128];                /* copied out, or "" */
    int64_t sent_ms;                /* harness_now_ms() at the call */
    int64_t at_ms;                  /* harness_now_ms() at the answer */
};

static void
on_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
}

static void
fx_init(struct fx *f)
{
    struct timeval tv = {0, 5000};

    memset(f, 0, sizeof(*f));
    /* hiredis writes with write(2); the gateway ignores SIGPIPE too. */
    signal(SIGPIPE, SIG_IGN);
    {
        /* Timed as the gateway's workers are: libevent's default clock is
         * CLOCK_MONOTONIC_COARSE, one kernel tick (4 ms) of resolution,
         * and a 100 ms timeout was seen to fire after 94 ms. */
        struct event_config *ec = event_config_new();

        event_config_set_flag(ec, EVENT_BASE_FLAG_PRECISE_TIMER);
        f->base = event_base_new_with_config(ec);
        event_config_free(ec);
    }
    f->tick = event_new(f->base, -1, EV_PERSIST, on_tick, NULL);
    event_add(f->tick, &tv);
    f->conf.enabled = true;
    f->conf.host = "127.0.0.1";
    f->conf.timeout_ms = 200;
    f->max_in_flight = 1024;
}

static void
fx_start_redis(struct fx *f)
{
    redis_start(&f->redis, &f->port);
    f->conf.port = f->port;
}

static void
fx_client(struct fx *f)
{
    f->c = redis_client_new(f->base, &f->conf, test_scripts,
                            sizeof(test_scripts) / sizeof(test_scripts[0]),
                            f->max_in_flight);
}

/* Frees the client and the loop; stops Redis, which must exit 0. */
static void
fx_fini(struct fx *f)
{
    int st = 0;

    redis_client_free(f->c);
    event_free(f->tick);
    event_base_free(f->base);
    if (f->redis.pid != 0) {
        st = proc_stop(&f->redis, SIGTERM, 5000);
    }
    cr_assert_eq(st, 0, "redis-server exited with %d", st);
}

/* Runs the loop until 'cond(arg)' holds; false if 'timeout_ms' passes. */
static bool
run_until(struct fx *f, bool (*cond)(void *), void *arg, int timeout_ms)
{
    int64_t deadline = harness_now_ms() + timeout_ms;

    while (!cond(arg)) {
        if (harness_now_ms() >= deadline) {
            return false;
        }
        event_base_loop(f->base, EVLOOP_ONCE);
    }
    return true;
}

static bool
is_ready(void *arg)
{
    return redis_client_ready(arg);
}

static bool
is_answered(void *arg)
{
    return ((struct answer *)arg)->count > 0;
}

static bool
is_past(void *arg)
{
    return harness_now_ms() >= *(int64_t *)arg;
}

/* Runs the loop for 'ms' whatever happens. */
static void
run_for(struct fx *f, int ms)
{
    int64_t until = harness_now_ms() + ms;

    run_until(f, is_past, &until, ms + 1000);
}

struct answers {
    struct answer *v; /* borrowed */
    size_t n;         /* of v */
};

static bool
all_answered(void *arg)
{
    struct answers *a = arg;

    for (size_t i = 0; i < a->n; i++) {
        if (a->v[i].count == 0) {
            return false;
        }
    }
    return true;
}

static void
on_answer(enum redis_status status, const long long *ints, size_t nints,
          const char *error, void *arg)
{
    struct answer *a = arg;

    a->count++;
    a->status = status;
    a->nints = nints;
    if (nints > 0) {
        memcpy(a->ints, ints, nints * sizeof(ints[0]));
    }
    snprintf(a->error, sizeof(a->error), "%s", error != NULL ? error : "");
    a->at_ms = harness_now_ms();
}

static struct redis_call *
eval(struct fx *f, const struct lua_script *s, const char *key, const char *arg,
     struct answer *a)
{
    const char *keys[] = {key};
    const char *args[] = {arg};

    memset(a, 0, sizeof(*a));
    a->sent_ms = harness_now_ms();
    return redis_client_eval(f->c, s, keys, key != NULL ? 1 : 0, args,
                             arg != NULL ? 1 : 0, on_answer, a);
}

static void
wait_ready(struct fx *f)
{
    cr_assert(run_until(f, is_ready, f->c, 5000),
              "the client did not become ready");
}

static void
wait_answered(struct fx *f, struct answer *a)
{
    cr_assert(run_until(f, is_answered, a, 5000), "a call was never answered");
}

static const char *
status_name(enum redis_status s)
{
    static const char *const names[] = {"OK", "TIMEOUT", "DOWN", "ERROR",
                                        "OVERLOADED"};

    return (unsigned)s < 5 ? names[s] : "?";
}

/* A synchronous connection for setting the scene; fails the test. */
static redisContext *
sync_connect(uint16_t port)
{
    redisContext *rc = redisConnect("127.0.0.1", port);

    cr_assert(rc != NULL && rc->err == 0, "cannot connect to the test Redis");
    return rc;
}

/* Runs one command on a new connection (after AUTH 'password' if not
 * NULL); returns the reply's string or integer as text (the caller frees
 * it). Fails the test on an error reply. */
static char *
sync_cmd(uint16_t port, const char *password, const char *const *argv, int argc)
{
    redisContext *rc = sync_connect(port);
    redisReply *rep;
    char *out;

    if (password != NULL) {
        rep = redisCommand(rc, "AUTH %s", password);
        freeReplyObject(rep);
    }
    rep = redisCommandArgv(rc, argc, (const char **)argv, NULL);
    cr_assert(rep != NULL, "no reply to %s", argv[0]);
    cr_assert(rep->type != REDIS_REPLY_ERROR, "%s: %s", argv[0], rep->str);
    if (rep->type == REDIS_REPLY_INTEGER) {
        out = harness_strf("%lld", rep->integer);
    } else if (rep->type == REDIS_REPLY_NIL) {
        out = harness_strf("(nil)");
    } else {
        out = harness_strf("%s", rep->str != NULL ? rep->str : "");
    }
    freeReplyObject(rep);
    redisFree(rc);
    return out;
}

#define SYNC(f, ...)                                                           \
    do {                                                                       \
        const char *argv_[] = {__VA_ARGS__};                                   \
        free(sync_cmd((f)->port, NULL, argv_,                                  \
                      (int)(sizeof(argv_) / sizeof(argv_[0]))));               \
    } while (0)

/*
 * A relay on the client's loop between the client and the test's Redis,
 * one connection at a time, through which a test makes the server
 * misbehave: bytes no command asked for, replies swallowed, connections
 * cut. The client is pointed at 'port'.
 */
struct relay {
    struct evconnlistener *lis; /* owned */
    uint16_t port;              /* where the client connects */
    uint16_t to;                /* the real server */
    struct bufferevent *down;   /* to the client; owned, or NULL */
    struct bufferevent *up;     /* to the server; owned, or NULL */
    bool swallow;               /* drop what the server sends */
    int accepted;               /* connections so far */
};

static void
relay_cut(struct relay *r)
{
    if (r->down != NULL) {
        bufferevent_free(r->down);
        bufferevent_free(r->up);
        r->down = r->up = NULL;
    }
}

static void
on_relay_read(struct bufferevent *bev, void *arg)
{
    struct relay *r = arg;
    struct evbuffer *in = bufferevent_get_input(bev);

    if (bev == r->up && r->swallow) {
        evbuffer_drain(in, evbuffer_get_length(in));
        return;
    }
    bufferevent_write_buffer(bev == r->up ? r->down : r->up, in);
}

static void
on_relay_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
        relay_cut(arg);
    }
}

static void
on_relay_accept(struct evconnlistener *lis, evutil_socket_t fd,
                struct sockaddr *sa, int salen, void *arg)
{
    struct relay *r = arg;
    struct event_base *base = evconnlistener_get_base(lis);
    struct sockaddr_in to = {.sin_family = AF_INET};

    (void)sa;
    (void)salen;
    relay_cut(r);
    r->accepted++;
    to.sin_port = htons(r->to);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    r->down = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
    r->up = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    cr_assert(r->down != NULL && r->up != NULL);
    cr_assert_eq(
        bufferevent_socket_connect(r->up, (struct sockaddr *)&to, sizeof(to)),
        0);
    bufferevent_setcb(r->down, on_relay_read, NULL, on_relay_event, r);
    bufferevent_setcb(r->up, on_relay_read, NULL, on_relay_event, r);
    bufferevent_enable(r->down, EV_READ);
    bufferevent_enable(r->up, EV_READ);
}

static bool
relay_accepted_twice(void *arg)
{
    return ((struct relay *)arg)->accepted >= 2;
}

/* Puts a relay in front of the fixture's Redis: start it before
 * fx_client(). */
static void
relay_start(struct relay *r, struct fx *f)
{
    struct sockaddr_in sin = {.sin_family = AF_INET};

    memset(r, 0, sizeof(*r));
    r->to = f->port;
    r->port = harness_free_port();
    sin.sin_port = htons(r->port);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    r->lis = evconnlistener_new_bind(f->base, on_relay_accept, r,
                                     LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE,
                                     16, (struct sockaddr *)&sin, sizeof(sin));
    cr_assert(r->lis != NULL, "relay: cannot listen on %u", (unsigned)r->port);
    f->conf.port = r->port;
}

/* Sends 's' to the client as if the server had. */
static void
relay_inject(struct relay *r, const char *s)
{
    cr_assert(r->down != NULL, "relay: no client connected");
    bufferevent_write(r->down, s, strlen(s));
}

/* Sends 's' to the server as if the client had. */
static void
relay_inject_up(struct relay *r, const char *s)
{
    cr_assert(r->up != NULL, "relay: no client connected");
    bufferevent_write(r->up, s, strlen(s));
}

static void
relay_stop(struct relay *r)
{
    relay_cut(r);
    evconnlistener_free(r->lis);
}

TestSuite(redis, .timeout = 30);

Test(redis, runs_a_script_and_returns_its_integers)
{
    struct fx f;
    struct answer a, err, shape;
    const char *keys[] = {"{t}a", "{t}b", "{t}c"};
    const char *args[] = {"42"};

    fx_init(&f);
    fx_start_redis(&f);
    fx_client(&f);
    cr_assert_not(redis_client_ready(f.c), "ready before the loop ran");
    wait_ready(&f);

    memset(&a, 0, sizeof(a));
    redis_client_eval(f.c, ECHO_KEYS, keys, 3, args, 1, on_answer, &a);
    cr_assert_eq(a.count, 0, "the callback ran inside redis_client_eval");
    wait_answered(&f, &a);
    cr_assert_eq(a.status, REDIS_CALL_OK, "status %s: %s",
                 status_name(a.status), a.error);
    cr_assert_eq(a.nints, 2);
    cr_assert_eq(a.ints[0], 3);
    cr_assert_eq(a.ints[1], 42);

    eval(&f, FAILS, NULL, NULL, &err);
    eval(&f, STRING, NULL, NULL, &shape);
    wait_answered(&f, &err);
    wait_answered(&f, &shape);
    cr_assert_eq(err.status, REDIS_CALL_ERROR);
    cr_assert(strstr(err.error, "boom") != NULL, "error text: %s", err.error);
    cr_assert_eq(shape.status, REDIS_CALL_ERROR);
    cr_assert_str_eq(shape.error, "unexpected reply");

    run_for(&f, 20);
    cr_assert_eq(a.count, 1);
    cr_assert_eq(err.count, 1);
    cr_assert_eq(shape.count, 1);
    cr_assert_eq(redis_client_stats(f.c)->calls, 3);
    cr_assert_eq(redis_client_stats(f.c)->errors, 2);
    cr_assert_eq(redis_client_stats(f.c)->noscript, 0,
                 "the scripts were loaded at connect: no NOSCRIPT");
    fx_fini(&f);
}

Test(redis, answers_every_call_of_a_pipeline)
{
    enum { N = 300 };
    struct fx f;
    struct answer a[N];
    struct answers all = {a, N};
    char arg[N][16];

    fx_init(&f);
    fx_start_redis(&f);
    fx_client(&f);
    wait_ready(&f);
    for (size_t i = 0; i < N; i++) {
        snprintf(arg[i], sizeof(arg[i]), "%zu", i * 7);
        eval(&f, ECHO_KEYS, "{t}k", arg[i], &a[i]);
    }
    cr_assert(run_until(&f, all_answered, &all, 5000));
    for (size_t i = 0; i < N; i++) {
        cr_assert_eq(a[i].count, 1);
        cr_assert_eq(a[i].status, REDIS_CALL_OK, "call %zu: %s %s", i,
                     status_name(a[i].status), a[i].error);
        cr_assert_eq(a[i].ints[0], 1);
        cr_assert_eq(a[i].ints[1], (long long)i * 7);
    }
    fx_fini(&f);
}

/*
 * Ended call records are kept for the next calls, those with short words
 * only: over rounds of more calls than are kept, with keys short and
 * long (past what a kept record holds), alone and in batches, every call
 * still increments its own key, and only it.
 */
Test(redis, calls_on_kept_records_send_their_own_words)
{
#define REUSE_N 80
    struct fx f;
    struct answer a[REUSE_N];
    struct answers all = {a, REUSE_N};
    static char key[REUSE_N][800];

    fx_init(&f);
    fx_start_redis(&f);
    fx_client(&f);
    wait_ready(&f);
    for (size_t i = 0; i < REUSE_N; i++) {
        size_t len = i % 3 == 0 ? 700 : 4 + i % 5;

        snprintf(key[i], sizeof(key[i]), "{t}%zu:", i);
        for (size_t j = strlen(key[i]); j < len; j++) {
            key[i][j] = (char)('a' + (i + j) % 26);
        }
    }
    for (long long round = 1; round <= 4; round++) {
        for (size_t i = 0; i < REUSE_N; i++) {
            eval(&f, (i + (size_t)round) % 2 ? INCR_BATCH : INCR_KEY, key[i],
                 NULL, &a[i]);
        }
        cr_assert(run_until(&f, all_answered, &all, 5000));
        for (size_t i = 0; i < REUSE_N; i++) {
            cr_assert_eq(a[i].status, REDIS_CALL_OK, "call %zu: %s %s", i,
                         status_name(a[i].status), a[i].error);
            cr_assert_eq(a[i].nints, 1);
            cr_assert_eq(a[i].ints[0], round, "call %zu counted %lld", i,
                         a[i].ints[0]);
        }
    }
    fx_fini(&f);
#undef REUSE_N
}

Test(redis, authenticates_with_a_password)
{
    struct fx f;
    struct answer a;

    fx_init(&f);
    fx_start_redis(&f);
    SYNC(&f, "CONFIG", "SET", "requirepass", "s3cret");
    f.conf.password = "s3cret";
    fx_client(&f);
    wait_ready(&f);
    eval(&f, INCR_KEY, "{t}n", NULL, &a);
    wait_answered(&f, &a);
    cr_assert_eq(a.status, REDIS_CALL_OK, "%s %s", status_name(a.status),
                 a.error);
    cr_assert_eq(a.ints[0], 1);
    fx_fini(&f);
}

Test(redis, authenticates_as_an_acl_user)
{
    struct fx f;
    struct answer a;
    const char *get[] = {"GET", "{t}n"};
    char *v;

    fx_init(&f);
    fx_start_redis(&f);
    SYNC(&f, "ACL", "SETUSER", "alice", "on", ">wonderland", "~*", "+@all");
    /* The default user gets another password: only "AUTH alice ..." can
     * get in with alice's. */
    SYNC(&f, "CONFIG", "SET", "requirepass", "default-pw");
    f.conf.user = "alice";
    f.conf.password = "wonderland";
    fx_client(&f);
    wait_ready(&f);
    eval(&f, INCR_KEY, "{t}n", NULL, &a);
    wait_answered(&f, &a);
    cr_assert_eq(a.status, REDIS_CALL_OK, "%s %s", status_name(a.status),
                 a.error);
    v = sync_cmd(f.port, "default-pw", get, 2);
    cr_assert_str_eq(v, "1");
    free(v);
    fx_fini(&f);
}

Test(redis, a_wrong_password_never_gets_ready_and_calls_are_down)
{
    struct fx f;
    struct answer a;

    fx_init(&f);
    fx_start_redis(&f);
    SYNC(&f, "CONFIG", "SET", "requirepass", "right");
    f.conf.password = "wrong";
    fx_client(&f);
    cr_assert_not(run_until(&f, is_ready, f.c, 500),
                  "ready with a wrong password");
    eval(&f, ECHO_KEYS, "{t}k", "1", &a);
    cr_assert_eq(a.count, 0, "the callback ran inside redis_client_eval");
    wait_answered(&f, &a);
    cr_assert_eq(a.status, REDIS_CALL_DOWN);
    cr_assert_lt(a.at_ms - a.sent_ms, AT_ONCE_MS, "DOWN took %lld ms",
                 (long long)(a.at_ms - a.sent_ms));
    cr_assert_eq(redis_client_stats(f.c)->down, 1);
    fx_fini(&f);
}

Test(redis, selects_the_database_of_the_url)
{
    struct fx f;
    struct answer a;
    const char *get[] = {"GET", "{t}n"};
    redisContext *rc;
    redisReply *rep;

    fx_init(&f);
    fx_start_redis(&f);
    f.conf.db = 5;
    fx_client(&f);
    wait_ready(&f);
    eval(&f, INCR_KEY, "{t}n", NULL, &a);
    wait_answered(&f, &a);
    cr_assert_eq(a.status, REDIS_CALL_OK, "%s %s", status_name(a.status),
                 a.error);

    rc = sync_connect(f.port);
    rep = redisCommandArgv(rc, 2, get, NULL);
    cr_assert_eq(rep->type, REDIS_REPLY_NIL, "the write landed in db 0");
    freeReplyObject(rep);
    freeReplyObject(redisCommand(rc, "SELECT 5"));
    rep = redisCommandArgv(rc, 2, get, NULL);
    cr_assert_eq(rep->type, REDIS_REPLY_STRING);
    cr_assert_str_eq(rep->str, "1");
    freeReplyObject(rep);
    redisFree(rc);
    fx_fini(&f);
}

Test(redis, a_slow_reply_is_a_timeout_and_the_late_reply_is_swallowed)
{
    struct fx f;
    struct answer a, b;
    int64_t paused_at;

    fx_init(&f);
    fx_start_redis(&f);
    f.conf.timeout_ms = 100;
    fx_client(&f);
    wait_ready(&f);
    SYNC(&f, "CLIENT", "PAUSE", "500");
    paused_at = harness_now_ms();
    eval(&f, INCR_KEY, "{t}n", NULL, &a);
    wait_answered(&f, &a);
    cr_assert_eq(a.status, REDIS_CALL_TIMEOUT, "%s", status_name(a.status));
    cr_assert_geq(a.at_ms - a.sent_ms, 95, "timed out after %lld ms",
                  (long long)(a.at_ms - a.sent_ms));
    cr_assert_lt(a.at_ms - paused_at, 450,
                 "answered at %lld ms, after the pause ended",
                 (long long)(a.at_ms - paused_at));

    /* After the pause (the PING returns when it ends), the first INCR
     * runs late; a second call queued behind it proves that its reply has
     * come and gone. */
    SYNC(&f, "PING");
    eval(&f, INCR_KEY, "{t}n", NULL, &b);
    wait_answered(&f, &b);
    cr_assert_eq(b.status, REDIS_CALL_OK, "%s %s", status_name(b.status),
                 b.error);
    cr_assert_eq(b.ints[0], 2, "the timed-out INCR still ran on the server");
    cr_assert_eq(a.count, 1, "the late reply reached the caller");
    cr_assert_eq(redis_client_stats(f.c)->timeouts, 1);
    fx_fini(&f);
}

Test(redis, survives_redis_being_killed_and_reconnects_when_it_is_back)
{
    struct fx f;
    struct answer a;
    int st;

    fx_init(&f);
    fx_start_redis(&f);
    f.conf.timeout_ms = 100;
    fx_client(&f);
    wait_ready(&f);
    eval(&f, INCR_KEY, "{t}n", NULL, &a);
    wait_answered(&f, &a);
    cr_assert_eq(a.status, REDIS_CALL_OK);

    st = proc_stop(&f.redis, SIGKILL, 5000);
    cr_assert_eq(st, 128 + SIGKILL);
    /* Calls while Redis is gone: answered, and never later than the
     * timeout. */
    for (int i = 0; i < 10; i++) {
        eval(&f, INCR_KEY, "{t}n", NULL, &a);
        wait_answered(&f, &a);
        cr_assert(a.status == REDIS_CALL_DOWN || a.status == REDIS_CALL_TIMEOUT,
                  "status %s", status_name(a.status));
        cr_assert_leq(a.at_ms - a.sent_ms, 100 + SLACK_MS,
                      "answered after %lld ms",
                      (long long)(a.at_ms - a.sent_ms));
        run_for(&f, 20);
    }
    cr_assert_not(redis_client_ready(f.c));

    redis_start_on(&f.redis, f.port);
    wait_ready(&f);
    eval(&f, INCR_KEY, "{t}n", NULL, &a);
    wait_answered(&f, &a);
    cr_assert_eq(a.status, REDIS_CALL_OK, "%s %s", status_name(a.status),
                 a.error);
    cr_assert_eq(a.ints[0], 1, "a new, empty Redis");
    cr_assert_eq(redis_client_stats(f.c)->reconnects, 1);
    fx_fini(&f);
}

Test(redis, script_flush_costs_no_call)
{
    enum { ROUNDS = 60, BATCH = 8 };
    struct fx f;
    struct answer a[BATCH];
    struct answers all = {a, BATCH};

    fx_init(&f);
    fx_start_redis(&f);
    fx_client(&f);
    wait_ready(&f);
    for (int r = 0; r < ROUNDS; r++) {
        if (r % 10 == 5) {
            SYNC(&f, "SCRIPT", "FLUSH");
        }
        for (int i = 0; i < BATCH; i++) {
            eval(&f, r % 2 ? ECHO_KEYS : INCR_KEY, "{t}n", "5", &a[i]);
        }
        cr_assert(run_until(&f, all_answered, &all, 5000));
        for (int i = 0; i < BATCH; i++) {
            cr_assert_eq(a[i].status, REDIS_CALL_OK, "round %d: %s %s", r,
                         status_name(a[i].status), a[i].error);
        }
    }
    cr_assert_gt(redis_client_stats(f.c)->noscript, 0);
    cr_assert_eq(redis_client_stats(f.c)->errors, 0);
    fx_fini(&f);
}

/*
 * A listener whose accept queue is full: with a backlog of 0 Linux queues
 * one connection, and drops the SYNs of later ones, so their connect()
 * hangs.
 */
static int
full_listener(uint16_t *port, int *filler)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert(fd >= 0);
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    cr_assert_eq(listen(fd, 0), 0);
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    *port = ntohs(sa.sin_port);
    *filler = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_eq(connect(*filler, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

/* The client's log, which goes to stderr, captured in a file. */
struct capture {
    int saved;  /* the real stderr */
    char *path; /* owned */
};

static void
capture_start(struct capture *cap)
{
    int fd;

    cap->path = harness_write_temp("");
    fd = open(cap->path, O_WRONLY | O_APPEND);
    cr_assert(fd >= 0);
    cap->saved = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    close(fd);
}

static bool
capture_has(void *arg)
{
    const char **needle = arg;
    FILE *fp = fopen(needle[0], "r");
    char buf[8192];
    size_t n;

    if (fp == NULL) {
        return false;
    }
    n = fread(buf, 1, sizeof(buf) - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    return strstr(buf, needle[1]) != NULL;
}

static void
capture_stop(struct capture *cap)
{
    dup2(cap->saved, STDERR_FILENO);
    close(cap->saved);
    unlink(cap->path);
    free(cap->path);
}

Test(redis, a_connect_that_hangs_times_out_and_calls_are_down_at_once)
{
    struct fx f;
    struct answer a;
    struct capture cap;
    int filler, lfd;
    char *needle;
    const char *has[2];
    bool logged;
    int64_t t0;

    fx_init(&f);
    lfd = full_listener(&f.conf.port, &filler);
    f.conf.timeout_ms = 50;
    capture_start(&cap);
    t0 = harness_now_ms();
    fx_client(&f);
    needle = harness_strf("redis: connect 127.0.0.1:%u: timed out",
                          (unsigned)f.conf.port);
    has[0] = cap.path;
    has[1] = needle;
    logged = run_until(&f, capture_has, has, 3000);
    capture_stop(&cap);
    cr_assert(logged, "no connect timeout was logged");
    cr_assert_geq(harness_now_ms() - t0, 950, "the connect timeout is 1 s");
    cr_assert_not(redis_client_ready(f.c));

    eval(&f, ECHO_KEYS, "{t}k", "1", &a);
    wait_answered(&f, &a);
    cr_assert_eq(a.status, REDIS_CALL_DOWN);
    cr_assert_lt(a.at_ms - a.sent_ms, AT_ONCE_MS);
    t0 = harness_now_ms();
    redis_client_free(f.c);
    f.c = NULL;
    cr_assert_lt(harness_now_ms() - t0, AT_ONCE_MS, "freeing waited");
    close(filler);
    close(lfd);
    free(needle);
    fx_fini(&f);
}

/*
 * With 4 calls of 's' (argument 'arg') in flight and Redis paused, 6 more
 * are refused at once and the 4 time out; once the late replies are in,
 * calls go out again, and only the 4 reached Redis.
 */
static void
check_in_flight_cap(const struct lua_script *s, const char *arg)
{
    enum { N = 10 };
    struct fx f;
    struct answer a[N], late;
    struct answers all = {a, N};
    int overloaded = 0, timeouts = 0;
    int64_t late_deadline;

    fx_init(&f);
    fx_start_redis(&f);
    f.max_in_flight = 4;
    f.conf.timeout_ms = 100;
    fx_client(&f);
    wait_ready(&f);
    SYNC(&f, "CLIENT", "PAUSE", "400");
    late_deadline = harness_now_ms() + 3000;
    for (int i = 0; i < N; i++) {
        eval(&f, s, "{t}n", arg, &a[i]);
    }
    cr_assert(run_until(&f, all_answered, &all, 2000));
    for (int i = 0; i < N; i++) {
        overloaded += a[i].status == REDIS_CALL_OVERLOADED;
        timeouts += a[i].status == REDIS_CALL_TIMEOUT;
        cr_assert_eq(a[i].count, 1);
    }
    cr_assert_eq(overloaded, 6);
    cr_assert_eq(timeouts, 4);
    cr_assert_eq(redis_client_stats(f.c)->down, 6);

    /* Once the late replies are in, calls go out again. The PING returns
     * when the pause ends (Redis ends it on its next cron tick). */
    SYNC(&f, "PING");
    do {
        run_for(&f, 10);
        eval(&f, s, "{t}n", arg, &late);
        wait_answered(&f, &late);
    } while (late.status == REDIS_CALL_OVERLOADED &&
             harness_now_ms() < late_deadline);
    cr_assert_eq(late.status, REDIS_CALL_OK, "%s", status_name(late.status));
    cr_assert_eq(late.ints[0], 5, "only 4 of 10 INCRs reached Redis");
    fx_fini(&f);
}

Test(redis, caps_the_calls_in_flight)
{
    check_in_flight_cap(INCR_KEY, NULL);
}

Test(redis, a_cancelled_call_is_never_answered)
{
    struct fx f;
    struct answer a, b, d;

    fx_init(&f);
    fx_start_redis(&f);
    fx_client(&f);
    /* Not ready yet: its REDIS_CALL_DOWN was due from the loop. */
    redis_call_cancel(eval(&f, ECHO_KEYS, "{t}k", "1", &d));
    wait_ready(&f);
    redis_call_cancel(eval(&f, INCR_KEY, "{t}n", NULL, &a));
    eval(&f, INCR_KEY, "{t}n", NULL, &b);
    wait_answered(&f, &b);
    cr_assert_eq(b.status, REDIS_CALL_OK);
    cr_assert_eq(b.ints[0], 2, "the cancelled INCR was still sent");

    run_for(&f, 20);
    cr_assert_eq(a.count, 0);
    cr_assert_eq(d.count, 0);
    fx_fini(&f);
}

Test(redis, freeing_answers_pending_calls_once_with_down)
{
    enum { N = 6 };
    struct fx f;
    struct answer a[N];

    fx_init(&f);
    fx_start_redis(&f);
    f.conf.timeout_ms = 1000;
    fx_client(&f);
    wait_ready(&f);
    SYNC(&f, "CLIENT", "PAUSE", "300");
    for (int i = 0; i < N - 1; i++) {
        eval(&f, INCR_KEY, "{t}n", NULL, &a[i]);
    }
    run_for(&f, 30);                             /* sent, not answered */
    eval(&f, INCR_KEY, "{t}n", NULL, &a[N - 1]); /* not even sent */
    for (int i = 0; i < N; i++) {
        cr_assert_eq(a[i].count, 0);
    }
    redis_client_free(f.c);
    f.c = NULL;
    for (int i = 0; i < N; i++) {
        cr_assert_eq(a[i].count, 1, "call %d answered %d times", i, a[i].count);
        cr_assert_eq(a[i].status, REDIS_CALL_DOWN);
    }
    run_for(&f, 20);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(a[i].count, 1);
    }
    fx_fini(&f);
}

/* Queues 'n' calls of ECHO_BATCH in one loop turn, call i with key
 * "{t}<i>" and argument arg[i] (written here: i * 3, or "fail"). */
static void
eval_batch(struct fx *f, struct answer *a, char (*arg)[24], size_t n,
           struct redis_call **calls)
{
    for (size_t i = 0; i < n; i++) {
        char key[32];

        snprintf(key, sizeof(key), "{t}%zu", i);
        if (arg[i][0] == '\0') {
            snprintf(arg[i], sizeof(arg[i]), "%zu", i * 3);
        }
        calls[i] = eval(f, ECHO_BATCH, key, arg[i], &a[i]);
    }
}

Test(redis, calls_of_one_turn_go_as_batches_and_each_gets_its_own_answer)
{
    enum { N = 40, CANCELLED = 35, FAILING = 22, JUNK = 30 };
    struct fx f;
    struct answer a[N];
    struct answers all = {a, N};
    struct redis_call *calls[N];
    char arg[N][24];
    size_t batched = 0;

    fx_init(&f);
    fx_start_redis(&f);
    fx_client(&f);
    wait_ready(&f);
    memset(arg, 0, sizeof(arg));
    snprintf(arg[FAILING], sizeof(arg[FAILING]), "fail");
    snprintf(arg[JUNK], sizeof(arg[JUNK]), "junk");
    eval_batch(&f, a, arg, N, calls);
    redis_call_cancel(calls[CANCELLED]);
    a[CANCELLED].count = -1; /* all_answered() passes it; must stay -1 */
    cr_assert(run_until(&f, all_answered, &all, 5000));
    run_for(&f, 20);
    for (size_t i = 0; i < N; i++) {
        if (i == CANCELLED) {
            cr_assert_eq(a[i].count, -1, "a cancelled call was answered");
            continue;
        }
        cr_assert_eq(a[i].count, 1);
        if (i == FAILING) {
            cr_assert_eq(a[i].status, REDIS_CALL_ERROR);
            cr_assert(strstr(a[i].error, "boom") != NULL, "%s", a[i].error);
            continue;
        }
        if (i == JUNK) {
            cr_assert_eq(a[i].status, REDIS_CALL_ERROR);
            cr_assert_str_eq(a[i].error, "unexpected reply");
            continue;
        }
        cr_assert_eq(a[i].status, REDIS_CALL_OK, "call %zu: %s %s", i,
                     status_name(a[i].status), a[i].error);
        cr_assert_eq(a[i].nints, 3);
        cr_assert_eq(a[i].ints[0], 1);
        cr_assert_eq(a[i].ints[1], (long long)i * 3, "call %zu got another's",
                     i);
        batched += a[i].ints[2] > 1;
    }
    /* 39 live calls in one turn: batches of 16, 16 and 7 (the cancelled
     * one dropped from the last); all but the two failing ones counted. */
    cr_assert_eq(batched, N - 3, "only %zu calls went in a batch", batched);
    cr_assert_eq(redis_client_stats(f.c)->batches, 3);
    cr_assert_eq(redis_client_stats(f.c)->calls, N);
    cr_assert_eq(redis_client_stats(f.c)->errors, 2);
    fx_fini(&f);
}

Test(redis, a_batch_the_server_forgot_is_sent_again_whole)
{
    enum { N = 5 };
    struct fx f;
    struct answer a[N];
    struct answers all = {a, N};
    struct redis_call *calls[N];
    char arg[N][24];

    fx_init(&f);
    fx_start_redis(&f);
    fx_client(&f);
    wait_ready(&f);
    SYNC(&f, "SCRIPT", "FLUSH");
    memset(arg, 0, sizeof(arg));
    eval_batch(&f, a, arg, N, calls);
    cr_assert(run_until(&f, all_answered, &all, 5000));
    for (size_t i = 0; i < N; i++) {
        cr_assert_eq(a[i].status, REDIS_CALL_OK, "call %zu: %s %s", i,
                     status_name(a[i].status), a[i].error);
        cr_assert_eq(a[i].ints[1], (long long)i * 3);
        cr_assert_eq(a[i].ints[2], N);
    }
    cr_assert_eq(redis_client_stats(f.c)->noscript, 1);
    cr_assert_eq(redis_client_stats(f.c)->batches, 2, "sent, then resent");
    fx_fini(&f);
}

Test(redis, a_batch_past_its_deadline_times_out_each_call_once)
{
    enum { N = 6 };
    struct fx f;
    struct answer a[N], after;
    struct answers all = {a, N};
    struct redis_call *calls[N];
    char arg[N][24];

    fx_init(&f);
    fx_start_redis(&f);
    f.conf.timeout_ms = 100;
    fx_client(&f);
    wait_ready(&f);
    SYNC(&f, "CLIENT", "PAUSE", "300");
    memset(arg, 0, sizeof(arg));
    eval_batch(&f, a, arg, N, calls);
    cr_assert(run_until(&f, all_answered, &all, 2000));
    for (size_t i = 0; i < N; i++) {
        cr_assert_eq(a[i].status, REDIS_CALL_TIMEOUT, "call %zu: %s", i,
                     status_name(a[i].status));
        cr_assert_leq(a[i].at_ms - a[i].sent_ms, 100 + SLACK_MS);
    }
    /* The late reply is swallowed; once the pause is over (the PING
     * returns then), the next call is answered. */
    SYNC(&f, "PING");
    eval(&f, ECHO_BATCH, "{t}x", "5", &after);
    wait_answered(&f, &after);
    cr_assert_eq(after.status, REDIS_CALL_OK, "%s", status_name(after.status));
    run_for(&f, 20);
    for (size_t i = 0; i < N; i++) {
        cr_assert_eq(a[i].count, 1);
    }
    fx_fini(&f);
}

Test(redis, freeing_answers_calls_waiting_for_their_batch_with_down)
{
    enum { N = 4 };
    struct fx f;
    struct answer a[N];
    struct redis_call *calls[N];
    char arg[N][24];

    fx_init(&f);
    fx_start_redis(&f);
    fx_client(&f);
    wait_ready(&f);
    memset(arg, 0, sizeof(arg));
    eval_batch(&f, a, arg, N, calls); /* queued: the turn has not ended */
    redis_client_free(f.c);
    f.c = NULL;
    for (size_t i = 0; i < N; i++) {
        cr_assert_eq(a[i].count, 1, "call %zu answered %d times", i,
                     a[i].count);
        cr_assert_eq(a[i].status, REDIS_CALL_DOWN);
    }
    run_for(&f, 20);
    for (size_t i = 0; i < N; i++) {
        cr_assert_eq(a[i].count, 1);
    }
    fx_fini(&f);
}

Test(redis, connects_to_a_host_name)
{
    struct fx f;
    struct answer a;

    fx_init(&f);
    fx_start_redis(&f);
    f.conf.host = "localhost";
    fx_client(&f);
    wait_ready(&f);
    eval(&f, ECHO_KEYS, "{t}k", "9", &a);
    wait_answered(&f, &a);
    cr_assert_eq(a.status, REDIS_CALL_OK, "%s %s", status_name(a.status),
                 a.error);
    cr_assert_eq(a.ints[1], 9);
    fx_fini(&f);
}

Test(redis, an_unknown_host_is_down_and_frees_cleanly)
{
    struct fx f;
    struct answer a;

    fx_init(&f);
    f.conf.host = "no-such-host.invalid";
    f.conf.port = 6379;
    fx_client(&f);
    cr_assert_not(run_until(&f, is_ready, f.c, 200));
    eval(&f, ECHO_KEYS, "{t}k", "1", &a);
    wait_answered(&f, &a);
    cr_assert_eq(a.status, REDIS_CALL_DOWN);
    cr_assert_lt(a.at_ms - a.sent_ms, AT_ONCE_MS);
    fx_fini(&f);
}

Test(redis, a_redis_that_stops_answering_is_reconnected)
{
    struct fx f;
    struct answer a;
    int64_t until;

    fx_init(&f);
    fx_start_redis(&f);
    f.conf.timeout_ms = 100;
    fx_client(&f);
    wait_ready(&f);
    /* Longer than the 1 s the client waits for any reply. */
    SYNC(&f, "CLIENT", "PAUSE", "1500");
    until = harness_now_ms() + 1300;
    while (harness_now_ms() < until) {
        eval(&f, ECHO_KEYS, "{t}k", "1", &a);
        wait_answered(&f, &a);
        cr_assert(a.status == REDIS_CALL_TIMEOUT || a.status == REDIS_CALL_DOWN,
                  "%s", status_name(a.status));
        cr_assert_leq(a.at_ms - a.sent_ms, 100 + SLACK_MS);
    }
    cr_assert_not(redis_client_ready(f.c), "still on the stalled connection");
    wait_ready(&f);
    eval(&f, ECHO_KEYS, "{t}k", "3", &a);
    wait_answered(&f, &a);
    cr_assert_eq(a.status, REDIS_CALL_OK, "%s %s", status_name(a.status),
                 a.error);
    cr_assert_eq(redis_client_stats(f.c)->reconnects, 1);
    fx_fini(&f);
}

Test(redis, a_primary_demoted_to_replica_is_left_for_a_new_connection)
{
    struct fx f;
    struct answer a;
    char nowhere[8];

    fx_init(&f);
    fx_start_redis(&f);
    fx_client(&f);
    wait_ready(&f);
    /* A replica of a primary that is not there: it refuses writes. */
    snprintf(nowhere, sizeof(nowhere), "%u", (unsigned)harness_free_port());
    SYNC(&f, "REPLICAOF", "127.0.0.1", nowhere);
    eval(&f, INCR_KEY, "{t}n", NULL, &a);
    wait_answered(&f, &a);
    cr_assert_eq(a.status, REDIS_CALL_ERROR, "%s", status_name(a.status));
    cr_assert(strncmp(a.error, "READONLY", 8) == 0, "error: %s", a.error);
    cr_assert_not(redis_client_ready(f.c), "kept the replica's connection");

    SYNC(&f, "REPLICAOF", "NO", "ONE");
    wait_ready(&f);
    eval(&f, INCR_KEY, "{t}n", NULL, &a);
    wait_answered(&f, &a);
    cr_assert_eq(a.status, REDIS_CALL_OK, "%s %s", status_name(a.status),
                 a.error);
    cr_assert_eq(redis_client_stats(f.c)->reconnects, 1);
    fx_fini(&f);
}

struct freer {
    struct fx *f;          /* whose client the callback frees */
    struct answer *others; /* calls still pending then */
    size_t nothers;        /* of others */
    int count;             /* the freeing callback's runs */
    int others_answered;   /* others answered by the time free returned */
};

static void
on_answer_free(enum redis_status status, const long long *ints, size_t nints,
               const char *error, void *arg)
{
    struct freer *fr = arg;

    (void)status;
    (void)ints;
    (void)nints;
    (void)error;
    fr->count++;
    redis_client_free(fr->f->c);
    fr->f->c = NULL;
    for (size_t i = 0; i < fr->nothers; i++) {
        fr->others_answered += fr->others[i].count;
    }
}

/* The first answer's callback frees the client while 'script''s other
 * calls wait: each of them is answered once, DOWN, by the free. */
static void
check_callback_frees_client(const struct lua_script *script)
{
    enum { N = 20 };
    struct fx f;
    struct answer a[N];
    struct freer fr = {&f, a, N, 0, 0};
    const char *keys[] = {"{t}k"};
    const char *args[] = {"1"};

    fx_init(&f);
    fx_start_redis(&f);
    fx_client(&f);
    wait_ready(&f);
    redis_client_eval(f.c, script, keys, 1, args, 1, on_answer_free, &fr);
    for (int i = 0; i < N; i++) {
        eval(&f, script, "{t}k", "1", &a[i]);
    }
    cr_assert(run_until(&f, is_answered, &a[N - 1], 5000));
    cr_assert_eq(fr.count, 1);
    cr_assert_eq(fr.others_answered, N, "free did not answer the rest");
    for (int i = 0; i < N; i++) {
        cr_assert_eq(a[i].count, 1);
        cr_assert_eq(a[i].status, REDIS_CALL_DOWN);
    }
    run_for(&f, 20);
    fx_fini(&f);
}

Test(redis, a_callback_may_free_the_client)
{
    check_callback_frees_client(ECHO_KEYS);
}

/* Batches: what the single-call tests above prove, for calls that go
 * in batches (INCR_BATCH writes, so a call that reached Redis shows). */

static char *
sync_get(struct fx *f, const char *key)
{
    const char *argv[] = {"GET", key};

    return sync_cmd(f->port, NULL, argv, 2);
}

Test(redis, a_batch_the_server_forgot_goes_again_without_its_cancelled_calls)
{
    enum { N = 16 };
    struct fx f;
    struct answer a[N];
    struct answers rest = {a + 1, N - 1};
    struct redis_call *calls[N];
    char *v;

    fx_init(&f);
    fx_start_redis(&f);
    fx_client(&f);
    wait_ready(&f);
    SYNC(&f, "SCRIPT", "FLUSH");
    for (int i = 0; i < N; i++) {
        char key[32];

        snprintf(key, sizeof(key), "{t}c%d", i);
        calls[i] = eval(&f, INCR_BATCH, key, "1", &a[i]);
    }
    /* The 16th filled the batch: it is written already, and Redis
     * answers NOSCRIPT; the resend must leave the cancelled call out. */
    redis_call_cancel(calls[0]);
    cr_assert(run_until(&f, all_answered, &rest, 5000));
    run_for(&f, 50);
    cr_assert_eq(a[0].count, 0);
    v = sync_get(&f, "{t}c0");
    cr_assert_str_eq(v, "(nil)", "the cancelled call ran on the server: %s", v);
    free(v);
    fx_fini(&f);
}

Test(redis, a_call_cancelled_while_queued_is_never_sent)
{
    struct fx f;
    struct answer a[3];
    struct redis_call *c0;
    char *v;

    fx_init(&f);
    fx_start_redis(&f);
    fx_client(&f);
    wait_ready(&f);
    c0 = eval(&f, INCR_BATCH, "{t}q0", "1", &a[0]);
    eval(&f, INCR_BATCH, "{t}q1", "1", &a[1]);
    eval(&f, INCR_BATCH, "{t}q2", "1", &a[2]);
    redis_call_cancel(c0);
    wait_answered(&f, &a[2]);
    wait_answered(&f, &a[1]);
    run_for(&f, 20);
    cr_assert_eq(a[0].count, 0);
    v = sync_get(&f, "{t}q0");
    cr_assert_str_eq(v, "(nil)");
    free(v);
    fx_fini(&f);
}

Test(redis, a_callback_may_free_the_client_in_a_batch)
{
    check_callback_frees_client(ECHO_BATCH);
}

Test(redis, caps_the_batched_calls_in_flight_too)
{
    check_in_flight_cap(INCR_BATCH, "1");
}

Test(redis, a_replica_answering_a_batch_readonly_is_left)
{
    struct fx f;
    struct answer a[3];
    struct answers all = {a, 3};
    struct answers two = {a, 2};
    char nowhere[8];

    fx_init(&f);
    fx_start_redis(&f);
    fx_client(&f);
    wait_ready(&f);
    snprintf(nowhere, sizeof(nowhere), "%u", (unsigned)harness_free_port());
    SYNC(&f, "REPLICAOF", "127.0.0.1", nowhere);
    for (int i = 0; i < 3; i++) {
        eval(&f, INCR_BATCH, "{t}n", "1", &a[i]);
    }
    cr_assert(run_until(&f, all_answered, &all, 5000));
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(a[i].status, REDIS_CALL_ERROR);
        cr_assert(strstr(a[i].error, "READONLY") != NULL, "%s", a[i].error);
    }
    cr_assert_not(redis_client_ready(f.c));
    SYNC(&f, "REPLICAOF", "NO", "ONE");
    wait_ready(&f);
    eval(&f, INCR_BATCH, "{t}n", "1", &a[0]);
    eval(&f, INCR_BATCH, "{t}n", "1", &a[1]);
    cr_assert(run_until(&f, all_answered, &two, 5000));
    cr_assert_eq(a[1].status, REDIS_CALL_OK, "%s", a[1].error);
    fx_fini(&f);
}

Test(redis, a_batch_in_flight_on_a_killed_connection_is_answered_once)
{
    enum { N = 5 };
    struct fx f;
    struct answer a[N];
    struct answers all = {a, N};
    const char *kill[] = {"CLIENT", "KILL", "TYPE", "normal"};

    fx_init(&f);
    fx_start_redis(&f);
    fx_client(&f);
    wait_ready(&f);
    SYNC(&f, "CLIENT", "PAUSE", "300");
    for (int i = 0; i < N; i++) {
        eval(&f, ECHO_BATCH, "{t}n", "1", &a[i]);
    }
    run_for(&f, 30);
    free(sync_cmd(f.port, NULL, kill, 4));
    cr_assert(run_until(&f, all_answered, &all, 5000));
    run_for(&f, 50);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(a[i].count, 1);
    }
    wait_ready(&f);
    fx_fini(&f);
}

/*
 * A random mix of calls, which the client makes on the records of ended
 * calls (outside ASan): alone and batched, with short and long keys,
 * cancelled before or after their answer is ready, made and cancelled
 * from callbacks (where the record just ended is reused), timed out under
 * CLIENT PAUSE and answered late, resent after SCRIPT FLUSH. Every call
 * not cancelled is answered exactly once, with its own argument; a
 * cancelled one never. The sequence is fixed (SLUICE_MIX_SEED picks
 * another).
 */
#define RV_N 4000
struct rv_call {
    struct redis_call *h;     /* while it may still be answered */
    bool cancelled;           /* redis_call_cancel() was called */
    bool batch;               /* made with the batching script */
    int count;                /* answers */
    enum redis_status status; /* of the last answer */
    long long got;            /* its second integer */
    size_t nints;             /* its integers */
    long long want;           /* the argument sent */
};
static struct rv_call rv[RV_N];
static size_t rv_n;
static struct fx *rv_f;
static uint64_t rv_x = 88172645463325252ULL;

static uint64_t
rv_rand(void)
{
    rv_x ^= rv_x << 13;
    rv_x ^= rv_x >> 7;
    rv_x ^= rv_x << 17;
    return rv_x;
}

static void rv_start(void);

static void
rv_on_answer(enum redis_status status, const long long *ints, size_t nints,
             const char *error, void *arg)
{
    struct rv_call *c = arg;

    (void)error;
    c->count++;
    c->h = NULL;
    c->status = status;
    c->nints = nints;
    if (nints >= 2) {
        c->got = ints[1];
    }
    cr_assert(!c->cancelled, "call %zu answered after cancel",
              (size_t)(c - rv));
    /* Chain: a new call from the callback (it may get this record), and
     * sometimes cancel it at once. */
    if (rv_n < RV_N && rv_rand() % 3 == 0) {
        size_t j = rv_n;

        rv_start();
        if (rv_rand() % 2 == 0 && rv[j].h != NULL) {
            rv[j].cancelled = true;
            redis_call_cancel(rv[j].h);
            rv[j].h = NULL;
        }
    }
}

static void
rv_start(void)
{
    struct rv_call *c = &rv[rv_n];
    char key[64], arg[32];
    const char *keys[] = {key};
    const char *args[] = {arg};
    size_t klen = rv_rand() % 4 == 0 ? 40 : 4;

    memset(c, 0, sizeof(*c));
    c->want = (long long)(rv_n + 1000);
    c->batch = rv_rand() % 2 == 0;
    snprintf(key, sizeof(key), "{t}%zu:", rv_n);
    for (size_t j = strlen(key); j < klen; j++) {
        key[j] = 'k';
    }
    if (strlen(key) < klen) {
        key[klen] = '\0';
    }
    snprintf(arg, sizeof(arg), "%lld", c->want);
    rv_n++;
    c->h = redis_client_eval(rv_f->c, c->batch ? ECHO_BATCH : ECHO_KEYS, keys,
                             1, args, 1, rv_on_answer, c);
}

static bool
rv_done(void *arg)
{
    (void)arg;
    for (size_t i = 0; i < rv_n; i++) {
        if (!rv[i].cancelled && rv[i].count == 0) {
            return false;
        }
    }
    return true;
}

Test(redis, kept_call_records_answer_their_own_calls_under_a_random_mix)
{
    struct fx f;

    fx_init(&f);
    fx_start_redis(&f);
    f.conf.timeout_ms = 60;
    fx_client(&f);
    wait_ready(&f);
    rv_f = &f;
    if (getenv("SLUICE_MIX_SEED") != NULL) {
        rv_x = strtoull(getenv("SLUICE_MIX_SEED"), NULL, 10) | 1;
    }
    while (rv_n < RV_N - 100) {
        uint64_t r = rv_rand() % 100;

        if (r < 60) {
            rv_start();
        } else if (r < 80) {
            /* A random call, if it is still live. */
            size_t i = rv_n > 0 ? rv_rand() % rv_n : 0;

            if (rv_n == 0) {
                continue;
            }

            if (rv[i].h != NULL && !rv[i].cancelled) {
                rv[i].cancelled = true;
                redis_call_cancel(rv[i].h);
                rv[i].h = NULL;
            }
        } else if (r < 97) {
            event_base_loop(f.base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        } else if (r < 98) {
            event_base_loop(f.base, EVLOOP_ONCE);
        } else if (r < 99) {
            SYNC(&f, "CLIENT", "PAUSE", "80");
        } else {
            SYNC(&f, "SCRIPT", "FLUSH");
        }
    }
    cr_assert(run_until(&f, rv_done, NULL, 10000));
    run_for(&f, 300);
    {
        size_t ok = 0, to = 0, other = 0;

        for (size_t i = 0; i < rv_n; i++) {
            if (rv[i].cancelled) {
                cr_assert_eq(rv[i].count, 0, "cancelled %zu answered", i);
                continue;
            }
            cr_assert_eq(rv[i].count, 1, "call %zu answered %d times", i,
                         rv[i].count);
            if (rv[i].status == REDIS_CALL_OK) {
                ok++;
                cr_assert_eq(rv[i].got, rv[i].want,
                             "call %zu got %lld, want %lld", i, rv[i].got,
                             rv[i].want);
            } else if (rv[i].status == REDIS_CALL_TIMEOUT) {
                to++;
            } else {
                other++;
            }
        }
        cr_log_info("ok %zu timeout %zu other %zu of %zu", ok, to, other, rv_n);
        cr_assert_gt(ok, 100);
        cr_assert_gt(to, 0);
    }
    fx_fini(&f);
}

/* The fixture with a relay in front of its Redis, the client ready. */
static void
relay_fx_start(struct fx *f, struct relay *r)
{
    fx_init(f);
    fx_start_redis(f);
    relay_start(r, f);
    fx_client(f);
    wait_ready(f);
}

/* The client connects again through 'r' within 'ms' ('what' says what
 * it would have kept otherwise), and then a call is answered: '*a'. */
static void
expect_reconnected(struct fx *f, struct relay *r, int ms, const char *what,
                   struct answer *a)
{
    cr_assert(run_until(f, relay_accepted_twice, r, ms), "%s", what);
    wait_ready(f);
    eval(f, INCR_KEY, "{t}n", NULL, a);
    wait_answered(f, a);
    cr_assert_eq(a->status, REDIS_CALL_OK, "%s %s", status_name(a->status),
                 a->error);
}

static void
relay_fx_stop(struct fx *f, struct relay *r)
{
    relay_stop(r);
    fx_fini(f);
}

/* hiredis asserts on a reply with no callback waiting: the process would
 * abort. The client drops the connection instead, and connects again. */
Test(redis, a_reply_no_command_asked_for_costs_the_connection_only)
{
    struct fx f;
    struct relay r;
    struct answer a;

    relay_fx_start(&f, &r);
    relay_inject(&r, "+OK\r\n");
    expect_reconnected(&f, &r, 5000, "the client did not connect again", &a);
    relay_fx_stop(&f, &r);
}

/* hiredis would allocate the array's 10^9 slots, and walk them to free
 * them, inside the loop. The waiting call is answered DOWN at once. */
Test(redis, an_array_longer_than_any_reply_is_refused_at_its_header)
{
    struct fx f;
    struct relay r;
    struct answer a;

    relay_fx_start(&f, &r);
    r.swallow = true;
    eval(&f, INCR_KEY, "{t}n", NULL, &a);
    run_for(&f, 20);
    cr_assert_eq(a.count, 0);
    relay_inject(&r, "*1000000000\r\n");
    wait_answered(&f, &a);
    cr_assert_eq(a.status, REDIS_CALL_DOWN, "%s %s", status_name(a.status),
                 a.error);
    cr_assert_lt(a.at_ms - a.sent_ms, f.conf.timeout_ms,
                 "answered after %lld ms", (long long)(a.at_ms - a.sent_ms));
    r.swallow = false;
    expect_reconnected(&f, &r, 5000, "the client did not connect again", &a);
    relay_fx_stop(&f, &r);
}

/* A server that closes each connection once it is ready (the handshake
 * done, no call answered yet) gets the backoff: 50 ms doubling to 2 s,
 * about seven connections in 3 s, not one every 50 ms. */
Test(redis, a_server_that_closes_after_each_handshake_gets_the_backoff)
{
    struct fx f;
    struct relay r;
    struct answer a;
    int64_t until;

    fx_init(&f);
    fx_start_redis(&f);
    relay_start(&r, &f);
    fx_client(&f);
    until = harness_now_ms() + 3000;
    while (harness_now_ms() < until) {
        if (redis_client_ready(f.c)) {
            relay_cut(&r);
        }
        event_base_loop(f.base, EVLOOP_ONCE);
    }
    cr_assert_geq(r.accepted, 4, "only %d connections: nothing was cut",
                  r.accepted);
    cr_assert_leq(r.accepted, 10, "%d connections in 3 s", r.accepted);
    /* Left alone, it connects and answers. */
    wait_ready(&f);
    eval(&f, INCR_KEY, "{t}n", NULL, &a);
    wait_answered(&f, &a);
    cr_assert_eq(a.status, REDIS_CALL_OK, "%s %s", status_name(a.status),
                 a.error);
    relay_fx_stop(&f, &r);
}

/* A reply that never ends (a bulk string of a terabyte, trickling): the
 * call times out, and the connection, owing a reply with none come for
 * the connect deadline (1 s), is dropped although no call is left to
 * time out. */
Test(redis, a_reply_that_never_ends_costs_the_connection_after_the_deadline)
{
    struct fx f;
    struct relay r;
    struct answer a;

    relay_fx_start(&f, &r);
    r.swallow = true;
    eval(&f, INCR_KEY, "{t}n", NULL, &a);
    relay_inject(&r, "$999999999999\r\nxxxxxxxx");
    wait_answered(&f, &a);
    cr_assert_eq(a.status, REDIS_CALL_TIMEOUT, "%s", status_name(a.status));
    r.swallow = false;
    expect_reconnected(&f, &r, 3000, "the connection was kept", &a);
    relay_fx_stop(&f, &r);
}

/* A server that skips one reply (CLIENT REPLY SKIP, sent here behind the
 * client's back) puts every later reply one call late: each call gets
 * the reply of the call before it, or times out. The connection owes a
 * reply for the connect deadline and is dropped; the next is in step. */
Test(redis, a_connection_out_of_step_is_dropped_once_it_owes_a_reply_too_long)
{
    struct fx f;
    struct relay r;
    struct answer a, b, c;

    relay_fx_start(&f, &r);
    relay_inject_up(&r, "*3\r\n$6\r\nCLIENT\r\n$5\r\nREPLY\r\n$4\r\nSKIP\r\n");
    run_for(&f, 20);
    eval(&f, INCR_KEY, "{t}n", NULL, &a);
    wait_answered(&f, &a);
    cr_assert_eq(a.status, REDIS_CALL_TIMEOUT, "%s", status_name(a.status));
    /* Its reply goes to the first call's record. */
    eval(&f, INCR_KEY, "{t}n", NULL, &b);
    wait_answered(&f, &b);
    cr_assert_eq(b.status, REDIS_CALL_TIMEOUT, "%s", status_name(b.status));
    expect_reconnected(&f, &r, 3000, "the connection was kept out of step", &c);
    cr_assert_eq(c.ints[0], 3, "INCR answered %lld", c.ints[0]);
    relay_fx_stop(&f, &r);
}

/* A reply that begins and never ends, with no call waiting for it: the
 * bytes the connection holds unparsed pass a mebibyte, and it is
 * dropped, though no call is owed a reply. */
Test(redis, an_unfinished_reply_past_a_mebibyte_costs_the_connection)
{
    struct fx f;
    struct relay r;
    struct answer a;
    char *line = malloc(2 * 1024 * 1024 + 1);

    relay_fx_start(&f, &r);
    memset(line, 'x', 2 * 1024 * 1024);
    line[0] = '-';
    line[2 * 1024 * 1024] = '\0';
    relay_inject(&r, line);
    expect_reconnected(&f, &r, 3000, "the connection was kept", &a);
    free(line);
    relay_fx_stop(&f, &r);
}
