#include "tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "config.h"
#include "log.h"
#include "metrics.h"
#include "xmalloc.h"

/* The only protocol the listener speaks, as ALPN spells it. */
/* ALPN, in its wire form: what the gateway asks of upstreams, and what the
 * listener speaks, preferred first (HTTP/1.0 as on plain connections). */
static const unsigned char alpn_http11[] = "\x08http/1.1";
static const unsigned char alpn_listener[] = "\x08http/1.1\x08http/1.0";

struct tls_client {
    SSL_CTX *ctx;   /* owned */
    bool verify;    /* the context checks the peer */
    char *key;      /* the settings as one string; owned */
    char *pool_key; /* 'key' and a digest of its files' content; owned */
};

struct tls_server {
    SSL_CTX *ctx; /* owned */
};

struct tls_set {
    struct tls_server *server;  /* the listener's, or NULL; owned */
    struct tls_client **uniq;   /* one per distinct setting; owned */
    size_t nuniq;               /* entries in 'uniq' */
    size_t cap;                 /* slots in 'uniq' */
    struct tls_client **routes; /* per route: into 'uniq', or NULL;
                                   owned array */
};

/* SSL ex_data: the owner's pointer of a client connection; whether a
 * server connection's handshake has been counted. */
static int app_index = -1;
static int counted_index = -1;
static _Atomic(tls_session_cb) session_cb; /* every worker sets the same */
static _Thread_local struct metrics_shard *thread_metrics;

static void
indexes_init(void)
{
    /* tls_attach() runs on the main thread before any worker exists. */
    if (app_index < 0) {
        app_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
        counted_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
    }
}

/* OpenSSL's oldest queued error as a sentence, or 'dflt'. */
static void
ssl_error(char *buf, size_t len, const char *dflt)
{
    unsigned long e = ERR_peek_last_error();

    if (e == 0) {
        snprintf(buf, len, "%s", dflt);
    } else {
        ERR_error_string_n(e, buf, len);
    }
    ERR_clear_error();
}

void
tls_thread_metrics(struct metrics_shard *shard)
{
    thread_metrics = shard;
}

void
tls_count(enum tls_side side, enum tls_result result)
{
    static const char *const sides[] = {"client", "upstream"};
    static const char *const results[] = {"ok", "failed", "verify_failed"};
    const char *labels[2] = {sides[side], results[result]};

    if (thread_metrics != NULL) {
        metrics_add(thread_metrics, M_TLS_HANDSHAKES, labels, 1);
    }
}

/* A context of 'method' for TLS 1.2 and up; NULL with 'why' set. */
static SSL_CTX *
ctx_new(const SSL_METHOD *method, char *why, size_t len)
{
    SSL_CTX *ctx = SSL_CTX_new(method);
    char err[200];

    if (ctx == NULL) {
        ssl_error(err, sizeof(err), "out of memory");
        snprintf(why, len, "cannot create a TLS context: %s", err);
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    return ctx;
}

/*
 * NULL when 'path' names a regular file this process can open, else why
 * not (strerror's text, or "not a regular file"; static). Asked before
 * OpenSSL opens it: OpenSSL's own error for a missing file is "system
 * lib", and its open of a FIFO would block the thread that loads the
 * config (the main one, which serves /health and the signals).
 */
static const char *
file_problem(const char *path)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    bool regular;

    if (fd < 0) {
        return strerror(errno);
    }
    regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    close(fd);
    return regular ? NULL : "not a regular file";
}

/* Loads a certificate chain and its key into 'ctx'; -1 with 'why' set. */
static int
ctx_use_pair(SSL_CTX *ctx, const char *cert, const char *key, char *why,
             size_t len)
{
    char err[200];
    const char *bad;

    if ((bad = file_problem(cert)) != NULL) {
        snprintf(why, len, "cert_file: cannot load \"%s\": %s", cert, bad);
        return -1;
    }
    if ((bad = file_problem(key)) != NULL) {
        snprintf(why, len, "key_file: cannot load \"%s\": %s", key, bad);
        return -1;
    }
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
        ssl_error(err, sizeof(err), "no certificate");
        snprintf(why, len, "cert_file: cannot load \"%s\": %s", cert, err);
        return -1;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
        ssl_error(err, sizeof(err), "no key");
        snprintf(why, len, "key_file: cannot load \"%s\": %s", key, err);
        return -1;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        ssl_error(err, sizeof(err), "mismatch");
        snprintf(why, len, "key_file: \"%s\" is not the key of \"%s\": %s", key,
                 cert, err);
        return -1;
    }
    return 0;
}

/* ---- the listener ---- */

/* Counts a listener handshake once: done, or ended by a fatal alert. */
static void
on_server_info(const SSL *ssl, int where, int ret)
{
    enum tls_result result;

    if (where & SSL_CB_HANDSHAKE_DONE) {
        result = TLS_OK;
    } else if ((where & SSL_CB_ALERT) && (where & SSL_CB_WRITE) &&
               (ret >> 8) == SSL3_AL_FATAL && !SSL_is_init_finished(ssl)) {
        result = TLS_FAILED;
    } else {
        return;
    }
    /* TLS 1.3 reports "done" again after its session tickets. */
    if (SSL_get_ex_data(ssl, counted_index) != NULL) {
        return;
    }
    SSL_set_ex_data((SSL *)ssl, counted_index, (void *)1);
    tls_count(TLS_SIDE_CLIENT, result);
}

static int
on_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen,
        const unsigned char *in, unsigned inlen, void *arg)
{
    unsigned char *sel;

    (void)ssl;
    (void)arg;
    if (SSL_select_next_proto(&sel, outlen, alpn_listener,
                              sizeof(alpn_listener) - 1, in,
                              inlen) != OPENSSL_NPN_NEGOTIATED) {
        /* A client that offers only h2 is refused, not misled. */
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    }
    *out = sel;
    return SSL_TLSEXT_ERR_OK;
}

static struct tls_server *
server_new(const struct server_tls_conf *t, char *why, size_t len)
{
    SSL_CTX *ctx = ctx_new(TLS_server_method(), why, len);
    struct tls_server *s;

    if (ctx == NULL) {
        return NULL;
    }
    SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION |
                                 SSL_OP_CIPHER_SERVER_PREFERENCE);
    if (ctx_use_pair(ctx, t->cert_file, t->key_file, why, len) < 0) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    SSL_CTX_set_alpn_select_cb(ctx, on_alpn, NULL);
    SSL_CTX_set_info_callback(ctx, on_server_info);
    s = xcalloc(1, sizeof(*s));
    s->ctx = ctx;
    return s;
}

struct bufferevent *
tls_server_bev_new(struct tls_server *s, struct event_base *base)
{
    SSL *ssl = SSL_new(s->ctx);
    struct bufferevent *bev;

    if (ssl == NULL) {
        ERR_clear_error();
        return NULL;
    }
    /* With CLOSE_ON_FREE, freeing the bufferevent frees the SSL and
     * closes the socket; evhttp then closes nothing itself. */
    bev = bufferevent_openssl_socket_new(
        base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
    if (bev == NULL) {
        return NULL;
    }
    /* A client that closes without close_notify has ended its requests
     * all the same: an end, not an error. */
    bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
    return bev;
}

static _Atomic(tls_read_cb *) read_cb; /* every worker sets the same */

/* A BIO callback: after a read from the socket that brought bytes. */
static long
on_socket_read(BIO *b, int oper, const char *argp, size_t len, int argi,
               long argl, int ret, size_t *processed)
{
    tls_read_cb *cb = atomic_load(&read_cb);
    void *arg;

    (void)argp;
    (void)len;
    (void)argi;
    (void)argl;
    if (oper == (BIO_CB_READ | BIO_CB_RETURN) && ret > 0 && processed != NULL &&
        *processed > 0 && cb != NULL &&
        (arg = BIO_get_callback_arg(b)) != NULL) {
        cb(arg);
    }
    return ret;
}

void
tls_server_watch_reads(struct bufferevent *bev, tls_read_cb *cb, void *arg)
{
    SSL *ssl = bufferevent_openssl_get_ssl(bev);
    BIO *rbio = ssl != NULL ? SSL_get_rbio(ssl) : NULL;

    if (rbio == NULL) {
        return;
    }
    if (cb != NULL) {
        atomic_store(&read_cb, cb);
    }
    BIO_set_callback_arg(rbio, cb != NULL ? arg : NULL);
    BIO_set_callback_ex(rbio, cb != NULL ? on_socket_read : NULL);
}

bool
tls_client_error(struct bufferevent *bev, char *why, size_t len)
{
    unsigned long e;
    const char *reason = NULL;

    /* libevent also keeps bare SSL_ERROR_* codes there (SSL_ERROR_SYSCALL
     * for a reset), with no library, and system errors have no reason
     * text: those name nothing, errno does. */
    while ((e = bufferevent_get_openssl_error(bev)) != 0) {
        if (reason == NULL && ERR_GET_LIB(e) != 0) {
            reason = ERR_reason_error_string(e);
        }
    }
    if (reason == NULL) {
        return false;
    }
    snprintf(why, len, "TLS: %s", reason);
    return true;
}

bool
tls_server_got_plain_http(struct bufferevent *bev)
{
    unsigned long e;
    bool plain = false;

    while ((e = bufferevent_get_openssl_error(bev)) != 0) {
        plain = plain || (ERR_GET_LIB(e) == ERR_LIB_SSL &&
                          ERR_GET_REASON(e) == SSL_R_HTTP_REQUEST);
    }
    return plain;
}

void
tls_close_notify(struct bufferevent *bev)
{
    SSL *ssl = bufferevent_openssl_get_ssl(bev);

    if (ssl == NULL || !SSL_is_init_finished(ssl) ||
        evbuffer_get_length(bufferevent_get_output(bev)) > 0) {
        return;
    }
    /* The first call sends it, and returns without waiting for the
     * peer's; a socket that cannot take it (reset, dissolved) fails it. */
    (void)SSL_shutdown(ssl);
    ERR_clear_error();
}

/* ---- upstreams ---- */

static int
on_new_session(SSL *ssl, SSL_SESSION *sess)
{
    void *app = SSL_get_ex_data(ssl, app_index);
    tls_session_cb cb = atomic_load(&session_cb);

    if (app == NULL || cb == NULL) {
        return 0; /* not kept: OpenSSL frees it */
    }
    cb(app, sess);
    return 1;
}

void
tls_set_session_cb(tls_session_cb cb)
{
    atomic_store(&session_cb, cb);
}

void
tls_session_free(struct ssl_session_st *session)
{
    SSL_SESSION_free(session);
}

static char *
client_key(const struct upstream_tls *t)
{
    return xasprintf("verify=%d ca=%s cert=%s key=%s", t->verify ? 1 : 0,
                     t->ca_file != NULL ? t->ca_file : "-",
                     t->cert_file != NULL ? t->cert_file : "-",
                     t->key_file != NULL ? t->key_file : "-");
}

/* Adds the content of file 'path' (NULL: none) to 'md', and its length,
 * so that no two sets of files read alike. */
static void
digest_file(EVP_MD_CTX *md, const char *path)
{
    unsigned char buf[4096];
    FILE *f = path != NULL ? fopen(path, "rb") : NULL;
    uint64_t total = 0;
    size_t n;

    EVP_DigestUpdate(md, f != NULL ? "+" : "-", 1);
    if (f == NULL) {
        return;
    }
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
        EVP_DigestUpdate(md, buf, n);
        total += n;
    }
    fclose(f);
    OPENSSL_cleanse(buf, sizeof(buf)); /* a private key's bytes, maybe */
    EVP_DigestUpdate(md, &total, sizeof(total));
}

/* The system's CA bundle, as SSL_CTX_set_default_verify_paths() finds it. */
static const char *
system_ca_file(void)
{
    const char *env = getenv(X509_get_default_cert_file_env());

    return env != NULL ? env : X509_get_default_cert_file();
}

/*
 * A digest of the content of the files that 't' names (the system's CA
 * bundle where it verifies without a ca_file), as hex in 'hex' (33
 * bytes).
 */
static void
files_digest(const struct upstream_tls *t, char *hex)
{
    static const char digits[] = "0123456789abcdef";
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int dlen = 0;
    EVP_MD_CTX *md = EVP_MD_CTX_new();

    if (md == NULL || !EVP_DigestInit_ex(md, EVP_sha256(), NULL)) {
        fprintf(stderr, "sluice: cannot start SHA-256\n");
        abort();
    }
    digest_file(md, !t->verify           ? NULL
                    : t->ca_file != NULL ? t->ca_file
                                         : system_ca_file());
    digest_file(md, t->cert_file);
    digest_file(md, t->key_file);
    EVP_DigestFinal_ex(md, d, &dlen);
    EVP_MD_CTX_free(md);
    for (unsigned i = 0; i < 16 && i < dlen; i++) {
        hex[2 * i] = digits[d[i] >> 4];
        hex[2 * i + 1] = digits[d[i] & 15];
    }
    hex[32] = '\0';
}

/* Numbers the contexts whose files changed while they were read. */
static _Atomic unsigned long long raced;

/*
 * The pool key of settings 'key': with the digest of the files' content,
 * taken before ('before') and after the context read them, so that a file
 * replaced at the same path makes another pool, and a reload that changed
 * nothing keeps the pools it had. A file replaced while the context read
 * it leaves the digest unsure of what it read: such a context gets a pool
 * no other shares.
 */
static char *
pool_key_of(const char *key, const struct upstream_tls *t, const char *before)
{
    char after[33];

    files_digest(t, after);
    if (strcmp(before, after) != 0) {
        return xasprintf("%s raced=%llu", key, ++raced);
    }
    return xasprintf("%s sha256=%s", key, after);
}

static struct tls_client *
client_new(const struct upstream_tls *t, char *why, size_t len)
{
    SSL_CTX *ctx = ctx_new(TLS_client_method(), why, len);
    struct tls_client *c;
    char err[200], before[33];
    const char *bad;

    if (ctx == NULL) {
        return NULL;
    }
    files_digest(t, before);
    if (t->verify && t->ca_file != NULL &&
        (bad = file_problem(t->ca_file)) != NULL) {
        snprintf(why, len, "ca_file: cannot load \"%s\": %s", t->ca_file, bad);
        SSL_CTX_free(ctx);
        return NULL;
    }
    if (t->verify) {
        int ok = t->ca_file != NULL
                     ? SSL_CTX_load_verify_locations(ctx, t->ca_file, NULL)
                     : SSL_CTX_set_default_verify_paths(ctx);

        if (ok != 1) {
            ssl_error(err, sizeof(err), "no certificate in it");
            snprintf(why, len, "ca_file: cannot load \"%s\": %s",
                     t->ca_file != NULL ? t->ca_file : "(system store)", err);
            SSL_CTX_free(ctx);
            return NULL;
        }
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    } else {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    }
    if (t->cert_file != NULL &&
        ctx_use_pair(ctx, t->cert_file, t->key_file, why, len) < 0) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    SSL_CTX_set_alpn_protos(ctx, alpn_http11, sizeof(alpn_http11) - 1);
    /* Sessions go to the connection's pool (upstream.c), not a cache
     * inside the context that every worker would share. */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT |
                                            SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(ctx, on_new_session);
    c = xcalloc(1, sizeof(*c));
    c->ctx = ctx;
    c->verify = t->verify;
    c->key = client_key(t);
    c->pool_key = pool_key_of(c->key, t, before);
    return c;
}

static void
client_free(struct tls_client *c)
{
    SSL_CTX_free(c->ctx);
    free(c->key);
    free(c->pool_key);
    free(c);
}

const char *
tls_client_key(const struct tls_client *c)
{
    return c->pool_key;
}

struct bufferevent *
tls_client_bev_new(struct tls_client *c, struct event_base *base,
                   const char *host, struct ssl_session_st *session, void *app)
{
    SSL *ssl = SSL_new(c->ctx);
    unsigned char addr[16];
    bool literal = inet_pton(AF_INET, host, addr) == 1 ||
                   inet_pton(AF_INET6, host, addr) == 1;
    struct bufferevent *bev;

    if (ssl == NULL) {
        ERR_clear_error();
        return NULL;
    }
    /* RFC 6066 3: no address literal in SNI. */
    if (!literal) {
        SSL_set_tlsext_host_name(ssl, host);
    }
    if (c->verify) {
        X509_VERIFY_PARAM *param = SSL_get0_param(ssl);

        X509_VERIFY_PARAM_set_hostflags(param,
                                        X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        if (literal) {
            X509_VERIFY_PARAM_set1_ip_asc(param, host);
        } else {
            X509_VERIFY_PARAM_set1_host(param, host, 0);
        }
    }
    if (session != NULL) {
        SSL_set_session(ssl, session);
    }
    SSL_set_ex_data(ssl, app_index, app);
    bev = bufferevent_openssl_socket_new(
        base, -1, ssl, BUFFEREVENT_SSL_CONNECTING,
        BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
    if (bev == NULL) {
        return NULL;
    }
    /* A response that ends with the connection (no length, no chunks)
     * is whole only if close_notify ends it (RFC 9112 9.8): a bare FIN
     * may be a cut made on the way. Without close_notify the end is an
     * error, which cuts such a response; OpenSSL 3 reports it so anyway
     * (unexpected EOF), OpenSSL 1.1.1 only with this off. */
    bufferevent_openssl_set_allow_dirty_shutdown(bev, 0);
    return bev;
}

void
tls_client_bev_detach(struct bufferevent *bev)
{
    SSL *ssl = bufferevent_openssl_get_ssl(bev);

    if (ssl != NULL) {
        SSL_set_ex_data(ssl, app_index, NULL);
    }
}

enum tls_failure
tls_client_failure(struct bufferevent *bev, char *why, size_t len)
{
    SSL *ssl = bufferevent_openssl_get_ssl(bev);
    BIO *wbio = ssl != NULL ? SSL_get_wbio(ssl) : NULL;
    unsigned long e = bufferevent_get_openssl_error(bev);
    long vr;

    if (ssl == NULL || wbio == NULL || BIO_number_written(wbio) == 0) {
        /* Not even the ClientHello went out: TCP never connected. */
        snprintf(why, len, "cannot connect");
        return TLS_FAILED_CONNECT;
    }
    vr = SSL_get_verify_result(ssl);
    if (SSL_get_verify_mode(ssl) != SSL_VERIFY_NONE && vr != X509_V_OK) {
        snprintf(why, len, "certificate verify failed: %s",
                 X509_verify_cert_error_string(vr));
        return TLS_FAILED_VERIFY;
    }
    if (e != 0) {
        char err[200];

        ERR_error_string_n(e, err, sizeof(err));
        snprintf(why, len, "TLS handshake failed: %s", err);
    } else {
        snprintf(why, len, "TLS handshake failed: connection closed");
    }
    /* The rest of this connection's errors: none is wanted later. */
    while (bufferevent_get_openssl_error(bev) != 0) {
    }
    return TLS_FAILED_HANDSHAKE;
}

bool
tls_resumed(struct bufferevent *bev)
{
    SSL *ssl = bufferevent_openssl_get_ssl(bev);

    return ssl != NULL && SSL_session_reused(ssl) == 1;
}

void
tls_take_pending(struct bufferevent *bev)
{
    SSL *ssl = bufferevent_openssl_get_ssl(bev);
    struct evbuffer *in = bufferevent_get_input(bev);
    int n;

    while (ssl != NULL && (n = SSL_pending(ssl)) > 0) {
        struct evbuffer_iovec v;
        int r;

        if (evbuffer_reserve_space(in, n, &v, 1) != 1) {
            break;
        }
        /* Bytes of a record already decrypted: SSL_read() does no I/O. */
        r = SSL_read(ssl, v.iov_base, n);
        if (r <= 0) {
            break;
        }
        v.iov_len = (size_t)r;
        evbuffer_commit_space(in, &v, 1);
    }
}

/* ---- the set of a config ---- */

static void
tls_set_free(struct tls_set *set)
{
    if (set == NULL) {
        return;
    }
    if (set->server != NULL) {
        SSL_CTX_free(set->server->ctx);
        free(set->server);
    }
    for (size_t i = 0; i < set->nuniq; i++) {
        client_free(set->uniq[i]);
    }
    free(set->uniq);
    free(set->routes);
    free(set);
}

/* The client of setting 't', made on first sight; NULL after an error. */
static struct tls_client *
set_client(struct tls_set *set, const struct upstream_tls *t, char *why,
           size_t len)
{
    char *key = client_key(t);
    struct tls_client *c;

    for (size_t i = 0; i < set->nuniq; i++) {
        if (strcmp(set->uniq[i]->key, key) == 0) {
            free(key);
            return set->uniq[i];
        }
    }
    free(key);
    if ((c = client_new(t, why, len)) == NULL) {
        return NULL;
    }
    set->uniq = xgrow(set->uniq, &set->cap, set->nuniq + 1, sizeof(*set->uniq));
    set->uniq[set->nuniq++] = c;
    return c;
}

/* "file:line:col: what" as the loader reports, or "file: what" when the
 * keys are not in the file; takes 'what'. */
static char *
at_error(const struct config *cfg, const struct conf_pos *at, char *what)
{
    char *s = at->line > 0 ? xasprintf("%s:%u:%u: %s", cfg->path, at->line,
                                       at->col, what)
                           : xasprintf("%s: %s", cfg->path, what);

    free(what);
    return s;
}

int
tls_attach(struct config *cfg, struct config_errors *errs)
{
    struct tls_set *set = xcalloc(1, sizeof(*set));
    char why[512];
    bool bad = false, upstream_told = false;

    indexes_init();
    if (cfg->server.tls.enabled) {
        set->server = server_new(&cfg->server.tls, why, sizeof(why));
        if (set->server == NULL) {
            config_errors_add(errs, at_error(cfg, &cfg->server.tls.at,
                                             xasprintf("server.tls.%s", why)));
            bad = true;
        }
    }
    set->routes = xcalloc(cfg->nroutes + 1, sizeof(*set->routes));
    for (size_t i = 0; i < cfg->nroutes; i++) {
        const struct route *r = &cfg->routes[i];
        /* A route without a tls: of its own has upstream.tls's: an error
         * in it is that one's, told once, not once per https route. */
        bool inherited = cfg->upstream.tls.at.line > 0 &&
                         r->tls.at.line == cfg->upstream.tls.at.line &&
                         r->tls.at.col == cfg->upstream.tls.at.col;

        if (!r->uri.https) {
            continue;
        }
        set->routes[i] = set_client(set, &r->tls, why, sizeof(why));
        if (set->routes[i] == NULL && inherited && !upstream_told) {
            config_errors_add(
                errs,
                at_error(cfg, &r->tls.at, xasprintf("upstream.tls.%s", why)));
            upstream_told = true;
        } else if (set->routes[i] == NULL && !inherited) {
            config_errors_add(
                errs, at_error(cfg, &r->tls.at,
                               xasprintf("routes[%zu].tls.%s", i, why)));
        }
        bad |= set->routes[i] == NULL;
    }
    if (bad) {
        tls_set_free(set);
        return -1;
    }
    for (size_t i = 0; i < cfg->nroutes; i++) {
        const struct route *r = &cfg->routes[i];

        if (r->uri.https && !r->tls.verify) {
            log_warn("tls: route %s: https://%s:%u is not verified "
                     "(tls.verify: false): anyone on the path can pose as it",
                     r->id, r->uri.host, r->uri.port);
        }
    }
    if (cfg->tls != NULL) {
        cfg->tls_free(cfg->tls);
    }
    cfg->tls = set;
    cfg->tls_free = tls_set_free;
    return 0;
}

struct tls_client *
tls_route_client(const struct config *cfg, size_t i)
{
    return cfg->tls != NULL && i < cfg->nroutes ? cfg->tls->routes[i] : NULL;
}

struct tls_server *
tls_listener(const struct config *cfg)
{
    return cfg->tls != NULL ? cfg->tls->server : NULL;
}
