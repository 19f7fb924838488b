/*
 * units.h - parses the durations, sizes and rates written in gateway.yaml.
 * Pure: no I/O, no allocation.
 */
#ifndef SLUICE_UNITS_H
#define SLUICE_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* A count of events per period: "10/s" is {10, 1000}. */
struct rate {
    uint64_t count;     /* events allowed per period, > 0 */
    uint64_t period_ms; /* 1000, 60000, 3600000 or 86400000 */
};

/*
 * Each returns 0 and stores the value, or -1 when 's' is not exactly a
 * non-negative integer followed by one of the units (no space, no sign,
 * no fraction, no overflow):
 *   durations: ms s m h d        -> milliseconds   ("250ms", "2s")
 *   sizes:     B KiB MiB GiB     -> bytes          ("16KiB")
 *   rates:     N/s N/m N/h N/d   -> struct rate    ("10/s"; N > 0)
 */
int units_parse_duration(const char *s, uint64_t *ms);
int units_parse_size(const char *s, uint64_t *bytes);
int units_parse_rate(const char *s, struct rate *out);

/*
 * 'ms' in the largest unit that divides it, as units_parse_duration()
 * reads it back: "1h", "90s", "250ms". Into 'buf' of 'len' bytes (24 is
 * always enough); returns 'buf'.
 */
char *units_format_duration(uint64_t ms, char *buf, size_t len);

#endif
