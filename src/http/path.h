/*
 * path.h - normalises a request path before any route sees it, so that
 * "/api/../admin" or "/api/%2e%2e/admin" cannot slip past a predicate.
 * Pure: no I/O; the result is the caller's.
 */
#ifndef SLUICE_PATH_H
#define SLUICE_PATH_H

#include <stddef.h>

enum path_status {
    PATH_OK,
    PATH_NOT_ABSOLUTE, /* does not start with '/' */
    PATH_BAD_ESCAPE,   /* '%' not followed by two hex digits, or "%00" */
    PATH_ABOVE_ROOT,   /* ".." would climb above "/" */
    PATH_DOT_PARAMS,   /* a "." or ".." segment with parameters: "..;" */
};

/*
 * Normalises the path part of a request target (no query, no fragment):
 *   - "%XX" of an unreserved character (A-Z a-z 0-9 - . _ ~) is decoded;
 *     every other escape is kept, with its hex digits in upper case, so
 *     "%2F" stays an escaped slash and never becomes a separator;
 *   - runs of '/' collapse into one;
 *   - "." segments are dropped and ".." removes the segment before it;
 *   - a segment that is "." or ".." followed by ';' (escaped dots
 *     included: "%2e%2e;") is PATH_DOT_PARAMS: Tomcat and Jetty read
 *     "..;" as "..", a router as a name.
 * A trailing slash is kept. On PATH_OK '*out' is a new string the caller
 * frees; otherwise '*out' is left untouched.
 */
enum path_status path_normalize(const char *raw, size_t len, char **out);

/*
 * A normalised path (path_normalize()) without the parameters of its
 * segments: from each ';' up to the next '/', "/a;v=1/b;x" -> "/a/b".
 * A segment left empty is dropped, but for a trailing slash ("/a/;x" ->
 * "/a/"), so runs of '/' stay collapsed. A new string the caller frees.
 */
char *path_without_params(const char *path);

/* A short English phrase for a status, for a 400 body or a log line. */
const char *path_status_str(enum path_status st);

#endif
