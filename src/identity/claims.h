/*
 * claims.h - the claims of a verified token: a read-only JSON object
 * (jansson, kept behind this header), shared by reference between the
 * token cache and the requests that use it. Pure: no I/O. Not
 * thread-safe: a claims object stays on the worker that made it.
 */
#ifndef SLUICE_CLAIMS_H
#define SLUICE_CLAIMS_H

#include <stdbool.h>
#include <stddef.h>

struct claims; /* opaque, refcounted, immutable */

/* What a claim holds, for the checks of registered claims. */
enum claims_type {
    CLAIMS_ABSENT,
    CLAIMS_STRING,
    CLAIMS_NUMBER, /* integer or real */
    CLAIMS_ARRAY,
    CLAIMS_OTHER, /* object, boolean or null */
};

/*
 * The claims in 'json' ('len' bytes, no NUL needed), with one reference;
 * NULL unless it is a JSON object.
 */
struct claims *claims_parse(const char *json, size_t len);

/* Takes another reference; returns 'c'. */
struct claims *claims_ref(struct claims *c);
/* Drops a reference; the last one frees. NULL is a no-op. */
void claims_unref(struct claims *c);

enum claims_type claims_type(const struct claims *c, const char *name);

/*
 * The claim 'name' as an identity string: its value when it is a
 * non-empty string, or the first element of an array when that is a
 * non-empty string; else NULL. Numbers, booleans and objects are not
 * identities. Borrowed from 'c': valid while a reference is held. 'c'
 * may be NULL.
 */
const char *claims_get_string(const struct claims *c, const char *name);

/* True and '*out' set when claim 'name' is a number. */
bool claims_get_number(const struct claims *c, const char *name, double *out);

/*
 * True when claim 'name' is the string 'value', or an array with the
 * string 'value' among its elements (the form of "aud").
 */
bool claims_has_string(const struct claims *c, const char *name,
                       const char *value);

/*
 * True when claim 'name' is a string, or an array of strings only
 * (what RFC 7519 allows for "aud").
 */
bool claims_is_strings(const struct claims *c, const char *name);

#endif
