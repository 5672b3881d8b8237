#!/usr/bin/env bash
# slurm-cluster.sh start DIR | stop DIR: a real one-node Slurm cluster (Debian's slurm-wlm:
# munged, slurmctld, slurmd) for the tests, everything under DIR, no systemd. `start` prints
# the SLURM_CONF path on its last line (export it, then sbatch/squeue/sacct/scancel talk to
# this cluster); `stop` kills the daemons and leaves DIR for post-mortems.
#
# The node offers 4 CPU slots whatever the machine has (SlurmdParameters=config_overrides),
# so a job array runs several tasks at once on a 2-core box. There is no slurmdbd: job states
# come from the job completion log (JobCompType=jobcomp/filetxt), which `sacct --completion`
# reads; llem asks sacct's accounting first and uses that log when accounting is off.
set -euo pipefail
cmd="${1:-}" dir="${2:-}"
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }

stop() {
  # Jobs first, so no slurmstepd outlives its slurmd.
  if [ -f "$dir/slurm.conf" ] && [ -f "$dir/slurmctld.pid" ]; then
    SLURM_CONF="$dir/slurm.conf" scancel --me 2>/dev/null || true
    for _ in $(seq 1 30); do
      [ -z "$(SLURM_CONF="$dir/slurm.conf" squeue -h --me 2>/dev/null)" ] && break
      sleep 0.2
    done
  fi
  for f in slurmd slurmctld munged; do
    [ -f "$dir/$f.pid" ] && kill "$(cat "$dir/$f.pid")" 2>/dev/null || true
  done
  sleep 0.5
  for f in slurmd slurmctld munged; do
    [ -f "$dir/$f.pid" ] && kill -9 "$(cat "$dir/$f.pid")" 2>/dev/null || true
    rm -f "$dir/$f.pid"
  done
}

if [ "$cmd" = stop ]; then
  stop
  exit 0
fi
[ "$cmd" = start ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }
for b in munged slurmctld slurmd sbatch; do
  command -v "$b" >/dev/null || {
    echo "slurm-cluster: $b not found (apt-get install slurm-wlm munge)" >&2
    exit 3
  }
done

mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
chmod 700 "$dir"
mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
chmod 700 "$dir/munge"
host="$(hostname -s)"
# Two free TCP ports on loopback, for slurmctld and slurmd.
read -r ctld_port slurmd_port < <(python3 - <<'EOF'
import socket
s = [socket.socket() for _ in range(2)]
for x in s:
    x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))
EOF
)

key="$dir/munge/munge.key"
[ -f "$key" ] || { dd if=/dev/urandom of="$key" bs=1024 count=1 status=none; chmod 400 "$key"; }
sock="$dir/munge/munge.socket"
munged --force --key-file="$key" --socket="$sock" --pid-file="$dir/munged.pid" \
  --log-file="$dir/munged.log" --seed-file="$dir/munge/seed"

cat > "$dir/slurm.conf" <<EOF
ClusterName=llemtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$sock
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/jobcomp.txt
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
KillWait=5
MinJobAge=600
SchedulerParameters=sched_interval=1
MessageTimeout=10
NodeName=$host NodeAddr=127.0.0.1 CPUs=4 RealMemory=4000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$dir/slurm.conf"
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
# Up when the node is idle.
for _ in $(seq 1 100); do
  if sinfo -h -o '%T' 2>/dev/null | grep -qx idle; then
    echo "$SLURM_CONF"
    exit 0
  fi
  sleep 0.2
done
echo "slurm-cluster: the node did not come up; logs in $dir" >&2
tail -n 20 "$dir/slurmctld.log" "$dir/slurmd.log" >&2 || true
stop
exit 1
