/*
 * main.c - the sluice command line: run the gateway, check a config file,
 * or print the version.
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "describe.h"
#include "log.h"
#include "server.h"
#include "tls.h"

#define DEFAULT_CONFIG "conf/gateway.yaml"

static void
usage(FILE *out)
{
    fprintf(out,
            "usage: sluice [-c FILE]          run the gateway\n"
            "       sluice --check [-c FILE]  validate FILE, exit 0 or 1\n"
            "       sluice --version\n"
            "\n"
            "  -c, --config FILE  configuration (default %s)\n"
            "      --watch        reload FILE when it changes on disk\n"
            "      --check        report every error in FILE and exit\n"
            "  -v, --version      print the version and exit\n"
            "  -h, --help         print this help and exit\n"
            "\n"
            "Signals: SIGHUP reloads FILE; SIGUSR1 reopens the access log;\n"
            "SIGTERM or SIGINT drains and exits (a second one: at once).\n",
            DEFAULT_CONFIG);
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"check", no_argument, NULL, 'k'},
        {"watch", no_argument, NULL, 'w'},
        {"version", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *path = DEFAULT_CONFIG;
    struct config_errors errs;
    struct config *cfg;
    struct server *srv;
    int check = 0;
    bool watch = false;
    int c, rc;

    while ((c = getopt_long(argc, argv, "c:vh", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            path = optarg;
            break;
        case 'k':
            check = 1;
            break;
        case 'w':
            watch = true;
            break;
        case 'v':
            printf("sluice %s\n", SLUICE_VERSION);
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "sluice: unexpected argument \"%s\"\n", argv[optind]);
        usage(stderr);
        return 2;
    }

    config_errors_init(&errs);
    cfg = config_load(path, &errs);
    /* Certificates and keys are read now: --check reports them too. */
    if (cfg != NULL && tls_attach(cfg, &errs) < 0) {
        config_unref(cfg);
        cfg = NULL;
    }
    if (cfg == NULL) {
        for (size_t i = 0; i < errs.n; i++) {
            fprintf(stderr, "%s\n", errs.v[i]);
        }
        fprintf(stderr, "sluice: %s: %zu error%s\n", path, errs.n,
                errs.n == 1 ? "" : "s");
        config_errors_deinit(&errs);
        return 1;
    }
    config_errors_deinit(&errs);
    if (check) {
        char *text = config_describe(cfg);

        printf("sluice: %s: ok, %zu route%s\n", path, cfg->nroutes,
               cfg->nroutes == 1 ? "" : "s");
        fputs(text, stdout);
        free(text);
        config_unref(cfg);
        return 0;
    }
    log_set_level((enum log_level)cfg->log_level);
    for (size_t i = 0; i < cfg->warnings.n; i++) {
        log_warn("config: %s", cfg->warnings.v[i]);
    }
    srv = server_new(cfg, watch);
    config_unref(cfg);
    if (srv == NULL) {
        return 1;
    }
    rc = server_run(srv);
    server_free(srv);
    return rc;
}
