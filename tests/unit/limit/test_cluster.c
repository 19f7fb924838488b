#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

#include "cluster.h"
#include "config.h"
#include "headers.h"
#include "limit.h"
#include "netaddr.h"
#include "ratekey.h"
#include "scriptcall.h"
#include "xmalloc.h"

static unsigned
slot_of(const char *key)
{
    return cluster_slot(key, strlen(key));
}

/* The check value of CRC16/XMODEM, which the Redis Cluster specification
 * gives for its CRC16: CRC16("123456789") = 0x31C3 (< 16384, so it is
 * the slot too). */
Test(cluster, slot_is_the_crc16_of_the_specification)
{
    cr_assert_eq(slot_of("123456789"), 0x31C3);
}

/* The examples of the specification's "Hash tags" section. */
Test(cluster, hash_tags_follow_the_specification_examples)
{
    cr_assert_eq(slot_of("{user1000}.following"),
                 slot_of("{user1000}.followers"));
    cr_assert_eq(slot_of("{user1000}.following"), slot_of("user1000"));
    /* "{}" is no tag: the whole key is hashed, not "bar". */
    cr_assert_neq(slot_of("foo{}{bar}"), slot_of("bar"));
    cr_assert_neq(slot_of("foo{}{bar}"), slot_of("{bar}"));
    /* The tag ends at the first '}' after the first '{'. */
    cr_assert_eq(slot_of("foo{{bar}}zap"), slot_of("{bar"));
    cr_assert_eq(slot_of("foo{bar}{zap}"), slot_of("bar"));
}

/*
 * What Redis 7.0.15 answers: `redis-cli -p PORT CLUSTER KEYSLOT KEY` on a
 * server started with `redis-server --port PORT --cluster-enabled yes`
 * (a server without cluster support refuses the command). The binary key
 * went through `printf 'x\377y\000z' | redis-cli -p PORT -x CLUSTER
 * KEYSLOT`.
 */
Test(cluster, slots_are_those_redis_computes)
{
    static const struct {
        const char *key;
        unsigned slot;
    } known[] = {
        {"123456789", 12739},
        {"{user1000}.following", 3443},
        {"user1000", 3443},
        {"foo{}{bar}", 8363},
        {"foo{{bar}}zap", 4015},
        {"{bar", 4015},
        {"foo{bar}{zap}", 5061},
        {"bar", 5061},
        {"", 0},
        {"a", 15495},
        {"foo", 12182},
        {"{", 4092},
        {"}", 12090},
        {"{}", 15257},
        {"{}a", 10875},
        {"a{b", 13340},
        {"a}b{c}", 7365},
        {"sluice:l:abc123:{r:ip:192.0.2.1}:0", 10341},
        {"sluice:l:abc123:{r:ip:192.0.2.1}:7", 10341},
    };

    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
        cr_expect_eq(slot_of(known[i].key), known[i].slot, "%s: %u, not %u",
                     known[i].key, slot_of(known[i].key), known[i].slot);
    }
    cr_assert_eq(cluster_slot("x\377y\000z", 5), 3404);
}

Test(cluster, slot_reads_len_bytes_not_up_to_a_nul)
{
    /* "foo{bar}" cut before the '}': no tag, so the hash of "foo{bar". */
    cr_assert_eq(cluster_slot("foo{bar}", 7), slot_of("foo{bar"));
    cr_assert_neq(cluster_slot("foo{bar}", 7), slot_of("bar"));
    cr_assert_eq(cluster_slot("123456789xyz", 9), 12739);
}

/* The keys of one decision, built as ratelimit.c builds them. */
static struct config *cfg;

static void
teardown(void)
{
    config_unref(cfg);
    cfg = NULL;
}

/* The key base of the only tier of a route "r" for a client 'ip' with
 * the header fields 'hdr' (name, value pairs, NULL-ended). */
static void
key_base(const char *key_args, const char *ip, const char *const *hdr,
         char *buf)
{
    struct config_errors e;
    const struct rate_limit_conf *rl;
    struct netaddr addr;
    struct headers h;
    struct caller who;
    char *yaml = xasprintf("limiters: {l: {algorithm: gcra, rate: 1/s}}\n"
                           "routes:\n"
                           "  - id: r\n"
                           "    uri: http://x\n"
                           "    filters:\n"
                           "      - name: RequestRateLimiter\n"
                           "        args: %s\n",
                           key_args);

    config_errors_init(&e);
    cfg = config_parse(yaml, strlen(yaml), "t.yaml", &e);
    cr_assert_not_null(cfg, "%s", e.n > 0 ? e.v[0] : "");
    config_errors_deinit(&e);
    free(yaml);
    rl = cfg->routes[0].rate_limiters[0];

    memset(&who, 0, sizeof(who));
    headers_init(&h);
    for (size_t i = 0; hdr != NULL && hdr[i] != NULL; i += 2) {
        headers_add(&h, hdr[i], hdr[i + 1]);
    }
    cr_assert_eq(netaddr_parse(ip, &addr), 0);
    who.client = &addr;
    who.headers = &h;
    who.ipv6_prefix = 64;
    cr_assert(ratekey_build(&rl->tiers[0], &who, "sluice:", "r", buf));
    headers_deinit(&h);
}

/* Every rule's key of 'base' has the slot 'want'. */
static void
assert_rules_in_slot(const char *base, unsigned want)
{
    char key[SCRIPTCALL_KEY_MAX];

    for (size_t rule = 0; rule < LIMIT_MAX_RULES; rule++) {
        cr_assert_eq(scriptcall_key(key, sizeof(key), base, rule), 0);
        cr_assert_eq(slot_of(key), want, "%s: slot %u, not %u", key,
                     slot_of(key), want);
    }
}

Test(cluster, keys_of_one_caller_share_a_slot_across_rules, .fini = teardown)
{
    char base[RATEKEY_MAX];

    key_base("{key: ip, limiter: l}", "192.0.2.1", NULL, base);
    /* CLUSTER KEYSLOT r:ip:192.0.2.1 in Redis 7.0.15 (see above). */
    assert_rules_in_slot(base, 10341);
}

Test(cluster, escaped_braces_in_a_value_keep_the_callers_slot, .fini = teardown)
{
    static const char *const hdr[] = {"X-K", "}{evil}:{", NULL};
    char base[RATEKEY_MAX];

    key_base("{key: 'header:X-K', limiter: l}", "192.0.2.1", hdr, base);
    /* CLUSTER KEYSLOT r:header:x-k:%7D%7Bevil%7D%3A%7B in Redis 7.0.15. */
    assert_rules_in_slot(base, 6399);
}

/* Parses the NUL-terminated 'err'. */
static enum cluster_reply
parse(const char *err, struct cluster_redirect *out)
{
    return cluster_redirect_parse(err, strlen(err), out);
}

/* Replies of Redis 7.0.15 with cluster-preferred-endpoint-type ip, then
 * unknown-endpoint, then hostname (and no hostname set). */
Test(cluster, moved_and_ask_name_their_slot_and_node)
{
    struct cluster_redirect r;

    cr_assert_eq(parse("MOVED 12182 127.0.0.1:53867", &r), CLUSTER_REPLY_MOVED);
    cr_assert_eq(r.slot, 12182);
    cr_assert_str_eq(r.host, "127.0.0.1");
    cr_assert_eq(r.port, 53867);

    cr_assert_eq(parse("ASK 5061 127.0.0.1:53867", &r), CLUSTER_REPLY_ASK);
    cr_assert_eq(r.slot, 5061);
    cr_assert_str_eq(r.host, "127.0.0.1");
    cr_assert_eq(r.port, 53867);

    cr_assert_eq(parse("MOVED 12182 :53867", &r), CLUSTER_REPLY_MOVED);
    cr_assert_str_eq(r.host, "", "no host: the caller substitutes its own");
    cr_assert_eq(r.port, 53867);

    cr_assert_eq(parse("MOVED 12182 ?:53867", &r), CLUSTER_REPLY_MOVED);
    cr_assert_str_eq(r.host, "?");
}

Test(cluster, redirect_port_follows_the_last_colon)
{
    struct cluster_redirect r;

    cr_assert_eq(parse("MOVED 3999 ::1:7000", &r), CLUSTER_REPLY_MOVED);
    cr_assert_str_eq(r.host, "::1");
    cr_assert_eq(r.port, 7000);
    cr_assert_eq(parse("ASK 1 2001:db8::5:6379", &r), CLUSTER_REPLY_ASK);
    cr_assert_str_eq(r.host, "2001:db8::5");
    cr_assert_eq(r.port, 6379);
    cr_assert_eq(parse("MOVED 7 redis-2.example.com:6380", &r),
                 CLUSTER_REPLY_MOVED);
    cr_assert_str_eq(r.host, "redis-2.example.com");
    cr_assert_eq(r.port, 6380);
}

Test(cluster, redirect_slots_and_ports_reach_their_bounds)
{
    struct cluster_redirect r;

    cr_assert_eq(parse("MOVED 0 h:1", &r), CLUSTER_REPLY_MOVED);
    cr_assert_eq(r.slot, 0);
    cr_assert_eq(r.port, 1);
    cr_assert_eq(parse("MOVED 16383 h:65535", &r), CLUSTER_REPLY_MOVED);
    cr_assert_eq(r.slot, 16383);
    cr_assert_eq(r.port, 65535);
}

Test(cluster, redirect_reads_len_bytes)
{
    static const char err[] = "MOVED 1 h:7000";
    struct cluster_redirect r;

    cr_assert_eq(cluster_redirect_parse(err, sizeof(err) - 3, &r),
                 CLUSTER_REPLY_MOVED);
    cr_assert_eq(r.port, 70);
    /* A NUL inside the host is a byte like any other below 0x21. */
    cr_assert_eq(cluster_redirect_parse("MOVED 1 a\0b:1", 13, &r),
                 CLUSTER_REPLY_MALFORMED);
}

Test(cluster, retry_and_role_errors_are_classified)
{
    static const struct {
        const char *err;
        enum cluster_reply want;
    } cases[] = {
        {"TRYAGAIN Multiple keys request during rehashing of slot",
         CLUSTER_REPLY_TRYAGAIN},
        {"TRYAGAIN", CLUSTER_REPLY_TRYAGAIN},
        {"CLUSTERDOWN Hash slot not served", CLUSTER_REPLY_CLUSTERDOWN},
        {"CLUSTERDOWN The cluster is down", CLUSTER_REPLY_CLUSTERDOWN},
        {"READONLY You can't write against a read only replica.",
         CLUSTER_REPLY_READONLY},
        {"ERR unknown command 'FOO'", CLUSTER_REPLY_OTHER},
        {"NOSCRIPT No matching script. Please use EVAL.", CLUSTER_REPLY_OTHER},
        {"WRONGTYPE Operation against a key holding the wrong kind of value",
         CLUSTER_REPLY_OTHER},
        {"", CLUSTER_REPLY_OTHER},
        {"moved 1 h:1", CLUSTER_REPLY_OTHER},
        {"MOVEDX 1 h:1", CLUSTER_REPLY_OTHER},
        {"ASKING", CLUSTER_REPLY_OTHER},
        {"TRYAGAINX", CLUSTER_REPLY_OTHER},
        {"CLUSTERDOWNx", CLUSTER_REPLY_OTHER},
        {" MOVED 1 h:1", CLUSTER_REPLY_OTHER},
    };
    struct cluster_redirect r;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cr_expect_eq(parse(cases[i].err, &r), cases[i].want, "\"%s\"",
                     cases[i].err);
    }
}

Test(cluster, malformed_redirects_are_refused_and_leave_out_untouched)
{
    static const char *const bad[] = {
        "MOVED",
        "MOVED ",
        "MOVED 1",
        "MOVED 1 ",
        "MOVED  1 h:1",
        "MOVED 1  h:1",
        "MOVED 16384 h:1",
        "ASK 99999 h:1",
        "MOVED 123456 h:1",
        "MOVED -1 h:1",
        "MOVED +1 h:1",
        "MOVED 01 h:1",
        "MOVED x h:1",
        "MOVED 1 h",
        "MOVED 1 h:",
        "MOVED 1 h:0",
        "MOVED 1 h:65536",
        "MOVED 1 h:99999",
        "MOVED 1 h:007000",
        "MOVED 1 h:+1",
        "MOVED 1 h:1a",
        "MOVED 1 h:7000 extra",
        "MOVED 1 h:7000\r\n",
        "MOVED 1 h\tx:1",
        "MOVED 1 h\x7fx:1",
        "ASK 1 h",
    };
    struct cluster_redirect r, before;

    memset(&before, 0x5a, sizeof(before));
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        r = before;
        cr_expect_eq(parse(bad[i], &r), CLUSTER_REPLY_MALFORMED, "\"%s\"",
                     bad[i]);
        cr_expect(memcmp(&r, &before, sizeof(r)) == 0, "\"%s\"", bad[i]);
    }
}

Test(cluster, redirect_host_must_fit)
{
    char err[CLUSTER_HOST_MAX + 32];
    struct cluster_redirect r;

    /* The longest host: CLUSTER_HOST_MAX - 1 bytes. */
    memcpy(err, "MOVED 1 ", 8);
    memset(err + 8, 'h', CLUSTER_HOST_MAX - 1);
    strcpy(err + 8 + CLUSTER_HOST_MAX - 1, ":1");
    cr_assert_eq(parse(err, &r), CLUSTER_REPLY_MOVED);
    cr_assert_eq(strlen(r.host), CLUSTER_HOST_MAX - 1);
    /* One more byte does not fit. */
    memset(err + 8, 'h', CLUSTER_HOST_MAX);
    strcpy(err + 8 + CLUSTER_HOST_MAX, ":1");
    cr_assert_eq(parse(err, &r), CLUSTER_REPLY_MALFORMED);
}

/* The slot ranges `redis-cli --cluster create` gives three primaries. */
static const struct cluster_range three[] = {
    {0, 5460, "10.0.0.1", 7000},
    {5461, 10922, "10.0.0.2", 7000},
    {10923, 16383, "10.0.0.3", 7000},
};

static struct cluster_map *
map_of(const struct cluster_range *ranges, size_t n)
{
    const char *why = NULL;
    struct cluster_map *m = cluster_map_new(ranges, n, &why);

    cr_assert_not_null(m, "%s", why ? why : "");
    return m;
}

/* The host:port of the node that serves 'slot', "-" if none. */
static const char *
owner(const struct cluster_map *m, unsigned slot, char *buf, size_t size)
{
    int i = cluster_map_node(m, slot);
    const struct cluster_node *n;

    if (i < 0) {
        return "-";
    }
    n = cluster_map_node_at(m, (size_t)i);
    cr_assert_not_null(n);
    snprintf(buf, size, "%s:%u", n->host, (unsigned)n->port);
    return buf;
}

Test(cluster, map_finds_the_primary_of_every_slot)
{
    struct cluster_map *m = map_of(three, 3);
    unsigned first = 99, last = 99;
    char buf[CLUSTER_HOST_MAX + 8];

    cr_assert_eq(cluster_map_nnodes(m), 3);
    cr_assert_str_eq(owner(m, 0, buf, sizeof(buf)), "10.0.0.1:7000");
    cr_assert_str_eq(owner(m, 5460, buf, sizeof(buf)), "10.0.0.1:7000");
    cr_assert_str_eq(owner(m, 5461, buf, sizeof(buf)), "10.0.0.2:7000");
    cr_assert_str_eq(owner(m, 10922, buf, sizeof(buf)), "10.0.0.2:7000");
    cr_assert_str_eq(owner(m, 10923, buf, sizeof(buf)), "10.0.0.3:7000");
    cr_assert_str_eq(owner(m, 16383, buf, sizeof(buf)), "10.0.0.3:7000");
    cr_assert_eq(cluster_map_node(m, CLUSTER_SLOTS), -1);
    cr_assert_null(cluster_map_node_at(m, 3));
    cr_assert_eq(cluster_map_uncovered(m, &first, &last), 0);
    cr_assert_eq(first, 99, "untouched when every slot is served");
    cluster_map_free(m);
    cluster_map_free(NULL);
}

Test(cluster, map_gives_one_index_per_host_and_port)
{
    /* After resharding a node serves several ranges (CLUSTER SLOTS lists
     * each); a host with two ports is two nodes, as is a port on two
     * hosts. */
    static const struct cluster_range r[] = {
        {0, 99, "10.0.0.1", 7000},      {100, 199, "10.0.0.2", 7000},
        {200, 299, "10.0.0.1", 7000},   {300, 399, "10.0.0.1", 7001},
        {400, 16383, "10.0.0.2", 7000},
    };
    struct cluster_map *m = map_of(r, 5);

    cr_assert_eq(cluster_map_nnodes(m), 3);
    cr_assert_eq(cluster_map_node(m, 0), 0);
    cr_assert_eq(cluster_map_node(m, 250), 0);
    cr_assert_eq(cluster_map_node(m, 150), 1);
    cr_assert_eq(cluster_map_node(m, 16383), 1);
    cr_assert_eq(cluster_map_node(m, 350), 2);
    cr_assert_str_eq(cluster_map_node_at(m, 2)->host, "10.0.0.1");
    cr_assert_eq(cluster_map_node_at(m, 2)->port, 7001);
    cluster_map_free(m);
}

Test(cluster, map_copies_the_hosts_it_is_given)
{
    char host[] = "10.0.0.9";
    struct cluster_range r = {0, CLUSTER_SLOTS - 1, host, 7000};
    struct cluster_map *m = map_of(&r, 1);

    host[0] = 'X';
    cr_assert_str_eq(cluster_map_node_at(m, 0)->host, "10.0.0.9");
    cluster_map_free(m);
}

Test(cluster, map_reports_the_slots_no_node_serves)
{
    static const struct cluster_range r[] = {
        {0, 99, "a", 1},
        {200, 15999, "b", 1},
    };
    struct cluster_map *m = map_of(r, 2);
    unsigned first = 0, last = 0;

    cr_assert_eq(cluster_map_uncovered(m, &first, &last), 100 + 384);
    cr_assert_eq(first, 100);
    cr_assert_eq(last, 199);
    cr_assert_eq(cluster_map_node(m, 100), -1);
    cr_assert_eq(cluster_map_node(m, 199), -1);
    cr_assert_eq(cluster_map_node(m, 16000), -1);
    cr_assert_eq(cluster_map_node(m, 16383), -1);
    cr_assert_eq(cluster_map_node(m, 99), 0);
    cr_assert_eq(cluster_map_node(m, 200), 1);
    cluster_map_free(m);

    m = map_of(NULL, 0);
    cr_assert_eq(cluster_map_nnodes(m), 0);
    cr_assert_eq(cluster_map_uncovered(m, &first, &last), CLUSTER_SLOTS);
    cr_assert_eq(first, 0);
    cr_assert_eq(last, CLUSTER_SLOTS - 1);
    cluster_map_free(m);
}

Test(cluster, map_refuses_invalid_ranges)
{
    char long_host[CLUSTER_HOST_MAX + 1];
    const struct cluster_range bad[][2] = {
        {{10, 9, "a", 1}, {0, 0, "a", 1}},
        {{0, CLUSTER_SLOTS, "a", 1}, {0, 0, "a", 1}},
        {{0, 0, "", 1}, {1, 1, "a", 1}},
        {{0, 0, NULL, 1}, {1, 1, "a", 1}},
        {{0, 0, "a", 0}, {1, 1, "a", 1}},
        {{0, 0, long_host, 1}, {1, 1, "a", 1}},
        {{0, 100, "a", 1}, {100, 200, "b", 1}},
        {{0, 100, "a", 1}, {50, 60, "a", 1}},
    };

    memset(long_host, 'h', CLUSTER_HOST_MAX);
    long_host[CLUSTER_HOST_MAX] = '\0';
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *why = NULL;

        cr_expect_null(cluster_map_new(bad[i], 2, &why), "case %zu", i);
        cr_expect(why != NULL && why[0] != '\0', "case %zu", i);
    }
}

Test(cluster, moved_updates_one_slot)
{
    struct cluster_map *m = map_of(three, 3);
    const struct cluster_node *first_node = cluster_map_node_at(m, 0);
    char buf[CLUSTER_HOST_MAX + 8];

    /* To a known node: its index, nothing added. */
    cr_assert_eq(cluster_map_moved(m, 0, "10.0.0.3", 7000), 2);
    cr_assert_eq(cluster_map_nnodes(m), 3);
    cr_assert_str_eq(owner(m, 0, buf, sizeof(buf)), "10.0.0.3:7000");
    cr_assert_str_eq(owner(m, 1, buf, sizeof(buf)), "10.0.0.1:7000");

    /* To a new node: the next index; the others keep theirs. */
    cr_assert_eq(cluster_map_moved(m, 5461, "10.0.0.4", 7000), 3);
    cr_assert_eq(cluster_map_nnodes(m), 4);
    cr_assert_str_eq(owner(m, 5461, buf, sizeof(buf)), "10.0.0.4:7000");
    cr_assert_str_eq(owner(m, 5462, buf, sizeof(buf)), "10.0.0.2:7000");
    cr_assert_eq(cluster_map_node_at(m, 0), first_node,
                 "nodes stay where they are");
    cr_assert_str_eq(first_node->host, "10.0.0.1");

    /* Invalid: nothing changes. */
    cr_assert_eq(cluster_map_moved(m, CLUSTER_SLOTS, "10.0.0.5", 1), -1);
    cr_assert_eq(cluster_map_moved(m, 1, "", 1), -1);
    cr_assert_eq(cluster_map_moved(m, 1, NULL, 1), -1);
    cr_assert_eq(cluster_map_moved(m, 1, "10.0.0.5", 0), -1);
    cr_assert_eq(cluster_map_nnodes(m), 4);
    cr_assert_str_eq(owner(m, 1, buf, sizeof(buf)), "10.0.0.1:7000");
    cluster_map_free(m);
}

Test(cluster, moved_serves_an_uncovered_slot)
{
    struct cluster_range r = {1, CLUSTER_SLOTS - 1, "a", 1};
    struct cluster_map *m = map_of(&r, 1);
    unsigned first, last;

    cr_assert_eq(cluster_map_uncovered(m, &first, &last), 1);
    cr_assert_eq(cluster_map_node(m, 0), -1);
    cr_assert_eq(cluster_map_moved(m, 0, "a", 1), 0);
    cr_assert_eq(cluster_map_node(m, 0), 0);
    cr_assert_eq(cluster_map_uncovered(m, &first, &last), 0);
    cluster_map_free(m);
}

Test(cluster, moved_to_one_node_too_many_is_refused)
{
    /* One node per slot, as many as a map holds. */
    struct cluster_range *r = xcalloc(CLUSTER_MAP_MAX_NODES, sizeof(*r));
    struct cluster_map *m;

    for (unsigned s = 0; s < CLUSTER_MAP_MAX_NODES; s++) {
        r[s] = (struct cluster_range){s, s, "h", (uint16_t)(s + 1)};
    }
    m = map_of(r, CLUSTER_MAP_MAX_NODES);
    cr_assert_eq(cluster_map_nnodes(m), CLUSTER_MAP_MAX_NODES);
    cr_assert_eq(cluster_map_node(m, CLUSTER_MAP_MAX_NODES - 1),
                 CLUSTER_MAP_MAX_NODES - 1);
    cr_assert_eq(cluster_map_moved(m, 0, "h", CLUSTER_MAP_MAX_NODES + 1), -1);
    cr_assert_eq(cluster_map_node(m, 0), 0);
    cr_assert_eq(cluster_map_moved(m, 0, "h", 2), 1);
    cluster_map_free(m);
    free(r);
}

/* 16,384 primaries would be as many connections per worker, and each
 * refresh of such a map cost the worker seconds (nodes are found by a
 * linear search, sized for a real cluster). */
Test(cluster, a_map_of_more_primaries_than_a_map_holds_is_refused)
{
    struct cluster_range *r = xcalloc(CLUSTER_SLOTS, sizeof(*r));
    const char *why = NULL;

    for (unsigned s = 0; s < CLUSTER_SLOTS; s++) {
        r[s] = (struct cluster_range){s, s, "h", (uint16_t)(s + 1)};
    }
    cr_assert_null(cluster_map_new(r, CLUSTER_MAP_MAX_NODES + 1, &why));
    cr_assert_str_eq(why, "more primaries than the 1000 a map holds");
    cr_assert_null(cluster_map_new(r, CLUSTER_SLOTS, &why));
    free(r);
}

Test(cluster, the_empty_key_has_slot_0_even_without_a_buffer)
{
    /* CRC16 of nothing is 0; memchr() must not see a NULL pointer. */
    cr_assert_eq(cluster_slot(NULL, 0), 0);
    cr_assert_eq(cluster_slot("", 0), 0);
}

/* CLUSTER SLOTS replies, built as value trees. */
#define V_INT(v)                                                               \
    {                                                                          \
        .type = CLUSTER_VALUE_INTEGER, .integer = (v)                          \
    }
#define V_STR(s)                                                               \
    {                                                                          \
        .type = CLUSTER_VALUE_STRING, .str = (s), .len = sizeof(s) - 1         \
    }
#define V_ARR(a)                                                               \
    {                                                                          \
        .type = CLUSTER_VALUE_ARRAY, .elems = (a), .n = NELEMS(a)              \
    }
#define NELEMS(a) (sizeof(a) / sizeof((a)[0]))
/* The same, as expressions. */
#define C_INT(v) ((struct cluster_value)V_INT(v))
#define C_STR(s) ((struct cluster_value)V_STR(s))

static const struct cluster_value p1[] = {V_STR("10.0.0.1"), V_INT(7000),
                                          V_STR("id1")};
static const struct cluster_value r1[] = {V_STR("10.0.0.4"), V_INT(7003),
                                          V_STR("id4")};
/* A primary announced without an address (unknown-endpoint). */
static const struct cluster_value p2[] = {V_STR(""), V_INT(7001)};
static const struct cluster_value e1[] = {V_INT(0), V_INT(5460), V_ARR(p1),
                                          V_ARR(r1)};
static const struct cluster_value e2[] = {V_INT(5461), V_INT(16383), V_ARR(p2)};
static const struct cluster_value both[] = {V_ARR(e1), V_ARR(e2)};

Test(cluster, slots_reply_gives_the_primaries_and_skips_replicas)
{
    const struct cluster_value reply = V_ARR(both);
    const char *why = "unset";
    struct cluster_map *m = cluster_map_from_slots(&reply, "seed", &why);
    char buf[CLUSTER_HOST_MAX + 8];
    unsigned first, last;

    cr_assert_not_null(m, "%s", why);
    cr_assert_eq(cluster_map_nnodes(m), 2);
    cr_assert_str_eq(owner(m, 0, buf, sizeof(buf)), "10.0.0.1:7000");
    cr_assert_str_eq(owner(m, 5460, buf, sizeof(buf)), "10.0.0.1:7000");
    cr_assert_str_eq(owner(m, 5461, buf, sizeof(buf)), "seed:7001",
                     "an empty host is the one asked");
    cr_assert_str_eq(owner(m, 16383, buf, sizeof(buf)), "seed:7001");
    cr_assert_eq(cluster_map_uncovered(m, &first, &last), 0);
    cluster_map_free(m);
}

Test(cluster, empty_slots_reply_leaves_every_slot_uncovered)
{
    const struct cluster_value reply = {.type = CLUSTER_VALUE_ARRAY};
    const char *why = NULL;
    struct cluster_map *m = cluster_map_from_slots(&reply, "seed", &why);
    unsigned first = 1, last = 1;

    cr_assert_not_null(m);
    cr_assert_eq(cluster_map_uncovered(m, &first, &last), CLUSTER_SLOTS);
    cr_assert_eq(first, 0);
    cr_assert_eq(last, CLUSTER_SLOTS - 1);
    cluster_map_free(m);
}

/* One element [first, last, [host, port]] as a reply; NULL or the map. */
static struct cluster_map *
one_range(struct cluster_value first, struct cluster_value last,
          struct cluster_value host, struct cluster_value port,
          const char **why)
{
    struct cluster_value primary[2] = {host, port};
    struct cluster_value elem[3] = {first, last, V_ARR(primary)};
    struct cluster_value arr[1] = {V_ARR(elem)};
    struct cluster_value reply = V_ARR(arr);

    return cluster_map_from_slots(&reply, "seed", why);
}

Test(cluster, bad_slots_replies_are_refused_with_a_reason)
{
    const struct cluster_value ok_first = V_INT(0), ok_last = V_INT(10);
    const struct cluster_value ok_host = V_STR("h"), ok_port = V_INT(7000);
    const struct cluster_value nil = {.type = CLUSTER_VALUE_OTHER};
    const char *why = NULL;
    struct cluster_map *m;

    m = one_range(ok_first, ok_last, ok_host, ok_port, &why);
    cr_assert_not_null(m, "%s", why);
    cluster_map_free(m);
    cr_assert_null(cluster_map_from_slots(&nil, "seed", &why));
    cr_assert_str_eq(why, "the reply is not an array");
    cr_assert_null(one_range(ok_first, ok_last, ok_host, C_INT(0), &why));
    cr_assert_str_eq(why, "a primary's port is not in 1..65535");
    cr_assert_null(one_range(ok_first, ok_last, ok_host, C_INT(65536), &why));
    cr_assert_null(one_range(ok_first, ok_last, ok_host, C_STR("1"), &why));
    cr_assert_str_eq(why, "a primary is not [host, port, ...]");
    cr_assert_null(one_range(C_INT(11), ok_last, ok_host, ok_port, &why));
    cr_assert_str_eq(why, "a range has slots out of order or out of range");
    cr_assert_null(one_range(C_INT(-1), ok_last, ok_host, ok_port, &why));
    cr_assert_null(one_range(ok_first, C_INT(16384), ok_host, ok_port, &why));
    cr_assert_null(one_range(C_STR("0"), ok_last, ok_host, ok_port, &why));
    cr_assert_str_eq(why, "a range is not [first, last, primary, ...]");
    cr_assert_null(one_range(ok_first, ok_last, C_STR("?"), ok_port, &why));
    cr_assert_str_eq(why, "a primary announces no host (\"?\")");
    cr_assert_null(one_range(ok_first, ok_last, C_STR("a b"), ok_port, &why));
    cr_assert_str_eq(why, "a primary's host holds a space or control byte");
}

Test(cluster, slots_reply_with_overlapping_ranges_is_refused)
{
    static const struct cluster_value a[] = {V_INT(0), V_INT(10), V_ARR(p1)};
    static const struct cluster_value b[] = {V_INT(10), V_INT(20), V_ARR(r1)};
    static const struct cluster_value ab[] = {V_ARR(a), V_ARR(b)};
    const struct cluster_value reply = V_ARR(ab);
    const char *why = NULL;

    cr_assert_null(cluster_map_from_slots(&reply, "seed", &why));
    cr_assert_str_eq(why, "a slot is in two ranges");
}
