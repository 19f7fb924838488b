#include "claims.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "xmalloc.h"

struct claims {
    int refs;     /* one worker only: no atomics */
    json_t *root; /* a JSON object; owned */
};

struct claims *
claims_parse(const char *json, size_t len)
{
    /* Duplicate names are refused here, but 'json' comes from libjwt,
     * which has already read the token's payload keeping the last of
     * each name (README, identity.jwt): this guards only the text given. */
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, NULL);
    struct claims *c;

    if (root == NULL) {
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        return NULL;
    }
    c = xmalloc(sizeof(*c));
    c->refs = 1;
    c->root = root;
    return c;
}

struct claims *
claims_ref(struct claims *c)
{
    c->refs++;
    return c;
}

void
claims_unref(struct claims *c)
{
    if (c == NULL || --c->refs > 0) {
        return;
    }
    json_decref(c->root);
    free(c);
}

static json_t *
get(const struct claims *c, const char *name)
{
    return c != NULL ? json_object_get(c->root, name) : NULL;
}

enum claims_type
claims_type(const struct claims *c, const char *name)
{
    json_t *v = get(c, name);

    if (v == NULL) {
        return CLAIMS_ABSENT;
    }
    if (json_is_string(v)) {
        return CLAIMS_STRING;
    }
    if (json_is_number(v)) {
        return CLAIMS_NUMBER;
    }
    if (json_is_array(v)) {
        return CLAIMS_ARRAY;
    }
    return CLAIMS_OTHER;
}

/* A non-empty string with no NUL inside, or NULL. */
static const char *
string_of(json_t *v)
{
    if (!json_is_string(v) || json_string_length(v) == 0 ||
        strlen(json_string_value(v)) != json_string_length(v)) {
        return NULL;
    }
    return json_string_value(v);
}

const char *
claims_get_string(const struct claims *c, const char *name)
{
    json_t *v = get(c, name);

    if (json_is_array(v)) {
        v = json_array_get(v, 0);
    }
    return string_of(v);
}

bool
claims_get_number(const struct claims *c, const char *name, double *out)
{
    json_t *v = get(c, name);

    if (!json_is_number(v)) {
        return false;
    }
    *out = json_number_value(v);
    return true;
}

bool
claims_has_string(const struct claims *c, const char *name, const char *value)
{
    json_t *v = get(c, name);
    size_t i;
    json_t *item;

    if (json_is_string(v)) {
        return string_of(v) != NULL && strcmp(string_of(v), value) == 0;
    }
    json_array_foreach(v, i, item)
    {
        const char *s = string_of(item);

        if (s != NULL && strcmp(s, value) == 0) {
            return true;
        }
    }
    return false;
}

bool
claims_is_strings(const struct claims *c, const char *name)
{
    json_t *v = get(c, name);
    size_t i;
    json_t *item;

    if (json_is_string(v)) {
        return true;
    }
    if (!json_is_array(v)) {
        return false;
    }
    json_array_foreach(v, i, item)
    {
        if (!json_is_string(item)) {
            return false;
        }
    }
    return true;
}
