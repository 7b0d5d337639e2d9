/*
 * Held-out program 3: a ring, written for scripts/validate-app.sh from the words of the issue
 * it validates (a program written outside the project, knowing nothing of jitterbench).
 *
 * Set-up: SETUP multiply-adds of work before the loop (a real code reads its input and builds
 * its grid there), one MPI_Bcast of the parameters. The loop, ITERATIONS times:
 *   compute (WORK multiply-adds, split in three parts around the calls);
 *   MPI_Sendrecv of 8 KiB to the next rank, from the previous one;
 *   two MPI_Allreduce of one double (a residual and a norm);
 * no barrier. Output: OUTPUT multiply-adds after the loop (writing results), one MPI_Reduce.
 * Rank 0 prints the mean time of one iteration of the loop, in ns:
 *
 *   iter_ns 921234.5
 *
 * Usage: ring ITERATIONS WORK [SETUP [OUTPUT]]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define HALO 1024 /* doubles: 8 KiB */

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

static long whole(const char *text, const char *what) {
    char *end = NULL;
    long v = strtol(text, &end, 10);
    if (end == text || *end != '\0' || v < 0) {
        fprintf(stderr, "ring: error: %s must be a whole number >= 0 (got '%s')\n", what, text);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 5) {
        fprintf(stderr, "usage: ring ITERATIONS WORK [SETUP [OUTPUT]]\n");
        return 2;
    }
    long iterations = whole(argv[1], "ITERATIONS");
    long work = whole(argv[2], "WORK");
    long setup = argc > 3 ? whole(argv[3], "SETUP") : 50 * work;
    long output = argc > 4 ? whole(argv[4], "OUTPUT") : 20 * work;
    if (iterations == 0) {
        fprintf(stderr, "ring: error: ITERATIONS must be at least 1\n");
        return 2;
    }

    MPI_Init(&argc, &argv);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;

    double state = chain(setup, 1.0 + rank);
    long params[2] = {iterations, work};
    MPI_Bcast(params, 2, MPI_LONG, 0, MPI_COMM_WORLD);
    static double out[HALO], in[HALO];
    for (int i = 0; i < HALO; i++) out[i] = state + i;

    double start = seconds();
    for (long it = 0; it < params[0]; it++) {
        state = chain(params[1] / 2, state);
        out[it % HALO] = state;
        MPI_Sendrecv(out, HALO, MPI_DOUBLE, next, 7, in, HALO, MPI_DOUBLE, prev, 7,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        state = chain(params[1] / 4, state + 1e-9 * in[it % HALO]);
        double residual = state, total = 0.0;
        MPI_Allreduce(&residual, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        state = chain(params[1] - params[1] / 2 - params[1] / 4, 1.0 + total * 1e-9);
        double norm = 0.0;
        MPI_Allreduce(&state, &norm, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        state = 1.0 + norm * 1e-9;
    }
    double elapsed = seconds() - start;

    state = chain(output, state);
    double sum = 0.0;
    MPI_Reduce(&state, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    result_sink = sum;
    if (rank == 0) {
        printf("iter_ns %.1f\n", 1e9 * elapsed / (double)params[0]);
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}
