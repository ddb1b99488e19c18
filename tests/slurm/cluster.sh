#!/usr/bin/env bash
# A real Slurm cluster on this machine for tests and benchmarks: munged,
# slurmctld and N slurmd ("multiple slurmd": one NodeName each, all on
# 127.0.0.1 with their own port, started as `slurmd -N bK`) from a generated
# slurm.conf in DIR. No systemd, no /etc/slurm, no cgroups, no accounting.
#
#   cluster.sh start DIR [NODES] [CPUS]   start (DIR is created); prints nothing
#   cluster.sh stop DIR                   cancel every job, stop the daemons by pid
#
# Partition `train` holds nodes b1..bNODES (default 4) of CPUS CPUs (default 2)
# and 1000 MiB each. Commands reach the cluster with SLURM_CONF=DIR/slurm.conf.
# $LOTE_SLURM_SCHED_PARAMS: SchedulerParameters (default batch_sched_delay=0).
# $LOTE_SLURM_GPUS=G: each node also has G GPUs, a GRES over fake device nodes
# (DIR/dev/bK/nvidiaJ, character devices 195:J made with mknod: no driver
# behind them, and no cgroups here, so Slurm only hands them out and sets
# CUDA_VISIBLE_DEVICES), as Slurm's own tests fake GPUs.
set -euo pipefail

cmd="${1:-}"
SL="${2:-}"
[ -n "$cmd" ] && [ -n "$SL" ] || { echo "usage: $0 start|stop DIR [NODES] [CPUS]" >&2; exit 2; }

pid_alive() {  # a zombie does not count
  local st
  st="$(ps -o stat= -p "$1" 2>/dev/null || true)"
  [ -n "$st" ] && [ "${st:0:1}" != Z ]
}

stop_cluster() {
  export SLURM_CONF="$SL/slurm.conf"
  if [ -f "$SL/run/slurmctld.pid.lote" ] && pid_alive "$(cat "$SL/run/slurmctld.pid.lote")"; then
    scancel --quiet --full --partition=train 2>/dev/null || true
    scancel --quiet --partition=train 2>/dev/null || true
    for _ in $(seq 1 100); do
      [ -z "$(squeue -h -o %i 2>/dev/null || true)" ] && break
      sleep 0.1
    done
  fi
  for f in "$SL"/run/slurmd-*.pid.lote "$SL/run/slurmctld.pid.lote" "$SL/munge/munged.pid.lote"; do
    [ -f "$f" ] || continue
    local p
    p="$(cat "$f")"
    if pid_alive "$p"; then kill -TERM "$p" 2>/dev/null || true; fi
  done
  for f in "$SL"/run/slurmd-*.pid.lote "$SL/run/slurmctld.pid.lote" "$SL/munge/munged.pid.lote"; do
    [ -f "$f" ] || continue
    local p
    p="$(cat "$f")"
    for _ in $(seq 1 50); do pid_alive "$p" || break; sleep 0.1; done
    if pid_alive "$p"; then kill -KILL "$p" 2>/dev/null || true; fi
    rm -f "$f"
  done
  # Job processes outlive slurmd by design: end those of this cluster only
  # (their slurmstepd carries SLURM_CONF=$SL/slurm.conf).
  for p in $(pgrep -x slurmstepd 2>/dev/null || true); do
    if { tr '\0' '\n' < "/proc/$p/environ"; } 2>/dev/null | grep -qx "SLURM_CONF=$SL/slurm.conf"; then
      pkill -KILL -P "$p" 2>/dev/null || true
      kill -KILL "$p" 2>/dev/null || true
    fi
  done
}

case "$cmd" in
  stop)
    stop_cluster
    exit 0
    ;;
  start) ;;
  *) echo "unknown command $cmd" >&2; exit 2 ;;
esac

NODES="${3:-4}"
CPUS="${4:-2}"
for tool in munged mungekey slurmctld slurmd sinfo; do
  command -v "$tool" >/dev/null || { echo "cluster.sh: $tool is missing: run scripts/install-deps.sh" >&2; exit 1; }
done
mkdir -p "$SL"/{munge,state,spool,log,run}
SL="$(cd "$SL" && pwd)"
# munged checks that every folder above its socket is reachable.
d="$SL"
while [ "$d" != / ]; do chmod o+x,g+x "$d" 2>/dev/null || true; d="$(dirname "$d")"; done
chmod 755 "$SL" "$SL/munge"
export SLURM_CONF="$SL/slurm.conf"

read -r -a ports < <(python3 - "$NODES" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1]) + 1):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
)

{
  echo "ClusterName=lote$$"
  echo "SlurmctldHost=localhost"
  echo "SlurmUser=$(id -un)"
  echo "SlurmdUser=root"
  echo "AuthType=auth/munge"
  echo "CredType=cred/munge"
  echo "AuthInfo=socket=$SL/munge/munge.socket.2"
  echo "SlurmctldPort=${ports[0]}"
  echo "StateSaveLocation=$SL/state"
  echo "SlurmdSpoolDir=$SL/spool/%n"
  echo "SlurmctldPidFile=$SL/run/slurmctld.pid"
  echo "SlurmdPidFile=$SL/run/slurmd-%n.pid"
  echo "SlurmctldLogFile=$SL/log/slurmctld.log"
  echo "SlurmdLogFile=$SL/log/slurmd-%n.log"
  echo "ProctrackType=proctrack/linuxproc"
  echo "TaskPlugin=task/none"
  echo "JobAcctGatherType=jobacct_gather/none"
  echo "AccountingStorageType=accounting_storage/none"
  echo "JobCompType=jobcomp/filetxt"
  echo "JobCompLoc=$SL/jobcomp.txt"
  echo "SelectType=select/cons_tres"
  echo "SelectTypeParameters=CR_CPU"
  echo "SlurmdParameters=config_overrides"
  echo "SchedulerParameters=${LOTE_SLURM_SCHED_PARAMS:-batch_sched_delay=0}"
  echo "ReturnToService=2"
  echo "MpiDefault=none"
  echo "KillWait=5"
  echo "SlurmdTimeout=30"
  echo "MinJobAge=300"
  echo "MailProg=/bin/true"
  echo "PropagateResourceLimits=NONE"
  GPUS="${LOTE_SLURM_GPUS:-0}"
  [ "$GPUS" -gt 0 ] && echo "GresTypes=gpu"
  for i in $(seq 1 "$NODES"); do
    gres=""
    [ "$GPUS" -gt 0 ] && gres=" Gres=gpu:$GPUS"
    echo "NodeName=b$i NodeHostname=localhost NodeAddr=127.0.0.1 Port=${ports[$i]} CPUs=$CPUS RealMemory=1000${gres} State=UNKNOWN"
  done
  echo "PartitionName=train Nodes=b[1-$NODES] Default=YES MaxTime=INFINITE State=UP"
} > "$SL/slurm.conf"

if [ "${LOTE_SLURM_GPUS:-0}" -gt 0 ]; then
  : > "$SL/gres.conf"
  for i in $(seq 1 "$NODES"); do
    mkdir -p "$SL/dev/b$i"
    for j in $(seq 0 $((LOTE_SLURM_GPUS - 1))); do
      [ -c "$SL/dev/b$i/nvidia$j" ] || mknod "$SL/dev/b$i/nvidia$j" c 195 "$j"
      echo "NodeName=b$i Name=gpu File=$SL/dev/b$i/nvidia$j" >> "$SL/gres.conf"
    done
  done
fi

[ -f "$SL/munge/munge.key" ] || mungekey -c -k "$SL/munge/munge.key" >/dev/null
cd "$SL"
munged -F --key-file="$SL/munge/munge.key" --socket="$SL/munge/munge.socket.2" \
  --pid-file="$SL/munge/munged.pid" --seed-file="$SL/munge/munged.seed" \
  --log-file="$SL/log/munged.log" > "$SL/log/munged.stdout" 2>&1 &
echo $! > "$SL/munge/munged.pid.lote"
for _ in $(seq 1 100); do [ -S "$SL/munge/munge.socket.2" ] && break; sleep 0.05; done
[ -S "$SL/munge/munge.socket.2" ] || { echo "cluster.sh: munged did not start (see $SL/log/munged.log)" >&2; stop_cluster; exit 1; }

slurmctld -D -f "$SL/slurm.conf" > "$SL/log/slurmctld.stdout" 2>&1 &
echo $! > "$SL/run/slurmctld.pid.lote"
for i in $(seq 1 "$NODES"); do
  slurmd -D -N "b$i" -f "$SL/slurm.conf" > "$SL/log/slurmd-b$i.stdout" 2>&1 &
  echo $! > "$SL/run/slurmd-b$i.pid.lote"
done

# Ready when every node is idle.
for _ in $(seq 1 300); do
  idle="$(sinfo -h -N -p train -o '%t' 2>/dev/null | grep -c '^idle' || true)"
  [ "$idle" = "$NODES" ] && exit 0
  sleep 0.1
done
echo "cluster.sh: the cluster did not become idle; sinfo says:" >&2
sinfo -N 2>&1 >&2 || true
tail -5 "$SL/log/slurmctld.log" >&2 || true
stop_cluster
exit 1
