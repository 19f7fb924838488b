#include <criterion/criterion.h>

#include <pthread.h>
#include <regex.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"

/* True if 'line' is one whole line of 'text'. */
static bool
has_line(const char *text, const char *line)
{
    size_t len = strlen(line);

    for (const char *p = text; (p = strstr(p, line)) != NULL; p++) {
        if ((p == text || p[-1] == '\n') && p[len] == '\n') {
            return true;
        }
    }
    return false;
}

static size_t
count_lines_starting(const char *text, const char *prefix)
{
    size_t n = 0;
    size_t len = strlen(prefix);

    for (const char *p = text; *p != '\0';) {
        const char *nl = strchr(p, '\n');

        if (strncmp(p, prefix, len) == 0) {
            n++;
        }
        if (nl == NULL) {
            break;
        }
        p = nl + 1;
    }
    return n;
}

#define WRITER_ROUNDS 200000

struct writer {
    struct metrics *m; /* borrowed */
    const char *route; /* this thread's own route label */
};

static void *
write_counters(void *arg)
{
    struct writer *w = arg;
    struct metrics_shard *s = metrics_shard(w->m);
    const char *shared[] = {"shared", "GET", "200"};
    const char *own[] = {w->route, "POST", "201"};

    for (int i = 0; i < WRITER_ROUNDS; i++) {
        metrics_add(s, M_REQUESTS, shared, 1);
        if (i % 2 == 0) {
            metrics_add(s, M_REQUESTS, own, 1);
        }
        metrics_add(s, M_CONNECTIONS, NULL, 1);
        metrics_add(s, M_CONNECTIONS, NULL, -1);
    }
    return NULL;
}

static void *
scrape_repeatedly(void *arg)
{
    struct metrics *m = arg;

    /* Scrapes while the writers run: a torn table would crash here. */
    for (int i = 0; i < 200; i++) {
        free(metrics_render(m));
    }
    return NULL;
}

Test(metrics, counters_from_two_threads_are_summed_exactly)
{
    struct metrics *m = metrics_new();
    struct writer w[2] = {{m, "a"}, {m, "b"}};
    pthread_t t[3];
    char *text;
    char want[128];

    cr_assert_eq(pthread_create(&t[0], NULL, write_counters, &w[0]), 0);
    cr_assert_eq(pthread_create(&t[1], NULL, write_counters, &w[1]), 0);
    cr_assert_eq(pthread_create(&t[2], NULL, scrape_repeatedly, m), 0);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(pthread_join(t[i], NULL), 0);
    }
    text = metrics_render(m);
    snprintf(want, sizeof(want),
             "sluice_requests_total{route=\"shared\",method=\"GET\","
             "status=\"200\"} %d",
             2 * WRITER_ROUNDS);
    cr_assert(has_line(text, want), "missing \"%s\" in:\n%s", want, text);
    snprintf(want, sizeof(want),
             "sluice_requests_total{route=\"a\",method=\"POST\","
             "status=\"201\"} %d",
             WRITER_ROUNDS / 2);
    cr_assert(has_line(text, want), "missing \"%s\" in:\n%s", want, text);
    snprintf(want, sizeof(want),
             "sluice_requests_total{route=\"b\",method=\"POST\","
             "status=\"201\"} %d",
             WRITER_ROUNDS / 2);
    cr_assert(has_line(text, want), "missing \"%s\" in:\n%s", want, text);
    /* One summed line per label combination, not one per shard. */
    cr_assert_eq(count_lines_starting(text, "sluice_requests_total{"), 3);
    cr_assert(has_line(text, "sluice_connections_open 0"), "%s", text);
    free(text);
    metrics_free(m);
}

Test(metrics, label_values_are_escaped)
{
    struct metrics *m = metrics_new();
    struct metrics_shard *s = metrics_shard(m);
    const char *labels[] = {"a\\b\"c\nd", "GET", "200"};
    char *text;

    metrics_add(s, M_REQUESTS, labels, 2);
    text = metrics_render(m);
    cr_assert(has_line(text, "sluice_requests_total{route=\"a\\\\b\\\"c\\nd\","
                             "method=\"GET\",status=\"200\"} 2"),
              "%s", text);
    free(text);
    metrics_free(m);
}

Test(metrics, histogram_buckets_are_cumulative_with_exact_sum_and_count)
{
    struct metrics *m = metrics_new();
    struct metrics_shard *s1 = metrics_shard(m);
    struct metrics_shard *s2 = metrics_shard(m);
    const char *route[] = {"api"};
    static const char *const want[] = {
        "# TYPE sluice_upstream_duration_seconds histogram",
        "sluice_upstream_duration_seconds_bucket{route=\"api\",le=\"0.0005\"} "
        "1",
        "sluice_upstream_duration_seconds_bucket{route=\"api\",le=\"0.001\"} "
        "2",
        "sluice_upstream_duration_seconds_bucket{route=\"api\",le=\"0.0025\"} "
        "2",
        "sluice_upstream_duration_seconds_bucket{route=\"api\",le=\"0.005\"} "
        "3",
        "sluice_upstream_duration_seconds_bucket{route=\"api\",le=\"0.01\"} 3",
        "sluice_upstream_duration_seconds_bucket{route=\"api\",le=\"0.025\"} "
        "3",
        "sluice_upstream_duration_seconds_bucket{route=\"api\",le=\"0.05\"} 3",
        "sluice_upstream_duration_seconds_bucket{route=\"api\",le=\"0.1\"} 3",
        "sluice_upstream_duration_seconds_bucket{route=\"api\",le=\"0.25\"} 3",
        "sluice_upstream_duration_seconds_bucket{route=\"api\",le=\"0.5\"} 3",
        "sluice_upstream_duration_seconds_bucket{route=\"api\",le=\"1\"} 4",
        "sluice_upstream_duration_seconds_bucket{route=\"api\",le=\"2.5\"} 4",
        "sluice_upstream_duration_seconds_bucket{route=\"api\",le=\"5\"} 4",
        "sluice_upstream_duration_seconds_bucket{route=\"api\",le=\"10\"} 4",
        "sluice_upstream_duration_seconds_bucket{route=\"api\",le=\"+Inf\"} 5",
        "sluice_upstream_duration_seconds_sum{route=\"api\"} 20.7043",
        "sluice_upstream_duration_seconds_count{route=\"api\"} 5",
        /* Unlabeled and never observed: all zero, not absent. */
        "sluice_redis_duration_seconds_bucket{le=\"0.0005\"} 0",
        "sluice_redis_duration_seconds_bucket{le=\"+Inf\"} 0",
        "sluice_redis_duration_seconds_sum 0",
        "sluice_redis_duration_seconds_count 0",
    };
    char *text;
    const char *prev = NULL;

    /* Spread over two shards: the scrape must add them up. */
    metrics_observe(s1, M_UPSTREAM_SECONDS, route, 0.0003);
    metrics_observe(s2, M_UPSTREAM_SECONDS, route, 0.001); /* on a bound */
    metrics_observe(s1, M_UPSTREAM_SECONDS, route, 0.003);
    metrics_observe(s2, M_UPSTREAM_SECONDS, route, 0.7);
    metrics_observe(s1, M_UPSTREAM_SECONDS, route, 20);
    text = metrics_render(m);
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        cr_assert(has_line(text, want[i]), "missing \"%s\" in:\n%s", want[i],
                  text);
    }
    /* The upstream buckets come in order of their bounds. */
    for (size_t i = 1; i <= 15; i++) {
        const char *p = strstr(text, want[i]);

        cr_assert(prev == NULL || p > prev, "out of order: %s", want[i]);
        prev = p;
    }
    cr_assert_eq(
        count_lines_starting(text, "sluice_upstream_duration_seconds_bucket"),
        15);
    free(text);
    metrics_free(m);
}

Test(metrics, histogram_sum_of_one_observation_is_exact)
{
    struct metrics *m = metrics_new();
    struct metrics_shard *s = metrics_shard(m);
    char *text;

    metrics_observe(s, M_REDIS_SECONDS, NULL, 0.0015);
    metrics_observe(s, M_REDIS_SECONDS, NULL, -1); /* a clock step */
    text = metrics_render(m);
    cr_assert(has_line(text, "sluice_redis_duration_seconds_sum 0.0015"), "%s",
              text);
    cr_assert(has_line(text, "sluice_redis_duration_seconds_bucket"
                             "{le=\"0.0005\"} 1"),
              "%s", text);
    cr_assert(has_line(text, "sluice_redis_duration_seconds_bucket"
                             "{le=\"0.0025\"} 2"),
              "%s", text);
    cr_assert(has_line(text, "sluice_redis_duration_seconds_count 2"), "%s",
              text);
    free(text);
    metrics_free(m);
}

static void
record_some(struct metrics_shard *s, bool reversed)
{
    const char *a[] = {"alpha", "GET", "200"};
    const char *b[] = {"beta", "GET", "200"};
    const char *b404[] = {"beta", "GET", "404"};
    const char *ok[] = {"ok"};
    const char *err[] = {"error"};

    if (reversed) {
        metrics_add(s, M_RELOADS, err, 1);
        metrics_add(s, M_RELOADS, ok, 1);
        metrics_add(s, M_REQUESTS, b404, 1);
        metrics_add(s, M_REQUESTS, b, 1);
        metrics_add(s, M_REQUESTS, a, 1);
    } else {
        metrics_add(s, M_REQUESTS, a, 1);
        metrics_add(s, M_REQUESTS, b, 1);
        metrics_add(s, M_REQUESTS, b404, 1);
        metrics_add(s, M_RELOADS, ok, 1);
        metrics_add(s, M_RELOADS, err, 1);
    }
}

Test(metrics, output_order_does_not_depend_on_recording_order)
{
    struct metrics *m1 = metrics_new();
    struct metrics *m2 = metrics_new();
    char *t1;
    char *t2;
    const char *alpha;
    const char *beta;
    const char *beta404;

    record_some(metrics_shard(m1), false);
    record_some(metrics_shard(m2), true);
    /* Same series spread over more shards renders the same text. */
    record_some(metrics_shard(m2), false);
    record_some(metrics_shard(m1), true);
    t1 = metrics_render(m1);
    t2 = metrics_render(m2);
    cr_assert_str_eq(t1, t2);
    alpha = strstr(t1, "sluice_requests_total{route=\"alpha\"");
    beta = strstr(t1, "sluice_requests_total{route=\"beta\",method=\"GET\","
                      "status=\"200\"} 2");
    beta404 = strstr(t1, "sluice_requests_total{route=\"beta\",method=\"GET\","
                         "status=\"404\"} 2");
    cr_assert(alpha != NULL && beta != NULL && beta404 != NULL, "%s", t1);
    cr_assert(alpha < beta && beta < beta404, "%s", t1);
    cr_assert(strstr(t1, "sluice_config_reloads_total{result=\"error\"} 2") <
                  strstr(t1, "sluice_config_reloads_total{result=\"ok\"} 2"),
              "%s", t1);
    free(t1);
    free(t2);
    metrics_free(m1);
    metrics_free(m2);
}

Test(metrics, empty_registry_declares_every_metric)
{
    static const char *const decl[][2] = {
        {"sluice_requests_total", "counter"},
        {"sluice_ratelimit_decisions_total", "counter"},
        {"sluice_upstream_duration_seconds", "histogram"},
        {"sluice_redis_duration_seconds", "histogram"},
        {"sluice_redis_events_total", "counter"},
        {"sluice_redis_nodes", "gauge"},
        {"sluice_ratelimit_deny_cache_hits_total", "counter"},
        {"sluice_ratelimit_lease_hits_total", "counter"},
        {"sluice_ratelimit_lease_units_total", "counter"},
        {"sluice_jwt_cache_hits_total", "counter"},
        {"sluice_jwt_tokens_total", "counter"},
        {"sluice_connections_open", "gauge"},
        {"sluice_requests_in_flight", "gauge"},
        {"sluice_requests_held", "gauge"},
        {"sluice_config_reloads_total", "counter"},
        {"sluice_config_generation", "gauge"},
        {"sluice_tls_handshakes_total", "counter"},
    };
    struct metrics *m = metrics_new();
    char *text = metrics_render(m);
    char line[128];

    cr_assert_eq(sizeof(decl) / sizeof(decl[0]), M_COUNT);
    for (size_t i = 0; i < M_COUNT; i++) {
        snprintf(line, sizeof(line), "# TYPE %s %s", decl[i][0], decl[i][1]);
        cr_assert(has_line(text, line), "missing \"%s\" in:\n%s", line, text);
        snprintf(line, sizeof(line), "# HELP %s ", decl[i][0]);
        cr_assert_eq(count_lines_starting(text, line), 1, "%s", line);
    }
    cr_assert_eq(count_lines_starting(text, "# HELP "), M_COUNT);
    cr_assert_eq(count_lines_starting(text, "# TYPE "), M_COUNT);
    cr_assert(has_line(text, "sluice_connections_open 0"), "%s", text);
    cr_assert(has_line(text, "sluice_requests_in_flight 0"), "%s", text);
    cr_assert(has_line(text, "sluice_requests_held 0"), "%s", text);
    cr_assert(has_line(text, "sluice_config_generation 0"), "%s", text);
    /* Labeled metrics have no sample until something is recorded. */
    cr_assert_eq(count_lines_starting(text, "sluice_requests_total"), 0);
    cr_assert_eq(count_lines_starting(text, "sluice_config_reloads_total"), 0);
    free(text);
    metrics_free(m);
}

Test(metrics, every_line_parses_back_as_a_comment_or_a_sample)
{
    struct metrics *m = metrics_new();
    struct metrics_shard *s = metrics_shard(m);
    const char *req[] = {"we\"ird\\route\nx", "OTHER", "503"};
    const char *rl[] = {"api", "per-user", "0", "dry_run_denied"};
    const char *up[] = {"api"};
    const char *kind[] = {"timeout"};
    const char *res[] = {"ok"};
    const char *tok[] = {"invalid"};
    const char *units[] = {"returned"};
    regex_t sample;
    regex_t comment;
    char *text;
    char *save = NULL;
    size_t samples = 0;

    metrics_add(s, M_REQUESTS, req, 1);
    metrics_add(s, M_RATELIMIT_DECISIONS, rl, 3);
    metrics_observe(s, M_UPSTREAM_SECONDS, up, 0.2);
    metrics_observe(s, M_REDIS_SECONDS, NULL, 0.0001);
    metrics_add(s, M_REDIS_EVENTS, kind, 1);
    metrics_add(s, M_DENY_CACHE_HITS, NULL, 7);
    metrics_add(s, M_LEASE_HITS, NULL, 90);
    metrics_add(s, M_LEASE_UNITS, units, 10);
    metrics_add(s, M_JWT_CACHE_HITS, NULL, 3);
    metrics_add(s, M_JWT_TOKENS, tok, 1);
    metrics_add(s, M_CONNECTIONS, NULL, 2);
    metrics_add(s, M_IN_FLIGHT, NULL, -1);
    metrics_add(s, M_HELD, NULL, 1);
    metrics_add(s, M_RELOADS, res, 1);
    metrics_set(m, M_CONFIG_GENERATION, 3);
    cr_assert_eq(
        regcomp(&sample,
                "^[a-zA-Z_:][a-zA-Z0-9_:]*"
                "(\\{[a-zA-Z_][a-zA-Z0-9_]*=\"([^\"\\\\\n]|\\\\[\\\\\"n])*\""
                "(,[a-zA-Z_][a-zA-Z0-9_]*=\"([^\"\\\\\n]|\\\\[\\\\\"n])*\")*"
                "\\})? -?[0-9]+(\\.[0-9]+)?$",
                REG_EXTENDED | REG_NOSUB),
        0);
    cr_assert_eq(regcomp(&comment,
                         "^# (HELP [a-z_]+ [^\n]+|TYPE [a-z_]+ "
                         "(counter|gauge|histogram))$",
                         REG_EXTENDED | REG_NOSUB),
                 0);
    text = metrics_render(m);
    cr_assert(strlen(text) > 0 && text[strlen(text) - 1] == '\n');
    for (char *line = strtok_r(text, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#') {
            cr_assert_eq(regexec(&comment, line, 0, NULL, 0), 0, "bad: %s",
                         line);
        } else {
            cr_assert_eq(regexec(&sample, line, 0, NULL, 0), 0, "bad: %s",
                         line);
            samples++;
        }
    }
    /* 9 counters + 4 gauges + 2 histograms of 15 buckets + 2. */
    cr_assert_eq(samples, 9 + 4 + 2 * 17);
    regfree(&sample);
    regfree(&comment);
    free(text);
    metrics_free(m);
}

Test(metrics, gauges_go_down_across_shards)
{
    struct metrics *m = metrics_new();
    struct metrics_shard *a = metrics_shard(m);
    struct metrics_shard *b = metrics_shard(m);
    char *text;

    metrics_add(a, M_IN_FLIGHT, NULL, 3);
    metrics_add(b, M_IN_FLIGHT, NULL, 1);
    metrics_add(a, M_IN_FLIGHT, NULL, -1);
    /* A shard may go below zero; only the sum means anything. */
    metrics_add(b, M_IN_FLIGHT, NULL, -2);
    metrics_add(a, M_HELD, NULL, 1);
    metrics_add(a, M_HELD, NULL, -1);
    text = metrics_render(m);
    cr_assert(has_line(text, "sluice_requests_in_flight 1"), "%s", text);
    cr_assert(has_line(text, "sluice_requests_held 0"), "%s", text);
    free(text);
    metrics_add(b, M_IN_FLIGHT, NULL, -1);
    text = metrics_render(m);
    cr_assert(has_line(text, "sluice_requests_in_flight 0"), "%s", text);
    free(text);
    metrics_free(m);
}

Test(metrics, set_replaces_a_process_wide_gauge)
{
    struct metrics *m = metrics_new();
    char *text;

    metrics_set(m, M_CONFIG_GENERATION, 1);
    text = metrics_render(m);
    cr_assert(has_line(text, "sluice_config_generation 1"), "%s", text);
    free(text);
    metrics_set(m, M_CONFIG_GENERATION, 7);
    text = metrics_render(m);
    cr_assert(has_line(text, "sluice_config_generation 7"), "%s", text);
    cr_assert_eq(count_lines_starting(text, "sluice_config_generation "), 1);
    free(text);
    metrics_free(m);
}

#define MANY_ROUTES 5000

Test(metrics, label_map_grows_past_its_initial_size)
{
    struct metrics *m = metrics_new();
    struct metrics_shard *s = metrics_shard(m);
    char route[32];
    const char *labels[] = {route, "GET", "200"};
    static int seen[MANY_ROUTES];
    char *text;
    char *save = NULL;
    size_t lines = 0;

    for (int i = 0; i < MANY_ROUTES; i++) {
        snprintf(route, sizeof(route), "r%d", i);
        metrics_add(s, M_REQUESTS, labels, i);
    }
    /* After all the growing, existing series are found, not duplicated. */
    for (int i = 0; i < MANY_ROUTES; i++) {
        snprintf(route, sizeof(route), "r%d", i);
        metrics_add(s, M_REQUESTS, labels, 1);
    }
    text = metrics_render(m);
    for (char *line = strtok_r(text, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        int r;
        long long v;

        if (sscanf(line,
                   "sluice_requests_total{route=\"r%d\",method=\"GET\","
                   "status=\"200\"} %lld",
                   &r, &v) != 2) {
            continue;
        }
        cr_assert(r >= 0 && r < MANY_ROUTES, "%s", line);
        cr_assert_eq(v, r + 1, "%s", line);
        seen[r]++;
        lines++;
    }
    cr_assert_eq(lines, MANY_ROUTES);
    for (int i = 0; i < MANY_ROUTES; i++) {
        cr_assert_eq(seen[i], 1, "route r%d seen %d times", i, seen[i]);
    }
    free(text);
    metrics_free(m);
}

Test(metrics, method_class_keeps_standard_methods_only)
{
    static const char *const std[] = {"GET",    "HEAD",    "POST", "PUT",
                                      "DELETE", "OPTIONS", "PATCH"};

    for (size_t i = 0; i < sizeof(std) / sizeof(std[0]); i++) {
        cr_assert_str_eq(metrics_method_class(std[i]), std[i]);
    }
    cr_assert_str_eq(metrics_method_class("get"), "OTHER");
    cr_assert_str_eq(metrics_method_class("PROPFIND"), "OTHER");
    cr_assert_str_eq(metrics_method_class("GETX"), "OTHER");
    cr_assert_str_eq(metrics_method_class(""), "OTHER");
    cr_assert_str_eq(metrics_method_class(NULL), "OTHER");
}

Test(metrics, a_series_used_again_and_a_neighbour_differing_in_one_label)
{
    struct metrics *m = metrics_new();
    struct metrics_shard *s = metrics_shard(m);
    char status[4] = "200";
    const char *labels[] = {"api", "GET", status};
    char *text;

    /* The same buffer each time, its value changed in between. */
    metrics_add(s, M_REQUESTS, labels, 1);
    metrics_add(s, M_REQUESTS, labels, 1);
    memcpy(status, "404", 4);
    metrics_add(s, M_REQUESTS, labels, 1);
    memcpy(status, "200", 4);
    metrics_add(s, M_REQUESTS, labels, 1);
    text = metrics_render(m);
    cr_assert(has_line(text,
                       "sluice_requests_total{route=\"api\",method=\"GET\","
                       "status=\"200\"} 3"),
              "%s", text);
    cr_assert(has_line(text,
                       "sluice_requests_total{route=\"api\",method=\"GET\","
                       "status=\"404\"} 1"),
              "%s", text);
    free(text);
    metrics_free(m);
}
