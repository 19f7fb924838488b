/*
 * scripts.h - the rate-limit Lua scripts of lua/, embedded at build time
 * (cmake/embed_lua.cmake writes the table). Pure data.
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

#endif
