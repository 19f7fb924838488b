/*
 * test_echo.c - sluice-echo, the demo backend and the other integration
 * tests' upstream, driven through the harness; plus the harness's own JSON
 * lookups. Needs SLUICE_ECHO_BIN.
 */
#include "harness.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <criterion/criterion.h>

#define GIB ((uint64_t)1 << 30)
#define MIB ((uint64_t)1 << 20)

static struct proc echo;
static uint16_t port;

static void
start_echo(void)
{
    echo_start(&echo, &port);
}

/* Every test ends here: the echo must exit 0 on SIGTERM, which under the
 * sanitizers also means no leak and no UB report. */
static void
stop_echo(void)
{
    cr_assert_eq(proc_stop(&echo, SIGTERM, 10000), 0,
                 "sluice-echo did not exit cleanly (output above)");
}

TestSuite(echo, .init = start_echo, .timeout = 120);

/* "http://127.0.0.1:PORT" + 'target'; valid until the next call. */
static const char *
at(const char *target)
{
    static char url[1024];

    snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", (unsigned)port, target);
    return url;
}

static void
assert_field(const char *json, const char *field, const char *want)
{
    char *got = echo_field(json, field);

    cr_assert_not_null(got, "no \"%s\" in %s", field, json);
    cr_assert_str_eq(got, want, "\"%s\": got \"%s\", want \"%s\"", field, got,
                     want);
    free(got);
}

static void
assert_header(const struct http_response *r, const char *name, const char *want)
{
    char *got = http_response_header(r, name);

    cr_assert_not_null(got, "no %s header in:\n%s", name, r->headers);
    cr_assert_str_eq(got, want, "%s: got \"%s\", want \"%s\"", name, got, want);
    free(got);
}

static struct echo_stats
stats(void)
{
    struct echo_stats s;

    cr_assert_eq(echo_stats(port, &s), 0, "GET /__stats failed");
    return s;
}

static bool
one_aborted_and_no_connection(void *arg)
{
    struct echo_stats s;

    (void)arg;
    return echo_stats(port, &s) == 0 && s.aborted == 1 &&
           s.open_connections == 0;
}

static bool
no_connection_open(void *arg)
{
    struct echo_stats s;

    (void)arg;
    return echo_stats(port, &s) == 0 && s.open_connections == 0;
}

static int
connect_echo(void)
{
    struct sockaddr_in sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert(fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0,
              "connect to the echo failed");
    return fd;
}

static void
send_all(int fd, const char *s)
{
    size_t len = strlen(s);

    cr_assert_eq(send(fd, s, len, MSG_NOSIGNAL), (ssize_t)len);
}

Test(echo, reflects_method_uri_path_query_and_body)
{
    const char *headers[] = {"X-Test: one", "Content-Type: text/plain", NULL};
    struct http_response r;
    char *len;
    char *peer;

    cr_assert_eq(http_request(&r, "POST", at("/some/path?x=1&y=two"), headers,
                              "hello", 5, 5000),
                 0);
    cr_assert_eq(r.status, 200);
    assert_header(&r, "Content-Type", "application/json");
    len = harness_strf("%zu", r.body_len);
    assert_header(&r, "Content-Length", len);
    free(len);
    assert_field(r.body, "server", "sluice-echo");
    assert_field(r.body, "method", "POST");
    assert_field(r.body, "uri", "/some/path?x=1&y=two");
    assert_field(r.body, "path", "/some/path");
    assert_field(r.body, "query", "x=1&y=two");
    assert_field(r.body, "body", "hello");
    assert_field(r.body, "body_bytes", "5");
    cr_assert(echo_has_header(r.body, "x-test", "one"), "%s", r.body);
    cr_assert(echo_has_header(r.body, "Content-Length", "5"), "%s", r.body);
    cr_assert(echo_has_header(r.body, "Content-Type", "text/plain"), "%s",
              r.body);
    cr_assert_not(echo_has_header(r.body, "Expect", NULL), "%s", r.body);
    peer = echo_field(r.body, "peer");
    cr_assert(peer != NULL && strncmp(peer, "127.0.0.1:", 10) == 0, "peer %s",
              peer);
    free(peer);
    http_response_free(&r);
    stop_echo();
}

Test(echo, query_is_null_without_a_question_mark)
{
    struct http_response r;
    char *query;

    cr_assert_eq(http_get(&r, at("/plain"), 5000), 0);
    cr_assert_eq(r.status, 200);
    query = echo_field(r.body, "query");
    cr_assert_null(query, "query should be null, got \"%s\"", query);
    cr_assert_not_null(strstr(r.body, "\"query\":null"), "%s", r.body);
    assert_field(r.body, "body", "");
    assert_field(r.body, "body_bytes", "0");
    http_response_free(&r);

    cr_assert_eq(http_get(&r, at("/empty?"), 5000), 0);
    assert_field(r.body, "query", "");
    http_response_free(&r);
    stop_echo();
}

Test(echo, keeps_duplicate_headers_in_order)
{
    static const char req[] = "GET /dup HTTP/1.1\r\n"
                              "Host: test\r\n"
                              "X-Dup: first\r\n"
                              "X-Other: o\r\n"
                              "x-dup: second\r\n"
                              "Connection: close\r\n\r\n";
    char *got = raw_http(port, req, sizeof(req) - 1, 5000);
    char *json;
    char *first;
    char *a;
    char *b;

    cr_assert_not_null(got);
    cr_assert(strncmp(got, "HTTP/1.1 200", 12) == 0, "%s", got);
    json = strstr(got, "\r\n\r\n");
    cr_assert_not_null(json, "%s", got);
    cr_assert_eq(echo_header_count(json, "X-Dup"), 2, "%s", json);
    first = echo_header(json, "X-DUP");
    cr_assert_str_eq(first, "first");
    free(first);
    a = strstr(json, "[\"X-Dup\",\"first\"]");
    b = strstr(json, "[\"x-dup\",\"second\"]");
    cr_assert(a != NULL && b != NULL && a < b,
              "names and order must be kept: %s", json);
    free(got);
    stop_echo();
}

Test(echo, escapes_quotes_backslashes_and_control_characters)
{
    static const char body[] = "a\"b\\c\n\t\x01 caf\xc3\xa9 \xf0\x9f\x98\x80";
    const char *headers[] = {"X-Q: say \"hi\" \\o/", NULL};
    struct http_response r;
    char *q;

    cr_assert_eq(http_request(&r, "PUT", at("/esc"), headers, body,
                              sizeof(body) - 1, 5000),
                 0);
    assert_field(r.body, "body", body);
    q = echo_header(r.body, "X-Q");
    cr_assert_str_eq(q, "say \"hi\" \\o/");
    free(q);
    cr_assert_not_null(strstr(r.body, "\\u0001"), "%s", r.body);
    http_response_free(&r);
    stop_echo();
}

Test(echo, body_that_is_not_utf8_or_over_64k_is_null)
{
    struct http_response r;
    char *big = malloc(70000);
    char *body;

    cr_assert_eq(
        http_request(&r, "POST", at("/bin"), NULL, "\xff\xfe", 2, 5000), 0);
    cr_assert_not_null(strstr(r.body, "\"body\":null"), "%s", r.body);
    assert_field(r.body, "body_bytes", "2");
    http_response_free(&r);

    memset(big, 'a', 70000);
    cr_assert_eq(http_request(&r, "POST", at("/big"), NULL, big, 70000, 5000),
                 0);
    cr_assert_not_null(strstr(r.body, "\"body\":null"));
    assert_field(r.body, "body_bytes", "70000");
    http_response_free(&r);

    cr_assert_eq(http_request(&r, "POST", at("/edge"), NULL, big, 65536, 5000),
                 0);
    body = echo_field(r.body, "body");
    cr_assert(body != NULL && strlen(body) == 65536,
              "a 64 KiB text body is echoed");
    free(body);
    http_response_free(&r);
    free(big);
    stop_echo();
}

Test(echo, answers_every_method_evhttp_parses)
{
    static const char *methods[] = {"GET",   "POST",    "PUT",  "DELETE",
                                    "PATCH", "OPTIONS", "TRACE"};
    size_t i;

    for (i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
        struct http_response r;

        cr_assert_eq(
            http_request(&r, methods[i], at("/m"), NULL, NULL, 0, 5000), 0,
            "%s", methods[i]);
        cr_assert_eq(r.status, 200, "%s answered %ld", methods[i], r.status);
        assert_field(r.body, "method", methods[i]);
        http_response_free(&r);
    }
    stop_echo();
}

Test(echo, head_gets_content_length_but_no_body)
{
    static const char req[] = "HEAD /h HTTP/1.1\r\nHost: t\r\n"
                              "Connection: close\r\n\r\n";
    char *got = raw_http(port, req, sizeof(req) - 1, 5000);
    char *end;

    cr_assert_not_null(got);
    cr_assert(strncmp(got, "HTTP/1.1 200", 12) == 0, "%s", got);
    cr_assert_not_null(strstr(got, "Content-Length: "), "%s", got);
    end = strstr(got, "\r\n\r\n");
    cr_assert(end != NULL && end[4] == '\0', "no body after HEAD: %s", got);
    free(got);
    stop_echo();
}

Test(echo, status_parameter_sets_the_status)
{
    struct http_response r;

    cr_assert_eq(http_get(&r, at("/s?status=503"), 5000), 0);
    cr_assert_eq(r.status, 503);
    assert_field(r.body, "path", "/s");
    http_response_free(&r);

    cr_assert_eq(http_get(&r, at("/s?status=204"), 5000), 0);
    cr_assert_eq(r.status, 204);
    cr_assert_eq(r.body_len, 0);
    http_response_free(&r);
    stop_echo();
}

Test(echo, invalid_parameter_is_a_400_naming_it)
{
    static const char *bad[][2] = {
        {"/x?status=99", "status=99"},
        {"/x?status=2000", "status=2000"},
        {"/x?bytes=-1", "bytes=-1"},
        {"/x?sleep_ms=soon", "sleep_ms=soon"},
        {"/x?chunked=yes", "chunked=yes"},
        {"/x?set_header=Bad%20Name:v", "set_header=Bad Name:v"},
        {"/x?set_header=NoColon", "set_header=NoColon"},
    };
    size_t i;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct http_response r;

        cr_assert_eq(http_get(&r, at(bad[i][0]), 5000), 0);
        cr_assert_eq(r.status, 400, "%s gave %ld", bad[i][0], r.status);
        assert_field(r.body, "param", bad[i][1]);
        http_response_free(&r);
    }
    stop_echo();
}

Test(echo, bytes_streams_exactly_n_bytes_of_the_pattern)
{
    struct http_download d;
    struct http_response r;

    cr_assert_eq(http_download(&d, at("/b?bytes=1000003"), NULL), 0,
                 "curl error %d", d.err);
    cr_assert_eq(d.status, 200);
    cr_assert_eq(d.body_bytes, 1000003);
    cr_assert(d.is_pattern);
    cr_assert_not_null(strstr(d.headers, "Content-Length: 1000003\r\n"), "%s",
                       d.headers);
    cr_assert_not_null(
        strstr(d.headers, "Content-Type: application/octet-stream\r\n"));
    cr_assert_null(strstr(d.headers, "Transfer-Encoding"), "%s", d.headers);
    http_download_free(&d);

    cr_assert_eq(http_get(&r, at("/b?bytes=0"), 5000), 0);
    cr_assert_eq(r.status, 200);
    cr_assert_eq(r.body_len, 0);
    assert_header(&r, "Content-Length", "0");
    http_response_free(&r);
    stop_echo();
}

Test(echo, chunked_streams_without_content_length)
{
    struct http_download d;
    struct http_response r;

    cr_assert_eq(http_download(&d, at("/c?bytes=200000&chunked=1"), NULL), 0);
    cr_assert_eq(d.body_bytes, 200000);
    cr_assert(d.is_pattern);
    cr_assert_not_null(strstr(d.headers, "Transfer-Encoding: chunked\r\n"),
                       "%s", d.headers);
    cr_assert_null(strstr(d.headers, "Content-Length"), "%s", d.headers);
    http_download_free(&d);

    /* The JSON echo can be chunked too. */
    cr_assert_eq(http_get(&r, at("/cj?chunked=1"), 5000), 0);
    assert_header(&r, "Transfer-Encoding", "chunked");
    assert_field(r.body, "path", "/cj");
    http_response_free(&r);
    stop_echo();
}

Test(echo, break_after_truncates_the_body)
{
    struct http_download d;
    struct http_response r;

    cr_assert_eq(
        http_download(&d, at("/t?bytes=1000000&break_after=300000"), NULL), -1);
    cr_assert_eq(d.err, CURLE_PARTIAL_FILE, "curl error %d", d.err);
    cr_assert_eq(d.status, 200);
    cr_assert_eq(d.body_bytes, 300000);
    cr_assert(d.is_pattern);
    http_download_free(&d);

    cr_assert_eq(
        http_download(&d, at("/t?bytes=1000000&break_after=300000&chunked=1"),
                      NULL),
        -1);
    cr_assert(d.err == CURLE_PARTIAL_FILE || d.err == CURLE_RECV_ERROR,
              "curl error %d", d.err);
    cr_assert_eq(d.body_bytes, 300000);
    http_download_free(&d);

    /* break_after=0: not even a status line. */
    cr_assert_eq(http_get(&r, at("/t?break_after=0"), 5000), -1);
    cr_assert_eq(r.err, CURLE_GOT_NOTHING, "curl error %d", r.err);
    http_response_free(&r);
    cr_assert_eq(stats().aborted, 0, "a deliberate break is not an abort");
    stop_echo();
}

Test(echo, sleep_ms_delays_the_reply)
{
    struct http_response r;
    int64_t t0 = harness_now_ms();

    cr_assert_eq(http_get(&r, at("/slow?sleep_ms=300"), 5000), 0);
    cr_assert_geq(harness_now_ms() - t0, 300);
    cr_assert_eq(r.status, 200);
    assert_field(r.body, "query", "sleep_ms=300");
    http_response_free(&r);
    stop_echo();
}

Test(echo, client_leaving_during_sleep_is_counted_as_aborted)
{
    struct http_response r;
    struct echo_stats s;

    /* 1 s: time enough for the request to arrive on a slow run. */
    cr_assert_eq(http_get(&r, at("/slow?sleep_ms=60000"), 1000), -1);
    cr_assert_eq(r.err, CURLE_OPERATION_TIMEDOUT);
    http_response_free(&r);
    /* Without the EV_CLOSED watch the echo would keep the connection for a
     * minute and never count it. */
    cr_assert(harness_wait_until(one_aborted_and_no_connection, NULL, 5000),
              "the abort was not noticed");
    s = stats();
    cr_assert_eq(s.requests, 1);

    cr_assert_eq(http_get(&r, at("/after"), 5000), 0);
    cr_assert_eq(r.status, 200);
    http_response_free(&r);
    stop_echo();
}

Test(echo, client_leaving_mid_stream_is_counted_as_aborted)
{
    struct http_download_opts opts = {.abort_after = MIB};
    struct http_download d;

    cr_assert_eq(http_download(&d, at("/big?bytes=1073741824"), &opts), -1);
    cr_assert_eq(d.err, CURLE_WRITE_ERROR, "curl error %d", d.err);
    cr_assert_geq(d.body_bytes, MIB);
    cr_assert_lt(d.body_bytes, GIB);
    http_download_free(&d);
    cr_assert(harness_wait_until(one_aborted_and_no_connection, NULL, 5000),
              "the abort was not noticed");
    cr_assert_eq(stats().buffered_bytes, 0, "queued pieces were not freed");
    stop_echo();
}

Test(echo, streams_a_gibibyte_in_bounded_memory)
{
    struct http_download d;
    struct echo_stats s;
    long peak;

    cr_assert_eq(http_download(&d, at("/huge?bytes=1073741824"), NULL), 0,
                 "curl error %d", d.err);
    cr_assert_eq(d.body_bytes, GIB);
    cr_assert(d.is_pattern);
    http_download_free(&d);
    /* One 64 KiB piece at a time, the next once the last was written. */
    s = stats();
    cr_assert_eq(s.max_buffered_bytes, 64 * 1024);
    cr_assert_eq(s.buffered_bytes, 0);
    peak = proc_peak_rss_kb(echo.pid);
    cr_assert(peak > 0 && peak < 64 * 1024, "peak RSS %ld KiB", peak);
    stop_echo();
}

Test(echo, slow_client_still_gets_every_byte)
{
    struct http_download_opts opts = {.max_recv_speed = 4 * 1024 * 1024};
    struct http_download d;

    cr_assert_eq(http_download(&d, at("/slow?bytes=2097152"), &opts), 0,
                 "curl error %d", d.err);
    cr_assert_eq(d.body_bytes, 2 * MIB);
    cr_assert(d.is_pattern);
    http_download_free(&d);
    stop_echo();
}

Test(echo, header_bytes_adds_a_big_header)
{
    struct http_response r;
    char *big;

    cr_assert_eq(http_get(&r, at("/hb?header_bytes=20000"), 5000), 0);
    big = http_response_header(&r, "X-Big");
    cr_assert_not_null(big);
    cr_assert_eq(strlen(big), 20000);
    cr_assert_eq(strspn(big, "x"), 20000);
    free(big);
    http_response_free(&r);
    stop_echo();
}

Test(echo, set_header_adds_response_headers)
{
    struct http_response r;

    cr_assert_eq(http_get(&r,
                          at("/sh?set_header=X-A:1&set_header=X-A:2"
                             "&set_header=X-B:%20hello%20world"
                             "&set_header=Content-Type:text/plain"),
                          5000),
                 0);
    cr_assert_eq(http_response_header_count(&r, "X-A"), 2, "%s", r.headers);
    assert_header(&r, "X-A", "1");
    assert_header(&r, "X-B", "hello world");
    cr_assert_eq(http_response_header_count(&r, "Content-Type"), 1);
    assert_header(&r, "Content-Type", "text/plain");
    http_response_free(&r);
    stop_echo();
}

Test(echo, name_option_sets_the_server_field)
{
    struct proc named;
    uint16_t named_port;
    struct http_response r;
    char *url;

    echo_start_named(&named, &named_port, "backend-2");
    cr_assert_neq(named_port, port);
    url = harness_strf("http://127.0.0.1:%u/", (unsigned)named_port);
    cr_assert_eq(http_get(&r, url, 5000), 0);
    assert_field(r.body, "server", "backend-2");
    http_response_free(&r);
    free(url);
    cr_assert_eq(proc_stop(&named, SIGTERM, 10000), 0);
    stop_echo();
}

Test(echo, stats_count_requests_but_not_themselves)
{
    struct http_response r;
    struct echo_stats s;
    int i;

    s = stats();
    cr_assert_eq(s.requests, 0);
    for (i = 0; i < 3; i++) {
        cr_assert_eq(http_get(&r, at("/count?status=404"), 5000), 0);
        http_response_free(&r);
    }
    s = stats();
    cr_assert_eq(s.requests, 3);
    cr_assert_eq(s.aborted, 0);
    cr_assert_eq(stats().requests, 3);
    stop_echo();
}

Test(echo, open_connections_counts_keep_alive_clients)
{
    int fd = connect_echo();
    char buf[4096];
    size_t got = 0;

    send_all(fd, "GET /ka HTTP/1.1\r\nHost: t\r\n\r\n");
    /* The JSON reply ends with "}\n". */
    while (got < sizeof(buf) - 1) {
        ssize_t n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);

        cr_assert_gt(n, 0, "connection closed early");
        got += (size_t)n;
        buf[got] = '\0';
        if (strstr(buf, "}\n") != NULL) {
            break;
        }
    }
    cr_assert_eq(stats().open_connections, 1, "the idle keep-alive client");
    close(fd);
    cr_assert(harness_wait_until(no_connection_open, NULL, 5000),
              "the close was not noticed");
    stop_echo();
}

Test(echo, http_1_0_request_gets_reply_and_close)
{
    static const char req[] = "GET /old HTTP/1.0\r\n\r\n";
    int64_t t0 = harness_now_ms();
    char *got = raw_http(port, req, sizeof(req) - 1, 5000);

    cr_assert_not_null(got);
    cr_assert(strncmp(got, "HTTP/1.0 200", 12) == 0, "%s", got);
    cr_assert_not_null(strstr(got, "\"path\":\"/old\""), "%s", got);
    cr_assert_lt(harness_now_ms() - t0, 4000, "the echo did not close");
    free(got);
    stop_echo();
}

Test(echo, exits_zero_on_sigint)
{
    cr_assert_eq(proc_stop(&echo, SIGINT, 10000), 0);
}

Test(echo, exits_cleanly_with_replies_in_flight)
{
    int sleeping = connect_echo();
    int streaming = connect_echo();
    struct echo_stats s;
    int64_t deadline = harness_now_ms() + 5000;

    send_all(sleeping, "GET /z?sleep_ms=60000 HTTP/1.1\r\nHost: t\r\n\r\n");
    send_all(streaming, "GET /z?bytes=1073741824 HTTP/1.1\r\nHost: t\r\n\r\n");
    do {
        s = stats();
    } while (s.requests < 2 && harness_now_ms() < deadline);
    cr_assert_eq(s.requests, 2);
    stop_echo();
    close(sleeping);
    close(streaming);
}

static bool
has_exited(void *p)
{
    return !proc_running(p);
}

Test(echo, bad_command_line_or_busy_port_exits_nonzero)
{
    char *bin = getenv("SLUICE_ECHO_BIN");
    char *listen = harness_strf("127.0.0.1:%u", (unsigned)port);
    char *bad_argv[] = {bin, "--listen", "nonsense", NULL};
    char *busy_argv[] = {bin, "--listen", listen, NULL};
    struct proc p;

    cr_assert_eq(proc_start(&p, bad_argv), 0);
    cr_assert_eq(proc_stop(&p, 0, 10000), 2);

    cr_assert_eq(proc_start(&p, busy_argv), 0);
    cr_assert(harness_wait_until(has_exited, &p, 10000));
    cr_assert(proc_log_contains(&p, "sluice-echo: cannot listen on"));
    cr_assert_eq(proc_stop(&p, 0, 10000), 1);
    free(listen);
    stop_echo();
}

/*
 * The harness's JSON lookups, on fixed input.
 */

Test(harness, echo_field_reads_top_level_strings_and_numbers)
{
    static const char json[] =
        " { \"nested\" : {\"path\": \"inner\", \"a\": [1, {\"b\": null}]},"
        " \"path\":\"/p\\u00e9\\ud83d\\ude00\\n\", \"n\": -12.5e3,"
        " \"t\": true, \"q\": null }\n";
    char *v;

    v = echo_field(json, "path");
    cr_assert_str_eq(v, "/p\xc3\xa9\xf0\x9f\x98\x80\n");
    free(v);
    v = echo_field(json, "n");
    cr_assert_str_eq(v, "-12.5e3");
    free(v);
    cr_assert_null(echo_field(json, "q"));
    cr_assert_null(echo_field(json, "t"));
    cr_assert_null(echo_field(json, "nested"));
    cr_assert_null(echo_field(json, "missing"));
    cr_assert_null(echo_field("{\"path\":\"unterminated", "path"));
    cr_assert_null(echo_field("not json", "path"));
}

Test(harness, echo_header_lookups_ignore_case_of_names_only)
{
    static const char json[] = "{\"headers\":[[\"Host\",\"h\"],[\"X-A\",\"1\"],"
                               "[\"x-a\",\"Two\"]],\"x\":1}";
    char *v = echo_header(json, "x-A");

    cr_assert_str_eq(v, "1");
    free(v);
    cr_assert_eq(echo_header_count(json, "X-A"), 2);
    cr_assert(echo_has_header(json, "X-A", "Two"));
    cr_assert_not(echo_has_header(json, "X-A", "two"));
    cr_assert(echo_has_header(json, "HOST", NULL));
    cr_assert_not(echo_has_header(json, "Accept", NULL));
    cr_assert_null(echo_header(json, "Accept"));
}
