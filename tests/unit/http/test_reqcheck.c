#include <criterion/criterion.h>

#include "headers.h"
#include "reqcheck.h"

/* The request under test: "GET / HTTP/1.1", Host set, body read. */
static struct headers fields;
static struct reqcheck_request req;

static void
setup(void)
{
    headers_init(&fields);
    headers_add(&fields, "Host", "example.com");
    req.method = "GET";
    req.target = "/";
    req.http_major = 1;
    req.http_minor = 1;
    req.headers = &fields;
    req.body_read = true;
}

static void
teardown(void)
{
    headers_deinit(&fields);
}

TestSuite(reqcheck, .init = setup, .fini = teardown);

/* Asserts the verdict on 'req' is 'want'; a refusal must say why. */
static void
expect(enum reqcheck_verdict want)
{
    static const char untouched[] = "untouched";
    const char *why = untouched;
    enum reqcheck_verdict got = reqcheck_request(&req, &why);

    cr_assert_eq(got, want, "verdict %d, want %d (why: %s)", (int)got,
                 (int)want, why);
    if (want == REQCHECK_OK) {
        cr_assert_eq(why, untouched, "why set on OK: %s", why);
    } else {
        cr_assert_neq(why, untouched);
        cr_assert_not_null(why);
        cr_assert_gt(strlen(why), 0);
    }
}

static void
accepted(void)
{
    expect(REQCHECK_OK);
}

static void
refused(void)
{
    expect(REQCHECK_BAD_REQUEST);
}

static void
not_implemented(void)
{
    expect(REQCHECK_NOT_IMPLEMENTED);
}

/* Replaces 'name' with one field of 'value'. */
static void
set(const char *name, const char *value)
{
    headers_set(&fields, name, value);
}

Test(reqcheck, a_plain_get_is_accepted)
{
    accepted();
}

Test(reqcheck, refusals_map_to_400_and_501)
{
    cr_assert_eq(reqcheck_status(REQCHECK_OK), 0);
    cr_assert_eq(reqcheck_status(REQCHECK_BAD_REQUEST), 400);
    cr_assert_eq(reqcheck_status(REQCHECK_NOT_IMPLEMENTED), 501);
}

Test(reqcheck, an_empty_or_missing_target_is_refused)
{
    req.target = "";
    refused();
    req.target = NULL;
    refused();
    req.target = "*";
    accepted();
}

Test(reqcheck, a_target_with_a_space_is_refused)
{
    req.target = "/a b";
    refused();
    req.target = "/a%20b";
    accepted();
}

Test(reqcheck, a_target_with_a_control_byte_is_refused)
{
    static const char *const bad[] = {
        "/a\rb", "/a\nb", "/a\tb", "/a\x01", "/a\x1f", "/a\x7f", "\r\n",
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        req.target = bad[i];
        refused();
    }
    req.target = "/a?b=c&d=%7F#~";
    accepted();
}

Test(reqcheck, a_target_with_bytes_above_0x7f_is_accepted)
{
    req.target = "/caf\xc3\xa9";
    accepted();
    req.target = "/\x80\xff";
    accepted();
}

Test(reqcheck, a_header_name_with_a_trailing_space_is_refused)
{
    headers_add(&fields, "Transfer-Encoding ", "chunked");
    refused();
    headers_remove(&fields, "Transfer-Encoding ");
    headers_add(&fields, "Transfer-Encoding", "chunked");
    accepted();
}

Test(reqcheck, a_header_name_that_is_not_a_token_is_refused)
{
    static const char *const bad[] = {
        "", " X", "X Y", "X:Y", "X\tY", "X(Y)", "X\x01", "X\x7f", "X\xc3\xa9",
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        headers_add(&fields, bad[i], "1");
        refused();
        headers_remove(&fields, bad[i]);
    }
    headers_add(&fields, "X-A.b_c~!#$%&'*+^`|", "1");
    accepted();
}

Test(reqcheck, a_header_value_with_a_control_character_is_refused)
{
    static const char *const bad[] = {
        "a\rb", "a\nb", "a\r\nX-Evil: 1", "\x01", "a\x1f", "a\x7f",
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        set("X-Test", bad[i]);
        refused();
    }
    set("X-Test", "a\tb c \xc3\xa9");
    accepted();
    set("X-Test", "");
    accepted();
}

Test(reqcheck, a_content_length_that_is_not_digits_is_refused)
{
    static const char *const bad[] = {
        "", " ", "abc", "-1", "+5", "5 5", "0x10", "5a", "1e3", "5.0", "\t",
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        set("Content-Length", bad[i]);
        refused();
    }
    set("Content-Length", "5");
    accepted();
    set("Content-Length", "0");
    accepted();
    set("Content-Length", " 42\t");
    accepted();
}

Test(reqcheck, a_content_length_list_is_refused)
{
    set("Content-Length", "5, 5");
    refused();
    set("Content-Length", "5,5");
    refused();
    set("Content-Length", "5");
    accepted();
}

Test(reqcheck, a_content_length_beyond_63_bits_is_refused)
{
    set("Content-Length", "9223372036854775808");
    refused();
    set("Content-Length", "99999999999999999999999999");
    refused();
    set("Content-Length", "9223372036854775807");
    accepted();
}

Test(reqcheck, differing_content_lengths_are_refused)
{
    headers_add(&fields, "Content-Length", "5");
    headers_add(&fields, "content-length", "6");
    refused();
    headers_remove(&fields, "Content-Length");
    headers_add(&fields, "Content-Length", "5");
    headers_add(&fields, "CONTENT-LENGTH", "5");
    accepted();
}

Test(reqcheck, a_bad_content_length_after_a_good_one_is_refused)
{
    headers_add(&fields, "Content-Length", "5");
    headers_add(&fields, "Content-Length", "x");
    refused();
}

Test(reqcheck, transfer_encoding_with_content_length_is_refused)
{
    set("Transfer-Encoding", "chunked");
    set("Content-Length", "5");
    refused();
    set("Content-Length", "0");
    refused();
    headers_remove(&fields, "Content-Length");
    accepted();
}

Test(reqcheck, transfer_encoding_in_http_1_0_is_refused)
{
    headers_remove(&fields, "Host");
    req.http_minor = 0;
    set("Transfer-Encoding", "chunked");
    refused();
    req.http_minor = 1;
    set("Host", "example.com");
    accepted();
}

Test(reqcheck, chunked_listed_twice_is_refused)
{
    set("Transfer-Encoding", "chunked, chunked");
    refused();
    set("Transfer-Encoding", "gzip, chunked, chunked");
    refused();
    set("Transfer-Encoding", "chunked");
    accepted();
}

Test(reqcheck, two_transfer_encoding_fields_are_refused)
{
    headers_add(&fields, "Transfer-Encoding", "chunked");
    headers_add(&fields, "transfer-encoding", "chunked");
    refused();
    headers_remove(&fields, "Transfer-Encoding");
    headers_add(&fields, "transfer-encoding", "chunked");
    accepted();
}

Test(reqcheck, a_transfer_coding_other_than_chunked_is_not_implemented)
{
    static const char *const bad[] = {
        "xchunked",      "chunkedx",    "gzip",  "gzip, chunked",
        "chunked, gzip", "chunked;q=1", "",      "chunked,",
        ", chunked",     "chunked ,, ", "chunk", "identity",
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        set("Transfer-Encoding", bad[i]);
        not_implemented();
    }
    set("Transfer-Encoding", "Chunked");
    accepted();
}

/* evhttp reads "\tchunked" as no coding at all: the body stays unread. */
Test(reqcheck, chunked_with_blanks_evhttp_kept_is_not_taken_for_chunked)
{
    static const char *const bad[] = {"\tchunked", "chunked\t", " chunked",
                                      " CHUNKED\t"};

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        set("Transfer-Encoding", bad[i]);
        not_implemented();
    }
}

Test(reqcheck, an_unknown_coding_with_content_length_is_a_bad_request)
{
    set("Transfer-Encoding", "gzip");
    set("Content-Length", "5");
    refused();
}

Test(reqcheck, a_head_request_announcing_a_body_is_refused)
{
    req.method = "HEAD";
    req.body_read = false;
    set("Content-Length", "5");
    refused();
    set("Content-Length", "0");
    accepted();
    headers_remove(&fields, "Content-Length");
    accepted();
}

Test(reqcheck, a_head_request_with_transfer_encoding_is_refused)
{
    req.method = "HEAD";
    req.body_read = false;
    set("Transfer-Encoding", "chunked");
    refused();
    set("Transfer-Encoding", "gzip");
    refused();
    req.method = "POST";
    req.body_read = true;
    set("Transfer-Encoding", "chunked");
    accepted();
}

/* TRACE is not served: 501 whatever the rest says. */
Test(reqcheck, trace_is_not_implemented)
{
    req.method = "TRACE";
    req.target = "/";
    req.body_read = false;
    expect(REQCHECK_NOT_IMPLEMENTED);
    req.method = "OPTIONS";
    req.body_read = true;
    accepted();
}

Test(reqcheck, a_post_with_a_body_is_accepted)
{
    req.method = "POST";
    set("Content-Length", "5");
    accepted();
}

Test(reqcheck, two_host_fields_are_refused)
{
    headers_add(&fields, "host", "example.com");
    refused();
    headers_remove(&fields, "Host");
    headers_add(&fields, "Host", "example.com");
    accepted();
}

Test(reqcheck, two_host_fields_are_refused_in_http_1_0_too)
{
    req.http_minor = 0;
    headers_add(&fields, "Host", "evil.example");
    refused();
}

Test(reqcheck, an_http_1_1_request_without_host_is_refused)
{
    headers_remove(&fields, "Host");
    refused();
    req.http_minor = 0;
    accepted();
}

Test(reqcheck, an_empty_host_given_once_is_accepted)
{
    set("Host", "");
    accepted();
}

Test(reqcheck, versions_other_than_1_0_and_1_1_are_refused)
{
    static const unsigned bad[][2] = {{1, 2}, {2, 0}, {0, 9}, {1, 255}};

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        req.http_major = bad[i][0];
        req.http_minor = bad[i][1];
        refused();
    }
    req.http_major = 1;
    req.http_minor = 0;
    headers_remove(&fields, "Host");
    accepted();
}

/* RFC 9110 7.2: Host = uri-host [ ":" port ]. */
Test(reqcheck, a_host_that_is_not_a_host_and_port_is_refused)
{
    static const char *const good[] = {
        "example.com",
        "example.com:8080",
        "EXAMPLE.com:",
        "127.0.0.1",
        "127.0.0.1:80",
        "[::1]",
        "[::1]:443",
        "[2001:db8::1]",
        "a-b_c~d.e",
        "xn--bcher-kva.ch",
        "%41bc",
        "sub.delims!$&'()*+,;=",
        "",
        " example.com\t",
        "a:65535",
    };
    static const char *const bad[] = {
        "admin.example.org:80@evil.com",
        "admin.example.org:junk/../x",
        "a/b",
        "a b",
        "a:65536",
        "a:123456",
        ":80",
        "a:-1",
        "a:8 0",
        "[::1",
        "[::1]x",
        "[v1.future]",
        "[fe80::1%25eth0]",
        "[127.0.0.1]",
        "a%4",
        "a%zz",
        "a\"b",
        "a@b",
        "a:80:80",
    };

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        headers_set(&fields, "Host", good[i]);
        accepted();
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        headers_set(&fields, "Host", bad[i]);
        refused();
    }
}

/* "[::1]:" ends with an empty port, which RFC 3986 allows. */
Test(reqcheck, an_empty_port_is_a_port)
{
    cr_assert(reqcheck_host_ok("[::1]:", 6));
    cr_assert(reqcheck_host_ok("a:", 2));
}

/* The port is read within the slice, never past it. */
Test(reqcheck, host_ok_reads_only_its_slice)
{
    cr_assert(reqcheck_host_ok("a:6553599", 7));
    cr_assert(!reqcheck_host_ok("a:6553599", 9));
    cr_assert(reqcheck_host_ok("a@b", 1));
}

/* origin-form is all path, "//x" included; absolute-form only for http
 * and https, with a host and no userinfo. */
Test(reqcheck, targets_split_into_path_and_authority)
{
    static const struct {
        const char *target;
        const char *path;      /* the path's bytes */
        const char *authority; /* NULL: origin-form */
    } good[] = {
        {"/", "/", NULL},
        {"/a/b?q=1#f", "/a/b", NULL},
        {"//admin/x", "//admin/x", NULL},
        {"//admin", "//admin", NULL},
        {"/a#frag?x", "/a", NULL},
        {"http://example.com/a?q", "/a", "example.com"},
        {"HTTPS://example.com:8443", "/", "example.com:8443"},
        {"http://[::1]:80?q", "/", "[::1]:80"},
        {"http://h#f", "/", "h"},
    };
    static const char *const bad[] = {
        "*",
        "example.com:80",
        "ftp://x/",
        "http:/x",
        "foo://x/admin",
        "http://",
        "http:///x",
        "http://u:p@host/x",
        "http://a b/",
        "http://a:x/",
        "x/y",
        "",
    };
    struct reqcheck_target t;

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        cr_assert(reqcheck_target_split(good[i].target, &t), "%s",
                  good[i].target);
        cr_assert_eq(t.path_len, strlen(good[i].path), "%s", good[i].target);
        cr_assert(strncmp(t.path, good[i].path, t.path_len) == 0, "%s",
                  good[i].target);
        if (good[i].authority == NULL) {
            cr_assert_null(t.authority, "%s", good[i].target);
        } else {
            cr_assert_eq(t.authority_len, strlen(good[i].authority));
            cr_assert(
                strncmp(t.authority, good[i].authority, t.authority_len) == 0,
                "%s", good[i].target);
        }
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_assert(!reqcheck_target_split(bad[i], &t), "%s", bad[i]);
    }
}

Test(reqcheck, a_target_of_another_form_is_refused)
{
    static const char *const bad[] = {"foo://x/admin/a", "http:/admin/a",
                                      "http://u@h/", "example.com:443"};

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        req.target = bad[i];
        refused();
    }
    req.target = "http://example.com/a";
    accepted();
}

/* Every byte in a name: exactly unreserved and sub-delims pass. */
Test(reqcheck, a_host_name_takes_exactly_the_reg_name_characters)
{
    static const char allowed[] = "-._~!$&'()*+,;=";

    for (int c = 1; c < 256; c++) {
        char host[4] = {'a', (char)c, 'b', '\0'};
        bool want = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') || strchr(allowed, c) != NULL;

        if (c == ':' || c == '%') {
            continue; /* a port, an escape */
        }
        cr_assert_eq(reqcheck_host_ok(host, 3), want, "byte 0x%02x", c);
    }
}
