/*
 * load_routes.c - the routes: section of gateway.yaml: ids, upstream
 * URIs, timeouts, and the predicates and filters in Spring's two forms
 * ("Name=a, b" and {name, args}), built by predicate.c and filter.c.
 * RequestRateLimiter is handed to load_ratelimiter.c and kept in the
 * route's rate limiters, not its filters. Pure.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "forward.h"
#include "load.h"
#include "router.h"
#include "xmalloc.h"

/* What a route's "predicates:" or "filters:" list holds. */
struct kind_table {
    const char *noun;                            /* "predicate" */
    const struct kind_spec *(*specs)(size_t *n); /* the module's table */
    int (*init)(void *obj, const struct kind_spec *spec,
                const char *const *args, size_t nargs, char *err,
                size_t errlen);     /* builds one element */
    size_t size;                    /* of one element */
    const struct kind_table *other; /* for "X is a filter" */
    const char *extra;              /* a kind built here rather than by
                                       the module, or NULL: known to the
                                       suggestions all the same */
    /* The rules between the elements of one list, or NULL: called with
     * the 'n' built so far, the last just built from 'node'. */
    void (*check)(struct loader *ld, yaml_node_t *node,
                  const struct load_path *path, const void *built, size_t n);
};

/* Arguments of one predicate or filter, in shortcut order. */
struct arglist {
    const char **v; /* borrowed from 'buf', 'own' or the document; NULL
                       for one left out of a sparse spec */
    size_t n;       /* arguments in 'v' */
    size_t cap;     /* allocated entries in 'v' */
    char *buf;      /* the shortcut text, cut in place; owned */
    char **own;     /* lists joined from sequences; owned */
    size_t nown;    /* entries in 'own' */
};

static void
parse_route_id(struct loader *ld, yaml_node_t *node, const struct field *f,
               void *base, const struct load_path *path)
{
    struct route *route = base;
    const char *s = load_scalar(ld, node, path);

    (void)f;
    if (s == NULL) {
        return;
    }
    if (!load_valid_name(s)) {
        report(ld, node, path,
               "bad route id \"%s\" (use letters, digits, '_', '.' and '-')",
               s);
        return;
    }
    /* Routes are parsed in order, so every earlier one is complete. */
    for (const struct route *r = ld->cfg->routes; r < route; r++) {
        if (r->id != NULL && strcmp(r->id, s) == 0) {
            report(ld, node, path,
                   "duplicate route id \"%s\" (first used by routes[%zu])", s,
                   (size_t)(r - ld->cfg->routes));
            return;
        }
    }
    route->id = xstrdup(s);
}

/*
 * The id of every item of the routes sequence 'node', as written, for
 * checks that look ahead of the routes loaded so far (parse_scope()).
 * The loader holds them until forget_route_ids().
 */
static void
note_route_ids(struct loader *ld, yaml_node_t *node)
{
    size_t n = load_sequence_length(node);

    ld->route_ids = xcalloc(n > 0 ? n : 1, sizeof(*ld->route_ids));
    ld->nroute_ids = n;
    for (size_t i = 0; i < n; i++) {
        const yaml_node_pair_t *p =
            load_mapping_pair(ld, load_sequence_item(ld, node, i), "id");
        const yaml_node_t *v = p != NULL ? load_node_at(ld, p->value) : NULL;

        if (v != NULL && v->type == YAML_SCALAR_NODE) {
            ld->route_ids[i] = (const char *)v->data.scalar.value;
        }
    }
}

static void
forget_route_ids(struct loader *ld)
{
    free(ld->route_ids);
    ld->route_ids = NULL;
    ld->nroute_ids = 0;
}

/* Path bytes go into the request line as they are. */
static bool
valid_path_text(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        if (c <= 0x20 || c == 0x7f) {
            return false;
        }
    }
    return true;
}

static const char *
split_uri(const char *s, struct upstream_uri *u)
{
    const char *auth = s + (u->https ? 8 : 7);
    uint16_t dflt = u->https ? 443 : 80;
    size_t alen = strcspn(auth, "/");
    const char *p = auth + alen;
    size_t plen = strlen(p);
    const char *why;
    bool v6;

    if (strchr(s, '?') != NULL) {
        return "a query is not allowed";
    }
    if (strchr(s, '#') != NULL) {
        return "a fragment is not allowed";
    }
    if (memchr(auth, '@', alen) != NULL) {
        return "user info is not allowed";
    }
    u->port = dflt;
    why = load_split_host_port(auth, alen, false, &u->host, &u->port);
    if (why != NULL) {
        return why;
    }
    if (!valid_path_text(p, plen)) {
        return "the path contains a space or control character";
    }
    while (plen > 0 && p[plen - 1] == '/') {
        plen--;
    }
    u->base_path = xstrndup(p, plen);
    v6 = strchr(u->host, ':') != NULL;
    if (u->port == dflt) {
        u->authority = xasprintf(v6 ? "[%s]" : "%s", u->host);
    } else {
        u->authority =
            xasprintf(v6 ? "[%s]:%u" : "%s:%u", u->host, (unsigned)u->port);
    }
    return NULL;
}

/*
 * "lb://name[/path]" with the address scg.services gives 'name':
 * "http://host:port[/path]", a new string; NULL after reporting that
 * there is none.
 */
static char *
resolve_service(struct loader *ld, yaml_node_t *node,
                const struct load_path *path, const char *s)
{
    const char *name = s + 5;
    size_t n = strcspn(name, "/");

    for (size_t i = 0; i < ld->nservices; i++) {
        if (strlen(ld->services[i].name) == n &&
            strncmp(ld->services[i].name, name, n) == 0) {
            return xasprintf("%s%s", ld->services[i].uri, name + n);
        }
    }
    report(ld, node, path,
           "%.*s needs an address: sluice has no service discovery; give it "
           "in scg.services (%.*s: http://host:port), or write "
           "http://host:port",
           (int)(n + 5), s, (int)n, name);
    return NULL;
}

static void
parse_uri(struct loader *ld, yaml_node_t *node, const struct field *f,
          void *base, const struct load_path *path)
{
    struct route *route = base;
    const char *s = load_scalar(ld, node, path);
    char *resolved = NULL;
    const char *why;

    (void)f;
    if (s == NULL) {
        return;
    }
    if (strncasecmp(s, "lb://", 5) == 0) {
        resolved = resolve_service(ld, node, path, s);
        if (resolved == NULL) {
            return;
        }
        s = resolved;
    }
    route->uri.https = strncasecmp(s, "https://", 8) == 0;
    if (!route->uri.https && strncasecmp(s, "http://", 7) != 0) {
        report(ld, node, path,
               "bad uri \"%s\": expected http[s]://host[:port][/path]", s);
    } else if ((why = split_uri(s, &route->uri)) != NULL) {
        report(ld, node, path, "bad uri \"%s\": %s", s, why);
    }
    free(resolved);
}

/* A key of 'map' before the pair 'p' spelled 'name', or NULL. */
static yaml_node_t *
earlier_key(struct loader *ld, yaml_node_t *map, const yaml_node_pair_t *p,
            const char *name)
{
    for (const yaml_node_pair_t *q = map->data.mapping.pairs.start; q < p;
         q++) {
        yaml_node_t *k = load_node_at(ld, q->key);

        if (k->type == YAML_SCALAR_NODE &&
            strcmp((const char *)k->data.scalar.value, name) == 0) {
            return k;
        }
    }
    return NULL;
}

void
load_scg_services(struct loader *ld, yaml_node_t *node, const struct field *f,
                  void *base, const struct load_path *path)
{
    size_t n;

    (void)f;
    (void)base;
    if (node->type != YAML_MAPPING_NODE) {
        report(ld, node, path,
               "expected a mapping of service: http://host:port, got %s",
               load_node_desc(node));
        return;
    }
    n = (size_t)(node->data.mapping.pairs.top - node->data.mapping.pairs.start);
    ld->services = xcalloc(n, sizeof(*ld->services));
    for (yaml_node_pair_t *p = node->data.mapping.pairs.start;
         p < node->data.mapping.pairs.top; p++) {
        yaml_node_t *k = load_node_at(ld, p->key);
        yaml_node_t *v = load_node_at(ld, p->value);
        const char *name = load_scalar(ld, k, path);
        const struct load_path *sub;
        struct upstream_uri u;
        const char *uri;
        const char *why = NULL;
        yaml_node_t *first;

        if (name == NULL) {
            continue;
        }
        sub = PATH_KEY(path, name);
        if (!load_valid_name(name)) {
            report(ld, k, sub,
                   "bad service name (use letters, digits, '_', '.' and '-')");
            continue;
        }
        if ((first = earlier_key(ld, node, p, name)) != NULL) {
            report(ld, k, path, "duplicate key \"%s\" (first at line %zu)",
                   name, (size_t)first->start_mark.line + 1);
            continue;
        }
        uri = load_scalar(ld, v, sub);
        if (uri == NULL) {
            continue;
        }
        memset(&u, 0, sizeof(u));
        if (strncasecmp(uri, "http://", 7) != 0) {
            why = "expected http://host[:port]";
        } else if ((why = split_uri(uri, &u)) == NULL && u.base_path[0] != 0) {
            why = "a path is not allowed (expected http://host[:port])";
        }
        free(u.host);
        free(u.base_path);
        free(u.authority);
        if (why != NULL) {
            report(ld, v, sub, "bad address \"%s\": %s", uri, why);
            continue;
        }
        ld->services[ld->nservices].name = name;
        ld->services[ld->nservices].uri = uri;
        ld->nservices++;
    }
}

static void
arglist_push(struct arglist *al, const char *arg)
{
    al->v = xgrow(al->v, &al->cap, al->n + 1, sizeof(*al->v));
    al->v[al->n++] = arg;
}

static void
arglist_deinit(struct arglist *al)
{
    for (size_t i = 0; i < al->nown; i++) {
        free(al->own[i]);
    }
    free(al->own);
    free(al->v);
    free(al->buf);
}

/* The spec called 'name', or NULL after reporting an unknown name. */
static const struct kind_spec *
find_kind(struct loader *ld, yaml_node_t *node, const struct load_path *path,
          const struct kind_table *kt, const char *name)
{
    size_t n;
    const struct kind_spec *specs = kt->specs(&n);
    const char **names;
    char *alt;

    if (name[0] == '\0') {
        report(ld, node, path, "missing %s name", kt->noun);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (strcmp(specs[i].name, name) == 0) {
            return &specs[i];
        }
    }
    if (kt->other != NULL) {
        size_t m;
        const struct kind_spec *others = kt->other->specs(&m);
        bool other =
            kt->other->extra != NULL && strcmp(kt->other->extra, name) == 0;

        for (size_t i = 0; i < m && !other; i++) {
            other = strcmp(others[i].name, name) == 0;
        }
        if (other) {
            report(ld, node, path, "unknown %s \"%s\" (%s is a %s)", kt->noun,
                   name, name, kt->other->noun);
            return NULL;
        }
    }
    names = xcalloc(n + 1, sizeof(*names));
    for (size_t i = 0; i < n; i++) {
        names[i] = specs[i].name;
    }
    if (kt->extra != NULL) {
        names[n] = kt->extra;
    }
    alt = load_alternatives(name, names, n + (kt->extra != NULL),
                            sizeof(*names), NULL);
    report(ld, node, path, "unknown %s \"%s\" %s", kt->noun, name, alt);
    free(alt);
    free(names);
    return NULL;
}

static bool
last_gathers(const struct kind_spec *spec)
{
    return spec->nargs > 0 && spec->args[spec->nargs - 1].gather;
}

/*
 * Spring's shortcut "Name=a, b": the name is what precedes the first '=';
 * the rest is cut at ','. In gateway.yaml it is cut into at most nargs
 * pieces (spec->shortcut_nargs if set), the last keeping its commas, so
 * "AddRequestHeader=X-A, a,b" has the value "a,b"; into every piece when
 * the last argument gathers. In a Spring Cloud Gateway file it is cut at
 * every comma, as Spring cuts it, and more pieces than the kind takes
 * are refused: Spring would drop the rest, or fail.
 */
static const struct kind_spec *
parse_shortcut(struct loader *ld, yaml_node_t *node,
               const struct load_path *path, const struct kind_table *kt,
               const char *text, struct arglist *al)
{
    const struct kind_spec *spec;
    char *eq;
    char *p;
    size_t max;

    al->buf = xstrdup(text);
    eq = strchr(al->buf, '=');
    if (eq != NULL) {
        *eq = '\0';
    }
    spec = find_kind(ld, node, path, kt, load_trim(al->buf));
    if (spec == NULL || eq == NULL) {
        return spec;
    }
    max = last_gathers(spec) || ld->scg ? SIZE_MAX
          : spec->shortcut_nargs > 0    ? spec->shortcut_nargs
          : spec->nargs > 0             ? spec->nargs
                                        : 1;
    p = eq + 1;
    for (;;) {
        char *comma = al->n + 1 < max ? strchr(p, ',') : NULL;
        char *piece;

        if (comma != NULL) {
            *comma = '\0';
        }
        piece = load_trim(p);
        if (*piece == '\0' && !spec->sparse) {
            report(ld, node, path, "%s: argument %zu is empty", spec->name,
                   al->n + 1);
            return NULL;
        }
        arglist_push(al, *piece != '\0' ? piece : NULL);
        if (comma == NULL) {
            break;
        }
        p = comma + 1;
    }
    if (ld->scg && !last_gathers(spec) && al->n > spec->nargs) {
        report(ld, node, path,
               "%s: Spring cuts a shortcut at every comma, which gives %zu "
               "arguments where %s takes %s%zu; give a value that holds "
               "commas in the long form (name:, args:)",
               spec->name, al->n, spec->name, spec->nargs > 0 ? "at most " : "",
               spec->nargs);
        return NULL;
    }
    return spec;
}

static const struct field long_form_fields[] = {
    {.key = "name",
     .parse = load_node,
     .offset = offsetof(struct long_form, name),
     .required = true},
    {.key = "args",
     .parse = load_node,
     .offset = offsetof(struct long_form, args)},
};

const struct table load_long_form_table = TABLE(long_form_fields);

/*
 * Puts the values of the long form's args (nodes[i] for spec->args[i],
 * NULL when left out) in shortcut order. Arguments are scalars, and a
 * gathering one may be a sequence of them. RequestRateLimiter, whose
 * args nest, never comes here (load_rate_limiter()).
 */
/* A list argument given as a sequence of scalars: one "a,b" string. */
static const char *
join_list(struct loader *ld, yaml_node_t *v, const struct load_path *sub,
          struct arglist *al)
{
    size_t n = load_sequence_length(v);
    size_t len = 1;
    char *joined;

    for (size_t j = 0; j < n; j++) {
        const char *s =
            load_scalar(ld, load_sequence_item(ld, v, j), PATH_INDEX(sub, j));

        if (s == NULL) {
            return NULL;
        }
        len += strlen(s) + 1;
    }
    joined = xcalloc(1, len);
    for (size_t j = 0; j < n; j++) {
        if (j > 0) {
            strcat(joined, ",");
        }
        strcat(joined, load_scalar(ld, load_sequence_item(ld, v, j),
                                   PATH_INDEX(sub, j)));
    }
    al->own = xrealloc(al->own, (al->nown + 1) * sizeof(*al->own));
    al->own[al->nown++] = joined;
    return joined;
}

/*
 * A gathering argument given as one scalar, "/a/x,/b/y": its values
 * cut at ',', as the shortcut form cuts them and as Spring binds a string
 * to a list. False after reporting an empty one.
 */
static bool
split_gather(struct loader *ld, yaml_node_t *v, const struct load_path *sub,
             const struct kind_spec *spec, struct arglist *al)
{
    const char *s = load_scalar(ld, v, sub);
    char *copy;
    char *p;

    if (s == NULL) {
        return false;
    }
    copy = xstrdup(s);
    al->own = xrealloc(al->own, (al->nown + 1) * sizeof(*al->own));
    al->own[al->nown++] = copy;
    p = copy;
    for (;;) {
        char *comma = strchr(p, ',');
        char *piece;

        if (comma != NULL) {
            *comma = '\0';
        }
        piece = load_trim(p);
        if (*piece == '\0') {
            report(ld, v, sub, "%s: an empty value in \"%s\"", spec->name, s);
            return false;
        }
        arglist_push(al, piece);
        if (comma == NULL) {
            return true;
        }
        p = comma + 1;
    }
}

/*
 * Puts the values of the long form's args (nodes[i] for spec->args[i],
 * NULL when left out) in shortcut order. Arguments are scalars, and a
 * gathering or list one may be a sequence of them. A sparse spec leaves
 * NULL where one is left out. RequestRateLimiter, whose args nest, never
 * comes here (load_rate_limiter()).
 */
static bool
spread_args(struct loader *ld, yaml_node_t *node, const struct load_path *path,
            const struct kind_spec *spec, yaml_node_t **nodes,
            struct arglist *al)
{
    const char *left_out = NULL;
    size_t last = 0;

    for (size_t i = 0; i < spec->nargs; i++) {
        last = nodes[i] != NULL ? i + 1 : last;
    }
    for (size_t i = 0; i < spec->nargs; i++) {
        const struct arg_spec *as = &spec->args[i];
        yaml_node_t *v = nodes[i];
        const struct load_path *sub;
        bool ok = true;

        if (v == NULL) {
            if (!as->optional) {
                report(ld, node, path, "%s: missing argument \"%s\"",
                       spec->name, as->name);
                return false;
            }
            if (spec->sparse && i < last) {
                arglist_push(al, NULL);
            } else if (left_out == NULL) {
                left_out = as->name;
            }
            continue;
        }
        if (left_out != NULL) {
            report(ld, node, path,
                   "%s: missing argument \"%s\" (needed before \"%s\")",
                   spec->name, left_out, as->name);
            return false;
        }
        sub = PATH_KEY(PATH_KEY(path, "args"), as->name);
        if (as->gather && v->type == YAML_SEQUENCE_NODE) {
            for (size_t j = 0; ok && j < load_sequence_length(v); j++) {
                const struct load_path *isub = PATH_INDEX(sub, j);
                const char *s =
                    load_scalar(ld, load_sequence_item(ld, v, j), isub);

                if (s != NULL) {
                    arglist_push(al, s);
                }
                ok = s != NULL;
            }
        } else if (as->gather) {
            ok = split_gather(ld, v, sub, spec, al);
        } else {
            const char *s = as->list && v->type == YAML_SEQUENCE_NODE
                                ? join_list(ld, v, sub, al)
                                : load_scalar(ld, v, sub);

            if (s != NULL) {
                arglist_push(al, s);
            }
            ok = s != NULL;
        }
        if (!ok) {
            return false;
        }
    }
    return true;
}

/* The long-form key of argument 'name': "backoff" for "backoff.factor". */
static size_t
top_key_len(const char *name)
{
    const char *dot = strchr(name, '.');

    return dot != NULL ? (size_t)(dot - name) : strlen(name);
}

/*
 * Reads the long form's args mapping into nodes[i] for spec->args[i].
 * An argument "a.b" is key "b" of the mapping under key "a", so that
 * Spring's nested keys (Retry's backoff.firstBackoff) read as written.
 */
static bool
read_arg_nodes(struct loader *ld, yaml_node_t *args,
               const struct load_path *sub, const struct kind_spec *spec,
               yaml_node_t **nodes)
{
    struct field *fields = xcalloc(spec->nargs, sizeof(*fields));
    yaml_node_t **tops = xcalloc(spec->nargs, sizeof(*tops));
    char **keys = xcalloc(spec->nargs, sizeof(*keys));
    size_t *first = xcalloc(spec->nargs, sizeof(*first));
    struct table table = {.fields = fields};
    size_t nf = 0;
    bool ok;

    for (size_t i = 0; i < spec->nargs; i++) {
        const char *name = spec->args[i].name;
        size_t len = top_key_len(name);
        size_t j = 0;

        while (j < nf &&
               !(strlen(keys[j]) == len && strncmp(keys[j], name, len) == 0)) {
            j++;
        }
        if (j == nf) {
            keys[nf] = xstrndup(name, len);
            first[nf] = i;
            fields[nf].key = keys[nf];
            fields[nf].parse = load_node;
            fields[nf].offset = nf * sizeof(*tops);
            nf++;
        }
    }
    table.n = nf;
    ok = load_fields(ld, args, sub, &table, tops) == LOAD_OK;
    for (size_t j = 0; ok && j < nf; j++) {
        const char *name = spec->args[first[j]].name;
        size_t nsub = 0;
        struct field *subf;
        struct table subt = {.fields = NULL};

        if (name[strlen(keys[j])] != '.') {
            nodes[first[j]] = tops[j];
            continue;
        }
        if (tops[j] == NULL) {
            continue;
        }
        subf = xcalloc(spec->nargs, sizeof(*subf));
        for (size_t i = first[j]; i < spec->nargs; i++) {
            const char *n = spec->args[i].name;

            if (strncmp(n, keys[j], strlen(keys[j])) == 0 &&
                n[strlen(keys[j])] == '.') {
                subf[nsub].key = n + strlen(keys[j]) + 1;
                subf[nsub].parse = load_node;
                subf[nsub].offset = i * sizeof(*nodes);
                nsub++;
            }
        }
        subt.fields = subf;
        subt.n = nsub;
        ok = load_fields(ld, tops[j], PATH_KEY(sub, keys[j]), &subt, nodes) ==
             LOAD_OK;
        free(subf);
    }
    for (size_t j = 0; j < nf; j++) {
        free(keys[j]);
    }
    free(keys);
    free(first);
    free(tops);
    free(fields);
    return ok;
}

/* "{name: Header, args: {header: X-Id, regexp: '\d+'}}". */
static const struct kind_spec *
parse_long_form(struct loader *ld, yaml_node_t *node,
                const struct load_path *path, const struct kind_table *kt,
                struct arglist *al)
{
    struct long_form lf = {NULL, NULL};
    const struct kind_spec *spec;
    yaml_node_t **nodes;
    const char *name;
    const struct load_path *sub;
    bool ok;

    if (load_fields(ld, node, path, &load_long_form_table, &lf) != LOAD_OK) {
        return NULL;
    }
    sub = PATH_KEY(path, "name");
    name = load_scalar(ld, lf.name, sub);
    if (name == NULL) {
        return NULL;
    }
    spec = find_kind(ld, lf.name, path, kt, name);
    if (spec == NULL) {
        return NULL;
    }
    if (lf.args == NULL) {
        return spec;
    }
    /* The arg names become the keys of a table made for this spec, so
     * that unknown and repeated keys are caught as everywhere else. */
    nodes = xcalloc(spec->nargs, sizeof(*nodes));
    sub = PATH_KEY(path, "args");
    ok = read_arg_nodes(ld, lf.args, sub, spec, nodes) &&
         spread_args(ld, node, path, spec, nodes, al);
    free(nodes);
    return ok ? spec : NULL;
}

/* "Header takes 1 to 2 arguments (header, regexp), got 3". */
static bool
check_count(struct loader *ld, yaml_node_t *node, const struct load_path *path,
            const struct kind_spec *spec, size_t n)
{
    size_t min = 0;
    size_t max = last_gathers(spec) ? SIZE_MAX : spec->nargs;
    char *names;

    for (size_t i = 0; i < spec->nargs; i++) {
        min += !spec->args[i].optional;
    }
    if (n >= min && n <= max) {
        return true;
    }
    names = load_join_names(spec->args, spec->nargs, sizeof(*spec->args));
    if (spec->nargs == 0) {
        report(ld, node, path, "%s takes no arguments, got %zu", spec->name, n);
    } else if (max == SIZE_MAX) {
        report(ld, node, path, "%s takes %zu or more arguments (%s), got %zu",
               spec->name, min, names, n);
    } else if (min == max) {
        report(ld, node, path, "%s takes %zu argument%s (%s), got %zu",
               spec->name, min, min == 1 ? "" : "s", names, n);
    } else {
        report(ld, node, path, "%s takes %zu to %zu arguments (%s), got %zu",
               spec->name, min, max, names, n);
    }
    free(names);
    return false;
}

/* Builds one predicate or filter in 'obj'; true when it was built. */
static bool
parse_element(struct loader *ld, yaml_node_t *node,
              const struct load_path *path, const struct kind_table *kt,
              void *obj)
{
    struct arglist al = {NULL, 0, 0, NULL, NULL, 0};
    const struct kind_spec *spec = NULL;
    char err[256];
    bool ok = false;

    if (node->type == YAML_SCALAR_NODE && !load_is_null(node)) {
        const char *text = load_scalar(ld, node, path);

        if (text != NULL) {
            spec = parse_shortcut(ld, node, path, kt, text, &al);
        }
    } else if (node->type == YAML_MAPPING_NODE) {
        spec = parse_long_form(ld, node, path, kt, &al);
    } else {
        report(ld, node, path,
               "expected \"Name=args\" or a mapping with name and args, got "
               "%s",
               load_node_desc(node));
    }
    if (spec != NULL && check_count(ld, node, path, spec, al.n)) {
        err[0] = '\0';
        if (kt->init(obj, spec, al.v, al.n, err, sizeof(err)) == 0) {
            ok = true;
        } else {
            report(ld, node, path, "%s", err);
        }
    }
    arglist_deinit(&al);
    return ok;
}

/* The elements that were built, packed; '*count' of them. */
static void *
parse_list(struct loader *ld, yaml_node_t *node, const struct load_path *path,
           const struct kind_table *kt, size_t *count)
{
    size_t n = load_sequence_length(node);
    char *v;

    *count = 0;
    if (!load_expect_sequence(ld, node, path)) {
        return NULL;
    }
    v = xcalloc(n, kt->size);
    for (size_t i = 0; i < n; i++) {
        const struct load_path *sub = PATH_INDEX(path, i);

        yaml_node_t *item = load_sequence_item(ld, node, i);

        if (parse_element(ld, item, sub, kt, v + *count * kt->size)) {
            (*count)++;
            if (kt->check != NULL) {
                kt->check(ld, item, sub, v, *count);
            }
        }
    }
    return v;
}

static int
init_predicate(void *obj, const struct kind_spec *spec, const char *const *args,
               size_t nargs, char *err, size_t errlen)
{
    return predicate_init(obj, spec, args, nargs, err, errlen);
}

static int
init_filter(void *obj, const struct kind_spec *spec, const char *const *args,
            size_t nargs, char *err, size_t errlen)
{
    return filter_init(obj, spec, args, nargs, err, errlen);
}

/*
 * One Weight a route: the router draws the route's share of one group
 * (router_weigh()), and a second group would keep no share and never
 * match.
 */
static void
check_predicates(struct loader *ld, yaml_node_t *node,
                 const struct load_path *path, const void *built, size_t n)
{
    const struct predicate *p = built;

    if (p[n - 1].kind != PREDICATE_WEIGHT) {
        return;
    }
    for (size_t i = 0; i + 1 < n; i++) {
        if (p[i].kind == PREDICATE_WEIGHT) {
            report(ld, node, path,
                   "a route takes at most one Weight predicate (it is in "
                   "group \"%s\" already)",
                   p[i].name);
            return;
        }
    }
}

static const struct kind_table filter_kinds;

static const struct kind_table predicate_kinds = {
    .noun = "predicate",
    .specs = predicate_specs,
    .init = init_predicate,
    .size = sizeof(struct predicate),
    .other = &filter_kinds,
    .check = check_predicates,
};

/* RequestRateLimiter is not in filter.c's table: its args are nested,
 * and parse_filters() puts it in the route's rate limiters. */
static const struct kind_table filter_kinds = {
    .noun = "filter",
    .specs = filter_specs,
    .init = init_filter,
    .size = sizeof(struct filter),
    .other = &predicate_kinds,
    .extra = RATE_LIMITER_NAME,
};

static void
parse_predicates(struct loader *ld, yaml_node_t *node, const struct field *f,
                 void *base, const struct load_path *path)
{
    struct route *route = base;

    (void)f;
    route->predicates =
        parse_list(ld, node, path, &predicate_kinds, &route->npredicates);
}

/*
 * A filter that would write or remove an identity field (identity.
 * user_header, role_header; in any case, '_' for '-'): the gateway
 * writes those last, from the identity it decided (README, Identity), so
 * the filter could never take effect. Reported rather than left to do
 * nothing.
 */
static void
check_identity_field(struct loader *ld, yaml_node_t *node,
                     const struct load_path *path, const struct filter *flt)
{
    const struct identity_conf *ic = &ld->cfg->identity;
    const char *field = NULL;
    const char *name = flt->name;

    if (flt->kind == FILTER_MAP_REQUEST_HEADER) {
        name = flt->name2;
    } else if (flt->kind != FILTER_ADD_REQUEST_HEADER &&
               flt->kind != FILTER_SET_REQUEST_HEADER &&
               flt->kind != FILTER_REMOVE_REQUEST_HEADER) {
        return;
    }
    /* As forward_request_headers() leaves them out: X_User_Id is
     * X-User-Id to a CGI upstream, and never forwarded either. */
    if (forward_same_to_cgi(name, ic->user_header)) {
        field = "identity.user_header";
    } else if (forward_same_to_cgi(name, ic->role_header)) {
        field = "identity.role_header";
    }
    if (field != NULL) {
        report(ld, node, path,
               "%s is %s: the gateway writes it from the identity it "
               "decided, so this filter would do nothing",
               name, field);
    }
}

/*
 * A response filter on Content-Length, Transfer-Encoding, Connection or
 * another hop-by-hop field: the gateway frames the body it sends and says
 * what becomes of the connection itself, and a second say in the head
 * (two lengths, a length beside chunks) lets whatever reads it next split
 * the responses wrongly. Refused, as request smuggling's mirror image.
 */
static void
check_framing_field(struct loader *ld, yaml_node_t *node,
                    const struct load_path *path, const struct filter *flt)
{
    if (flt->kind != FILTER_ADD_RESPONSE_HEADER &&
        flt->kind != FILTER_SET_RESPONSE_HEADER &&
        flt->kind != FILTER_REMOVE_RESPONSE_HEADER &&
        flt->kind != FILTER_DEDUPE_RESPONSE_HEADER &&
        flt->kind != FILTER_REWRITE_RESPONSE_HEADER) {
        return;
    }
    for (size_t i = 0; i <= flt->nnames; i++) {
        const char *name = i < flt->nnames ? flt->names[i] : flt->name;

        if (name != NULL && !forward_response_field(name, NULL)) {
            report(ld, node, path,
                   "%s frames the response or governs its connection: the "
                   "gateway sets it, and a response filter may not",
                   name);
            return;
        }
    }
}

/* "SetPath", for messages. */
static const char *
filter_name(const struct filter *flt)
{
    size_t n;
    const struct kind_spec *specs = filter_specs(&n);
    const char *name = argspec_kind_name(specs, n, (int)flt->kind);

    return name != NULL ? name : "filter";
}

/* True when a Path predicate of 'route' captures the variable 'name'. */
static bool
route_captures(const struct route *route, const char *name, size_t len)
{
    for (size_t i = 0; i < route->npredicates; i++) {
        const struct predicate *p = &route->predicates[i];

        for (size_t j = 0; p->kind == PREDICATE_PATH && j < p->nvalues; j++) {
            if (glob_captures(p->values[j], name, len)) {
                return true;
            }
        }
    }
    return false;
}

/*
 * A "{name}" in a filter's value that no Path pattern of the route
 * captures would expand to nothing on every request: a typo, reported.
 * The route's predicates are read before its filters (route_fields).
 */
static void
check_template_vars(struct loader *ld, yaml_node_t *node,
                    const struct load_path *path, const struct route *route,
                    const struct filter *flt)
{
    const char *s = flt->value;
    size_t len;

    switch (flt->kind) {
    case FILTER_PREFIX_PATH:
    case FILTER_SET_PATH:
    case FILTER_ADD_REQUEST_HEADER:
    case FILTER_SET_REQUEST_HEADER:
    case FILTER_ADD_REQUEST_PARAMETER:
        break;
    case FILTER_ADD_RESPONSE_HEADER:
    case FILTER_SET_RESPONSE_HEADER:
        /* Spring expands URI variables in these values too; sluice sends
         * a response value as written, so a Spring file that counts on
         * the expansion would get another meaning. */
        if (ld->scg && s != NULL && (s = glob_next_ref(s, &len)) != NULL) {
            report(ld, node, path,
                   "%s: Spring would expand {%.*s} in the value; sluice "
                   "sends response header values as written",
                   filter_name(flt), (int)len, s + 1);
        }
        return;
    default:
        return;
    }
    while (s != NULL && (s = glob_next_ref(s, &len)) != NULL) {
        if (!route_captures(route, s + 1, len)) {
            report(ld, node, path,
                   "%s: no Path pattern of the route captures {%.*s}, so it "
                   "would always be empty",
                   filter_name(flt), (int)len, s + 1);
            return;
        }
        s += len + 2;
    }
}

/*
 * A request filter that would write Host, Content-Length, Expect, an
 * X-Forwarded-* field (in either spelling, '-' or '_') or a hop-by-hop
 * field: the gateway sets or drops each of them when it forwards, so the
 * filter could never take effect. Reported rather than left to do
 * nothing, as check_framing_field() does for responses.
 */
static void
check_request_field(struct loader *ld, yaml_node_t *node,
                    const struct load_path *path, const struct filter *flt)
{
    const char *name = flt->name;

    if (flt->kind == FILTER_MAP_REQUEST_HEADER) {
        name = flt->name2;
    } else if (flt->kind != FILTER_ADD_REQUEST_HEADER &&
               flt->kind != FILTER_SET_REQUEST_HEADER) {
        return;
    }
    if (name == NULL) {
        return;
    }
    switch (load_request_field(name)) {
    case LOAD_FIELD_FREE:
        break;
    case LOAD_FIELD_HOST:
        report(ld, node, path,
               "%s is the gateway's to set: use SetRequestHostHeader to send "
               "another, or PreserveHostHeader to keep the client's",
               name);
        break;
    case LOAD_FIELD_SET:
        report(ld, node, path,
               "%s is set by the gateway when it forwards the request: a "
               "request filter may not set it",
               name);
        break;
    case LOAD_FIELD_HOP:
        report(ld, node, path,
               "%s frames the request or governs its connection: the "
               "gateway does not forward it, and a request filter may not "
               "set it",
               name);
        break;
    }
}

/*
 * parse_list(), but a RequestRateLimiter goes to the route's rate
 * limiters, built by load_ratelimiter.c; messages still name its index in
 * filters:. Appends to what the route has already.
 */
static void
append_filters(struct loader *ld, yaml_node_t *node,
               const struct load_path *path, struct route *route)
{
    size_t n = load_sequence_length(node);
    size_t nrl = 0;

    if (!load_expect_sequence(ld, node, path)) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        nrl += load_is_rate_limiter(ld, load_sequence_item(ld, node, i));
    }
    route->filters = xrealloc(route->filters, (route->nfilters + n - nrl + 1) *
                                                  sizeof(*route->filters));
    memset(route->filters + route->nfilters, 0,
           (n - nrl + 1) * sizeof(*route->filters));
    route->rate_limiters =
        xrealloc(route->rate_limiters, (route->nrate_limiters + nrl + 1) *
                                           sizeof(*route->rate_limiters));
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *item = load_sequence_item(ld, node, i);
        const struct load_path *sub = PATH_INDEX(path, i);
        struct rate_limit_conf *rl;

        if (!load_is_rate_limiter(ld, item)) {
            if (parse_element(ld, item, sub, &filter_kinds,
                              &route->filters[route->nfilters])) {
                check_identity_field(ld, item, sub,
                                     &route->filters[route->nfilters]);
                check_framing_field(ld, item, sub,
                                    &route->filters[route->nfilters]);
                check_request_field(ld, item, sub,
                                    &route->filters[route->nfilters]);
                check_template_vars(ld, item, sub, route,
                                    &route->filters[route->nfilters]);
                route->nfilters++;
            }
        } else if ((rl = load_rate_limiter(ld, item, sub, route)) != NULL) {
            route->rate_limiters[route->nrate_limiters++] = rl;
        }
    }
}

static void
parse_filters(struct loader *ld, yaml_node_t *node, const struct field *f,
              void *base, const struct load_path *path)
{
    (void)f;
    append_filters(ld, node, path, base);
}

static const struct field route_fields[] = {
    {.key = "id", .parse = parse_route_id, .required = true},
    {.key = "uri", .parse = parse_uri, .required = true},
    {.key = "predicates", .parse = parse_predicates},
    {.key = "filters", .parse = parse_filters},
    {.key = "connect_timeout",
     .parse = load_duration,
     .offset = offsetof(struct route, connect_timeout_ms),
     .min = 1},
    {.key = "response_timeout",
     .parse = load_duration,
     .offset = offsetof(struct route, response_timeout_ms),
     .min = 1},
    {.key = "tls",
     .parse = load_table,
     .offset = offsetof(struct route, tls),
     .table = &load_upstream_tls_table},
};

static const struct table route_table = TABLE(route_fields);

static char *
dup_or_null(const char *s)
{
    return s != NULL ? xstrdup(s) : NULL;
}

/* What a route has from upstream: before its own keys are read (upstream:
 * comes before routes in the section table). */
static void
route_defaults(const struct config *cfg, struct route *route)
{
    route->connect_timeout_ms = cfg->upstream.connect_timeout_ms;
    route->response_timeout_ms = cfg->upstream.response_timeout_ms;
    route->tls.at = cfg->upstream.tls.at;
    route->tls.verify = cfg->upstream.tls.verify;
    route->tls.ca_file = dup_or_null(cfg->upstream.tls.ca_file);
    route->tls.cert_file = dup_or_null(cfg->upstream.tls.cert_file);
    route->tls.key_file = dup_or_null(cfg->upstream.tls.key_file);
}

void
load_routes(struct loader *ld, yaml_node_t *node, const struct field *f,
            void *base, const struct load_path *path)
{
    struct config *cfg = base;
    size_t n = load_sequence_length(node);

    (void)f;
    if (!load_expect_sequence(ld, node, path)) {
        return;
    }
    /* One slot per item, even a broken one, so that routes[i] in a
     * message is the i-th item of the file. */
    cfg->routes = xcalloc(n, sizeof(struct route));
    note_route_ids(ld, node);
    for (size_t i = 0; i < n; i++) {
        struct route *route = &cfg->routes[i];
        const struct load_path *sub = PATH_INDEX(path, i);

        cfg->nroutes = i + 1;
        route_defaults(cfg, route);
        load_fields(ld, load_sequence_item(ld, node, i), sub, &route_table,
                    route);
    }
    forget_route_ids(ld);
    router_weigh(cfg->routes, cfg->nroutes);
}

/* ------------------------------------------------------------------ */
/* Spring Cloud Gateway's shape                                        */

/*
 * SCG forwards to the request's own path: the uri's path is ignored
 * ("http://host:8081/" followed by "**" is common). "lb://name" takes
 * its address from scg.services (parse_uri()).
 */
static void
parse_scg_uri(struct loader *ld, yaml_node_t *node, const struct field *f,
              void *base, const struct load_path *path)
{
    struct route *route = base;

    parse_uri(ld, node, f, base, path);
    if (route->uri.base_path != NULL) {
        route->uri.base_path[0] = '\0';
    }
}

/* order: any integer, negative first, as in SCG. */
static void
parse_order(struct loader *ld, yaml_node_t *node, const struct field *f,
            void *base, const struct load_path *path)
{
    struct route *route = base;
    const char *s = load_scalar(ld, node, path);
    bool neg;
    uint64_t v;

    (void)f;
    if (s == NULL) {
        return;
    }
    neg = s[0] == '-';
    /* A Java int: Ordered.HIGHEST_PRECEDENCE is -2^31. */
    if (load_decimal(s + neg, strlen(s + neg),
                     neg ? (uint64_t)INT32_MAX + 1 : INT32_MAX, &v) < 0) {
        report(ld, node, path,
               "bad order \"%s\" (expected an integer from %lld to %d)", s,
               (long long)INT32_MIN, INT32_MAX);
        return;
    }
    route->order = neg ? -(int64_t)v : (int64_t)v;
}

/*
 * A route's metadata: Spring reads its per-route timeouts there, a
 * number of milliseconds each (NettyRoutingFilter); the other keys are
 * the application's own, ignored with a warning each.
 */
static void
parse_scg_metadata(struct loader *ld, yaml_node_t *node, const struct field *f,
                   void *base, const struct load_path *path)
{
    static const struct field timeouts[] = {
        {.key = "connect-timeout",
         .offset = offsetof(struct route, connect_timeout_ms),
         .min = 1},
        {.key = "response-timeout",
         .offset = offsetof(struct route, response_timeout_ms),
         .min = 1},
    };

    (void)f;
    if (node->type != YAML_MAPPING_NODE) {
        load_ignored(ld, node, NULL, base, path);
        return;
    }
    for (yaml_node_pair_t *p = node->data.mapping.pairs.start;
         p < node->data.mapping.pairs.top; p++) {
        yaml_node_t *k = load_node_at(ld, p->key);
        yaml_node_t *v = load_node_at(ld, p->value);
        const char *key = k->type == YAML_SCALAR_NODE
                              ? (const char *)k->data.scalar.value
                              : "?";
        const struct load_path *sub = PATH_KEY(path, key);
        const struct field *t = NULL;

        for (size_t i = 0; i < sizeof(timeouts) / sizeof(timeouts[0]); i++) {
            if (strcmp(key, timeouts[i].key) == 0) {
                t = &timeouts[i];
            }
        }
        if (t == NULL) {
            load_ignored(ld, v, NULL, base, sub);
        } else if (v->type == YAML_SCALAR_NODE &&
                   v->data.scalar.value[0] == '-') {
            report(ld, v, sub,
                   "a negative value turns Spring's timeout off for the "
                   "route; sluice has no such setting: give milliseconds");
        } else if (v->type == YAML_SCALAR_NODE &&
                   v->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) {
            report(ld, v, sub,
                   "Spring reads a number of milliseconds here and ignores "
                   "a string: write it unquoted");
        } else {
            load_count(ld, v, t, base, sub);
        }
    }
}

static const struct field scg_route_fields[] = {
    {.key = "id", .parse = parse_route_id, .required = true},
    {.key = "uri", .parse = parse_scg_uri, .required = true},
    {.key = "predicates", .parse = parse_predicates},
    {.key = "filters", .parse = parse_filters},
    {.key = "order", .parse = parse_order},
    {.key = "metadata", .parse = parse_scg_metadata},
};

static const struct table scg_route_table = TABLE(scg_route_fields);

/* Where the filters of the list 'node' (NULL: none) stand in it. */
struct list_positions {
    size_t *filter; /* the list index of each ordinary filter, in order */
    size_t nfilter;
    size_t *limiter; /* the same for each RequestRateLimiter */
    size_t nlimiter;
};

static void
list_positions(struct loader *ld, yaml_node_t *node, struct list_positions *lp)
{
    size_t n = node != NULL && node->type == YAML_SEQUENCE_NODE
                   ? load_sequence_length(node)
                   : 0;

    lp->filter = xcalloc(n + 1, sizeof(*lp->filter));
    lp->limiter = xcalloc(n + 1, sizeof(*lp->limiter));
    lp->nfilter = lp->nlimiter = 0;
    for (size_t i = 0; i < n; i++) {
        if (load_is_rate_limiter(ld, load_sequence_item(ld, node, i))) {
            lp->limiter[lp->nlimiter++] = i;
        } else {
            lp->filter[lp->nfilter++] = i;
        }
    }
}

/*
 * The 'own' elements of 'size' bytes at the front of 'v' are a route's
 * own filters, the 'k' after them its default filters, and 'own_at' and
 * 'def_at' where each stood in its list: puts them in Spring's order.
 * Spring gives a filter at index i of either list the order i + 1, a
 * RequestRateLimiter too, and sorts the defaults, then the route's own,
 * stably by it: the two lists alternate, position by position.
 */
static void
merge_by_position(void *v, size_t own, const size_t *own_at, size_t k,
                  const size_t *def_at, size_t size)
{
    char *a = v;
    char *tmp;
    size_t i = 0, j = 0, at = 0;

    if (k == 0 || own == 0) {
        return;
    }
    tmp = xmalloc((own + k) * size);
    while (i < own || j < k) {
        if (j < k && (i == own || def_at[j] <= own_at[i])) {
            memcpy(tmp + at++ * size, a + (own + j++) * size, size);
        } else {
            memcpy(tmp + at++ * size, a + i++ * size, size);
        }
    }
    memcpy(a, tmp, (own + k) * size);
    free(tmp);
}

/*
 * A route's default filters were appended after its own ('nf' filters
 * and 'nrl' limiters before them): put both kinds in Spring's order.
 * Left alone when a filter did not load (the file is refused anyway).
 */
static void
order_defaults(struct loader *ld, struct route *route, yaml_node_t *own_node,
               yaml_node_t *defaults, size_t nf, size_t nrl)
{
    struct list_positions own, def;

    list_positions(ld, own_node, &own);
    list_positions(ld, defaults, &def);
    if (own.nfilter == nf && own.nlimiter == nrl &&
        def.nfilter == route->nfilters - nf &&
        def.nlimiter == route->nrate_limiters - nrl) {
        merge_by_position(route->filters, nf, own.filter, def.nfilter,
                          def.filter, sizeof(*route->filters));
        merge_by_position(route->rate_limiters, nrl, own.limiter, def.nlimiter,
                          def.limiter, sizeof(*route->rate_limiters));
    }
    free(own.filter);
    free(own.limiter);
    free(def.filter);
    free(def.limiter);
}

/* Stable: equal orders keep the file's order. */
static void
sort_by_order(struct route *routes, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        struct route r = routes[i];
        size_t j = i;

        while (j > 0 && routes[j - 1].order > r.order) {
            routes[j] = routes[j - 1];
            j--;
        }
        routes[j] = r;
    }
}

/*
 * default-filters with no route to go on: read onto a route made for the
 * purpose and thrown away, so that a wrong one is still reported.
 */
static void
check_defaults_alone(struct loader *ld, yaml_node_t *defaults,
                     const struct load_path *defaults_path)
{
    struct route scratch;

    memset(&scratch, 0, sizeof(scratch));
    route_defaults(ld->cfg, &scratch);
    append_filters(ld, defaults, defaults_path, &scratch);
    route_deinit(&scratch);
}

void
load_scg_routes(struct loader *ld, yaml_node_t *node,
                const struct load_path *path, yaml_node_t *defaults,
                const struct load_path *defaults_path)
{
    struct config *cfg = ld->cfg;
    size_t n = load_sequence_length(node);
    bool defaults_ok = defaults != NULL;

    if (!load_expect_sequence(ld, node, path)) {
        return;
    }
    if (n == 0 && defaults != NULL) {
        check_defaults_alone(ld, defaults, defaults_path);
    }
    cfg->routes = xcalloc(n, sizeof(struct route));
    note_route_ids(ld, node);
    for (size_t i = 0; i < n; i++) {
        struct route *route = &cfg->routes[i];
        yaml_node_t *item;
        const yaml_node_pair_t *own;
        size_t nf;
        size_t nrl;
        size_t before;

        cfg->nroutes = i + 1;
        /* Certificates verified by default here too: a zeroed route
         * would trust any https upstream. */
        route_defaults(cfg, route);
        item = load_sequence_item(ld, node, i);
        load_fields(ld, item, PATH_INDEX(path, i), &scg_route_table, route);
        if (!defaults_ok) {
            continue;
        }
        /* default-filters are read after the route's own, because a
         * RequestRateLimiter needs the route's id, then put in order. */
        nf = route->nfilters;
        nrl = route->nrate_limiters;
        before = ld->ndiags;
        append_filters(ld, defaults, defaults_path, route);
        own = item != NULL ? load_mapping_pair(ld, item, "filters") : NULL;
        order_defaults(ld, route,
                       own != NULL ? load_node_at(ld, own->value) : NULL,
                       defaults, nf, nrl);
        /* A wrong default filter is reported once, not once a route. */
        defaults_ok = ld->ndiags == before;
        load_name_derived(route);
    }
    forget_route_ids(ld);
    sort_by_order(cfg->routes, cfg->nroutes);
    router_weigh(cfg->routes, cfg->nroutes);
}
