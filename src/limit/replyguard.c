#include "replyguard.h"

#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include <hiredis/hiredis.h>

static bool
refuse(struct replyguard *g, const char *why)
{
    g->refused = why;
    return false;
}

/*
 * Whether the object that 'task' begins may be read: an array of
 * 'elements' (-1 for anything else), or the string 's' of 'len' bytes.
 * hiredis hands each reply's callback over only once the reply is whole,
 * so while a reply is read its own callback still waits in the list.
 */
static bool
admit(const redisReadTask *task, int elements, const char *s, size_t len,
      bool nil)
{
    struct replyguard *g = task->privdata;
    const redisAsyncContext *ac = g->ac;

    if (elements > REPLYGUARD_ARRAY_MAX) {
        return refuse(g, "an array longer than any reply");
    }
    if (task->parent == NULL) {
        g->objects = 0;
    }
    if (++g->objects > REPLYGUARD_OBJECTS_MAX) {
        return refuse(g, "a reply of more objects than any reply");
    }
    if (task->parent == NULL) {
        g->message = false;
        /* An error with no command waiting (too many clients) hiredis
         * takes for the server's reason to close, and disconnects. */
        if (task->type == REDIS_REPLY_ERROR || ac->replies.head != NULL) {
            return true;
        }
        if ((ac->c.flags & REDIS_SUBSCRIBED) == 0) {
            return refuse(g, "a reply no command asked for");
        }
        /* A subscription's message: hiredis asserts on any other shape
         * (and reads past a shorter one), so it is checked as it comes. */
        if (elements != 3) {
            return refuse(g, "a message of a subscription not of 3 elements");
        }
        g->message = true;
        return true;
    }
    if (!g->message) {
        return true;
    }
    /* Elements of a message: its kind and channel, strings; then the
     * payload, or for "unsubscribe" the count of channels left. */
    switch (task->idx) {
    case 0:
        /* hiredis reads the kind as a C string; a NUL would make it read
         * another kind than the bytes say. */
        if (s != NULL && memchr(s, '\0', len) != NULL) {
            return refuse(g, "a message of a subscription with a NUL in "
                             "its kind");
        }
        g->unsubscribe =
            len >= 11 && strncasecmp(s + len - 11, "unsubscribe", 11) == 0;
        /* fall through */
    case 1:
        /* A nil is read as "$-1", a string's type, but is no string. */
        if (task->type != REDIS_REPLY_STRING || nil) {
            return refuse(g, "a message of a subscription without its kind "
                             "or channel");
        }
        return true;
    default:
        if (task->type != REDIS_REPLY_INTEGER &&
            (task->type != REDIS_REPLY_STRING || nil || g->unsubscribe)) {
            return refuse(g, "a message of a subscription of the wrong type");
        }
        return true;
    }
}

static void *
guard_string(const redisReadTask *task, char *s, size_t len)
{
    const struct replyguard *g = task->privdata;

    return admit(task, -1, s, len, false) ? g->base->createString(task, s, len)
                                          : NULL;
}

static void *
guard_array(const redisReadTask *task, int elements)
{
    const struct replyguard *g = task->privdata;

    return admit(task, elements, NULL, 0, false)
               ? g->base->createArray(task, elements)
               : NULL;
}

static void *
guard_integer(const redisReadTask *task, long long v)
{
    const struct replyguard *g = task->privdata;

    return admit(task, -1, NULL, 0, false) ? g->base->createInteger(task, v)
                                           : NULL;
}

static void *
guard_nil(const redisReadTask *task)
{
    const struct replyguard *g = task->privdata;

    return admit(task, -1, NULL, 0, true) ? g->base->createNil(task) : NULL;
}

/* hiredis's own freeObject is freeReplyObject(): the objects are its. */
static redisReplyObjectFunctions guarded = {
    .createString = guard_string,
    .createArray = guard_array,
    .createInteger = guard_integer,
    .createNil = guard_nil,
    .freeObject = freeReplyObject,
};

void
replyguard_attach(struct replyguard *g, redisAsyncContext *ac)
{
    redisReader *r = ac->c.reader;

    g->ac = ac;
    g->refused = NULL;
    g->message = false;
    if (r->fn != &guarded) {
        g->base = r->fn;
    }
    r->fn = &guarded;
    r->privdata = g; /* redisReaderSetPrivdata() casts to int */
}

bool
replyguard_overflowing(struct replyguard *g)
{
    const redisReader *r = g->ac->c.reader;

    if (r->len - r->pos <= REPLYGUARD_UNREAD_MAX) {
        return false;
    }
    g->refused = "a reply of more than 1 MiB still unfinished";
    return true;
}
