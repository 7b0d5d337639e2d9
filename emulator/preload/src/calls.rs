//! The wrapped MPI functions besides `MPI_Init`, `MPI_Finalize` and `MPI_Barrier` (in `lib`) and
//! the waits of `waits`: each forwards its arguments unchanged to its `PMPI_` twin, is a
//! boundary of call-boundary injection ([`paying`]) and, under `JITTER_PROFILE`, records its
//! site ([`profiling::around`]) where it has one. Handles (communicator, datatype, op, request,
//! status, window, file and message pointers) travel as pointer-sized values and are only ever
//! passed back to the MPI library (see the crate docs on `MPI_Comm`).
//!
//! **Adding a function is one line** of the [`wrappers!`] list: its C signature, how it behaves
//! and, optionally, its profile site:
//!
//! * `local MPI_X(args)`: returns at once (nonblocking starts, tests, queries): paid at entry;
//! * `blocking MPI_X(args)`: may wait and has no nonblocking twin: paid at entry and, for what
//!   fell due inside, on return;
//! * `blocking MPI_X(args) twin MPI_IX`: a point-to-point call whose nonblocking twin takes the
//!   same arguments and a request: polled when a detour may fall due before the call's likely
//!   end; `twins` also wraps `MPI_IX` as a `local` call;
//! * `collective MPI_X(args) twin[s] MPI_IX`: a collective, always polled through its twin;
//! * `… site EXPR`: the call's [`Site`] under `JITTER_PROFILE` (the arguments are in scope).
//!
//! The site's bytes are count × `PMPI_Type_size`; peers are made relative with
//! `PMPI_Comm_rank`/`PMPI_Comm_size` of the call's communicator. A call whose size query fails
//! records 0 for it.

use std::ffi::{c_char, c_int, c_void, CStr};

use jitter_profile::site::{relative_peer, ROOT_NONE};
use jitter_profile::{Call, Site};

use crate::nesting::outermost;
use crate::paying::{self, until_done, Choice, Estimate, Polled, Request};
use crate::profiling::around;
use crate::Next;

/// Any MPI handle passed by value, or a pointer the MPI library owns the meaning of.
pub(crate) type H = *mut c_void;
/// `MPI_Aint`.
type Aint = isize;
/// `MPI_Offset`.
type Offset = i64;

/// The `PMPI_` name of an `MPI_` function, as a C string.
macro_rules! pmpi {
    ($name:ident) => {{
        const NAME: &CStr =
            match CStr::from_bytes_with_nul(concat!("P", stringify!($name), "\0").as_bytes()) {
                Ok(n) => n,
                Err(_) => panic!("an MPI function's name holds no NUL"),
            };
        NAME
    }};
}

/// The `PMPI_` function `next` as a function of type `F`.
macro_rules! real {
    ($next:expr, $ty:ty) => {
        // SAFETY: the address is the MPI library's function of that name, whose C signature
        // is `$ty` (the MPI standard's, handles as pointer-sized values).
        unsafe { std::mem::transmute::<*mut c_void, $ty>($next.address()) }
    };
}
pub(crate) use real;

/// The nonblocking or test form `$next` of a wrapped call as a function of type `$ty`, `None`
/// when the MPI library lacks it (the wrapper then blocks as the program asked).
macro_rules! twin {
    ($next:expr, $ty:ty) => {
        $next.find().map(|p| {
            // SAFETY: the address is the MPI library's function of that name, whose C
            // signature is `$ty` (the MPI standard's, handles as pointer-sized values).
            unsafe { std::mem::transmute::<*mut c_void, $ty>(p) }
        })
    };
}
pub(crate) use twin;

/// Exports the wrapper `$name` under its `PMPI_` name too: a Fortran binding, ROMIO or another
/// PMPI tool calls the `PMPI_` name, and the wrapper's one body serves both (the outermost
/// entry acts, [`crate::nesting`]; its own forward goes to the next `PMPI_` function with
/// `RTLD_NEXT`, never back here).
macro_rules! also_pmpi {
    ($name:ident($($a:ident: $t:ty),* $(,)?)) => {
        const _: () = {
            #[doc = concat!("`P", stringify!($name), "`: the wrapper of `", stringify!($name), "`.")]
            ///
            /// # Safety
            /// As the MPI function of that name: the arguments are forwarded unchanged.
            #[export_name = concat!("P", stringify!($name))]
            unsafe extern "C" fn pmpi($($a: $t),*) -> c_int {
                // SAFETY: the caller's arguments, passed unchanged to the wrapper of the same
                // function under its `MPI_` name.
                unsafe { $name($($a),*) }
            }
        };
    };
}
pub(crate) use also_pmpi;

/// `call()` recorded at the site `site` (an expression) under `JITTER_PROFILE`.
macro_rules! profiled {
    ($call:expr) => {
        $call()
    };
    ($call:expr, $site:expr) => {
        around(|| $site, $call)
    };
}

/// One `#[no_mangle]` wrapper per line (module docs).
macro_rules! wrappers {
    () => {};
    ($(#[$doc:meta])* local $name:ident($($a:ident: $t:ty),* $(,)?) $(site $site:expr)?;
     $($rest:tt)*) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As the MPI function of that name: the arguments are forwarded unchanged.
        #[no_mangle]
        #[allow(non_snake_case)]
        pub unsafe extern "C" fn $name($($a: $t),*) -> c_int {
            static NEXT: Next = Next::new(pmpi!($name));
            let real = real!(NEXT, unsafe extern "C" fn($($t),*) -> c_int);
            // SAFETY: the caller's arguments, forwarded unchanged.
            let call = || unsafe { real($($a),*) };
            outermost(call, || paying::local(|| profiled!(call $(, $site)?)))
        }
        also_pmpi!($name($($a: $t),*));
        wrappers!($($rest)*);
    };
    ($(#[$doc:meta])* blocking $name:ident($($a:ident: $t:ty),* $(,)?) $(site $site:expr)?;
     $($rest:tt)*) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As the MPI function of that name: the arguments are forwarded unchanged.
        #[no_mangle]
        #[allow(non_snake_case)]
        pub unsafe extern "C" fn $name($($a: $t),*) -> c_int {
            static NEXT: Next = Next::new(pmpi!($name));
            static EST: Estimate = Estimate::new();
            let real = real!(NEXT, unsafe extern "C" fn($($t),*) -> c_int);
            // SAFETY: the caller's arguments, forwarded unchanged.
            let call = || unsafe { real($($a),*) };
            outermost(call, || {
                paying::blocking(Choice::Local(&EST), || profiled!(call $(, $site)?), None)
            })
        }
        also_pmpi!($name($($a: $t),*));
        wrappers!($($rest)*);
    };
    ($(#[$doc:meta])* blocking $name:ident($($a:ident: $t:ty),* $(,)?) twin $twin:ident
     $(site $site:expr)?; $($rest:tt)*) => {
        wrappers!(@polled Local $(#[$doc])* $name($($a: $t),*) twin $twin $(site $site)?);
        wrappers!($($rest)*);
    };
    ($(#[$doc:meta])* collective $name:ident($($a:ident: $t:ty),* $(,)?) twin $twin:ident
     $(site $site:expr)?; $($rest:tt)*) => {
        wrappers!(@polled Collective $(#[$doc])* $name($($a: $t),*) twin $twin $(site $site)?);
        wrappers!($($rest)*);
    };
    ($(#[$doc:meta])* collective $name:ident($($a:ident: $t:ty),* $(,)?) twins $twin:ident
     $(site $site:expr)?; $($rest:tt)*) => {
        wrappers!($(#[$doc])* collective $name($($a: $t),*) twin $twin $(site $site)?;);
        wrappers!(
            #[doc = concat!("`", stringify!($twin), "`.")]
            local $twin($($a: $t,)* request: *mut Request);
        );
        wrappers!($($rest)*);
    };
    (@polled $choice:ident $(#[$doc:meta])* $name:ident($($a:ident: $t:ty),*) twin $twin:ident
     $(site $site:expr)?) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As the MPI function of that name: the arguments are forwarded unchanged (to it, or
        /// to its nonblocking twin with a request of this wrapper's).
        #[no_mangle]
        #[allow(non_snake_case)]
        pub unsafe extern "C" fn $name($($a: $t),*) -> c_int {
            static NEXT: Next = Next::new(pmpi!($name));
            static TWIN: Next = Next::new(pmpi!($twin));
            let real = real!(NEXT, unsafe extern "C" fn($($t),*) -> c_int);
            // SAFETY: the caller's arguments, forwarded unchanged.
            let call = || unsafe { real($($a),*) };
            // The MPI library's nonblocking twin: the same arguments and a request.
            let twin = twin!(TWIN, unsafe extern "C" fn($($t,)* *mut Request) -> c_int);
            let mut run = twin.map(|f| move |pay: &mut dyn FnMut()| -> c_int {
                #[allow(unused_mut)]
                let mut go = || {
                    let mut request: Request = 0;
                    // SAFETY: the caller's arguments and a request of ours.
                    let rc = unsafe { f($($a,)* &mut request) };
                    if rc != 0 {
                        return rc;
                    }
                    let mut status = [0u64; STATUS_WORDS];
                    wait_request(pay, &mut request, status.as_mut_ptr().cast())
                };
                profiled!(go $(, $site)?)
            });
            outermost(call, || {
                paying::blocking(
                    wrappers!(@choice $choice EST),
                    || profiled!(call $(, $site)?),
                    run.as_mut().map(|r| -> Polled<'_> { r }),
                )
            })
        }
        also_pmpi!($name($($a: $t),*));
    };
    (@choice Collective $est:ident) => { Choice::Collective };
    (@choice Local $est:ident) => {{
        static $est: Estimate = Estimate::new();
        Choice::Local(&$est)
    }};
    ($(#[$doc:meta])* blocking $name:ident($($a:ident: $t:ty),* $(,)?) twins $twin:ident
     $(site $site:expr)?; $($rest:tt)*) => {
        wrappers!($(#[$doc])* blocking $name($($a: $t),*) twin $twin $(site $site)?;);
        wrappers!(
            #[doc = concat!("`", stringify!($twin), "`.")]
            local $twin($($a: $t,)* request: *mut Request);
        );
        wrappers!($($rest)*);
    };
}

/// `u64` words of scratch for an `MPI_Status` this library asks for and ignores (OpenMPI's
/// is 24 bytes, MPICH's 20).
pub(crate) const STATUS_WORDS: usize = 8;

static PMPI_TEST: Next = Next::new(c"PMPI_Test");

/// Polls `request` with `PMPI_Test` until it completes, paying between polls.
pub(crate) fn wait_request(pay: &mut dyn FnMut(), request: *mut Request, status: H) -> c_int {
    let test = real!(
        PMPI_TEST,
        unsafe extern "C" fn(*mut Request, *mut c_int, H) -> c_int
    );
    // SAFETY: a live request of the caller's and a writable flag and status.
    until_done(pay, |flag| unsafe { test(request, flag, status) })
}

static PMPI_TYPE_SIZE: Next = Next::new(c"PMPI_Type_size");
static PMPI_COMM_SIZE: Next = Next::new(c"PMPI_Comm_size");
static PMPI_COMM_RANK: Next = Next::new(c"PMPI_Comm_rank");

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

/// The `int` an MPI call just wrote through its output argument `p` (0 when `p` is null).
pub(crate) fn written(p: *const c_int) -> c_int {
    if p.is_null() {
        return 0;
    }
    // SAFETY: `p` is an output argument of the MPI call that just returned, which MPI requires
    // to be a valid `int` and which that call wrote.
    unsafe { *p }
}

/// A wait's or test's site: `n` requests completed (`MPI_UNDEFINED` or less: none).
pub(crate) fn completed(call: Call, n: c_int) -> Site {
    Site {
        requests: n.max(0) as u32,
        ..Site::of(call)
    }
}

pub(crate) fn type_bytes(count: c_int, datatype: H) -> u64 {
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
pub(crate) fn p2p(call: Call, bytes: u64, comm: H, peer: c_int, source: Option<c_int>) -> Site {
    let (size, rank) = (comm_size(comm), query(&PMPI_COMM_RANK, comm));
    Site {
        comm_size: size.max(0) as u32,
        bytes,
        peer: relative_peer(peer, rank, size),
        root: source.map_or(ROOT_NONE, |s| relative_peer(s, rank, size)),
        ..Site::of(call)
    }
}

/// `MPI_Alltoallv`'s bytes: Σ sendcounts × type size.
fn alltoallv_bytes(sendcounts: *const c_int, sendtype: H, comm: H) -> u64 {
    let n = usize::try_from(comm_size(comm)).unwrap_or(0);
    let counts = if sendcounts.is_null() || n == 0 {
        &[][..]
    } else {
        // SAFETY: MPI requires `sendcounts` to hold one count per rank of `comm`.
        unsafe { std::slice::from_raw_parts(sendcounts, n) }
    };
    type_bytes(counts.iter().map(|&c| c.max(0)).sum(), sendtype)
}

type P = *mut c_void;
type CP = *const c_void;
type Ints = *const c_int;

wrappers! {
    // Collectives: always through their MPI-3 twin (module docs of `paying`).
    /// `MPI_Allreduce`.
    collective MPI_Allreduce(sendbuf: CP, recvbuf: P, count: c_int, datatype: H, op: H, comm: H)
        twins MPI_Iallreduce
        site collective(Call::Allreduce, type_bytes(count, datatype), comm, ROOT_NONE);
    /// `MPI_Reduce`.
    collective MPI_Reduce(sendbuf: CP, recvbuf: P, count: c_int, datatype: H, op: H, root: c_int,
        comm: H) twins MPI_Ireduce
        site collective(Call::Reduce, type_bytes(count, datatype), comm, root);
    /// `MPI_Bcast`.
    collective MPI_Bcast(buffer: P, count: c_int, datatype: H, root: c_int, comm: H)
        twins MPI_Ibcast site collective(Call::Bcast, type_bytes(count, datatype), comm, root);
    /// `MPI_Allgather`: bytes = this rank's contribution.
    collective MPI_Allgather(sendbuf: CP, sendcount: c_int, sendtype: H, recvbuf: P,
        recvcount: c_int, recvtype: H, comm: H) twins MPI_Iallgather
        site collective(Call::Allgather, type_bytes(sendcount, sendtype), comm, ROOT_NONE);
    /// `MPI_Alltoall`: bytes = what this rank sends in all.
    collective MPI_Alltoall(sendbuf: CP, sendcount: c_int, sendtype: H, recvbuf: P,
        recvcount: c_int, recvtype: H, comm: H) twins MPI_Ialltoall
        site collective(
            Call::Alltoall,
            u64::try_from(comm_size(comm)).unwrap_or(0) * type_bytes(sendcount, sendtype),
            comm,
            ROOT_NONE,
        );
    /// `MPI_Alltoallv`: bytes = Σ sendcounts × type size.
    collective MPI_Alltoallv(sendbuf: CP, sendcounts: Ints, sdispls: Ints, sendtype: H, recvbuf: P,
        recvcounts: Ints, rdispls: Ints, recvtype: H, comm: H) twins MPI_Ialltoallv
        site collective(Call::Alltoallv, alltoallv_bytes(sendcounts, sendtype, comm), comm,
            ROOT_NONE);
    /// `MPI_Alltoallw`.
    collective MPI_Alltoallw(sendbuf: CP, sendcounts: Ints, sdispls: Ints, sendtypes: *const H,
        recvbuf: P, recvcounts: Ints, rdispls: Ints, recvtypes: *const H, comm: H)
        twins MPI_Ialltoallw;
    /// `MPI_Allgatherv`.
    collective MPI_Allgatherv(sendbuf: CP, sendcount: c_int, sendtype: H, recvbuf: P,
        recvcounts: Ints, displs: Ints, recvtype: H, comm: H) twins MPI_Iallgatherv;
    /// `MPI_Gather`.
    collective MPI_Gather(sendbuf: CP, sendcount: c_int, sendtype: H, recvbuf: P, recvcount: c_int,
        recvtype: H, root: c_int, comm: H) twins MPI_Igather;
    /// `MPI_Gatherv`.
    collective MPI_Gatherv(sendbuf: CP, sendcount: c_int, sendtype: H, recvbuf: P,
        recvcounts: Ints, displs: Ints, recvtype: H, root: c_int, comm: H) twins MPI_Igatherv;
    /// `MPI_Scatter`.
    collective MPI_Scatter(sendbuf: CP, sendcount: c_int, sendtype: H, recvbuf: P,
        recvcount: c_int, recvtype: H, root: c_int, comm: H) twins MPI_Iscatter;
    /// `MPI_Scatterv`.
    collective MPI_Scatterv(sendbuf: CP, sendcounts: Ints, displs: Ints, sendtype: H, recvbuf: P,
        recvcount: c_int, recvtype: H, root: c_int, comm: H) twins MPI_Iscatterv;
    /// `MPI_Reduce_scatter`.
    collective MPI_Reduce_scatter(sendbuf: CP, recvbuf: P, recvcounts: Ints, datatype: H, op: H,
        comm: H) twins MPI_Ireduce_scatter;
    /// `MPI_Reduce_scatter_block`.
    collective MPI_Reduce_scatter_block(sendbuf: CP, recvbuf: P, recvcount: c_int, datatype: H,
        op: H, comm: H) twins MPI_Ireduce_scatter_block;
    /// `MPI_Scan`.
    collective MPI_Scan(sendbuf: CP, recvbuf: P, count: c_int, datatype: H, op: H, comm: H)
        twins MPI_Iscan;
    /// `MPI_Exscan`.
    collective MPI_Exscan(sendbuf: CP, recvbuf: P, count: c_int, datatype: H, op: H, comm: H)
        twins MPI_Iexscan;
    /// `MPI_Neighbor_allgather`.
    collective MPI_Neighbor_allgather(sendbuf: CP, sendcount: c_int, sendtype: H, recvbuf: P,
        recvcount: c_int, recvtype: H, comm: H) twins MPI_Ineighbor_allgather;
    /// `MPI_Neighbor_allgatherv`.
    collective MPI_Neighbor_allgatherv(sendbuf: CP, sendcount: c_int, sendtype: H, recvbuf: P,
        recvcounts: Ints, displs: Ints, recvtype: H, comm: H) twins MPI_Ineighbor_allgatherv;
    /// `MPI_Neighbor_alltoall`.
    collective MPI_Neighbor_alltoall(sendbuf: CP, sendcount: c_int, sendtype: H, recvbuf: P,
        recvcount: c_int, recvtype: H, comm: H) twins MPI_Ineighbor_alltoall;
    /// `MPI_Neighbor_alltoallv`.
    collective MPI_Neighbor_alltoallv(sendbuf: CP, sendcounts: Ints, sdispls: Ints, sendtype: H,
        recvbuf: P, recvcounts: Ints, rdispls: Ints, recvtype: H, comm: H)
        twins MPI_Ineighbor_alltoallv;
    /// `MPI_Neighbor_alltoallw`.
    collective MPI_Neighbor_alltoallw(sendbuf: CP, sendcounts: Ints, sdispls: *const Aint,
        sendtypes: *const H, recvbuf: P, recvcounts: Ints, rdispls: *const Aint,
        recvtypes: *const H, comm: H) twins MPI_Ineighbor_alltoallw;
    /// `MPI_Comm_dup`.
    collective MPI_Comm_dup(comm: H, newcomm: *mut H) twin MPI_Comm_idup;

    // Sends: polled through their nonblocking twin (a rendezvous send waits for its receiver).
    /// `MPI_Send`.
    blocking MPI_Send(buf: CP, count: c_int, datatype: H, dest: c_int, tag: c_int, comm: H)
        twin MPI_Isend site p2p(Call::Send, type_bytes(count, datatype), comm, dest, None);
    /// `MPI_Ssend`.
    blocking MPI_Ssend(buf: CP, count: c_int, datatype: H, dest: c_int, tag: c_int, comm: H)
        twins MPI_Issend;
    /// `MPI_Bsend`.
    blocking MPI_Bsend(buf: CP, count: c_int, datatype: H, dest: c_int, tag: c_int, comm: H)
        twins MPI_Ibsend;
    /// `MPI_Rsend`.
    blocking MPI_Rsend(buf: CP, count: c_int, datatype: H, dest: c_int, tag: c_int, comm: H)
        twins MPI_Irsend;

    // Calls that may wait and have no nonblocking twin: paid on return.
    /// `MPI_Sendrecv_replace`.
    blocking MPI_Sendrecv_replace(buf: P, count: c_int, datatype: H, dest: c_int, sendtag: c_int,
        source: c_int, recvtag: c_int, comm: H, status: H);
    /// `MPI_Comm_split`.
    blocking MPI_Comm_split(comm: H, color: c_int, key: c_int, newcomm: *mut H);
    /// `MPI_Comm_split_type`.
    blocking MPI_Comm_split_type(comm: H, split_type: c_int, key: c_int, info: H,
        newcomm: *mut H);
    /// `MPI_Comm_create`.
    blocking MPI_Comm_create(comm: H, group: H, newcomm: *mut H);
    /// `MPI_Comm_free`.
    blocking MPI_Comm_free(comm: *mut H);
    /// `MPI_Cart_sub`.
    blocking MPI_Cart_sub(comm: H, remain_dims: Ints, newcomm: *mut H);
    /// `MPI_Win_create`.
    blocking MPI_Win_create(base: P, size: Aint, disp_unit: c_int, info: H, comm: H,
        win: *mut H);
    /// `MPI_Win_allocate`.
    blocking MPI_Win_allocate(size: Aint, disp_unit: c_int, info: H, comm: H, baseptr: P,
        win: *mut H);
    /// `MPI_Win_free`.
    blocking MPI_Win_free(win: *mut H);
    /// `MPI_Win_fence`.
    blocking MPI_Win_fence(assert: c_int, win: H);
    /// `MPI_Win_lock`.
    blocking MPI_Win_lock(lock_type: c_int, rank: c_int, assert: c_int, win: H);
    /// `MPI_Win_unlock`.
    blocking MPI_Win_unlock(rank: c_int, win: H);
    /// `MPI_Win_flush`.
    blocking MPI_Win_flush(rank: c_int, win: H);
    /// `MPI_File_open`.
    blocking MPI_File_open(comm: H, filename: *const c_char, amode: c_int, info: H, fh: *mut H);
    /// `MPI_File_close`.
    blocking MPI_File_close(fh: *mut H);
    /// `MPI_File_set_view`.
    blocking MPI_File_set_view(fh: H, disp: Offset, etype: H, filetype: H,
        datarep: *const c_char, info: H);
    /// `MPI_File_sync`.
    blocking MPI_File_sync(fh: H);
    /// `MPI_File_read`.
    blocking MPI_File_read(fh: H, buf: P, count: c_int, datatype: H, status: H);
    /// `MPI_File_write`.
    blocking MPI_File_write(fh: H, buf: CP, count: c_int, datatype: H, status: H);
    /// `MPI_File_read_at`.
    blocking MPI_File_read_at(fh: H, offset: Offset, buf: P, count: c_int, datatype: H,
        status: H);
    /// `MPI_File_write_at`.
    blocking MPI_File_write_at(fh: H, offset: Offset, buf: CP, count: c_int, datatype: H,
        status: H);
    /// `MPI_File_read_all`.
    blocking MPI_File_read_all(fh: H, buf: P, count: c_int, datatype: H, status: H);
    /// `MPI_File_write_all`.
    blocking MPI_File_write_all(fh: H, buf: CP, count: c_int, datatype: H, status: H);
    /// `MPI_File_read_at_all`.
    blocking MPI_File_read_at_all(fh: H, offset: Offset, buf: P, count: c_int, datatype: H,
        status: H);
    /// `MPI_File_write_at_all`.
    blocking MPI_File_write_at_all(fh: H, offset: Offset, buf: CP, count: c_int, datatype: H,
        status: H);

    // Calls that return at once: paid at entry.
    /// `MPI_Isend`.
    local MPI_Isend(buf: CP, count: c_int, datatype: H, dest: c_int, tag: c_int, comm: H,
        request: *mut Request)
        site p2p(Call::Isend, type_bytes(count, datatype), comm, dest, None);
    /// `MPI_Irecv`.
    local MPI_Irecv(buf: P, count: c_int, datatype: H, source: c_int, tag: c_int, comm: H,
        request: *mut Request)
        site p2p(Call::Irecv, type_bytes(count, datatype), comm, source, None);
    /// `MPI_Ibarrier`.
    local MPI_Ibarrier(comm: H, request: *mut Request);
    /// `MPI_Imrecv`: bytes = the posted buffer.
    local MPI_Imrecv(buf: P, count: c_int, datatype: H, message: *mut H, request: *mut Request)
        site Site {
            bytes: type_bytes(count, datatype),
            ..Site::of(Call::Imrecv)
        };
    /// `MPI_Test`.
    local MPI_Test(request: *mut Request, flag: *mut c_int, status: H);
    /// `MPI_Testall`: recorded when it completed its requests.
    local MPI_Testall(count: c_int, requests: *mut Request, flag: *mut c_int, statuses: H)
        site (written(flag) != 0).then(|| completed(Call::Testall, count));
    /// `MPI_Testany`: recorded when it completed a request.
    local MPI_Testany(count: c_int, requests: *mut Request, index: *mut c_int, flag: *mut c_int,
        status: H)
        site (written(flag) != 0 && written(index) >= 0).then(|| completed(Call::Testany, 1));
    /// `MPI_Testsome`: recorded when it completed requests.
    local MPI_Testsome(incount: c_int, requests: *mut Request, outcount: *mut c_int,
        indices: *mut c_int, statuses: H)
        site (written(outcount) > 0).then(|| completed(Call::Testsome, written(outcount)));
    /// `MPI_Iprobe`: recorded when it found a message; peer = the source asked for.
    local MPI_Iprobe(source: c_int, tag: c_int, comm: H, flag: *mut c_int, status: H)
        site (written(flag) != 0).then(|| p2p(Call::Iprobe, 0, comm, source, None));
    /// `MPI_Improbe`: recorded when it found a message; peer = the source asked for.
    local MPI_Improbe(source: c_int, tag: c_int, comm: H, flag: *mut c_int, message: *mut H,
        status: H)
        site (written(flag) != 0).then(|| p2p(Call::Improbe, 0, comm, source, None));
    /// `MPI_Request_free`.
    local MPI_Request_free(request: *mut Request);
    /// `MPI_Cancel`.
    local MPI_Cancel(request: *mut Request);
    /// `MPI_Send_init`.
    local MPI_Send_init(buf: CP, count: c_int, datatype: H, dest: c_int, tag: c_int, comm: H,
        request: *mut Request);
    /// `MPI_Recv_init`.
    local MPI_Recv_init(buf: P, count: c_int, datatype: H, source: c_int, tag: c_int, comm: H,
        request: *mut Request);
    /// `MPI_Start`.
    local MPI_Start(request: *mut Request);
    /// `MPI_Startall`.
    local MPI_Startall(count: c_int, requests: *mut Request);
    /// `MPI_Put`.
    local MPI_Put(origin: CP, origin_count: c_int, origin_type: H, target_rank: c_int,
        target_disp: Aint, target_count: c_int, target_type: H, win: H);
    /// `MPI_Get`.
    local MPI_Get(origin: P, origin_count: c_int, origin_type: H, target_rank: c_int,
        target_disp: Aint, target_count: c_int, target_type: H, win: H);
    /// `MPI_Accumulate`.
    local MPI_Accumulate(origin: CP, origin_count: c_int, origin_type: H, target_rank: c_int,
        target_disp: Aint, target_count: c_int, target_type: H, op: H, win: H);
    /// `MPI_Comm_rank`.
    local MPI_Comm_rank(comm: H, rank: *mut c_int);
    /// `MPI_Comm_size`.
    local MPI_Comm_size(comm: H, size: *mut c_int);
}
