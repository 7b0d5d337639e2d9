//! The profiled MPI calls besides `MPI_Barrier` (in `lib`): each wrapper forwards its arguments
//! unchanged to its `PMPI_` twin and, under `JITTER_PROFILE`, records its site
//! ([`profiling::around`]). Handles (communicator, datatype, op, request and status pointers)
//! travel as pointer-sized values and are only ever passed back to the MPI library (see the
//! crate docs on `MPI_Comm`).
//!
//! The site's bytes are count × `PMPI_Type_size`; peers are made relative with
//! `PMPI_Comm_rank`/`PMPI_Comm_size` of the call's communicator. A call whose size query fails
//! records 0 for it.

use std::ffi::{c_int, c_void};

use jitter_profile::site::{relative_peer, ROOT_NONE};
use jitter_profile::{Call, Site};

use crate::profiling::{self, around};
use crate::Next;

/// Any MPI handle passed by value, or a pointer the MPI library owns the meaning of.
type H = *mut c_void;

static PMPI_TYPE_SIZE: Next = Next::new(c"PMPI_Type_size");
static PMPI_COMM_SIZE: Next = Next::new(c"PMPI_Comm_size");
static PMPI_COMM_RANK: Next = Next::new(c"PMPI_Comm_rank");
static PMPI_ALLREDUCE: Next = Next::new(c"PMPI_Allreduce");
static PMPI_REDUCE: Next = Next::new(c"PMPI_Reduce");
static PMPI_BCAST: Next = Next::new(c"PMPI_Bcast");
static PMPI_ALLGATHER: Next = Next::new(c"PMPI_Allgather");
static PMPI_ALLTOALL: Next = Next::new(c"PMPI_Alltoall");
static PMPI_ALLTOALLV: Next = Next::new(c"PMPI_Alltoallv");
static PMPI_SEND: Next = Next::new(c"PMPI_Send");
static PMPI_RECV: Next = Next::new(c"PMPI_Recv");
static PMPI_ISEND: Next = Next::new(c"PMPI_Isend");
static PMPI_IRECV: Next = Next::new(c"PMPI_Irecv");
static PMPI_WAIT: Next = Next::new(c"PMPI_Wait");
static PMPI_WAITALL: Next = Next::new(c"PMPI_Waitall");
static PMPI_SENDRECV: Next = Next::new(c"PMPI_Sendrecv");
static PMPI_CART_CREATE: Next = Next::new(c"PMPI_Cart_create");

/// The `PMPI_` function `next` as a function of type `F`.
macro_rules! real {
    ($next:expr, $ty:ty) => {
        // SAFETY: the address is the MPI library's function of that name, whose C signature
        // is `$ty` (the MPI standard's, handles as pointer-sized values).
        unsafe { std::mem::transmute::<*mut c_void, $ty>($next.address()) }
    };
}

type QueryFn = unsafe extern "C" fn(H, *mut c_int) -> c_int;

/// An `int` out of a query (`PMPI_Type_size` and kin), 0 when it fails.
fn query(next: &Next, handle: H) -> i32 {
    let f = real!(next, QueryFn);
    let mut v: c_int = 0;
    // SAFETY: `handle` is the program's handle, passed back unchanged; `v` is writable.
    if unsafe { f(handle, &mut v) } == 0 {
        v
    } else {
        0
    }
}

fn type_bytes(count: c_int, datatype: H) -> u64 {
    u64::try_from(count).unwrap_or(0) * u64::try_from(query(&PMPI_TYPE_SIZE, datatype)).unwrap_or(0)
}

pub(crate) fn comm_size(comm: H) -> i32 {
    query(&PMPI_COMM_SIZE, comm)
}

/// A collective's site.
fn collective(call: Call, bytes: u64, comm: H, root: i32) -> Site {
    Site {
        comm_size: comm_size(comm).max(0) as u32,
        bytes,
        root,
        ..Site::of(call)
    }
}

/// A point-to-point site with `peer` (and, for `Sendrecv`, `source` in `root`).
fn p2p(call: Call, bytes: u64, comm: H, peer: c_int, source: Option<c_int>) -> Site {
    let (size, rank) = (comm_size(comm), query(&PMPI_COMM_RANK, comm));
    Site {
        comm_size: size.max(0) as u32,
        bytes,
        peer: relative_peer(peer, rank, size),
        root: source.map_or(ROOT_NONE, |s| relative_peer(s, rank, size)),
        ..Site::of(call)
    }
}

/// `MPI_Allreduce`.
///
/// # Safety
/// As `MPI_Allreduce`.
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn MPI_Allreduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: H,
    op: H,
    comm: H,
) -> c_int {
    let f = real!(
        PMPI_ALLREDUCE,
        unsafe extern "C" fn(*const c_void, *mut c_void, c_int, H, H, H) -> c_int
    );
    let site = || {
        collective(
            Call::Allreduce,
            type_bytes(count, datatype),
            comm,
            ROOT_NONE,
        )
    };
    // SAFETY: the caller's arguments, forwarded unchanged.
    around(site, || unsafe {
        f(sendbuf, recvbuf, count, datatype, op, comm)
    })
}

/// `MPI_Reduce`.
///
/// # Safety
/// As `MPI_Reduce`.
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn MPI_Reduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: H,
    op: H,
    root: c_int,
    comm: H,
) -> c_int {
    let f = real!(
        PMPI_REDUCE,
        unsafe extern "C" fn(*const c_void, *mut c_void, c_int, H, H, c_int, H) -> c_int
    );
    let site = || collective(Call::Reduce, type_bytes(count, datatype), comm, root);
    // SAFETY: the caller's arguments, forwarded unchanged.
    around(site, || unsafe {
        f(sendbuf, recvbuf, count, datatype, op, root, comm)
    })
}

/// `MPI_Bcast`.
///
/// # Safety
/// As `MPI_Bcast`.
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn MPI_Bcast(
    buffer: *mut c_void,
    count: c_int,
    datatype: H,
    root: c_int,
    comm: H,
) -> c_int {
    let f = real!(
        PMPI_BCAST,
        unsafe extern "C" fn(*mut c_void, c_int, H, c_int, H) -> c_int
    );
    let site = || collective(Call::Bcast, type_bytes(count, datatype), comm, root);
    // SAFETY: the caller's arguments, forwarded unchanged.
    around(site, || unsafe { f(buffer, count, datatype, root, comm) })
}

type GatherFn = unsafe extern "C" fn(*const c_void, c_int, H, *mut c_void, c_int, H, H) -> c_int;

/// `MPI_Allgather`: bytes = this rank's contribution.
///
/// # Safety
/// As `MPI_Allgather`.
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn MPI_Allgather(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: H,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: H,
    comm: H,
) -> c_int {
    let f = real!(PMPI_ALLGATHER, GatherFn);
    let site = || {
        collective(
            Call::Allgather,
            type_bytes(sendcount, sendtype),
            comm,
            ROOT_NONE,
        )
    };
    // SAFETY: the caller's arguments, forwarded unchanged.
    around(site, || unsafe {
        f(
            sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
        )
    })
}

/// `MPI_Alltoall`: bytes = what this rank sends in all.
///
/// # Safety
/// As `MPI_Alltoall`.
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn MPI_Alltoall(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: H,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: H,
    comm: H,
) -> c_int {
    let f = real!(PMPI_ALLTOALL, GatherFn);
    let site = || {
        let n = u64::try_from(comm_size(comm)).unwrap_or(0);
        collective(
            Call::Alltoall,
            n * type_bytes(sendcount, sendtype),
            comm,
            ROOT_NONE,
        )
    };
    // SAFETY: the caller's arguments, forwarded unchanged.
    around(site, || unsafe {
        f(
            sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
        )
    })
}

/// `MPI_Alltoallv`: bytes = Σ sendcounts × type size.
///
/// # Safety
/// As `MPI_Alltoallv`: the count and displacement arrays hold the communicator's size entries.
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn MPI_Alltoallv(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtype: H,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtype: H,
    comm: H,
) -> c_int {
    type F = unsafe extern "C" fn(
        *const c_void,
        *const c_int,
        *const c_int,
        H,
        *mut c_void,
        *const c_int,
        *const c_int,
        H,
        H,
    ) -> c_int;
    let f = real!(PMPI_ALLTOALLV, F);
    let site = || {
        let n = usize::try_from(comm_size(comm)).unwrap_or(0);
        let counts = if sendcounts.is_null() || n == 0 {
            &[][..]
        } else {
            // SAFETY: MPI requires `sendcounts` to hold one count per rank of `comm`.
            unsafe { std::slice::from_raw_parts(sendcounts, n) }
        };
        let total: c_int = counts.iter().map(|&c| c.max(0)).sum();
        collective(
            Call::Alltoallv,
            type_bytes(total, sendtype),
            comm,
            ROOT_NONE,
        )
    };
    // SAFETY: the caller's arguments, forwarded unchanged.
    around(site, || unsafe {
        f(
            sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm,
        )
    })
}

/// `MPI_Send`.
///
/// # Safety
/// As `MPI_Send`.
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn MPI_Send(
    buf: *const c_void,
    count: c_int,
    datatype: H,
    dest: c_int,
    tag: c_int,
    comm: H,
) -> c_int {
    let f = real!(
        PMPI_SEND,
        unsafe extern "C" fn(*const c_void, c_int, H, c_int, c_int, H) -> c_int
    );
    let site = || p2p(Call::Send, type_bytes(count, datatype), comm, dest, None);
    // SAFETY: the caller's arguments, forwarded unchanged.
    around(site, || unsafe { f(buf, count, datatype, dest, tag, comm) })
}

/// `MPI_Recv`: bytes = the posted buffer.
///
/// # Safety
/// As `MPI_Recv`.
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn MPI_Recv(
    buf: *mut c_void,
    count: c_int,
    datatype: H,
    source: c_int,
    tag: c_int,
    comm: H,
    status: H,
) -> c_int {
    let f = real!(
        PMPI_RECV,
        unsafe extern "C" fn(*mut c_void, c_int, H, c_int, c_int, H, H) -> c_int
    );
    let site = || p2p(Call::Recv, type_bytes(count, datatype), comm, source, None);
    // SAFETY: the caller's arguments, forwarded unchanged.
    around(site, || unsafe {
        f(buf, count, datatype, source, tag, comm, status)
    })
}

type NonBlockingFn = unsafe extern "C" fn(*mut c_void, c_int, H, c_int, c_int, H, H) -> c_int;

/// `MPI_Isend`.
///
/// # Safety
/// As `MPI_Isend`.
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn MPI_Isend(
    buf: *mut c_void,
    count: c_int,
    datatype: H,
    dest: c_int,
    tag: c_int,
    comm: H,
    request: H,
) -> c_int {
    let f = real!(PMPI_ISEND, NonBlockingFn);
    let site = || p2p(Call::Isend, type_bytes(count, datatype), comm, dest, None);
    // SAFETY: the caller's arguments, forwarded unchanged.
    around(site, || unsafe {
        f(buf, count, datatype, dest, tag, comm, request)
    })
}

/// `MPI_Irecv`.
///
/// # Safety
/// As `MPI_Irecv`.
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn MPI_Irecv(
    buf: *mut c_void,
    count: c_int,
    datatype: H,
    source: c_int,
    tag: c_int,
    comm: H,
    request: H,
) -> c_int {
    let f = real!(PMPI_IRECV, NonBlockingFn);
    let site = || p2p(Call::Irecv, type_bytes(count, datatype), comm, source, None);
    // SAFETY: the caller's arguments, forwarded unchanged.
    around(site, || unsafe {
        f(buf, count, datatype, source, tag, comm, request)
    })
}

/// `MPI_Wait`.
///
/// # Safety
/// As `MPI_Wait`.
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn MPI_Wait(request: H, status: H) -> c_int {
    let f = real!(PMPI_WAIT, unsafe extern "C" fn(H, H) -> c_int);
    let site = || Site {
        requests: 1,
        ..Site::of(Call::Wait)
    };
    // SAFETY: the caller's arguments, forwarded unchanged.
    around(site, || unsafe { f(request, status) })
}

/// `MPI_Waitall`.
///
/// # Safety
/// As `MPI_Waitall`.
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn MPI_Waitall(count: c_int, requests: H, statuses: H) -> c_int {
    let f = real!(PMPI_WAITALL, unsafe extern "C" fn(c_int, H, H) -> c_int);
    let site = || Site {
        requests: count.max(0) as u32,
        ..Site::of(Call::Waitall)
    };
    // SAFETY: the caller's arguments, forwarded unchanged.
    around(site, || unsafe { f(count, requests, statuses) })
}

/// `MPI_Sendrecv`: bytes = what it sends; peer = dest, the source kept beside it.
///
/// # Safety
/// As `MPI_Sendrecv`.
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn MPI_Sendrecv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: H,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: H,
    source: c_int,
    recvtag: c_int,
    comm: H,
    status: H,
) -> c_int {
    type F = unsafe extern "C" fn(
        *const c_void,
        c_int,
        H,
        c_int,
        c_int,
        *mut c_void,
        c_int,
        H,
        c_int,
        c_int,
        H,
        H,
    ) -> c_int;
    let f = real!(PMPI_SENDRECV, F);
    let bytes = || type_bytes(sendcount, sendtype);
    let site = || p2p(Call::Sendrecv, bytes(), comm, dest, Some(source));
    // SAFETY: the caller's arguments, forwarded unchanged.
    around(site, || unsafe {
        f(
            sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source,
            recvtag, comm, status,
        )
    })
}

/// `MPI_Cart_create`: forwarded; under `JITTER_PROFILE` the topology is recorded.
///
/// # Safety
/// As `MPI_Cart_create`: `dims` and `periods` hold `ndims` entries.
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn MPI_Cart_create(
    comm_old: H,
    ndims: c_int,
    dims: *const c_int,
    periods: *const c_int,
    reorder: c_int,
    comm_cart: H,
) -> c_int {
    let f = real!(
        PMPI_CART_CREATE,
        unsafe extern "C" fn(H, c_int, *const c_int, *const c_int, c_int, H) -> c_int
    );
    // SAFETY: the caller's arguments, forwarded unchanged.
    let rc = unsafe { f(comm_old, ndims, dims, periods, reorder, comm_cart) };
    if rc == 0 && (1..=8).contains(&ndims) && !dims.is_null() && !periods.is_null() {
        let n = ndims as usize;
        // SAFETY: MPI requires `dims` and `periods` to hold `ndims` entries.
        let (d, p) = unsafe {
            (
                std::slice::from_raw_parts(dims, n),
                std::slice::from_raw_parts(periods, n),
            )
        };
        profiling::cartesian(d, p);
    }
    rc
}
