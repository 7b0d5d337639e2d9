/*
 * A PMPI layer as an MPI library or another tool may hold one, built by
 * emulator/preload/tests/fortran.rs with `mpicc -shared` and preloaded after
 * libjitter_preload.so: its PMPI_Send sends through PMPI_Isend and PMPI_Wait, which the
 * dynamic linker resolves to the first library that defines them, jitterbench's. A call the
 * program makes to MPI_Send thus enters jitterbench's wrappers three times.
 */
#include <mpi.h>

int PMPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
    MPI_Request request;
    int rc = PMPI_Isend(buf, count, type, dest, tag, comm, &request);
    if (rc != MPI_SUCCESS) return rc;
    return PMPI_Wait(&request, MPI_STATUS_IGNORE);
}
