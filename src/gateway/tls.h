/*
 * tls.h - the gateway's TLS, on OpenSSL and libevent's OpenSSL
 * bufferevents: the listener's server context and one client context per
 * distinct upstream TLS setting, built for a config when it is loaded
 * (tls_attach()), the bufferevents of TLS connections both ways, and the
 * handshake metric. Reads certificate files when a set is built; no
 * sockets of its own. The only gateway module besides upstream.c that
 * includes OpenSSL.
 */
#ifndef SLUICE_TLS_H
#define SLUICE_TLS_H

#include <stdbool.h>
#include <stddef.h>

struct bufferevent;
struct config;
struct config_errors;
struct event_base;
struct metrics_shard;
struct tls_set;        /* opaque: the contexts of one config */
struct tls_client;     /* opaque: one client context (SSL_CTX) and the
                          settings it was made from */
struct tls_server;     /* opaque: the listener's context */
struct ssl_session_st; /* OpenSSL's SSL_SESSION */

/*
 * Builds the contexts 'cfg' needs (the listener's, and one per distinct
 * tls: of its https routes) and attaches them to it (cfg->tls), to be
 * freed with it. Call before the config is shared. Returns 0, or -1 with
 * one line per problem appended to 'errs' ("file: key.path: why"; a
 * certificate and key that do not match, an unreadable file, a CA bundle
 * with no certificate), 'cfg' untouched. Logs a warning per route with
 * verify: false.
 */
int tls_attach(struct config *cfg, struct config_errors *errs);

/* The client context of route 'i' of the config, or NULL: plain http. */
struct tls_client *tls_route_client(const struct config *cfg, size_t i);

/* The listener's context, or NULL when server.tls is off. */
struct tls_server *tls_listener(const struct config *cfg);

/*
 * The pool key of 'c': its settings as one string, and a digest of the
 * content of its CA, certificate and key files as it read them. After a
 * reload that replaced one of them, even at the same path, what was made
 * under the old content (a pooled connection, a session to resume) is
 * never used; after one that changed none, the pools go on. Borrowed
 * from 'c'.
 */
const char *tls_client_key(const struct tls_client *c);

/*
 * Calls 'cb' with 'arg' whenever bytes are read from the socket of 'bev'
 * (a listener's connection, its descriptor set), before OpenSSL has made
 * anything of them: a handshake's first bytes, or a record's, which may
 * come a byte at a time with nothing decrypted for a long while. 'cb'
 * NULL stops it; every caller passes the same 'cb'. 'arg' is borrowed:
 * stop before it goes.
 */
typedef void tls_read_cb(void *arg);
void tls_server_watch_reads(struct bufferevent *bev, tls_read_cb *cb,
                            void *arg);

/*
 * The OpenSSL error that failed the upstream connection 'bev' after its
 * handshake (an alert the upstream sent once it had read our Finished,
 * as a TLS 1.3 server that wants a client certificate does; an end
 * without close_notify), as text in 'why'; false when there is none.
 * Takes the connection's errors.
 */
bool tls_client_error(struct bufferevent *bev, char *why, size_t len);

/*
 * True when the handshake of 'bev' (a listener's connection) failed
 * because the client spoke plain HTTP (OpenSSL's SSL_R_HTTP_REQUEST).
 * Takes the connection's errors.
 */
bool tls_server_got_plain_http(struct bufferevent *bev);

/*
 * Sends close_notify on 'bev', a TLS connection (the listener's, or to
 * an upstream) that is closing with nothing left to write, once its
 * handshake is done: so the peer reads the end as an end (RFC 8446 6.1;
 * RFC 9112 9.8 for a body that ends with the connection), where a cut
 * has none; and OpenSSL keeps the connection's session resumable, which
 * it marks otherwise when the SSL is freed. Does not wait for the peer's;
 * does nothing if the socket cannot take it.
 */
void tls_close_notify(struct bufferevent *bev);

/*
 * A client-side TLS bufferevent (not connected; connect it with
 * bufferevent_socket_connect_hostname()) for 'host' (borrowed): its name
 * goes out as SNI unless it is an address literal, and is checked against
 * the certificate (name or address) when the context verifies. 'session'
 * (borrowed; may be NULL) is offered for resumption. 'app' is kept with the
 * connection for tls_on_session(). Closing frees the SSL and the socket.
 * NULL on failure.
 */
struct bufferevent *
tls_client_bev_new(struct tls_client *c, struct event_base *base,
                   const char *host, struct ssl_session_st *session, void *app);

/*
 * New sessions the upstream hands out (TLS 1.2 at the handshake, 1.3
 * after it) are given to 'cb' with the 'app' of their connection; 'cb'
 * takes ownership of 'session' (release it with tls_session_free()).
 * Set once, before any connection; the same for every context.
 */
typedef void (*tls_session_cb)(void *app, struct ssl_session_st *session);
void tls_set_session_cb(tls_session_cb cb);
void tls_session_free(struct ssl_session_st *session); /* NULL: no-op */

/* Forgets the 'app' of a client bufferevent (its owner is going). */
void tls_client_bev_detach(struct bufferevent *bev);

/* The handshake's outcome on a client bufferevent that failed. */
enum tls_failure {
    TLS_FAILED_CONNECT,   /* no TCP connection: not a TLS matter */
    TLS_FAILED_HANDSHAKE, /* TLS failed: protocol, alert, cut */
    TLS_FAILED_VERIFY,    /* the certificate did not verify */
};

/*
 * Why the handshake on 'bev' failed, with a sentence in 'why' ('len'
 * bytes): X509_verify_cert_error_string() for a certificate, OpenSSL's
 * error otherwise.
 */
enum tls_failure tls_client_failure(struct bufferevent *bev, char *why,
                                    size_t len);

/* Whether the handshake on 'bev' resumed a session. */
bool tls_resumed(struct bufferevent *bev);

/*
 * Moves the plaintext OpenSSL holds for 'bev' (decrypted, not yet read:
 * SSL_pending()) to the end of its input buffer, with no I/O. libevent
 * 2.1's OpenSSL bufferevent leaves such bytes behind when it stops
 * reading at its high watermark, and does not look for them when it reads
 * again: only new bytes on the socket would bring them.
 */
void tls_take_pending(struct bufferevent *bev);

/*
 * A server-side TLS bufferevent for one accepted connection, with no
 * descriptor yet (evhttp sets it): TLS 1.2 and 1.3 only, ALPN
 * http/1.1. Closing frees the SSL and the socket. NULL on failure.
 */
struct bufferevent *tls_server_bev_new(struct tls_server *s,
                                       struct event_base *base);

/*
 * sluice_tls_handshakes_total: handshakes on this thread are counted in
 * 'shard' (borrowed; the worker's), from its own thread.
 */
void tls_thread_metrics(struct metrics_shard *shard);

enum tls_side { TLS_SIDE_CLIENT, TLS_SIDE_UPSTREAM };
enum tls_result { TLS_OK, TLS_FAILED, TLS_VERIFY_FAILED };

/* Counts one handshake of this thread. */
void tls_count(enum tls_side side, enum tls_result result);

#endif
