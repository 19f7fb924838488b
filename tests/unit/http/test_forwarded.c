#include <criterion/criterion.h>
#include <string.h>

#include "forwarded.h"
#include "headers.h"
#include "netaddr.h"

static struct cidr trusted[2];

static void
setup(void)
{
    cr_assert_eq(netaddr_parse_cidr("10.0.0.0/8", &trusted[0]), 0);
    cr_assert_eq(netaddr_parse_cidr("127.0.0.1/32", &trusted[1]), 0);
}

static struct netaddr
addr(const char *s)
{
    struct netaddr a;

    cr_assert_eq(netaddr_parse(s, &a), 0, "bad test address %s", s);
    return a;
}

static void
assert_client(const char *peer, const char *xff, const char *want)
{
    struct netaddr p = addr(peer), got, exp = addr(want);

    forwarded_client(&p, xff, trusted, 2, &got);
    cr_assert_eq(got.family, exp.family, "peer %s xff %s", peer, xff);
    cr_assert(memcmp(got.bytes, exp.bytes, 16) == 0,
              "peer %s xff %s: expected %s", peer, xff, want);
}

TestSuite(forwarded, .init = setup);

Test(forwarded, untrusted_peer_ignores_x_forwarded_for)
{
    assert_client("203.0.113.9", "198.51.100.1", "203.0.113.9");
}

Test(forwarded, trusted_peer_takes_the_rightmost_untrusted_entry)
{
    assert_client("127.0.0.1", "198.51.100.1, 203.0.113.5, 10.1.2.3",
                  "203.0.113.5");
}

Test(forwarded, all_trusted_entries_give_the_leftmost)
{
    assert_client("127.0.0.1", "10.0.0.2, 10.0.0.1", "10.0.0.2");
}

Test(forwarded, trusted_peer_without_header_is_the_client)
{
    assert_client("127.0.0.1", NULL, "127.0.0.1");
}

Test(forwarded, garbage_entry_stops_at_the_last_good_one)
{
    assert_client("127.0.0.1", "198.51.100.1, not-an-ip, 10.0.0.7", "10.0.0.7");
    assert_client("127.0.0.1", "junk", "127.0.0.1");
}

Test(forwarded, ipv6_entries_are_understood)
{
    assert_client("10.9.9.9", " 2001:db8::1 ", "2001:db8::1");
}

Test(forwarded, hop_by_hop_fields_are_recognised_in_any_case)
{
    cr_assert(forwarded_is_hop_by_hop("connection"));
    cr_assert(forwarded_is_hop_by_hop("Transfer-Encoding"));
    cr_assert(forwarded_is_hop_by_hop("proxy-authorization"));
    cr_assert_not(forwarded_is_hop_by_hop("Content-Type"));
    cr_assert_not(forwarded_is_hop_by_hop("Authorization"));
}

Test(forwarded, fields_named_by_connection_are_hop_by_hop)
{
    cr_assert(forwarded_in_connection("keep-alive, X-Secret", "x-secret"));
    cr_assert(forwarded_in_connection("close,X-A", "X-A"));
    cr_assert_not(forwarded_in_connection("X-Secrets", "X-Secret"));
    cr_assert_not(forwarded_in_connection(NULL, "X-Secret"));
}

Test(forwarded, hop_by_hop_is_exactly_the_nine_names_in_any_case)
{
    static const char *const hop[] = {"Connection",
                                      "Keep-Alive",
                                      "Proxy-Connection",
                                      "TE",
                                      "Trailer",
                                      "Transfer-Encoding",
                                      "Upgrade",
                                      "Proxy-Authenticate",
                                      "Proxy-Authorization",
                                      "connection",
                                      "KEEP-ALIVE",
                                      "te",
                                      "tRAILER",
                                      "UPGRADE",
                                      "proxy-authorization"};
    static const char *const end_to_end[] = {"",
                                             "T",
                                             "TEE",
                                             "Trailers",
                                             "Upgrade2",
                                             "Upgradf",
                                             "Connectio",
                                             "Keep-Alivf",
                                             "Connections",
                                             "Transfer-Encodings",
                                             "Proxy-Authorizatio",
                                             "Proxy-Authenticatf",
                                             "X-Connection",
                                             "Content-Length",
                                             "Cache-Control",
                                             "Accept"};

    for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++) {
        cr_assert(forwarded_is_hop_by_hop(hop[i]), "%s", hop[i]);
    }
    for (size_t i = 0; i < sizeof(end_to_end) / sizeof(end_to_end[0]); i++) {
        cr_assert_not(forwarded_is_hop_by_hop(end_to_end[i]), "%s",
                      end_to_end[i]);
    }
}

/* forwarded_identity() over 'h' with the default field names. */
static enum forwarded_identity_status
identity(const struct headers *h, bool believed, struct forwarded_identity *who)
{
    return forwarded_identity(h, believed, "X-User-Id", "X-User-Role", who);
}

Test(forwarded, a_trusted_proxy_asserts_the_identity_in_single_fields)
{
    struct headers h;
    struct forwarded_identity who;

    headers_init(&h);
    headers_add(&h, "x-user-id", "u1");
    headers_add(&h, "X-User-Role", "staff");
    cr_assert_eq(identity(&h, true, &who), FORWARDED_IDENTITY_OK);
    cr_assert_str_eq(who.user, "u1");
    cr_assert_str_eq(who.role, "staff");
    /* Nobody else does. */
    cr_assert_eq(identity(&h, false, &who), FORWARDED_IDENTITY_OK);
    cr_assert_null(who.user);
    cr_assert_null(who.role);
    /* Names not configured are not read. */
    cr_assert_eq(forwarded_identity(&h, true, NULL, "X-User-Role", &who),
                 FORWARDED_IDENTITY_OK);
    cr_assert_null(who.user);
    cr_assert_str_eq(who.role, "staff");
    headers_deinit(&h);
}

Test(forwarded, an_empty_or_absent_field_is_no_identity)
{
    struct headers h;
    struct forwarded_identity who;

    headers_init(&h);
    cr_assert_eq(identity(&h, true, &who), FORWARDED_IDENTITY_OK);
    cr_assert_null(who.user);
    cr_assert_null(who.role);
    headers_add(&h, "X-User-Id", "");
    cr_assert_eq(identity(&h, true, &who), FORWARDED_IDENTITY_OK);
    cr_assert_null(who.user);
    headers_deinit(&h);
}

Test(forwarded, a_repeated_identity_field_is_ambiguous_from_a_trusted_peer_only)
{
    struct headers h;
    struct forwarded_identity who;

    headers_init(&h);
    headers_add(&h, "X-User-Id", "u1");
    headers_add(&h, "X-User-Role", "a");
    headers_add(&h, "x-user-role", "");
    cr_assert_eq(identity(&h, true, &who), FORWARDED_IDENTITY_REPEATED);
    cr_assert_null(who.user);
    cr_assert_null(who.role);
    cr_assert_eq(identity(&h, false, &who), FORWARDED_IDENTITY_OK);
    cr_assert_null(who.user);
    headers_clear(&h);
    headers_add(&h, "X-User-Id", "u1");
    headers_add(&h, "X-User-Id", "u1");
    cr_assert_eq(identity(&h, true, &who), FORWARDED_IDENTITY_REPEATED);
    headers_deinit(&h);
}
