/*
 * routes_json.h - the loaded routes and limiters as JSON, as the admin
 * listener's GET /routes shows them: each route's id, upstream, timeouts,
 * predicates and filters (with their arguments), and every limiter
 * (those of limiters: and those built from Spring's redis-rate-limiter).
 * Pure: reads a config, allocates, no I/O. Depends on config.h.
 */
#ifndef SLUICE_ROUTES_JSON_H
#define SLUICE_ROUTES_JSON_H

struct config;
struct filter;
struct limiter_def;
struct predicate;
struct strbuf;

/* A new NUL-terminated JSON document, ending in a newline; the caller
 * frees it. */
char *config_routes_json(const struct config *cfg);

/* One element of that document, appended to 'b': {"name", "args"} of a
 * predicate or filter, or a limiter with its algorithm and rules. */
void routes_json_predicate(struct strbuf *b, const struct predicate *p);
void routes_json_filter(struct strbuf *b, const struct filter *f);
void routes_json_limiter(struct strbuf *b, const struct limiter_def *d);

#endif
