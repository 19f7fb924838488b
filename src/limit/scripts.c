#include "scripts.h"

#include <openssl/evp.h>
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

bool
scripts_sha1(const struct lua_script *s, char out[SCRIPTS_SHA1_HEX + 1])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;

    out[0] = '\0';
    if (!EVP_Digest(s->source, s->len, md, &n, EVP_sha1(), NULL) ||
        n * 2 != SCRIPTS_SHA1_HEX) {
        return false;
    }
    for (unsigned int i = 0; i < n; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 0xf];
    }
    out[SCRIPTS_SHA1_HEX] = '\0';
    return true;
}
