/* A C program against emulator/include/jitter_emulator.h, built and run by tests/capi_c.rs:
 * every error path returns its code and message, then a short replay of the trace in argv[1]. */
#include "jitter_emulator.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define CHECK(cond)                                                          \
    do {                                                                     \
        if (!(cond)) {                                                       \
            char m[256];                                                     \
            jb_emulator_last_error(m, sizeof m);                             \
            fprintf(stderr, "line %d: %s failed (last error: %s)\n", __LINE__, #cond, m); \
            return 1;                                                        \
        }                                                                    \
    } while (0)

static void own_alarm(int sig) { (void)sig; }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    char msg[256];
    if (argc != 2) return 2;
    CHECK(jb_emulator_last_error(msg, sizeof msg) == 0 && msg[0] == 0);
    CHECK(jb_emulator_start(NULL, 0, 1.0, JB_TIMER_ABSTIME) == JB_ERR_ARGUMENT);
    CHECK(jb_emulator_last_error(msg, sizeof msg) > 0 && strstr(msg, "null") != NULL);
    CHECK(jb_emulator_start_with(argv[1], 0, 1.0, 7, 0, 0, 0) == JB_ERR_ARGUMENT);
    CHECK(jb_emulator_start_with("/nonexistent/t.jtr", 0, 1.0, JB_TIMER_ABSTIME, 0, 0, 0) ==
          JB_ERR_TRACE);
    CHECK(jb_emulator_start_with(argv[1], 3, 1.0, JB_TIMER_ABSTIME, 0, 0, 0) == JB_ERR_TRACE);
    CHECK(jb_emulator_stop() == JB_ERR_NOT_RUNNING);
    CHECK(jb_emulator_resync(0) == JB_ERR_NOT_RUNNING);
    CHECK(jb_emulator_finished() == JB_ERR_NOT_RUNNING);
    CHECK(jb_emulator_progress() < 0);
    /* An application with its own SIGALRM handler is refused, and its handler stays. */
    struct sigaction own, seen;
    memset(&own, 0, sizeof own);
    own.sa_handler = own_alarm;
    CHECK(sigaction(SIGALRM, &own, NULL) == 0);
    CHECK(jb_emulator_start_with(argv[1], 0, 1.0, JB_TIMER_ABSTIME, 5000, 0, 0) ==
          JB_ERR_SIGNAL_IN_USE);
    CHECK(jb_emulator_last_error(msg, sizeof msg) > 0 && strstr(msg, "SIGALRM") != NULL &&
          strstr(msg, "jitter-inject") != NULL);
    CHECK(jb_emulator_progress() < 0);
    CHECK(sigaction(SIGALRM, NULL, &seen) == 0 && seen.sa_handler == own_alarm);
    own.sa_handler = SIG_DFL;
    CHECK(sigaction(SIGALRM, &own, NULL) == 0);

    CHECK(jb_emulator_start_with(argv[1], 0, 1.0, JB_TIMER_ABSTIME, 5000, 0, 0) == JB_OK);
    CHECK(jb_emulator_start_with(argv[1], 0, 1.0, JB_TIMER_ABSTIME, 5000, 0, 0) ==
          JB_ERR_ALREADY_RUNNING);
    double t = now_s();
    while (now_s() - t < 0.1) {
    }
    double p = jb_emulator_progress();
    CHECK(p > 0.05 && p < 0.5);
    CHECK(jb_emulator_finished() == 0);
    CHECK(jb_emulator_resync(500000000ULL) == JB_OK);
    CHECK(jb_emulator_stop() == JB_OK);
    CHECK(jb_emulator_stop() == JB_ERR_NOT_RUNNING);
    /* A short buffer gets a truncated, NUL-terminated message and the full length back. */
    char small[4];
    int n = jb_emulator_last_error(small, sizeof small);
    CHECK(n > 3 && strlen(small) == 3);
    printf("ok %.3f\n", p);
    return 0;
}
