/*
 * The cost of one MPI call as a program sees it: the call N times, timed with clock_gettime
 * around the loop. Built and run by scripts/bench-call-cost.sh with and without
 * libjitter_preload.so; the difference per call is what the library adds to it.
 *
 *   call_cost N waitall     MPI_Waitall(0, NULL, MPI_STATUSES_IGNORE): a call that does nothing
 *                           (the hot path of JITTER_PROFILE or JITTER_INJECT=boundary)
 *   call_cost N barrier     MPI_Barrier(MPI_COMM_WORLD)
 *   call_cost N allreduce   MPI_Allreduce of one double (MPI_SUM)
 *
 * Prints "per_call_ns X" (rank 0).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void call(int which) {
    double x = 1.0, y;
    switch (which) {
    case 0: MPI_Waitall(0, NULL, MPI_STATUSES_IGNORE); break;
    case 1: MPI_Barrier(MPI_COMM_WORLD); break;
    default: MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); break;
    }
}

int main(int argc, char **argv) {
    int which = argc == 3 ? (strcmp(argv[2], "waitall") == 0     ? 0
                             : strcmp(argv[2], "barrier") == 0   ? 1
                             : strcmp(argv[2], "allreduce") == 0 ? 2
                                                                 : -1)
                          : -1;
    if (which < 0) {
        fprintf(stderr, "usage: %s N waitall|barrier|allreduce\n", argv[0]);
        return 2;
    }
    long n = atol(argv[1]);
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    /* Warm up the call path (symbol lookups, caches). */
    for (long i = 0; i < 1000; i++) call(which);
    MPI_Barrier(MPI_COMM_WORLD);
    double t = now_ns();
    for (long i = 0; i < n; i++) call(which);
    t = now_ns() - t;
    if (rank == 0) printf("per_call_ns %.2f\n", t / n);
    MPI_Finalize();
    return 0;
}
