/*
 * harness.h - helpers for integration tests: free ports, child processes with
 * captured output, deadline waits, HTTP through libcurl, raw TCP, and lookups
 * in sluice-echo's JSON. Does I/O; Criterion tests only, single-threaded.
 *
 * Functions documented as "fails the test" call cr_assert_fail() when the
 * environment is broken (a binary missing, a child dying at start-up), so
 * that tests need not check. Children get SIGKILL when the test process
 * dies, so a failed assertion never leaves a server running.
 *
 * Environment: SLUICE_BIN and SLUICE_ECHO_BIN name the binaries under test;
 * TMPDIR (default /tmp) holds logs and configs; HARNESS_KEEP_LOGS=1 keeps
 * every child's log file instead of removing it in proc_stop().
 */
#ifndef SLUICE_HARNESS_H
#define SLUICE_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <curl/curl.h>

/*
 * Ports and waiting.
 */

/* A port that was free on 127.0.0.1 a moment ago; fails the test if none. */
uint16_t harness_free_port(void);

/* Polls connect() to 127.0.0.1:'port' every few milliseconds; true once a
 * connection is accepted, false if 'timeout_ms' passes first. */
bool harness_wait_port(uint16_t port, int timeout_ms);

/* Polls 'cond(arg)' every few milliseconds; true as soon as it holds, false
 * if it still does not once 'timeout_ms' has passed. */
bool harness_wait_until(bool (*cond)(void *arg), void *arg, int timeout_ms);

/* Milliseconds on a monotonic clock, for measuring durations. */
int64_t harness_now_ms(void);

/* The wall clock in ms, as sluice-echo's received_ms reads it. */
int64_t harness_wall_ms(void);

/*
 * Temporary files and strings.
 */

/* printf into a new string; the caller frees it. */
char *harness_strf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A copy of 's' with every 'from' replaced by 'to'; the caller frees it. */
char *harness_subst(const char *s, const char *from, const char *to);

/* Writes 'content' to a new file under $TMPDIR (or /tmp) and returns its
 * path; the caller unlink()s the file and frees the path. Fails the test if
 * the file cannot be written. */
char *harness_write_temp(const char *content);

/*
 * Child processes.
 */

struct proc {
    pid_t pid;           /* child, leader of its own process group; 0: none */
    bool exited;         /* the child has been reaped; 'status' is valid */
    int status;          /* exit status, or 128 + signal, once 'exited' */
    char log_path[4096]; /* file receiving the child's stdout and stderr */
};

/*
 * Starts argv[0] (searched in PATH if it has no '/') with 'argv', stdin
 * from /dev/null and stdout+stderr appended to a new log file. Returns 0, or
 * -1 if the fork or the log file failed; an exec failure shows up as exit
 * status 127 with the reason in the log. 'argv' is borrowed.
 */
int proc_start(struct proc *p, char *const argv[]);

/* True while the child has not exited (reaps it if it has). */
bool proc_running(struct proc *p);

/*
 * Sends 'sig' to the child (0 sends nothing: just wait for it to exit) and
 * waits up to 'timeout_ms'; after that the whole process group gets SIGKILL.
 * Returns the exit status, 128 + the signal number if a signal killed it, or
 * -1 if there was no child. When 'sig' asked for an orderly exit (neither 0
 * nor SIGKILL) and the status is not 0, the log is copied to stderr first,
 * so that sanitizer reports show in the test output. Then the log file is
 * removed (see HARNESS_KEEP_LOGS) and p->pid reset to 0.
 */
int proc_stop(struct proc *p, int sig, int timeout_ms);

/* The child's output so far, NUL-terminated; the caller frees it. Never
 * NULL: an unreadable log reads as "". */
char *proc_log(const struct proc *p);

/* True once the child's output contains 'needle'. */
bool proc_log_contains(const struct proc *p, const char *needle);
/* How many times 'needle' is in 'hay', not overlapping. */
size_t harness_count(const char *hay, const char *needle);
/* How many times 'needle' is in the output of 'p' so far. */
size_t proc_log_count(const struct proc *p, const char *needle);
/* For harness_wait_until(): the output of 'p' holds 'needle' 'n' times
 * or more. */
struct log_wait {
    const struct proc *p; /* borrowed */
    const char *needle;   /* borrowed */
    size_t n;             /* times wanted */
};
bool proc_log_count_reached(void *arg);

/* Resident set size (VmRSS) and its peak (VmHWM) of 'pid' in KiB, from
 * /proc/PID/status; -1 if unavailable. */
long proc_rss_kb(pid_t pid);
long proc_peak_rss_kb(pid_t pid);

/* CPU time (user + system) that 'pid' has used so far, in milliseconds,
 * from /proc/PID/stat; -1 if unavailable. */
long proc_cpu_ms(pid_t pid);

/*
 * The binaries under test.
 */

/*
 * Starts $SLUICE_ECHO_BIN on 127.0.0.1 with a port of its own choosing (no
 * race with other tests for a free port), waits until it accepts and stores
 * the port in '*port'. 'name' is its --name (NULL: the default,
 * "sluice-echo"). Fails the test if it cannot be started.
 */
void echo_start(struct proc *p, uint16_t *port);
void echo_start_named(struct proc *p, uint16_t *port, const char *name);
/*
 * The same, speaking HTTPS only with certificate 'cert' and key 'key'
 * (PEM files), and requiring a client certificate issued by 'client_ca'
 * unless it is NULL. Its /__stats then also counts TLS handshakes and
 * resumed sessions (tls_handshakes, tls_resumed).
 */
void echo_start_tls(struct proc *p, uint16_t *port, const char *cert,
                    const char *key, const char *client_ca);

/*
 * Starts "$SLUICE_BIN -c 'config_path'" and waits until it accepts on
 * 127.0.0.1:'port' (the server.listen of that config). Fails the test, with
 * the gateway's output, if it exits or does not listen within 10 s.
 */
void gateway_start(struct proc *p, const char *config_path, uint16_t port);

/*
 * The same, run through 'wrapper' (borrowed): a NULL-terminated argv that
 * is followed by "$SLUICE_BIN -c 'config_path'", e.g. {"prlimit",
 * "--nofile=64:64", "--", NULL} to start the gateway under a low descriptor
 * limit. The wrapper must exec the gateway (not fork it), so that p->pid
 * is the gateway's own pid. NULL or an empty wrapper is gateway_start().
 */
void gateway_start_wrapped(struct proc *p, const char *const *wrapper,
                           const char *config_path, uint16_t port);

/* Waits up to 'timeout_ms' for 'p' to accept on 127.0.0.1:'port'; false if
 * it exited or the deadline passed. */
bool proc_wait_port(struct proc *p, uint16_t port, int timeout_ms);

/*
 * Starts redis-server on a free port of 127.0.0.1 with persistence off
 * (found in PATH, or $REDIS_SERVER_BIN), waits until it answers PING, and
 * stores the port. Fails the test if it cannot be started. Stop it with
 * proc_stop(p, SIGTERM, ...); its exit status is 0 then.
 */
void redis_start(struct proc *p, uint16_t *port);

/* Same, on the given port (to bring a stopped Redis back where it was). */
void redis_start_on(struct proc *p, uint16_t port);

/*
 * A synchronous connection to the Redis (or sentinel) on 127.0.0.1:'port'
 * for setting a scene and reading state, with 2 s timeouts, authenticated
 * with 'password' unless it is NULL; NULL if it could not connect or
 * AUTH (a server being reconfigured may kill its clients). The caller
 * frees it with redisFree().
 */
struct redisContext *harness_redis_try(uint16_t port, const char *password);

/* The reply to 'cmd' on 'port' as a new string ("" for a reply that is not
 * a string, status or error), or NULL if the server did not answer. */
char *harness_redis_text(uint16_t port, const char *password, const char *cmd);

/* True if the first element of ROLE on 'port' is 'want'; false too if the
 * server could not be asked. */
bool harness_redis_role_is(uint16_t port, const char *password,
                           const char *want);

/* The keys matching 'pattern' on 'port' (KEYS); 0 if it could not be
 * asked. */
size_t harness_redis_keys(uint16_t port, const char *password,
                          const char *pattern);

/*
 * HTTP through libcurl. Every call uses a new connection, ignores proxy
 * settings from the environment, never sends "Expect: 100-continue" and
 * speaks HTTP/1.1.
 */

struct http_response {
    long status;     /* status of the final response; 0 if none arrived */
    char *headers;   /* owned; raw header block(s) as received, or "" */
    char *body;      /* owned; body bytes plus a terminating NUL */
    size_t body_len; /* body bytes, the NUL not counted */
    CURLcode err;    /* CURLE_OK if the transfer completed */
};

/*
 * Performs one request. 'headers' is NULL or a NULL-terminated list of
 * "Name: value" lines, with curl's conventions ("Name:" removes a header
 * curl would add). 'body' NULL sends no body; otherwise 'body_len' bytes
 * with a Content-Length, whatever the method (and, unless 'headers' say
 * otherwise, curl's "Content-Type: application/x-www-form-urlencoded"). "HEAD"
 * does not wait for a body. 'timeout_ms' bounds the whole transfer. Always
 * fills '*out' (free it with http_response_free); returns 0 if the transfer
 * completed, -1 if not (see out->err; whatever arrived is kept).
 */
int http_request(struct http_response *out, const char *method, const char *url,
                 const char *const *headers, const char *body, size_t body_len,
                 long timeout_ms);

/*
 * https URLs of the calls above and below are verified against the CA
 * bundle 'path' (copied; NULL: curl's default store) from now on, in this
 * test process.
 */
void harness_set_ca_file(const char *path);

/* GET without headers or body. */
int http_get(struct http_response *out, const char *url, long timeout_ms);

/* Value of the first header 'name' (any case) of the final response, with
 * surrounding blanks removed; a new string, or NULL if there is none. */
char *http_response_header(const struct http_response *r, const char *name);

/* How many headers 'name' (any case) the final response has. */
size_t http_response_header_count(const struct http_response *r,
                                  const char *name);

void http_response_free(struct http_response *r); /* keeps 'r' itself */

struct http_download_opts {
    const char *const *headers; /* NULL or as for http_request; borrowed */
    curl_off_t max_recv_speed;  /* bytes per second; 0: unlimited */
    uint64_t abort_after;       /* close after this many body bytes; 0: no */
    long timeout_ms;            /* whole transfer; 0: 60 s */
    void (*on_progress)(uint64_t received, void *arg); /* or NULL; per
                                                          piece received */
    void *arg; /* for on_progress; borrowed */
};

struct http_download {
    long status;         /* as in http_response */
    char *headers;       /* owned; as in http_response */
    uint64_t body_bytes; /* body bytes received; the body itself is dropped */
    bool is_pattern;     /* every body byte i was 'a' + i % 26, the
                            sluice-echo bytes= pattern */
    CURLcode err;        /* CURLE_OK if complete; CURLE_PARTIAL_FILE or
                            CURLE_RECV_ERROR if the body was cut short;
                            CURLE_WRITE_ERROR after abort_after */
};

/*
 * GETs 'url' counting, not keeping, the body; for large or slow downloads
 * and for clients that leave early. 'opts' may be NULL. Always fills '*out'
 * (free with http_download_free); returns 0 if the transfer completed, -1 if
 * not.
 */
int http_download(struct http_download *out, const char *url,
                  const struct http_download_opts *opts);
void http_download_free(struct http_download *d); /* keeps 'd' itself */

/* What a load run saw. */
struct load_result {
    size_t sent;        /* requests completed (any status) */
    size_t errors;      /* transfers that failed (no status) */
    size_t status[600]; /* completed requests by status code */
    long max_ms;        /* slowest request, milliseconds */
};

/*
 * Sends 'total' GETs, cycling through 'urls' (and through 'header_sets',
 * when not NULL: request i gets header_sets[i % nsets], a NULL-terminated
 * list like http_request's), with 'concurrency' requests in flight over
 * at most that many keep-alive connections (curl multi). Each request
 * times out after 'timeout_ms'. Always fills '*out'; returns 0.
 */
int http_load(const char *const *urls, size_t nurls,
              const char *const *const *header_sets, size_t nsets,
              size_t concurrency, size_t total, long timeout_ms,
              struct load_result *out);

/*
 * Raw TCP, for what curl will not send: connects to 127.0.0.1:'port', sends
 * 'len' bytes of 'request', then reads until the server closes or
 * 'timeout_ms' passes (send "Connection: close" to avoid waiting on a
 * keep-alive). Returns what arrived, NUL-terminated (the caller frees it;
 * bytes after a NUL in the reply are not visible), or NULL if the connection
 * was refused.
 */
char *raw_http(uint16_t port, const char *request, size_t len, int timeout_ms);

/*
 * sluice-echo's JSON (see demo/echo.c). These parse just enough JSON to
 * read the echo's replies; malformed input gives NULL or false.
 */

/* Top-level member 'field': a string unescaped, or a number as written; a
 * new string. NULL if absent, null, or another type. */
char *echo_field(const char *json, const char *field);

/* First value of request header 'name' (any case) in the "headers" array,
 * as a new string; NULL if the request had no such header. */
char *echo_header(const char *json, const char *name);

/* True if the request had a header 'name' (any case) with exactly 'value';
 * 'value' NULL matches any value. */
bool echo_has_header(const char *json, const char *name, const char *value);

/* How many request headers 'name' (any case) the echo saw. */
size_t echo_header_count(const char *json, const char *name);

/*
 * sluice-echo's GET /__stats. 'open_connections' proves that a proxy closed
 * or cancelled its upstream connections, 'aborted' that it did so while a
 * reply was pending, and 'max_buffered_bytes' that the echo streamed with
 * backpressure. Returns 0, or -1 if the stats could not be fetched.
 */
struct echo_stats {
    long requests;           /* requests seen, /__stats excluded */
    long aborted;            /* clients gone before their reply was done */
    long open_connections;   /* excluding the connection that asked */
    long connections;        /* ever seen, excluding the one that asked */
    long buffered_bytes;     /* bytes= body bytes queued, not yet written */
    long max_buffered_bytes; /* highest buffered_bytes so far */
};

int echo_stats(uint16_t port, struct echo_stats *out);

/*
 * An echo and a one-worker gateway in front of it, for tests that write
 * their config as text. echo_echo_stack_start() writes a config of
 * 'server_extra' (more keys under server:), 'sections' (more top-level
 * sections) and 'routes' (the items of routes:), with "@ECHO@" standing for the
 * echo's host:port, and starts both; echo_stack_stop() stops both and fails the
 * test if the gateway did not exit cleanly on SIGTERM.
 */
struct echo_stack {
    struct proc echo;   /* the upstream */
    struct proc gw;     /* the gateway */
    uint16_t echo_port; /* where the echo listens */
    uint16_t gw_port;   /* where the gateway listens */
    char *cfg_path;     /* generated config; owned */
};

void echo_stack_start(struct echo_stack *st, const char *server_extra,
                      const char *sections, const char *routes);
/* The same, the gateway run through 'wrapper' (gateway_start_wrapped()). */
void echo_stack_start_wrapped(struct echo_stack *st, const char *const *wrapper,
                              const char *server_extra, const char *sections,
                              const char *routes);
void echo_stack_stop(struct echo_stack *st);

/* GET 'path' from the gateway with 'headers' (may be NULL); returns the
 * status and keeps the reply in 'out'. */
long echo_stack_get(const struct echo_stack *st, const char *path,
                    const char *const *headers, struct http_response *out);
/* The same, keeping only the status. */
long echo_stack_get_status(const struct echo_stack *st, const char *path,
                           const char *const *headers);

#endif
