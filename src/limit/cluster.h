/*
 * cluster.h - the pure parts of a Redis Cluster client: the slot of a key
 * (CRC16 of its hash tag), the error replies that redirect a call or ask
 * for a retry, and the map from slot to primary node. Depends on xmalloc
 * only. Pure: no I/O; only the map allocates.
 */
#ifndef SLUICE_CLUSTER_H
#define SLUICE_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

/* Slots of a Redis Cluster: 0 .. CLUSTER_SLOTS - 1. */
#define CLUSTER_SLOTS 16384
/* The longest host a redirect or the map holds, NUL included. */
#define CLUSTER_HOST_MAX 256

/*
 * The slot of the key 'key' ('len' bytes, any bytes), as Redis Cluster
 * computes it: CRC16 (XMODEM) mod CLUSTER_SLOTS of the hash tag, the
 * bytes between the first '{' and the first '}' after it when there are
 * any, else of the whole key. 'key' may be NULL when 'len' is 0.
 */
unsigned cluster_slot(const char *key, size_t len);

/* What an error reply of a cluster node asks of the client. */
enum cluster_reply {
    CLUSTER_REPLY_OTHER,       /* the command's own error: no redirect */
    CLUSTER_REPLY_MOVED,       /* the slot lives elsewhere: update, resend */
    CLUSTER_REPLY_ASK,         /* resend there once, after ASKING */
    CLUSTER_REPLY_TRYAGAIN,    /* the slot is moving: retry later */
    CLUSTER_REPLY_CLUSTERDOWN, /* the slot or the cluster is down */
    CLUSTER_REPLY_READONLY,    /* the node is a replica now */
    CLUSTER_REPLY_MALFORMED    /* says MOVED or ASK but is not one */
};

/* The target of a MOVED or ASK. */
struct cluster_redirect {
    unsigned slot;               /* < CLUSTER_SLOTS */
    char host[CLUSTER_HOST_MAX]; /* "" when the reply named none */
    uint16_t port;               /* > 0 */
};

/*
 * Reads the error reply 'err' ('len' bytes, as hiredis gives it: without
 * the leading '-' and the CRLF) by its first word, which must be followed
 * by a space or end the reply:
 *   "MOVED <slot> <host>:<port>", "ASK <slot> <host>:<port>"
 *                           the target goes in '*out' (untouched for any
 *                           other outcome). The port follows the last
 *                           ':', so an IPv6 host comes as "::1:7000". An
 *                           empty host (cluster-preferred-endpoint-type
 *                           unknown-endpoint) is reported as "": the
 *                           caller substitutes the host it asked. "?" (a
 *                           node without the hostname it should announce)
 *                           is reported as it is and names no reachable
 *                           host.
 *   "TRYAGAIN ...", "CLUSTERDOWN ...", "READONLY ..."
 *   anything else           CLUSTER_REPLY_OTHER
 * A MOVED or ASK whose slot is not a decimal number below CLUSTER_SLOTS,
 * whose port is not one in 1..65535, whose host is too long or holds a
 * byte below 0x21 or 0x7f, or with a part missing or anything after the
 * port, is CLUSTER_REPLY_MALFORMED. Numbers have no sign and no leading
 * zero.
 */
enum cluster_reply cluster_redirect_parse(const char *err, size_t len,
                                          struct cluster_redirect *out);

/* Slots 'first' to 'last' (inclusive) and their primary. */
struct cluster_range {
    unsigned first;   /* <= last */
    unsigned last;    /* < CLUSTER_SLOTS */
    const char *host; /* non-empty; borrowed */
    uint16_t port;    /* > 0 */
};

/* A primary of the map. */
struct cluster_node {
    char *host;    /* owned by the map */
    uint16_t port; /* > 0 */
};

/*
 * Which primary serves each slot: a table of CLUSTER_SLOTS node indexes
 * (int16_t, 32 KiB) and the distinct nodes, one index per host:port
 * (hosts compared byte for byte). A node keeps its index for the life of
 * the map, so the client can keep per-node state in an array beside it.
 */
struct cluster_map; /* opaque */

/* The most nodes a map holds, those left without a slot included: the
 * size Redis Cluster is designed for. A map of more primaries, one
 * connection per primary and worker, is refused. */
#define CLUSTER_MAP_MAX_NODES 1000

/*
 * A map of the 'n' ranges of 'ranges' (borrowed; the caller turns the
 * reply of CLUSTER SHARDS or CLUSTER SLOTS into them, replacing an empty
 * host by the host it asked). Nodes get indexes in the order they first
 * appear. Slots in no range are left uncovered. Returns NULL, with a
 * static sentence in '*why', if a range is invalid (its slots out of
 * order or out of range, an empty or too long host, port 0) or if a slot
 * is in two ranges. The caller frees the map with cluster_map_free().
 */
struct cluster_map *cluster_map_new(const struct cluster_range *ranges,
                                    size_t n, const char **why);
void cluster_map_free(struct cluster_map *m); /* NULL is a no-op */

/* The index of the node serving 'slot', or -1 if no node does (or 'slot'
 * is not below CLUSTER_SLOTS). O(1). */
int cluster_map_node(const struct cluster_map *m, unsigned slot);

/* How many nodes the map knows; indexes are 0 .. that - 1. */
size_t cluster_map_nnodes(const struct cluster_map *m);

/* Node 'i', or NULL if 'i' >= cluster_map_nnodes(); borrowed from the
 * map, valid while it lives (cluster_map_moved() adds nodes, frees
 * none). */
const struct cluster_node *cluster_map_node_at(const struct cluster_map *m,
                                               size_t i);

/*
 * How many slots no node serves (0: the whole cluster is mapped; else it
 * is partly down and those slots' lookups return -1). When there are
 * any, the first run of them goes in '*first' and '*last'.
 */
size_t cluster_map_uncovered(const struct cluster_map *m, unsigned *first,
                             unsigned *last);

/*
 * After "MOVED <slot> <host>:<port>": 'slot' (< CLUSTER_SLOTS) is now
 * served by host:port (host non-empty, shorter than CLUSTER_HOST_MAX,
 * borrowed), a node already known or a new one with the next index.
 * Returns that index, or -1 if the arguments are invalid or the map
 * already holds CLUSTER_MAP_MAX_NODES nodes (the caller then builds a new
 * map from the cluster's own view).
 */
int cluster_map_moved(struct cluster_map *m, unsigned slot, const char *host,
                      uint16_t port);

/*
 * A reply of Redis as a plain tree of values, so that the map can be
 * read from it without hiredis (the client converts its reply).
 */
enum cluster_value_type {
    CLUSTER_VALUE_INTEGER,
    CLUSTER_VALUE_STRING, /* a bulk or status string */
    CLUSTER_VALUE_ARRAY,
    CLUSTER_VALUE_OTHER, /* nil, an error */
};

struct cluster_value {
    enum cluster_value_type type;      /* which fields below hold */
    long long integer;                 /* INTEGER */
    const char *str;                   /* STRING: 'len' bytes, any bytes;
                                          borrowed */
    size_t len;                        /* of 'str' */
    const struct cluster_value *elems; /* ARRAY: 'n' elements; borrowed */
    size_t n;                          /* of 'elems' */
};

/*
 * The map of a CLUSTER SLOTS reply 'reply' (borrowed), asked of
 * 'asked_host' (borrowed; it stands in for a primary announced with an
 * empty address). Each element is [first, last, primary, replicas...],
 * the primary [host, port, id, ...]; replicas are ignored. Returns NULL,
 * with a static sentence in '*why', if the reply is not of that shape, a
 * host is "?", too long or holds a byte below 0x21 or 0x7f, a port is not
 * in 1..65535, or the ranges are invalid for cluster_map_new(). An empty
 * array gives a map with every slot uncovered.
 */
struct cluster_map *cluster_map_from_slots(const struct cluster_value *reply,
                                           const char *asked_host,
                                           const char **why);

#endif
