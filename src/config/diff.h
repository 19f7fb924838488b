/*
 * diff.h - what a reload changes that a running process cannot apply:
 * the settings read once at start-up (listeners, workers, the Redis
 * connection, the admin listener, logging). Pure: compares two loaded
 * configs, no I/O. Depends on config.h.
 */
#ifndef SLUICE_DIFF_H
#define SLUICE_DIFF_H

struct config;

/* Groups of settings that take effect on a restart only; flags. */
enum config_restart_only {
    CONFIG_RESTART_LISTEN = 1 << 0, /* server.listen, server.workers,
                                       server.tls on/off and its listen */
    CONFIG_RESTART_REDIS = 1 << 1,  /* redis: all but key_prefix */
    CONFIG_RESTART_ADMIN = 1 << 2,  /* admin: */
    CONFIG_RESTART_LOG = 1 << 3,    /* log: */
};

/*
 * The groups whose settings differ between the running 'cur' and the
 * reloaded 'next' (both borrowed); 0 when a reload applies everything.
 */
unsigned config_restart_only(const struct config *cur,
                             const struct config *next);

/* The sentence naming one group's settings, for the log; static. */
const char *config_restart_only_str(enum config_restart_only group);

#endif
