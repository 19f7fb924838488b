/*
 * diff.h - what a reload changes that a running process cannot apply:
 * the settings read once at start-up (listeners, workers, the Redis
 * connection, the admin listener, logging), and what a reload cannot
 * change at all. Pure: compares two loaded
 * configs, no I/O. Depends on config.h.
 */
#ifndef SLUICE_DIFF_H
#define SLUICE_DIFF_H

#include <stddef.h>

struct config;

/* The most settings config_restart_only() can name. */
#define CONFIG_RESTART_MAX 16

/*
 * Names, as the file spells them ("server.workers", "log.level"; "redis"
 * for the way to the Redis server: its url, sentinels or cluster, its
 * database and credentials), the settings of the reloaded 'next' that
 * differ from the running 'cur' (both borrowed) and take effect on a
 * restart only. Fills 'out' with static strings, in a fixed order, and
 * returns how many; 0 when a reload applies everything.
 */
size_t config_restart_only(const struct config *cur, const struct config *next,
                           const char *out[CONFIG_RESTART_MAX]);

/*
 * What applies at once beside the restart-only setting 'name' (one of
 * config_restart_only()'s), for the log: "" or a sentence starting with
 * "; ". Static.
 */
const char *config_restart_note(const char *name);

/*
 * Why the reloaded 'next' cannot replace the running 'cur' at all (both
 * borrowed), or NULL when it can. A redis: section added or removed is
 * such a change: every limiter without a backend: of its own would move
 * between Redis and a bucket in this process, and the Redis connections
 * are made at start-up only, so the running config must stay whole.
 * Static.
 */
const char *config_reload_refusal(const struct config *cur,
                                  const struct config *next);

#endif
