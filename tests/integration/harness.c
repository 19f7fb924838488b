#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <criterion/criterion.h>
#include <hiredis/hiredis.h>

#define POLL_INTERVAL_MS 2
#define START_TIMEOUT_MS 10000
#define PATTERN_LEN 4096

/* curl_global_init is not thread-safe and must precede every handle. */
__attribute__((constructor)) static void
harness_global_init(void)
{
    curl_global_init(CURL_GLOBAL_ALL);
}

__attribute__((destructor)) static void
harness_global_cleanup(void)
{
    curl_global_cleanup();
}

static void *
h_alloc(size_t size)
{
    void *p = calloc(1, size ? size : 1);

    if (p == NULL) {
        abort();
    }
    return p;
}

static void *
h_realloc(void *ptr, size_t size)
{
    void *p = realloc(ptr, size ? size : 1);

    if (p == NULL) {
        abort();
    }
    return p;
}

static char *
h_strndup(const char *s, size_t n)
{
    char *p = h_alloc(n + 1);

    memcpy(p, s, n);
    return p;
}

/* A growing byte buffer, always NUL-terminated once anything was added. */
struct buf {
    char *data; /* owned */
    size_t len; /* bytes used, NUL not counted */
    size_t cap; /* bytes allocated */
};

static void
buf_add(struct buf *b, const void *data, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;

        while (cap < b->len + n + 1) {
            cap *= 2;
        }
        b->data = h_realloc(b->data, cap);
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
}

/* The buffer's string, "" if empty; the buffer is left empty. */
static char *
buf_take(struct buf *b)
{
    char *s = b->data != NULL ? b->data : h_alloc(1);

    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    return s;
}

/*
 * Ports and waiting.
 */

int64_t
harness_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t
harness_wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
nap(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000,
                          .tv_nsec = (long)(ms % 1000) * 1000000};

    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

static struct sockaddr_in
loopback(uint16_t port)
{
    struct sockaddr_in sa;

    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return sa;
}

/* The lowest port the kernel gives outgoing connections, or 0. */
static unsigned
ephemeral_low(void)
{
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    unsigned low = 0, high = 0;

    if (f != NULL) {
        if (fscanf(f, "%u %u", &low, &high) != 2) {
            low = 0;
        }
        fclose(f);
    }
    return low;
}

/* The lowest port harness_free_port() picks below the ephemeral range. */
#define FREE_PORT_MIN 10000

/*
 * A port from below the kernel's range for outgoing connections that
 * nothing is bound to now, or 0 when there is no such range to use.
 */
static uint16_t
port_below_ephemeral(void)
{
    static unsigned seed;
    unsigned low = ephemeral_low();

    if (low <= FREE_PORT_MIN + 1000 || low > 65536) {
        return 0;
    }
    if (seed == 0) {
        seed = (unsigned)getpid() ^ (unsigned)harness_now_ms();
    }
    for (int attempt = 0; attempt < 200; attempt++) {
        uint16_t port = (uint16_t)(FREE_PORT_MIN + (unsigned)rand_r(&seed) %
                                                       (low - FREE_PORT_MIN));
        struct sockaddr_in sa = loopback(port);
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        bool ok;

        if (fd < 0) {
            return 0;
        }
        ok = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
        close(fd);
        if (ok) {
            return port;
        }
    }
    return 0;
}

/* A free port from the kernel (bind to port 0). */
static uint16_t
port_from_kernel(void)
{
    struct sockaddr_in sa = loopback(0);
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
        int err = errno;

        if (fd >= 0) {
            close(fd);
        }
        cr_assert_fail("harness: no free port: %s", strerror(err));
    }
    close(fd);
    return ntohs(sa.sin_port);
}

uint16_t
harness_free_port(void)
{
    /*
     * A port the kernel hands out for the asking (bind to port 0) comes
     * from the range it also gives every outgoing connection: one made
     * anywhere on the machine between this call and the bind the port is
     * for took it, and a gateway failed to listen ("Address already in
     * use"). So the port comes from below that range when there is room.
     * Either way the same port may come twice in a row while nothing
     * holds the first yet, and a test asks for two or three before
     * anything listens: ports returned recently are not returned again.
     */
    static uint16_t given[64];
    static size_t ngiven;

    for (int attempt = 0; attempt < 100; attempt++) {
        uint16_t port = port_below_ephemeral();
        bool repeat = false;

        if (port == 0) {
            port = port_from_kernel();
        }
        for (size_t i = 0; i < ngiven && i < 64; i++) {
            repeat = repeat || given[i] == port;
        }
        if (!repeat) {
            given[ngiven++ % 64] = port;
            return port;
        }
    }
    cr_assert_fail("harness: no free port that was not just given out");
    return 0;
}

static bool
port_accepts(uint16_t port)
{
    struct sockaddr_in sa = loopback(port);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    bool ok;

    if (fd < 0) {
        return false;
    }
    ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(fd);
    return ok;
}

bool
harness_wait_until(bool (*cond)(void *arg), void *arg, int timeout_ms)
{
    int64_t deadline = harness_now_ms() + timeout_ms;

    while (harness_now_ms() < deadline) {
        if (cond(arg)) {
            return true;
        }
        nap(POLL_INTERVAL_MS);
    }
    return cond(arg);
}

static bool
port_cond(void *arg)
{
    return port_accepts(*(uint16_t *)arg);
}

bool
harness_wait_port(uint16_t port, int timeout_ms)
{
    return harness_wait_until(port_cond, &port, timeout_ms);
}

/*
 * Temporary files and strings.
 */

char *
harness_strf(const char *fmt, ...)
{
    va_list ap;
    int n;
    char *s;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        abort();
    }
    s = h_alloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

static const char *
tmp_dir(void)
{
    const char *dir = getenv("TMPDIR");

    return dir != NULL && dir[0] != '\0' ? dir : "/tmp";
}

/* mkstemp() under the temp dir; fills 'path' (of 'size' bytes). */
static int
make_temp(char *path, size_t size, const char *stem)
{
    int n = snprintf(path, size, "%s/%s.XXXXXX", tmp_dir(), stem);

    if (n < 0 || (size_t)n >= size) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return mkstemp(path);
}

char *
harness_write_temp(const char *content)
{
    char path[PATH_MAX];
    size_t len = strlen(content);
    size_t off = 0;
    int fd = make_temp(path, sizeof(path), "sluice-test");

    if (fd < 0) {
        cr_assert_fail("harness: temp file in %s: %s", tmp_dir(),
                       strerror(errno));
    }
    while (off < len) {
        ssize_t n = write(fd, content + off, len - off);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            int err = errno;

            close(fd);
            unlink(path);
            cr_assert_fail("harness: write %s: %s", path, strerror(err));
        }
        off += (size_t)n;
    }
    close(fd);
    return h_strndup(path, strlen(path));
}

/*
 * Child processes.
 */

/* Runs in the child between fork and exec: async-signal-safe calls only. */
static void
child_exec(int log_fd, pid_t parent, char *const argv[])
{
    static const char msg[] = "harness: cannot exec ";
    sigset_t none;
    int devnull;
    int sig;

    setpgid(0, 0);
    /* Die with the test: a failed assertion must not leave servers behind. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) {
        _exit(127);
    }
    /* Ignored dispositions and the signal mask survive exec; the child must
     * see SIGTERM whatever the test runner did to them. */
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (sig = 1; sig < NSIG; sig++) {
        signal(sig, SIG_DFL);
    }
    devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) {
        dup2(devnull, STDIN_FILENO);
        close(devnull);
    }
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    close(log_fd);
    execvp(argv[0], argv);
    if (write(STDERR_FILENO, msg, sizeof(msg) - 1) > 0 &&
        write(STDERR_FILENO, argv[0], strlen(argv[0])) > 0) {
        (void)!write(STDERR_FILENO, "\n", 1);
    }
    _exit(127);
}

int
proc_start(struct proc *p, char *const argv[])
{
    pid_t parent = getpid();
    int fd;
    pid_t pid;

    memset(p, 0, sizeof(*p));
    fd = make_temp(p->log_path, sizeof(p->log_path), "sluice-proc");
    if (fd < 0) {
        return -1;
    }
    fflush(NULL); /* or the child would inherit and repeat buffered output */
    pid = fork();
    if (pid < 0) {
        close(fd);
        unlink(p->log_path);
        return -1;
    }
    if (pid == 0) {
        child_exec(fd, parent, argv);
    }
    setpgid(pid, pid); /* as in the child: whichever runs first wins */
    close(fd);
    p->pid = pid;
    return 0;
}

static int
decode_status(int st)
{
    if (WIFEXITED(st)) {
        return WEXITSTATUS(st);
    }
    if (WIFSIGNALED(st)) {
        return 128 + WTERMSIG(st);
    }
    return -1;
}

/* Reaps the child if it has exited; true if it has. */
static bool
proc_reap(struct proc *p, int flags)
{
    int st = 0;
    pid_t r;

    if (p->exited) {
        return true;
    }
    do {
        r = waitpid(p->pid, &st, flags);
    } while (r < 0 && errno == EINTR);
    if (r == p->pid) {
        p->exited = true;
        p->status = decode_status(st);
        return true;
    }
    if (r < 0) {
        /* Not our child (already reaped elsewhere): treat as gone. */
        p->exited = true;
        p->status = -1;
        return true;
    }
    return false;
}

bool
proc_running(struct proc *p)
{
    return p->pid > 0 && !proc_reap(p, WNOHANG);
}

int
proc_stop(struct proc *p, int sig, int timeout_ms)
{
    int64_t deadline = harness_now_ms() + timeout_ms;
    const char *keep = getenv("HARNESS_KEEP_LOGS");
    int status;

    if (p->pid <= 0) {
        return -1;
    }
    if (sig != 0 && !p->exited) {
        kill(p->pid, sig);
    }
    while (!proc_reap(p, WNOHANG)) {
        if (harness_now_ms() >= deadline) {
            fprintf(stderr,
                    "harness: pid %d still running after %d ms: "
                    "SIGKILL\n",
                    (int)p->pid, timeout_ms);
            kill(-p->pid, SIGKILL);
            kill(p->pid, SIGKILL);
            proc_reap(p, 0);
            break;
        }
        nap(POLL_INTERVAL_MS);
    }
    status = p->status;
    if (status != 0 && sig != 0 && sig != SIGKILL) {
        char *log = proc_log(p);

        fprintf(stderr,
                "---- pid %d exited with status %d; its output (%s): ----\n"
                "%s---- end of output of pid %d ----\n",
                (int)p->pid, status, p->log_path, log, (int)p->pid);
        free(log);
    }
    if (keep == NULL || strcmp(keep, "1") != 0) {
        unlink(p->log_path);
    }
    p->pid = 0;
    p->exited = false;
    return status;
}

char *
proc_log(const struct proc *p)
{
    struct buf b = {0};
    char chunk[8192];
    size_t n;
    FILE *f = fopen(p->log_path, "rb");

    if (f == NULL) {
        return h_alloc(1);
    }
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        buf_add(&b, chunk, n);
    }
    fclose(f);
    return buf_take(&b);
}

bool
proc_log_contains(const struct proc *p, const char *needle)
{
    char *log = proc_log(p);
    bool found = strstr(log, needle) != NULL;

    free(log);
    return found;
}

size_t
harness_count(const char *hay, const char *needle)
{
    size_t n = 0;

    for (const char *q = hay; (q = strstr(q, needle)) != NULL;
         q += strlen(needle)) {
        n++;
    }
    return n;
}

size_t
proc_log_count(const struct proc *p, const char *needle)
{
    char *log = proc_log(p);
    size_t n = harness_count(log, needle);

    free(log);
    return n;
}

bool
proc_log_count_reached(void *arg)
{
    const struct log_wait *w = arg;

    return proc_log_count(w->p, w->needle) >= w->n;
}

static long
status_field_kb(pid_t pid, const char *field)
{
    char path[64];
    char line[256];
    size_t flen = strlen(field);
    long kb = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    f = fopen(path, "r");
    if (f == NULL) {
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, field, flen) == 0 && line[flen] == ':') {
            kb = strtol(line + flen + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return kb;
}

long
proc_rss_kb(pid_t pid)
{
    return status_field_kb(pid, "VmRSS");
}

long
proc_peak_rss_kb(pid_t pid)
{
    return status_field_kb(pid, "VmHWM");
}

long
proc_cpu_ms(pid_t pid)
{
    char path[64];
    char line[1024];
    unsigned long utime, stime;
    long ticks = sysconf(_SC_CLK_TCK);
    const char *p;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    if (f == NULL) {
        return -1;
    }
    p = fgets(line, sizeof(line), f);
    fclose(f);
    /* The command name, field 2, is in parentheses and may hold blanks:
     * count fields from the last ')'. utime and stime are fields 14, 15. */
    p = p != NULL ? strrchr(line, ')') : NULL;
    if (p == NULL || ticks <= 0 ||
        sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
               &utime, &stime) != 2) {
        return -1;
    }
    return (long)((utime + stime) * 1000 / (unsigned long)ticks);
}

/*
 * The binaries under test.
 */

static const char *
binary(const char *env)
{
    const char *path = getenv(env);

    if (path == NULL || path[0] == '\0') {
        cr_assert_fail("harness: %s is not set; run through ctest or point "
                       "it at the built binary",
                       env);
    }
    return path;
}

bool
proc_wait_port(struct proc *p, uint16_t port, int timeout_ms)
{
    int64_t deadline = harness_now_ms() + timeout_ms;

    for (;;) {
        if (port_accepts(port)) {
            return true;
        }
        if (!proc_running(p) || harness_now_ms() >= deadline) {
            return false;
        }
        nap(POLL_INTERVAL_MS);
    }
}

/* Fails the test with the child's output, after killing it. */
static void
fail_start(struct proc *p, const char *what)
{
    char *log = proc_log(p);
    char *msg = harness_strf("harness: %s; its output:\n%s", what, log);

    free(log);
    proc_stop(p, SIGKILL, 1000);
    cr_assert_fail("%s", msg);
}

/* The port from "sluice-echo: listening on 127.0.0.1:PORT\n", or 0. */
static uint16_t
echo_announced_port(const struct proc *p)
{
    static const char mark[] = "listening on 127.0.0.1:";
    char *log = proc_log(p);
    char *at = strstr(log, mark);
    uint16_t port = 0;

    if (at != NULL && strchr(at, '\n') != NULL) {
        port = (uint16_t)strtoul(at + sizeof(mark) - 1, NULL, 10);
    }
    free(log);
    return port;
}

/* Starts the echo with 'argv' (its argv[0] and --listen filled in here). */
static void
echo_start_argv(struct proc *p, uint16_t *port, char **argv)
{
    const char *bin = binary("SLUICE_ECHO_BIN");
    int64_t deadline = harness_now_ms() + START_TIMEOUT_MS;

    argv[0] = (char *)bin;
    argv[1] = "--listen";
    argv[2] = "127.0.0.1:0";
    if (proc_start(p, argv) < 0) {
        cr_assert_fail("harness: cannot start %s: %s", bin, strerror(errno));
    }
    /* Port 0 lets the kernel pick: no race for a free port with other
     * tests; the echo says which one it got. */
    while ((*port = echo_announced_port(p)) == 0) {
        if (!proc_running(p)) {
            fail_start(p, "sluice-echo exited at start-up");
        }
        if (harness_now_ms() >= deadline) {
            fail_start(p, "sluice-echo did not announce its port");
        }
        nap(POLL_INTERVAL_MS);
    }
    if (!proc_wait_port(p, *port, START_TIMEOUT_MS)) {
        fail_start(p, "sluice-echo does not accept connections");
    }
}

void
echo_start_named(struct proc *p, uint16_t *port, const char *name)
{
    char *argv[] = {NULL, NULL, NULL, "--name", (char *)name, NULL};

    if (name == NULL) {
        argv[3] = NULL;
    }
    echo_start_argv(p, port, argv);
}

void
echo_start_tls(struct proc *p, uint16_t *port, const char *cert,
               const char *key, const char *client_ca)
{
    char *argv[] = {NULL,
                    NULL,
                    NULL,
                    "--tls-cert",
                    (char *)cert,
                    "--tls-key",
                    (char *)key,
                    "--tls-client-ca",
                    (char *)client_ca,
                    NULL};

    if (client_ca == NULL) {
        argv[7] = NULL;
    }
    echo_start_argv(p, port, argv);
}

void
echo_start(struct proc *p, uint16_t *port)
{
    echo_start_named(p, port, NULL);
}

void
gateway_start(struct proc *p, const char *config_path, uint16_t port)
{
    gateway_start_wrapped(p, NULL, config_path, port);
}

void
gateway_start_wrapped(struct proc *p, const char *const *wrapper,
                      const char *config_path, uint16_t port)
{
    const char *bin = binary("SLUICE_BIN");
    size_t nwrap = 0;
    char **argv;
    int rc;

    while (wrapper != NULL && wrapper[nwrap] != NULL) {
        nwrap++;
    }
    argv = h_alloc((nwrap + 4) * sizeof(*argv));
    for (size_t i = 0; i < nwrap; i++) {
        argv[i] = (char *)wrapper[i];
    }
    argv[nwrap] = (char *)bin;
    argv[nwrap + 1] = "-c";
    argv[nwrap + 2] = (char *)config_path;
    rc = proc_start(p, argv);
    free(argv);
    if (rc < 0) {
        cr_assert_fail("harness: cannot start %s: %s", bin, strerror(errno));
    }
    if (!proc_wait_port(p, port, START_TIMEOUT_MS)) {
        char *what = harness_strf("sluice did not listen on 127.0.0.1:%u "
                                  "(config %s)",
                                  (unsigned)port, config_path);

        fail_start(p, what); /* does not return */
        free(what);
    }
}

/*
 * HTTP through libcurl.
 */

static size_t
on_curl_data(char *ptr, size_t size, size_t nmemb, void *arg)
{
    buf_add(arg, ptr, size * nmemb);
    return size * nmemb;
}

static struct curl_slist *
make_headers(const char *const *headers)
{
    struct curl_slist *list = NULL;
    size_t i;

    for (i = 0; headers != NULL && headers[i] != NULL; i++) {
        list = curl_slist_append(list, headers[i]);
    }
    /* curl would otherwise wait for "100 Continue" on larger bodies. */
    return curl_slist_append(list, "Expect:");
}

/* harness_set_ca_file(): what https URLs are verified against. */
static char *ca_file;

void
harness_set_ca_file(const char *path)
{
    free(ca_file);
    ca_file = path != NULL ? strdup(path) : NULL;
}

static CURL *
make_handle(const char *url, struct curl_slist *headers, long timeout_ms,
            struct buf *head)
{
    CURL *c = curl_easy_init();

    if (c == NULL) {
        abort();
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(c, CURLOPT_PROXY, "");
    curl_easy_setopt(c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_curl_data);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, head);
    if (ca_file != NULL) {
        curl_easy_setopt(c, CURLOPT_CAINFO, ca_file);
    }
    return c;
}

int
http_request(struct http_response *out, const char *method, const char *url,
             const char *const *headers, const char *body, size_t body_len,
             long timeout_ms)
{
    struct buf head = {0};
    struct buf data = {0};
    struct curl_slist *list = make_headers(headers);
    CURL *c = make_handle(url, list, timeout_ms, &head);

    memset(out, 0, sizeof(*out));
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_curl_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &data);
    if (strcmp(method, "HEAD") == 0) {
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    } else if (strcmp(method, "GET") != 0 || body != NULL) {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    }
    if (body != NULL) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    }
    out->err = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
    curl_easy_cleanup(c);
    curl_slist_free_all(list);
    out->headers = buf_take(&head);
    out->body_len = data.len;
    out->body = buf_take(&data);
    return out->err == CURLE_OK ? 0 : -1;
}

int
http_get(struct http_response *out, const char *url, long timeout_ms)
{
    return http_request(out, "GET", url, NULL, NULL, 0, timeout_ms);
}

/* Start of the final response's header block (after any 1xx blocks). */
static const char *
final_block(const char *headers)
{
    const char *last = headers;
    const char *p = headers;

    while ((p = strstr(p, "HTTP/")) != NULL) {
        if (p == headers || p[-1] == '\n') {
            last = p;
        }
        p += 5;
    }
    return last;
}

/* Calls 'fn' for each header 'name' of the final response until it returns
 * false; 'value' and 'len' are the trimmed value. */
static void
each_header(const char *headers, const char *name,
            bool (*fn)(const char *value, size_t len, void *arg), void *arg)
{
    size_t nlen = strlen(name);
    const char *line = headers != NULL ? final_block(headers) : NULL;

    while (line != NULL && *line != '\0') {
        const char *end = strchr(line, '\n');
        const char *next = end != NULL ? end + 1 : NULL;

        if (end == NULL) {
            end = line + strlen(line);
        }
        if ((size_t)(end - line) > nlen && strncasecmp(line, name, nlen) == 0 &&
            line[nlen] == ':') {
            const char *v = line + nlen + 1;
            const char *e = end;

            while (v < e && (*v == ' ' || *v == '\t')) {
                v++;
            }
            while (e > v && (e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t')) {
                e--;
            }
            if (!fn(v, (size_t)(e - v), arg)) {
                return;
            }
        }
        line = next;
    }
}

static bool
take_first(const char *value, size_t len, void *arg)
{
    *(char **)arg = h_strndup(value, len);
    return false;
}

static bool
count_one(const char *value, size_t len, void *arg)
{
    (void)value;
    (void)len;
    ++*(size_t *)arg;
    return true;
}

char *
http_response_header(const struct http_response *r, const char *name)
{
    char *value = NULL;

    each_header(r->headers, name, take_first, &value);
    return value;
}

size_t
http_response_header_count(const struct http_response *r, const char *name)
{
    size_t n = 0;

    each_header(r->headers, name, count_one, &n);
    return n;
}

void
http_response_free(struct http_response *r)
{
    free(r->headers);
    free(r->body);
    r->headers = NULL;
    r->body = NULL;
}

/* The sluice-echo bytes= pattern: byte i is 'a' + i % 26. */
static const char *
echo_pattern(void)
{
    static char pattern[PATTERN_LEN + 26];
    size_t i;

    if (pattern[0] == '\0') {
        for (i = 0; i < sizeof(pattern); i++) {
            pattern[i] = (char)('a' + i % 26);
        }
    }
    return pattern;
}

struct download {
    struct http_download *out;             /* borrowed */
    const struct http_download_opts *opts; /* borrowed */
};

static size_t
on_download_data(char *ptr, size_t size, size_t nmemb, void *arg)
{
    struct download *d = arg;
    const char *pattern = echo_pattern();
    size_t n = size * nmemb;
    size_t off = 0;

    while (d->out->is_pattern && off < n) {
        size_t k = n - off < PATTERN_LEN ? n - off : PATTERN_LEN;
        uint64_t at = d->out->body_bytes + off;

        if (memcmp(ptr + off, pattern + at % 26, k) != 0) {
            d->out->is_pattern = false;
        }
        off += k;
    }
    d->out->body_bytes += n;
    if (d->opts->on_progress != NULL) {
        d->opts->on_progress(d->out->body_bytes, d->opts->arg);
    }
    if (d->opts->abort_after > 0 &&
        d->out->body_bytes >= d->opts->abort_after) {
        return 0; /* curl closes the connection: CURLE_WRITE_ERROR */
    }
    return n;
}

int
http_download(struct http_download *out, const char *url,
              const struct http_download_opts *opts)
{
    static const struct http_download_opts defaults = {0};
    struct download d = {.out = out, .opts = opts ? opts : &defaults};
    struct buf head = {0};
    struct curl_slist *list = make_headers(d.opts->headers);
    long timeout = d.opts->timeout_ms > 0 ? d.opts->timeout_ms : 60000;
    CURL *c = make_handle(url, list, timeout, &head);

    memset(out, 0, sizeof(*out));
    out->is_pattern = true;
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_download_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &d);
    if (d.opts->max_recv_speed > 0) {
        curl_easy_setopt(c, CURLOPT_MAX_RECV_SPEED_LARGE,
                         d.opts->max_recv_speed);
    }
    out->err = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
    curl_easy_cleanup(c);
    curl_slist_free_all(list);
    out->headers = buf_take(&head);
    return out->err == CURLE_OK ? 0 : -1;
}

void
http_download_free(struct http_download *d)
{
    free(d->headers);
    d->headers = NULL;
}

/*
 * Raw TCP.
 */

/* Waits for 'events' on 'fd' until 'deadline'; false on timeout. */
static bool
wait_fd(int fd, short events, int64_t deadline)
{
    struct pollfd pfd = {.fd = fd, .events = events};

    for (;;) {
        int64_t left = deadline - harness_now_ms();
        int r;

        if (left <= 0) {
            return false;
        }
        r = poll(&pfd, 1, (int)left);
        if (r > 0) {
            return true;
        }
        if (r < 0 && errno != EINTR) {
            return false;
        }
    }
}

char *
raw_http(uint16_t port, const char *request, size_t len, int timeout_ms)
{
    int64_t deadline = harness_now_ms() + timeout_ms;
    struct sockaddr_in sa = loopback(port);
    struct buf got = {0};
    size_t off = 0;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (fd < 0) {
        return NULL;
    }
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        close(fd);
        return NULL;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    /* Send what the server takes; it may answer and close early (e.g. 431),
     * and then its reply is what counts. */
    while (off < len && wait_fd(fd, POLLOUT, deadline)) {
        ssize_t n = send(fd, request + off, len - off, MSG_NOSIGNAL);

        if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        off += (size_t)n;
    }
    while (wait_fd(fd, POLLIN, deadline)) {
        char chunk[8192];
        ssize_t n = recv(fd, chunk, sizeof(chunk), 0);

        if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        buf_add(&got, chunk, (size_t)n);
    }
    close(fd);
    return buf_take(&got);
}

/*
 * Just enough JSON for sluice-echo's replies.
 */

static const char *
skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') {
        p++;
    }
    return p;
}

static int
hex_digit(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/* Four hex digits at 'p'; -1 if they are not. */
static long
hex4(const char *p)
{
    long v = 0;
    int i;

    for (i = 0; i < 4; i++) {
        int d = hex_digit(p[i]);

        if (d < 0) {
            return -1;
        }
        v = v * 16 + d;
    }
    return v;
}

static size_t
put_utf8(char *out, unsigned long cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/*
 * The string starting at the '"' at 'p': returns the position after the
 * closing quote, or NULL if malformed. If 'out' is not NULL it receives the
 * unescaped string (the caller frees it).
 */
static const char *
json_string(const char *p, char **out)
{
    const char *q = p + 1;
    char *s;
    size_t n = 0;

    if (*p != '"') {
        return NULL;
    }
    /* First find the end: the unescaped text is never longer. */
    while (*q != '"') {
        if (*q == '\0' || (unsigned char)*q < 0x20) {
            return NULL;
        }
        q += (*q == '\\' && q[1] != '\0') ? 2 : 1;
    }
    if (out == NULL) {
        return q + 1;
    }
    s = h_alloc((size_t)(q - p));
    for (p++; p < q; p++) {
        long cp;

        if (*p != '\\') {
            s[n++] = *p;
            continue;
        }
        p++;
        switch (*p) {
        case 'b':
            s[n++] = '\b';
            break;
        case 'f':
            s[n++] = '\f';
            break;
        case 'n':
            s[n++] = '\n';
            break;
        case 'r':
            s[n++] = '\r';
            break;
        case 't':
            s[n++] = '\t';
            break;
        case 'u':
            cp = q - p > 4 ? hex4(p + 1) : -1;
            if (cp < 0) {
                free(s);
                return NULL;
            }
            p += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF && q - p > 6 && p[1] == '\\' &&
                p[2] == 'u') {
                long lo = hex4(p + 3);

                if (lo >= 0xDC00 && lo <= 0xDFFF) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    p += 6;
                }
            }
            n += put_utf8(s + n, (unsigned long)cp);
            break;
        default: /* '"', '\\', '/' */
            s[n++] = *p;
            break;
        }
    }
    s[n] = '\0';
    *out = s;
    return q + 1;
}

/* Skips any JSON value at 'p'; NULL if malformed. */
static const char *
json_skip(const char *p, int depth)
{
    p = skip_ws(p);
    if (depth > 64) {
        return NULL;
    }
    if (*p == '"') {
        return json_string(p, NULL);
    }
    if (*p == '{' || *p == '[') {
        char close = *p == '{' ? '}' : ']';

        p = skip_ws(p + 1);
        if (*p == close) {
            return p + 1;
        }
        for (;;) {
            if (close == '}') {
                p = json_string(skip_ws(p), NULL);
                if (p == NULL || *(p = skip_ws(p)) != ':') {
                    return NULL;
                }
                p++;
            }
            p = json_skip(p, depth + 1);
            if (p == NULL) {
                return NULL;
            }
            p = skip_ws(p);
            if (*p == close) {
                return p + 1;
            }
            if (*p != ',') {
                return NULL;
            }
            p++;
        }
    }
    if (strchr("-0123456789tfn", *p) == NULL || *p == '\0') {
        return NULL;
    }
    while (*p != '\0' && strchr("+-.0123456789eEtrufalsn", *p) != NULL) {
        p++;
    }
    return p;
}

/* The value of top-level member 'field' (whitespace skipped), or NULL. */
static const char *
json_member(const char *json, const char *field)
{
    const char *p = skip_ws(json);

    if (*p != '{') {
        return NULL;
    }
    p = skip_ws(p + 1);
    while (*p == '"') {
        char *key = NULL;
        bool match;

        p = json_string(p, &key);
        if (p == NULL) {
            return NULL;
        }
        match = strcmp(key, field) == 0;
        free(key);
        p = skip_ws(p);
        if (*p != ':') {
            return NULL;
        }
        p = skip_ws(p + 1);
        if (match) {
            return p;
        }
        p = json_skip(p, 0);
        if (p == NULL) {
            return NULL;
        }
        p = skip_ws(p);
        if (*p != ',') {
            return NULL;
        }
        p = skip_ws(p + 1);
    }
    return NULL;
}

char *
echo_field(const char *json, const char *field)
{
    const char *v = json != NULL ? json_member(json, field) : NULL;
    const char *end;
    char *s = NULL;

    if (v == NULL) {
        return NULL;
    }
    if (*v == '"') {
        return json_string(v, &s) != NULL ? s : NULL;
    }
    if (*v == '-' || (*v >= '0' && *v <= '9')) {
        end = json_skip(v, 0);
        return end != NULL ? h_strndup(v, (size_t)(end - v)) : NULL;
    }
    return NULL;
}

/* Calls 'fn' for each [name, value] pair in "headers" whose name is 'name'
 * (any case) until it returns false. */
static void
each_echo_header(const char *json, const char *name,
                 bool (*fn)(const char *value, size_t len, void *arg),
                 void *arg)
{
    const char *p = json != NULL ? json_member(json, "headers") : NULL;

    if (p == NULL || *p != '[') {
        return;
    }
    p = skip_ws(p + 1);
    while (*p == '[') {
        char *key = NULL;
        char *value = NULL;
        bool more = true;

        p = json_string(skip_ws(p + 1), &key);
        if (p == NULL || *(p = skip_ws(p)) != ',') {
            free(key);
            return;
        }
        p = json_string(skip_ws(p + 1), &value);
        if (p == NULL || *(p = skip_ws(p)) != ']') {
            free(key);
            free(value);
            return;
        }
        if (strcasecmp(key, name) == 0) {
            more = fn(value, strlen(value), arg);
        }
        free(key);
        free(value);
        if (!more) {
            return;
        }
        p = skip_ws(p + 1);
        if (*p != ',') {
            return;
        }
        p = skip_ws(p + 1);
    }
}

char *
echo_header(const char *json, const char *name)
{
    char *value = NULL;

    each_echo_header(json, name, take_first, &value);
    return value;
}

struct value_match {
    const char *want; /* borrowed; NULL matches anything */
    bool found;       /* a header matched */
};

static bool
match_value(const char *value, size_t len, void *arg)
{
    struct value_match *m = arg;

    if (m->want == NULL ||
        (strlen(m->want) == len && memcmp(m->want, value, len) == 0)) {
        m->found = true;
        return false;
    }
    return true;
}

bool
echo_has_header(const char *json, const char *name, const char *value)
{
    struct value_match m = {.want = value};

    each_echo_header(json, name, match_value, &m);
    return m.found;
}

size_t
echo_header_count(const char *json, const char *name)
{
    size_t n = 0;

    each_echo_header(json, name, count_one, &n);
    return n;
}

static long
stats_field(const char *json, const char *field)
{
    char *v = echo_field(json, field);
    long n = v != NULL ? strtol(v, NULL, 10) : -1;

    free(v);
    return n;
}

int
echo_stats(uint16_t port, struct echo_stats *out)
{
    char *url = harness_strf("http://127.0.0.1:%u/__stats", (unsigned)port);
    struct http_response r;
    int rc = http_get(&r, url, 5000);

    free(url);
    if (rc == 0 && r.status == 200) {
        out->requests = stats_field(r.body, "requests");
        out->aborted = stats_field(r.body, "aborted");
        out->open_connections = stats_field(r.body, "open_connections");
        out->connections = stats_field(r.body, "connections");
        out->buffered_bytes = stats_field(r.body, "buffered_bytes");
        out->max_buffered_bytes = stats_field(r.body, "max_buffered_bytes");
        if (out->requests < 0 || out->aborted < 0 ||
            out->open_connections < 0 || out->connections < 0 ||
            out->buffered_bytes < 0 || out->max_buffered_bytes < 0) {
            rc = -1;
        }
    } else {
        rc = -1;
    }
    http_response_free(&r);
    return rc;
}

void
redis_start_on(struct proc *p, uint16_t port)
{
    const char *bin = getenv("REDIS_SERVER_BIN");
    char portstr[8];
    char *argv[] = {(char *)(bin != NULL ? bin : "redis-server"),
                    "--port",
                    portstr,
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--daemonize",
                    "no",
                    "--loglevel",
                    "warning",
                    NULL};

    snprintf(portstr, sizeof(portstr), "%u", (unsigned)port);
    if (proc_start(p, argv) < 0) {
        cr_assert_fail("harness: cannot start redis-server");
    }
    if (!proc_wait_port(p, port, 10000)) {
        char *log = proc_log(p);

        cr_assert_fail("harness: redis-server did not listen on %u:\n%s",
                       (unsigned)port, log);
    }
}

void
redis_start(struct proc *p, uint16_t *port)
{
    *port = harness_free_port();
    redis_start_on(p, *port);
}

struct load_slot {
    CURL *easy;                 /* reused for request after request */
    struct curl_slist *headers; /* this request's list, or NULL */
    int64_t started;            /* harness_now_ms() at start */
};

static size_t
discard_body(char *ptr, size_t size, size_t nmemb, void *arg)
{
    (void)ptr;
    (void)arg;
    return size * nmemb;
}

static void
load_start(CURLM *multi, struct load_slot *slot, const char *url,
           const char *const *hdrs, long timeout_ms)
{
    curl_slist_free_all(slot->headers);
    slot->headers = NULL;
    for (size_t i = 0; hdrs != NULL && hdrs[i] != NULL; i++) {
        slot->headers = curl_slist_append(slot->headers, hdrs[i]);
    }
    curl_easy_setopt(slot->easy, CURLOPT_URL, url);
    curl_easy_setopt(slot->easy, CURLOPT_HTTPHEADER, slot->headers);
    curl_easy_setopt(slot->easy, CURLOPT_TIMEOUT_MS, timeout_ms);
    slot->started = harness_now_ms();
    curl_multi_add_handle(multi, slot->easy);
}

int
http_load(const char *const *urls, size_t nurls,
          const char *const *const *header_sets, size_t nsets,
          size_t concurrency, size_t total, long timeout_ms,
          struct load_result *out)
{
    CURLM *multi = curl_multi_init();
    struct load_slot *slots = calloc(concurrency, sizeof(*slots));
    size_t next = 0, done = 0;
    int running = 0;

    memset(out, 0, sizeof(*out));
    curl_multi_setopt(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)concurrency);
    for (size_t i = 0; i < concurrency && next < total; i++, next++) {
        slots[i].easy = curl_easy_init();
        curl_easy_setopt(slots[i].easy, CURLOPT_NOPROXY, "*");
        curl_easy_setopt(slots[i].easy, CURLOPT_WRITEFUNCTION, discard_body);
        curl_easy_setopt(slots[i].easy, CURLOPT_PRIVATE, &slots[i]);
        load_start(multi, &slots[i], urls[next % nurls],
                   header_sets != NULL ? header_sets[next % nsets] : NULL,
                   timeout_ms);
    }
    while (done < total) {
        CURLMsg *msg;
        int left;

        curl_multi_perform(multi, &running);
        while ((msg = curl_multi_info_read(multi, &left)) != NULL) {
            struct load_slot *slot;
            long status = 0;
            long ms;

            if (msg->msg != CURLMSG_DONE) {
                continue;
            }
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &slot);
            curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE,
                              &status);
            ms = (long)(harness_now_ms() - slot->started);
            if (ms > out->max_ms) {
                out->max_ms = ms;
            }
            if (msg->data.result != CURLE_OK || status <= 0 || status >= 600) {
                out->errors++;
            } else {
                out->status[status]++;
                out->sent++;
            }
            done++;
            curl_multi_remove_handle(multi, msg->easy_handle);
            if (next < total) {
                load_start(multi, slot, urls[next % nurls],
                           header_sets != NULL ? header_sets[next % nsets]
                                               : NULL,
                           timeout_ms);
                next++;
            }
        }
        if (done < total) {
            curl_multi_poll(multi, NULL, 0, 100, NULL);
        }
    }
    for (size_t i = 0; i < concurrency; i++) {
        if (slots[i].easy != NULL) {
            curl_easy_cleanup(slots[i].easy);
        }
        curl_slist_free_all(slots[i].headers);
    }
    free(slots);
    curl_multi_cleanup(multi);
    return 0;
}

char *
harness_subst(const char *s, const char *from, const char *to)
{
    size_t flen = strlen(from), tlen = strlen(to), n = 0, count = 0;
    const char *p;
    char *out;

    for (p = strstr(s, from); p != NULL; p = strstr(p + flen, from)) {
        count++;
    }
    out = malloc(strlen(s) + count * tlen + 1);
    while (*s) {
        if (strncmp(s, from, flen) == 0) {
            memcpy(out + n, to, tlen);
            n += tlen;
            s += flen;
        } else {
            out[n++] = *s++;
        }
    }
    out[n] = '\0';
    return out;
}

void
echo_stack_start(struct echo_stack *st, const char *server_extra,
                 const char *sections, const char *routes)
{
    echo_stack_start_wrapped(st, NULL, server_extra, sections, routes);
}

void
echo_stack_start_wrapped(struct echo_stack *st, const char *const *wrapper,
                         const char *server_extra, const char *sections,
                         const char *routes)
{
    char addr[32], *r, *cfg;

    memset(st, 0, sizeof(*st));
    echo_start(&st->echo, &st->echo_port);
    st->gw_port = harness_free_port();
    snprintf(addr, sizeof(addr), "127.0.0.1:%u", st->echo_port);
    r = harness_subst(routes, "@ECHO@", addr);
    cfg = harness_strf("server:\n"
                       "  listen: 127.0.0.1:%u\n"
                       "  workers: 1\n"
                       "%s"
                       "%s"
                       "routes:\n"
                       "%s",
                       st->gw_port, server_extra, sections, r);
    st->cfg_path = harness_write_temp(cfg);
    free(cfg);
    free(r);
    gateway_start_wrapped(&st->gw, wrapper, st->cfg_path, st->gw_port);
}

void
echo_stack_stop(struct echo_stack *st)
{
    int gw = proc_stop(&st->gw, SIGTERM, 15000);

    proc_stop(&st->echo, SIGTERM, 5000);
    unlink(st->cfg_path);
    free(st->cfg_path);
    cr_assert_eq(gw, 0, "the gateway exited with %d on SIGTERM", gw);
}

long
echo_stack_get(const struct echo_stack *st, const char *path,
               const char *const *headers, struct http_response *out)
{
    char *u = harness_strf("http://127.0.0.1:%u%s", st->gw_port, path);

    http_request(out, "GET", u, headers, NULL, 0, 10000);
    free(u);
    return out->status;
}

long
echo_stack_get_status(const struct echo_stack *st, const char *path,
                      const char *const *headers)
{
    struct http_response r;
    long status = echo_stack_get(st, path, headers, &r);

    http_response_free(&r);
    return status;
}

redisContext *
harness_redis_try(uint16_t port, const char *password)
{
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    redisReply *r;
    bool ok;

    if (c == NULL || c->err != 0) {
        redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    if (password == NULL) {
        return c;
    }
    r = redisCommand(c, "AUTH %s", password);
    ok = r != NULL && r->type == REDIS_REPLY_STATUS;
    if (r != NULL) {
        freeReplyObject(r);
    }
    if (!ok) {
        redisFree(c);
        return NULL;
    }
    return c;
}

char *
harness_redis_text(uint16_t port, const char *password, const char *cmd)
{
    redisContext *c = harness_redis_try(port, password);
    redisReply *r;
    char *text = NULL;

    if (c == NULL) {
        return NULL;
    }
    r = redisCommand(c, cmd);
    if (r != NULL) {
        text = harness_strf("%s", r->type == REDIS_REPLY_STRING ||
                                          r->type == REDIS_REPLY_STATUS ||
                                          r->type == REDIS_REPLY_ERROR
                                      ? r->str
                                      : "");
        freeReplyObject(r);
    }
    redisFree(c);
    return text;
}

bool
harness_redis_role_is(uint16_t port, const char *password, const char *want)
{
    redisContext *c = harness_redis_try(port, password);
    redisReply *r;
    bool ok;

    if (c == NULL) {
        return false;
    }
    r = redisCommand(c, "ROLE");
    ok = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
         r->element[0]->type == REDIS_REPLY_STRING &&
         strcmp(r->element[0]->str, want) == 0;
    if (r != NULL) {
        freeReplyObject(r);
    }
    redisFree(c);
    return ok;
}

size_t
harness_redis_keys(uint16_t port, const char *password, const char *pattern)
{
    redisContext *c = harness_redis_try(port, password);
    redisReply *r;
    size_t n;

    if (c == NULL) {
        return 0;
    }
    r = redisCommand(c, "KEYS %s", pattern);
    n = r != NULL && r->type == REDIS_REPLY_ARRAY ? r->elements : 0;
    if (r != NULL) {
        freeReplyObject(r);
    }
    redisFree(c);
    return n;
}
