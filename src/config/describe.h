/*
 * describe.h - what sluice understood of a config, as text for people:
 * what `sluice --check` prints. Routes in the order they are tried (id,
 * order, upstream, predicates, filters), the limiters each
 * RequestRateLimiter uses, and the keys the file holds that were ignored.
 * Pure: reads a config, allocates, no I/O. Depends on config.h.
 */
#ifndef SLUICE_DESCRIBE_H
#define SLUICE_DESCRIBE_H

struct config;

/* A new NUL-terminated text of several lines, each ending in a newline;
 * the caller frees it. */
char *config_describe(const struct config *cfg);

#endif
