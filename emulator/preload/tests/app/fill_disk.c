/*
 * A plain MPI program that fills a file system while it runs: after MPI_Init, rank 0 writes
 * FILE until the file system is full (ENOSPC), then every rank makes ROUNDS MPI_Allreduce calls
 * of its rank number and checks each sum. Built by emulator/preload/tests/full_disk.rs with
 * mpicc: the preload library's records must already own their blocks, so the program's MPI calls
 * after the disk is full are recorded without a signal.
 *
 *   fill_disk FILE ROUNDS   rank 0 prints "filled B bytes, ROUNDS sums of S checked"
 */
#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s FILE ROUNDS\n", argv[0]);
        return 2;
    }
    int rounds = atoi(argv[2]);
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long filled = 0;
    if (rank == 0) {
        FILE *f = fopen(argv[1], "w");
        if (!f) {
            perror(argv[1]);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        static char block[4096];
        memset(block, 1, sizeof block);
        setvbuf(f, NULL, _IONBF, 0);
        while (fwrite(block, 1, sizeof block, f) == sizeof block) filled += sizeof block;
        if (errno != ENOSPC) {
            perror("fill");
            MPI_Abort(MPI_COMM_WORLD, 4);
        }
        fclose(f);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    long want = (long)size * (size - 1) / 2, sum = 0;
    for (int i = 0; i < rounds; i++) {
        long mine = rank;
        MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        if (sum != want) {
            fprintf(stderr, "round %d: sum %ld, want %ld\n", i, sum, want);
            MPI_Abort(MPI_COMM_WORLD, 5);
        }
    }
    if (rank == 0) printf("filled %ld bytes, %d sums of %ld checked\n", filled, rounds, want);
    MPI_Finalize();
    return 0;
}
