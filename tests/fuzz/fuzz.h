/*
 * fuzz.h - what the libFuzzer targets of tests/fuzz/ share: the entry
 * point's prototype and an invariant check that holds with NDEBUG too.
 * Fuzzing only; never linked into sluice.
 */
#ifndef SLUICE_FUZZ_H
#define SLUICE_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Called by libFuzzer once per input; returns 0. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An invariant broke: abort, so that libFuzzer saves the input. */
#define FUZZ_CHECK(cond)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__,         \
                    __LINE__, #cond);                                          \
            abort();                                                           \
        }                                                                      \
    } while (0)

#endif
