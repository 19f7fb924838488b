#include "regexp.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errbuf.h"
#include "xmalloc.h"

struct regexp {
    pcre2_code *code;     /* as written: searched by regexp_replace(); owned */
    pcre2_code *anchored; /* ANCHORED|ENDANCHORED twin for full matches:
                             given at match time instead, those options
                             send PCRE2 past its JIT code; owned */
    uint32_t ngroups;     /* capture groups in the pattern */
    char *pattern;        /* as written, for GET /routes; owned */
};

/* PCRE2 limits group names to 32 code units. */
#define NAME_MAX_LEN 32

/*
 * PCRE2 allocates through these, so that running out of memory aborts in
 * xmalloc like everywhere else instead of surfacing as a "no match". The
 * compiled code remembers them, and so does match data made from it.
 */
static void *
on_pcre2_malloc(PCRE2_SIZE size, void *data)
{
    (void)data;
    return xmalloc(size);
}

static void
on_pcre2_free(void *ptr, void *data)
{
    (void)data;
    free(ptr);
}

static void
pcre2_message(int code, char *buf, size_t len)
{
    if (pcre2_get_error_message(code, (PCRE2_UCHAR *)buf, len) < 0) {
        snprintf(buf, len, "PCRE2 error %d", code);
    }
}

static pcre2_code *
compile(const char *pattern, uint32_t options, char *err, size_t errlen)
{
    pcre2_general_context *gctx;
    pcre2_compile_context *cctx;
    pcre2_code *code;
    PCRE2_SIZE offset;
    int rc;

    gctx = pcre2_general_context_create(on_pcre2_malloc, on_pcre2_free, NULL);
    cctx = pcre2_compile_context_create(gctx);
    code = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, options,
                         &rc, &offset, cctx);
    pcre2_compile_context_free(cctx);
    pcre2_general_context_free(gctx);
    if (code == NULL) {
        char msg[256];

        pcre2_message(rc, msg, sizeof(msg));
        errbuf_printf(err, errlen, "%s at offset %zu", msg, (size_t)offset);
        return NULL;
    }
    /* Without JIT (unsupported CPU, no executable memory) the interpreter
       gives the same answers, only slower. */
    (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    return code;
}

struct regexp *
regexp_new(const char *pattern, char *err, size_t errlen)
{
    struct regexp *re;
    pcre2_code *code;
    pcre2_code *anchored;

    code = compile(pattern, 0, err, errlen);
    if (code == NULL) {
        return NULL;
    }
    anchored =
        compile(pattern, PCRE2_ANCHORED | PCRE2_ENDANCHORED, err, errlen);
    if (anchored == NULL) {
        pcre2_code_free(code);
        return NULL;
    }
    re = xmalloc(sizeof(*re));
    re->code = code;
    re->anchored = anchored;
    re->pattern = xstrdup(pattern);
    if (pcre2_pattern_info(code, PCRE2_INFO_CAPTURECOUNT, &re->ngroups) != 0) {
        re->ngroups = 0;
    }
    return re;
}

void
regexp_free(struct regexp *re)
{
    if (re == NULL) {
        return;
    }
    pcre2_code_free(re->code);
    pcre2_code_free(re->anchored);
    free(re->pattern);
    free(re);
}

const char *
regexp_pattern(const struct regexp *re)
{
    return re->pattern;
}

bool
regexp_full_match(const struct regexp *re, const char *s, size_t len)
{
    pcre2_match_data *md;
    int rc;

    /* Per call, since the compiled pattern is shared between threads. */
    md = pcre2_match_data_create_from_pattern(re->anchored, NULL);
    rc = pcre2_match(re->anchored, (PCRE2_SPTR)s, len, 0, 0, md, NULL);
    pcre2_match_data_free(md);
    /* 0 means "matched, ovector too small": still a match. */
    return rc >= 0;
}

static bool
is_word(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '_';
}

/*
 * Checks every "$" form of 'repl' against the groups of 're', following
 * the grammar of pcre2_substitute() (plus Spring's "$\{"), so that a typo
 * is caught when the config loads rather than on the first request that
 * happens to match.
 */
static int
check_replacement(const struct regexp *re, const char *repl, char *err,
                  size_t errlen)
{
    const char *p = repl;

    while ((p = strchr(p, '$')) != NULL) {
        size_t at = (size_t)(p - repl);
        bool brace = false;
        bool star = false;

        p++;
        if (*p == '$') {
            p++;
            continue;
        }
        if (*p == '{') {
            brace = true;
            p++;
        } else if (p[0] == '\\' && p[1] == '{') {
            brace = true;
            p += 2;
        }
        if (*p == '*') {
            star = true;
            p++;
        }
        if (!star && *p >= '0' && *p <= '9') {
            const char *digits = p;
            uint64_t n = 0;

            /* Stop adding once past the group count: no overflow. */
            while (*p >= '0' && *p <= '9') {
                if (n <= re->ngroups) {
                    n = n * 10 + (uint64_t)(*p - '0');
                }
                p++;
            }
            if (n > re->ngroups) {
                errbuf_printf(err, errlen,
                              "unknown group %.*s (the pattern has %u)",
                              (int)(p - digits), digits, (unsigned)re->ngroups);
                return -1;
            }
        } else {
            const char *name = p;
            size_t len;

            while (is_word((unsigned char)*p)) {
                p++;
            }
            len = (size_t)(p - name);
            if (len == 0) {
                errbuf_printf(err, errlen,
                              "\"$\" at offset %zu is not followed by a group "
                              "number or name (write \"$$\" for a dollar)",
                              at);
                return -1;
            }
            if (!star) {
                char buf[NAME_MAX_LEN + 1];
                int rc = PCRE2_ERROR_NOSUBSTRING;

                if (len <= NAME_MAX_LEN) {
                    memcpy(buf, name, len);
                    buf[len] = '\0';
                    rc = pcre2_substring_number_from_name(re->code,
                                                          (PCRE2_SPTR)buf);
                }
                /* Duplicate names ((?J)) exist all the same. */
                if (rc < 0 && rc != PCRE2_ERROR_NOUNIQUESUBSTRING) {
                    errbuf_printf(err, errlen, "unknown group \"%.*s\"",
                                  (int)len, name);
                    return -1;
                }
            }
        }
        if (brace) {
            if (*p != '}') {
                errbuf_printf(err, errlen,
                              "missing \"}\" after the \"${\" at offset %zu",
                              at);
                return -1;
            }
            p++;
        }
    }
    return 0;
}

/* Spring writes "$\{name}" because "${" is its property placeholder. */
static char *
translate_spring(const char *repl)
{
    size_t len = strlen(repl);
    char *out = xmalloc(len + 1);
    char *o = out;

    for (const char *p = repl; *p;) {
        if (p[0] == '$' && p[1] == '$') {
            *o++ = *p++;
            *o++ = *p++;
        } else if (p[0] == '$' && p[1] == '\\' && p[2] == '{') {
            *o++ = '$';
            *o++ = '{';
            p += 3;
        } else {
            *o++ = *p++;
        }
    }
    *o = '\0';
    return out;
}

char *
regexp_replace(const struct regexp *re, const char *s, const char *replacement,
               char *err, size_t errlen)
{
    const uint32_t opts = PCRE2_SUBSTITUTE_GLOBAL |
                          PCRE2_SUBSTITUTE_OVERFLOW_LENGTH |
                          PCRE2_SUBSTITUTE_UNSET_EMPTY;
    size_t len = strlen(s);
    pcre2_match_data *md;
    PCRE2_SIZE outlen;
    char *repl;
    char *out;
    int rc;

    if (check_replacement(re, replacement, err, errlen) < 0) {
        return NULL;
    }
    repl = translate_spring(replacement);
    md = pcre2_match_data_create_from_pattern(re->code, NULL);
    outlen = len + strlen(repl) + 64;
    out = xmalloc(outlen);
    rc = pcre2_substitute(re->code, (PCRE2_SPTR)s, len, 0, opts, md, NULL,
                          (PCRE2_SPTR)repl, PCRE2_ZERO_TERMINATED,
                          (PCRE2_UCHAR *)out, &outlen);
    if (rc == PCRE2_ERROR_NOMEMORY) {
        /* 'outlen' now holds the size needed, terminating zero included. */
        out = xrealloc(out, outlen);
        rc = pcre2_substitute(re->code, (PCRE2_SPTR)s, len, 0, opts, md, NULL,
                              (PCRE2_SPTR)repl, PCRE2_ZERO_TERMINATED,
                              (PCRE2_UCHAR *)out, &outlen);
    }
    pcre2_match_data_free(md);
    free(repl);
    if (rc < 0) {
        char msg[256];

        pcre2_message(rc, msg, sizeof(msg));
        errbuf_printf(err, errlen, "%s", msg);
        free(out);
        return NULL;
    }
    return out;
}
