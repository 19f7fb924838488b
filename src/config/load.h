/*
 * load.h - the YAML loader's engine, shared by the files of config/ and
 * private to them (nothing outside src/config/ includes it): the state of
 * one config_parse(), error reports, name suggestions, node access, the
 * table engine (struct field) and the field parsers that several sections
 * use. Includes <yaml.h>; does no I/O but config_load()'s read.
 */
#ifndef SLUICE_CONFIG_LOAD_H
#define SLUICE_CONFIG_LOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <yaml.h>

#include "config.h"

#define NELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* The filter the loader builds itself, into the route's rate limiters
 * rather than its filters (load_routes.c, parse_filters()). */
#define RATE_LIMITER_NAME "RequestRateLimiter"

struct diag; /* one error and its position (load.c) */

/*
 * Where a value sits in the document, "routes[2].filters[0]", as a chain
 * of steps on the stack: the text is only built when an error is reported
 * (load_report_at()), so that a file without errors formats no path.
 */
struct load_path {
    const struct load_path *parent; /* NULL: the step below the top */
    const char *key;                /* a mapping key, or NULL: an index;
                                       borrowed */
    size_t index;                   /* the sequence index, when key is NULL */
};

/*
 * The path to 'key' of the mapping at 'parent', or to item 'i' of the
 * sequence at 'parent' (NULL for the top). Compound literals: each lives
 * until the end of the block that names it.
 */
#define PATH_KEY(parent, key) (&(const struct load_path){(parent), (key), 0})
#define PATH_INDEX(parent, i) (&(const struct load_path){(parent), NULL, (i)})

/* A name Spring Cloud Gateway's key-resolver: "#{@name}" may use. */
struct load_resolver {
    const char *name; /* the bean's name; borrowed from the document or
                         static */
    const char *key;  /* sluice's key for it: "ip", "query:user"... */
};

/* An address for "lb://name", from scg.services. */
struct load_service {
    const char *name; /* the service; borrowed from the document */
    const char *uri;  /* "http://host[:port]"; borrowed from the document */
};

/* State of one config_parse() call; never outlives it. */
struct loader {
    const char *name;     /* the file as named in messages; borrowed */
    const char *text;     /* the input, for reader-error positions */
    size_t len;           /* bytes in 'text' */
    yaml_document_t *doc; /* the document being read; borrowed */
    struct config *cfg;   /* being built; freed if any error */
    struct diag *diags;   /* errors found so far; owned */
    size_t ndiags;        /* entries in 'diags' */
    size_t cap;           /* allocated entries in 'diags' */
    struct diag *warns;   /* warnings so far, for cfg->warnings; owned */
    size_t nwarns;        /* entries in 'warns' */
    size_t wcap;          /* allocated entries in 'warns' */
    bool scg;             /* the file is in Spring Cloud Gateway's shape */
    bool spring_reads;    /* the section being read is Spring Boot's too,
                             which reads plain scalars as YAML 1.1 does */
    int scg_deny_empty;   /* spring.cloud.gateway.filter.request-rate-
                             limiter.deny-empty-key: 1, 0, or -1 unset */
    int scg_empty_status; /* its empty-key-status-code, or 0 unset */
    struct load_resolver *resolvers; /* scg.key_resolvers and the
                                        conventional names; owned array */
    size_t nresolvers;               /* entries in 'resolvers' */
    struct load_service *services;   /* scg.services; owned array */
    size_t nservices;                /* entries in 'services' */
    const char **route_ids;          /* while routes load: each item's id as
                                        written, or NULL; owned array of
                                        strings borrowed from the document */
    size_t nroute_ids;               /* entries in 'route_ids' */
};

struct field;

/*
 * Reads 'node', the value of the key 'f', into the struct at 'base'
 * (f->offset says where). Reports its own errors; 'path' names the value
 * in them.
 */
typedef void field_parse_cb(struct loader *ld, yaml_node_t *node,
                            const struct field *f, void *base,
                            const struct load_path *path);

/* One key of a mapping; each section is a table of these. */
struct field {
    const char *key;       /* must stay the first member: see table_name() */
    field_parse_cb *parse; /* reads the value */
    size_t offset;         /* of the value in the struct being filled */
    uint64_t min;          /* numbers: least value accepted */
    uint64_t max;          /* numbers: greatest value accepted; 0: none */
    bool required;         /* "path.key: required" when absent */
    const struct choices *choices; /* load_enum(): the words allowed */
    const struct table *table;     /* load_table(): the nested mapping */
};

/*
 * The rules between the fields of one table, for the struct at 'base'
 * that the table has just filled: its keys were right, and so were its
 * values unless the table says check_always. Reports its own errors.
 */
typedef void table_check_cb(struct loader *ld, yaml_node_t *node,
                            const struct load_path *path, void *base);

/* The keys of a mapping, read into one struct by load_fields(). */
struct table {
    const struct field *fields; /* in the order they are read */
    size_t n;                   /* entries in 'fields' */
    bool flag_given;            /* set the bool at 'given' when present */
    size_t given;               /* of that bool in the struct: "enabled" */
    table_check_cb *check;      /* cross-field rules, or NULL */
    bool check_always;          /* check also after a value was reported
                                   (not after a wrong key) */
    bool keys_first;            /* a wrong key: read no value at all */
    bool flag_pos;              /* set the struct conf_pos at 'pos' to
                                   where the mapping begins */
    size_t pos;                 /* of that struct conf_pos */
};

#define TABLE(fields)                                                          \
    {                                                                          \
        (fields), NELEMS(fields), false, 0, NULL, false, false, false, 0       \
    }

/* One of a few words; e.g. on_redis_error: local | allow | deny. */
struct choice {
    const char *name; /* as written in gateway.yaml */
    int value;        /* the enum it stands for */
};

/* load_alternatives() reads the names of a table of choices. */
_Static_assert(offsetof(struct choice, name) == 0, "name first");

/* How a word that is not in the list is reported. */
enum choice_style {
    CHOICE_EXPECTED, /* bad WHAT "x" (expected a, b or c) */
    CHOICE_SUGGEST,  /* the same, but (did you mean "y"?) for a near miss */
    CHOICE_UNKNOWN,  /* unknown WHAT "x" (did you mean "y"?), or
                        (known: a, b, c) */
};

/* The words one enumerated value may take, and how to report others. */
struct choices {
    const char *what;        /* the value in messages: "mode" */
    const struct choice *v;  /* the words, in the order listed */
    size_t n;                /* entries in 'v' */
    enum choice_style style; /* the message for a word not in 'v' */
};

#define CHOICES(what, table, style)                                            \
    {                                                                          \
        (what), (table), NELEMS(table), (style)                                \
    }

/* The keys of the long form. */
struct long_form {
    yaml_node_t *name; /* value of "name:"; borrowed */
    yaml_node_t *args; /* value of "args:" or NULL; borrowed */
};

/* The long form's keys: name, args (load_routes.c). */
extern const struct table load_long_form_table;

/* ------------------------------------------------------------------ */
/* The model (config.c)                                                */

/* A config holding the defaults, with one reference; named 'name'. */
struct config *config_new(const char *name);
/* Frees 'cfg' whatever its refcount; also a half-built one. */
void config_free(struct config *cfg);

/* ------------------------------------------------------------------ */
/* Errors, suggestions, nodes, the table engine (load.c)               */

/* "file:line:col: path: what" at 'mark'; a NULL 'path' is left out. */
void load_report_at(struct loader *ld, yaml_mark_t mark,
                    const struct load_path *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The same line as a warning, into ld->cfg->warnings: never fatal. */
void load_warn_at(struct loader *ld, yaml_mark_t mark,
                  const struct load_path *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* A key that Spring Cloud Gateway files hold and sluice has no use for:
 * warned about once, as "ignored", and not read further. */
field_parse_cb load_ignored;

#define report(ld, node, path, ...)                                            \
    load_report_at((ld), (node)->start_mark, (path), __VA_ARGS__)

/* "(did you mean "x"?)" or "(known: a, b)"; the caller frees it. */
char *load_alternatives(const char *word, const void *table, size_t n,
                        size_t stride, size_t *suggested);
/* "a, b, c" from a table whose entries start with their name. */
char *load_join_names(const void *table, size_t n, size_t stride);

bool load_is_null(const yaml_node_t *node);
/* "a mapping", "a sequence", "a scalar" or "nothing", for messages. */
const char *load_node_desc(const yaml_node_t *node);
yaml_node_t *load_node_at(struct loader *ld, int index);
/* The pair of 'key' in the mapping 'node', or NULL when 'node' is not a
 * mapping or has no such key. Borrowed from the document. */
const yaml_node_pair_t *
load_mapping_pair(struct loader *ld, const yaml_node_t *node, const char *key);
/* The text of a scalar, or NULL after reporting why there is none. */
const char *load_scalar(struct loader *ld, yaml_node_t *node,
                        const struct load_path *path);
/* True for a sequence or a null; reports anything else. */
bool load_expect_sequence(struct loader *ld, yaml_node_t *node,
                          const struct load_path *path);
size_t load_sequence_length(const yaml_node_t *node);
yaml_node_t *load_sequence_item(struct loader *ld, const yaml_node_t *node,
                                size_t i);

/* What load_fields() reported, from the least to the worst. */
enum load_outcome {
    LOAD_OK,         /* nothing */
    LOAD_BAD_VALUES, /* the keys were right; a value or a rule was not */
    LOAD_BAD_KEYS,   /* not a mapping, or a key unknown, repeated, not a
                        scalar or required and absent */
};

/*
 * Fills the struct at 'base' from the mapping 'node' by the table 't',
 * then checks t->check's rules (load.c).
 */
enum load_outcome load_fields(struct loader *ld, yaml_node_t *node,
                              const struct load_path *path,
                              const struct table *t, void *base);

/* ------------------------------------------------------------------ */
/* Scalar syntaxes and shared field parsers (load_value.c)             */

static inline void *
field_ptr(void *base, const struct field *f)
{
    return (char *)base + f->offset;
}

/*
 * The largest duration (in ms), size (in bytes) or count gateway.yaml
 * takes: 2^53, so that each is exact in the Lua scripts' doubles and in
 * JSON (GET /routes), and sums and products of them with a clock or a
 * small factor stay within 64 bits, signed.
 */
#define LOAD_NUMBER_MAX (1ULL << 53)

int load_decimal(const char *s, size_t n, uint64_t max, uint64_t *out);
/* "host[:port]" or "[v6][:port]"; NULL, or why the text is wrong. */
const char *load_split_host_port(const char *s, size_t n, bool need_port,
                                 char **host, uint16_t *port);
/* Route ids, limiter and scope names: letters, digits, '_', '.', '-'. */
bool load_valid_name(const char *s);
/* Cuts blanks from both ends of 's', in place. */
char *load_trim(char *s);

/* Numbers and booleans must be plain scalars: '4' is a string. */
field_parse_cb load_uint;         /* unsigned in [min, max] */
field_parse_cb load_uint_or_auto; /* same, or "auto" stored as 0 */
field_parse_cb load_duration;     /* uint64_t ms, min to LOAD_NUMBER_MAX */
field_parse_cb load_size;         /* uint64_t bytes, min to LOAD_NUMBER_MAX */
field_parse_cb load_node;         /* the node itself, for the caller */
field_parse_cb load_count;        /* uint64_t, min to LOAD_NUMBER_MAX */
field_parse_cb load_bool;         /* YAML 1.1 booleans */
field_parse_cb load_text;         /* char *, owned: a non-empty string */
field_parse_cb load_token;        /* char *, owned: a header or cookie
                                     name (RFC 9110 token) */
field_parse_cb load_enum;         /* int, a word of f->choices */
field_parse_cb load_table;        /* a struct, by the table f->table */

/* Stores the value of the word in '*out'; false after reporting. */
bool load_choice(struct loader *ld, yaml_node_t *node,
                 const struct load_path *path, const struct choices *c,
                 int *out);

/* ------------------------------------------------------------------ */
/* Sections, in the order load.c reads them                           */

extern const struct table load_server_table;   /* load_server.c */
extern const struct table load_admin_table;    /* load_server.c */
extern const struct table load_redis_table;    /* load_redis.c */
extern const struct table load_upstream_table; /* load_server.c */
/* upstream.tls and a route's tls: (struct upstream_tls). */
extern const struct table load_upstream_tls_table; /* load_server.c */
extern const struct table load_identity_table;     /* load_server.c */

/* Whose a request field is when the gateway forwards it (load_server.c). */
enum load_field_owner {
    LOAD_FIELD_FREE, /* the filters' and the client's */
    LOAD_FIELD_HOST, /* Host: the route's uri, or SetRequestHostHeader */
    LOAD_FIELD_SET,  /* Content-Length, Expect, X-Forwarded-For, -Proto,
                        -Host (either spelling, '-' or '_'): the gateway
                        writes or drops it */
    LOAD_FIELD_HOP,  /* hop-by-hop: never forwarded */
};
enum load_field_owner load_request_field(const char *name);

/* What load_read_file() found. */
enum load_read {
    LOAD_READ_OK,      /* '*buf' (the caller's to free) and '*len' hold it */
    LOAD_READ_ERROR,   /* 'why' says: "cannot read: " and strerror's text,
                          or the kind of file and ", not a regular file" */
    LOAD_READ_TOO_BIG, /* more than 'max' bytes: '*size' is how many fstat
                          said, or -1 when it grew past while read */
};

/*
 * Reads the whole of 'path' when it is a regular file (through symlinks)
 * of at most 'max' bytes. It is opened without waiting on a FIFO: the
 * loader runs on the thread that serves /health, reloads and the
 * signals. For the config file and the key files it names.
 */
enum load_read load_read_file(const char *path, size_t max, char **buf,
                              size_t *len, long long *size, char *why,
                              size_t whylen);

/*
 * Reports at 'node' ('path') the listener 'which' ("server.listen",
 * "server.tls.listen" or "admin.listen") when it would bind one port of
 * one address with another listener that is on, which start-up would
 * find only then (load_server.c). Each listener's own check compares it
 * alone, so that one clash is told once.
 */
void load_check_listeners(struct loader *ld, yaml_node_t *node,
                          const struct load_path *path, const char *which);
field_parse_cb load_identity_jwt;         /* load_identity.c */
field_parse_cb load_limiters;             /* load_limiters.c */
extern const struct table load_log_table; /* load_server.c */
field_parse_cb load_routes;               /* load_routes.c */
field_parse_cb load_scg_section;          /* load_ratelimiter.c: scg: */
/* spring.cloud.gateway.filter.request-rate-limiter: the defaults of every
 * RequestRateLimiter of the file (load_ratelimiter.c). */
field_parse_cb load_scg_rrl_defaults;

/* sluice's own sections but routes: the value of sluice: in a Spring
 * Cloud Gateway file (load.c). */
extern const struct table load_sluice_table;

/* A file in Spring Cloud Gateway's shape, from its root (load_scg.c). */
void load_scg(struct loader *ld, yaml_node_t *root);

/* redis: fields that the Spring shape reuses (load_redis.c). */
field_parse_cb load_redis_url;   /* redis://... into a redis_conf */
field_parse_cb load_master_name; /* Sentinel's name of the primary */

/*
 * spring.cloud.gateway.routes: the routes of 'node', each with the
 * filters of 'defaults' (default-filters, or NULL) before its own,
 * the uri's path ignored, sorted by order (load_routes.c).
 */
void load_scg_routes(struct loader *ld, yaml_node_t *node,
                     const struct load_path *path, yaml_node_t *defaults,
                     const struct load_path *defaults_path);

/* Names the limiters built from redis-rate-limiter args after their
 * place among the route's rate limiters: "scg.<id>", "scg.<id>.<i>". */
void load_name_derived(struct route *route);

/* scg.services: { name: http://host[:port] }, the addresses that
 * "lb://name" stands for (load_routes.c). */
field_parse_cb load_scg_services;

/* The tag of a limiter whose rules are set (load_limiters.c). */
void load_limiter_tag(struct limiter_def *def);

/*
 * A RequestRateLimiter, an item of a route's filters: (load_ratelimiter.c).
 * load_rate_limiter() returns its conf, which the caller owns and frees
 * with rate_limit_conf_free(), or NULL after reporting why; 'path' names
 * the item of filters: in messages.
 */
bool load_is_rate_limiter(struct loader *ld, yaml_node_t *node);
struct rate_limit_conf *load_rate_limiter(struct loader *ld, yaml_node_t *node,
                                          const struct load_path *path,
                                          const struct route *route);

#endif
