/*
 * The sections server:, admin: and identity: as a whole: the rules
 * between their keys, each refused with one error naming its file, line,
 * column and key.
 */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "config_test.h"

/* A route to make a file complete. */
#define ROUTE "routes:\n  - id: a\n    uri: http://h\n"

static void
assert_ok(const char *yaml)
{
    struct config_errors e;
    struct config *cfg = parse(yaml, &e);

    cr_assert_not_null(cfg, "refused: %s", e.n > 0 ? e.v[0] : "(no error)");
    config_unref(cfg);
    config_errors_deinit(&e);
}

Test(load_server, user_and_role_need_two_fields)
{
    assert_error("identity: {user_header: X-Who, role_header: x-who}\n" ROUTE,
                 "t.yaml:1:45: identity.role_header: x-who is user_header's "
                 "field too (X-Who): user and role need two fields (names "
                 "differing in more than case and '_' for '-')");
    assert_error("identity:\n"
                 "  role_header: X_User_Id\n" ROUTE,
                 "t.yaml:2:16: identity.role_header: X_User_Id is "
                 "user_header's field too (X-User-Id): user and role need "
                 "two fields (names differing in more than case and '_' for "
                 "'-')");
}

Test(load_server, an_identity_field_the_gateway_owns_is_refused)
{
    assert_error("identity: {user_header: Host}\n" ROUTE,
                 "t.yaml:1:25: identity.user_header: Host cannot carry the "
                 "identity: the gateway writes it when it forwards the "
                 "request");
    assert_error("identity: {user_header: X-Forwarded-For}\n" ROUTE,
                 "t.yaml:1:25: identity.user_header: X-Forwarded-For cannot "
                 "carry the identity: the gateway writes it when it forwards "
                 "the request");
    assert_error("identity: {role_header: Content-Length}\n" ROUTE,
                 "t.yaml:1:25: identity.role_header: Content-Length cannot "
                 "carry the identity: the gateway writes it when it forwards "
                 "the request");
    assert_error("identity: {role_header: Connection}\n" ROUTE,
                 "t.yaml:1:25: identity.role_header: Connection cannot carry "
                 "the identity: it is hop-by-hop, never forwarded");
}

Test(load_server, identity_fields_of_their_own_load)
{
    assert_ok(
        "identity: {user_header: X-Account, role_header: X-Plan}\n" ROUTE);
}

Test(load_server, two_listeners_on_one_address_are_refused)
{
    assert_error("server: {listen: 127.0.0.1:9090}\n"
                 "admin: {}\n" ROUTE,
                 "t.yaml:2:8: admin.listen: server.listen and admin.listen "
                 "would both bind port 9090 (127.0.0.1, 127.0.0.1): give them "
                 "different ports");
    assert_error("server: {listen: 0.0.0.0:8081}\n"
                 "admin: {listen: '127.0.0.1:8081'}\n" ROUTE,
                 "t.yaml:2:17: admin.listen: server.listen and admin.listen "
                 "would both bind port 8081 (0.0.0.0, 127.0.0.1): give them "
                 "different ports");
    assert_error("server:\n"
                 "  listen: '[::]:8443'\n"
                 "  tls: {cert_file: c.pem, key_file: k.pem}\n" ROUTE,
                 "t.yaml:3:8: server.tls: server.listen and "
                 "server.tls.listen would both bind port 8443 (::, 0.0.0.0): "
                 "give them different ports");
    assert_error("sluice:\n"
                 "  admin: {listen: '0.0.0.0:9000'}\n"
                 "server:\n"
                 "  port: 9000\n"
                 "spring:\n"
                 "  cloud:\n"
                 "    gateway:\n"
                 "      routes: []\n",
                 "t.yaml:4:9: server.port: server.listen and admin.listen "
                 "would both bind port 9000 (0.0.0.0, 0.0.0.0): give them "
                 "different ports");
}

Test(load_server, listeners_on_other_ports_or_families_load)
{
    assert_ok("server: {listen: 127.0.0.1:9090}\n"
              "admin: {listen: '127.0.0.2:9090'}\n" ROUTE);
    assert_ok("server: {listen: 0.0.0.0:9090}\n"
              "admin: {listen: '[::1]:9090'}\n" ROUTE);
    assert_ok("admin: {}\n" ROUTE);
}

/* Both fields are checked, whichever is wrong first. */
Test(load_server, both_identity_fields_are_checked)
{
    struct config_errors e;
    struct config *cfg = parse(
        "identity: {user_header: Host, role_header: Connection}\n" ROUTE, &e);

    cr_assert_null(cfg);
    cr_assert_eq(e.n, 2, "%zu errors, first: %s", e.n, e.n > 0 ? e.v[0] : "");
    cr_assert(strstr(e.v[1], "identity.role_header: Connection") != NULL, "%s",
              e.v[1]);
    config_errors_deinit(&e);
}

/* One clash, one error: the admin's check looks at the admin listener,
 * not again at the two the server's check already compared. */
Test(load_server, a_clash_is_told_once)
{
    assert_error("server:\n"
                 "  listen: '[::]:8443'\n"
                 "  tls: {cert_file: c.pem, key_file: k.pem}\n"
                 "admin: {listen: '127.0.0.1:9999'}\n" ROUTE,
                 "t.yaml:3:8: server.tls: server.listen and "
                 "server.tls.listen would both bind port 8443 (::, 0.0.0.0): "
                 "give them different ports");
}
