#include "scripts.h"

#include <string.h>

const struct lua_script *
scripts_find(const char *name)
{
    for (size_t i = 0; i < lua_script_count; i++) {
        if (strcmp(lua_scripts[i].name, name) == 0) {
            return &lua_scripts[i];
        }
    }
    return NULL;
}
