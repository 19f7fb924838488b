#include "problem.h"

#include <stdio.h>
#include <string.h>

#include "strbuf.h"

char *
problem_json(int status, const char *title, const char *detail,
             const char *instance)
{
    struct strbuf b = STRBUF_INIT;

    strbuf_adds(&b, "{\"type\":\"about:blank\",\"title\":");
    strbuf_add_json(&b, title);
    strbuf_adds(&b, ",\"status\":");
    strbuf_add_u64(&b, status > 0 ? (unsigned long long)status : 0);
    if (detail != NULL) {
        strbuf_adds(&b, ",\"detail\":");
        strbuf_add_json(&b, detail);
    }
    if (instance != NULL) {
        strbuf_adds(&b, ",\"instance\":");
        strbuf_add_json(&b, instance);
    }
    strbuf_adds(&b, "}");
    return strbuf_take(&b);
}

const char *
problem_reason(int status)
{
    switch (status) {
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 413:
        return "Content Too Large";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    default:
        return "Error";
    }
}
