/*
 * redis.cluster end to end: a Redis Cluster of three primaries and three
 * replicas (redis-server --cluster-enabled yes, joined by redis-cli
 * --cluster create) on free ports of loopback, the echo upstream and
 * gateways that find the primaries through the cluster's slot map. What
 * the gateways did is read from the client's side (statuses, exact
 * counts), from /metrics, and from the nodes themselves. The nodes want
 * a password, so the gateway's AUTH to each is tested too. Every wait is a
 * condition polled against a deadline.
 */
/* nftw(), to remove the nodes' directories. */
#define _XOPEN_SOURCE 700

#include <criterion/criterion.h>
#include <curl/curl.h>
#include <ftw.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

#define NNODES 6
/* With a seventh node joined by a test. */
#define MAX_NODES (NNODES + 1)
#define MAX_GATEWAYS 4
/* redis.timeout of the gateways where a test bounds the latency, and
 * what a request may take on top of it (the proxy and the echo, on a busy
 * or sanitized run). */
#define REDIS_TIMEOUT_MS 200
/* redis.timeout where a test counts decisions: a call past its timeout
 * counts as lost (a lease's grant too), and a loaded machine can take
 * 200 ms now and then. */
#define EXACT_TIMEOUT_MS 1000
#define MARGIN_MS 400
#define PW "pw-cluster"

struct rig {
    struct proc node[MAX_NODES];    /* the cluster's servers */
    uint16_t port[MAX_NODES];       /* their ports */
    uint16_t bus[MAX_NODES];        /* their cluster bus ports */
    bool killed[MAX_NODES];         /* stopped by the test */
    size_t nnodes;                  /* started */
    char dir[256];                  /* their directories' parent */
    struct proc echo;               /* the upstream */
    uint16_t echo_port;             /* its port */
    struct proc gw[MAX_GATEWAYS];   /* the gateways */
    uint16_t gw_port[MAX_GATEWAYS]; /* their ports */
    uint16_t admin[MAX_GATEWAYS];   /* their admin ports */
    char *gw_conf[MAX_GATEWAYS];    /* their configs; owned */
    size_t ngw;                     /* gateways started */
    unsigned timeout_ms;            /* redis.timeout of the gateways */
};

/* The test's rig (static storage: it outlives a failed assertion), for
 * rig_cleanup(); NULL before rig_init(). */
static struct rig *rig_live;

/* An empty rig whose gateways get a redis.timeout of 'timeout_ms'. */
static void
rig_init(struct rig *r, unsigned timeout_ms)
{
    memset(r, 0, sizeof(*r));
    r->timeout_ms = timeout_ms;
    rig_live = r;
}

/*
 * Talking to the nodes.
 */

/* A connection to 'port', authenticated; NULL if that failed. */
static redisContext *
sync_try(uint16_t port)
{
    return harness_redis_try(port, PW);
}

/* The reply to 'cmd' on 'port' as a new string ("" for a non-string,
 * NULL if the server did not answer). */
static char *
ask_text(uint16_t port, const char *cmd)
{
    return harness_redis_text(port, PW, cmd);
}

/* Runs 'cmd' on 'port' and asserts an OK. */
static void
must_ok(uint16_t port, const char *cmd)
{
    char *reply = ask_text(port, cmd);

    cr_assert(reply != NULL && strcmp(reply, "OK") == 0, "%s on %u: %s", cmd,
              (unsigned)port, reply != NULL ? reply : "no answer");
    free(reply);
}

/* True if ROLE's first element on 'port' is 'want'. */
static bool
role_is(uint16_t port, const char *want)
{
    return harness_redis_role_is(port, PW, want);
}

/* The port of the primary that the replica on 'port' follows, or 0. */
static uint16_t
primary_of(uint16_t port)
{
    redisContext *c = sync_try(port);
    redisReply *r;
    uint16_t p = 0;

    if (c == NULL) {
        return 0;
    }
    r = redisCommand(c, "ROLE");
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= 3 &&
        r->element[0]->type == REDIS_REPLY_STRING &&
        strcmp(r->element[0]->str, "slave") == 0 &&
        r->element[2]->type == REDIS_REPLY_INTEGER) {
        p = (uint16_t)r->element[2]->integer;
    }
    if (r != NULL) {
        freeReplyObject(r);
    }
    redisFree(c);
    return p;
}

/* Keys matching 'pattern' on 'port'. */
static size_t
keys_matching(uint16_t port, const char *pattern)
{
    return harness_redis_keys(port, PW, pattern);
}

/* The index of the primary holding a key matching 'pattern'; fails the
 * test if none does. */
static size_t
holder_of(const struct rig *r, const char *pattern)
{
    for (size_t i = 0; i < NNODES; i++) {
        if (!r->killed[i] && role_is(r->port[i], "master") &&
            keys_matching(r->port[i], pattern) > 0) {
            return i;
        }
    }
    cr_assert_fail("no primary holds %s", pattern);
    return 0;
}

/*
 * The cluster.
 */

static void
start_node(struct rig *r, size_t i)
{
    char port[8];
    char bus[8];
    char *dir = harness_strf("%s/n%zu", r->dir, i);
    char *argv[] = {
        "redis-server", "--port", port, "--bind", "127.0.0.1",
        "--cluster-enabled", "yes",
        /* Not port + 10000, which may be taken or past
         * 65535. */
        "--cluster-port", bus, "--requirepass", PW, "--masterauth", PW,
        "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "1000",
        /* A replica may take over however long it was cut
         * off: the test kills primaries at will. */
        "--cluster-replica-validity-factor", "0", "--dir", dir, "--save", "",
        "--appendonly", "no", "--shutdown-timeout", "0", NULL};

    cr_assert_eq(mkdir(dir, 0700), 0, "mkdir %s", dir);
    snprintf(port, sizeof(port), "%u", (unsigned)r->port[i]);
    snprintf(bus, sizeof(bus), "%u", (unsigned)r->bus[i]);
    cr_assert_eq(proc_start(&r->node[i], argv), 0, "cannot start redis-server");
    cr_assert(proc_wait_port(&r->node[i], r->port[i], 10000),
              "redis-server on %u:\n%s", (unsigned)r->port[i],
              proc_log(&r->node[i]));
    free(dir);
}

/* Every node says cluster_state:ok, and every replica is in sync. */
static bool
cluster_settled(void *arg)
{
    const struct rig *r = arg;

    for (size_t i = 0; i < r->nnodes; i++) {
        char *info;
        bool ok;

        if (r->killed[i]) {
            continue;
        }
        info = ask_text(r->port[i], "CLUSTER INFO");
        ok = info != NULL && strstr(info, "cluster_state:ok") != NULL;
        free(info);
        if (ok && role_is(r->port[i], "slave")) {
            info = ask_text(r->port[i], "INFO replication");
            ok = info != NULL && strstr(info, "master_link_status:up") != NULL;
            free(info);
        }
        if (!ok) {
            return false;
        }
    }
    return true;
}

/* The child 'arg' (a struct proc) has exited. */
static bool
proc_exited(void *arg)
{
    return !proc_running(arg);
}

/* Six nodes joined as three primaries with a replica each. */
static void
cluster_start(struct rig *r)
{
    const char *tmp = getenv("TMPDIR");
    char *argv[NNODES + 12];
    char *addr[NNODES];
    struct proc cli;
    size_t n = 0;
    int st;

    snprintf(r->dir, sizeof(r->dir), "%s/cluster-test-XXXXXX",
             tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
    cr_assert_not_null(mkdtemp(r->dir));
    for (size_t i = 0; i < NNODES; i++) {
        r->port[i] = harness_free_port();
        r->bus[i] = harness_free_port();
        start_node(r, i);
        r->nnodes++;
    }
    argv[n++] = "redis-cli";
    argv[n++] = "--cluster";
    argv[n++] = "create";
    for (size_t i = 0; i < NNODES; i++) {
        addr[i] = harness_strf("127.0.0.1:%u", (unsigned)r->port[i]);
        argv[n++] = addr[i];
    }
    argv[n++] = "--cluster-replicas";
    argv[n++] = "1";
    argv[n++] = "--cluster-yes";
    argv[n++] = "-a";
    argv[n++] = PW;
    argv[n++] = "--no-auth-warning";
    argv[n] = NULL;
    cr_assert_eq(proc_start(&cli, argv), 0, "cannot start redis-cli");
    {
        /* It exits by itself, or is killed; the log is gone after. */
        bool done = harness_wait_until(proc_exited, &cli, 60000);
        char *log = proc_log(&cli);

        st = proc_stop(&cli, SIGKILL, 1000);
        cr_assert(done, "redis-cli --cluster create still ran after 60 s:\n%s",
                  log);
        cr_assert_eq(st, 0, "redis-cli --cluster create:\n%s", log);
        free(log);
    }
    for (size_t i = 0; i < NNODES; i++) {
        free(addr[i]);
    }
    cr_assert(harness_wait_until(cluster_settled, r, 30000),
              "the cluster never settled");
}

static int
on_remove(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/*
 * After every test, passed or failed: what rig_stop() did not stop is
 * killed, and the nodes' directories removed.
 */
static void
rig_cleanup(void)
{
    struct rig *r = rig_live;

    if (r == NULL) {
        return;
    }
    for (size_t g = 0; g < r->ngw; g++) {
        proc_stop(&r->gw[g], SIGKILL, 5000);
        if (r->gw_conf[g] != NULL) {
            unlink(r->gw_conf[g]);
            free(r->gw_conf[g]);
            r->gw_conf[g] = NULL;
        }
    }
    proc_stop(&r->echo, SIGKILL, 5000);
    for (size_t i = 0; i < MAX_NODES; i++) {
        proc_stop(&r->node[i], SIGKILL, 5000);
    }
    if (r->dir[0] != '\0') {
        nftw(r->dir, on_remove, 8, FTW_DEPTH | FTW_PHYS);
        r->dir[0] = '\0';
    }
}

TestSuite(cluster_redis, .fini = rig_cleanup);

/*
 * Gateways.
 */

/*
 * Starts the echo (once) and gateway 'g' with a config of 'body' (the
 * limiters and routes), @ECHO@ standing for the echo, on 'workers'
 * workers, and waits until its /ready says the cluster is served.
 */
static void
gateway_add(struct rig *r, unsigned workers, const char *body)
{
    size_t g = r->ngw;
    /* The first seed listens nowhere: the map comes from the next. */
    char *nodes = harness_strf("'127.0.0.1:%u', '127.0.0.1:%u', '127.0.0.1:%u'",
                               (unsigned)harness_free_port(),
                               (unsigned)r->port[0], (unsigned)r->port[1]);
    char *echo = harness_strf("127.0.0.1:%u", (unsigned)r->echo_port);
    char *routes;
    char *yaml;

    if (r->echo_port == 0) {
        echo_start(&r->echo, &r->echo_port);
        free(echo);
        echo = harness_strf("127.0.0.1:%u", (unsigned)r->echo_port);
    }
    routes = harness_subst(body, "@ECHO@", echo);
    r->gw_port[g] = harness_free_port();
    r->admin[g] = harness_free_port();
    yaml = harness_strf("server:\n"
                        "  listen: 127.0.0.1:%u\n"
                        "  workers: %u\n"
                        "admin:\n"
                        "  listen: 127.0.0.1:%u\n"
                        "redis:\n"
                        "  cluster:\n"
                        "    nodes: [%s]\n"
                        "    password: " PW "\n"
                        "  timeout: %ums\n"
                        "%s",
                        (unsigned)r->gw_port[g], workers, (unsigned)r->admin[g],
                        nodes, r->timeout_ms, routes);
    r->gw_conf[g] = harness_write_temp(yaml);
    gateway_start(&r->gw[g], r->gw_conf[g], r->gw_port[g]);
    r->ngw++;
    free(yaml);
    free(routes);
    free(echo);
    free(nodes);
}

static long
admin_status(uint16_t port, const char *path)
{
    char *url = harness_strf("http://127.0.0.1:%u%s", (unsigned)port, path);
    struct http_response resp;
    long st;

    http_get(&resp, url, 5000);
    st = resp.status;
    http_response_free(&resp);
    free(url);
    return st;
}

static bool
all_ready(void *arg)
{
    const struct rig *r = arg;

    for (size_t g = 0; g < r->ngw; g++) {
        if (admin_status(r->admin[g], "/ready") != 200) {
            return false;
        }
    }
    return true;
}

static void
wait_ready(const struct rig *r)
{
    cr_assert(harness_wait_until(all_ready, (void *)r, 15000),
              "a gateway never became ready:\n%s", proc_log(&r->gw[0]));
}

/* The sum over the gateways of the sample 'series' of /metrics (the
 * series with its labels, as printed); 0 where it is absent. */
static long
metric(const struct rig *r, const char *series)
{
    long n = 0;

    for (size_t g = 0; g < r->ngw; g++) {
        char *url =
            harness_strf("http://127.0.0.1:%u/metrics", (unsigned)r->admin[g]);
        char *want = harness_strf("\n%s ", series);
        struct http_response resp;
        const char *p;

        http_get(&resp, url, 5000);
        p = resp.body != NULL ? strstr(resp.body, want) : NULL;
        if (p != NULL) {
            n += atol(p + strlen(want));
        }
        http_response_free(&resp);
        free(url);
        free(want);
    }
    return n;
}

static void
rig_stop(struct rig *r)
{
    int st[MAX_GATEWAYS];

    for (size_t g = 0; g < r->ngw; g++) {
        st[g] = proc_stop(&r->gw[g], SIGTERM, 15000);
        unlink(r->gw_conf[g]);
        free(r->gw_conf[g]);
        r->gw_conf[g] = NULL;
    }
    if (r->echo_port != 0) {
        proc_stop(&r->echo, SIGTERM, 5000);
    }
    for (size_t i = 0; i < r->nnodes; i++) {
        if (!r->killed[i]) {
            proc_stop(&r->node[i], SIGTERM, 5000);
        }
    }
    cr_assert_eq(nftw(r->dir, on_remove, 8, FTW_DEPTH | FTW_PHYS), 0,
                 "cannot remove %s", r->dir);
    r->dir[0] = '\0';
    for (size_t g = 0; g < r->ngw; g++) {
        cr_assert_eq(st[g], 0, "gateway %zu exited with %d", g, st[g]);
    }
}

/* One GET of 'path' on gateway 'g' with X-Key: 'key'; its status. */
static long
get_key(const struct rig *r, size_t g, const char *path, const char *key)
{
    char *url =
        harness_strf("http://127.0.0.1:%u%s", (unsigned)r->gw_port[g], path);
    char *hdr = harness_strf("X-Key: %s", key);
    const char *headers[] = {hdr, NULL};
    struct http_response resp;
    long st;

    http_request(&resp, "GET", url, headers, NULL, 0, 10000);
    st = resp.status;
    http_response_free(&resp);
    free(hdr);
    free(url);
    return st;
}

/*
 * Load from threads: each with a keep-alive connection, requests back to
 * back, with X-Key 'key' when set, else a fresh key per request.
 */
#define CLIENTS 6

struct under_load {
    const struct rig *r;       /* borrowed */
    const char *key;           /* borrowed, or NULL: fresh keys */
    atomic_bool stop;          /* set to end the clients */
    atomic_uint sent;          /* requests made */
    atomic_uint status[600];   /* by status; 0: no answer */
    _Atomic int64_t max_ms;    /* the slowest */
    pthread_t thread[CLIENTS]; /* the clients */
    unsigned id[CLIENTS];      /* their numbers */
};

static struct under_load load;

static size_t
on_discard(char *p, size_t size, size_t n, void *arg)
{
    (void)p;
    (void)arg;
    return size * n;
}

static void *
client_main(void *arg)
{
    unsigned id = *(unsigned *)arg;
    struct under_load *u = &load;
    CURL *h = curl_easy_init();
    char *url =
        harness_strf("http://127.0.0.1:%u/x", (unsigned)u->r->gw_port[0]);
    unsigned i = 0;

    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_discard);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    while (!atomic_load(&u->stop)) {
        char hdr[96];
        struct curl_slist *headers;
        int64_t t0 = harness_now_ms();
        int64_t ms, seen;
        long st = 0;

        if (u->key != NULL) {
            snprintf(hdr, sizeof(hdr), "X-Key: %s", u->key);
        } else {
            snprintf(hdr, sizeof(hdr), "X-Key: fresh-%u-%u", id, i++);
        }
        headers = curl_slist_append(NULL, hdr);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
        if (curl_easy_perform(h) == CURLE_OK) {
            curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
        }
        curl_slist_free_all(headers);
        ms = harness_now_ms() - t0;
        atomic_fetch_add(&u->sent, 1);
        atomic_fetch_add(&u->status[st > 0 && st < 600 ? st : 0], 1);
        seen = atomic_load(&u->max_ms);
        while (ms > seen &&
               !atomic_compare_exchange_weak(&u->max_ms, &seen, ms)) {
        }
    }
    curl_easy_cleanup(h);
    free(url);
    return NULL;
}

static void
load_start(const struct rig *r, const char *key)
{
    memset(&load, 0, sizeof(load));
    load.r = r;
    load.key = key;
    for (unsigned i = 0; i < CLIENTS; i++) {
        load.id[i] = i;
        cr_assert_eq(
            pthread_create(&load.thread[i], NULL, client_main, &load.id[i]), 0);
    }
}

static void
load_stop(void)
{
    atomic_store(&load.stop, true);
    for (unsigned i = 0; i < CLIENTS; i++) {
        pthread_join(load.thread[i], NULL);
    }
}

/* At least 'arg' more requests made since it was read. */
struct progress {
    unsigned from; /* load.sent then */
    unsigned more; /* wanted */
};

static bool
load_progressed(void *arg)
{
    const struct progress *p = arg;

    return atomic_load(&load.sent) >= p->from + p->more;
}

static void
wait_load(unsigned more)
{
    struct progress p = {atomic_load(&load.sent), more};

    cr_assert(harness_wait_until(load_progressed, &p, 20000),
              "the load stalled at %u requests", atomic_load(&load.sent));
}

/* What the load of one or more phases got. */
struct tally {
    unsigned sent;   /* requests */
    unsigned ok;     /* 200 */
    unsigned policy; /* 503: the failure policy */
    unsigned none;   /* no answer */
    int64_t max_ms;  /* the slowest */
};

/* Adds the load just stopped to 't'. */
static void
tally_add(struct tally *t)
{
    int64_t ms = atomic_load(&load.max_ms);

    t->sent += atomic_load(&load.sent);
    t->ok += atomic_load(&load.status[200]);
    t->policy += atomic_load(&load.status[503]);
    t->none += atomic_load(&load.status[0]);
    if (ms > t->max_ms) {
        t->max_ms = ms;
    }
}

/*
 * Every algorithm, many keys.
 */

#define ALGO_LIMITER(name, algo, rule)                                         \
    "  " name ": { algorithm: " algo ", " rule " }\n"
#define ALGO_ROUTE(name)                                                       \
    "  - id: " name "\n"                                                       \
    "    uri: http://@ECHO@\n"                                                 \
    "    predicates: [Path=/" name "]\n"                                       \
    "    filters:\n"                                                           \
    "      - name: RequestRateLimiter\n"                                       \
    "        args: { key: \"header:X-Key\", limiter: " name ",\n"              \
    "                on_redis_error: deny }\n"

#define ALGO_LIMIT 3
#define USERS 61 /* prime: with 6 routes, every pair comes up */
#define TRIES 5  /* per user and route */

static const char *const algo_paths[] = {"/fw", "/sw", "/swc",
                                         "/tb", "/lb", "/gcra"};

Test(cluster_redis, every_algorithm_decides_exactly_across_all_slots,
     .timeout = 120)
{
    static struct rig r;
    const char *urls[6];
    char *owned[6];
    const char *const *sets[USERS];
    char *hdr[USERS][2];
    struct load_result res;
    size_t total = 6 * USERS * TRIES;
    size_t holders = 0;

    rig_init(&r, EXACT_TIMEOUT_MS);
    cluster_start(&r);
    gateway_add(
        &r, 2,
        "limiters:\n" ALGO_LIMITER("fw", "fixed_window", "limit: 3, window: 1d")
            ALGO_LIMITER("sw", "sliding_window", "limit: 3, window: 1d")
                ALGO_LIMITER(
                    "swc", "sliding_window_counter",
                    "limit: 3, window: 1d") ALGO_LIMITER("tb", "token_bucket",
                                                         "rate: 3/d, burst: 3")
                    ALGO_LIMITER("lb", "leaky_bucket", "rate: 3/d, burst: 3")
                        ALGO_LIMITER(
                            "gcra", "gcra",
                            "rate: 3/d, burst: 3") "routes:\n" ALGO_ROUTE("fw")
                            ALGO_ROUTE("sw") ALGO_ROUTE("swc") ALGO_ROUTE("tb")
                                ALGO_ROUTE("lb") ALGO_ROUTE("gcra"));
    wait_ready(&r);
    for (size_t i = 0; i < 6; i++) {
        owned[i] = harness_strf("http://127.0.0.1:%u%s", (unsigned)r.gw_port[0],
                                algo_paths[i]);
        urls[i] = owned[i];
    }
    for (size_t u = 0; u < USERS; u++) {
        hdr[u][0] = harness_strf("X-Key: user-%zu", u);
        hdr[u][1] = NULL;
        sets[u] = (const char *const *)hdr[u];
    }
    http_load(urls, 6, sets, USERS, 16, total, 10000, &res);
    cr_assert_eq(res.errors, 0);
    cr_assert_eq(res.status[503], 0, "the failure policy answered");
    cr_assert_eq(res.status[200], 6 * USERS * ALGO_LIMIT, "admitted %zu of %zu",
                 res.status[200], total);
    cr_assert_eq(res.status[429], 6 * USERS * (TRIES - ALGO_LIMIT));
    /* The keys are spread: every primary holds some. */
    for (size_t i = 0; i < NNODES; i++) {
        if (role_is(r.port[i], "master")) {
            cr_assert_gt(keys_matching(r.port[i], "*:user-*"), 0,
                         "the primary on %u holds no key", r.port[i]);
            holders++;
        }
    }
    cr_assert_eq(holders, 3);
    for (size_t i = 0; i < 6; i++) {
        free(owned[i]);
    }
    for (size_t u = 0; u < USERS; u++) {
        free(hdr[u][0]);
    }
    rig_stop(&r);
}

/*
 * A slot migrated while its key is being decided.
 */

#define ONE_ROUTE(algo, rule, policy)                                          \
    "limiters:\n"                                                              \
    "  lim: { algorithm: " algo ", " rule " }\n"                               \
    "routes:\n"                                                                \
    "  - id: api\n"                                                            \
    "    uri: http://@ECHO@\n"                                                 \
    "    predicates: [Path=/**]\n"                                             \
    "    filters:\n"                                                           \
    "      - name: RequestRateLimiter\n"                                       \
    "        args: { key: \"header:X-Key\", limiter: lim,\n"                   \
    "                on_redis_error: " policy " }\n"

#define MIGRATE_LIMIT 100000

static char *
node_id(uint16_t port)
{
    char *id = ask_text(port, "CLUSTER MYID");

    cr_assert(id != NULL && strlen(id) == 40, "CLUSTER MYID on %u", port);
    return id;
}

struct metric_wait {
    const struct rig *r; /* borrowed */
    const char *series;  /* borrowed */
};

static bool
metric_positive(void *arg)
{
    const struct metric_wait *w = arg;

    return metric(w->r, w->series) > 0;
}

static void
wait_metric(const struct rig *r, const char *series)
{
    struct metric_wait w = {r, series};

    cr_assert(harness_wait_until(metric_positive, &w, 10000),
              "%s stayed 0; gateway log:\n%s", series, proc_log(&r->gw[0]));
}

/* The two keys (one per rule) matching 'pattern' on 'port', sorted, into
 * 'out' (new strings); fails the test if there are not two. */
static void
two_keys(uint16_t port, const char *pattern, char *out[2])
{
    redisContext *c = sync_try(port);
    redisReply *r;

    cr_assert_not_null(c);
    r = redisCommand(c, "KEYS %s", pattern);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2,
              "not two keys %s on %u", pattern, port);
    out[0] = strdup(r->element[0]->str);
    out[1] = strdup(r->element[1]->str);
    if (strcmp(out[0], out[1]) > 0) {
        char *t = out[0];

        out[0] = out[1];
        out[1] = t;
    }
    freeReplyObject(r);
    redisFree(c);
}

/* Moves 'key' from the node on 'from' to the one on 'to'. */
static void
migrate(uint16_t from, uint16_t to, const char *key)
{
    redisContext *c = sync_try(from);
    redisReply *rep;

    cr_assert_not_null(c);
    rep = redisCommand(c, "MIGRATE 127.0.0.1 %u %s 0 5000 AUTH %s KEYS %s",
                       (unsigned)to, "", PW, key);
    cr_assert(rep != NULL && rep->type == REDIS_REPLY_STATUS, "MIGRATE: %s",
              rep != NULL && rep->str != NULL ? rep->str : "?");
    freeReplyObject(rep);
    redisFree(c);
}

/* How many errors 'word' (TRYAGAIN, ASK...) the node on 'port' has
 * answered, from INFO errorstats. */
static long
errors_answered(uint16_t port, const char *word)
{
    char *info = ask_text(port, "INFO errorstats");
    char *stat = harness_strf("errorstat_%s:count=", word);
    const char *p = info != NULL ? strstr(info, stat) : NULL;
    long n = p != NULL ? atol(p + strlen(stat)) : 0;

    free(stat);
    free(info);
    return n;
}

struct error_wait {
    uint16_t port;    /* the node */
    const char *word; /* the error */
};

static bool
error_answered(void *arg)
{
    const struct error_wait *w = arg;

    return errors_answered(w->port, w->word) > 0;
}

/* The members of the sorted set 'key' on 'port'. */
static long long
zcard(uint16_t port, const char *key)
{
    redisContext *c = sync_try(port);
    redisReply *rep;
    long long n;

    cr_assert_not_null(c);
    rep = redisCommand(c, "ZCARD %s", key);
    cr_assert(rep != NULL && rep->type == REDIS_REPLY_INTEGER, "ZCARD %s: %s",
              key, rep != NULL && rep->str != NULL ? rep->str : "not a count");
    n = rep->integer;
    freeReplyObject(rep);
    redisFree(c);
    return n;
}

/*
 * The limiter has two rules, so each decision has two keys in one slot.
 * With the slot MIGRATING, one key moved and the other not yet, the
 * source answers TRYAGAIN; both moved, ASK; the slot given to the
 * target, MOVED. Requests go on throughout, and none may fail.
 */
Test(cluster_redis, slot_migrated_mid_run_asks_moves_and_loses_nothing,
     .timeout = 120)
{
    static struct rig r;
    size_t src = 0, dst = 0;
    char *key[2], *src_id, *dst_id, *cmd;
    struct error_wait tryagain;
    long long slot;
    redisContext *c;
    redisReply *rep;
    struct tally all = {0}, split = {0};

    rig_init(&r, REDIS_TIMEOUT_MS);
    cluster_start(&r);
    gateway_add(&r, 1,
                ONE_ROUTE("sliding_window",
                          "rules: [ { limit: 100000, window: 1d }, "
                          "{ limit: 200000, window: 2d } ]",
                          "deny"));
    wait_ready(&r);
    cr_assert_eq(get_key(&r, 0, "/x", "mig"), 200);
    src = holder_of(&r, "*:mig}*");
    for (size_t i = 0; i < NNODES; i++) {
        if (i != src && role_is(r.port[i], "master")) {
            dst = i;
            break;
        }
    }
    two_keys(r.port[src], "*:mig}*", key);
    c = sync_try(r.port[src]);
    cr_assert_not_null(c);
    rep = redisCommand(c, "CLUSTER KEYSLOT %s", key[0]);
    cr_assert(rep != NULL && rep->type == REDIS_REPLY_INTEGER);
    slot = rep->integer;
    freeReplyObject(rep);
    redisFree(c);
    src_id = node_id(r.port[src]);
    dst_id = node_id(r.port[dst]);

    load_start(&r, "mig");
    wait_load(50);
    cmd = harness_strf("CLUSTER SETSLOT %lld IMPORTING %s", slot, src_id);
    must_ok(r.port[dst], cmd);
    free(cmd);
    cmd = harness_strf("CLUSTER SETSLOT %lld MIGRATING %s", slot, dst_id);
    must_ok(r.port[src], cmd);
    free(cmd);
    wait_load(50);
    load_stop();
    tally_add(&all);
    /* One key gone: TRYAGAIN, retried within redis.timeout, until the
     * other goes too, as soon as the source has said it once. How long
     * that takes is the machine's doing: on a busy one, decisions of
     * this phase may run out of time and meet the failure policy, so
     * they are counted apart. */
    migrate(r.port[src], r.port[dst], key[0]);
    load_start(&r, "mig");
    tryagain.port = r.port[src];
    tryagain.word = "TRYAGAIN";
    cr_assert(harness_wait_until(error_answered, &tryagain, 5000),
              "the source never answered TRYAGAIN");
    /* Both gone, the slot still the source's: ASK. */
    migrate(r.port[src], r.port[dst], key[1]);
    wait_metric(&r, "sluice_redis_events_total{kind=\"tryagain\"}");
    load_stop();
    tally_add(&split);
    cr_assert_eq(split.ok + split.policy, split.sent,
                 "with TRYAGAIN: %u admitted, %u by the policy of %u", split.ok,
                 split.policy, split.sent);
    load_start(&r, "mig");
    wait_metric(&r, "sluice_redis_events_total{kind=\"ask\"}");
    wait_load(50);
    /* The slot goes: the source answers MOVED. */
    cmd = harness_strf("CLUSTER SETSLOT %lld NODE %s", slot, dst_id);
    must_ok(r.port[dst], cmd);
    must_ok(r.port[src], cmd);
    for (size_t i = 0; i < NNODES; i++) {
        if (i != src && i != dst && role_is(r.port[i], "master")) {
            must_ok(r.port[i], cmd);
        }
    }
    free(cmd);
    wait_metric(&r, "sluice_redis_events_total{kind=\"moved\"}");
    wait_load(50);
    load_stop();
    tally_add(&all);

    fprintf(stderr,
            "cluster: %u requests during the migration, %u admitted, "
            "slowest %lld ms; with TRYAGAIN %u requests, %u admitted; "
            "%ld TRYAGAIN, %ld ASK, %ld MOVED\n",
            all.sent, all.ok, (long long)all.max_ms, split.sent, split.ok,
            metric(&r, "sluice_redis_events_total{kind=\"tryagain\"}"),
            metric(&r, "sluice_redis_events_total{kind=\"ask\"}"),
            metric(&r, "sluice_redis_events_total{kind=\"moved\"}"));
    cr_assert_eq(all.ok, all.sent,
                 "not all admitted: %u 503, %u without answer", all.policy,
                 all.none);
    cr_assert_leq(all.max_ms, REDIS_TIMEOUT_MS + MARGIN_MS);
    cr_assert_leq(split.max_ms, REDIS_TIMEOUT_MS + MARGIN_MS);
    /* Nothing lost, nothing counted twice: each rule's set, on the new
     * owner, has one member per admission (and the first request and
     * the one below). */
    cr_assert_eq(get_key(&r, 0, "/x", "mig"), 200);
    for (size_t k = 0; k < 2; k++) {
        long long count = zcard(r.port[dst], key[k]);
        unsigned want = all.ok + split.ok + 2;

        cr_assert_eq(count, (long long)want,
                     "%s: %lld admissions recorded for %u", key[k], count,
                     want);
        free(key[k]);
    }
    cr_assert_eq(keys_matching(r.port[src], "*:mig}*"), 0);
    free(src_id);
    free(dst_id);
    rig_stop(&r);
}

/*
 * A slot imported by a primary that joined just now and holds no slot
 * yet: every decision goes there by ASK, and the maps installed
 * meanwhile (forced by MOVED on another slot) name it nowhere. Its
 * connection must outlive them while calls are on it.
 */

struct knows {
    uint16_t port;  /* the node asked */
    const char *id; /* the node it should know, connected */
};

static bool
node_known(void *arg)
{
    const struct knows *k = arg;
    char *nodes = ask_text(k->port, "CLUSTER NODES");
    const char *line = nodes != NULL ? strstr(nodes, k->id) : NULL;
    const char *end = line != NULL ? strchr(line, '\n') : NULL;
    bool ok = line != NULL && end != NULL;

    if (ok) {
        char *l = strndup(line, (size_t)(end - line));

        ok = strstr(l, "handshake") == NULL && strstr(l, "noaddr") == NULL &&
             strstr(l, " connected") != NULL;
        free(l);
    }
    free(nodes);
    return ok;
}

/* The slot of 'key', asked of the node on 'port'. */
static long long
key_slot(uint16_t port, const char *key)
{
    redisContext *c = sync_try(port);
    redisReply *rep;
    long long slot;

    cr_assert_not_null(c);
    rep = redisCommand(c, "CLUSTER KEYSLOT %s", key);
    cr_assert(rep != NULL && rep->type == REDIS_REPLY_INTEGER);
    slot = rep->integer;
    freeReplyObject(rep);
    redisFree(c);
    return slot;
}

/* Moves the empty 'slot' from the primary on 'from' to the one on 'to',
 * telling the primaries 'masters' (ports, 'n' of them). */
static void
move_empty_slot(long long slot, uint16_t from, uint16_t to,
                const uint16_t *masters, size_t n)
{
    char *from_id = node_id(from), *to_id = node_id(to);
    char *cmd =
        harness_strf("CLUSTER SETSLOT %lld IMPORTING %s", slot, from_id);

    must_ok(to, cmd);
    free(cmd);
    cmd = harness_strf("CLUSTER SETSLOT %lld MIGRATING %s", slot, to_id);
    must_ok(from, cmd);
    free(cmd);
    cmd = harness_strf("CLUSTER SETSLOT %lld NODE %s", slot, to_id);
    must_ok(to, cmd);
    must_ok(from, cmd);
    for (size_t i = 0; i < n; i++) {
        if (masters[i] != from && masters[i] != to) {
            must_ok(masters[i], cmd);
        }
    }
    free(cmd);
    free(from_id);
    free(to_id);
}

struct moved_more {
    const struct rig *r; /* borrowed */
    long than;           /* MOVED followed before */
};

/* One request for 'force' (whose slot just moved) has been redirected. */
static bool
moved_after(void *arg)
{
    const struct moved_more *m = arg;

    return metric(m->r, "sluice_redis_events_total{kind=\"moved\"}") > m->than;
}

/* The one key matching 'pattern' on 'port', as a new string; fails the
 * test if there is not exactly one. */
static char *
only_key(uint16_t port, const char *pattern)
{
    redisContext *c = sync_try(port);
    redisReply *rep;
    char *key;

    cr_assert_not_null(c);
    rep = redisCommand(c, "KEYS %s", pattern);
    cr_assert(rep != NULL && rep->type == REDIS_REPLY_ARRAY &&
                  rep->elements == 1,
              "not one key %s on %u", pattern, (unsigned)port);
    key = strdup(rep->element[0]->str);
    freeReplyObject(rep);
    redisFree(c);
    return key;
}

/* Asserts that DEL 'key' on 'port' deleted it. */
static void
must_del(uint16_t port, const char *key)
{
    redisContext *c = sync_try(port);
    redisReply *rep;

    cr_assert_not_null(c);
    rep = redisCommand(c, "DEL %s", key);
    cr_assert(rep != NULL && rep->type == REDIS_REPLY_INTEGER &&
                  rep->integer == 1,
              "DEL %s on %u", key, (unsigned)port);
    freeReplyObject(rep);
    redisFree(c);
}

#define JOIN_ROUNDS 4

Test(cluster_redis, a_new_primary_importing_a_slot_keeps_its_calls,
     .timeout = 90)
{
    static struct rig r;
    uint16_t masters[NNODES];
    size_t nmasters = 0, src, nn = NNODES;
    char *key, *force_key, *src_id, *new_id, *cmd;
    long long slot, force_slot;
    uint16_t a, b = 0;
    struct knows k;
    unsigned sent, ok;

    rig_init(&r, EXACT_TIMEOUT_MS);
    cluster_start(&r);
    gateway_add(
        &r, 1,
        ONE_ROUTE("sliding_window", "limit: 100000, window: 1d", "deny"));
    wait_ready(&r);
    for (size_t i = 0; i < NNODES; i++) {
        if (role_is(r.port[i], "master")) {
            masters[nmasters++] = r.port[i];
        }
    }
    cr_assert_eq(nmasters, 3);
    cr_assert_eq(get_key(&r, 0, "/x", "join"), 200);
    src = holder_of(&r, "*:join}*");
    key = only_key(r.port[src], "*:join}*");
    slot = key_slot(r.port[src], key);
    /* Another key's slot, emptied: it moves between two primaries to
     * force MOVED, and so map refreshes. */
    cr_assert_eq(get_key(&r, 0, "/x", "force"), 200);
    a = r.port[holder_of(&r, "*:force}*")];
    force_key = only_key(a, "*:force}*");
    force_slot = key_slot(a, force_key);
    cr_assert_neq(force_slot, slot, "pick another key than force");
    must_del(a, force_key);
    for (size_t i = 0; i < nmasters; i++) {
        if (masters[i] != a && (b == 0 || masters[i] != r.port[src])) {
            b = masters[i];
        }
    }

    /* The seventh node joins, empty. */
    r.port[nn] = harness_free_port();
    r.bus[nn] = harness_free_port();
    start_node(&r, nn);
    r.nnodes++;
    cmd = harness_strf("CLUSTER MEET 127.0.0.1 %u %u", (unsigned)r.port[nn],
                       (unsigned)r.bus[nn]);
    must_ok(r.port[src], cmd);
    free(cmd);
    src_id = node_id(r.port[src]);
    new_id = node_id(r.port[nn]);
    k.port = r.port[src];
    k.id = new_id;
    cr_assert(harness_wait_until(node_known, &k, 15000),
              "the new node never joined");
    k.port = r.port[nn];
    k.id = src_id;
    cr_assert(harness_wait_until(node_known, &k, 15000),
              "the new node never met the source");
    cr_assert(harness_wait_until(cluster_settled, &r, 15000),
              "the new node never learned the slots");

    /* The slot starts moving there, its key first: every decision is
     * asked of the new node, after ASK. */
    cmd = harness_strf("CLUSTER SETSLOT %lld IMPORTING %s", slot, src_id);
    must_ok(r.port[nn], cmd);
    free(cmd);
    cmd = harness_strf("CLUSTER SETSLOT %lld MIGRATING %s", slot, new_id);
    must_ok(r.port[src], cmd);
    free(cmd);
    migrate(r.port[src], r.port[nn], key);

    load_start(&r, "join");
    wait_load(50);
    wait_metric(&r, "sluice_redis_events_total{kind=\"ask\"}");
    /* Maps without the new node, installed while calls are on it. */
    for (unsigned round = 0; round < JOIN_ROUNDS; round++) {
        struct moved_more m = {
            &r, metric(&r, "sluice_redis_events_total{kind=\"moved\"}")};
        uint16_t t;

        move_empty_slot(force_slot, a, b, masters, nmasters);
        cr_assert_eq(get_key(&r, 0, "/x", "force"), 200);
        cr_assert(harness_wait_until(moved_after, &m, 5000),
                  "no MOVED for the moved slot");
        must_del(b, force_key);
        t = a;
        a = b;
        b = t;
        wait_load(30);
    }
    load_stop();

    sent = atomic_load(&load.sent);
    ok = atomic_load(&load.status[200]);
    fprintf(stderr,
            "cluster: %u requests while a new primary imported a slot, "
            "%u admitted, %ld ASK, %ld MOVED\n",
            sent, ok, metric(&r, "sluice_redis_events_total{kind=\"ask\"}"),
            metric(&r, "sluice_redis_events_total{kind=\"moved\"}"));
    cr_assert_eq(ok, sent, "not all admitted: %u 503, %u without answer",
                 atomic_load(&load.status[503]), atomic_load(&load.status[0]));
    free(key);
    free(force_key);
    free(src_id);
    free(new_id);
    rig_stop(&r);
}

/*
 * A primary killed.
 */

#define FAILOVER_LIMIT 20

struct replaced {
    const struct rig *r; /* borrowed */
    size_t replica;      /* the node that should take over */
};

static bool
replica_promoted(void *arg)
{
    const struct replaced *w = arg;

    return role_is(w->r->port[w->replica], "master");
}

/* The gauges of one single-worker gateway: the three primaries up. */
static bool
three_up_none_down(void *arg)
{
    const struct rig *r = arg;

    return metric(r, "sluice_redis_nodes{state=\"up\"}") == 3 &&
           metric(r, "sluice_redis_nodes{state=\"down\"}") == 0;
}

Test(cluster_redis, killed_primary_is_replaced_and_counting_resumes,
     .timeout = 150)
{
    static struct rig r;
    size_t victim, replica = NNODES;
    struct replaced w;
    unsigned sent, ok, policy;
    char key[64];
    size_t tries = 0;
    unsigned admitted = 0, refused = 0;

    rig_init(&r, REDIS_TIMEOUT_MS);
    cluster_start(&r);
    gateway_add(&r, 1,
                ONE_ROUTE("sliding_window", "limit: 20, window: 1d", "deny"));
    wait_ready(&r);
    cr_assert_eq(get_key(&r, 0, "/x", "victim"), 200);
    victim = holder_of(&r, "*:victim}*");
    for (size_t i = 0; i < NNODES; i++) {
        if (primary_of(r.port[i]) == r.port[victim]) {
            replica = i;
        }
    }
    cr_assert_neq(replica, NNODES, "no replica of the primary on %u",
                  r.port[victim]);

    load_start(&r, NULL);
    wait_load(100);
    proc_stop(&r.node[victim], SIGKILL, 5000);
    r.killed[victim] = true;
    w.r = &r;
    w.replica = replica;
    cr_assert(harness_wait_until(replica_promoted, &w, 30000),
              "the replica on %u was never promoted", r.port[replica]);
    wait_ready(&r);
    wait_load(200);
    load_stop();

    sent = atomic_load(&load.sent);
    ok = atomic_load(&load.status[200]);
    policy = atomic_load(&load.status[503]);
    fprintf(stderr,
            "cluster: %u requests during the failover: %u decided, %u by "
            "the failure policy, slowest %lld ms, %ld CLUSTERDOWN\n",
            sent, ok, policy, (long long)atomic_load(&load.max_ms),
            metric(&r, "sluice_redis_events_total{kind=\"clusterdown\"}"));
    cr_assert_eq(ok + policy, sent, "other statuses (%u without an answer)",
                 atomic_load(&load.status[0]));
    cr_assert_gt(policy, 0, "no request met the failure policy");
    cr_assert_leq(atomic_load(&load.max_ms), REDIS_TIMEOUT_MS + MARGIN_MS,
                  "a request waited %lld ms",
                  (long long)atomic_load(&load.max_ms));
    wait_metric(&r, "sluice_redis_events_total{kind=\"failover\"}");
    cr_assert(harness_wait_until(three_up_none_down, &r, 5000),
              "sluice_redis_nodes: %ld up, %ld down",
              metric(&r, "sluice_redis_nodes{state=\"up\"}"),
              metric(&r, "sluice_redis_nodes{state=\"down\"}"));

    /* A fresh key of the new primary's counts exactly. */
    for (bool there = false; !there;) {
        char *pattern;

        cr_assert_lt(tries, 200);
        snprintf(key, sizeof(key), "after-%zu", tries++);
        cr_assert_eq(get_key(&r, 0, "/x", key), 200);
        pattern = harness_strf("*:%s}*", key);
        there = keys_matching(r.port[replica], pattern) > 0;
        free(pattern);
    }
    admitted = 1;
    for (size_t i = 0; i < FAILOVER_LIMIT + 5; i++) {
        long st = get_key(&r, 0, "/x", key);

        cr_assert(st == 200 || st == 429, "status %ld", st);
        admitted += st == 200;
        refused += st == 429;
    }
    cr_assert_eq(admitted, FAILOVER_LIMIT);
    cr_assert_eq(refused, FAILOVER_LIMIT + 5 + 1 - FAILOVER_LIMIT);
    rig_stop(&r);
}

/*
 * The over-limit cache after a failover: the promoted replica may have
 * lost what its primary counted (replication is asynchronous), so
 * refusals remembered from the old primary must go.
 */

struct failover_probe {
    const struct rig *r; /* borrowed */
    unsigned n;          /* probes sent */
};

/* A failover counted; a request for a fresh key each time, so that a
 * lost primary is noticed at once (its keys get REDIS_CALL_DOWN). */
static bool
failover_seen(void *arg)
{
    struct failover_probe *p = arg;
    char key[32];

    snprintf(key, sizeof(key), "probe-%u", p->n++);
    (void)get_key(p->r, 0, "/x", key);
    return metric(p->r, "sluice_redis_events_total{kind=\"failover\"}") > 0;
}

Test(cluster_redis, a_failover_clears_the_over_limit_cache, .timeout = 120)
{
    static struct rig r;
    size_t victim, replica = NNODES;
    struct replaced w;
    struct failover_probe probe;

    rig_init(&r, EXACT_TIMEOUT_MS);
    cluster_start(&r);
    gateway_add(&r, 1,
                ONE_ROUTE("fixed_window", "limit: 2, window: 1d", "deny"));
    wait_ready(&r);
    cr_assert_eq(get_key(&r, 0, "/x", "dc"), 200);
    cr_assert_eq(get_key(&r, 0, "/x", "dc"), 200);
    cr_assert_eq(get_key(&r, 0, "/x", "dc"), 429);
    /* Remembered: the next refusal comes from the cache. */
    cr_assert_eq(get_key(&r, 0, "/x", "dc"), 429);
    cr_assert_gt(metric(&r, "sluice_ratelimit_deny_cache_hits_total"), 0,
                 "the over-limit cache is not in play");
    victim = holder_of(&r, "*:dc}*");
    for (size_t i = 0; i < NNODES; i++) {
        if (primary_of(r.port[i]) == r.port[victim]) {
            replica = i;
        }
    }
    cr_assert_neq(replica, NNODES, "no replica of the primary on %u",
                  r.port[victim]);

    proc_stop(&r.node[victim], SIGKILL, 5000);
    r.killed[victim] = true;
    w.r = &r;
    w.replica = replica;
    cr_assert(harness_wait_until(replica_promoted, &w, 30000),
              "the replica on %u was never promoted", r.port[replica]);
    probe.r = &r;
    probe.n = 0;
    cr_assert(harness_wait_until(failover_seen, &probe, 20000),
              "the gateway never counted the failover");
    wait_ready(&r);
    /* The count lost with the old primary: the new one admits again. */
    if (keys_matching(r.port[replica], "*:dc}*") > 0) {
        char *key = only_key(r.port[replica], "*:dc}*");

        must_del(r.port[replica], key);
        free(key);
    }
    cr_assert_eq(get_key(&r, 0, "/x", "dc"), 200,
                 "refused from the cache of the old primary's count");
    rig_stop(&r);
}

/*
 * One budget across gateways.
 */

/* The clock of the node on 'port', in seconds. */
static long long
server_seconds(uint16_t port)
{
    redisContext *c = sync_try(port);
    redisReply *rep;
    long long s;

    cr_assert_not_null(c);
    rep = redisCommand(c, "TIME");
    cr_assert(rep != NULL && rep->type == REDIS_REPLY_ARRAY &&
              rep->elements == 2);
    s = atoll(rep->element[0]->str);
    freeReplyObject(rep);
    redisFree(c);
    return s;
}

Test(cluster_redis, four_gateways_share_one_fixed_window_exactly,
     .timeout = 150)
{
    static struct rig r;
    struct load_result res;
    const char *urls[MAX_GATEWAYS];
    char *owned[MAX_GATEWAYS];
    long long before, after;

    rig_init(&r, EXACT_TIMEOUT_MS);
    cluster_start(&r);
    for (size_t g = 0; g < MAX_GATEWAYS; g++) {
        gateway_add(&r, 1,
                    "limiters:\n"
                    "  shared: { algorithm: fixed_window, limit: 500, "
                    "window: 1h }\n"
                    "routes:\n"
                    "  - id: api\n"
                    "    uri: http://@ECHO@\n"
                    "    predicates: [Path=/**]\n"
                    "    filters:\n"
                    "      - name: RequestRateLimiter\n"
                    "        args: { key: route, limiter: shared,\n"
                    "                on_redis_error: deny }\n");
        owned[g] =
            harness_strf("http://127.0.0.1:%u/api", (unsigned)r.gw_port[g]);
        urls[g] = owned[g];
    }
    wait_ready(&r);
    before = server_seconds(r.port[0]);
    http_load(urls, MAX_GATEWAYS, NULL, 0, 200, 2000, 10000, &res);
    after = server_seconds(r.port[0]);
    if (before / 3600 != after / 3600) {
        rig_stop(&r);
        cr_skip_test("the load straddled a window boundary");
    }
    cr_assert_eq(res.errors, 0);
    cr_assert_eq(res.status[503], 0, "the failure policy answered");
    cr_assert_eq(res.status[200], 500, "admitted %zu of 2000", res.status[200]);
    cr_assert_eq(res.status[429], 1500);
    for (size_t g = 0; g < MAX_GATEWAYS; g++) {
        free(owned[g]);
    }
    rig_stop(&r);
}

/*
 * Leases on a hot key, through the cluster: the takes and returns are
 * script calls of the key's slot like any decision.
 */

#define HOT_LIMIT 3000

struct hot_poll {
    const struct rig *r; /* the gateways */
    size_t next;         /* the gateway the next request goes to */
    size_t admitted;     /* 200s so far */
    size_t want;         /* stop once this many are admitted */
};

/* One request, to the gateways in turn; true once 'want' are admitted. */
static bool
hot_admit_one(void *arg)
{
    struct hot_poll *hp = arg;
    size_t g = hp->next++ % hp->r->ngw;
    char *u =
        harness_strf("http://127.0.0.1:%u/hot", (unsigned)hp->r->gw_port[g]);
    struct http_response resp;

    http_request(&resp, "GET", u, NULL, NULL, 0, 10000);
    cr_assert(resp.status == 200 || resp.status == 429, "status %ld",
              resp.status);
    hp->admitted += resp.status == 200;
    http_response_free(&resp);
    free(u);
    return hp->admitted >= hp->want;
}

/* EVALSHA and EVAL calls the primaries have run. */
static long
script_calls(const struct rig *r)
{
    long n = 0;

    for (size_t i = 0; i < NNODES; i++) {
        char *info;

        if (r->killed[i] || !role_is(r->port[i], "master")) {
            continue;
        }
        info = ask_text(r->port[i], "INFO commandstats");
        for (size_t k = 0; info != NULL && k < 2; k++) {
            const char *stat =
                k == 0 ? "cmdstat_evalsha:calls=" : "cmdstat_eval:calls=";
            const char *p = strstr(info, stat);

            n += p != NULL ? atol(p + strlen(stat)) : 0;
        }
        free(info);
    }
    return n;
}

Test(cluster_redis, four_gateways_with_leases_on_a_hot_key_stay_exact,
     .timeout = 150)
{
    static struct rig r;
    struct load_result res;
    const char *urls[MAX_GATEWAYS];
    char *owned[MAX_GATEWAYS];
    struct hot_poll hp;
    size_t admitted;
    long before, calls;

    rig_init(&r, EXACT_TIMEOUT_MS);
    cluster_start(&r);
    for (size_t g = 0; g < MAX_GATEWAYS; g++) {
        /* Burst HOT_LIMIT, refilled 1000 a day: under one unit (86.4 s)
         * in the test. */
        gateway_add(&r, 1,
                    "limiters:\n"
                    "  hot: { algorithm: token_bucket, rate: 1000/d, "
                    "burst: 3000, lease: 100 }\n"
                    "routes:\n"
                    "  - id: api\n"
                    "    uri: http://@ECHO@\n"
                    "    predicates: [Path=/**]\n"
                    "    filters:\n"
                    "      - name: RequestRateLimiter\n"
                    "        args: { key: route, limiter: hot,\n"
                    "                on_redis_error: deny }\n");
        owned[g] =
            harness_strf("http://127.0.0.1:%u/hot", (unsigned)r.gw_port[g]);
        urls[g] = owned[g];
    }
    wait_ready(&r);
    before = script_calls(&r);
    /* Past the limit under load: never over it. */
    http_load(urls, MAX_GATEWAYS, NULL, 0, 800, 4000, 20000, &res);
    cr_assert_eq(res.errors, 0);
    cr_assert_eq(res.status[503], 0, "the failure policy answered");
    admitted = res.status[200];
    cr_assert_leq(admitted, HOT_LIMIT, "admitted %zu of %d", admitted,
                  HOT_LIMIT);
    /* The units still on lease come back and are admitted too: the limit
     * exactly, and not one more, from any gateway. */
    hp = (struct hot_poll){&r, 0, admitted, HOT_LIMIT};
    cr_assert(harness_wait_until(hot_admit_one, &hp, 20000),
              "%zu admitted in all; %d expected", hp.admitted, HOT_LIMIT);
    for (size_t i = 0; i < 8; i++) {
        hp.want = hp.admitted + 1;
        cr_assert_not(hot_admit_one(&hp), "admitted past the limit");
    }
    calls = script_calls(&r) - before;
    fprintf(stderr,
            "cluster: leases: %zu admitted under load, %ld script calls "
            "for %d admitted\n",
            admitted, calls, HOT_LIMIT);
    cr_assert_leq(calls * 10, HOT_LIMIT, "%ld Redis calls for %d admitted",
                  calls, HOT_LIMIT);
    for (size_t g = 0; g < MAX_GATEWAYS; g++) {
        free(owned[g]);
    }
    rig_stop(&r);
}

/*
 * A Spring Cloud Gateway file whose spring.redis.cluster.nodes name the
 * cluster: its redis-rate-limiter decides exactly for callers spread over
 * the slots. One request costs 60 tokens of a bucket of 180 refilled at
 * 1 a second, so each user has 3 and no more within the test.
 */
#define SCG_USERS 30
#define SCG_TRIES 5
#define SCG_WORKERS 2

/* A request from a user of its own, then every worker's three primaries
 * up (the gauge is summed over the workers: 3 alone may be one worker
 * connected and the other not yet). */
static bool
scg_all_primaries_up(void *arg)
{
    const struct rig *r = arg;
    char *url = harness_strf("http://127.0.0.1:%u/x?user=warm",
                             (unsigned)r->gw_port[0]);
    struct http_response resp;

    http_get(&resp, url, 5000);
    http_response_free(&resp);
    free(url);
    return metric(r, "sluice_redis_nodes{state=\"up\"}") == 3 * SCG_WORKERS &&
           metric(r, "sluice_redis_nodes{state=\"down\"}") == 0;
}

Test(cluster_redis, a_spring_file_limits_through_the_cluster, .timeout = 120)
{
    static struct rig r;
    const char *urls[SCG_USERS];
    char *owned[SCG_USERS];
    struct load_result res;
    struct http_response resp;
    char *yaml;

    rig_init(&r, EXACT_TIMEOUT_MS);
    cluster_start(&r);
    echo_start(&r.echo, &r.echo_port);
    r.gw_port[0] = harness_free_port();
    r.admin[0] = harness_free_port();
    yaml =
        harness_strf("sluice:\n"
                     "  server: { workers: %u }\n"
                     "  admin: { listen: 127.0.0.1:%u }\n"
                     "server:\n"
                     "  port: %u\n"
                     "spring:\n"
                     "  redis:\n"
                     "    password: " PW "\n"
                     "    timeout: %u\n"
                     "    cluster:\n"
                     "      nodes: 127.0.0.1:%u, 127.0.0.1:%u\n"
                     "  cloud:\n"
                     "    gateway:\n"
                     "      routes:\n"
                     "        - id: api\n"
                     "          uri: http://127.0.0.1:%u/**\n"
                     "          predicates: [Path=/**]\n"
                     "          filters:\n"
                     "            - name: RequestRateLimiter\n"
                     "              args:\n"
                     "                key-resolver: \"#{@userKeyResolver}\"\n"
                     "                redis-rate-limiter.replenishRate: 1\n"
                     "                redis-rate-limiter.requestedTokens: 60\n"
                     "                redis-rate-limiter.burstCapacity: 180\n",
                     (unsigned)SCG_WORKERS, (unsigned)r.admin[0],
                     (unsigned)r.gw_port[0], r.timeout_ms, (unsigned)r.port[0],
                     (unsigned)r.port[1], (unsigned)r.echo_port);
    r.gw_conf[0] = harness_write_temp(yaml);
    free(yaml);
    gateway_start(&r.gw[0], r.gw_conf[0], r.gw_port[0]);
    r.ngw = 1;
    wait_ready(&r);
    /* /ready holds once a seed answers; decisions before the worker
     * reaches every primary would fall back to the local twin. */
    cr_assert(harness_wait_until(scg_all_primaries_up, &r, 15000),
              "the workers never reached the three primaries");
    for (size_t u = 0; u < SCG_USERS; u++) {
        owned[u] = harness_strf("http://127.0.0.1:%u/x?user=u%zu",
                                (unsigned)r.gw_port[0], u);
        urls[u] = owned[u];
    }
    http_load(urls, SCG_USERS, NULL, 0, 8, SCG_USERS * SCG_TRIES, 10000, &res);
    cr_assert_eq(res.errors, 0);
    cr_assert_eq(res.status[503], 0, "the failure policy answered");
    cr_assert_eq(res.status[200], SCG_USERS * 3, "admitted %zu",
                 res.status[200]);
    cr_assert_eq(res.status[429], SCG_USERS * (SCG_TRIES - 3));
    http_request(&resp, "GET", urls[0], NULL, NULL, 0, 10000);
    cr_assert_eq(resp.status, 429);
    {
        char *v = http_response_header(&resp, "X-RateLimit-Burst-Capacity");

        cr_assert(v != NULL && strcmp(v, "180") == 0, "%s", resp.headers);
        free(v);
    }
    http_response_free(&resp);
    for (size_t u = 0; u < SCG_USERS; u++) {
        free(owned[u]);
    }
    rig_stop(&r);
}
