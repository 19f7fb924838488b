/*
 * load_identity.c - identity.jwt of gateway.yaml: where the token is,
 * the algorithms, the key, the claims checked and the claims that name
 * the user and the role, into a jwtcheck_conf (jwtcheck.h) whose
 * verifier is built here. Reads the key file: a reload reads it again,
 * which is how a key is rotated.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "jwtcheck.h"
#include "load.h"
#include "xmalloc.h"

/* A key file larger than this is not a key. */
#define KEY_FILE_MAX (64 * 1024)

/* identity.jwt while it is read: the conf, and the nodes its rules
 * report at. */
struct jwt_form {
    struct jwtcheck_conf conf; /* moved to the heap when read */
    yaml_node_t *algorithms;   /* as written, or NULL; borrowed */
    yaml_node_t *key_file;     /* the same */
    yaml_node_t *secret_file;  /* the same */
    yaml_node_t *cookie;       /* the same */
};

static void
parse_cookie(struct loader *ld, yaml_node_t *node, const struct field *f,
             void *base, const struct load_path *path)
{
    struct jwt_form *form = base;

    form->cookie = node;
    load_token(ld, node, f, base, path);
}

static void
parse_file(struct loader *ld, yaml_node_t *node, const struct field *f,
           void *base, const struct load_path *path)
{
    struct jwt_form *form = base;

    if (f->offset == offsetof(struct jwt_form, conf.key_file)) {
        form->key_file = node;
    } else {
        form->secret_file = node;
    }
    load_text(ld, node, f, base, path);
}

static void
parse_algorithms(struct loader *ld, yaml_node_t *node, const struct field *f,
                 void *base, const struct load_path *path)
{
    struct jwt_form *form = base;
    size_t n = load_sequence_length(node);

    (void)f;
    form->algorithms = node;
    if (!load_expect_sequence(ld, node, path)) {
        return;
    }
    if (n == 0) {
        report(ld, node, path,
               "empty (expected one or more of HS256, HS384, HS512, RS256, "
               "RS384, RS512, ES256, ES384, ES512)");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *item = load_sequence_item(ld, node, i);
        const struct load_path *sub = PATH_INDEX(path, i);
        const char *s = load_scalar(ld, item, sub);
        unsigned bit;

        if (s == NULL) {
            continue;
        }
        bit = jwtcheck_alg_parse(s);
        if (bit == 0) {
            report(ld, item, sub,
                   "%s algorithm \"%s\" (expected HS256, HS384, HS512, "
                   "RS256, RS384, RS512, ES256, ES384 or ES512)",
                   strcasecmp(s, "none") == 0 ? "refused" : "unknown", s);
            continue;
        }
        form->conf.algorithms |= bit;
    }
}

/* Reads the key and builds the verifier; reports at the file's node. */
static void
build_verifier(struct loader *ld, struct jwt_form *form,
               const struct load_path *path)
{
    struct jwtcheck_conf *c = &form->conf;
    bool secret = c->secret_file != NULL;
    yaml_node_t *node = secret ? form->secret_file : form->key_file;
    const struct load_path *sub =
        PATH_KEY(path, secret ? "secret_file" : "key_file");
    const char *file = secret ? c->secret_file : c->key_file;
    char *text = NULL;
    unsigned char *key;
    size_t len = 0, read_len;
    long long size;
    char why[256];

    switch (load_read_file(file, KEY_FILE_MAX, &text, &len, &size, why,
                           sizeof(why))) {
    case LOAD_READ_OK:
        break;
    case LOAD_READ_ERROR:
        report(ld, node, sub, "\"%s\": %s", file, why);
        return;
    case LOAD_READ_TOO_BIG:
        report(ld, node, sub, "\"%s\": larger than %d bytes: not a key", file,
               KEY_FILE_MAX);
        return;
    }
    key = (unsigned char *)text;
    read_len = len;
    /* A secret written with echo ends with a newline that is not part of
     * it. */
    while (secret && len > 0 &&
           (key[len - 1] == '\n' || key[len - 1] == '\r')) {
        len--;
    }
    if (len == 0) {
        report(ld, node, sub, "\"%s\": the file is empty", file);
    } else {
        c->verifier = jwtcheck_new(c, key, len, why, sizeof(why));
        if (c->verifier == NULL) {
            report(ld, node, sub, "\"%s\": %s", file, why);
        }
    }
    /* The secret must not linger in freed memory, its newline neither. */
    memset(key, 0, read_len);
    free(key);
}

static void
check_jwt(struct loader *ld, yaml_node_t *node, const struct load_path *path,
          void *base)
{
    struct jwt_form *form = base;
    struct jwtcheck_conf *c = &form->conf;
    unsigned a = c->algorithms;

    if (c->header != NULL && c->cookie != NULL) {
        report(ld, form->cookie, PATH_KEY(path, "cookie"),
               "header and cookie are exclusive: the token comes from one");
        return;
    }
    if (c->key_file != NULL && c->secret_file != NULL) {
        report(ld, form->secret_file, PATH_KEY(path, "secret_file"),
               "key_file and secret_file are exclusive");
        return;
    }
    if (c->key_file == NULL && c->secret_file == NULL) {
        report(ld, node, PATH_KEY(path, "key_file"),
               "required (or secret_file, for HS256, HS384, HS512)");
        return;
    }
    if ((a & JWTCHECK_HMAC) != 0 && (a & ~JWTCHECK_HMAC) != 0) {
        report(ld, form->algorithms, PATH_KEY(path, "algorithms"),
               "HS algorithms cannot be mixed with RS or ES ones (one key "
               "cannot be both a secret and a public key)");
        return;
    }
    if ((a & JWTCHECK_RSA) != 0 && (a & JWTCHECK_EC) != 0) {
        report(ld, form->algorithms, PATH_KEY(path, "algorithms"),
               "RS and ES algorithms cannot share one key");
        return;
    }
    if ((a & JWTCHECK_HMAC) != 0 && c->secret_file == NULL) {
        report(ld, form->key_file, PATH_KEY(path, "key_file"),
               "HS algorithms take a secret_file, not a key_file");
        return;
    }
    if ((a & JWTCHECK_HMAC) == 0 && c->secret_file != NULL) {
        report(ld, form->secret_file, PATH_KEY(path, "secret_file"),
               "RS and ES algorithms take a key_file (a PEM public key), not "
               "a secret_file");
        return;
    }
    build_verifier(ld, form, path);
}

static const struct field jwt_fields[] = {
    {.key = "header",
     .parse = load_token,
     .offset = offsetof(struct jwt_form, conf.header)},
    {.key = "cookie",
     .parse = parse_cookie,
     .offset = offsetof(struct jwt_form, conf.cookie)},
    {.key = "algorithms", .parse = parse_algorithms, .required = true},
    {.key = "key_file",
     .parse = parse_file,
     .offset = offsetof(struct jwt_form, conf.key_file)},
    {.key = "secret_file",
     .parse = parse_file,
     .offset = offsetof(struct jwt_form, conf.secret_file)},
    {.key = "issuer",
     .parse = load_text,
     .offset = offsetof(struct jwt_form, conf.issuer)},
    {.key = "audience",
     .parse = load_text,
     .offset = offsetof(struct jwt_form, conf.audience)},
    /* At most 1h: a longer leeway would believe tokens long expired. */
    {.key = "leeway",
     .parse = load_duration,
     .offset = offsetof(struct jwt_form, conf.leeway_ms),
     .max = 60 * 60 * 1000},
    {.key = "user_claim",
     .parse = load_text,
     .offset = offsetof(struct jwt_form, conf.user_claim)},
    {.key = "role_claim",
     .parse = load_text,
     .offset = offsetof(struct jwt_form, conf.role_claim)},
    {.key = "required",
     .parse = load_bool,
     .offset = offsetof(struct jwt_form, conf.required)},
    {.key = "cache",
     .parse = load_bool,
     .offset = offsetof(struct jwt_form, conf.cache)},
};

static const struct table jwt_table = {
    .fields = jwt_fields,
    .n = NELEMS(jwt_fields),
    .check = check_jwt,
};

void
load_identity_jwt(struct loader *ld, yaml_node_t *node, const struct field *f,
                  void *base, const struct load_path *path)
{
    struct identity_conf *id = base;
    struct jwt_form form;

    (void)f;
    memset(&form, 0, sizeof(form));
    form.conf.user_claim = xstrdup("sub");
    form.conf.role_claim = xstrdup("role");
    form.conf.cache = true;
    load_fields(ld, node, path, &jwt_table, &form);
    if (form.conf.header == NULL && form.conf.cookie == NULL) {
        form.conf.header = xstrdup("Authorization");
    }
    /* Kept even when wrong, so that what refers to it (claim: keys and
     * conditions) reports nothing more; the config is freed anyway. */
    jwtcheck_conf_free(id->jwt);
    id->jwt = xmalloc(sizeof(*id->jwt));
    *id->jwt = form.conf;
}
