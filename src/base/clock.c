#include "clock.h"

#include <time.h>

static int64_t
ms_of(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t
clock_wall_ms(void)
{
    return ms_of(CLOCK_REALTIME);
}

int64_t
clock_mono_ms(void)
{
    return ms_of(CLOCK_MONOTONIC);
}

int64_t
clock_mono_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

struct timeval
clock_tv(uint64_t ms)
{
    struct timeval tv;

    tv.tv_sec = (time_t)(ms / 1000);
    tv.tv_usec = (suseconds_t)((ms % 1000) * 1000);
    return tv;
}
