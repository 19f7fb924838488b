/*
 * The reply guard (src/limit/replyguard.c) on a hiredis reader alone: an
 * asynchronous context that is never connected, whose callback list and
 * flags each test sets, and bytes fed as if the server had sent them.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "replyguard.h"

struct gx {
    redisAsyncContext ac;  /* only c.reader, c.flags, replies are used */
    redisCallback waiting; /* put in the list when a command waits */
    struct replyguard g;   /* under test */
};

static void
gx_init(struct gx *x, bool command_waits, bool subscribed)
{
    memset(x, 0, sizeof(*x));
    x->ac.c.reader = redisReaderCreate();
    cr_assert_not_null(x->ac.c.reader);
    if (command_waits) {
        x->ac.replies.head = x->ac.replies.tail = &x->waiting;
    }
    if (subscribed) {
        x->ac.c.flags |= REDIS_SUBSCRIBED;
    }
    replyguard_attach(&x->g, &x->ac);
}

static void
gx_fini(struct gx *x)
{
    redisReaderFree(x->ac.c.reader);
}

/* Feeds 's' and reads one reply: REDIS_OK with the reply (freed here),
 * or REDIS_ERR; '*type' gets the reply's type, or -1. */
static int
feed(struct gx *x, const char *s, int *type)
{
    void *reply = NULL;
    int rc;

    cr_assert_eq(redisReaderFeed(x->ac.c.reader, s, strlen(s)), REDIS_OK);
    rc = redisReaderGetReply(x->ac.c.reader, &reply);
    *type = reply != NULL ? ((redisReply *)reply)->type : -1;
    if (reply != NULL) {
        freeReplyObject(reply);
    }
    return rc;
}

Test(replyguard, a_reply_a_command_waits_for_passes_whatever_its_shape)
{
    static const char *const replies[] = {
        "+OK\r\n",
        ":5\r\n",
        "$-1\r\n",
        "$3\r\nabc\r\n",
        "*2\r\n$1\r\na\r\n*1\r\n:1\r\n",
        "*0\r\n",
    };

    for (size_t i = 0; i < sizeof(replies) / sizeof(replies[0]); i++) {
        struct gx x;
        int type;

        gx_init(&x, true, false);
        cr_assert_eq(feed(&x, replies[i], &type), REDIS_OK, "%s", replies[i]);
        cr_assert_neq(type, -1, "%s", replies[i]);
        cr_assert_null(x.g.refused);
        gx_fini(&x);
    }
}

Test(replyguard, a_reply_no_command_waits_for_is_refused_as_it_begins)
{
    static const char *const replies[] = {
        "+OK\r\n", ":5\r\n", "$-1\r\n", "$3\r\nabc\r\n", "*2\r\n",
    };

    for (size_t i = 0; i < sizeof(replies) / sizeof(replies[0]); i++) {
        struct gx x;
        int type;

        gx_init(&x, false, false);
        cr_assert_eq(feed(&x, replies[i], &type), REDIS_ERR, "%s", replies[i]);
        cr_assert_str_eq(x.g.refused, "a reply no command asked for");
        gx_fini(&x);
    }
}

Test(replyguard, an_error_no_command_waits_for_is_left_to_hiredis)
{
    struct gx x;
    int type;

    gx_init(&x, false, false);
    cr_assert_eq(feed(&x, "-ERR max number of clients reached\r\n", &type),
                 REDIS_OK);
    cr_assert_eq(type, REDIS_REPLY_ERROR);
    cr_assert_null(x.g.refused);
    gx_fini(&x);
}

Test(replyguard, an_array_longer_than_any_reply_is_refused_at_its_header)
{
    struct gx x;
    int type;

    gx_init(&x, true, false);
    cr_assert_eq(feed(&x, "*1000000000\r\n", &type), REDIS_ERR);
    cr_assert_str_eq(x.g.refused, "an array longer than any reply");
    gx_fini(&x);

    /* The longest allowed passes its header. */
    gx_init(&x, true, false);
    cr_assert_eq(feed(&x, "*65536\r\n", &type), REDIS_OK);
    cr_assert_null(x.g.refused);
    gx_fini(&x);
}

Test(replyguard, a_subscriptions_messages_pass)
{
    static const char *const messages[] = {
        "*3\r\n$9\r\nsubscribe\r\n$14\r\n+switch-master\r\n:1\r\n",
        "*3\r\n$7\r\nmessage\r\n$14\r\n+switch-master\r\n$3\r\nabc\r\n",
        "*3\r\n$11\r\nunsubscribe\r\n$14\r\n+switch-master\r\n:0\r\n",
    };

    for (size_t i = 0; i < sizeof(messages) / sizeof(messages[0]); i++) {
        struct gx x;
        int type;

        gx_init(&x, false, true);
        cr_assert_eq(feed(&x, messages[i], &type), REDIS_OK, "%s", messages[i]);
        cr_assert_eq(type, REDIS_REPLY_ARRAY, "%s", messages[i]);
        cr_assert_null(x.g.refused, "%s: %s", messages[i], x.g.refused);
        gx_fini(&x);
    }
}

/* Each of these made hiredis assert, or read past the array. */
Test(replyguard, a_subscriptions_message_of_another_shape_is_refused)
{
    static const char *const messages[] = {
        "+OK\r\n",
        "*1\r\n:1\r\n",
        "*2\r\n$11\r\nunsubscribe\r\n$14\r\n+switch-master\r\n",
        "*3\r\n:1\r\n$1\r\nx\r\n$1\r\ny\r\n",
        "*3\r\n$7\r\nmessage\r\n:5\r\n$3\r\nabc\r\n",
        "*3\r\n$11\r\nunsubscribe\r\n$14\r\n+switch-master\r\n$1\r\n0\r\n",
        "*3\r\n$7\r\nmessage\r\n$1\r\nc\r\n*1\r\n:1\r\n",
        "*4\r\n$8\r\npmessage\r\n$1\r\np\r\n$1\r\nc\r\n$1\r\nx\r\n",
        "*3\r\n$-1\r\n$14\r\n+switch-master\r\n$1\r\nx\r\n",
        "*3\r\n$7\r\nmessage\r\n$-1\r\n$1\r\nx\r\n",
    };

    for (size_t i = 0; i < sizeof(messages) / sizeof(messages[0]); i++) {
        struct gx x;
        int type;

        gx_init(&x, false, true);
        cr_assert_eq(feed(&x, messages[i], &type), REDIS_ERR, "%s",
                     messages[i]);
        cr_assert_not_null(x.g.refused, "%s", messages[i]);
        gx_fini(&x);
    }
}

/* "unsubscribe\0x": hiredis compares the kind as a C string and takes it
 * for an unsubscribe, whose count must be an integer. */
Test(replyguard, a_subscriptions_kind_with_a_nul_is_refused)
{
    static const char msg[] = "*3\r\n$13\r\nunsubscribe\0x\r\n"
                              "$14\r\n+switch-master\r\n$1\r\nx\r\n";
    struct gx x;
    void *reply = NULL;

    gx_init(&x, false, true);
    cr_assert_eq(redisReaderFeed(x.ac.c.reader, msg, sizeof(msg) - 1),
                 REDIS_OK);
    cr_assert_eq(redisReaderGetReply(x.ac.c.reader, &reply), REDIS_ERR);
    cr_assert_not_null(x.g.refused);
    gx_fini(&x);
}

/* Arrays nested, each within the bound: the objects a reply holds in
 * memory before it is whole are bounded too. */
Test(replyguard, a_reply_of_more_objects_than_any_is_refused)
{
    static const char inner[] = "*65536\r\n";
    char *ints = malloc(65536 * 4);
    struct gx x;
    void *reply = NULL;
    int rc = REDIS_OK;

    for (size_t i = 0; i < 65536; i++) {
        memcpy(ints + 4 * i, ":0\r\n", 4);
    }
    gx_init(&x, true, false);
    cr_assert_eq(redisReaderFeed(x.ac.c.reader, "*17\r\n", 5), REDIS_OK);
    for (int i = 0; i < 17 && rc == REDIS_OK; i++) {
        cr_assert_eq(redisReaderFeed(x.ac.c.reader, inner, sizeof(inner) - 1),
                     REDIS_OK);
        cr_assert_eq(redisReaderFeed(x.ac.c.reader, ints, 65536 * 4), REDIS_OK);
        rc = redisReaderGetReply(x.ac.c.reader, &reply);
        cr_assert_null(reply);
    }
    cr_assert_eq(rc, REDIS_ERR);
    cr_assert_str_eq(x.g.refused, "a reply of more objects than any reply");
    gx_fini(&x);
    free(ints);
}

/* An error line with no end, fed in pieces: hiredis keeps it whole. */
Test(replyguard, input_left_unparsed_past_a_mebibyte_is_overflowing)
{
    struct gx x;
    char *piece = malloc(64 * 1024);
    void *reply = NULL;
    size_t fed = 0;

    memset(piece, 'x', 64 * 1024);
    piece[0] = '-';
    gx_init(&x, true, false);
    while (fed <= REPLYGUARD_UNREAD_MAX) {
        cr_assert_not(replyguard_overflowing(&x.g), "at %zu bytes", fed);
        cr_assert_eq(redisReaderFeed(x.ac.c.reader, piece, 64 * 1024),
                     REDIS_OK);
        fed += 64 * 1024;
        cr_assert_eq(redisReaderGetReply(x.ac.c.reader, &reply), REDIS_OK);
        cr_assert_null(reply);
        piece[0] = 'x';
    }
    cr_assert(replyguard_overflowing(&x.g));
    cr_assert_not_null(x.g.refused);
    gx_fini(&x);
    free(piece);
}
