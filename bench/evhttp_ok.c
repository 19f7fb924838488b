/*
 * evhttp_ok.c - a bare evhttp server answering "ok\n" to every request:
 * the ceiling of any gateway whose front end is evhttp, as sluice's is.
 * Built and started by bench/run.sh; not part of sluice.
 *   evhttp_ok PORT
 */
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <stdio.h>
#include <stdlib.h>

static void
on_request(struct evhttp_request *req, void *arg)
{
    struct evbuffer *body = arg;

    evbuffer_add(body, "ok\n", 3);
    evhttp_send_reply(req, 200, "OK", body);
}

int
main(int argc, char **argv)
{
    struct event_config *ec = event_config_new();
    struct event_base *base;
    struct evhttp *http;
    struct evbuffer *body = evbuffer_new();

    if (argc != 2) {
        fprintf(stderr, "usage: evhttp_ok PORT\n");
        return 2;
    }
    /* As sluice's workers: the epoll changelist. */
    event_config_set_flag(ec, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
    base = event_base_new_with_config(ec);
    http = evhttp_new(base);
    evhttp_set_gencb(http, on_request, body);
    if (evhttp_bind_socket(http, "127.0.0.1", (unsigned short)atoi(argv[1])) !=
        0) {
        fprintf(stderr, "evhttp_ok: cannot listen on port %s\n", argv[1]);
        return 1;
    }
    event_base_dispatch(base);
    return 0;
}
