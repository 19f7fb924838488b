#include "filter.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errbuf.h"
#include "regexp.h"
#include "xmalloc.h"

/* Spring Cloud Gateway rejects nothing here; 64 is far beyond any path. */
#define STRIP_PREFIX_MAX 64

static const struct arg_spec strip_prefix_args[] = {
    /* Optional like Spring's, where "StripPrefix" alone drops one. */
    {"parts", true, false},
};
static const struct arg_spec prefix_path_args[] = {
    {"prefix", false, false},
};
static const struct arg_spec rewrite_path_args[] = {
    {"regexp", false, false},
    {"replacement", false, false},
};
static const struct arg_spec set_path_args[] = {
    {"template", false, false},
};
static const struct arg_spec name_value_args[] = {
    {"name", false, false},
    {"value", false, false},
};
static const struct arg_spec name_args[] = {
    {"name", false, false},
};

#define ARGS(a) (a), (sizeof(a) / sizeof((a)[0]))

static const struct kind_spec filter_table[] = {
    {"StripPrefix", FILTER_STRIP_PREFIX, ARGS(strip_prefix_args)},
    {"PrefixPath", FILTER_PREFIX_PATH, ARGS(prefix_path_args)},
    {"RewritePath", FILTER_REWRITE_PATH, ARGS(rewrite_path_args)},
    {"SetPath", FILTER_SET_PATH, ARGS(set_path_args)},
    {"AddRequestHeader", FILTER_ADD_REQUEST_HEADER, ARGS(name_value_args)},
    {"SetRequestHeader", FILTER_SET_REQUEST_HEADER, ARGS(name_value_args)},
    {"RemoveRequestHeader", FILTER_REMOVE_REQUEST_HEADER, ARGS(name_args)},
    {"AddResponseHeader", FILTER_ADD_RESPONSE_HEADER, ARGS(name_value_args)},
    {"SetResponseHeader", FILTER_SET_RESPONSE_HEADER, ARGS(name_value_args)},
    {"RemoveResponseHeader", FILTER_REMOVE_RESPONSE_HEADER, ARGS(name_args)},
    {"PreserveHostHeader", FILTER_PRESERVE_HOST_HEADER, NULL, 0},
};

#define NFILTERS (sizeof(filter_table) / sizeof(filter_table[0]))

const struct kind_spec *
filter_specs(size_t *n)
{
    *n = NFILTERS;
    return filter_table;
}

/* Digits only: "+1", "-1", " 1" and "1.0" are refused, not guessed at. */
static int
init_strip_prefix(struct filter *f, const char *name, const char *arg,
                  char *err, size_t errlen)
{
    unsigned v = 0;
    const char *p = arg;

    if (arg == NULL) {
        f->parts = 1;
        return 0;
    }
    for (; *p >= '0' && *p <= '9'; p++) {
        v = v * 10 + (unsigned)(*p - '0');
        if (v > STRIP_PREFIX_MAX) {
            break;
        }
    }
    if (p == arg || *p != '\0' || v > STRIP_PREFIX_MAX) {
        errbuf_printf(err, errlen,
                      "%s: parts must be an integer from 0 to %d, got \"%s\"",
                      name, STRIP_PREFIX_MAX, arg);
        return -1;
    }
    f->parts = v;
    return 0;
}

/*
 * Path pieces go into the request line verbatim, where a space or a
 * control character would split or corrupt it.
 */
static bool
valid_path_text(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p <= 0x20 || *p == 0x7f) {
            return false;
        }
    }
    return true;
}

static int
init_path(struct filter *f, const char *name, const char *what, const char *arg,
          char *err, size_t errlen)
{
    if (arg[0] != '/') {
        errbuf_printf(err, errlen, "%s: %s must start with '/', got \"%s\"",
                      name, what, arg);
        return -1;
    }
    if (!valid_path_text(arg)) {
        errbuf_printf(err, errlen,
                      "%s: %s contains a space or control character", name,
                      what);
        return -1;
    }
    f->value = xstrdup(arg);
    return 0;
}

static int
init_rewrite_path(struct filter *f, const char *name, const char *pattern,
                  const char *replacement, char *err, size_t errlen)
{
    char why[256];
    char *probe;

    f->re = regexp_new(pattern, why, sizeof(why));
    if (f->re == NULL) {
        errbuf_printf(err, errlen, "%s: regexp: %s", name, why);
        return -1;
    }
    if (!valid_path_text(replacement)) {
        errbuf_printf(err, errlen,
                      "%s: replacement contains a space or control character",
                      name);
        return -1;
    }
    /* regexp_replace() checks every group reference even when nothing
       matches, so one dry run catches a misspelt group at load time. */
    probe = regexp_replace(f->re, "", replacement, why, sizeof(why));
    if (probe == NULL) {
        errbuf_printf(err, errlen, "%s: replacement: %s", name, why);
        return -1;
    }
    free(probe);
    f->value = xstrdup(replacement);
    return 0;
}

static int
init_header(struct filter *f, const char *name, const char *hname,
            const char *value, char *err, size_t errlen)
{
    if (!headers_valid_name(hname)) {
        errbuf_printf(err, errlen, "%s: \"%s\" is not a valid header name",
                      name, hname);
        return -1;
    }
    if (value != NULL && !headers_valid_value(value)) {
        if (strpbrk(value, "\r\n") != NULL) {
            errbuf_printf(err, errlen, "%s: value contains a line break", name);
        } else {
            errbuf_printf(err, errlen, "%s: value contains a control character",
                          name);
        }
        return -1;
    }
    f->name = xstrdup(hname);
    if (value != NULL) {
        f->value = xstrdup(value);
    }
    return 0;
}

int
filter_init(struct filter *f, const struct kind_spec *spec,
            const char *const *args, size_t nargs, char *err, size_t errlen)
{
    const char *name = spec->name;
    int rc = 0;

    memset(f, 0, sizeof(*f));
    f->kind = (enum filter_kind)spec->kind;
    if (argspec_check_count(spec, nargs, ARGSPEC_WITH_NAMES, err, errlen) < 0) {
        return -1;
    }
    for (size_t i = 0; i < nargs; i++) {
        if (args[i] == NULL) {
            errbuf_printf(err, errlen, "%s: %s is missing", name,
                          spec->args[i].name);
            return -1;
        }
    }
    switch (f->kind) {
    case FILTER_STRIP_PREFIX:
        rc =
            init_strip_prefix(f, name, nargs > 0 ? args[0] : NULL, err, errlen);
        break;
    case FILTER_PREFIX_PATH:
        rc = init_path(f, name, "prefix", args[0], err, errlen);
        break;
    case FILTER_REWRITE_PATH:
        rc = init_rewrite_path(f, name, args[0], args[1], err, errlen);
        break;
    case FILTER_SET_PATH:
        rc = init_path(f, name, "template", args[0], err, errlen);
        break;
    case FILTER_ADD_REQUEST_HEADER:
    case FILTER_SET_REQUEST_HEADER:
    case FILTER_ADD_RESPONSE_HEADER:
    case FILTER_SET_RESPONSE_HEADER:
        rc = init_header(f, name, args[0], args[1], err, errlen);
        break;
    case FILTER_REMOVE_REQUEST_HEADER:
    case FILTER_REMOVE_RESPONSE_HEADER:
        rc = init_header(f, name, args[0], NULL, err, errlen);
        break;
    case FILTER_PRESERVE_HOST_HEADER:
        break;
    default:
        assert(!"kind_spec not from filter_specs()");
        rc = -1;
    }
    if (rc < 0) {
        filter_deinit(f);
        f->kind = (enum filter_kind)spec->kind;
    }
    return rc;
}

void
filter_deinit(struct filter *f)
{
    free(f->name);
    free(f->value);
    regexp_free(f->re);
    memset(f, 0, sizeof(*f));
}

bool
filter_is_response(const struct filter *f)
{
    switch (f->kind) {
    case FILTER_ADD_RESPONSE_HEADER:
    case FILTER_SET_RESPONSE_HEADER:
    case FILTER_REMOVE_RESPONSE_HEADER:
        return true;
    default:
        return false;
    }
}

/* Templates without a '{' are the common case: no expansion pass. */
static char *
expand(const char *tmpl, const struct glob_vars *vars)
{
    static const struct glob_vars none = {.n = 0};

    if (strchr(tmpl, '{') == NULL) {
        return xstrdup(tmpl);
    }
    return glob_expand(tmpl, vars != NULL ? vars : &none);
}

static void
replace_path(struct outgoing *out, char *path)
{
    free(out->path);
    out->path = path;
}

/*
 * Spring's rule: segments are the non-empty pieces between slashes; a
 * trailing slash survives unless nothing is left but "/".
 */
static char *
strip_prefix(const char *path, unsigned parts)
{
    const char *p = path;

    for (unsigned i = 0; i < parts; i++) {
        while (*p == '/') {
            p++;
        }
        if (*p == '\0') {
            break;
        }
        while (*p != '\0' && *p != '/') {
            p++;
        }
    }
    if (*p == '\0') {
        return xstrdup("/");
    }
    return xstrdup(p);
}

static char *
prefix_path(const char *prefix, const char *path)
{
    size_t plen = strlen(prefix);

    /* "/api/" + "/x" would otherwise make an empty segment. */
    if (plen > 0 && prefix[plen - 1] == '/' && path[0] == '/') {
        plen--;
    }
    return xasprintf("%.*s%s", (int)plen, prefix, path);
}

static char *
rewrite_path(const struct filter *f, const char *path)
{
    char why[256];
    char *r;

    r = regexp_replace(f->re, path, f->value, why, sizeof(why));
    if (r == NULL) {
        /* Group references were checked at load; what is left is a
           matcher limit on a hostile path. The path stays as it was. */
        return NULL;
    }
    if (r[0] != '/') {
        char *slashed = xasprintf("/%s", r);

        free(r);
        r = slashed;
    }
    return r;
}

static void
apply_header(const struct filter *f, struct headers *h,
             const struct glob_vars *vars)
{
    char *value = f->value != NULL ? expand(f->value, vars) : NULL;

    /* A URI variable comes from the normalised path and cannot hold a
       line break, but a header is the wrong place to find out. */
    if (value != NULL && !headers_valid_value(value)) {
        free(value);
        return;
    }
    switch (f->kind) {
    case FILTER_ADD_REQUEST_HEADER:
    case FILTER_ADD_RESPONSE_HEADER:
        headers_add(h, f->name, value);
        break;
    case FILTER_SET_REQUEST_HEADER:
    case FILTER_SET_RESPONSE_HEADER:
        headers_set(h, f->name, value);
        break;
    case FILTER_REMOVE_REQUEST_HEADER:
    case FILTER_REMOVE_RESPONSE_HEADER:
        headers_remove(h, f->name);
        break;
    default:
        break;
    }
    free(value);
}

void
filter_apply_request(const struct filter *f, struct outgoing *out)
{
    char *s;

    switch (f->kind) {
    case FILTER_STRIP_PREFIX:
        replace_path(out, strip_prefix(out->path, f->parts));
        break;
    case FILTER_PREFIX_PATH:
        s = expand(f->value, out->vars);
        replace_path(out, prefix_path(s, out->path));
        free(s);
        break;
    case FILTER_REWRITE_PATH:
        s = rewrite_path(f, out->path);
        if (s != NULL) {
            replace_path(out, s);
        }
        break;
    case FILTER_SET_PATH:
        replace_path(out, expand(f->value, out->vars));
        break;
    case FILTER_ADD_REQUEST_HEADER:
    case FILTER_SET_REQUEST_HEADER:
    case FILTER_REMOVE_REQUEST_HEADER:
        apply_header(f, &out->headers, out->vars);
        break;
    case FILTER_PRESERVE_HOST_HEADER:
        out->preserve_host = true;
        break;
    case FILTER_ADD_RESPONSE_HEADER:
    case FILTER_SET_RESPONSE_HEADER:
    case FILTER_REMOVE_RESPONSE_HEADER:
        break;
    }
}

void
filter_apply_response(const struct filter *f, struct headers *h)
{
    if (!filter_is_response(f)) {
        return;
    }
    /* Response values are literal: the response has no Path match. */
    switch (f->kind) {
    case FILTER_ADD_RESPONSE_HEADER:
        headers_add(h, f->name, f->value);
        break;
    case FILTER_SET_RESPONSE_HEADER:
        headers_set(h, f->name, f->value);
        break;
    default:
        headers_remove(h, f->name);
        break;
    }
}
