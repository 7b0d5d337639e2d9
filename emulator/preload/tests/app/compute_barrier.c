/*
 * Algorithm 1 of paper 001 as a plain MPI program that knows nothing of jitterbench: a fixed
 * amount of work, then MPI_Barrier, every phase timed with clock_gettime. Built by
 * emulator/preload/tests/mpi.rs with mpicc and run with and without libjitter_preload.so.
 *
 *   compute_barrier --calibrate NS           prints the iterations that take NS (no MPI)
 *   compute_barrier ITERATIONS PHASES WARMUP  rank 0 prints, over the phases after WARMUP, the
 *                                             median and mean of the per-phase maximum over
 *                                             ranks of the compute time qt, and the median and
 *                                             mean of that of the phase time qtb (compute and
 *                                             barrier), in ns
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

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
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
    if (argc != 4) {
        fprintf(stderr, "usage: %s ITERATIONS PHASES WARMUP | --calibrate NS\n", argv[0]);
        return 2;
    }
    long iterations = atol(argv[1]);
    int phases = atoi(argv[2]), warmup = atoi(argv[3]);
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double *qt = calloc(2 * phases, sizeof *qt), *max_qt = calloc(2 * phases, sizeof *max_qt);
    double *qtb = qt + phases, *max_qtb = max_qt + phases;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int p = 0; p < phases; p++) {
        double t1 = now_ns();
        work(iterations);
        qt[p] = now_ns() - t1;
        MPI_Barrier(MPI_COMM_WORLD);
        qtb[p] = now_ns() - t1;
    }
    MPI_Reduce(qt, max_qt, 2 * phases, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        int n = phases - warmup;
        double sum = 0, sum_b = 0;
        for (int p = warmup; p < phases; p++) sum += max_qt[p], sum_b += max_qtb[p];
        qsort(max_qt + warmup, n, sizeof *max_qt, cmp);
        qsort(max_qtb + warmup, n, sizeof *max_qtb, cmp);
        double median = n % 2 ? max_qt[warmup + n / 2]
                              : 0.5 * (max_qt[warmup + n / 2 - 1] + max_qt[warmup + n / 2]);
        double median_b = n % 2 ? max_qtb[warmup + n / 2]
                                : 0.5 * (max_qtb[warmup + n / 2 - 1] + max_qtb[warmup + n / 2]);
        printf("median_max_qt_ns %.0f mean_max_qt_ns %.0f median_max_qtb_ns %.0f "
               "mean_max_qtb_ns %.0f phases %d\n",
               median, sum / n, median_b, sum_b / n, n);
    }
    free(qt);
    free(max_qt);
    MPI_Finalize();
    return 0;
}
