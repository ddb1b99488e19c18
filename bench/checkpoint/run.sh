#!/usr/bin/env bash
# Checkpoint write/read throughput (issue 11): a checkpoint-sized set of safetensors
# files (MB MiB, layout TP x DP: model-tp<r> + optim-tp<r>-dp<d> + manifest.json),
# written and read with lote's pieces (bench/checkpoint/checkpoint_bench.cc), against
# peers moving the same bytes on the same disk / server in the same run:
#   file://  lote write (spool + sha256 + PutFile, as the checkpoint writer does)
#            lote write-direct (WriteSafetensors into the store folder + sha256)
#            vs dd if=<the same files> of=<same disk> bs=4M conv=fsync
#            lote read (GetFile + sha256 + mmap + ReadFloat, as a resume does)
#            lote read-inplace (sha256 + mmap + ReadFloat, as checkpoint export does)
#            vs dd if=<file> of=/dev/null bs=4M; page cache dropped before every read
#            (posix_fadvise DONTNEED, dd iflag=nocache count=0)
#   sha256 of the same bytes in memory (the checksum's share of each lote figure)
#   s3://    moto_server on loopback: lote write/read vs `aws s3 cp --recursive`
# Each figure is the median of RUNS runs; ratios are lote / peer (GB/s over GB/s).
# usage: bench/checkpoint/run.sh BUILD_DIR   (env: MB=256 TP=2 DP=2 RUNS=3 S3=1)
set -euo pipefail
BUILD="$(cd "${1:-build}" && pwd)"
BENCH="$BUILD/bench/checkpoint/checkpoint_bench"
MB="${MB:-256}"
TP="${TP:-2}"
DP="${DP:-2}"
RUNS="${RUNS:-3}"
S3="${S3:-1}"
WORK="$(mktemp -d "$BUILD/bench-checkpoint.XXXXXX")"  # on the build folder's disk
MOTO_PID=""
cleanup() {
  if [ -n "$MOTO_PID" ]; then kill "$MOTO_PID" 2>/dev/null || true; wait "$MOTO_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores; disk of $WORK: $(df -h "$WORK" | awk 'NR==2 {print $1}')"
echo "checkpoint: $MB MiB, TP $TP x DP $DP ($((TP + TP * DP)) shard files + manifest), $RUNS runs each"

now() { date +%s.%N; }
RESULTS="$WORK/results.txt"
: > "$RESULTS"
# record NAME BYTES SECONDS
record() { echo "$1 $2 $3" >> "$RESULTS"; }

lote_phase() {  # NAME ROOT PHASE
  local out
  out=$("$BENCH" --root "$2" --spool "$WORK/spool" --phase "$3" --mb "$MB" --tp "$TP" --dp "$DP")
  record "$1" "$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["bytes"])')" \
    "$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["seconds"])')"
}

files_bytes() { du -cb "$@" | tail -1 | cut -f1; }

echo "--- file://"
for run in $(seq "$RUNS"); do
  rm -rf "$WORK/lote" "$WORK/direct" "$WORK/dd"
  lote_phase file_write "file://$WORK/lote/job" write
  lote_phase file_write_direct "file://$WORK/direct/job" write-direct
  mkdir -p "$WORK/dd"
  SRC=("$WORK"/direct/job/step_1/*.safetensors)
  t0=$(now)
  for f in "${SRC[@]}"; do dd if="$f" of="$WORK/dd/$(basename "$f")" bs=4M conv=fsync status=none; done
  t1=$(now)
  record file_dd_write "$(files_bytes "${SRC[@]}")" "$(echo "$t1 - $t0" | bc -l)"

  lote_phase file_read "file://$WORK/lote/job" read
  lote_phase file_read_inplace "file://$WORK/lote/job" read-inplace
  DDF=("$WORK"/dd/*.safetensors)
  for f in "${DDF[@]}"; do dd if="$f" iflag=nocache count=0 status=none; done
  t0=$(now)
  for f in "${DDF[@]}"; do dd if="$f" of=/dev/null bs=4M status=none; done
  t1=$(now)
  record file_dd_read "$(files_bytes "${DDF[@]}")" "$(echo "$t1 - $t0" | bc -l)"
done

lote_phase hash_memory "file://$WORK/lote/job" hash-memory

if [ "$S3" = 1 ] && command -v moto_server >/dev/null && command -v aws >/dev/null; then
  echo "--- s3:// (moto_server on loopback)"
  PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  moto_server -H 127.0.0.1 -p "$PORT" >"$WORK/moto.log" 2>&1 &
  MOTO_PID=$!
  export AWS_ENDPOINT_URL_S3="http://127.0.0.1:$PORT" AWS_ACCESS_KEY_ID=testing \
    AWS_SECRET_ACCESS_KEY=testing AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1
  AWS=(aws --endpoint-url "$AWS_ENDPOINT_URL_S3")
  for _ in $(seq 100); do "${AWS[@]}" s3 mb s3://lote-bench >/dev/null 2>&1 && break; sleep 0.2; done
  for run in $(seq "$RUNS"); do
    lote_phase s3_write "s3://lote-bench/lote$run/job" write
    lote_phase s3_read "s3://lote-bench/lote$run/job" read
    t0=$(now)
    "${AWS[@]}" s3 cp --recursive --quiet "$WORK/direct/job/step_1" "s3://lote-bench/aws$run/step_1"
    t1=$(now)
    record s3_aws_write "$(files_bytes "$WORK"/direct/job/step_1/*.safetensors)" "$(echo "$t1 - $t0" | bc -l)"
    rm -rf "$WORK/awsdl"
    t0=$(now)
    "${AWS[@]}" s3 cp --recursive --quiet "s3://lote-bench/aws$run/step_1" "$WORK/awsdl"
    t1=$(now)
    record s3_aws_read "$(files_bytes "$WORK"/awsdl/*.safetensors)" "$(echo "$t1 - $t0" | bc -l)"
  done
else
  echo "--- s3:// skipped (S3=0, or no moto_server / aws CLI)"
fi

python3 - "$RESULTS" <<'EOF'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    name, b, s = line.split()
    runs.setdefault(name, []).append((int(b), float(s)))
def gbps(name):
    if name not in runs:
        return None
    return statistics.median(b / s / 1e9 for b, s in runs[name])
def row(label, name, peer=None):
    v = gbps(name)
    if v is None:
        return
    b = runs[name][0][0]
    all_ = sorted(b / s / 1e9 for b, s in runs[name])
    text = (f"{label:<55} {v:7.3f} GB/s  (min {all_[0]:.3f}, max {all_[-1]:.3f}; "
            f"{b / 1e6:.0f} MB, {len(runs[name])} runs)")
    if peer and gbps(peer):
        text += f"   ratio vs {peer}: {v / gbps(peer):.2f}"
    print(text)
print("=== results")
row("file:// write: lote (spool + sha256 + PutFile)", "file_write", "file_dd_write")
row("file:// write: lote direct (WriteSafetensors + sha256)", "file_write_direct", "file_dd_write")
row("file:// write: dd bs=4M conv=fsync", "file_dd_write")
row("file:// read: lote (GetFile + sha256 + ReadFloat)", "file_read", "file_dd_read")
row("file:// read: lote in place (sha256 + mmap ReadFloat)", "file_read_inplace", "file_dd_read")
row("file:// read: dd bs=4M (cache dropped)", "file_dd_read")
row("sha256 in memory (OpenSSL, 1 thread)", "hash_memory")
row("s3:// write: lote (spool + sha256 + multipart PutFile)", "s3_write", "s3_aws_write")
row("s3:// write: aws s3 cp --recursive", "s3_aws_write")
row("s3:// read: lote (GetFile + sha256 + ReadFloat)", "s3_read", "s3_aws_read")
row("s3:// read: aws s3 cp --recursive", "s3_aws_read")
EOF
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
