/*
 * Held-out program 2 of issue 32: a halo-exchange solver with two allreduces per iteration,
 * written for the validation of `replay-bench predict --app` (scripts/validate-app.sh) and
 * knowing nothing of jitterbench.
 *
 * The ranks form a periodic 2-D grid (MPI_Dims_create, MPI_Cart_create); each iteration:
 *   1. pack the four faces                    (WORK/16 multiply-adds)
 *   2. MPI_Irecv ×4, MPI_Isend ×4 to the grid neighbours (MPI_Cart_shift; at a dimension of
 *      size 1 or 2 a neighbour may be the rank itself or the same rank twice), HALO doubles each
 *   3. interior update                        (WORK multiply-adds), overlapping the messages
 *   4. MPI_Waitall of the eight requests
 *   5. boundary update                        (WORK/4)
 *   6. MPI_Allreduce of the residual (1 double, max)
 *   7. local norm                             (WORK/8)
 *   8. MPI_Allreduce of the norm (2 doubles, sum)
 * Uneven compute between calls, fixed by the arguments (nothing is sized at start-up). Rank 0
 * prints the mean and the median time of one iteration of the timed loop, in ns (the median
 * is robust to the preemptions of a busy machine, for a constant shift such as a tool's cost):
 *
 *   iter_ns 1412345.6
 *   iter_median_ns 1150123.0
 *
 * Usage: halo ITERATIONS WORK [HALO]     (HALO: doubles per face, default 512)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile double result_sink;

/* WORK dependent multiply-adds: the compiler cannot shorten a chain it must evaluate in order. */
static double chain(long work, double seed) {
    double v = seed;
    for (long k = 0; k < work; k++) v = v * 0.999999937 + 0.5e-7;
    return v;
}

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of the n > 0 values of v (sorted in place). */
static double median(double *v, long n) {
    qsort(v, (size_t)n, sizeof(double), by_value);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static long positive(const char *text, const char *what) {
    char *end = NULL;
    long v = strtol(text, &end, 10);
    if (end == text || *end != '\0' || v <= 0) {
        fprintf(stderr, "halo: error: %s must be a whole number > 0 (got '%s')\n", what, text);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: halo ITERATIONS WORK [HALO]\n");
        return 2;
    }
    long iterations = positive(argv[1], "ITERATIONS");
    long work = positive(argv[2], "WORK");
    long halo = argc == 4 ? positive(argv[3], "HALO") : 512;

    MPI_Init(&argc, &argv);
    int size = 0, rank = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int dims[2] = {0, 0}, periods[2] = {1, 1};
    MPI_Dims_create(size, 2, dims);
    MPI_Comm grid;
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &grid);
    MPI_Comm_rank(grid, &rank);
    int neighbour[4]; /* low and high along dimension 0, then dimension 1 */
    MPI_Cart_shift(grid, 0, 1, &neighbour[0], &neighbour[1]);
    MPI_Cart_shift(grid, 1, 1, &neighbour[2], &neighbour[3]);

    double *send = calloc((size_t)(4 * halo), sizeof(double));
    double *recv = calloc((size_t)(4 * halo), sizeof(double));
    if (send == NULL || recv == NULL) {
        fprintf(stderr, "halo: error: cannot allocate %ld doubles\n", 8 * halo);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    double state = 1.0 + rank;
    MPI_Request req[8];
    MPI_Barrier(grid);
    double *took = malloc((size_t)iterations * sizeof(double));
    if (took == NULL) {
        fprintf(stderr, "%s: error: cannot allocate %ld doubles\n", argv[0], iterations);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    double start = seconds(), last = start;
    for (long it = 0; it < iterations; it++) {
        state = chain(work / 16, state);
        for (int f = 0; f < 4; f++) send[f * halo] = state + f;
        /* The face sent towards neighbour f arrives there as the face from the opposite side
         * (f ^ 1), so the tag names the receiving side. */
        for (int f = 0; f < 4; f++)
            MPI_Irecv(recv + f * halo, (int)halo, MPI_DOUBLE, neighbour[f], f, grid, &req[f]);
        for (int f = 0; f < 4; f++)
            MPI_Isend(send + f * halo, (int)halo, MPI_DOUBLE, neighbour[f], f ^ 1, grid,
                      &req[4 + f]);
        state = chain(work, state);
        MPI_Waitall(8, req, MPI_STATUSES_IGNORE);
        state = chain(work / 4, state + 1e-12 * recv[0]);
        double residual = state, max_residual = 0.0;
        MPI_Allreduce(&residual, &max_residual, 1, MPI_DOUBLE, MPI_MAX, grid);
        state = chain(work / 8, state);
        double norm[2] = {state * state, 1.0}, total[2] = {0.0, 0.0};
        MPI_Allreduce(norm, total, 2, MPI_DOUBLE, MPI_SUM, grid);
        state = 1.0 + 1e-9 * (total[0] + max_residual);
        double now = seconds();
        took[it] = now - last;
        last = now;
    }
    double elapsed = last - start;
    result_sink = state;
    if (rank == 0) {
        printf("iter_ns %.1f\n", 1e9 * elapsed / (double)iterations);
        printf("iter_median_ns %.1f\n", 1e9 * median(took, iterations));
        fflush(stdout);
    }
    free(took);
    free(send);
    free(recv);
    MPI_Comm_free(&grid);
    MPI_Finalize();
    return 0;
}
