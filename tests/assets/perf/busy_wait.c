/*
 * A tiny program that burns its CPU time in busy_wait(), for the perf collector's
 * integration test: perf must attribute the largest inclusive weight among this
 * program's own functions (entry points excluded) to busy_wait.
 *
 *   gcc -O0 -g -fno-omit-frame-pointer -o busy_wait busy_wait.c
 *   ./busy_wait SECONDS EXIT_STATUS
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

static double elapsed(const struct timespec *start)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - start->tv_sec) + (double)(now.tv_nsec - start->tv_nsec) / 1e9;
}

/* noinline: the symbol must survive as its own frame in every call chain. */
__attribute__((noinline)) void busy_wait(double seconds)
{
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    while (elapsed(&start) < seconds) {
        for (int i = 0; i < 10000; i++)
            sink += (unsigned long)i;
    }
}

/* A short warm-up outside busy_wait, so that busy_wait is not the only client frame. */
__attribute__((noinline)) unsigned long warm_up(void)
{
    unsigned long total = 0;
    for (unsigned long i = 0; i < 20000000ul; i++)
        total += i ^ (total >> 3);
    return total;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 0.5;
    int status = argc > 2 ? atoi(argv[2]) : 0;
    unsigned long total = warm_up();
    busy_wait(seconds);
    printf("spun %.2f s (%lu)\n", seconds, total & 1ul);
    return status;
}
