/*
 * admin.h - the admin listener (admin.listen, loopback by default):
 *   GET  /health   200 while the process runs
 *   GET  /ready    200 when serving and Redis is connected (or every
 *                  limiter can fall back locally), else 503
 *   GET  /routes   the active routes, predicates, filters and limiters
 *   GET  /metrics  Prometheus text exposition
 *   POST /reload   re-read the config file: 200, or 400 with the errors
 * HEAD wherever GET (no body); the wrong one of GET and POST is a 405
 * with Allow. Its connections are held to what the gateway's are
 * (clientconn.h): a deadline for each request head, a CONNECT answered
 * 501 and closed, and the listener paused when out of descriptors. Runs on the
 * main thread's event_base; does I/O. The server supplies what it answers
 * through 'struct admin_ops'.
 */
#ifndef SLUICE_ADMIN_H
#define SLUICE_ADMIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct config;
struct config_errors;
struct event_base;
struct listen_addr;
struct admin; /* opaque */

/* What the admin listener asks of the server; all called on its thread. */
struct admin_ops {
    /* Ready to serve? When not, writes the reason into 'why'. */
    bool (*ready)(void *arg, char *why, size_t len);
    /* Reloads the file: 0, or -1 with the errors appended to 'errs'. */
    int (*reload)(void *arg, struct config_errors *errs);
    /* The config in force, with a reference the caller drops. */
    struct config *(*config)(void *arg);
    /* The metrics text; a new string the caller frees. */
    char *(*metrics)(void *arg);
};

/*
 * Listens on 'addr' with 'base' (borrowed); 'timeout_ms' as
 * admin_set_timeout() says. 'ops' and 'arg' are borrowed and must
 * outlive the listener. NULL (logged) if it cannot listen.
 */
struct admin *admin_new(struct event_base *base, const struct listen_addr *addr,
                        uint64_t timeout_ms, const struct admin_ops *ops,
                        void *arg);
void admin_free(struct admin *a); /* NULL is a no-op */

/*
 * A request head must come whole within 'ms' of its first byte, and a
 * connection that stays silent, or cannot be written to, for 'ms' is
 * closed (evhttp's idle timeout: from the next connection on).
 */
void admin_set_timeout(struct admin *a, uint64_t ms);

#endif
