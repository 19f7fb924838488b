/*
 * A Redis that answers what no rate-limit script sends (lua/README.md,
 * the reply's bounds): the gateway must take the reply as malformed and
 * apply the filter's on_redis_error, never act on it. The Redis here is
 * a stand-in speaking RESP in a thread of the test: it takes AUTH,
 * SELECT and SCRIPT LOAD, and answers every EVALSHA, alone or a batch,
 * with the integers the test chose.
 */
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "scripts.h"

#include <hiredis/hiredis.h>

#define STANDIN_CLIENTS 8
#define STANDIN_BUF 65536

/* The stand-in Redis: a listening socket served by one thread. */
struct standin {
    int fd;                 /* listening socket */
    uint16_t port;          /* its port */
    int stop[2];            /* a pipe: writing ends the thread */
    pthread_t thread;       /* serves every connection */
    const char *reply;      /* integers joined by ':'; borrowed */
    uint16_t primary;       /* as a sentinel: the primary's port, and after
                               SUBSCRIBE a reply that never ends; 0: no */
    bool wrong_sha;         /* SCRIPT LOAD answers a hash that is not the
                               script's */
    unsigned switches;      /* as a sentinel: after SUBSCRIBE, this many
                               +switch-master messages instead of the
                               endless reply, alternating between
                               'dead_port' and 'primary', the last one to
                               'primary' */
    uint16_t dead_port;     /* where nothing listens */
    const char *role;       /* the answer to ROLE (RESP, NUL bytes
                               allowed: role_len), or NULL for +OK */
    size_t role_len;        /* bytes of 'role' */
    const char *slots;      /* as a cluster node: the answer to CLUSTER
                               SLOTS (RESP), or NULL; borrowed */
    bool short_batch;       /* a batch's reply has one answer fewer
                               than its calls */
    bool batch_shaped;      /* one call is answered as a batch of one */
    bool batch_of_ints;     /* a batch's calls are answered each as one
                               call is, arrays of integers */
    unsigned long accepted; /* connections taken */
    unsigned long maps;     /* CLUSTER SLOTS answered */
    unsigned long evals;    /* EVALSHA commands answered */
    pthread_mutex_t lock;   /* guards 'evals' */
};

/* One connection: its commands are read as hiredis reads replies, the
 * same RESP arrays of bulk strings. */
struct standin_conn {
    int fd;          /* -1: free slot */
    redisReader *rd; /* the bytes read, not yet a whole command; owned */
    bool subscribed; /* a SUBSCRIBE was answered: later ones are the
                        watch's heartbeats, confirmed and no more, as a
                        sentinel confirms them */
};

static bool
word_is(const char *w, size_t len, const char *s)
{
    return len == strlen(s) && strncasecmp(w, s, len) == 0;
}

static void
send_all(int fd, const char *s, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, s, len, MSG_NOSIGNAL);

        if (n <= 0) {
            return;
        }
        s += n;
        len -= (size_t)n;
    }
}

/* Answers the command of 'nw' words 'w' (lengths 'wl') on 'c'. */
static void
answer(struct standin *s, struct standin_conn *c, const char **w,
       const size_t *wl, size_t nw)
{
    char out[STANDIN_BUF];
    size_t len = 0;
    int fd = c->fd;

    if (word_is(w[0], wl[0], "SUBSCRIBE") && c->subscribed) {
        static const char ok[] = "*3\r\n$9\r\nsubscribe\r\n"
                                 "$14\r\n+switch-master\r\n:1\r\n";

        send_all(fd, ok, sizeof(ok) - 1);
        return;
    }
    if (word_is(w[0], wl[0], "SUBSCRIBE")) {
        c->subscribed = true;
    }
    if (word_is(w[0], wl[0], "ROLE") && s->role != NULL) {
        send_all(fd, s->role, s->role_len);
        return;
    } else if (word_is(w[0], wl[0], "SENTINEL") && s->primary != 0) {
        char port[8];

        snprintf(port, sizeof(port), "%u", (unsigned)s->primary);
        len = (size_t)snprintf(out, sizeof(out),
                               "*2\r\n$9\r\n127.0.0.1\r\n$%zu\r\n%s\r\n",
                               strlen(port), port);
    } else if (word_is(w[0], wl[0], "SUBSCRIBE") && s->primary != 0 &&
               s->switches > 0) {
        static const char ok[] = "*3\r\n$9\r\nsubscribe\r\n"
                                 "$14\r\n+switch-master\r\n:1\r\n";

        send_all(fd, ok, sizeof(ok) - 1);
        for (unsigned i = s->switches; i > 0; i--) {
            char text[128];
            int n = snprintf(text, sizeof(text),
                             "mymaster 127.0.0.1 %u 127.0.0.1 %u",
                             (unsigned)(i % 2 ? s->dead_port : s->primary),
                             (unsigned)(i % 2 ? s->primary : s->dead_port));

            len = (size_t)snprintf(out, sizeof(out),
                                   "*3\r\n$7\r\nmessage\r\n$14\r\n"
                                   "+switch-master\r\n$%d\r\n%s\r\n",
                                   n, text);
            send_all(fd, out, len);
        }
        return;
    } else if (word_is(w[0], wl[0], "SUBSCRIBE") && s->primary != 0) {
        /* Subscribed; then an error line with no end: 2 MiB, and the
         * connection stays. */
        static const char ok[] = "*3\r\n$9\r\nsubscribe\r\n"
                                 "$14\r\n+switch-master\r\n:1\r\n";
        size_t n = 2 * 1024 * 1024;
        char *endless = malloc(n);

        cr_assert_not_null(endless);
        send_all(fd, ok, sizeof(ok) - 1);
        memset(endless, 'x', n);
        endless[0] = '-';
        send_all(fd, endless, n);
        free(endless);
        return;
    } else if (word_is(w[0], wl[0], "CLUSTER") && s->slots != NULL) {
        pthread_mutex_lock(&s->lock);
        s->maps++;
        pthread_mutex_unlock(&s->lock);
        send_all(fd, s->slots, strlen(s->slots));
        return;
    } else if (word_is(w[0], wl[0], "SCRIPT") && nw == 3) {
        const struct lua_script sent = {"sent", w[2], wl[2], false};
        char sha[SCRIPTS_SHA1_HEX + 1];

        cr_assert(scripts_sha1(&sent, sha));
        if (s->wrong_sha) {
            sha[0] = sha[0] == '0' ? '1' : '0';
        }
        len = (size_t)snprintf(out, sizeof(out), "$40\r\n%s\r\n", sha);
    } else if (word_is(w[0], wl[0], "EVALSHA") && nw >= 4) {
        size_t nkeys = (size_t)strtoul(w[2], NULL, 10);
        size_t a = 3 + nkeys; /* ARGV[1] */

        if (a + 1 < nw && word_is(w[a], wl[a], "batch")) {
            unsigned long calls = strtoul(w[a + 1], NULL, 10);

            calls -= s->short_batch && calls > 0;
            len = (size_t)snprintf(out, sizeof(out), "*%lu\r\n", calls);
            for (unsigned long i = 0; i < calls; i++) {
                len += (size_t)snprintf(out + len, sizeof(out) - len,
                                        s->batch_of_ints ? "*2\r\n:1\r\n:4\r\n"
                                                         : "$%zu\r\n%s\r\n",
                                        strlen(s->reply), s->reply);
            }
        } else if (s->batch_shaped) {
            len = (size_t)snprintf(out, sizeof(out), "*1\r\n$%zu\r\n%s\r\n",
                                   strlen(s->reply), s->reply);
        } else {
            const char *p = s->reply;
            size_t n = 1;

            for (const char *q = p; *q != '\0'; q++) {
                n += *q == ':';
            }
            len = (size_t)snprintf(out, sizeof(out), "*%zu\r\n", n);
            for (;;) {
                size_t k = strcspn(p, ":");

                len += (size_t)snprintf(out + len, sizeof(out) - len,
                                        ":%.*s\r\n", (int)k, p);
                if (p[k] == '\0') {
                    break;
                }
                p += k + 1;
            }
        }
        pthread_mutex_lock(&s->lock);
        s->evals++;
        pthread_mutex_unlock(&s->lock);
    } else {
        len = (size_t)snprintf(out, sizeof(out), "+OK\r\n");
    }
    send_all(fd, out, len);
}

static void
standin_close(struct standin_conn *c)
{
    close(c->fd);
    c->fd = -1;
    redisReaderFree(c->rd);
    c->rd = NULL;
}

static void *
standin_run(void *arg)
{
    struct standin *s = arg;
    struct standin_conn *conns = calloc(STANDIN_CLIENTS, sizeof(*conns));
    struct pollfd pfd[STANDIN_CLIENTS + 2];

    if (conns == NULL) {
        return NULL;
    }

    for (size_t i = 0; i < STANDIN_CLIENTS; i++) {
        conns[i].fd = -1;
    }
    for (;;) {
        pfd[0] = (struct pollfd){.fd = s->stop[0], .events = POLLIN};
        pfd[1] = (struct pollfd){.fd = s->fd, .events = POLLIN};
        for (size_t i = 0; i < STANDIN_CLIENTS; i++) {
            pfd[2 + i] = (struct pollfd){.fd = conns[i].fd, .events = POLLIN};
        }
        if (poll(pfd, STANDIN_CLIENTS + 2, -1) < 0 || pfd[0].revents != 0) {
            break;
        }
        if (pfd[1].revents & POLLIN) {
            int fd = accept(s->fd, NULL, NULL);

            if (fd >= 0) {
                pthread_mutex_lock(&s->lock);
                s->accepted++;
                pthread_mutex_unlock(&s->lock);
            }

            for (size_t i = 0; fd >= 0 && i < STANDIN_CLIENTS; i++) {
                if (conns[i].fd < 0 &&
                    (conns[i].rd = redisReaderCreate()) != NULL) {
                    conns[i].fd = fd;
                    conns[i].subscribed = false;
                    fd = -1;
                }
            }
            if (fd >= 0) {
                close(fd);
            }
        }
        for (size_t i = 0; i < STANDIN_CLIENTS; i++) {
            struct standin_conn *c = &conns[i];
            const char *w[512];
            size_t wl[512];
            char buf[STANDIN_BUF];
            void *r;
            ssize_t n;
            int rc;

            if (c->fd < 0 || pfd[2 + i].revents == 0) {
                continue;
            }
            n = recv(c->fd, buf, sizeof(buf), 0);
            if (n <= 0 || redisReaderFeed(c->rd, buf, (size_t)n) != REDIS_OK) {
                standin_close(c);
                continue;
            }
            while ((rc = redisReaderGetReply(c->rd, &r)) == REDIS_OK &&
                   r != NULL) {
                redisReply *cmd = r;
                size_t nw = 0;

                if (cmd->type == REDIS_REPLY_ARRAY && cmd->elements > 0 &&
                    cmd->elements <= 512) {
                    for (; nw < cmd->elements &&
                           cmd->element[nw]->type == REDIS_REPLY_STRING;
                         nw++) {
                        w[nw] = cmd->element[nw]->str;
                        wl[nw] = cmd->element[nw]->len;
                    }
                }
                if (nw == 0 || nw != cmd->elements) {
                    rc = REDIS_ERR; /* not a command */
                } else {
                    answer(s, c, w, wl, nw);
                }
                freeReplyObject(r);
                if (rc != REDIS_OK) {
                    break;
                }
            }
            if (rc != REDIS_OK) {
                standin_close(c);
            }
        }
    }
    for (size_t i = 0; i < STANDIN_CLIENTS; i++) {
        if (conns[i].fd >= 0) {
            standin_close(&conns[i]);
        }
    }
    free(conns);
    return NULL;
}

/* Starts the stand-in on a port of its own, answering 'reply'. */
static void
standin_start(struct standin *s, const char *reply)
{
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    int one = 1;

    memset(s, 0, sizeof(*s));
    s->reply = reply;
    pthread_mutex_init(&s->lock, NULL);
    s->fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(s->fd, 0);
    setsockopt(s->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(bind(s->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    cr_assert_eq(listen(s->fd, 16), 0);
    cr_assert_eq(getsockname(s->fd, (struct sockaddr *)&sa, &sl), 0);
    s->port = ntohs(sa.sin_port);
    cr_assert_eq(pipe(s->stop), 0);
    cr_assert_eq(pthread_create(&s->thread, NULL, standin_run, s), 0);
}

static void
standin_stop(struct standin *s)
{
    cr_assert_eq(write(s->stop[1], "x", 1), 1);
    pthread_join(s->thread, NULL);
    close(s->stop[0]);
    close(s->stop[1]);
    close(s->fd);
    pthread_mutex_destroy(&s->lock);
}

/* One of the stand-in's counters, read under its lock. */
static unsigned long
standin_count(struct standin *s, const unsigned long *counter)
{
    unsigned long n;

    pthread_mutex_lock(&s->lock);
    n = *counter;
    pthread_mutex_unlock(&s->lock);
    return n;
}

static unsigned long
standin_evals(struct standin *s)
{
    return standin_count(s, &s->evals);
}

static bool
connected(void *arg)
{
    return proc_log_contains(arg, "redis: connected");
}

static bool
subscription_dropped(void *arg)
{
    return proc_log_contains(arg, "more than 1 MiB still unfinished");
}

/* A limiter that never refuses in a test's time. */
#define HOURLY "{ algorithm: fixed_window, limit: 100, window: 1h }"

/* A gateway of one worker whose one route, to an echo, is limited by
 * limiter "lim" with on_redis_error: deny. */
struct gw_rig {
    struct proc echo, gw; /* the upstream and the gateway */
    uint16_t port;        /* where the gateway listens */
    char *url;            /* its route; owned */
    char *path;           /* the config file; owned */
};

/* Starts it with 'redis' (the lines under redis:, indented) and 'limiter'
 * (lim's flow mapping). */
static void
gw_rig_start(struct gw_rig *g, const char *redis, const char *limiter)
{
    uint16_t echo_port;
    char *yaml;

    g->port = harness_free_port();
    echo_start(&g->echo, &echo_port);
    yaml = harness_strf("server:\n"
                        "  listen: 127.0.0.1:%u\n"
                        "  workers: 1\n"
                        "redis:\n"
                        "%s"
                        "limiters:\n"
                        "  lim: %s\n"
                        "routes:\n"
                        "  - id: api\n"
                        "    uri: http://127.0.0.1:%u\n"
                        "    predicates: [Path=/**]\n"
                        "    filters:\n"
                        "      - name: RequestRateLimiter\n"
                        "        args: { key: route, limiter: lim, "
                        "on_redis_error: deny }\n",
                        g->port, redis, limiter, echo_port);
    g->path = harness_write_temp(yaml);
    free(yaml);
    g->url = harness_strf("http://127.0.0.1:%u/x", g->port);
    gateway_start(&g->gw, g->path, g->port);
}

/* Stops both; the gateway must exit cleanly. */
static void
gw_rig_stop(struct gw_rig *g)
{
    cr_assert_eq(proc_stop(&g->gw, SIGTERM, 15000), 0);
    proc_stop(&g->echo, SIGTERM, 5000);
    unlink(g->path);
    free(g->path);
    free(g->url);
}

/* The status of GET on the rig's route. */
static long
gw_rig_get(const struct gw_rig *g)
{
    struct http_response r;
    long status;

    http_get(&r, g->url, 4000);
    status = r.status;
    http_response_free(&r);
    return status;
}

/* redis: lines for a single server at 'port' with 'timeout'; the
 * caller frees them. */
static char *
redis_at(uint16_t port, const char *timeout)
{
    return harness_strf("  url: redis://127.0.0.1:%u/0\n"
                        "  timeout: %s\n",
                        (unsigned)port, timeout);
}

/* redis: lines for one sentinel at 'port', master "mymaster". */
static char *
sentinel_at(uint16_t port)
{
    return harness_strf("  sentinel:\n"
                        "    master: mymaster\n"
                        "    nodes: ['127.0.0.1:%u']\n"
                        "  timeout: 500ms\n",
                        (unsigned)port);
}

/* What a run of requests saw: the warnings logged and the time taken. */
struct warned {
    size_t lines;    /* log lines about the reply */
    int64_t took_ms; /* for all the requests */
};

/*
 * Runs a gateway whose one route is limited by 'limiter' (the YAML of
 * limiter "lim") with on_redis_error: deny, in front of the stand-in
 * answering 'reply'; asserts that each of 'requests' requests is
 * answered 503 at once, by the policy, after the stand-in was asked.
 * 'w', if not NULL, gets what the run logged and how long it took.
 */
static void
expect_policy_for_n(const char *limiter, const char *reply, int requests,
                    struct warned *w)
{
    struct standin s;
    struct gw_rig g;
    char *redis;
    int64_t t0;

    standin_start(&s, reply);
    redis = redis_at(s.port, "5s");
    gw_rig_start(&g, redis, limiter);
    cr_assert(harness_wait_until(connected, &g.gw, 10000),
              "the gateway never connected to the stand-in");
    t0 = harness_now_ms();
    for (int i = 0; i < requests; i++) {
        int64_t t = harness_now_ms();
        long status = gw_rig_get(&g);

        /* Obeyed, the reply would hold the request (3 s or more) and
         * then pass it; the policy answers at once. */
        cr_assert_eq(status, 503, "%s on \"%s\": status %ld after %lld ms",
                     limiter, reply, status, (long long)(harness_now_ms() - t));
    }
    cr_assert_geq(standin_evals(&s), (unsigned long)requests,
                  "the limiter did not ask Redis each time");
    cr_assert(proc_log_contains(&g.gw, "unexpected reply"),
              "the malformed reply was not logged");
    if (w != NULL) {
        char *log = proc_log(&g.gw);

        w->took_ms = harness_now_ms() - t0;
        w->lines = harness_count(log, "unexpected reply");
        free(log);
    }
    gw_rig_stop(&g);
    standin_stop(&s);
    free(redis);
}

/* Requests on the rig's route, from threads, until 'stop'. */
struct load {
    const struct gw_rig *g;
    atomic_bool stop;
};

static void *
load_run(void *arg)
{
    struct load *l = arg;

    while (!atomic_load(&l->stop)) {
        gw_rig_get(l->g);
    }
    return NULL;
}

/* For harness_wait_until(): the stand-in took a second connection. */
static bool
reconnected(void *arg)
{
    return standin_count(arg, &((struct standin *)arg)->accepted) >= 2;
}

/*
 * Runs requests at once on a gateway in front of 's' (started, and set up
 * to answer batches wrongly), so that the worker sends some as a batch,
 * until the stand-in takes a second connection; then the gateway must
 * have logged that the batch's reply was out of step.
 */
static void
expect_batch_reconnect(struct standin *s)
{
    struct gw_rig g;
    struct load l;
    pthread_t th[8];
    char *redis = redis_at(s->port, "5s");

    gw_rig_start(&g, redis, HOURLY);
    cr_assert(harness_wait_until(connected, &g.gw, 10000),
              "the gateway never connected to the stand-in");
    l.g = &g;
    atomic_init(&l.stop, false);
    for (size_t i = 0; i < 8; i++) {
        cr_assert_eq(pthread_create(&th[i], NULL, load_run, &l), 0);
    }
    cr_assert(harness_wait_until(reconnected, s, 20000),
              "no new connection after a batch's wrong reply; log:\n%s",
              proc_log(&g.gw));
    atomic_store(&l.stop, true);
    for (size_t i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
    }
    cr_assert(proc_log_contains(&g.gw, "a batch got a reply of another shape"),
              "%s", proc_log(&g.gw));
    gw_rig_stop(&g);
    free(redis);
}

/*
 * A batch answered with one answer fewer than its calls: a reply skipped
 * on the way looks so, and puts every later reply a command late. The
 * connection is dropped and made again (README, "Redis, and when it
 * fails").
 */
Test(bad_replies, a_batch_reply_of_another_length_reconnects, .timeout = 60)
{
    struct standin s;

    standin_start(&s, "1:4:0:1000:0:0");
    s.short_batch = true;
    expect_batch_reconnect(&s);
    standin_stop(&s);
}

/* A batch whose calls are answered each as one call is, arrays of
 * integers, of the batch's length: another command's reply as much as a
 * short one is. It used to pass for the batch's. */
Test(bad_replies, a_batch_answered_with_one_calls_replies_reconnects,
     .timeout = 60)
{
    struct standin s;

    standin_start(&s, "1:4:0:1000:0:0");
    s.batch_of_ints = true;
    expect_batch_reconnect(&s);
    standin_stop(&s);
}

/* For harness_wait_until(): one request on the rig's route, then
 * whether the stand-in took a second connection. */
static bool
reconnected_after_a_request(void *arg)
{
    struct standin *s = ((void **)arg)[0];

    gw_rig_get(((void **)arg)[1]);
    return reconnected(s);
}

/* One call answered as a batch is: out of step as a batch answered short
 * is, and dropped the same way. */
Test(bad_replies, a_call_answered_in_a_batchs_shape_reconnects, .timeout = 60)
{
    struct standin s;
    struct gw_rig g;
    void *both[2] = {&s, &g};
    char *redis;

    standin_start(&s, "1:4:0:1000:0:0");
    s.batch_shaped = true;
    redis = redis_at(s.port, "5s");
    gw_rig_start(&g, redis, HOURLY);
    cr_assert(harness_wait_until(connected, &g.gw, 10000),
              "the gateway never connected to the stand-in");
    /* One request at a time: single calls, never a batch. */
    cr_assert(harness_wait_until(reconnected_after_a_request, both, 10000),
              "no new connection after a call got a batch's reply; log:\n%s",
              proc_log(&g.gw));
    cr_assert(proc_log_contains(&g.gw, "a call got a reply of another shape"));
    gw_rig_stop(&g);
    standin_stop(&s);
    free(redis);
}

/* For harness_wait_until(): the stand-in took a sixth connection. */
static bool
sixth_connection(void *arg)
{
    return standin_count(arg, &((struct standin *)arg)->accepted) >= 6;
}

/*
 * A server whose every reply is out of step does not count as one that
 * works: each reconnection waits twice as long as the one before, as
 * after a failed connect (50 ms, halved at most by the jitter, then 100,
 * 200, 400: the sixth connection comes 775 ms or more after the first
 * drop). Such a reply used to reset the backoff to 50 ms, so that the
 * gateway reconnected every 25-50 ms for as long as the server answered.
 */
Test(bad_replies, replies_always_out_of_step_back_the_reconnects_off,
     .timeout = 60)
{
    struct standin s;
    struct gw_rig g;
    struct load l;
    pthread_t th[8];
    char *redis;
    int64_t t0, took;

    standin_start(&s, "1:4:0:1000:0:0");
    s.short_batch = true;
    s.batch_shaped = true;
    redis = redis_at(s.port, "5s");
    gw_rig_start(&g, redis, HOURLY);
    cr_assert(harness_wait_until(connected, &g.gw, 10000),
              "the gateway never connected to the stand-in");
    t0 = harness_now_ms();
    l.g = &g;
    atomic_init(&l.stop, false);
    for (size_t i = 0; i < 8; i++) {
        cr_assert_eq(pthread_create(&th[i], NULL, load_run, &l), 0);
    }
    cr_assert(harness_wait_until(sixth_connection, &s, 30000),
              "%lu connections in 30 s", standin_count(&s, &s.accepted));
    took = harness_now_ms() - t0;
    atomic_store(&l.stop, true);
    for (size_t i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
    }
    cr_assert_geq(took, 775, "six connections in %lld ms", (long long)took);
    gw_rig_stop(&g);
    standin_stop(&s);
    free(redis);
}

static bool
not_primary(void *arg)
{
    return proc_log_contains(arg, "not the primary");
}

static bool
sha_refused(void *arg)
{
    return proc_log_contains(arg, "not the script's SHA-1");
}

/* A server whose SCRIPT LOAD names the script by another hash would
 * answer every EVALSHA with NOSCRIPT, or run something else: it is not
 * used. */
Test(bad_replies, a_script_load_answering_another_sha_is_not_used,
     .timeout = 60)
{
    struct standin s;
    struct gw_rig g;
    char *redis;

    standin_start(&s, "1:4:0:1000:0:0");
    s.wrong_sha = true;
    redis = redis_at(s.port, "2s");
    gw_rig_start(&g, redis, "{ algorithm: token_bucket, rate: 5/s, burst: 5 }");
    cr_assert(harness_wait_until(sha_refused, &g.gw, 10000),
              "the wrong hash was not refused:\n%s", proc_log(&g.gw));
    cr_assert_eq(gw_rig_get(&g), 503);
    cr_assert_eq(standin_evals(&s), 0, "a script was called");
    cr_assert(!proc_log_contains(&g.gw, "redis: connected"),
              "the connection was taken as ready:\n%s", proc_log(&g.gw));
    gw_rig_stop(&g);
    standin_stop(&s);
    free(redis);
}

static void
expect_policy_for(const char *limiter, const char *reply)
{
    expect_policy_for_n(limiter, reply, 1, NULL);
}

Test(bad_replies, a_wait_from_a_deny_mode_limiter_gets_the_failure_policy,
     .timeout = 60)
{
    const char *bucket = "{ algorithm: token_bucket, rate: 5/s, burst: 5 }";

    expect_policy_for(bucket, "1:4:0:1000:3000:0");
    expect_policy_for(bucket, "1:4:0:1000:9223372036854775807:0");
}

Test(bad_replies, a_wait_past_max_delay_gets_the_failure_policy, .timeout = 60)
{
    expect_policy_for("{ algorithm: token_bucket, rate: 5/s, burst: 5, "
                      "mode: delay, max_delay: 1s }",
                      "1:0:0:6000:5000:0");
}

Test(bad_replies, a_lease_take_with_a_huge_remaining_gets_the_failure_policy,
     .timeout = 60)
{
    expect_policy_for("{ algorithm: token_bucket, rate: 5/s, burst: 5, "
                      "lease: 10 }",
                      "1:9223372036854775807:0:1000:0:0:5");
}

Test(bad_replies, a_rule_the_limiter_lacks_gets_the_failure_policy,
     .timeout = 60)
{
    expect_policy_for("{ algorithm: token_bucket, rate: 5/s, burst: 5 }",
                      "1:4:0:1000:0:7");
}

/* A Redis that answers every call wrongly costs a warning a second per
 * worker, not one per request. */
Test(bad_replies, replies_refused_one_after_another_are_logged_once_a_second,
     .timeout = 60)
{
    struct warned w;

    expect_policy_for_n("{ algorithm: token_bucket, rate: 5/s, burst: 5 }",
                        "1:4:0:1000:0:7", 40, &w);
    cr_assert_leq(w.lines, (size_t)(1 + w.took_ms / 1000),
                  "%zu warnings for 40 replies in %lld ms", w.lines,
                  (long long)w.took_ms);
}

/* A sentinel whose subscription sends a reply that never ends: hiredis
 * would keep it whole; the gateway drops the subscription once more than
 * 1 MiB of it waits unparsed, and keeps deciding on the primary. */
Test(bad_replies, a_sentinel_reply_that_never_ends_costs_the_subscription,
     .timeout = 60)
{
    struct standin s;
    struct proc redis_proc;
    struct gw_rig g;
    uint16_t redis_port;
    char *redis;

    redis_start(&redis_proc, &redis_port);
    standin_start(&s, "unused");
    s.primary = redis_port;
    redis = sentinel_at(s.port);
    gw_rig_start(&g, redis, HOURLY);
    cr_assert(harness_wait_until(subscription_dropped, &g.gw, 10000),
              "the subscription was kept; gateway log:\n%s", proc_log(&g.gw));
    cr_assert_eq(gw_rig_get(&g), 200);
    gw_rig_stop(&g);
    standin_stop(&s);
    proc_stop(&redis_proc, SIGTERM, 5000);
    free(redis);
}

/* Connections a redis-server has accepted so far. */
static long
connections_received(uint16_t port)
{
    redisContext *c = redisConnect("127.0.0.1", port);
    redisReply *r;
    const char *at;
    long n = -1;

    cr_assert(c != NULL && c->err == 0);
    r = redisCommand(c, "INFO stats");
    cr_assert(r != NULL && r->type == REDIS_REPLY_STRING);
    at = strstr(r->str, "total_connections_received:");
    if (at != NULL) {
        n = strtol(at + strlen("total_connections_received:"), NULL, 10);
    }
    freeReplyObject(r);
    redisFree(c);
    return n;
}

struct flood_wait {
    struct gw_rig *g; /* borrowed */
};

/* The gateway decides again, after the switches it followed. */
static bool
decides_after_switches(void *arg)
{
    struct flood_wait *f = arg;

    return proc_log_count(&f->g->gw, "mymaster switched from") >= 2 &&
           gw_rig_get(f->g) == 200;
}

/* A sentinel announcing switch after switch: each would cost the client
 * its connection. At most one a second is followed, the last one heard
 * at the end of that second, so a flood of 1,000 costs a few connections
 * and the gateway ends on the address announced last. */
Test(bad_replies, a_flood_of_switches_is_followed_once_a_second, .timeout = 60)
{
    struct standin s;
    struct proc redis_proc;
    struct gw_rig g;
    struct flood_wait f = {&g};
    uint16_t redis_port;
    char *redis;
    long before, after;

    redis_start(&redis_proc, &redis_port);
    standin_start(&s, "unused");
    s.dead_port = harness_free_port();
    s.switches = 1000;
    s.primary = redis_port;
    redis = sentinel_at(s.port);
    before = connections_received(redis_port);
    gw_rig_start(&g, redis, HOURLY);
    cr_assert(harness_wait_until(decides_after_switches, &f, 20000),
              "no decision after the switches; gateway log:\n%s",
              proc_log(&g.gw));
    after = connections_received(redis_port);
    /* The first connection, one per switch followed (two, maybe three),
     * and this test's own INFO: not one per switch. */
    cr_assert_leq(after - before, 6,
                  "%ld connections for %u switches announced", after - before,
                  s.switches);
    gw_rig_stop(&g);
    standin_stop(&s);
    proc_stop(&redis_proc, SIGTERM, 5000);
    free(redis);
}

/* The stand-in, as a cluster's seed, has answered CLUSTER SLOTS five
 * times. */
static bool
five_maps(void *arg)
{
    struct standin *s = arg;

    return standin_count(s, &s->maps) >= 5;
}

/* Runs a gateway on a cluster whose one seed is the stand-in answering
 * CLUSTER SLOTS with 'slots_fmt', its one %u the stand-in's own port if
 * 'self_in_map', else a port where nothing listens, until five maps were
 * asked for; returns its log (the caller's to free), and the connections
 * the stand-in took in '*accepted'. */
static char *
cluster_run(const char *slots_fmt, bool self_in_map, unsigned long *accepted)
{
    struct standin s;
    struct gw_rig g;
    char *slots, *log, *redis;

    standin_start(&s, "1:4:0:1000:0:0");
    slots =
        harness_strf(slots_fmt, self_in_map ? (unsigned)s.port
                                            : (unsigned)harness_free_port());
    s.slots = slots;
    redis = harness_strf("  cluster:\n"
                         "    nodes: ['127.0.0.1:%u']\n"
                         "  timeout: 500ms\n",
                         (unsigned)s.port);
    gw_rig_start(&g, redis, HOURLY);
    cr_assert(harness_wait_until(five_maps, &s, 20000),
              "the slot map was asked for %lu times; gateway log:\n%s",
              standin_count(&s, &s.maps), proc_log(&g.gw));
    *accepted = standin_count(&s, &s.accepted);
    log = proc_log(&g.gw);
    gw_rig_stop(&g);
    standin_stop(&s);
    free(slots);
    free(redis);
    return log;
}

/* Every slot on one primary, at port %u. */
#define ALL_SLOTS_AT                                                           \
    "*1\r\n*3\r\n:0\r\n:16383\r\n*3\r\n$9\r\n127.0.0.1\r\n:%u\r\n"             \
    "$40\r\n" ID40 "\r\n"
/* Half the slots on one primary, at port %u; the rest on none. */
#define HALF_SLOTS_AT                                                          \
    "*1\r\n*3\r\n:0\r\n:8191\r\n*3\r\n$9\r\n127.0.0.1\r\n:%u\r\n"              \
    "$40\r\n" ID40 "\r\n"
#define ID40 "0123456789012345678901234567890123456789"

/* While a cluster's only primary is out of reach, the map is asked for
 * every quarter of a second: of the seed, over one connection kept for
 * it, not over a new one each time. */
Test(bad_replies, a_seed_asked_while_no_primary_answers_keeps_its_connection,
     .timeout = 60)
{
    unsigned long accepted;
    char *log = cluster_run(ALL_SLOTS_AT, false, &accepted);

    cr_assert_leq(accepted, 2, "%lu connections for 5 maps:\n%s", accepted,
                  log);
    free(log);
}

/* Slots without a primary are warned of once, not at every refresh. */
Test(bad_replies, slots_without_a_primary_are_warned_of_once, .timeout = 60)
{
    unsigned long accepted;
    char *log = cluster_run(HALF_SLOTS_AT, true, &accepted);

    cr_assert_eq(harness_count(log, "slots have no primary"), 1, "%s", log);
    free(log);
}

/* ROLE's first word is compared whole: "master" and a NUL and more is not
 * a primary, whatever strcmp() would say. The stand-in is the sentinel
 * and the server it names. */
Test(bad_replies, a_role_that_only_starts_with_master_is_no_primary,
     .timeout = 60)
{
    static const char role[] = "*3\r\n$8\r\nmaster\0x\r\n:0\r\n*0\r\n";
    struct standin s;
    struct gw_rig g;
    char *redis;

    standin_start(&s, "1:4:0:1000:0:0");
    s.primary = s.port;
    s.role = role;
    s.role_len = sizeof(role) - 1;
    redis = sentinel_at(s.port);
    gw_rig_start(&g, redis, HOURLY);
    cr_assert(harness_wait_until(not_primary, &g.gw, 10000),
              "ROLE was not refused:\n%s", proc_log(&g.gw));
    cr_assert(!proc_log_contains(&g.gw, "redis: connected"),
              "taken for the primary:\n%s", proc_log(&g.gw));
    cr_assert_eq(standin_evals(&s), 0, "a script was called");
    gw_rig_stop(&g);
    standin_stop(&s);
    free(redis);
}
