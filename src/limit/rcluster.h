/*
 * rcluster.h - the Redis Cluster client behind redis.h: routes each
 * script call to the primary of its slot, follows redirects and keeps the
 * slot map current. Drives one redis.h node client per primary on a
 * worker's event_base (it never includes hiredis); the slot arithmetic and
 * the parsing are cluster.h's. One per worker, never shared; does I/O.
 *
 * Design. The map comes from CLUSTER SLOTS, asked of a connected primary
 * (or, while none is, of the seed nodes of the config): at start, every
 * few seconds (jittered), at once after a MOVED, a CLUSTERDOWN, a
 * READONLY or a lost connection, and every 250 to 500 ms while a slot
 * has no connected primary. Each primary of the map gets a node client
 * (redis_client_node_new()): its own connection with the handshake,
 * reconnects, script cache (SCRIPT LOAD at each connect, NOSCRIPT answered
 * with EVAL) and pipelined calls of redis.c. A node that leaves the map is
 * closed when the new map is installed, or, while a call is on the wire
 * to it or bound there by an ASK, at the first install after.
 *
 * A call goes to the primary of the CRC16 slot of its first key (every key
 * of a call shares one hash tag) and gets an answer within redis.timeout,
 * whatever happens:
 *   MOVED        the map is updated for that slot (cluster_map_moved()),
 *                a full refresh is scheduled, and the call is resent to
 *                the new owner;
 *   ASK          resent once to the node named, after ASKING on the same
 *                connection; the map is left alone;
 *   TRYAGAIN, CLUSTERDOWN, READONLY
 *                resent after a short, doubling, jittered pause (a
 *                refresh first, for the last two); REDIS_CALL_TIMEOUT
 *                at once when the next pause would reach the deadline;
 *   a primary not connected yet (new in the map)
 *                the call waits for its first connection, likewise;
 *   a primary lost, or a slot no primary serves
 *                REDIS_CALL_DOWN at once: the failure policy applies, and
 *                a refresh finds the replica promoted in its place;
 *   the deadline REDIS_CALL_TIMEOUT, the attempt on the wire dropped.
 * At most RCLUSTER_MAX_REDIRECTS redirects per call, then
 * REDIS_CALL_ERROR. A call lost with its connection is not resent: it may
 * have run.
 */
#ifndef SLUICE_RCLUSTER_H
#define SLUICE_RCLUSTER_H

#include <stdbool.h>
#include <stddef.h>

#include "redis.h"

struct event_base;
struct lua_script;
struct redis_conf;
struct rcluster;      /* opaque */
struct rcluster_call; /* opaque: one call being routed */

#define RCLUSTER_MAX_REDIRECTS 5

/*
 * A client of the cluster of conf->cluster_nodes (the seeds) with the
 * user, password and timeout of 'conf' (all copied), on 'base'
 * (borrowed); it asks for the map at once. 'scripts' as for
 * redis_client_new().
 */
struct rcluster *rcluster_new(struct event_base *base,
                              const struct redis_conf *conf,
                              const struct lua_script *scripts, size_t nscripts,
                              size_t max_in_flight);
/* Pending calls get REDIS_CALL_DOWN first; then all closes. NULL: no-op. */
void rcluster_free(struct rcluster *cl);

/* True while there is a map, every slot has a primary, and every primary
 * of the map is connected. */
bool rcluster_ready(const struct rcluster *cl);

/* Counters of the calls, and of the node clients summed; the gauges are
 * computed by this call. */
const struct redis_stats *rcluster_stats(struct rcluster *cl);

/* As redis_client_eval_within(), with the same guarantees. */
struct rcluster_call *rcluster_eval(struct rcluster *cl,
                                    const struct lua_script *script,
                                    const char *const *keys, size_t nkeys,
                                    const char *const *args, size_t nargs,
                                    uint64_t timeout_ms, redis_script_cb *cb,
                                    void *arg);

/* As redis_call_cancel(). */
void rcluster_call_cancel(struct rcluster_call *call);

#endif
