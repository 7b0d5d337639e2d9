/*
 * Held-out program 1 of issue 32: a bulk-synchronous loop, written for the validation of
 * `replay-bench predict --app` (scripts/validate-app.sh) and knowing nothing of jitterbench.
 *
 * Every iteration does a fixed amount of floating-point work, then synchronises:
 *   barrier    compute; MPI_Barrier                        (the default)
 *   allreduce  compute; MPI_Allreduce of one double (sum)
 * The work is a dependent chain of WORK multiply-adds: its time is fixed by the argument, not
 * sized at start-up. Rank 0 prints the mean and the median time of one iteration of the timed
 * loop, in ns (the median is robust to the preemptions of a busy machine, for a constant shift
 * such as a tool's cost):
 *
 *   iter_ns 1012345.6
 *   iter_median_ns 1001234.0
 *
 * Usage: bulk ITERATIONS WORK [barrier|allreduce]
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
        fprintf(stderr, "bulk: error: %s must be a whole number > 0 (got '%s')\n", what, text);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: bulk ITERATIONS WORK [barrier|allreduce]\n");
        return 2;
    }
    long iterations = positive(argv[1], "ITERATIONS");
    long work = positive(argv[2], "WORK");
    int use_allreduce = 0;
    if (argc == 4) {
        if (strcmp(argv[3], "allreduce") == 0) {
            use_allreduce = 1;
        } else if (strcmp(argv[3], "barrier") != 0) {
            fprintf(stderr, "bulk: error: mode must be barrier or allreduce (got '%s')\n", argv[3]);
            return 2;
        }
    }

    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);

    double state = 1.0 + rank;
    MPI_Barrier(MPI_COMM_WORLD);
    double *took = malloc((size_t)iterations * sizeof(double));
    if (took == NULL) {
        fprintf(stderr, "%s: error: cannot allocate %ld doubles\n", argv[0], iterations);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    double start = seconds(), last = start;
    for (long it = 0; it < iterations; it++) {
        state = chain(work, state);
        if (use_allreduce) {
            double total = 0.0;
            MPI_Allreduce(&state, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            state = 1.0 + total * 1e-9;
        } else {
            MPI_Barrier(MPI_COMM_WORLD);
        }
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
    MPI_Finalize();
    return 0;
}
