#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "filter.h"
#include "predicate.h"
#include "routes_json.h"
#include "strbuf.h"

static const char yaml[] =
    "redis: { url: 'redis://127.0.0.1:6379' }\n"
    "limiters:\n"
    "  per-ip: { algorithm: gcra, rate: 5/s, burst: 10, lease: 4 }\n"
    "  smooth: { algorithm: leaky_bucket, rate: 10/s, burst: 50,"
    " mode: delay, max_delay: 2s }\n"
    "routes:\n"
    "  - id: api\n"
    "    uri: http://127.0.0.1:9000/base\n"
    "    connect_timeout: 2s\n"
    "    predicates:\n"
    "      - Path=/api/**, /v1/**\n"
    "      - name: Header\n"
    "        args: { header: X-Version, regexp: 'v[0-9]+' }\n"
    "      - RemoteAddr=10.0.0.0/8\n"
    "    filters:\n"
    "      - StripPrefix=1\n"
    "      - AddRequestHeader=X-Gateway, sl\"uice\n"
    "      - name: RequestRateLimiter\n"
    "        args:\n"
    "          tiers:\n"
    "            - when: { role: admin }\n"
    "              limiter: none\n"
    "            - key: ip\n"
    "              limiter: per-ip\n"
    "          on_redis_error: deny\n"
    "  - id: slow\n"
    "    uri: http://127.0.0.1:9001\n"
    "    filters:\n"
    "      - name: RequestRateLimiter\n"
    "        args: { key: route, limiter: smooth, backend: local }\n";

static char *json;

static void
setup(void)
{
    struct config_errors errs;
    struct config *cfg;

    config_errors_init(&errs);
    cfg = config_parse(yaml, strlen(yaml), "t.yaml", &errs);
    cr_assert_not_null(cfg, "%s", errs.n > 0 ? errs.v[0] : "?");
    config_errors_deinit(&errs);
    json = config_routes_json(cfg);
    config_unref(cfg);
}

static void
teardown(void)
{
    free(json);
}

TestSuite(routes_json, .init = setup, .fini = teardown);

static void
assert_has(const char *want)
{
    cr_assert(strstr(json, want) != NULL, "no %s in %s", want, json);
}

Test(routes_json, routes_come_in_file_order_with_upstream_and_timeouts)
{
    const char *api = strstr(json, "{\"id\":\"api\"");
    const char *slow = strstr(json, "{\"id\":\"slow\"");

    cr_assert(api != NULL && slow != NULL && api < slow, "%s", json);
    assert_has("\"uri\":\"http://127.0.0.1:9000/base\","
               "\"connect_timeout_ms\":2000,\"response_timeout_ms\":60000");
    cr_assert_eq(json[strlen(json) - 1], '\n');
}

Test(routes_json, predicates_show_their_arguments)
{
    assert_has("{\"name\":\"Path\",\"args\":[\"/api/**\",\"/v1/**\"]}");
    assert_has("{\"name\":\"Header\",\"args\":[\"X-Version\",\"v[0-9]+\"]}");
    assert_has("{\"name\":\"RemoteAddr\",\"args\":[\"10.0.0.0/8\"]}");
}

Test(routes_json, filter_values_are_escaped_as_json)
{
    assert_has("{\"name\":\"StripPrefix\",\"args\":[\"1\"]}");
    assert_has("{\"name\":\"AddRequestHeader\",\"args\":[\"X-Gateway\","
               "\"sl\\\"uice\"]}");
}

Test(routes_json, rate_limiters_show_tiers_backend_and_failure_policy)
{
    assert_has("\"tiers\":[{\"role\":\"admin\",\"key\":");
    assert_has("\"limiter\":\"none\"}");
    assert_has("\"limiter\":\"per-ip\"}");
    assert_has("\"backend\":\"redis\",\"on_redis_error\":\"deny\"");
    assert_has("\"backend\":\"local\",\"on_redis_error\":\"local\"");
}

Test(routes_json, limiters_show_algorithm_mode_and_rules)
{
    assert_has("{\"name\":\"per-ip\",\"algorithm\":\"gcra\"");
    assert_has("\"mode\":\"delay\",\"max_delay_ms\":2000");
    assert_has("{\"name\":\"smooth\",\"algorithm\":\"leaky_bucket\"");
    /* The lease, where there is one. */
    assert_has("\"mode\":\"deny\",\"lease\":4,\"rules\":");
    cr_assert_null(strstr(strstr(json, "\"lease\":") + 1, "\"lease\":"),
                   "smooth has no lease: %s", json);
}

/* The limiters built from redis-rate-limiter follow those of limiters:. */
Test(routes_json_scg, derived_limiters_are_listed_after_the_named_ones)
{
    static const char text[] =
        "limiters:\n"
        "  per-ip: { algorithm: gcra, rate: 5/s, burst: 10 }\n"
        "routes:\n"
        "  - id: a\n"
        "    uri: http://127.0.0.1:9000\n"
        "    filters:\n"
        "      - name: RequestRateLimiter\n"
        "        args: { key: ip, limiter: per-ip }\n"
        "      - name: RequestRateLimiter\n"
        "        args:\n"
        "          redis-rate-limiter.replenishRate: 10\n"
        "          redis-rate-limiter.burstCapacity: 20\n";
    struct config_errors errs;
    struct config *cfg;
    char *out;
    const char *named;
    const char *derived;

    config_errors_init(&errs);
    cfg = config_parse(text, strlen(text), "t.yaml", &errs);
    cr_assert_not_null(cfg, "%s", errs.n > 0 ? errs.v[0] : "?");
    config_errors_deinit(&errs);
    out = config_routes_json(cfg);
    named = strstr(out, "],\"limiters\":[{\"name\":\"per-ip\"");
    derived = strstr(out, "]},{\"name\":\"scg.a.1\",\"algorithm\":"
                          "\"token_bucket\"");
    cr_assert(named != NULL && derived != NULL && named < derived, "%s", out);
    cr_assert(strstr(derived, "\"rules\":[{\"limit\":10,\"window_ms\":1000,"
                              "\"burst\":20}]}]}\n") != NULL,
              "%s", out);
    free(out);
    config_unref(cfg);
}

/* One example of every predicate and filter kind: the entry a file gives
 * and the arguments GET /routes and --check must show for it, as given.
 * Several kinds showed only some of theirs (MapRequestHeader its first
 * header, SetStatus and RedirectTo no status, Weight and the time
 * predicates nothing at all). */
struct example {
    const char *entry; /* a YAML list item */
    const char *want;  /* {"name":...,"args":[...]} */
};

static const struct example predicate_examples[] = {
    {"Path=/all/**, /every/**",
     "{\"name\":\"Path\",\"args\":[\"/all/**\",\"/every/**\"]}"},
    {"Method=GET, POST", "{\"name\":\"Method\",\"args\":[\"GET\",\"POST\"]}"},
    {"Host=**.example.org",
     "{\"name\":\"Host\",\"args\":[\"**.example.org\"]}"},
    {"Header=X-Id, [0-9]+",
     "{\"name\":\"Header\",\"args\":[\"X-Id\",\"[0-9]+\"]}"},
    {"Query=color, gr.+", "{\"name\":\"Query\",\"args\":[\"color\",\"gr.+\"]}"},
    {"RemoteAddr=192.168.1.0/24, 10.0.0.0/8",
     "{\"name\":\"RemoteAddr\",\"args\":[\"192.168.1.0/24\",\"10.0.0.0/8\"]}"},
    {"XForwardedRemoteAddr=172.16.0.0/12",
     "{\"name\":\"XForwardedRemoteAddr\",\"args\":[\"172.16.0.0/12\"]}"},
    {"After=2017-01-20T17:42:47.789-07:00[America/Denver]",
     "{\"name\":\"After\",\"args\":[\"2017-01-20T17:42:47.789-07:00[America/"
     "Denver]\"]}"},
    {"Before=2037-01-20T17:42:47.789-07:00",
     "{\"name\":\"Before\",\"args\":[\"2037-01-20T17:42:47.789-07:00\"]}"},
    {"Between=2017-01-20T17:42:47Z, 2037-01-21T17:42:47Z",
     "{\"name\":\"Between\",\"args\":[\"2017-01-20T17:42:47Z\","
     "\"2037-01-21T17:42:47Z\"]}"},
    {"Cookie=chocolate, ch.p",
     "{\"name\":\"Cookie\",\"args\":[\"chocolate\",\"ch.p\"]}"},
    {"Weight=group1, 8", "{\"name\":\"Weight\",\"args\":[\"group1\",\"8\"]}"},
};

static const struct example filter_examples[] = {
    {"StripPrefix=2", "{\"name\":\"StripPrefix\",\"args\":[\"2\"]}"},
    {"PrefixPath=/mypath", "{\"name\":\"PrefixPath\",\"args\":[\"/mypath\"]}"},
    {"RewritePath=/all/(?<rest>.*), /new/${rest}",
     "{\"name\":\"RewritePath\",\"args\":[\"/all/(?<rest>.*)\","
     "\"/new/${rest}\"]}"},
    {"SetPath=/fixed", "{\"name\":\"SetPath\",\"args\":[\"/fixed\"]}"},
    {"AddRequestHeader=X-A, a",
     "{\"name\":\"AddRequestHeader\",\"args\":[\"X-A\",\"a\"]}"},
    {"SetRequestHeader=X-B, b",
     "{\"name\":\"SetRequestHeader\",\"args\":[\"X-B\",\"b\"]}"},
    {"RemoveRequestHeader=X-C",
     "{\"name\":\"RemoveRequestHeader\",\"args\":[\"X-C\"]}"},
    {"AddResponseHeader=X-D, d",
     "{\"name\":\"AddResponseHeader\",\"args\":[\"X-D\",\"d\"]}"},
    {"SetResponseHeader=X-E, e",
     "{\"name\":\"SetResponseHeader\",\"args\":[\"X-E\",\"e\"]}"},
    {"RemoveResponseHeader=X-F",
     "{\"name\":\"RemoveResponseHeader\",\"args\":[\"X-F\"]}"},
    {"PreserveHostHeader", "{\"name\":\"PreserveHostHeader\",\"args\":[]}"},
    {"AddRequestParameter=red, blue",
     "{\"name\":\"AddRequestParameter\",\"args\":[\"red\",\"blue\"]}"},
    {"RemoveRequestParameter=green",
     "{\"name\":\"RemoveRequestParameter\",\"args\":[\"green\"]}"},
    {"MapRequestHeader=X-From, X-To",
     "{\"name\":\"MapRequestHeader\",\"args\":[\"X-From\",\"X-To\"]}"},
    {"SetRequestHostHeader=example.org",
     "{\"name\":\"SetRequestHostHeader\",\"args\":[\"example.org\"]}"},
    {"DedupeResponseHeader=Access-Control-Allow-Origin, RETAIN_LAST",
     "{\"name\":\"DedupeResponseHeader\",\"args\":[\"Access-Control-Allow-"
     "Origin\",\"RETAIN_LAST\"]}"},
    {"RewriteResponseHeader=X-R, password=[^&]+, password=***",
     "{\"name\":\"RewriteResponseHeader\",\"args\":[\"X-R\",\"password=[^&]+\","
     "\"password=***\"]}"},
    {"RewriteLocationResponseHeader=NEVER_STRIP, Location",
     "{\"name\":\"RewriteLocationResponseHeader\",\"args\":[\"NEVER_STRIP\","
     "\"Location\"]}"},
    {"SecureHeaders", "{\"name\":\"SecureHeaders\",\"args\":[]}"},
    {"SetStatus=401", "{\"name\":\"SetStatus\",\"args\":[\"401\"]}"},
    {"RedirectTo=302, https://acme.org, true",
     "{\"name\":\"RedirectTo\",\"args\":[\"302\",\"https://acme.org\","
     "\"true\"]}"},
    {"RequestSize=5MB", "{\"name\":\"RequestSize\",\"args\":[\"5MB\"]}"},
    {"RequestHeaderSize=1000B, X-Too-Big",
     "{\"name\":\"RequestHeaderSize\",\"args\":[\"1000B\",\"X-Too-Big\"]}"},
    {"{name: Retry, args: {retries: 3, methods: GET}}",
     "{\"name\":\"Retry\",\"args\":[\"3\",null,\"GET\"]}"},
};

/* True when 'examples' has an entry for the kind named 'name'. */
static bool
has_example(const struct example *examples, size_t n, const char *name)
{
    char prefix[128];

    snprintf(prefix, sizeof(prefix), "{\"name\":\"%s\",", name);
    for (size_t i = 0; i < n; i++) {
        if (strncmp(examples[i].want, prefix, strlen(prefix)) == 0) {
            return true;
        }
    }
    return false;
}

/* A route per item of 'examples', with that item alone under 'list'
 * (predicates or filters), so that no two of them conflict. */
static void
add_example_routes(struct strbuf *b, const char *list,
                   const struct example *examples, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        strbuf_addf(b,
                    "  - id: %s%zu\n"
                    "    uri: http://127.0.0.1:9000\n"
                    "    %s:\n"
                    "      - %s\n",
                    list, i, list, examples[i].entry);
    }
}

Test(routes_json, every_kind_shows_all_of_its_arguments_as_given)
{
    size_t npred = sizeof(predicate_examples) / sizeof(predicate_examples[0]);
    size_t nfilt = sizeof(filter_examples) / sizeof(filter_examples[0]);
    size_t nspecs;
    const struct kind_spec *specs;
    struct strbuf text = STRBUF_INIT;
    struct config_errors errs;
    struct config *cfg;
    char *out;

    specs = predicate_specs(&nspecs);
    for (size_t i = 0; i < nspecs; i++) {
        cr_assert(has_example(predicate_examples, npred, specs[i].name),
                  "no example of the predicate %s", specs[i].name);
    }
    specs = filter_specs(&nspecs);
    for (size_t i = 0; i < nspecs; i++) {
        cr_assert(has_example(filter_examples, nfilt, specs[i].name),
                  "no example of the filter %s", specs[i].name);
    }
    strbuf_adds(&text, "routes:\n");
    add_example_routes(&text, "predicates", predicate_examples, npred);
    add_example_routes(&text, "filters", filter_examples, nfilt);
    config_errors_init(&errs);
    cfg = config_parse(text.p, text.n, "t.yaml", &errs);
    cr_assert_not_null(cfg, "%s\n%s", errs.n > 0 ? errs.v[0] : "?", text.p);
    config_errors_deinit(&errs);
    out = config_routes_json(cfg);
    for (size_t i = 0; i < npred; i++) {
        cr_expect(strstr(out, predicate_examples[i].want) != NULL,
                  "%s: no %s in %s", predicate_examples[i].entry,
                  predicate_examples[i].want, out);
    }
    for (size_t i = 0; i < nfilt; i++) {
        cr_expect(strstr(out, filter_examples[i].want) != NULL,
                  "%s: no %s in %s", filter_examples[i].entry,
                  filter_examples[i].want, out);
    }
    free(out);
    config_unref(cfg);
    free(strbuf_take(&text));
}
