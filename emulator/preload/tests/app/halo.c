/*
 * A halo-exchange solver that knows nothing of jitterbench, built by emulator/preload/tests/
 * profile.rs with mpicc and run under JITTER_PROFILE. A periodic 1-D Cartesian ring; per
 * iteration: compute A; the halo (sendrecv: Sendrecv to +1 from -1, Sendrecv to -1 from +1;
 * nonblocking: Irecv from -1 and +1, Isend to +1 and -1, Waitall); compute B; Allreduce of one
 * double; compute C; Allreduce of one double. Before the loop a Barrier, after it a Reduce of
 * the ranks' own compute means and a Bcast.
 *
 *   halo MODE ITERS NA NB NC [DIE_AT]   MODE sendrecv | nonblocking; NA, NB, NC: work
 *                                        iterations of each compute; with DIE_AT rank 1 kills
 *                                        itself (SIGKILL) after iteration DIE_AT.
 *
 * Rank 0 prints the ranks' mean compute times measured with clock_gettime around each work
 * (A over iterations 1.., B and C over all) and its own time from the barrier to the end of the
 * loop: "compute_ns A B C loop_ns L".
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HALO 1024

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
    if (argc != 6 && argc != 7) {
        fprintf(stderr, "usage: %s sendrecv|nonblocking ITERS NA NB NC [DIE_AT]\n", argv[0]);
        return 2;
    }
    int nonblocking = strcmp(argv[1], "nonblocking") == 0;
    int iters = atoi(argv[2]), die_at = argc == 7 ? atoi(argv[6]) : -1;
    long na = atol(argv[3]), nb = atol(argv[4]), nc = atol(argv[5]);
    MPI_Init(&argc, &argv);
    int size, rank, dims[1] = {0}, periods[1] = {1}, left, right;
    MPI_Comm ring;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Dims_create(size, 1, dims);
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring);
    MPI_Comm_rank(ring, &rank);
    MPI_Cart_shift(ring, 0, 1, &left, &right);
    static double out_l[HALO], out_r[HALO], in_l[HALO], in_r[HALO];
    double sum[3] = {0, 0, 0}, all[3], r, local;
    MPI_Barrier(ring);
    double start = now_ns();
    for (int it = 0; it < iters; it++) {
        double t = now_ns();
        work(na);
        if (it > 0) sum[0] += now_ns() - t;
        if (nonblocking) {
            MPI_Request req[4];
            MPI_Irecv(in_l, HALO, MPI_DOUBLE, left, 0, ring, &req[0]);
            MPI_Irecv(in_r, HALO, MPI_DOUBLE, right, 1, ring, &req[1]);
            MPI_Isend(out_r, HALO, MPI_DOUBLE, right, 0, ring, &req[2]);
            MPI_Isend(out_l, HALO, MPI_DOUBLE, left, 1, ring, &req[3]);
            MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
        } else {
            MPI_Sendrecv(out_r, HALO, MPI_DOUBLE, right, 0, in_l, HALO, MPI_DOUBLE, left, 0, ring,
                         MPI_STATUS_IGNORE);
            MPI_Sendrecv(out_l, HALO, MPI_DOUBLE, left, 1, in_r, HALO, MPI_DOUBLE, right, 1, ring,
                         MPI_STATUS_IGNORE);
        }
        t = now_ns();
        work(nb);
        sum[1] += now_ns() - t;
        local = 1.0;
        MPI_Allreduce(&local, &r, 1, MPI_DOUBLE, MPI_SUM, ring);
        t = now_ns();
        work(nc);
        sum[2] += now_ns() - t;
        MPI_Allreduce(&local, &r, 1, MPI_DOUBLE, MPI_MAX, ring);
        if (it == die_at && rank == 1) raise(SIGKILL);
    }
    double loop = now_ns() - start;
    sum[0] /= iters > 1 ? iters - 1 : 1;
    sum[1] /= iters;
    sum[2] /= iters;
    MPI_Reduce(sum, all, 3, MPI_DOUBLE, MPI_SUM, 0, ring);
    MPI_Bcast(all, 3, MPI_DOUBLE, 0, ring);
    if (rank == 0)
        printf("compute_ns %.0f %.0f %.0f loop_ns %.0f\n", all[0] / size, all[1] / size,
               all[2] / size, loop);
    MPI_Finalize();
    return 0;
}
