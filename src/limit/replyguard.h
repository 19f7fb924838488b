/*
 * replyguard.h - what hiredis 0.14's asynchronous context is not told: a
 * reply that no command waits for, a subscription's message of another
 * shape than a subscription sends, and an array too long for any reply
 * the gateway asks for. hiredis asserts on the first two (a non-error
 * reply with no callback pending, or a message that is not an array of
 * a string kind and channel, aborts the process; an "unsubscribe" of two
 * elements makes it read past the array), and callocs the third whole,
 * then walks it to free it (10^9 elements: seconds of a worker's loop).
 * The guard replaces the reader's object functions of one connection, so
 * that such a reply is refused as it begins: hiredis then reports a
 * reader error and disconnects, and the owner's disconnect callback
 * answers what waits, as for a lost connection. No I/O, no allocation.
 */
#ifndef SLUICE_REPLYGUARD_H
#define SLUICE_REPLYGUARD_H

#include <stdbool.h>

#include <hiredis/async.h>

/* The longest array any reply may hold: CLUSTER SLOTS has at most one
 * element per slot range, 16384. */
#define REPLYGUARD_ARRAY_MAX 65536
/* The most objects one reply may be made of, nested arrays' elements
 * included: a CLUSTER SLOTS reply of 16384 ranges with three replicas
 * each has about 400,000. Each is a hiredis object in memory before the
 * reply is whole. */
#define REPLYGUARD_OBJECTS_MAX (1024 * 1024)
/* The most bytes read and not yet parsed that a connection may hold: one
 * unfinished string (a line with no CRLF yet, a bulk string still
 * coming), which hiredis keeps whole, and rescans for a line's end at
 * each read. No reply the gateway asks for has a string near it. */
#define REPLYGUARD_UNREAD_MAX (1024 * 1024)

struct replyguard {
    const redisAsyncContext *ac;           /* guarded; borrowed */
    const redisReplyObjectFunctions *base; /* the reader's own functions */
    const char *refused; /* why a reply was refused (static text), or NULL */
    size_t objects;      /* of the reply being read, so far */
    bool message;        /* the reply being read is a subscription's */
    bool unsubscribe;    /* and its kind is "unsubscribe" */
};

/*
 * Guards 'ac' (borrowed): 'g' (the caller's) must outlive 'ac', and holds
 * after a refusal the reason, which hiredis's own error ("Out of memory")
 * does not give. A subscribed context's messages, which come with no
 * callback, pass when they are arrays of three: two strings, then a
 * string or an integer (an integer for "unsubscribe"). No pattern
 * subscription ("pmessage", four elements) is expected, and no command
 * may be sent on a subscribed connection (its reply, which hiredis would
 * take as a message, is refused unless it has that shape).
 */
void replyguard_attach(struct replyguard *g, redisAsyncContext *ac);

/*
 * True when the guarded connection holds more than REPLYGUARD_UNREAD_MAX
 * bytes read and not yet parsed (then 'g->refused' says so): the owner
 * drops it. hiredis gives no hook between reading and parsing, so the
 * owner asks, on a timer while the connection is open.
 */
bool replyguard_overflowing(struct replyguard *g);

#endif
