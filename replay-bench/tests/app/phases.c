/*
 * A plain MPI program that knows nothing of jitterbench, for `replay-bench app`'s test: a fixed
 * amount of work in PHASES phases separated by MPI_Barrier; rank 0 prints the loop's wall time.
 *
 *   phases --calibrate NS         prints the iterations of work that take NS (no MPI)
 *   phases ITERATIONS PHASES      runs the loop; rank 0 prints "loop_ns <ns>"
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile double sink;

static void work(long n) {
    double x = 1.0;
    for (long i = 0; i < n; i++) x = x * 1.0000001 + 1e-9;
    sink = x;
}

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--calibrate") == 0) {
        double target = atof(argv[2]), best = 1e300;
        long n = 1000000;
        for (int k = 0; k < 20; k++) {
            double t = now_ns();
            work(n);
            t = now_ns() - t;
            if (t < best) best = t;
        }
        printf("%ld\n", (long)(target / (best / n)));
        return 0;
    }
    if (argc != 3) {
        fprintf(stderr, "usage: %s ITERATIONS PHASES | --calibrate NS\n", argv[0]);
        return 2;
    }
    long iterations = atol(argv[1]);
    int phases = atoi(argv[2]), rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now_ns();
    for (int p = 0; p < phases; p++) {
        work(iterations);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    double t = now_ns() - t0;
    if (rank == 0) printf("loop_ns %.0f\n", t);
    MPI_Finalize();
    return 0;
}
