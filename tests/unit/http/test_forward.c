#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "forwarded.h"
#include "netaddr.h"

static struct headers in, out;
static struct netaddr peer;

static void
setup(void)
{
    headers_init(&in);
    headers_init(&out);
    cr_assert_eq(netaddr_parse("10.1.2.3", &peer), 0);
}

static void
teardown(void)
{
    headers_deinit(&in);
    headers_deinit(&out);
}

TestSuite(forward, .init = setup, .fini = teardown);

/* Builds 'out' from 'in' as sent to upstream "up:8080". */
static void
forward(bool trusted)
{
    char *xff = headers_join(&in, "X-Forwarded-For");
    struct forward_request r = {.in = &in,
                                .host = "up:8080",
                                .peer = &peer,
                                .peer_trusted = trusted,
                                .xff = xff};

    forward_request_headers(&out, &r);
    free(xff);
}

/* The same, telling the upstream of 'who' in X-User-Id and X-User-Role. */
static void
forward_as(bool trusted, const struct forwarded_identity *who)
{
    char *xff = headers_join(&in, "X-Forwarded-For");
    struct forward_request r = {.in = &in,
                                .host = "up:8080",
                                .peer = &peer,
                                .peer_trusted = trusted,
                                .xff = xff,
                                .user_header = "X-User-Id",
                                .role_header = "X-User-Role",
                                .who = who};

    forward_request_headers(&out, &r);
    free(xff);
}

static void
assert_out(const char *name, const char *want)
{
    const char *got = headers_get(&out, name);

    if (want == NULL) {
        cr_assert_null(got, "%s was forwarded: %s", name, got);
        return;
    }
    cr_assert_not_null(got, "%s is missing", name);
    cr_assert_str_eq(got, want, "%s: %s, want %s", name, got, want);
}

Test(forward, end_to_end_fields_pass_in_order_and_hop_by_hop_ones_do_not)
{
    headers_add(&in, "Accept", "*/*");
    headers_add(&in, "Connection", "keep-alive");
    headers_add(&in, "Keep-Alive", "timeout=5");
    headers_add(&in, "Transfer-Encoding", "chunked");
    headers_add(&in, "TE", "trailers");
    headers_add(&in, "Upgrade", "websocket");
    headers_add(&in, "X-B", "2");
    forward(false);
    cr_assert_str_eq(out.v[0].name, "Accept");
    cr_assert_str_eq(out.v[1].name, "X-B");
    assert_out("Connection", NULL);
    assert_out("Keep-Alive", NULL);
    assert_out("Transfer-Encoding", NULL);
    assert_out("TE", NULL);
    assert_out("Upgrade", NULL);
}

Test(forward, fields_named_by_any_connection_field_are_dropped)
{
    headers_add(&in, "Connection", "keep-alive");
    headers_add(&in, "X-Secret", "1");
    headers_add(&in, "Connection", "X-Secret, x-other");
    headers_add(&in, "X-Other", "2");
    headers_add(&in, "X-Kept", "3");
    headers_add(&in, "X-Secret", "4");
    cr_assert_eq(forward_drop_nominated(&in), 3);
    cr_assert_null(headers_get(&in, "X-Secret"));
    cr_assert_null(headers_get(&in, "X-Other"));
    cr_assert_str_eq(headers_get(&in, "X-Kept"), "3");
    cr_assert_eq(headers_count(&in, "Connection"), 2);
    forward(true);
    assert_out("X-Kept", "3");
    assert_out("Connection", NULL);
}

Test(forward, without_connection_nothing_is_nominated)
{
    headers_add(&in, "X-A", "1");
    cr_assert_eq(forward_drop_nominated(&in), 0);
    cr_assert_eq(in.n, 1);
}

Test(forward, a_field_added_after_the_connection_list_was_applied_is_sent)
{
    /* What a route filter adds is the gateway's, not the client's hop's. */
    headers_add(&in, "Connection", "X-Gateway");
    headers_add(&in, "X-Gateway", "forged");
    forward_drop_nominated(&in);
    headers_add(&in, "X-Gateway", "sluice");
    forward(false);
    assert_out("X-Gateway", "sluice");
    cr_assert_eq(headers_remove(&out, "X-Gateway"), 1);
}

Test(forward, host_length_and_expect_are_the_gateways_to_set)
{
    headers_add(&in, "Host", "client.example");
    headers_add(&in, "Content-Length", "5");
    headers_add(&in, "Expect", "100-continue");
    forward(false);
    assert_out("Host", "up:8080");
    assert_out("Content-Length", NULL);
    assert_out("Expect", NULL);
    cr_assert_eq(headers_remove(&out, "Host"), 1);
}

Test(forward, an_untrusted_peer_cannot_plant_forwarded_fields)
{
    headers_add(&in, "Host", "client.example");
    headers_add(&in, "X-Forwarded-For", "6.6.6.6");
    headers_add(&in, "X-Forwarded-Proto", "https");
    headers_add(&in, "X-Forwarded-Host", "evil.example");
    forward(false);
    assert_out("X-Forwarded-For", "10.1.2.3");
    assert_out("X-Forwarded-Proto", "http");
    assert_out("X-Forwarded-Host", "client.example");
    cr_assert_eq(headers_remove(&out, "X-Forwarded-For"), 1);
}

Test(forward, a_trusted_proxy_has_its_forwarded_fields_kept_and_extended)
{
    headers_add(&in, "Host", "lb.internal");
    headers_add(&in, "X-Forwarded-For", "203.0.113.9");
    headers_add(&in, "X-Forwarded-Proto", "https");
    headers_add(&in, "X-Forwarded-Host", "www.example");
    forward(true);
    assert_out("X-Forwarded-For", "203.0.113.9, 10.1.2.3");
    assert_out("X-Forwarded-Proto", "https");
    assert_out("X-Forwarded-Host", "www.example");
}

/* What other proxies tell an upstream of the client, planted by it. */
static void
add_relayed_fields(void)
{
    headers_add(&in, "Forwarded", "for=6.6.6.6;proto=https;host=evil");
    headers_add(&in, "x-real-ip", "6.6.6.6");
    headers_add(&in, "X-Forwarded-Port", "443");
    headers_add(&in, "X-Forwarded-Prefix", "/evil");
    headers_add(&in, "X-Forwarded-Ssl", "on");
    headers_add(&in, "X-Original-URL", "/admin");
    headers_add(&in, "x-rewrite-url", "/admin");
    headers_add(&in, "X-Client-IP", "6.6.6.6");
    headers_add(&in, "True-Client-IP", "6.6.6.6");
    headers_add(&in, "CF-Connecting-IP", "6.6.6.6");
    headers_add(&in, "X-Kept", "1");
}

Test(forward, an_untrusted_peer_cannot_plant_what_other_proxies_relay)
{
    add_relayed_fields();
    cr_assert_eq(forward_drop_relayed(&in, false), 10);
    forward(false);
    assert_out("Forwarded", NULL);
    assert_out("X-Real-IP", NULL);
    assert_out("X-Forwarded-Port", NULL);
    assert_out("X-Forwarded-Prefix", NULL);
    assert_out("X-Forwarded-Ssl", NULL);
    assert_out("X-Original-URL", NULL);
    assert_out("X-Rewrite-URL", NULL);
    assert_out("X-Client-IP", NULL);
    assert_out("True-Client-IP", NULL);
    assert_out("CF-Connecting-IP", NULL);
    assert_out("X-Kept", "1");
    assert_out("X-Forwarded-For", "10.1.2.3");
}

Test(forward, a_trusted_proxy_has_what_it_relays_kept_as_it_is)
{
    add_relayed_fields();
    cr_assert_eq(forward_drop_relayed(&in, true), 0);
    forward(true);
    assert_out("Forwarded", "for=6.6.6.6;proto=https;host=evil");
    assert_out("X-Real-IP", "6.6.6.6");
    assert_out("X-Forwarded-Port", "443");
    assert_out("X-Forwarded-Prefix", "/evil");
    assert_out("X-Forwarded-Ssl", "on");
}

Test(forward, underscore_twins_of_relayed_fields_pass_from_no_peer)
{
    /* Allowed through by server.underscores_in_headers; a CGI upstream
     * reads X_Real_IP as X-Real-IP. */
    headers_add(&in, "X_Real_IP", "6.6.6.6");
    headers_add(&in, "x_forwarded_port", "443");
    headers_add(&in, "X_Forwarded_Prefix", "/evil");
    headers_add(&in, "X_Forwarded_Ssl", "on");
    headers_add(&in, "X_Other", "kept");
    for (int trusted = 0; trusted <= 1; trusted++) {
        struct headers kept;

        headers_init(&kept);
        for (size_t i = 0; i < in.n; i++) {
            headers_add(&kept, in.v[i].name, in.v[i].value);
        }
        cr_assert_eq(forward_drop_relayed(&in, trusted != 0), 4);
        forward(trusted != 0);
        headers_deinit(&in);
        in = kept;
        assert_out("X_Real_IP", NULL);
        assert_out("x_forwarded_port", NULL);
        assert_out("X_Forwarded_Prefix", NULL);
        assert_out("X_Forwarded_Ssl", NULL);
        assert_out("X_Other", "kept");
        headers_deinit(&out);
        headers_init(&out);
    }
}

Test(forward, a_request_over_tls_is_forwarded_as_https)
{
    struct forward_request r = {
        .in = &in, .host = "up:8080", .peer = &peer, .tls = true};

    headers_add(&in, "Host", "client.example");
    /* Not believed from an untrusted peer: the socket says https. */
    headers_add(&in, "X-Forwarded-Proto", "http");
    forward_request_headers(&out, &r);
    assert_out("X-Forwarded-Proto", "https");
}

Test(forward, without_a_host_there_is_no_forwarded_host)
{
    forward(false);
    assert_out("X-Forwarded-Host", NULL);
    assert_out("X-Forwarded-For", "10.1.2.3");
}

Test(forward, the_connection_list_joins_every_connection_field)
{
    char *list;

    cr_assert_null(forward_connection_list(&in));
    headers_add(&in, "Connection", "close");
    headers_add(&in, "X-A", "1");
    headers_add(&in, "connection", "X-A");
    list = forward_connection_list(&in);
    cr_assert_str_eq(list, "close, X-A");
    free(list);
}

Test(forward, response_fields_but_hop_by_hop_and_length_go_on)
{
    cr_assert(forward_response_field("Content-Type", NULL));
    cr_assert(forward_response_field("Set-Cookie", "close"));
    cr_assert_not(forward_response_field("Content-Length", NULL));
    cr_assert_not(forward_response_field("Transfer-Encoding", NULL));
    cr_assert_not(forward_response_field("Keep-Alive", NULL));
    cr_assert_not(forward_response_field("X-Up-Secret", "close, X-Up-Secret"));
}

Test(forward, repeated_fields_count_once_and_every_copy_is_replaced)
{
    headers_add(&in, "x-forwarded-host", "first.example");
    headers_add(&in, "X-Forwarded-Host", "second.example");
    headers_add(&in, "X-FORWARDED-PROTO", "https");
    headers_add(&in, "x-forwarded-proto", "http");
    headers_add(&in, "host", "client.example");
    headers_add(&in, "Host", "other.example");
    headers_add(&in, "X-Forwarded-For", "192.0.2.1");
    headers_add(&in, "x-forwarded-for", "192.0.2.2");
    headers_add(&in, "EXPECT", "100-continue");
    headers_add(&in, "content-length", "5");
    forward(true);
    cr_assert_eq(out.n, 4, "%zu fields", out.n);
    assert_out("Host", "up:8080");
    assert_out("X-Forwarded-Host", "first.example");
    assert_out("X-Forwarded-Proto", "https");
    /* X-Forwarded-For is a list: every line of it, first line first. */
    assert_out("X-Forwarded-For", "192.0.2.1, 192.0.2.2, 10.1.2.3");
    assert_out("Expect", NULL);
    assert_out("Content-Length", NULL);
}

Test(forward, repeated_x_forwarded_for_lines_reach_the_upstream_as_one_list)
{
    /* A planted first line cannot hide the line the proxy appended. */
    headers_add(&in, "X-Forwarded-For", "6.6.6.6");
    headers_add(&in, "X-Forwarded-For", "203.0.113.9");
    forward(true);
    assert_out("X-Forwarded-For", "6.6.6.6, 203.0.113.9, 10.1.2.3");
    cr_assert_eq(headers_remove(&out, "X-Forwarded-For"), 1);
    headers_clear(&out);
    forward(false);
    assert_out("X-Forwarded-For", "10.1.2.3");
}

Test(forward, names_with_underscores_are_dropped_unless_allowed)
{
    headers_add(&in, "X_User_Id", "u1");
    headers_add(&in, "Accept", "*/*");
    headers_add(&in, "x_forwarded_for", "6.6.6.6");
    headers_add(&in, "_", "1");
    headers_add(&in, "X-User-Id", "u2");
    cr_assert_eq(forward_drop_underscored(&in, true), 0);
    cr_assert_eq(in.n, 5);
    cr_assert_eq(forward_drop_underscored(&in, false), 3);
    cr_assert_eq(in.n, 2);
    cr_assert_str_eq(in.v[0].name, "Accept");
    cr_assert_str_eq(in.v[1].name, "X-User-Id");
    cr_assert_eq(forward_drop_underscored(&in, false), 0);
}

Test(forward, the_upstream_hears_of_the_decided_identity_alone_and_last)
{
    struct forwarded_identity who = {"u1", "staff"};

    /* The client's, and what a filter wrote, are not sent. */
    headers_add(&in, "X-User-Id", "client");
    headers_add(&in, "x-user-role", "admin");
    headers_add(&in, "X-User-Id", "from-filter");
    headers_add(&in, "Accept", "*/*");
    forward_as(true, &who);
    cr_assert_eq(headers_count(&out, "X-User-Id"), 1);
    cr_assert_eq(headers_count(&out, "X-User-Role"), 1);
    assert_out("X-User-Id", "u1");
    assert_out("X-User-Role", "staff");
    cr_assert_str_eq(out.v[out.n - 2].name, "X-User-Id");
    cr_assert_str_eq(out.v[out.n - 1].name, "X-User-Role");
}

Test(forward, no_identity_decided_means_no_identity_sent)
{
    struct forwarded_identity none = {NULL, NULL};

    headers_add(&in, "X-User-Id", "client");
    headers_add(&in, "X-User-Role", "admin");
    forward_as(false, &none);
    assert_out("X-User-Id", NULL);
    assert_out("X-User-Role", NULL);
    headers_clear(&out);
    forward_as(false, NULL);
    assert_out("X-User-Id", NULL);
    assert_out("X-User-Role", NULL);
}

Test(forward, underscore_twins_of_the_gateways_own_fields_never_pass)
{
    struct forwarded_identity who = {.user = "u1", .role = NULL};

    /* Allowed through by server.underscores_in_headers, but a CGI
     * upstream would read them as the fields the gateway sets. */
    headers_add(&in, "X_User_Id", "admin");
    headers_add(&in, "x_user_role", "root");
    headers_add(&in, "X_Forwarded_For", "6.6.6.6");
    headers_add(&in, "X_Forwarded_Proto", "https");
    headers_add(&in, "X_Forwarded_Host", "evil");
    headers_add(&in, "X_Other", "kept");
    forward_as(false, &who);
    assert_out("X_User_Id", NULL);
    assert_out("x_user_role", NULL);
    assert_out("X_Forwarded_For", NULL);
    assert_out("X_Forwarded_Proto", NULL);
    assert_out("X_Forwarded_Host", NULL);
    assert_out("X_Other", "kept");
    assert_out("X-User-Id", "u1");
}

Test(forward, connection_saying_only_keep_alive_nominates_nothing)
{
    cr_assert_not(forward_connection_nominates(&in), "no Connection field");
    headers_add(&in, "Connection", "keep-alive");
    headers_add(&in, "connection", " Keep-Alive ,, ");
    cr_assert_not(forward_connection_nominates(&in));
    headers_add(&in, "Connection", "keep-alive, X-Secret");
    cr_assert(forward_connection_nominates(&in), "X-Secret is named");
    headers_clear(&in);
    headers_add(&in, "Connection", "close");
    cr_assert(forward_connection_nominates(&in), "close is not hop-by-hop");
    headers_clear(&in);
    headers_add(&in, "Connection", "keep-alives");
    cr_assert(forward_connection_nominates(&in));
}

/* The fields the gateway writes itself, spelt any way a CGI upstream
 * reads as them; and no other. */
Test(forward, sets_field_names_the_gateways_own)
{
    static const char *const own[] = {
        "Host",
        "content-length",
        "Expect",
        "X_Forwarded_For",
        "x-forwarded-proto",
        "X-Forwarded-Host",
    };
    static const char *const other[] = {
        "X-Forwarded-Port",
        "Forwarded",
        "Connection",
        "X-Hosts",
        "",
        "A-Name-Longer-Than-Thirty-Two-Characters-Long",
    };

    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++) {
        cr_assert(forward_sets_field(own[i]), "%s", own[i]);
    }
    for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
        cr_assert(!forward_sets_field(other[i]), "%s", other[i]);
    }
}
