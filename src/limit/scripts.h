/*
 * scripts.h - the rate-limit Lua scripts of lua/, embedded at build time
 * (cmake/embed_lua.cmake writes the table), and the names Redis knows
 * them by.
 */
#ifndef SLUICE_SCRIPTS_H
#define SLUICE_SCRIPTS_H

#include <stdbool.h>
#include <stddef.h>

struct lua_script {
    const char *name;   /* file name without ".lua", e.g. "token_bucket" */
    const char *source; /* the whole script */
    size_t len;         /* strlen(source) */
    bool batch;         /* also takes a batch of calls in one run
                           (lua/README.md, "Batches") */
};

extern const struct lua_script lua_scripts[];
extern const size_t lua_script_count;

/* The script called 'name', or NULL. */
const struct lua_script *scripts_find(const char *name);

/* Hex digits of a SHA-1, what EVALSHA names a script by. */
#define SCRIPTS_SHA1_HEX 40

/* Writes into 'out' the SHA-1 of 's''s source in lowercase hex, NUL-
 * terminated: the name Redis gives the script (SCRIPT LOAD's answer).
 * False only when OpenSSL cannot hash ('out' is then ""). */
bool scripts_sha1(const struct lua_script *s, char out[SCRIPTS_SHA1_HEX + 1]);

#endif
