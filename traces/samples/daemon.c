/* A synthetic periodic daemon for the real sample `vm-daemon-cpu1.jtr`: it wakes every PERIOD_US
 * on an absolute CLOCK_MONOTONIC schedule (no drift) and spins SPIN_US, for SECONDS seconds.
 * Run it pinned and real-time, e.g. `taskset -c 1 chrt -f 50 ./daemon 10000 300 12`.
 * Build: `cc -O2 -o daemon daemon.c`. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s PERIOD_US SPIN_US SECONDS\n", argv[0]);
        return 2;
    }
    long long period = atoll(argv[1]) * 1000LL, spin = atoll(argv[2]) * 1000LL;
    long long secs = atoll(argv[3]);
    if (period <= 0 || spin <= 0 || spin >= period || secs <= 0) {
        fprintf(stderr, "error: need 0 < SPIN_US < PERIOD_US and SECONDS > 0\n");
        return 2;
    }
    long long start = now_ns(), next = start + period, wakeups = 0;
    while (next < start + secs * 1000000000LL) {
        struct timespec t = {next / 1000000000LL, next % 1000000000LL};
        int rc;
        while ((rc = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL)) == EINTR) {
        }
        if (rc != 0) {
            fprintf(stderr, "error: clock_nanosleep failed (%d)\n", rc);
            return 1;
        }
        long long end = now_ns() + spin;
        while (now_ns() < end) {
        }
        wakeups++;
        next += period;
    }
    printf("daemon: %lld wake-ups of %lld us every %lld us\n", wakeups, spin / 1000, period / 1000);
    return 0;
}
