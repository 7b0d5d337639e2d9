/*
 * An MPI program that knows nothing of jitterbench and makes, round after round, the calls
 * libjitter_preload.so wraps, checking every result: collectives (Barrier, Bcast, Reduce,
 * Allreduce, Gather(v), Scatter(v), Allgather(v), Alltoall(v), Reduce_scatter_block, Scan,
 * Exscan, Comm_dup/split/free), point-to-point in every form the library polls (Send/Recv,
 * Ssend, Sendrecv, Isend/Irecv with Wait, Waitall, Waitany, Waitsome, Probe and Iprobe), and
 * nonblocking collectives the program polls itself (Iallreduce with Test). Built by
 * emulator/preload/tests/mpi.rs with mpicc and run with JITTER_INJECT=boundary under a dense
 * trace, where most calls run through their nonblocking twin.
 *
 *   calls ROUNDS     rank 0 prints "calls rounds R bad B"; exit 1 unless B = 0
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define N 64

static long bad;

static void check(int ok) {
    if (!ok) bad++;
}

static void compute(long n) {
    volatile double x = 1.0;
    for (long i = 0; i < n; i++) x = x * 1.0000001 + 1e-9;
}

static void collectives(int rank, int size, int round) {
    int v = rank + round, sum = 0, all[N], counts[N], displs[N], out[N];
    MPI_Barrier(MPI_COMM_WORLD);
    int b = rank == 0 ? round : -1;
    MPI_Bcast(&b, 1, MPI_INT, 0, MPI_COMM_WORLD);
    check(b == round);
    MPI_Reduce(&v, &sum, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    check(rank != 0 || sum == size * (size - 1) / 2 + size * round);
    MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    check(sum == size * (size - 1) / 2 + size * round);
    MPI_Gather(&v, 1, MPI_INT, all, 1, MPI_INT, 0, MPI_COMM_WORLD);
    for (int r = 0; rank == 0 && r < size; r++) check(all[r] == r + round);
    for (int r = 0; r < size; r++) counts[r] = 1, displs[r] = r;
    MPI_Gatherv(&v, 1, MPI_INT, all, counts, displs, MPI_INT, 0, MPI_COMM_WORLD);
    for (int r = 0; rank == 0 && r < size; r++) check(all[r] == r + round);
    int got = -1;
    MPI_Scatter(all, 1, MPI_INT, &got, 1, MPI_INT, 0, MPI_COMM_WORLD);
    check(got == rank + round);
    MPI_Scatterv(all, counts, displs, MPI_INT, &got, 1, MPI_INT, 0, MPI_COMM_WORLD);
    check(got == rank + round);
    MPI_Allgather(&v, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
    for (int r = 0; r < size; r++) check(all[r] == r + round);
    MPI_Allgatherv(&v, 1, MPI_INT, all, counts, displs, MPI_INT, MPI_COMM_WORLD);
    for (int r = 0; r < size; r++) check(all[r] == r + round);
    for (int r = 0; r < size; r++) all[r] = rank * 100 + r;
    MPI_Alltoall(all, 1, MPI_INT, out, 1, MPI_INT, MPI_COMM_WORLD);
    for (int r = 0; r < size; r++) check(out[r] == r * 100 + rank);
    MPI_Alltoallv(all, counts, displs, MPI_INT, out, counts, displs, MPI_INT, MPI_COMM_WORLD);
    for (int r = 0; r < size; r++) check(out[r] == r * 100 + rank);
    for (int r = 0; r < size; r++) all[r] = r + round;
    MPI_Reduce_scatter_block(all, &got, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    check(got == size * (rank + round));
    MPI_Scan(&v, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    check(sum == rank * (rank + 1) / 2 + (rank + 1) * round);
    MPI_Exscan(&v, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    check(rank == 0 || sum == rank * (rank - 1) / 2 + rank * round);
    MPI_Request req;
    int flag = 0;
    MPI_Iallreduce(&v, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req);
    while (!flag) MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
    check(sum == size * (size - 1) / 2 + size * round);
    MPI_Comm dup, split;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_split(dup, rank % 2, rank, &split);
    MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_MAX, split);
    check(sum >= v && sum < size + round);
    MPI_Comm_free(&split);
    MPI_Comm_free(&dup);
}

static void pairs(int rank, int size, int round) {
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int out[N], in[N], in2[N];
    for (int i = 0; i < N; i++) out[i] = rank * 1000 + round + i;
    MPI_Status st;
    MPI_Sendrecv(out, N, MPI_INT, right, 1, in, N, MPI_INT, left, 1, MPI_COMM_WORLD, &st);
    check(in[0] == left * 1000 + round && st.MPI_SOURCE == left);
    /* Even ranks send first, odd ranks receive first (blocking and synchronous sends). */
    if (rank % 2 == 0) {
        MPI_Send(out, N, MPI_INT, right, 2, MPI_COMM_WORLD);
        MPI_Recv(in, N, MPI_INT, left, 2, MPI_COMM_WORLD, &st);
        MPI_Ssend(out, N, MPI_INT, right, 3, MPI_COMM_WORLD);
        MPI_Probe(left, 3, MPI_COMM_WORLD, &st);
        MPI_Recv(in2, N, MPI_INT, st.MPI_SOURCE, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(in, N, MPI_INT, left, 2, MPI_COMM_WORLD, &st);
        MPI_Send(out, N, MPI_INT, right, 2, MPI_COMM_WORLD);
        int flag = 0;
        while (!flag) MPI_Iprobe(left, 3, MPI_COMM_WORLD, &flag, &st);
        MPI_Recv(in2, N, MPI_INT, left, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Ssend(out, N, MPI_INT, right, 3, MPI_COMM_WORLD);
    }
    check(in[N - 1] == left * 1000 + round + N - 1 && in2[0] == left * 1000 + round);
    MPI_Request req[4];
    MPI_Irecv(in, N, MPI_INT, left, 4, MPI_COMM_WORLD, &req[0]);
    MPI_Irecv(in2, N, MPI_INT, right, 5, MPI_COMM_WORLD, &req[1]);
    MPI_Isend(out, N, MPI_INT, right, 4, MPI_COMM_WORLD, &req[2]);
    MPI_Isend(out, N, MPI_INT, left, 5, MPI_COMM_WORLD, &req[3]);
    switch (round % 3) {
    case 0:
        MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
        break;
    case 1:
        for (int k = 0; k < 4; k++) {
            int index;
            MPI_Waitany(4, req, &index, MPI_STATUS_IGNORE);
            check(index >= 0 && index < 4);
        }
        break;
    default: {
        int done = 0, outcount, indices[4];
        while (done < 4) {
            MPI_Waitsome(4, req, &outcount, indices, MPI_STATUSES_IGNORE);
            check(outcount > 0);
            done += outcount;
        }
        break;
    }
    }
    check(in[1] == left * 1000 + round + 1 && in2[1] == right * 1000 + round + 1);
    MPI_Irecv(in, N, MPI_INT, left, 6, MPI_COMM_WORLD, &req[0]);
    MPI_Send(out, N, MPI_INT, right, 6, MPI_COMM_WORLD);
    MPI_Wait(&req[0], &st);
    check(in[2] == left * 1000 + round + 2 && st.MPI_TAG == 6);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s ROUNDS\n", argv[0]);
        return 2;
    }
    int rounds = atoi(argv[1]), rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int round = 0; round < rounds; round++) {
        compute(20000 + 7000 * ((round + rank) % 5));
        collectives(rank, size, round);
        compute(5000);
        pairs(rank, size, round);
    }
    long all_bad = 0;
    MPI_Reduce(&bad, &all_bad, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("calls rounds %d bad %ld\n", rounds, all_bad);
    MPI_Finalize();
    return all_bad == 0 ? 0 : 1;
}
