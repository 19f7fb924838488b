/*
 * log.h - the error and event log: one line per event, "module: what: why".
 * Writes to stderr with one write(2) per line, so lines from worker threads
 * never interleave. Thread-safe; the level is process-wide.
 */
#ifndef SLUICE_LOG_H
#define SLUICE_LOG_H

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

/* Lines below 'level' are dropped. Default: LOG_INFO. */
void log_set_level(enum log_level level);
/* Parses "debug", "info", "warn" or "error"; -1 if none of them. */
int log_parse_level(const char *name, enum log_level *out);
void log_msg(enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

#endif
