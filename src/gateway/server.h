/*
 * server.h - the gateway process: worker threads, each with its own
 * event_base, evhttp bound to the shared port (SO_REUSEPORT) and proxy;
 * signals on the main thread (SIGTERM/SIGINT drain and stop, SIGHUP
 * reloads the config file). Does I/O.
 */
#ifndef SLUICE_SERVER_H
#define SLUICE_SERVER_H

#include <stdbool.h>

struct config;
struct server; /* opaque */

/*
 * Binds the listening sockets of 'cfg' (takes a reference), opens the
 * access log and the admin listener. With 'watch' (or server.watch) the
 * file is reloaded when the file its path leads to (symlinks followed)
 * changes on disk. Returns NULL, having logged
 * why, when an address cannot be resolved or is in use, or the access log
 * cannot be opened.
 */
struct server *server_new(struct config *cfg, bool watch);
/* Frees a stopped server. NULL is a no-op. */
void server_free(struct server *s);

/*
 * Runs the workers until SIGTERM or SIGINT, then stops accepting, lets
 * requests in flight finish for up to server.drain_timeout, and returns 0.
 * A second such signal during the drain ends it at once.
 */
int server_run(struct server *s);

#endif
