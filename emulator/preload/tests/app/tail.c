/*
 * A program whose last stretch of computing runs between its last MPI call and MPI_Finalize,
 * as a code with no MPI in its time steps at one rank (Meep) or one that writes its output
 * last: MPI_Init, MPI_Barrier, then MS ms of spinning on CLOCK_MONOTONIC, then MPI_Finalize.
 * Built by emulator/preload/tests/profile.rs with mpicc.
 *
 *   tail MS
 */
#include <mpi.h>
#include <stdlib.h>
#include <time.h>

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    if (argc != 2) MPI_Abort(MPI_COMM_WORLD, 2);
    double ms = atof(argv[1]);
    MPI_Barrier(MPI_COMM_WORLD);
    double end = now_ns() + ms * 1e6;
    while (now_ns() < end) {
    }
    return MPI_Finalize();
}
