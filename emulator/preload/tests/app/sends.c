/*
 * Two ranks that pass one message back and forth with MPI_Send and MPI_Recv, built by
 * emulator/preload/tests/fortran.rs with mpicc and run under JITTER_PROFILE beside
 * reenter.c (a PMPI layer whose PMPI_Send calls PMPI_Isend and PMPI_Wait): each MPI_Send of
 * the program is one call, however many wrappers it passes through.
 *
 *   sends ITERS WORK    WORK: iterations of the compute before each message
 *
 * Rank 0 prints "sends ITERS bad BAD" (BAD: messages that came back wrong).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static volatile double sink;

static void work(long n) {
    double x = 1.0;
    for (long i = 0; i < n; i++) x = x * 1.0000001 + 1e-9;
    sink = x;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long iters = argc > 1 ? atol(argv[1]) : 100;
    long n = argc > 2 ? atol(argv[2]) : 20000;
    long bad = 0;
    int peer = rank ^ 1;
    for (long i = 0; i < iters && peer < size; i++) {
        long v = i, got = -1;
        work(n);
        if (rank == 0) {
            MPI_Send(&v, 1, MPI_LONG, peer, 3, MPI_COMM_WORLD);
            MPI_Recv(&got, 1, MPI_LONG, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            bad += got != i + 1;
        } else {
            MPI_Recv(&got, 1, MPI_LONG, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            v = got + 1;
            MPI_Send(&v, 1, MPI_LONG, peer, 3, MPI_COMM_WORLD);
        }
    }
    if (rank == 0) printf("sends %ld bad %ld\n", iters, bad);
    MPI_Finalize();
    return 0;
}
