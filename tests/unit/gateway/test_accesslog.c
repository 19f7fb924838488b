#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "accesslog.h"
#include "xmalloc.h"

/* 2026-11-22T10:00:00.123Z */
#define T0 1795341600123LL

#define THREADS 4
#define PER_THREAD 1000

static struct access_entry
full_entry(void)
{
    struct access_entry e = {
        .time_ms = T0,
        .client = "203.0.113.7",
        .method = "GET",
        .path = "/a?b=1",
        .route = "users",
        .status = 200,
        .bytes = 512,
        .upstream_ms = 3,
        .total_ms = 4,
        .decision = "allowed",
        .tier = "0",
    };

    return e;
}

static struct access_entry
empty_entry(void)
{
    struct access_entry e = {
        .time_ms = T0,
        .status = 404,
        .upstream_ms = -1,
        .total_ms = 0,
    };

    return e;
}

/* Formats into a large buffer, checks the length returned, and keeps the
 * line in 'buf'. */
static void
format(enum accesslog_format f, const struct access_entry *e, char *buf,
       size_t len)
{
    size_t n = accesslog_format(f, e, buf, len - 1);

    cr_assert_lt(n, len);
    buf[n] = '\0';
    cr_assert_eq(strlen(buf), n, "a NUL inside the line");
}

/* A fresh directory for one test's files, under $TMPDIR or /tmp. */
static char *
make_dir(void)
{
    const char *tmp = getenv("TMPDIR");
    char *dir = xasprintf("%s/sluice-test-accesslog-XXXXXX",
                          tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");

    cr_assert_not_null(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
    return dir;
}

/* The whole file, NUL-terminated; "" when it does not exist. */
static char *
slurp(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    char *buf = NULL;
    size_t cap = 0;
    size_t n = 0;

    if (fp != NULL) {
        size_t got;

        do {
            buf = xgrow(buf, &cap, n + 4097, 1);
            got = fread(buf + n, 1, cap - n - 1, fp);
            n += got;
        } while (got > 0);
        fclose(fp);
    } else {
        buf = xmalloc(1);
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* "2026-11-22T10:00:00.123Z" at 's'. */
static bool
starts_with_time(const char *s)
{
    static const char shape[] = "dddd-dd-ddTdd:dd:dd.dddZ ";

    for (size_t i = 0; shape[i] != '\0'; i++) {
        if (shape[i] == 'd' ? s[i] < '0' || s[i] > '9' : s[i] != shape[i]) {
            return false;
        }
    }
    return true;
}

/*
 * Checks that every line of 'text' is a whole text line of one of the
 * writers of write_many() and counts them in 'seen' (thread x sequence);
 * returns the number of lines.
 */
static size_t
check_lines(const char *text, size_t len, unsigned char *seen)
{
    size_t lines = 0;
    const char *p = text;

    cr_assert(len == 0 || text[len - 1] == '\n', "last line is cut");
    while (p < text + len) {
        const char *nl = memchr(p, '\n', (size_t)(text + len - p));
        unsigned t = THREADS;
        unsigned i = PER_THREAD;
        char want[256];

        cr_assert_not_null(nl);
        cr_assert(starts_with_time(p), "bad line: %.*s", (int)(nl - p), p);
        sscanf(p + 25, "10.0.0.1 \"GET /t/%u/%u\"", &t, &i);
        snprintf(want, sizeof(want),
                 "10.0.0.1 \"GET /t/%u/%u\" route=r status=200 bytes=1 "
                 "upstream_ms=1 total_ms=2 rl=allowed tier=0 user=- proto=http",
                 t, i);
        cr_assert(nl - (p + 25) == (ptrdiff_t)strlen(want) &&
                      memcmp(p + 25, want, strlen(want)) == 0,
                  "bad line: %.*s", (int)(nl - p), p);
        cr_assert_lt(t, THREADS);
        cr_assert_lt(i, PER_THREAD);
        seen[t * PER_THREAD + i]++;
        lines++;
        p = nl + 1;
    }
    return lines;
}

Test(accesslog, text_line_has_every_field)
{
    struct access_entry e = full_entry();
    char buf[512];

    format(ACCESSLOG_TEXT, &e, buf, sizeof(buf));
    cr_assert_str_eq(buf, "2026-11-22T10:00:00.123Z 203.0.113.7 \"GET /a?b=1\" "
                          "route=users status=200 bytes=512 upstream_ms=3 "
                          "total_ms=4 rl=allowed tier=0 user=- proto=http\n");
}

Test(accesslog, json_line_has_every_field)
{
    struct access_entry e = full_entry();
    char buf[512];

    format(ACCESSLOG_JSON, &e, buf, sizeof(buf));
    cr_assert_str_eq(buf, "{\"time\":\"2026-11-22T10:00:00.123Z\","
                          "\"client\":\"203.0.113.7\",\"method\":\"GET\","
                          "\"path\":\"/a?b=1\",\"route\":\"users\","
                          "\"status\":200,\"bytes\":512,\"upstream_ms\":3,"
                          "\"total_ms\":4,\"rl\":\"allowed\",\"tier\":\"0\","
                          "\"user\":null,\"proto\":\"http\"}"
                          "\n");
}

Test(accesslog, missing_values_are_dashes_in_text)
{
    struct access_entry e = empty_entry();
    char buf[512];

    format(ACCESSLOG_TEXT, &e, buf, sizeof(buf));
    cr_assert_str_eq(buf, "2026-11-22T10:00:00.123Z - \"- -\" route=- "
                          "status=404 bytes=0 upstream_ms=- total_ms=0 rl=- "
                          "tier=- user=- proto=http\n");
}

Test(accesslog, missing_values_are_null_in_json)
{
    struct access_entry e = empty_entry();
    char buf[512];

    format(ACCESSLOG_JSON, &e, buf, sizeof(buf));
    cr_assert_str_eq(buf, "{\"time\":\"2026-11-22T10:00:00.123Z\","
                          "\"client\":null,\"method\":null,\"path\":null,"
                          "\"route\":null,\"status\":404,\"bytes\":0,"
                          "\"upstream_ms\":null,\"total_ms\":0,\"rl\":null,"
                          "\"tier\":null,\"user\":null,\"proto\":\"http\"}\n");
}

Test(accesslog, time_is_utc_with_milliseconds)
{
    struct access_entry e = empty_entry();
    char buf[512];

    e.time_ms = 0;
    format(ACCESSLOG_TEXT, &e, buf, sizeof(buf));
    cr_assert(strncmp(buf, "1970-01-01T00:00:00.000Z ", 25) == 0, "%s", buf);
    e.time_ms = 951782400007LL; /* a leap day */
    format(ACCESSLOG_TEXT, &e, buf, sizeof(buf));
    cr_assert(strncmp(buf, "2000-02-29T00:00:00.007Z ", 25) == 0, "%s", buf);
    e.time_ms = -1;
    format(ACCESSLOG_TEXT, &e, buf, sizeof(buf));
    cr_assert(strncmp(buf, "1969-12-31T23:59:59.999Z ", 25) == 0, "%s", buf);
}

Test(accesslog, path_cannot_forge_a_field_or_a_line_in_text)
{
    struct access_entry e = full_entry();
    char buf[512];

    e.path = "/a\" route=admin status=200\n2026 \\ \x01\x1b[31m\x7f\xc3\xa9";
    e.client = "10.0.0.1 status=500";
    format(ACCESSLOG_TEXT, &e, buf, sizeof(buf));
    cr_assert_str_eq(buf, "2026-11-22T10:00:00.123Z 10.0.0.1\\x20status=500 "
                          "\"GET /a\\\" route=admin status=200\\x0a2026 \\\\ "
                          "\\x01\\x1b[31m\\x7f\\xc3\\xa9\" route=users "
                          "status=200 bytes=512 upstream_ms=3 total_ms=4 "
                          "rl=allowed tier=0 user=- proto=http\n");
}

Test(accesslog, path_cannot_forge_a_field_or_a_line_in_json)
{
    struct access_entry e = full_entry();
    char buf[512];

    /* \xc3\xa9 is UTF-8 and stays; a lone \xff cannot be JSON text. */
    e.path = "/a\",\"status\":500\n\r\t\\\x01\x7f\xc3\xa9\xff";
    format(ACCESSLOG_JSON, &e, buf, sizeof(buf));
    cr_assert_str_eq(
        buf, "{\"time\":\"2026-11-22T10:00:00.123Z\","
             "\"client\":\"203.0.113.7\",\"method\":\"GET\","
             "\"path\":\"/a\\\",\\\"status\\\":500\\n\\r\\t\\\\"
             "\\u0001\\u007f\xc3\xa9\\ufffd\",\"route\":"
             "\"users\",\"status\":200,\"bytes\":512,"
             "\"upstream_ms\":3,\"total_ms\":4,\"rl\":"
             "\"allowed\",\"tier\":\"0\",\"user\":null,\"proto\":\"http\"}\n");
}

Test(accesslog, long_path_is_cut_and_the_line_stays_one_line)
{
    static const enum accesslog_format formats[] = {ACCESSLOG_TEXT,
                                                    ACCESSLOG_JSON};
    static const char tail_text[] = "...\" route=users status=200 bytes=512 "
                                    "upstream_ms=3 total_ms=4 rl=allowed "
                                    "tier=0 user=- proto=http\n";
    static const char tail_json[] =
        "...\",\"route\":\"users\",\"status\":200,"
        "\"bytes\":512,\"upstream_ms\":3,"
        "\"total_ms\":4,\"rl\":\"allowed\","
        "\"tier\":\"0\",\"user\":null,\"proto\":\"http\"}\n";
    struct access_entry e = full_entry();
    char *path = xmalloc(10001);
    char buf[4096];

    /* Quotes expand when escaped; a cut must not split "\"". */
    for (size_t i = 0; i < 10000; i++) {
        path[i] = i % 3 == 0 ? '"' : 'a';
    }
    path[10000] = '\0';
    e.path = path;
    for (size_t f = 0; f < 2; f++) {
        const char *tail = formats[f] == ACCESSLOG_TEXT ? tail_text : tail_json;
        size_t n = accesslog_format(formats[f], &e, buf, sizeof(buf));
        const char *cut = buf + n - strlen(tail);
        size_t backslashes = 0;

        cr_assert_leq(n, sizeof(buf));
        cr_assert_geq(n, sizeof(buf) - 4, "cut more than needed: %zu", n);
        cr_assert_eq(memchr(buf, '\n', n), buf + n - 1, "not one line");
        cr_assert(memcmp(cut, tail, strlen(tail)) == 0, "tail: %.*s",
                  (int)strlen(tail), cut);
        /* An odd run of backslashes before the mark would escape it. */
        for (const char *p = cut - 1; *p == '\\'; p--) {
            backslashes++;
        }
        cr_assert_eq(backslashes % 2, 0);
    }
    /* A buffer too small for anything still ends the line. */
    cr_assert_eq(accesslog_format(ACCESSLOG_TEXT, &e, buf, 10), 10);
    cr_assert_eq(buf[9], '\n');
    cr_assert_eq(accesslog_format(ACCESSLOG_TEXT, &e, buf, 0), 0);
    free(path);
}

Test(accesslog, long_utf8_path_is_cut_between_characters_in_json)
{
    struct access_entry e = full_entry();
    char *path = xmalloc(3 * 2000 + 1);
    char buf[1024];
    size_t n;
    const char *start;
    const char *end;

    for (size_t i = 0; i < 2000; i++) {
        memcpy(path + 3 * i, "\xe2\x82\xac", 3); /* the euro sign */
    }
    path[3 * 2000] = '\0';
    e.path = path;
    n = accesslog_format(ACCESSLOG_JSON, &e, buf, sizeof(buf));
    buf[n - 1] = '\0';
    start = strstr(buf, "\"path\":\"") + 8;
    end = strstr(start, "...\"");
    cr_assert_not_null(end);
    cr_assert_eq((end - start) % 3, 0, "a character was split");
    cr_assert_gt(end - start, 0);
    free(path);
}

Test(accesslog, off_writes_nothing)
{
    struct access_entry e = full_entry();
    char *dir = make_dir();
    char *file = xasprintf("%s/stdout", dir);
    int saved = dup(STDOUT_FILENO);
    int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    struct accesslog *al;
    char err[128] = "";
    size_t len;
    char *text;

    cr_assert_geq(fd, 0);
    fflush(stdout);
    dup2(fd, STDOUT_FILENO);
    al = accesslog_open("off", ACCESSLOG_TEXT, err, sizeof(err));
    cr_assert_not_null(al, "%s", err);
    accesslog_write(al, &e);
    cr_assert_eq(accesslog_reopen(al), 0);
    accesslog_write(al, &e);
    accesslog_close(al);
    /* The control: stdout does reach the file. */
    al = accesslog_open("-", ACCESSLOG_JSON, err, sizeof(err));
    cr_assert_not_null(al, "%s", err);
    accesslog_write(al, &e);
    accesslog_close(al);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    close(fd);
    text = slurp(file, &len);
    cr_assert_eq(strncmp(text, "{\"time\":", 8), 0, "%s", text);
    cr_assert_eq(strchr(text, '\n'), text + len - 1, "%s", text);
    free(text);
    unlink(file);
    rmdir(dir);
    free(file);
    free(dir);
}

Test(accesslog, open_reports_a_file_it_cannot_create)
{
    char err[256] = "";
    char *dir = make_dir();
    char *file = xasprintf("%s/no/such/dir/access.log", dir);
    char *want = xasprintf("accesslog: cannot open %s: No such file or "
                           "directory",
                           file);

    cr_assert_null(accesslog_open(file, ACCESSLOG_TEXT, err, sizeof(err)));
    cr_assert_str_eq(err, want);
    accesslog_close(NULL);
    rmdir(dir);
    free(want);
    free(file);
    free(dir);
}

Test(accesslog, file_is_appended_to_and_created_0644)
{
    struct access_entry e = full_entry();
    char *dir = make_dir();
    char *file = xasprintf("%s/access.log", dir);
    struct accesslog *al;
    char err[128] = "";
    struct stat st;
    size_t len;
    char *text;
    char want[512];
    int fd = open(file, O_WRONLY | O_CREAT, 0644);

    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, "old\n", 4), 4);
    close(fd);
    al = accesslog_open(file, ACCESSLOG_TEXT, err, sizeof(err));
    cr_assert_not_null(al, "%s", err);
    accesslog_write(al, &e);
    accesslog_close(al);
    text = slurp(file, &len);
    format(ACCESSLOG_TEXT, &e, want + 4, sizeof(want) - 4);
    memcpy(want, "old\n", 4);
    cr_assert_str_eq(text, want);
    free(text);
    unlink(file);

    /* A new file: 0644 under a umask of 022. */
    umask(022);
    al = accesslog_open(file, ACCESSLOG_TEXT, err, sizeof(err));
    cr_assert_not_null(al, "%s", err);
    accesslog_close(al);
    cr_assert_eq(stat(file, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0644);
    unlink(file);
    rmdir(dir);
    free(file);
    free(dir);
}

/* One writer thread of write_many(). */
struct writer {
    struct accesslog *al; /* borrowed */
    unsigned id;          /* 0..THREADS-1 */
    unsigned *done;       /* lines written by all, atomic; borrowed */
    const int *rotated;   /* if not NULL, the second half of the lines
                             waits for it to be set; atomic; borrowed */
    pthread_t thread;
};

/* Spins until '*flag' is set; fails the test after 10 s. */
static void
wait_for(const int *flag)
{
    struct timespec deadline;
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += 10;
    while (!__atomic_load_n(flag, __ATOMIC_ACQUIRE)) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        cr_assert_lt(now.tv_sec, deadline.tv_sec, "never set");
        sched_yield();
    }
}

static void *
write_lines(void *arg)
{
    struct writer *w = arg;
    char path[32];
    struct access_entry e = full_entry();

    e.client = "10.0.0.1";
    e.route = "r";
    e.bytes = 1;
    e.upstream_ms = 1;
    e.total_ms = 2;
    e.path = path;
    for (unsigned i = 0; i < PER_THREAD; i++) {
        if (i == PER_THREAD / 2 && w->rotated != NULL) {
            wait_for(w->rotated);
        }
        snprintf(path, sizeof(path), "/t/%u/%u", w->id, i);
        e.time_ms = T0 + i;
        accesslog_write(w->al, &e);
        __atomic_add_fetch(w->done, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

static void
start_writers(struct writer *w, struct accesslog *al, unsigned *done,
              const int *rotated)
{
    for (unsigned t = 0; t < THREADS; t++) {
        w[t].al = al;
        w[t].id = t;
        w[t].done = done;
        w[t].rotated = rotated;
        cr_assert_eq(pthread_create(&w[t].thread, NULL, write_lines, &w[t]), 0);
    }
}

static void
join_writers(struct writer *w)
{
    for (unsigned t = 0; t < THREADS; t++) {
        pthread_join(w[t].thread, NULL);
    }
}

/* Every line of every writer exactly once across the files given. */
static void
assert_all_lines_once(const char *const *files, size_t nfiles, size_t *per_file)
{
    unsigned char *seen = xcalloc(THREADS * PER_THREAD, 1);
    size_t total = 0;

    for (size_t f = 0; f < nfiles; f++) {
        size_t len;
        char *text = slurp(files[f], &len);

        per_file[f] = check_lines(text, len, seen);
        total += per_file[f];
        free(text);
    }
    cr_assert_eq(total, THREADS * PER_THREAD);
    for (size_t i = 0; i < THREADS * PER_THREAD; i++) {
        cr_assert_eq(seen[i], 1, "line %zu/%zu seen %u times", i / PER_THREAD,
                     i % PER_THREAD, seen[i]);
    }
    free(seen);
}

Test(accesslog, lines_from_threads_never_interleave)
{
    char *dir = make_dir();
    char *file = xasprintf("%s/access.log", dir);
    const char *files[] = {file};
    struct writer w[THREADS];
    unsigned done = 0;
    size_t lines;
    char err[128] = "";
    struct accesslog *al =
        accesslog_open(file, ACCESSLOG_TEXT, err, sizeof(err));

    cr_assert_not_null(al, "%s", err);
    start_writers(w, al, &done, NULL);
    join_writers(w);
    accesslog_close(al);
    assert_all_lines_once(files, 1, &lines);
    cr_assert_eq(lines, THREADS * PER_THREAD);
    unlink(file);
    rmdir(dir);
    free(file);
    free(dir);
}

Test(accesslog, reopen_after_rename_starts_a_new_file)
{
    struct access_entry e = full_entry();
    char *dir = make_dir();
    char *file = xasprintf("%s/access.log", dir);
    char *old = xasprintf("%s/access.log.1", dir);
    char err[128] = "";
    struct accesslog *al =
        accesslog_open(file, ACCESSLOG_TEXT, err, sizeof(err));
    char line[512];
    char want[3 * 512];
    size_t len;
    char *text;

    cr_assert_not_null(al, "%s", err);
    format(ACCESSLOG_TEXT, &e, line, sizeof(line));
    accesslog_write(al, &e);
    accesslog_write(al, &e);
    cr_assert_eq(rename(file, old), 0);
    /* Until the reopen, lines follow the renamed file. */
    accesslog_write(al, &e);
    cr_assert_eq(accesslog_reopen(al), 0);
    e.status = 503;
    accesslog_write(al, &e);
    accesslog_close(al);

    text = slurp(old, &len);
    snprintf(want, sizeof(want), "%s%s%s", line, line, line);
    cr_assert_str_eq(text, want);
    free(text);
    text = slurp(file, &len);
    format(ACCESSLOG_TEXT, &e, line, sizeof(line));
    cr_assert_str_eq(text, line);
    free(text);
    unlink(file);
    unlink(old);
    rmdir(dir);
    free(old);
    free(file);
    free(dir);
}

Test(accesslog, reopen_fails_cleanly_and_keeps_the_old_file)
{
    struct access_entry e = full_entry();
    char *dir = make_dir();
    char *sub = xasprintf("%s/logs", dir);
    char *file = xasprintf("%s/access.log", sub);
    char *moved = xasprintf("%s/moved", dir);
    char err[128] = "";
    struct accesslog *al;
    size_t len;
    char *text;

    cr_assert_eq(mkdir(sub, 0700), 0);
    al = accesslog_open(file, ACCESSLOG_TEXT, err, sizeof(err));
    cr_assert_not_null(al, "%s", err);
    /* The directory goes away: the path cannot be opened again. */
    cr_assert_eq(rename(sub, moved), 0);
    cr_assert_eq(accesslog_reopen(al), -1);
    accesslog_write(al, &e);
    accesslog_close(al);
    free(file);
    file = xasprintf("%s/access.log", moved);
    text = slurp(file, &len);
    cr_assert_eq(strncmp(text, "2026-11-22T10:00:00.123Z ", 25), 0, "%s", text);
    free(text);
    unlink(file);
    rmdir(moved);
    rmdir(dir);
    free(moved);
    free(file);
    free(sub);
    free(dir);
}

Test(accesslog, reopen_while_threads_write_loses_no_line)
{
    char *dir = make_dir();
    char *file = xasprintf("%s/access.log", dir);
    char *old = xasprintf("%s/access.log.1", dir);
    const char *files[] = {old, file};
    size_t lines[2];
    struct writer w[THREADS];
    unsigned done = 0;
    int rotated = 0;
    char err[128] = "";
    struct accesslog *al =
        accesslog_open(file, ACCESSLOG_TEXT, err, sizeof(err));
    struct timespec deadline;
    struct timespec now;

    cr_assert_not_null(al, "%s", err);
    /* Each writer holds its second half until the rotation, so that both
     * files get lines; the rotation itself runs while writers write. */
    start_writers(w, al, &done, &rotated);
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += 10;
    do {
        clock_gettime(CLOCK_MONOTONIC, &now);
        cr_assert_lt(now.tv_sec, deadline.tv_sec, "writers stalled");
    } while (__atomic_load_n(&done, __ATOMIC_RELAXED) < 100);
    cr_assert_eq(rename(file, old), 0);
    cr_assert_eq(accesslog_reopen(al), 0);
    __atomic_store_n(&rotated, 1, __ATOMIC_RELEASE);
    join_writers(w);
    accesslog_close(al);
    assert_all_lines_once(files, 2, lines);
    cr_assert_geq(lines[0], 100);
    /* Every line written after the reopen went to the new file. */
    cr_assert_geq(lines[1], THREADS * (PER_THREAD - PER_THREAD / 2));
    unlink(file);
    unlink(old);
    rmdir(dir);
    free(old);
    free(file);
    free(dir);
}

Test(accesslog, the_user_is_logged_escaped)
{
    struct access_entry e = full_entry();
    char buf[512];

    e.user = "alice bob\"";
    format(ACCESSLOG_TEXT, &e, buf, sizeof(buf));
    cr_assert(strstr(buf, " tier=0 user=alice\\x20bob\\\" proto=http\n") !=
                  NULL,
              "%s", buf);
    format(ACCESSLOG_JSON, &e, buf, sizeof(buf));
    cr_assert(
        strstr(buf, ",\"user\":\"alice bob\\\"\",\"proto\":\"http\"}\n") !=
            NULL,
        "%s", buf);
}

Test(accesslog, a_request_over_tls_is_logged_as_https)
{
    struct access_entry e = full_entry();
    char buf[512];

    e.tls = true;
    format(ACCESSLOG_TEXT, &e, buf, sizeof(buf));
    cr_assert(strstr(buf, " user=- proto=https\n") != NULL, "%s", buf);
    format(ACCESSLOG_JSON, &e, buf, sizeof(buf));
    cr_assert(strstr(buf, ",\"proto\":\"https\"}\n") != NULL, "%s", buf);
}
