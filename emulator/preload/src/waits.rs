//! The wrapped MPI calls that wait and whose nonblocking form is not "the same arguments and a
//! request" (so not a line of `calls`' list): receives, the `Wait` family, probes and
//! `Sendrecv`, each polled through its test form when a detour may fall due inside it
//! ([`paying::blocking`]); and `MPI_Cart_create`, whose topology the profile records.

use std::ffi::{c_int, c_void};

use jitter_profile::{Call, Site};

use crate::calls::{
    also_pmpi, completed, p2p, real, twin, type_bytes, wait_request, written, H, STATUS_WORDS,
};
use crate::nesting::{outermost, Outermost};
use crate::paying::{self, until_done, Choice, Estimate, Polled, Request};
use crate::profiling::{self, around};
use crate::Next;

/// A wait polled through its test form: `test` sets its flag once the operation completed
/// (MPI return code); recorded at `site`.
fn wait_for(
    est: &Estimate,
    call: impl FnOnce() -> c_int,
    test: Option<impl FnMut(*mut c_int) -> c_int>,
    site: impl Fn() -> Site + Copy,
) -> c_int {
    let mut run = test.map(|mut test| {
        move |pay: &mut dyn FnMut()| -> c_int { around(site, || until_done(pay, &mut test)) }
    });
    let blocking = || around(site, call);
    paying::blocking(
        Choice::Local(est),
        blocking,
        run.as_mut().map(|r| -> Polled<'_> { r }),
    )
}

/// `MPI_Wait`: polled through `MPI_Test`.
///
/// # Safety
/// As `MPI_Wait`.
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn MPI_Wait(request: *mut Request, status: H) -> c_int {
    static NEXT: Next = Next::new(c"PMPI_Wait");
    static EST: Estimate = Estimate::new();
    let real = real!(NEXT, unsafe extern "C" fn(*mut Request, H) -> c_int);
    let site = || Site {
        requests: 1,
        ..Site::of(Call::Wait)
    };
    // SAFETY: the caller's arguments, forwarded unchanged.
    let call = || unsafe { real(request, status) };
    let mut run = |pay: &mut dyn FnMut()| around(site, || wait_request(pay, request, status));
    outermost(call, || {
        paying::blocking(Choice::Local(&EST), || around(site, call), Some(&mut run))
    })
}
also_pmpi!(MPI_Wait(request: *mut Request, status: H));

/// `MPI_Waitall`: polled through `MPI_Testall`.
///
/// # Safety
/// As `MPI_Waitall`.
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn MPI_Waitall(count: c_int, requests: *mut Request, statuses: H) -> c_int {
    static NEXT: Next = Next::new(c"PMPI_Waitall");
    static TEST: Next = Next::new(c"PMPI_Testall");
    static EST: Estimate = Estimate::new();
    let real = real!(NEXT, unsafe extern "C" fn(c_int, *mut Request, H) -> c_int);
    // SAFETY: the caller's arguments, forwarded unchanged.
    let call = || unsafe { real(count, requests, statuses) };
    // `PMPI_Testall(count, requests, flag, statuses)`.
    let test = twin!(
        TEST,
        unsafe extern "C" fn(c_int, *mut Request, *mut c_int, H) -> c_int
    )
    .map(|f| {
        // SAFETY: the caller's arguments and the loop's flag.
        move |flag: *mut c_int| unsafe { f(count, requests, flag, statuses) }
    });
    let site = || Site {
        requests: count.max(0) as u32,
        ..Site::of(Call::Waitall)
    };
    outermost(call, || wait_for(&EST, call, test, site))
}
also_pmpi!(MPI_Waitall(count: c_int, requests: *mut Request, statuses: H));

/// `MPI_Waitany`: polled through `MPI_Testany`.
///
/// # Safety
/// As `MPI_Waitany`.
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn MPI_Waitany(
    count: c_int,
    requests: *mut Request,
    index: *mut c_int,
    status: H,
) -> c_int {
    static NEXT: Next = Next::new(c"PMPI_Waitany");
    static TEST: Next = Next::new(c"PMPI_Testany");
    static EST: Estimate = Estimate::new();
    let real = real!(
        NEXT,
        unsafe extern "C" fn(c_int, *mut Request, *mut c_int, H) -> c_int
    );
    // SAFETY: the caller's arguments, forwarded unchanged.
    let call = || unsafe { real(count, requests, index, status) };
    // `PMPI_Testany(count, requests, index, flag, status)`.
    let test = twin!(
        TEST,
        unsafe extern "C" fn(c_int, *mut Request, *mut c_int, *mut c_int, H) -> c_int
    )
    .map(|f| {
        // SAFETY: the caller's arguments and the loop's flag.
        move |flag: *mut c_int| unsafe { f(count, requests, index, flag, status) }
    });
    // One request completed, none when none was active (`MPI_UNDEFINED`).
    let site = || completed(Call::Waitany, c_int::from(written(index) >= 0));
    outermost(call, || wait_for(&EST, call, test, site))
}
also_pmpi!(MPI_Waitany(count: c_int, requests: *mut Request, index: *mut c_int, status: H));

/// `MPI_Waitsome`: polled through `MPI_Testsome` (done once it reports completions, or
/// `MPI_UNDEFINED` for no active request: any non-zero count).
///
/// # Safety
/// As `MPI_Waitsome`.
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn MPI_Waitsome(
    incount: c_int,
    requests: *mut Request,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: H,
) -> c_int {
    static NEXT: Next = Next::new(c"PMPI_Waitsome");
    static TEST: Next = Next::new(c"PMPI_Testsome");
    static EST: Estimate = Estimate::new();
    type F = unsafe extern "C" fn(c_int, *mut Request, *mut c_int, *mut c_int, H) -> c_int;
    let real = real!(NEXT, F);
    // SAFETY: the caller's arguments, forwarded unchanged.
    let call = || unsafe { real(incount, requests, outcount, indices, statuses) };
    // `PMPI_Testsome` has `MPI_Waitsome`'s signature.
    let test = twin!(TEST, F).map(|test| {
        move |flag: *mut c_int| {
            // SAFETY: the caller's arguments; `outcount` is writable (MPI requires it).
            let rc = unsafe { test(incount, requests, outcount, indices, statuses) };
            // SAFETY: `flag` is the loop's own and `outcount` was just written.
            unsafe { *flag = c_int::from(*outcount != 0) };
            rc
        }
    });
    let site = || completed(Call::Waitsome, written(outcount));
    outermost(call, || wait_for(&EST, call, test, site))
}
also_pmpi!(MPI_Waitsome(incount: c_int, requests: *mut Request, outcount: *mut c_int,
    indices: *mut c_int, statuses: H));

/// `MPI_Probe`: polled through `MPI_Iprobe`.
///
/// # Safety
/// As `MPI_Probe`.
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn MPI_Probe(source: c_int, tag: c_int, comm: H, status: H) -> c_int {
    static NEXT: Next = Next::new(c"PMPI_Probe");
    static TEST: Next = Next::new(c"PMPI_Iprobe");
    static EST: Estimate = Estimate::new();
    let real = real!(NEXT, unsafe extern "C" fn(c_int, c_int, H, H) -> c_int);
    // SAFETY: the caller's arguments, forwarded unchanged.
    let call = || unsafe { real(source, tag, comm, status) };
    // `PMPI_Iprobe(source, tag, comm, flag, status)`.
    let test = twin!(
        TEST,
        unsafe extern "C" fn(c_int, c_int, H, *mut c_int, H) -> c_int
    )
    .map(|f| {
        // SAFETY: the caller's arguments and the loop's flag.
        move |flag: *mut c_int| unsafe { f(source, tag, comm, flag, status) }
    });
    let site = || p2p(Call::Probe, 0, comm, source, None);
    outermost(call, || wait_for(&EST, call, test, site))
}
also_pmpi!(MPI_Probe(source: c_int, tag: c_int, comm: H, status: H));

/// `MPI_Mprobe`: polled through `MPI_Improbe`.
///
/// # Safety
/// As `MPI_Mprobe`.
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn MPI_Mprobe(
    source: c_int,
    tag: c_int,
    comm: H,
    message: *mut H,
    status: H,
) -> c_int {
    static NEXT: Next = Next::new(c"PMPI_Mprobe");
    static TEST: Next = Next::new(c"PMPI_Improbe");
    static EST: Estimate = Estimate::new();
    let real = real!(
        NEXT,
        unsafe extern "C" fn(c_int, c_int, H, *mut H, H) -> c_int
    );
    // SAFETY: the caller's arguments, forwarded unchanged.
    let call = || unsafe { real(source, tag, comm, message, status) };
    // `PMPI_Improbe(source, tag, comm, flag, message, status)`.
    let test = twin!(
        TEST,
        unsafe extern "C" fn(c_int, c_int, H, *mut c_int, *mut H, H) -> c_int
    )
    .map(|f| {
        // SAFETY: the caller's arguments and the loop's flag.
        move |flag: *mut c_int| unsafe { f(source, tag, comm, flag, message, status) }
    });
    let site = || p2p(Call::Mprobe, 0, comm, source, None);
    outermost(call, || wait_for(&EST, call, test, site))
}
also_pmpi!(MPI_Mprobe(source: c_int, tag: c_int, comm: H, message: *mut H, status: H));

/// A receive polled through its nonblocking start and `MPI_Test` into the caller's status.
fn receive(
    est: &Estimate,
    call: impl FnOnce() -> c_int,
    start: Option<impl FnOnce(*mut Request) -> c_int>,
    status: H,
    site: impl Fn() -> Site + Copy,
) -> c_int {
    let mut run = start.map(|start| {
        let mut start = Some(start);
        move |pay: &mut dyn FnMut()| -> c_int {
            let go = || {
                let mut request: Request = 0;
                let rc = start.take().map_or(0, |s| s(&mut request));
                if rc != 0 {
                    return rc;
                }
                wait_request(pay, &mut request, status)
            };
            around(site, go)
        }
    });
    let blocking = || around(site, call);
    paying::blocking(
        Choice::Local(est),
        blocking,
        run.as_mut().map(|r| -> Polled<'_> { r }),
    )
}

/// `MPI_Recv`: polled through `MPI_Irecv` and `MPI_Test`; bytes = the posted buffer.
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
    static NEXT: Next = Next::new(c"PMPI_Recv");
    static START: Next = Next::new(c"PMPI_Irecv");
    static EST: Estimate = Estimate::new();
    let real = real!(
        NEXT,
        unsafe extern "C" fn(*mut c_void, c_int, H, c_int, c_int, H, H) -> c_int
    );
    // SAFETY: the caller's arguments, forwarded unchanged.
    let call = || unsafe { real(buf, count, datatype, source, tag, comm, status) };
    // `PMPI_Irecv`: the receive's arguments with a request for its status.
    let start = twin!(
        START,
        unsafe extern "C" fn(*mut c_void, c_int, H, c_int, c_int, H, *mut Request) -> c_int
    )
    .map(|f| {
        // SAFETY: the caller's arguments and a request of ours.
        move |r: *mut Request| unsafe { f(buf, count, datatype, source, tag, comm, r) }
    });
    let site = || p2p(Call::Recv, type_bytes(count, datatype), comm, source, None);
    outermost(call, || receive(&EST, call, start, status, site))
}
also_pmpi!(MPI_Recv(buf: *mut c_void, count: c_int, datatype: H, source: c_int, tag: c_int,
    comm: H, status: H));

/// `MPI_Mrecv`: polled through `MPI_Imrecv` and `MPI_Test`.
///
/// # Safety
/// As `MPI_Mrecv`.
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn MPI_Mrecv(
    buf: *mut c_void,
    count: c_int,
    datatype: H,
    message: *mut H,
    status: H,
) -> c_int {
    static NEXT: Next = Next::new(c"PMPI_Mrecv");
    static START: Next = Next::new(c"PMPI_Imrecv");
    static EST: Estimate = Estimate::new();
    let real = real!(
        NEXT,
        unsafe extern "C" fn(*mut c_void, c_int, H, *mut H, H) -> c_int
    );
    // SAFETY: the caller's arguments, forwarded unchanged.
    let call = || unsafe { real(buf, count, datatype, message, status) };
    // `PMPI_Imrecv`: the receive's arguments with a request for its status.
    let start = twin!(
        START,
        unsafe extern "C" fn(*mut c_void, c_int, H, *mut H, *mut Request) -> c_int
    )
    .map(|f| {
        // SAFETY: the caller's arguments and a request of ours.
        move |r: *mut Request| unsafe { f(buf, count, datatype, message, r) }
    });
    // Bytes = the posted buffer; the peer is the message's (its probe has it).
    let site = || Site {
        bytes: type_bytes(count, datatype),
        ..Site::of(Call::Mrecv)
    };
    outermost(call, || receive(&EST, call, start, status, site))
}
also_pmpi!(MPI_Mrecv(buf: *mut c_void, count: c_int, datatype: H, message: *mut H, status: H));

/// `MPI_Sendrecv`: polled through `MPI_Irecv`, `MPI_Isend` and `MPI_Test` on each (the
/// receive's status into the caller's); bytes = what it sends, peer = dest, source beside it.
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
    static NEXT: Next = Next::new(c"PMPI_Sendrecv");
    static IRECV: Next = Next::new(c"PMPI_Irecv");
    static ISEND: Next = Next::new(c"PMPI_Isend");
    static EST: Estimate = Estimate::new();
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
    type Start =
        unsafe extern "C" fn(*const c_void, c_int, H, c_int, c_int, H, *mut Request) -> c_int;
    let real = real!(NEXT, F);
    let site = || {
        p2p(
            Call::Sendrecv,
            type_bytes(sendcount, sendtype),
            comm,
            dest,
            Some(source),
        )
    };
    let call = || {
        // SAFETY: the caller's arguments, forwarded unchanged.
        unsafe {
            real(
                sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source,
                recvtag, comm, status,
            )
        }
    };
    // `PMPI_Irecv` and `PMPI_Isend` share this shape (the receive buffer is writable: it is the
    // caller's receive buffer).
    let twins = twin!(IRECV, Start).zip(twin!(ISEND, Start));
    let mut run = twins.map(|(irecv, isend)| {
        move |pay: &mut dyn FnMut()| -> c_int {
            let go = || {
                let (mut r, mut s): (Request, Request) = (0, 0);
                // SAFETY: the caller's arguments and requests of ours.
                let rc =
                    unsafe { irecv(recvbuf, recvcount, recvtype, source, recvtag, comm, &mut r) };
                if rc != 0 {
                    return rc;
                }
                // SAFETY: as above.
                let rc =
                    unsafe { isend(sendbuf, sendcount, sendtype, dest, sendtag, comm, &mut s) };
                if rc != 0 {
                    return rc;
                }
                let mut scratch = [0u64; STATUS_WORDS];
                let rc = wait_request(pay, &mut s, scratch.as_mut_ptr().cast());
                if rc != 0 {
                    return rc;
                }
                wait_request(pay, &mut r, status)
            };
            around(site, go)
        }
    });
    outermost(call, || {
        paying::blocking(
            Choice::Local(&EST),
            || around(site, call),
            run.as_mut().map(|r| -> Polled<'_> { r }),
        )
    })
}
also_pmpi!(MPI_Sendrecv(sendbuf: *const c_void, sendcount: c_int, sendtype: H, dest: c_int,
    sendtag: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: H, source: c_int,
    recvtag: c_int, comm: H, status: H));

/// `MPI_Cart_create`: may wait (collective), paid on return; under `JITTER_PROFILE` the
/// topology is recorded.
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
    static NEXT: Next = Next::new(c"PMPI_Cart_create");
    static EST: Estimate = Estimate::new();
    let real = real!(
        NEXT,
        unsafe extern "C" fn(H, c_int, *const c_int, *const c_int, c_int, H) -> c_int
    );
    // SAFETY: the caller's arguments, forwarded unchanged.
    let call = || unsafe { real(comm_old, ndims, dims, periods, reorder, comm_cart) };
    let Some(_outer) = Outermost::enter() else {
        return call();
    };
    let rc = paying::blocking(Choice::Local(&EST), call, None);
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
also_pmpi!(MPI_Cart_create(comm_old: H, ndims: c_int, dims: *const c_int, periods: *const c_int,
    reorder: c_int, comm_cart: H));
