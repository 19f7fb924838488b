/*
 * Headers that cannot be forged around the limiter (issue 10): a request
 * shaped to make the limiter key on one caller while the upstream hears of
 * another, or to make the gateway drop what it added itself. Each test
 * drives the real gateway in front of sluice-echo, which shows what the
 * upstream received, and observes what the limiter keyed on through a
 * local limiter of one request per hour: two requests share a bucket
 * exactly when the second one is refused.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* One request per hour and key: a second request in a bucket is a 429. */
#define ONE_PER_HOUR                                                           \
    "limiters:\n"                                                              \
    "  one: { algorithm: sliding_window, limit: 1, window: 1h }\n"             \
    "  many: { algorithm: sliding_window, limit: 1000, window: 1h }\n"

#define TRUSTING "  trusted_proxies: [127.0.0.1/32]\n"

/* GET 'path' with 'headers' (may be NULL); returns the status. */
/* The upstream saw exactly one 'name', and it was 'want'; or none (NULL). */
static void
assert_upstream_saw(const struct http_response *r, const char *name,
                    const char *want)
{
    size_t n = echo_header_count(r->body, name);
    char *got = echo_header(r->body, name);

    if (want == NULL) {
        cr_assert(n == 0, "the upstream saw %s: %s", name, got);
        return;
    }
    cr_assert(n == 1, "the upstream saw %zu %s fields in %s", n, name, r->body);
    cr_assert_str_eq(got, want, "the upstream saw %s: %s, want %s", name, got,
                     want);
    free(got);
}

/* A route limited to one request per hour per 'key'. */
static char *
limited_route(const char *key)
{
    return harness_strf("  - id: api\n"
                        "    uri: http://@ECHO@\n"
                        "    predicates: [Path=/**]\n"
                        "    filters:\n"
                        "      - name: RequestRateLimiter\n"
                        "        args: { key: %s, limiter: one }\n",
                        key);
}

/* ---- X-Forwarded-For on several lines ---- */

Test(forgery, repeated_x_forwarded_for_lines_are_one_list)
{
    struct echo_stack st;
    struct http_response r;
    /* A client planted the first line; its proxy appended the second. */
    const char *a[] = {"X-Forwarded-For: 6.6.6.6",
                       "X-Forwarded-For: 203.0.113.9", NULL};
    const char *b[] = {"X-Forwarded-For: 6.6.6.7",
                       "X-Forwarded-For: 203.0.113.9", NULL};
    char *route = limited_route("ip");

    echo_stack_start(&st, TRUSTING, ONE_PER_HOUR, route);
    cr_assert_eq(echo_stack_get(&st, "/x", a, &r), 200);
    /* One list, first line first, extended with the peer. */
    assert_upstream_saw(&r, "X-Forwarded-For",
                        "6.6.6.6, 203.0.113.9, 127.0.0.1");
    http_response_free(&r);
    /* The limiter keyed on the real client, not on the planted entry. */
    cr_assert_eq(echo_stack_get_status(&st, "/x", b), 429,
                 "a forged first X-Forwarded-For line chose the bucket");
    free(route);
    echo_stack_stop(&st);
}

/* ---- identity fields repeated ---- */

/*
 * Sends 'fields' in a request that keeps the connection open, followed on
 * the same connection by a second request; returns what came back.
 */
static char *
pipelined(const struct echo_stack *st, const char *fields)
{
    char *req = harness_strf("GET /x HTTP/1.1\r\nHost: x\r\n%s\r\n"
                             "GET /x HTTP/1.1\r\nHost: x\r\n"
                             "Connection: close\r\n\r\n",
                             fields);
    char *reply = raw_http(st->gw_port, req, strlen(req), 5000);

    cr_assert(reply != NULL, "connection refused");
    free(req);
    return reply;
}

/* 'reply' is one 400 problem, and nothing was answered after it. */
static void
assert_refused_and_closed(const char *reply)
{
    cr_assert(strncmp(reply, "HTTP/1.1 400", 12) == 0, "%s", reply);
    cr_assert(strstr(reply, "application/problem+json") != NULL, "%s", reply);
    cr_assert(strstr(reply + 12, "HTTP/1.1 ") == NULL,
              "the connection went on after the refusal: %s", reply);
}

Test(forgery, repeated_identity_field_from_a_trusted_peer_is_refused)
{
    struct echo_stack st;
    struct http_response r;
    const char *users[] = {"X-User-Id: u1", "X-User-Id: u2", NULL};
    const char *u1[] = {"X-User-Id: u1", NULL};
    char *route = limited_route("user");
    char *reply;

    echo_stack_start(&st, TRUSTING, ONE_PER_HOUR, route);
    reply = pipelined(&st, "X-User-Id: u1\r\nX-User-Id: u2\r\n");
    assert_refused_and_closed(reply);
    free(reply);
    reply = pipelined(&st, "X-User-Role: a\r\nx-user-role: b\r\n"
                           "X-User-Id: u3\r\n");
    assert_refused_and_closed(reply);
    free(reply);
    /* Neither consumed anything: u1's bucket is untouched. */
    cr_assert_eq(echo_stack_get_status(&st, "/x", u1), 200);
    echo_stack_stop(&st);

    /* From an untrusted peer they are dropped, however many there are. */
    echo_stack_start(&st, "", ONE_PER_HOUR,
                     "  - id: api\n"
                     "    uri: http://@ECHO@\n"
                     "    predicates: [Path=/**]\n");
    cr_assert_eq(echo_stack_get(&st, "/x", users, &r), 200);
    assert_upstream_saw(&r, "X-User-Id", NULL);
    http_response_free(&r);
    free(route);
    echo_stack_stop(&st);
}

/* ---- underscores in names ---- */

Test(forgery, header_names_with_underscores_are_dropped)
{
    struct echo_stack st;
    struct http_response r;
    const char *h[] = {"X_User_Id: u1", "X_User_Role: admin",
                       "X_Forwarded_For: 6.6.6.6", "X_Route: b", NULL};
    const char *routes = "  - id: k\n"
                         "    uri: http://@ECHO@\n"
                         "    predicates: [Path=/k/**]\n"
                         "    filters:\n"
                         "      - name: RequestRateLimiter\n"
                         "        args: { key: 'ip+header:X_Api_Key', "
                         "limiter: one }\n"
                         "  - id: b\n"
                         "    uri: http://@ECHO@\n"
                         "    predicates: [Path=/**, 'Header=X_Route']\n"
                         "    filters:\n"
                         "      - AddRequestHeader=X-Route-Id, b\n"
                         "  - id: a\n"
                         "    uri: http://@ECHO@\n"
                         "    predicates: [Path=/**]\n"
                         "    filters:\n"
                         "      - AddRequestHeader=X-Route-Id, a\n";
    const char *k1[] = {"X_Api_Key: k1", NULL};
    const char *k2[] = {"X_Api_Key: k2", NULL};

    echo_stack_start(&st, "", ONE_PER_HOUR, routes);
    cr_assert_eq(echo_stack_get(&st, "/x", h, &r), 200);
    /* Not routed on, and not passed on. */
    assert_upstream_saw(&r, "X-Route-Id", "a");
    assert_upstream_saw(&r, "X_User_Id", NULL);
    assert_upstream_saw(&r, "X_User_Role", NULL);
    assert_upstream_saw(&r, "X_Forwarded_For", NULL);
    assert_upstream_saw(&r, "X_Route", NULL);
    http_response_free(&r);
    /*
     * Not keyed on either: without the field the key does not resolve and
     * the request is refused (empty_key: deny), whatever key it carries.
     */
    cr_assert_eq(echo_stack_get_status(&st, "/k/x", k1), 403);
    cr_assert_eq(echo_stack_get_status(&st, "/k/x", k2), 403);
    echo_stack_stop(&st);

    /* server.underscores_in_headers: true lets them through, but never
     * the twins of the fields the gateway sets: a CGI upstream reads
     * X_User_Id as X-User-Id. */
    echo_stack_start(&st, "  underscores_in_headers: true\n", ONE_PER_HOUR,
                     routes);
    cr_assert_eq(echo_stack_get(&st, "/x", h, &r), 200);
    assert_upstream_saw(&r, "X-Route-Id", "b");
    assert_upstream_saw(&r, "X_Route", "b");
    assert_upstream_saw(&r, "X_User_Id", NULL);
    assert_upstream_saw(&r, "X_Forwarded_For", NULL);
    http_response_free(&r);
    cr_assert_eq(echo_stack_get_status(&st, "/k/x", k1), 200);
    cr_assert_eq(echo_stack_get_status(&st, "/k/x", k2), 200);
    cr_assert_eq(echo_stack_get_status(&st, "/k/x", k1), 429);
    echo_stack_stop(&st);
}
/* ---- Connection ---- */

Test(forgery, connection_nominated_identity_is_not_believed)
{
    struct echo_stack st;
    struct http_response r;
    const char *hop[] = {"Connection: X-User-Id", "X-User-Id: u1", NULL};
    const char *u1[] = {"X-User-Id: u1", NULL};

    echo_stack_start(&st, TRUSTING, ONE_PER_HOUR,
                     "  - id: api\n"
                     "    uri: http://@ECHO@\n"
                     "    predicates: [Path=/**]\n"
                     "    filters:\n"
                     "      - name: RequestRateLimiter\n"
                     "        args:\n"
                     "          tiers:\n"
                     "            - { key: user, limiter: one }\n"
                     "            - { key: ip, limiter: many }\n");
    /* Meant for the gateway's hop only: as if never sent, for both. */
    cr_assert_eq(echo_stack_get(&st, "/x", hop, &r), 200);
    assert_upstream_saw(&r, "X-User-Id", NULL);
    http_response_free(&r);
    cr_assert_eq(echo_stack_get_status(&st, "/x", hop), 200,
                 "the limiter keyed on a user the upstream never saw");
    /* u1's bucket is still whole. */
    cr_assert_eq(echo_stack_get(&st, "/x", u1, &r), 200);
    assert_upstream_saw(&r, "X-User-Id", "u1");
    http_response_free(&r);
    cr_assert_eq(echo_stack_get_status(&st, "/x", u1), 429);
    echo_stack_stop(&st);
}

Test(forgery, connection_cannot_remove_a_field_the_gateway_adds)
{
    struct echo_stack st;
    struct http_response r;
    const char *h[] = {"Connection: X-Gateway, X-Hop", "X-Gateway: forged",
                       "X-Hop: 1", NULL};

    echo_stack_start(&st, "", "",
                     "  - id: api\n"
                     "    uri: http://@ECHO@\n"
                     "    predicates: [Path=/**]\n"
                     "    filters:\n"
                     "      - AddRequestHeader=X-Gateway, sluice\n");
    cr_assert_eq(echo_stack_get(&st, "/x", h, &r), 200);
    /* The client's own is gone; the filter's is there. */
    assert_upstream_saw(&r, "X-Gateway", "sluice");
    assert_upstream_saw(&r, "X-Hop", NULL);
    assert_upstream_saw(&r, "Connection", NULL);
    http_response_free(&r);
    echo_stack_stop(&st);
}

/* ---- the limiter and the upstream agree ---- */

Test(forgery, upstream_gets_the_identity_the_gateway_decided)
{
    struct echo_stack st;
    struct http_response r;
    const char *u1[] = {"X-User-Id: u1", "X-User-Role: staff", NULL};
    const char *routes = "  - id: api\n"
                         "    uri: http://@ECHO@\n"
                         "    predicates: [Path=/**]\n"
                         "    filters:\n"
                         "      - name: RequestRateLimiter\n"
                         "        args: { key: user, limiter: one, "
                         "empty_key: allow }\n";

    /* A trusted proxy's assertion is what both see. (A filter on these
     * fields is a config error: test_config.) */
    echo_stack_start(&st, TRUSTING, ONE_PER_HOUR, routes);
    cr_assert_eq(echo_stack_get(&st, "/x", u1, &r), 200);
    assert_upstream_saw(&r, "X-User-Id", "u1");
    assert_upstream_saw(&r, "X-User-Role", "staff");
    http_response_free(&r);
    cr_assert_eq(echo_stack_get_status(&st, "/x", u1), 429);
    echo_stack_stop(&st);

    /* From anyone else there is no identity, and the upstream hears of
     * none. */
    echo_stack_start(&st, "", ONE_PER_HOUR, routes);
    cr_assert_eq(echo_stack_get(&st, "/x", u1, &r), 200);
    assert_upstream_saw(&r, "X-User-Id", NULL);
    assert_upstream_saw(&r, "X-User-Role", NULL);
    http_response_free(&r);
    echo_stack_stop(&st);
}

Test(forgery, routes_and_keys_read_the_identity_fields_as_decided)
{
    struct echo_stack st;
    const char *admin[] = {"X-User-Role: admin", "X-User-Id: u1", NULL};
    const char *routes = "  - id: admin\n"
                         "    uri: http://@ECHO@\n"
                         "    predicates: [Path=/**, 'Header=X-User-Role, "
                         "admin']\n"
                         "  - id: keyed\n"
                         "    uri: http://@ECHO@\n"
                         "    predicates: [Path=/**]\n"
                         "    filters:\n"
                         "      - name: RequestRateLimiter\n"
                         "        args: { key: 'header:X-User-Id', "
                         "limiter: one }\n";

    /* An untrusted client's role is none: it cannot pick the admin route,
     * and its X-User-Id keys nothing (no tier applies: 403), since the
     * upstream would never see that user. */
    echo_stack_start(&st, "", ONE_PER_HOUR, routes);
    cr_assert_eq(echo_stack_get_status(&st, "/x", admin), 403);
    echo_stack_stop(&st);

    /* A trusted proxy's assertion is what both read. */
    echo_stack_start(&st, TRUSTING, ONE_PER_HOUR, routes);
    cr_assert_eq(echo_stack_get_status(&st, "/x", admin), 200);
    echo_stack_stop(&st);
}

Test(forgery, underscore_spellings_of_identity_fields_are_not_read_either)
{
    struct echo_stack st;
    const char *h[] = {"X_User_Role: admin", NULL};

    /* Let through by underscores_in_headers, X_User_Role is still not
     * the caller's role to a predicate: a CGI upstream would read it as
     * X-User-Role, which the gateway decides. */
    echo_stack_start(&st, "  underscores_in_headers: true\n", "",
                     "  - id: admin\n"
                     "    uri: http://@ECHO@\n"
                     "    predicates: [Path=/**, 'Header=X_User_Role, "
                     "admin']\n");
    cr_assert_eq(echo_stack_get_status(&st, "/x", h), 404);
    echo_stack_stop(&st);
}

/* ---- whitespace around a value ---- */

/* The status of one request on its own connection, 'fields' (CRLF-ended
 * lines) sent as they are. */
static int
raw_status(const struct echo_stack *st, const char *fields)
{
    char *req = harness_strf("GET /x HTTP/1.1\r\nHost: x\r\n%s"
                             "Connection: close\r\n\r\n",
                             fields);
    char *reply = raw_http(st->gw_port, req, strlen(req), 5000);
    int status = 0;

    cr_assert(reply != NULL, "connection refused");
    sscanf(reply, "HTTP/1.1 %d", &status);
    free(reply);
    free(req);
    return status;
}

/*
 * A value is what lies between the spaces and tabs around it: evhttp
 * strips only the spaces before it, so a tab before the key, or an
 * obs-fold that leaves whitespace after it, made a new bucket for each
 * spelling while the upstream read one key.
 */
Test(forgery, whitespace_around_a_value_makes_no_new_bucket)
{
    static const char *const spellings[] = {
        "X-Api-Key:\tvictim\r\n",
        "X-Api-Key: \t victim\t\r\n",
        "X-Api-Key: victim\r\n \r\n",
        "X-Api-Key:\t\tvictim \r\n\t\r\n",
    };
    struct echo_stack st;
    char *route = limited_route("\"header:X-Api-Key\"");

    echo_stack_start(&st, "", ONE_PER_HOUR, route);
    cr_assert_eq(raw_status(&st, "X-Api-Key: victim\r\n"), 200);
    for (size_t i = 0; i < sizeof(spellings) / sizeof(spellings[0]); i++) {
        cr_assert_eq(raw_status(&st, spellings[i]), 429,
                     "\"%s\" had a bucket of its own", spellings[i]);
    }
    free(route);
    echo_stack_stop(&st);
}

/* The Host predicate reads the value as the upstream will. */
Test(forgery, a_tab_before_host_does_not_change_the_route)
{
    struct echo_stack st;
    const char *routes = "  - id: admin\n"
                         "    uri: http://@ECHO@\n"
                         "    predicates: [Host=admin.example.org]\n"
                         "    filters:\n"
                         "      - name: RequestRateLimiter\n"
                         "        args: { key: route, limiter: one }\n"
                         "  - id: rest\n"
                         "    uri: http://@ECHO@\n"
                         "    predicates: [Path=/**]\n";
    char *req1 = "GET /x HTTP/1.1\r\nHost: admin.example.org\r\n"
                 "Connection: close\r\n\r\n";
    char *req2 = "GET /x HTTP/1.1\r\nHost:\tadmin.example.org\t\r\n"
                 "Connection: close\r\n\r\n";
    char *reply;

    echo_stack_start(&st, "", ONE_PER_HOUR, routes);
    reply = raw_http(st.gw_port, req1, strlen(req1), 5000);
    cr_assert(reply != NULL && strncmp(reply, "HTTP/1.1 200", 12) == 0, "%s",
              reply);
    free(reply);
    reply = raw_http(st.gw_port, req2, strlen(req2), 5000);
    cr_assert(reply != NULL && strncmp(reply, "HTTP/1.1 429", 12) == 0,
              "a tab before Host escaped the admin route: %s", reply);
    free(reply);
    echo_stack_stop(&st);
}

/* Trimming comes after the framing checks: evhttp reads "\tchunked" as no
 * coding, so it must still be refused, not read as chunked. */
Test(forgery, a_tab_before_chunked_is_still_refused)
{
    struct echo_stack st;
    const char *req = "POST /x HTTP/1.1\r\nHost: x\r\n"
                      "Transfer-Encoding:\tchunked\r\n\r\n"
                      "0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
    char *reply;

    echo_stack_start(&st, "", ONE_PER_HOUR,
                     "  - id: api\n"
                     "    uri: http://@ECHO@\n"
                     "    predicates: [Path=/**]\n");
    reply = raw_http(st.gw_port, req, strlen(req), 5000);
    cr_assert(reply != NULL && strncmp(reply, "HTTP/1.1 501", 12) == 0, "%s",
              reply);
    cr_assert(strstr(reply, "smuggled") == NULL, "%s", reply);
    free(reply);
    echo_stack_stop(&st);
}

/* ---- the request target ---- */

/* An admin route limited to one request per hour, and a catch-all. */
#define ADMIN_AND_REST                                                         \
    "  - id: admin\n"                                                          \
    "    uri: http://@ECHO@\n"                                                 \
    "    predicates: [\"Path=/admin/**\"]\n"                                   \
    "    filters:\n"                                                           \
    "      - name: RequestRateLimiter\n"                                       \
    "        args: { key: route, limiter: one }\n"                             \
    "  - id: admin_host\n"                                                     \
    "    uri: http://@ECHO@\n"                                                 \
    "    predicates: [Host=admin.example.org]\n"                               \
    "    filters:\n"                                                           \
    "      - name: RequestRateLimiter\n"                                       \
    "        args: { key: route, limiter: one }\n"                             \
    "  - id: rest\n"                                                           \
    "    uri: http://@ECHO@\n"                                                 \
    "    predicates: [Path=/**]\n"

/* The status line of the answer to 'target' with 'host', on a connection
 * of its own; the caller frees it. */
static char *
status_of(const struct echo_stack *st, const char *target, const char *host)
{
    char *req = harness_strf("GET %s HTTP/1.1\r\nHost: %s\r\n"
                             "Connection: close\r\n\r\n",
                             target, host);
    char *reply = raw_http(st->gw_port, req, strlen(req), 5000);

    cr_assert(reply != NULL, "connection refused");
    reply[strcspn(reply, "\r")] = '\0';
    free(req);
    return reply;
}

static void
assert_status(const struct echo_stack *st, const char *target, const char *host,
              const char *want)
{
    char *got = status_of(st, target, host);

    cr_assert_str_eq(got, want, "GET %s with Host %s", target, host);
    free(got);
}

/* A URI parser reads "//admin/x" as the authority "admin" and the path
 * "/x": the route must see the path the upstream will, "/admin/x". */
Test(forgery, a_target_starting_with_two_slashes_keeps_its_first_segment)
{
    struct echo_stack st;

    echo_stack_start(&st, "", ONE_PER_HOUR, ADMIN_AND_REST);
    assert_status(&st, "/admin/x", "a", "HTTP/1.1 200 OK");
    assert_status(&st, "//admin/x", "a", "HTTP/1.1 429 Too Many Requests");
    assert_status(&st, "//admin//y", "a", "HTTP/1.1 429 Too Many Requests");
    /* And "//x/admin/a" is no admin path. */
    assert_status(&st, "//x/admin/a", "a", "HTTP/1.1 200 OK");
    echo_stack_stop(&st);
}

/* RFC 9112 3.2.2: absolute-form names the host, whatever Host says. */
Test(forgery, an_absolute_form_target_is_routed_on_its_own_host)
{
    struct echo_stack st;

    echo_stack_start(&st, "", ONE_PER_HOUR, ADMIN_AND_REST);
    assert_status(&st, "/zzz", "admin.example.org", "HTTP/1.1 200 OK");
    assert_status(&st, "http://admin.example.org/zzz", "other",
                  "HTTP/1.1 429 Too Many Requests");
    assert_status(&st, "HTTP://admin.example.org", "other",
                  "HTTP/1.1 429 Too Many Requests");
    /* Other schemes and forms are no targets of an HTTP gateway. */
    assert_status(&st, "foo://x/admin/a", "a", "HTTP/1.1 400 Bad Request");
    assert_status(&st, "http:/admin/a", "a", "HTTP/1.1 400 Bad Request");
    assert_status(&st, "http://u@admin.example.org/", "a",
                  "HTTP/1.1 400 Bad Request");
    echo_stack_stop(&st);
}

/* A Host that is not host[:port] is refused, not cut at its first ':'
 * into a name a Host route matches. */
Test(forgery, a_host_that_is_not_a_host_is_refused)
{
    struct echo_stack st;

    echo_stack_start(&st, "", ONE_PER_HOUR, ADMIN_AND_REST);
    assert_status(&st, "/zzz", "admin.example.org:80@evil.com",
                  "HTTP/1.1 400 Bad Request");
    assert_status(&st, "/zzz", "admin.example.org:junk/../x",
                  "HTTP/1.1 400 Bad Request");
    assert_status(&st, "/zzz", "admin.example.org:8080", "HTTP/1.1 200 OK");
    assert_status(&st, "/zzz", "[::1]:8080", "HTTP/1.1 200 OK");
    echo_stack_stop(&st);
}

/* ---- what other proxies relay ---- */

Test(forgery, an_untrusted_peer_cannot_plant_forwarded_or_x_real_ip)
{
    struct echo_stack st;
    struct http_response r;
    /* Spring's ForwardedHeaderFilter prefers Forwarded to X-Forwarded-*. */
    const char *h[] = {"Forwarded: for=6.6.6.6;proto=https;host=evil.example",
                       "X-Real-IP: 6.6.6.6",
                       "X-Forwarded-Port: 443",
                       "X-Forwarded-Prefix: /evil",
                       "X_Real_IP: 6.6.6.7",
                       NULL};
    const char *routes = "  - id: api\n"
                         "    uri: http://@ECHO@\n"
                         "    predicates: [Path=/**]\n";

    echo_stack_start(&st, "  underscores_in_headers: true\n", "", routes);
    cr_assert_eq(echo_stack_get(&st, "/x", h, &r), 200);
    assert_upstream_saw(&r, "Forwarded", NULL);
    assert_upstream_saw(&r, "X-Real-IP", NULL);
    assert_upstream_saw(&r, "X-Forwarded-Port", NULL);
    assert_upstream_saw(&r, "X-Forwarded-Prefix", NULL);
    assert_upstream_saw(&r, "X_Real_IP", NULL);
    assert_upstream_saw(&r, "X-Forwarded-For", "127.0.0.1");
    http_response_free(&r);
    echo_stack_stop(&st);

    /* A trusted proxy's are passed on as it sent them. */
    echo_stack_start(&st, TRUSTING, "", routes);
    cr_assert_eq(echo_stack_get(&st, "/x", h, &r), 200);
    assert_upstream_saw(&r, "Forwarded",
                        "for=6.6.6.6;proto=https;host=evil.example");
    assert_upstream_saw(&r, "X-Real-IP", "6.6.6.6");
    assert_upstream_saw(&r, "X-Forwarded-Port", "443");
    assert_upstream_saw(&r, "X-Forwarded-Prefix", "/evil");
    http_response_free(&r);
    echo_stack_stop(&st);
}

/* What a route's filter adds is the operator's, not the client's: it goes
 * upstream from any peer, and the client's own is gone first. */
Test(forgery, a_relayed_field_a_filter_adds_reaches_the_upstream)
{
    struct echo_stack st;
    struct http_response r;
    const char *h[] = {"X-Forwarded-Prefix: /evil", NULL};
    const char *routes = "  - id: api\n"
                         "    uri: http://@ECHO@\n"
                         "    predicates: [Path=/**]\n"
                         "    filters:\n"
                         "      - AddRequestHeader=X-Forwarded-Prefix, /api\n";

    echo_stack_start(&st, "", ONE_PER_HOUR, routes);
    cr_assert_eq(echo_stack_get(&st, "/x", h, &r), 200);
    assert_upstream_saw(&r, "X-Forwarded-Prefix", "/api");
    http_response_free(&r);
    echo_stack_stop(&st);
}

/* Tomcat and Spring read "/admin;x/a" as "/admin/a": so do the routes, or
 * the admin route's limiter would be passed by. The upstream gets the
 * parameters as sent. */
Test(forgery, path_parameters_do_not_hide_a_route)
{
    struct echo_stack st;
    struct http_response r;

    echo_stack_start(&st, "", ONE_PER_HOUR, ADMIN_AND_REST);
    cr_assert_eq(echo_stack_get(&st, "/admin;x/a", NULL, &r), 200);
    cr_assert(strstr(r.body, "/admin;x/a") != NULL,
              "the upstream did not get the parameters: %s", r.body);
    http_response_free(&r);
    assert_status(&st, "/admin/b", "a", "HTTP/1.1 429 Too Many Requests");
    assert_status(&st, "/admin;jsessionid=1/c", "a",
                  "HTTP/1.1 429 Too Many Requests");
    echo_stack_stop(&st);
}

/* A RewritePath confines a route to what it rewrites to: its regexp,
 * written for the path the route matched, must not miss a path that
 * matched only without its ;parameters. */
Test(forgery, path_parameters_do_not_escape_a_rewrite)
{
    struct echo_stack st;
    struct http_response r;
    const char *routes = "  - id: files\n"
                         "    uri: http://@ECHO@\n"
                         "    predicates: [\"Path=/files/**\"]\n"
                         "    filters:\n"
                         "      - RewritePath=/files/(?<p>.*), /public/${p}\n";

    echo_stack_start(&st, "", ONE_PER_HOUR, routes);
    cr_assert_eq(echo_stack_get(&st, "/files/a", NULL, &r), 200);
    cr_assert(strstr(r.body, "\"/public/a\"") != NULL, "%s", r.body);
    http_response_free(&r);
    cr_assert_eq(echo_stack_get(&st, "/files;x/secret", NULL, &r), 200);
    cr_assert(strstr(r.body, "\"/public/secret\"") != NULL,
              "the rewrite was escaped: %s", r.body);
    http_response_free(&r);
    echo_stack_stop(&st);
}
