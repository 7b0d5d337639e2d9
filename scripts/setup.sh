#!/usr/bin/env bash
# Shared set-up for scripts/demo.sh and scripts/test.sh: installs what is missing on Debian
# (as root), checks the Rust toolchain, and exports what OpenMPI needs when run as root.
# Source it; it defines `jb_setup`, `jb_say`, `jb_step` and `jb_fail`.

# The caller's stderr, for jb_step's message when a step's own stderr goes to a log.
exec {jb_stderr_fd}>&2

jb_say() { printf '\033[1m==>\033[0m %s\n' "$*" >&2; }

# The time limit of a step of SECONDS (whole, > 0), multiplied by JB_STEP_TIMEOUT_SCALE
# (default 1; e.g. 2 on a slow machine), rounded up to whole seconds.
jb_step_limit() {
    local secs=$1 scale=${JB_STEP_TIMEOUT_SCALE:-1}
    case "$secs" in ''|*[!0-9]*) echo "error: jb_step: time limit '$secs' is not whole seconds" >&2; return 2 ;; esac
    awk -v s="$secs" -v k="$scale" 'BEGIN {
        if (k !~ /^([0-9]+\.?[0-9]*|\.[0-9]+)$/ || k + 0 <= 0 || s + 0 <= 0) exit 1
        v = s * k; printf "%d\n", (v == int(v)) ? v : int(v) + 1 }' || {
        echo "error: JB_STEP_TIMEOUT_SCALE must be a number > 0 (it is '$scale')" >&2
        return 2
    }
}

# jb_step NAME SECONDS CMD [ARG…]: runs CMD (a program, not a shell function) with a time
# limit (GNU timeout: TERM at the limit, KILL 10 s later, to CMD's whole process group) and
# returns its exit status. A step over its limit prints one line naming it and returns 124.
# CMD runs in the background of this shell so that Ctrl-C (or a TERM) still stops it; it
# reads no terminal input.
jb_step() {
    local name=$1 secs=$2 limit start pid rc=0 signal=""
    shift 2
    limit=$(jb_step_limit "$secs") || return 2
    start=$SECONDS
    timeout --kill-after=10 "$limit" "$@" {jb_stderr_fd}>&- &
    pid=$!
    trap 'signal=INT; kill -TERM "$pid" 2>/dev/null' INT
    trap 'signal=TERM; kill -TERM "$pid" 2>/dev/null' TERM
    while :; do
        rc=0
        wait "$pid" || rc=$?
        # A trapped signal interrupts `wait` (status > 128) while the step still runs.
        kill -0 "$pid" 2>/dev/null || break
    done
    trap - INT TERM
    if [ -n "$signal" ]; then
        kill -s "$signal" "$$"
        return 130
    fi
    # timeout exits 124 at the limit, 137 when KILL was needed; either before the limit is the
    # command's own status.
    if { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; } && [ $((SECONDS - start)) -ge "$limit" ]; then
        echo "error: step '$name' exceeded its time limit of $limit s" \
             "(JB_STEP_TIMEOUT_SCALE=2 doubles every limit)" >&"$jb_stderr_fd"
        return 124
    fi
    return "$rc"
}

# jb_fail STATUS MESSAGE: `jb_step … || jb_fail $? "what failed"` prints `error: MESSAGE`
# (unless jb_step already said the step ran out of time) and exits with STATUS.
jb_fail() {
    [ "$1" -eq 124 ] || echo "error: $2" >&2
    exit "$1"
}

jb_missing_packages() {
    local missing=()
    command -v mpirun >/dev/null 2>&1 || missing+=(openmpi-bin)
    # rsmpi's build needs mpicc (or pkg-config's ompi) and the MPI headers.
    if ! command -v mpicc >/dev/null 2>&1 || ! [ -e /usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h -o -e /usr/include/mpi.h -o -n "$(find /usr/lib -name mpi.h -path '*openmpi*' -print -quit 2>/dev/null)" ]; then
        missing+=(libopenmpi-dev)
    fi
    # The preload library's Fortran tests build with mpif90 (libopenmpi-dev depends on gfortran;
    # named here for a machine where it was removed).
    command -v gfortran >/dev/null 2>&1 || missing+=(gfortran)
    # bindgen (used by rsmpi) needs libclang.
    if ! ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1 && ! ls /usr/lib/x86_64-linux-gnu/libclang*.so* >/dev/null 2>&1; then
        missing+=(libclang-dev)
    fi
    # scripts/check-structure.py (run by test.sh).
    command -v python3 >/dev/null 2>&1 || missing+=(python3)
    printf '%s\n' "${missing[@]}"
}

jb_setup() {
    local missing
    mapfile -t missing < <(jb_missing_packages)
    if [ "${#missing[@]}" -gt 0 ] && [ -n "${missing[0]}" ]; then
        local cmd="apt-get update && apt-get install -y libopenmpi-dev openmpi-bin gfortran libclang-dev python3"
        if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
            jb_say "installing ${missing[*]} (OpenMPI and libclang for the MPI benchmark, gfortran for the Fortran tests, python3 for the structure check)"
            if ! { DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
                   DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libopenmpi-dev openmpi-bin gfortran libclang-dev python3; } >/tmp/jitterbench-apt.log 2>&1; then
                echo "error: package installation failed; see /tmp/jitterbench-apt.log" >&2
                return 1
            fi
        else
            echo "error: missing ${missing[*]}; run as root: $cmd" >&2
            return 1
        fi
    fi
    if ! command -v cargo >/dev/null 2>&1; then
        if [ -x "$HOME/.cargo/bin/cargo" ]; then
            export PATH="$HOME/.cargo/bin:$PATH"
        else
            echo "error: no Rust toolchain; install it with rustup (https://rustup.rs) and re-run" >&2
            return 1
        fi
    fi
    if [ "$(id -u)" -eq 0 ]; then
        export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    fi
    # OpenMPI in containers/VMs: no need to probe for high-speed fabrics.
    export OMPI_MCA_btl="${OMPI_MCA_btl:-self,vader,tcp}"
    export OMPI_MCA_btl_vader_single_copy_mechanism="${OMPI_MCA_btl_vader_single_copy_mechanism:-none}"
    return 0
}
