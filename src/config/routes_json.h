/*
 * routes_json.h - the loaded routes and limiters as JSON, as the admin
 * listener's GET /routes shows them: each route's id, upstream, timeouts,
 * predicates and filters (with their arguments), and every limiter.
 * Pure: reads a config, allocates, no I/O. Depends on config.h.
 */
#ifndef SLUICE_ROUTES_JSON_H
#define SLUICE_ROUTES_JSON_H

struct config;

/* A new NUL-terminated JSON document, ending in a newline; the caller
 * frees it. */
char *config_routes_json(const struct config *cfg);

#endif
