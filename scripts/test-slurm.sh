#!/usr/bin/env bash
# A real Slurm test of the two templates: stands up a one-node Slurm on this machine (root;
# installs slurm-wlm and munge with apt-get when missing), with its whole configuration, state
# and logs in a temporary directory; starts munged, slurmctld and slurmd, and stops them on every
# exit path. Then, from a directory outside the repository, as a user would:
#   1. sbatch scripts/slurm/scaling.sbatch TRACE "1 2" "none once phase"  (as written: the
#      test partition is the default one) and checks the study: 6 rows, none failed, every SD
#      with its interval, the launcher and the binding said;
#   2. sbatch scripts/slurm/collect.sbatch 5s  and checks the per-node trace (host in its file
#      name and header) and the node ranking.
#
# usage: sudo scripts/test-slurm.sh [--keep]     (--keep: leave the temporary directory)
#   3. the scaling template again with only --ntasks=2, --ntasks-per-node=2 or --nodes=1 (one short
#      run each: the study must finish with its row).
#   4. the launcher forced: MPI_PLUGIN=mpirun runs; MPI_PLUGIN=none is refused (exit 2).
# env:   PERIOD (the study's benchmark period; default 4s), JOB_LIMIT (seconds per job; 900),
#        TASK_PLUGIN (default task/affinity; task/none: the study must warn that it cannot bind)
set -euo pipefail

die() { echo "test-slurm: FAIL: $*" >&2; exit 1; }
say() { echo "test-slurm: $*" >&2; }
keep=0
[[ "${1:-}" == --keep ]] && keep=1
[[ "$(id -u)" == 0 ]] || die "needs root (it starts slurmctld, slurmd and munged)"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
period="${PERIOD:-4s}"
job_limit="${JOB_LIMIT:-900}"
task_plugin="${TASK_PLUGIN:-task/affinity}"

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null ||
  ! command -v sbatch >/dev/null || ! command -v munged >/dev/null; then
  command -v apt-get >/dev/null || die "Slurm is not installed and this is not Debian/Ubuntu"
  say "installing slurm-wlm and munge (apt-get, at most 10 min)"
  DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y --no-install-recommends \
    slurm-wlm slurmctld slurmd slurm-client munge >/dev/null ||
    die "apt-get install slurm-wlm munge failed"
fi

python3 "$root/scripts/slurm/study-table.py" --self-test >&2 || die "study-table.py self-test"
say "building the release binaries (at most 30 min)"
(cd "$root" && timeout 1800 cargo build --release -q -p replay-bench -p jitter-trace-tool \
  -p jitter-collect) || die "cargo build failed"

tmp="$(mktemp -d /tmp/jitterbench-slurm.XXXXXX)"
chmod 755 "$tmp"
pids=()
cleanup() {
  local rc=$?
  set +e
  if [[ -n "${SLURM_CONF:-}" ]] && [[ -f "$SLURM_CONF" ]]; then
    timeout 10 scancel --quiet --partition=jbtest 2>/dev/null
  fi
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill "${pids[i]}" 2>/dev/null
  done
  for p in "${pids[@]}"; do # at most 10 s each, then SIGKILL
    for _ in $(seq 20); do kill -0 "$p" 2>/dev/null || break; sleep 0.5; done
    kill -9 "$p" 2>/dev/null
  done
  if [[ $rc -ne 0 ]]; then
    for log in slurmctld.log slurmd.log munged.log; do
      [[ -f "$tmp/$log" ]] && { echo "--- last lines of $log" >&2; tail -5 "$tmp/$log" >&2; }
    done
  fi
  if [[ $keep -eq 1 || $rc -ne 0 ]]; then
    say "kept $tmp"
  else
    rm -rf "$tmp"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

wait_for() { # SECONDS WHAT CMD...: polls CMD every 0.5 s
  local limit="$1" what="$2"; shift 2
  local end=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < end)) || die "$what did not happen within ${limit}s"
    sleep 0.5
  done
}

# munge: a private daemon, socket and key in the temporary directory.
mkdir -p "$tmp/munge" "$tmp/state" "$tmp/spool" "$tmp/work"
if [[ -r /etc/munge/munge.key ]]; then
  cp /etc/munge/munge.key "$tmp/munge/munge.key"
else
  dd if=/dev/urandom of="$tmp/munge/munge.key" bs=1024 count=1 status=none
fi
chmod 711 "$tmp/munge"
chmod 600 "$tmp/munge/munge.key"
munged --foreground --force --socket="$tmp/munge/munge.socket" \
  --key-file="$tmp/munge/munge.key" --pid-file="$tmp/munge/munged.pid" \
  --seed-file="$tmp/munge/munged.seed" --log-file="$tmp/munged.log" >>"$tmp/munged.log" 2>&1 &
pids+=($!)
wait_for 20 "munged start" test -S "$tmp/munge/munge.socket"
say "munged up ($tmp/munge/munge.socket)"

host="$(hostname -s)"
node="$(slurmd -C | head -1)" # NodeName=<host> CPUs=... RealMemory=...
cat >"$tmp/slurm.conf" <<EOF
ClusterName=jitterbench
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
SlurmctldPort=16817
SlurmdPort=16818
AuthType=auth/munge
AuthInfo=socket=$tmp/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=$task_plugin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
SlurmdTimeout=60
InactiveLimit=0
KillWait=10
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
$node State=UNKNOWN
PartitionName=jbtest Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$tmp/slurm.conf"
slurmctld -D -i -f "$SLURM_CONF" >"$tmp/slurmctld.out" 2>&1 &
pids+=($!)
wait_for 30 "slurmctld start" scontrol ping
slurmd -D -f "$SLURM_CONF" >"$tmp/slurmd.out" 2>&1 &
pids+=($!)
idle() { [[ "$(sinfo -h -n "$host" -o %t)" == idle ]]; }
wait_for 60 "node $host idle" idle
say "Slurm up: $(sinfo -h -o '%P %D %t %c CPUs')"
say "srun --mpi=list: $(srun --mpi=list 2>&1 | tr -s '\n ' ' ')"

wait_job() { # JOBID: waits up to JOB_LIMIT seconds; prints the final state and exit code
  local id="$1" end=$((SECONDS + job_limit)) state=""
  while ((SECONDS < end)); do
    state="$(squeue -h -j "$id" -o %T 2>/dev/null || true)"
    [[ -z "$state" ]] && break
    sleep 2
  done
  [[ -z "$state" ]] || { scancel "$id"; die "job $id still $state after ${job_limit}s"; }
  scontrol show job "$id" 2>/dev/null | grep -o -E 'JobState=[A-Z_]+|ExitCode=[0-9:]+' | tr '\n' ' '
}

# 1. the scaling template, submitted from outside the repository, as written.
cd "$tmp/work"
"$root/target/release/jitter-trace" synth \
  "periodic:period=10ms,dur=200us+poisson:rate=200/s,dur=exp:50us" --duration 60s --streams 2 \
  --seed 1 -o node.jtr >/dev/null
id="$(sbatch --parsable --export=ALL,PERIOD="$period" "$root/scripts/slurm/scaling.sbatch" \
  node.jtr "1 2" "none once phase")"
say "scaling job $id submitted (period $period per run; at most ${job_limit}s)"
end_state="$(wait_job "$id")"
log="$tmp/work/jitter-scaling-$id.out"
outdir="$tmp/work/jitter-scaling-$id"
say "scaling job $id: $end_state"
[[ -f "$log" ]] || die "no job log $log"
cat "$log" >&2
[[ -f "$outdir/study.txt" ]] || die "no table $outdir/study.txt"
grep -q "launcher: " "$log" || die "the log does not say which launcher ran"
if [[ "$task_plugin" == task/none ]]; then
  grep -q "WARNING: np 2: ranks are not bound" "$log" || die "no warning that ranks are unbound"
else
  grep -q "binding: np 2: each rank bound to one core" "$log" || die "ranks are not bound"
fi
grep -q "node group: 2 ranks per node (the trace's 2 streams" "$log" ||
  die "the node group was not taken from the trace's streams"
rows="$(grep -c -E '^ +[12]  (none|once|phase) ' "$outdir/study.txt" || true)"
[[ "$rows" == 6 ]] || die "the table has $rows rows, not 6 (1 and 2 processes × 3 modes)"
! grep -q " failed: " "$outdir/study.txt" || die "a run failed"
# Every row has both intervals, or is invalid and says why (e.g. no interval on a busy machine).
with_ci="$(grep -c -E '^ +[12]  (none|once|phase) .*±.*±' "$outdir/study.txt" || true)"
without="$(grep -E '^ +[12]  (none|once|phase) ' "$outdir/study.txt" | grep -v -c '±.*±' || true)"
explained="$(grep -E '^ +[12]  (none|once|phase) ' "$outdir/study.txt" | grep -v '±.*±' |
  grep -c 'invalid: .*no 95 % interval' || true)"
[[ "$without" == "$explained" ]] || die "$without rows lack an interval, only $explained say why"
say "scaling: $with_ci of 6 rows with both intervals"
# Exit 0: all rows valid; 3: some invalid (the reason is in the table) — both are a finished
# study; anything else is not.
case "$end_state" in
  *"JobState=COMPLETED"*"ExitCode=0:0"*) say "scaling: every row valid" ;;
  *"ExitCode=3:0"*) say "scaling: finished; invalid rows marked with their reason" ;;
  *) die "scaling job ended $end_state" ;;
esac
[[ -s "$outdir/study.svg" ]] || die "no plot $outdir/study.svg"

# 2. the collection template: one trace per node, named after the host, then the ranking.
id="$(sbatch --parsable "$root/scripts/slurm/collect.sbatch" 5s site=test)"
say "collection job $id submitted"
end_state="$(wait_job "$id")"
say "collection job $id: $end_state"
log="$tmp/work/jitter-collect-$id.out"
outdir="$tmp/work/jitter-collect-$id"
[[ -f "$log" ]] && cat "$log" >&2
[[ -f "$outdir/$host.jtr" ]] || die "no trace $outdir/$host.jtr"
"$root/target/release/jitter-trace" --json nodes "$outdir/$host.jtr" |
  python3 -c 'import json,sys; t=json.load(sys.stdin); h=sys.argv[1]; r=t["rows"][0]["summary"]
assert r["host"]==h and r["node"]==h and r["stats"]["count"]>0, r' "$host" ||
  die "the trace header does not name host $host, or it has no detours"
grep -q -E "^ +1  $host " "$outdir/nodes.txt" || die "nodes.txt does not rank $host"
[[ -s "$outdir/nodes.svg" && -s "$outdir/nodes.json" ]] || die "no nodes.svg/nodes.json"
case "$end_state" in
  *"JobState=COMPLETED"*) ;;
  *) die "collection job ended $end_state" ;;
esac
# 3. The allocation's size given in one option only.
for size in --ntasks=2 --ntasks-per-node=2 --nodes=1; do
  id="$(sbatch --parsable "$size" --export=ALL,PERIOD=1s "$root/scripts/slurm/scaling.sbatch" \
    node.jtr "" none)"
  end_state="$(wait_job "$id")"
  say "scaling job $id ($size alone): $end_state"
  outdir="$tmp/work/jitter-scaling-$id"
  grep -q "process counts: 1 2 (up to the allocation's 2" "$tmp/work/jitter-scaling-$id.out" ||
    die "job $id ($size): process counts not taken from the allocation"
  [[ -f "$outdir/study.txt" ]] || die "job $id ($size): no table"
  rows="$(grep -c -E '^ +[12]  none ' "$outdir/study.txt" || true)"
  [[ "$rows" == 2 ]] || die "job $id ($size): $rows rows, not 2"
  ! grep -q " failed: " "$outdir/study.txt" || { cat "$outdir/study.txt" >&2; die "job $id ($size): a run failed"; }
  case "$end_state" in
    *"ExitCode=0:0"* | *"ExitCode=3:0"*) ;;
    *) die "job $id ($size) ended $end_state" ;;
  esac
done

# 4. The launcher forced: mpirun inside the allocation runs; srun --mpi=none (no PMI) is refused
#    by the probe, with the reason, before any measurement.
id="$(sbatch --parsable --export=ALL,PERIOD=1s,MPI_PLUGIN=mpirun \
  "$root/scripts/slurm/scaling.sbatch" node.jtr 2 none)"
end_state="$(wait_job "$id")"
say "scaling job $id (MPI_PLUGIN=mpirun): $end_state"
grep -E "launcher|bind" "$tmp/work/jitter-scaling-$id.out" >&2 || true
grep -q "launcher: mpirun" "$tmp/work/jitter-scaling-$id.out" || die "job $id: mpirun not used"
grep -q -E '^ +2  none .*±' "$tmp/work/jitter-scaling-$id/study.txt" ||
  die "job $id: no row for 2 processes under mpirun"
id="$(sbatch --parsable --export=ALL,PERIOD=1s,MPI_PLUGIN=none \
  "$root/scripts/slurm/scaling.sbatch" node.jtr 2 none)"
end_state="$(wait_job "$id")"
say "scaling job $id (MPI_PLUGIN=none): $end_state"
grep -E "launcher" "$tmp/work/jitter-scaling-$id.out" >&2 || true
grep -q "no launcher starts replay-bench here" "$tmp/work/jitter-scaling-$id.out" ||
  die "job $id: srun --mpi=none was not refused"
[[ "$end_state" == *"ExitCode=2:0"* ]] || die "job $id ended $end_state, not exit 2"

say "PASS: both templates ran on a one-node Slurm ($(sinfo -V))"
