#!/usr/bin/env bash
# Shared set-up for scripts/demo.sh and scripts/test.sh: installs what is missing on Debian
# (as root), checks the Rust toolchain, and exports what OpenMPI needs when run as root.
# Source it; it defines `jb_setup` and `jb_say`.

jb_say() { printf '\033[1m==>\033[0m %s\n' "$*" >&2; }

jb_missing_packages() {
    local missing=()
    command -v mpirun >/dev/null 2>&1 || missing+=(openmpi-bin)
    # rsmpi's build needs mpicc (or pkg-config's ompi) and the MPI headers.
    if ! command -v mpicc >/dev/null 2>&1 || ! [ -e /usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h -o -e /usr/include/mpi.h -o -n "$(find /usr/lib -name mpi.h -path '*openmpi*' -print -quit 2>/dev/null)" ]; then
        missing+=(libopenmpi-dev)
    fi
    # bindgen (used by rsmpi) needs libclang.
    if ! ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1 && ! ls /usr/lib/x86_64-linux-gnu/libclang*.so* >/dev/null 2>&1; then
        missing+=(libclang-dev)
    fi
    printf '%s\n' "${missing[@]}"
}

jb_setup() {
    local missing
    mapfile -t missing < <(jb_missing_packages)
    if [ "${#missing[@]}" -gt 0 ] && [ -n "${missing[0]}" ]; then
        local cmd="apt-get update && apt-get install -y libopenmpi-dev openmpi-bin libclang-dev"
        if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
            jb_say "installing ${missing[*]} (OpenMPI and libclang for the MPI benchmark)"
            if ! { DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
                   DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libopenmpi-dev openmpi-bin libclang-dev; } >/tmp/jitterbench-apt.log 2>&1; then
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
