! A ring in Fortran that knows nothing of jitterbench, built by emulator/preload/tests/fortran.rs
! with mpif90 (with -DMPIF_H through mpif.h, else through the mpi module) and run under
! JITTER_PROFILE or JITTER_INJECT=boundary. Per iteration: a compute; mpi_sendrecv of 128
! doubles to rank + 1 from rank - 1; mpi_allreduce of one double; the sum is checked.
!
!   ring ITERS WORK    WORK: iterations of the compute
!
! Rank 0 prints "fring iterations ITERS bad BAD" (BAD: iterations whose sum was wrong).
program ring
#ifndef MPIF_H
  use mpi
#endif
  implicit none
#ifdef MPIF_H
  include 'mpif.h'
#endif
  integer, parameter :: n = 128
  integer :: ierr, rank, size, right, left, i, j, iters, work, bad
  integer :: status(MPI_STATUS_SIZE)
  double precision :: sbuf(n), rbuf(n), x, total, want
  character(len=32) :: arg

  call mpi_init(ierr)
  call mpi_comm_rank(MPI_COMM_WORLD, rank, ierr)
  call mpi_comm_size(MPI_COMM_WORLD, size, ierr)
  iters = 200
  work = 20000
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read (arg, *) iters
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read (arg, *) work
  end if
  right = mod(rank + 1, size)
  left = mod(rank - 1 + size, size)
  bad = 0
  do i = 1, iters
    x = 1.0d0
    do j = 1, work
      x = x * 1.0000001d0 + 1.0d-9
    end do
    ! The compute's result is used (it is never negative): otherwise the compiler drops the loop
    ! and the ring computes nothing, so no loop holds half the compute.
    if (x < 0.0d0) bad = bad + 1
    x = dble(i)
    sbuf = x + dble(rank)
    call mpi_sendrecv(sbuf, n, MPI_DOUBLE_PRECISION, right, 7, rbuf, n, &
                      MPI_DOUBLE_PRECISION, left, 7, MPI_COMM_WORLD, status, ierr)
    call mpi_allreduce(rbuf(n), total, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
    want = dble(size) * x + dble(size * (size - 1) / 2)
    if (abs(total - want) > 1.0d-9 * abs(want)) bad = bad + 1
  end do
  if (rank == 0) print '(a,i0,a,i0)', 'fring iterations ', iters, ' bad ', bad
  call mpi_finalize(ierr)
end program ring
