/*
 * resolve.h - a host name looked up on a thread of its own, so that an
 * event loop never blocks in getaddrinfo() (hiredis would: TRAPS.md 2);
 * the answer comes back on the loop through a pipe. Does I/O: a thread, a
 * pipe and an event on the caller's event_base. Used by the Redis client.
 */
#ifndef SLUICE_RESOLVE_H
#define SLUICE_RESOLVE_H

#include <netinet/in.h>
#include <stddef.h>

#define RESOLVE_MAX_ADDRS 8

struct event_base;
struct resolve; /* opaque: one lookup */

/* The answer: numeric addresses, each once, in the resolver's order. */
struct resolve_result {
    int err;       /* getaddrinfo()'s result; 0 on success */
    size_t naddrs; /* addresses found; 0 if none */
    char addrs[RESOLVE_MAX_ADDRS][INET6_ADDRSTRLEN];
};

/* 'r' is borrowed for the call; the lookup is freed when it returns. */
typedef void (*resolve_cb)(const struct resolve_result *r, void *arg);

/*
 * Starts looking up 'host' (copied). 'cb' runs once, on 'base', never from
 * inside this call. NULL, with nothing started and 'cb' never run, when no
 * pipe or thread could be had.
 */
struct resolve *resolve_start(struct event_base *base, const char *host,
                              resolve_cb cb, void *arg);

/*
 * Gives the lookup up: 'cb' will not run. The thread finishes on its own
 * and frees what it still holds; nobody waits for it.
 */
void resolve_cancel(struct resolve *r);

#endif
