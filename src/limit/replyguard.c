#include "replyguard.h"

#include <stdbool.h>

#include <hiredis/hiredis.h>

/*
 * Whether the reply whose first object 'task' is may be read. hiredis
 * hands each reply's callback over only once the reply is whole, so
 * while a reply is read its own callback still waits in the list.
 */
static bool
admit(const redisReadTask *task)
{
    struct replyguard *g = task->privdata;
    const redisAsyncContext *ac = g->ac;

    /* An error with no command waiting (too many clients) hiredis takes
     * for the server's reason to close, and disconnects with it. */
    if (task->parent != NULL || task->type == REDIS_REPLY_ERROR ||
        ac->replies.head != NULL ||
        (ac->c.flags & (REDIS_SUBSCRIBED | REDIS_MONITORING)) != 0) {
        return true;
    }
    g->refused = "a reply no command asked for";
    return false;
}

static void *
guard_string(const redisReadTask *task, char *s, size_t len)
{
    const struct replyguard *g = task->privdata;

    return admit(task) ? g->base->createString(task, s, len) : NULL;
}

static void *
guard_array(const redisReadTask *task, int elements)
{
    struct replyguard *g = task->privdata;

    if (elements > REPLYGUARD_ARRAY_MAX) {
        g->refused = "an array longer than any reply";
        return NULL;
    }
    return admit(task) ? g->base->createArray(task, elements) : NULL;
}

static void *
guard_integer(const redisReadTask *task, long long v)
{
    const struct replyguard *g = task->privdata;

    return admit(task) ? g->base->createInteger(task, v) : NULL;
}

static void *
guard_nil(const redisReadTask *task)
{
    const struct replyguard *g = task->privdata;

    return admit(task) ? g->base->createNil(task) : NULL;
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
    if (r->fn != &guarded) {
        g->base = r->fn;
    }
    r->fn = &guarded;
    redisReaderSetPrivdata(r, g);
}
