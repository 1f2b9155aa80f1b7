/*
 * busy_wait: the seeded busy-spin behaviour burns CPU here, so that CPU samples land under
 * this symbol.  It polls CLOCK_MONOTONIC (a vDSO call, no system call, no sleep) until the
 * requested time has passed.
 */
#define _POSIX_C_SOURCE 200809L

#include "client.h"

#include <time.h>

static uint64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Iterations of the volatile counter between two clock readings: enough that nearly all
 * CPU samples fall in busy_wait itself rather than in the vDSO's clock_gettime, so that a
 * profile attributes the spin to busy_wait even without call-graph unwinding. */
#define SPINS_PER_CHECK 4096u

PROBED uint64_t busy_wait(unsigned ms)
{
    /* volatile: the compiler must keep every iteration of the spin. */
    volatile uint64_t spins = 0;
    const uint64_t deadline = monotonic_ns() + (uint64_t)ms * 1000000u;
    while (monotonic_ns() < deadline)
        for (unsigned i = 0; i < SPINS_PER_CHECK; i++)
            spins = spins + 1;
    return spins;
}
