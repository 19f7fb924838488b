/*
 * problem.h - RFC 9457 "application/problem+json" bodies for the answers
 * the gateway makes itself (400, 404, 502, 504, and 429 later on).
 * Pure: builds a string, no I/O.
 */
#ifndef SLUICE_PROBLEM_H
#define SLUICE_PROBLEM_H

#define PROBLEM_CONTENT_TYPE "application/problem+json"

/*
 * Returns a new JSON object the caller frees:
 *   {"type":"about:blank","title":TITLE,"status":STATUS,"detail":DETAIL,
 *    "instance":INSTANCE}
 * 'detail' and 'instance' may be NULL and are then left out. Strings are
 * escaped, so any request path may be passed as 'instance'.
 */
char *problem_json(int status, const char *title, const char *detail,
                   const char *instance);

/* The reason phrase of a status the gateway sends ("Not Found"). */
const char *problem_reason(int status);

#endif
