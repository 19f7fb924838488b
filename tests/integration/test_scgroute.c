/*
 * Spring Cloud Gateway's predicates and filters end to end: the real
 * gateway in front of sluice-echo, one test per factory, each with its
 * own pair of processes.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* The echo's request as the upstream saw it, field 'field' equal 'want'. */
static void
assert_echo_field(const struct http_response *r, const char *field,
                  const char *want)
{
    char *got = echo_field(r->body, field);

    cr_assert(got != NULL, "no \"%s\" in %s", field, r->body);
    cr_assert_str_eq(got, want, "%s: got %s, want %s", field, got, want);
    free(got);
}

static void
assert_header(const struct http_response *r, const char *name, const char *want)
{
    char *got = http_response_header(r, name);

    if (want == NULL) {
        cr_assert_null(got, "%s: %s", name, got);
        return;
    }
    cr_assert(got != NULL, "no %s in %s", name, r->headers);
    cr_assert_str_eq(got, want);
    free(got);
}

/* ---- predicates ---- */

Test(scgroute, after_before_and_between_follow_the_clock)
{
    struct echo_stack st;

    echo_stack_start(&st, "", "",
                     "  - id: future\n"
                     "    uri: http://@ECHO@\n"
                     "    predicates: [Path=/t, "
                     "'After=2999-01-20T17:42:47.789-07:00[America/Denver]']\n"
                     "  - id: window\n"
                     "    uri: http://@ECHO@\n"
                     "    predicates:\n"
                     "      - Path=/t\n"
                     "      - After=2017-01-20T17:42:47.789-07:00\n"
                     "      - Before=2999-01-20T17:42:47Z\n"
                     "      - name: Between\n"
                     "        args: {datetime1: '2017-01-20T00:00:00Z', "
                     "datetime2: '2999-01-21T00:00:00Z'}\n"
                     "    filters: ['SetStatus=202']\n"
                     "  - id: closed\n"
                     "    uri: http://@ECHO@\n"
                     "    predicates: [Path=/c, "
                     "'Between=2017-01-20T00:00:00Z, 2017-01-21T00:00:00Z']\n");
    cr_assert_eq(echo_stack_get_status(&st, "/t", NULL), 202);
    cr_assert_eq(echo_stack_get_status(&st, "/c", NULL), 404);
    echo_stack_stop(&st);
}

Test(scgroute, cookie_matches_the_whole_value)
{
    struct echo_stack st;

    echo_stack_start(&st, "", "",
                     "  - id: choc\n"
                     "    uri: http://@ECHO@\n"
                     "    predicates: ['Cookie=chocolate, ch.p']\n");
    cr_assert_eq(
        echo_stack_get_status(
            &st, "/", (const char *[]){"Cookie: a=1; chocolate=chip", NULL}),
        200);
    cr_assert_eq(
        echo_stack_get_status(
            &st, "/", (const char *[]){"Cookie: chocolate=chips", NULL}),
        404);
    cr_assert_eq(echo_stack_get_status(&st, "/", NULL), 404);
    echo_stack_stop(&st);
}

/* Sends 'n' GETs to 'path' and counts the statuses. */
static void
load(const struct echo_stack *st, const char *path, size_t n,
     struct load_result *res)
{
    char *u = harness_strf("http://127.0.0.1:%u%s", st->gw_port, path);
    const char *urls[1] = {u};

    http_load(urls, 1, NULL, 0, 8, n, 5000, res);
    free(u);
    cr_assert_eq(res->sent, n, "%zu errors", res->errors);
}

Test(scgroute, weight_splits_traffic_in_proportion)
{
    struct echo_stack st;
    struct load_result res;

    echo_stack_start(&st, "", "",
                     "  - id: high\n"
                     "    uri: http://@ECHO@\n"
                     "    predicates: [Path=/w, 'Weight=group1, 8']\n"
                     "    filters: ['SetStatus=202']\n"
                     "  - id: low\n"
                     "    uri: http://@ECHO@\n"
                     "    predicates: [Path=/w, 'Weight=group1, 2']\n"
                     "  - id: off\n"
                     "    uri: http://@ECHO@\n"
                     "    predicates: [Path=/z, 'Weight=g2, 0']\n"
                     "    filters: ['SetStatus=202']\n"
                     "  - id: all\n"
                     "    uri: http://@ECHO@\n"
                     "    predicates: [Path=/z, 'Weight=g2, 5']\n");
    load(&st, "/w", 1000, &res);
    cr_assert_eq(res.status[202] + res.status[200], 1000);
    /* binomial(1000, 0.8): sigma 12.6; 8 sigma is 101. */
    cr_assert(res.status[202] > 800 - 101 && res.status[202] < 800 + 101,
              "high got %zu of 1000", res.status[202]);
    load(&st, "/z", 200, &res);
    cr_assert_eq(res.status[200], 200, "weight 0 never matches");
    echo_stack_stop(&st);
}

Test(scgroute, xforwarded_remote_addr_reads_the_trusted_chain)
{
    struct echo_stack st;

    echo_stack_start(&st, "  trusted_proxies: [127.0.0.1/32]\n", "",
                     "  - id: lan\n"
                     "    uri: http://@ECHO@\n"
                     "    predicates: [XForwardedRemoteAddr=192.168.1.0/24]\n");
    cr_assert_eq(
        echo_stack_get_status(
            &st, "/", (const char *[]){"X-Forwarded-For: 192.168.1.10", NULL}),
        200);
    cr_assert_eq(
        echo_stack_get_status(
            &st, "/",
            (const char *[]){"X-Forwarded-For: 192.168.1.10, 10.1.1.1", NULL}),
        404, "the nearest untrusted hop decides");
    cr_assert_eq(echo_stack_get_status(&st, "/", NULL), 404);
    echo_stack_stop(&st);
}

/* ---- request filters ---- */

Test(scgroute, add_and_remove_request_parameters)
{
    struct echo_stack st;
    struct http_response r;

    echo_stack_start(&st, "", "",
                     "  - id: q\n"
                     "    uri: http://@ECHO@\n"
                     "    predicates: ['Path=/q/{seg}']\n"
                     "    filters:\n"
                     "      - RemoveRequestParameter=secret\n"
                     "      - AddRequestParameter=red, blue {seg}\n"
                     "      - name: AddRequestParameter\n"
                     "        args: {name: 'a&b', value: 'c=d'}\n");
    cr_assert_eq(
        echo_stack_get(&st, "/q/x?secret=1&keep=2&sec%72et=3", NULL, &r), 200);
    assert_echo_field(&r, "query", "keep=2&red=blue%20x&a%26b=c%3Dd");
    http_response_free(&r);
    cr_assert_eq(echo_stack_get(&st, "/q/y?secret=1", NULL, &r), 200);
    assert_echo_field(&r, "query", "red=blue%20y&a%26b=c%3Dd");
    http_response_free(&r);
    echo_stack_stop(&st);
}

Test(scgroute, map_request_header_copies_values)
{
    struct echo_stack st;
    struct http_response r;

    echo_stack_start(&st, "", "",
                     "  - id: m\n"
                     "    uri: http://@ECHO@\n"
                     "    filters: ['MapRequestHeader=Blue, X-Request-Red']\n");
    cr_assert_eq(
        echo_stack_get(&st, "/", (const char *[]){"Blue: sky", NULL}, &r), 200);
    cr_assert(echo_has_header(r.body, "X-Request-Red", "sky"), "%s", r.body);
    cr_assert(echo_has_header(r.body, "Blue", "sky"));
    http_response_free(&r);
    echo_stack_stop(&st);
}

Test(scgroute, set_request_host_header_sends_that_host)
{
    struct echo_stack st;
    struct http_response r;

    echo_stack_start(&st, "", "",
                     "  - id: h\n"
                     "    uri: http://@ECHO@\n"
                     "    filters:\n"
                     "      - name: SetRequestHostHeader\n"
                     "        args: {host: example.org}\n");
    cr_assert_eq(echo_stack_get(&st, "/", NULL, &r), 200);
    cr_assert(echo_has_header(r.body, "Host", "example.org"), "%s", r.body);
    cr_assert_eq(echo_header_count(r.body, "Host"), 1);
    http_response_free(&r);
    echo_stack_stop(&st);
}

/* ---- response filters ---- */

Test(scgroute, dedupe_response_header_keeps_one_value)
{
    struct echo_stack st;
    struct http_response r;

    echo_stack_start(&st, "", "",
                     "  - id: d\n"
                     "    uri: http://@ECHO@\n"
                     "    filters: ['DedupeResponseHeader=X-A X-B, "
                     "RETAIN_UNIQUE']\n");
    cr_assert_eq(echo_stack_get(&st,
                                "/?set_header=X-A:1&set_header=X-A:1"
                                "&set_header=X-A:2&set_header=X-B:b"
                                "&set_header=X-C:c&set_header=X-C:c",
                                NULL, &r),
                 200);
    cr_assert_eq(http_response_header_count(&r, "X-A"), 2, "%s", r.headers);
    cr_assert_eq(http_response_header_count(&r, "X-B"), 1);
    cr_assert_eq(http_response_header_count(&r, "X-C"), 2, "not listed");
    http_response_free(&r);
    echo_stack_stop(&st);
}

Test(scgroute, rewrite_response_header_masks_a_value)
{
    struct echo_stack st;
    struct http_response r;

    echo_stack_start(&st, "", "",
                     "  - id: rw\n"
                     "    uri: http://@ECHO@\n"
                     "    filters: ['RewriteResponseHeader=X-Response-Red, "
                     "password=[^&]+, password=***']\n");
    cr_assert_eq(echo_stack_get(&st,
                                "/?set_header=X-Response-Red:"
                                "/42%3Fuser%3Dford%26password%3Domg%26flag%3D1",
                                NULL, &r),
                 200);
    assert_header(&r, "X-Response-Red", "/42?user=ford&password=***&flag=1");
    http_response_free(&r);
    echo_stack_stop(&st);
}

Test(scgroute, rewrite_location_puts_the_gateway_host_in)
{
    struct echo_stack st;
    struct http_response r;
    char *want;

    echo_stack_start(&st, "", "",
                     "  - id: loc\n"
                     "    uri: http://@ECHO@\n"
                     "    filters: [RewriteLocationResponseHeader]\n");
    cr_assert_eq(echo_stack_get(&st,
                                "/some/object?status=201&set_header=Location:"
                                "http://backend.internal:9000/v2/some/id",
                                NULL, &r),
                 201);
    want = harness_strf("http://127.0.0.1:%u/some/id", st.gw_port);
    assert_header(&r, "Location", want);
    free(want);
    http_response_free(&r);
    echo_stack_stop(&st);
}

Test(scgroute, secure_headers_adds_the_defaults_but_disabled_ones)
{
    struct echo_stack st;
    struct http_response r;

    echo_stack_start(&st, "", "",
                     "  - id: s\n"
                     "    uri: http://@ECHO@\n"
                     "    filters:\n"
                     "      - name: SecureHeaders\n"
                     "        args:\n"
                     "          disable: [x-frame-options]\n");
    cr_assert_eq(
        echo_stack_get(&st, "/?set_header=Referrer-Policy:origin", NULL, &r),
        200);
    assert_header(&r, "X-Frame-Options", NULL);
    assert_header(&r, "X-Content-Type-Options", "nosniff");
    assert_header(&r, "Strict-Transport-Security", "max-age=631138519");
    assert_header(&r, "X-Xss-Protection", "1 ; mode=block");
    assert_header(&r, "Referrer-Policy", "origin");
    cr_assert_eq(http_response_header_count(&r, "Referrer-Policy"), 1);
    http_response_free(&r);
    echo_stack_stop(&st);
}

Test(scgroute, set_status_changes_the_status_and_keeps_the_body)
{
    struct echo_stack st;
    struct http_response r;

    echo_stack_start(&st, "", "",
                     "  - id: st\n"
                     "    uri: http://@ECHO@\n"
                     "    filters: [SetStatus=UNAUTHORIZED]\n");
    cr_assert_eq(echo_stack_get(&st, "/x", NULL, &r), 401);
    assert_echo_field(&r, "path", "/x");
    cr_assert(strstr(r.headers, "401 Unauthorized") != NULL, "%s", r.headers);
    http_response_free(&r);
    /* An upstream 204 has no body and says nothing of its length; as a
     * 401 it must say Content-Length: 0, or the client waits for a body
     * until the connection closes. */
    cr_assert_eq(echo_stack_get(&st, "/x?status=204", NULL, &r), 401,
                 "curl error %d", (int)r.err);
    assert_header(&r, "Content-Length", "0");
    http_response_free(&r);
    echo_stack_stop(&st);
}

/* ---- filters that answer ---- */

Test(scgroute, redirect_to_answers_without_the_upstream)
{
    struct echo_stack st;
    struct http_response r;
    struct echo_stats es;

    echo_stack_start(
        &st, "", "",
        "  - id: r\n"
        "    uri: http://@ECHO@\n"
        "    filters: ['RedirectTo=302, https://acme.org, true']\n");
    cr_assert_eq(echo_stack_get(&st, "/old?skip=10", NULL, &r), 302);
    assert_header(&r, "Location", "https://acme.org?skip=10");
    cr_assert_eq(r.body_len, 0);
    http_response_free(&r);
    cr_assert_eq(echo_stats(st.echo_port, &es), 0);
    cr_assert_eq(es.requests, 0, "the upstream was never asked");
    echo_stack_stop(&st);
}

Test(scgroute, request_size_refuses_large_bodies_with_413)
{
    struct echo_stack st;
    struct http_response r;
    char body[1001];
    char *url;
    char *raw;
    const char chunked[] = "POST /up HTTP/1.1\r\nHost: x\r\n"
                           "Transfer-Encoding: chunked\r\n"
                           "Connection: close\r\n\r\n"
                           "258\r\n%s\r\n258\r\n%s\r\n0\r\n\r\n";
    char piece[601];
    char *req;

    memset(body, 'b', sizeof(body));
    memset(piece, 'c', 600);
    piece[600] = '\0';
    echo_stack_start(&st, "", "",
                     "  - id: up\n"
                     "    uri: http://@ECHO@\n"
                     "    filters: [RequestSize=1000B]\n");
    url = harness_strf("http://127.0.0.1:%u/up", st.gw_port);
    http_request(&r, "POST", url, NULL, body, 1000, 5000);
    cr_assert_eq(r.status, 200);
    http_response_free(&r);
    http_request(&r, "POST", url, NULL, body, 1001, 5000);
    cr_assert_eq(r.status, 413);
    assert_header(&r, "Content-Type", "application/problem+json");
    assert_header(&r, "errorMessage",
                  "Request size is larger than permissible limit. Request "
                  "size is 1001 B where permissible limit is 1000 B");
    http_response_free(&r);
    /* 1200 bytes in two chunks: counted as they arrived. */
    req = harness_strf(chunked, piece, piece);
    raw = raw_http(st.gw_port, req, strlen(req), 5000);
    cr_assert(raw != NULL && strncmp(raw, "HTTP/1.1 413", 12) == 0, "%s",
              raw != NULL ? raw : "(refused)");
    free(raw);
    free(req);
    free(url);
    echo_stack_stop(&st);
}

Test(scgroute, request_header_size_refuses_a_large_field_with_431)
{
    struct echo_stack st;
    struct http_response r;
    char big[1100];
    char *line;
    char *why;

    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    line = harness_strf("X-Big: %s", big);
    echo_stack_start(&st, "", "",
                     "  - id: h\n"
                     "    uri: http://@ECHO@\n"
                     "    filters: ['RequestHeaderSize=1000B, X-Why']\n");
    cr_assert_eq(
        echo_stack_get(&st, "/", (const char *[]){"X-Small: 1", NULL}, &r),
        200);
    http_response_free(&r);
    cr_assert_eq(echo_stack_get(&st, "/", (const char *[]){line, NULL}, &r),
                 431);
    why = http_response_header(&r, "X-Why");
    cr_assert(why != NULL && strstr(why, "'X-Big' is") != NULL, "%s",
              r.headers);
    free(why);
    assert_header(&r, "Content-Type", "application/problem+json");
    http_response_free(&r);
    free(line);
    echo_stack_stop(&st);
}

/* ---- Retry ---- */

static long
echo_requests(const struct echo_stack *st)
{
    struct echo_stats es;

    cr_assert_eq(echo_stats(st->echo_port, &es), 0);
    return es.requests;
}

Test(scgroute, retry_repeats_a_5xx_get_as_many_times_as_configured)
{
    struct echo_stack st;

    echo_stack_start(&st, "", "",
                     "  - id: r\n"
                     "    uri: http://@ECHO@\n"
                     "    filters: ['Retry=2']\n");
    cr_assert_eq(echo_stack_get_status(&st, "/?status=503", NULL), 503);
    cr_assert_eq(echo_requests(&st), 3, "the first attempt and two retries");
    cr_assert_eq(echo_stack_get_status(&st, "/?status=404", NULL), 404);
    cr_assert_eq(echo_requests(&st), 4, "a 404 is not in the 5xx series");
    cr_assert_eq(echo_stack_get_status(&st, "/?status=200", NULL), 200);
    cr_assert_eq(echo_requests(&st), 5);
    echo_stack_stop(&st);
}

Test(scgroute, retry_leaves_other_methods_alone_unless_listed)
{
    struct echo_stack st;
    struct http_response r;
    char *u;
    const char body[] = "the same body every time";

    echo_stack_start(&st, "", "",
                     "  - id: get-only\n"
                     "    uri: http://@ECHO@\n"
                     "    predicates: [Path=/g]\n"
                     "    filters: ['Retry=2']\n"
                     "  - id: posts\n"
                     "    uri: http://@ECHO@\n"
                     "    predicates: [Path=/p]\n"
                     "    filters:\n"
                     "      - name: Retry\n"
                     "        args: {retries: 2, methods: [GET, POST]}\n");
    u = harness_strf("http://127.0.0.1:%u/g?status=503", st.gw_port);
    http_request(&r, "POST", u, NULL, body, strlen(body), 5000);
    cr_assert_eq(r.status, 503);
    http_response_free(&r);
    free(u);
    cr_assert_eq(echo_requests(&st), 1, "POST is not retried by default");
    u = harness_strf("http://127.0.0.1:%u/p?status=503", st.gw_port);
    http_request(&r, "POST", u, NULL, body, strlen(body), 5000);
    cr_assert_eq(r.status, 503);
    assert_echo_field(&r, "body", body);
    http_response_free(&r);
    free(u);
    cr_assert_eq(echo_requests(&st), 4, "the body was kept for the retries");
    echo_stack_stop(&st);
}

Test(scgroute, retry_does_not_resend_a_body_too_large_to_keep)
{
    struct echo_stack st;
    struct http_response r;
    size_t n = 2 * 1024 * 1024;
    char *body = malloc(n);
    char *u;

    memset(body, 'x', n);
    echo_stack_start(&st, "", "",
                     "  - id: posts\n"
                     "    uri: http://@ECHO@\n"
                     "    filters: ['Retry=2, BAD_GATEWAY, POST']\n");
    u = harness_strf("http://127.0.0.1:%u/?status=503", st.gw_port);
    http_request(&r, "POST", u, NULL, body, n, 10000);
    cr_assert_eq(r.status, 503);
    http_response_free(&r);
    cr_assert_eq(echo_requests(&st), 1);
    free(u);
    free(body);
    echo_stack_stop(&st);
}

Test(scgroute, retry_backs_off_between_connect_failures)
{
    struct echo_stack st;
    uint16_t closed = harness_free_port();
    char *routes = harness_strf(
        "  - id: gone\n"
        "    uri: http://127.0.0.1:%u\n"
        "    filters:\n"
        "      - name: Retry\n"
        "        args:\n"
        "          retries: 2\n"
        "          backoff: {firstBackoff: 150ms, maxBackoff: 1s, factor: 2}\n",
        closed);
    int64_t t0;
    int64_t took;

    echo_stack_start(&st, "", "", routes);
    t0 = harness_now_ms();
    cr_assert_eq(echo_stack_get_status(&st, "/", NULL), 502);
    took = harness_now_ms() - t0;
    /* 150 ms, then 300 ms: never sooner; libevent's timers may run a
     * millisecond early, no more. */
    cr_assert(took >= 445, "answered after %lld ms", (long long)took);
    cr_assert(took < 5000, "answered after %lld ms", (long long)took);
    free(routes);
    echo_stack_stop(&st);
}

Test(scgroute, retry_stops_at_its_total_timeout)
{
    struct echo_stack st;
    int64_t t0;
    int64_t took;
    long n;

    echo_stack_start(&st, "", "",
                     "  - id: r\n"
                     "    uri: http://@ECHO@\n"
                     "    filters:\n"
                     "      - name: Retry\n"
                     "        args:\n"
                     "          retries: 10\n"
                     "          backoff: {firstBackoff: 300ms, factor: 1}\n"
                     "          timeout: 750ms\n");
    t0 = harness_now_ms();
    cr_assert_eq(echo_stack_get_status(&st, "/?status=500", NULL), 500);
    took = harness_now_ms() - t0;
    n = echo_requests(&st);
    /* At 0 and 300 ms, maybe 600: no retry may start past 750 ms. */
    cr_assert(n >= 2 && n <= 3, "%ld attempts", n);
    cr_assert(took < 3000, "answered after %lld ms", (long long)took);
    echo_stack_stop(&st);
}

Test(scgroute, retry_never_follows_a_response_already_begun)
{
    struct echo_stack st;
    struct http_download d;
    char *u;

    echo_stack_start(&st, "", "",
                     "  - id: r\n"
                     "    uri: http://@ECHO@\n"
                     "    filters: ['Retry=3']\n");
    u = harness_strf("http://127.0.0.1:%u/?bytes=4000000&break_after=1000000",
                     st.gw_port);
    cr_assert_neq(http_download(&d, u, NULL), 0, "the cut must show");
    cr_assert_eq(d.status, 200);
    /* Begun, and cut: what the gateway had not yet written goes with
     * the connection. */
    cr_assert(d.body_bytes > 0 && d.body_bytes < 4000000, "%llu bytes",
              (unsigned long long)d.body_bytes);
    http_download_free(&d);
    free(u);
    cr_assert_eq(echo_requests(&st), 1);
    echo_stack_stop(&st);
}

static bool
logged_499(void *arg)
{
    return proc_log_contains(arg, "status=499");
}

Test(scgroute, retry_ends_when_the_client_leaves_during_a_backoff)
{
    struct echo_stack st;
    struct http_response r;
    char *u;

    echo_stack_start(&st, "", "",
                     "  - id: r\n"
                     "    uri: http://@ECHO@\n"
                     "    filters:\n"
                     "      - name: Retry\n"
                     "        args:\n"
                     "          retries: 3\n"
                     "          backoff: {firstBackoff: 5s}\n");
    /* The client gives up 300 ms into the first 5 s backoff. */
    u = harness_strf("http://127.0.0.1:%u/?status=503", st.gw_port);
    http_request(&r, "GET", u, NULL, NULL, 0, 300);
    cr_assert_eq(r.status, 0);
    http_response_free(&r);
    free(u);
    cr_assert(harness_wait_until(logged_499, &st.gw, 5000),
              "the exchange did not end when its client left");
    /* Ended, so no attempt can follow: the first was the only one. */
    cr_assert_eq(echo_requests(&st), 1);
    cr_assert_eq(echo_stack_get_status(&st, "/?status=200", NULL), 200);
    echo_stack_stop(&st);
}
