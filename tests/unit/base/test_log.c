/*
 * The error log: one event, one line, whatever its message quotes.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

/* Runs log_warn("%s", msg) with stderr sent to a file, and returns what
 * was written (static buffer). */
static const char *
logged(const char *msg)
{
    static char out[4096];
    FILE *f = tmpfile();
    int saved = dup(STDERR_FILENO);
    size_t n;

    cr_assert_not_null(f);
    cr_assert_geq(saved, 0);
    cr_assert_geq(dup2(fileno(f), STDERR_FILENO), 0);
    log_warn("redis: %s", msg);
    cr_assert_geq(dup2(saved, STDERR_FILENO), 0);
    close(saved);
    rewind(f);
    n = fread(out, 1, sizeof(out) - 1, f);
    out[n] = '\0';
    fclose(f);
    return out;
}

Test(log, a_message_is_one_line_ending_in_a_newline)
{
    const char *out = logged("plain text");

    cr_assert_not_null(strstr(out, " warn redis: plain text\n"), "%s", out);
    cr_assert_eq(strchr(out, '\n'), out + strlen(out) - 1, "%s", out);
}

Test(log, control_bytes_of_a_message_are_escaped)
{
    const char *out = logged("ERR a\nfake line\r\x1b[31m\x7f tab\there");

    cr_assert_not_null(strstr(out,
                              "redis: ERR a\\x0afake line\\x0d\\x1b[31m\\x7f "
                              "tab\\x09here\n"),
                       "%s", out);
    cr_assert_eq(strchr(out, '\n'), out + strlen(out) - 1,
                 "more than one line: %s", out);
}

Test(log, a_long_message_is_cut_and_still_ends_its_line)
{
    static char msg[4000];
    const char *out;

    memset(msg, '\n', sizeof(msg) - 1);
    out = logged(msg);
    cr_assert_gt(strlen(out), 2000);
    cr_assert_eq(strchr(out, '\n'), out + strlen(out) - 1, "%s", out);
}

Test(log, utf8_passes_through)
{
    const char *out = logged("caf\xc3\xa9");

    cr_assert_not_null(strstr(out, "redis: caf\xc3\xa9\n"), "%s", out);
}
