/*
 * sentinel.h - Redis Sentinel for the Redis client: asks the sentinels
 * where the primary of a master name is, and listens on one of them for
 * '+switch-master'. hiredis async on a worker's event_base, with the same
 * timers as redis.c (hiredis 0.14 has none). One per Redis client, never
 * shared; does I/O (and host name lookups through resolve.h).
 */
#ifndef SLUICE_SENTINEL_H
#define SLUICE_SENTINEL_H

#include <stdint.h>

struct event_base;
struct redis_conf;
struct sentinel; /* opaque */

/*
 * The primary's address as a sentinel gave it: 'ip' and 'port', or 'ip'
 * NULL when no sentinel answered. 'ip' is borrowed for the call.
 */
typedef void sentinel_addr_cb(const char *ip, uint16_t port, void *arg);

/* The watch has just subscribed (again): the owner should check the
 * primary's address, since a switch may have gone by unheard. */
typedef void sentinel_watch_cb(void *arg);

/*
 * Creates the client for conf->sentinel_master and conf->sentinels (both
 * copied) on 'base' (borrowed). 'timeout_ms' bounds each connection to a
 * sentinel and each answer. It subscribes at once, on the first sentinel
 * that monitors the master and takes it (the next one when that fails,
 * forever, with a growing, jittered pause between rounds and after a
 * lost subscription; a subscription whose sentinel leaves a heartbeat
 * unanswered for 'timeout_ms' is lost), runs
 * 'on_watch' each time a subscription is confirmed, and runs 'on_switch'
 * with the new address whenever that sentinel announces a failover of our
 * master: at most once a second, the last announcement heard within that
 * second being followed when it ends. Both run from inside hiredis (or
 * from a timer): they may call sentinel_ask() and sentinel_cancel(),
 * never sentinel_free(). 'arg' is for both; borrowed.
 */
struct sentinel *sentinel_new(struct event_base *base,
                              const struct redis_conf *conf,
                              uint64_t timeout_ms, sentinel_addr_cb *on_switch,
                              sentinel_watch_cb *on_watch, void *arg);
/*
 * Closes every connection; a pending ask is not answered. NULL: no-op.
 * Never from inside a callback that runs within hiredis: not from
 * 'on_switch' or 'on_watch', nor from anything they call. From an ask's
 * 'cb' it is allowed: that one runs from a timer.
 */
void sentinel_free(struct sentinel *s);

/*
 * Asks the sentinels for the primary's address, in their order but
 * starting at the one that answered last: each gets 'timeout_ms' to
 * connect and answer, and the first answer wins. 'cb' runs exactly once,
 * later from the loop (a timer), never inside this call, unless
 * sentinel_cancel() or sentinel_free() comes first; it may ask again,
 * cancel or free. An ask still pending is cancelled by the next.
 */
void sentinel_ask(struct sentinel *s, sentinel_addr_cb *cb, void *arg);
/*
 * The address the last answer gave did not work out (not the primary,
 * unreachable, or failing the handshake): the next ask starts at the
 * sentinel after the one that gave it, so that one stale or lying
 * sentinel cannot hold every attempt on its answer.
 */
void sentinel_distrust(struct sentinel *s);

/* The pending ask, if any, is dropped: its 'cb' will not run. */
void sentinel_cancel(struct sentinel *s);

#endif
