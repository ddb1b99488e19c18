#!/usr/bin/env bash
# bench/s3: lote's S3 endpoint against moto_server's S3 (the emulator users know)
# and against dd/cat of the same bytes on the same disk (the limit), same run,
# same bytes (s3_bench.py has the measures and the table).
#   4 KiB objects: PutObject / GetObject ops/s, one connection and THREADS threads
#   1 MiB and 256 MiB objects: PutObject / GetObject MB/s
#   then 4 KiB objects from a C++ client (s3_small.cc): the servers' own rates
# Starts a real `lote server` (temp home, 127.0.0.1:0) and `moto_server` (a free
# port); both, and every temp file, are gone when this script ends.
# usage: bench/s3/run.sh BUILD_DIR [ROUNDS]
#   (env: THREADS=8, WORK_PARENT=BUILD_DIR: where the temp home and the dd folder
#    live, one filesystem; PYTHON=python3 with boto3 and moto)
set -euo pipefail
BUILD="$(cd "${1:-build}" && pwd)"
ROUNDS="${2:-3}"
HERE="$(cd "$(dirname "$0")" && pwd)"
LOTE="$BUILD/lote"
PY="${PYTHON:-python3}"
[ -x "$LOTE" ] || { echo "no $LOTE: build lote first" >&2; exit 1; }
if command -v moto_server >/dev/null; then MOTO=(moto_server); else MOTO=("$PY" -m moto.server); fi

WORK="$(mktemp -d "${WORK_PARENT:-$BUILD}/bench-s3.XXXXXX")"
LOTE_PID=""
MOTO_PID=""
stop() {  # PID: SIGTERM, then SIGKILL after 20 s
  local pid="$1" i
  [ -n "$pid" ] || return 0
  kill "$pid" 2>/dev/null || return 0
  for i in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
cleanup() {
  stop "$LOTE_PID"
  stop "$MOTO_PID"
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$WORK/home" "$WORK/disk"
"$LOTE" server --home "$WORK/home" --listen 127.0.0.1:0 >"$WORK/lote.out" 2>"$WORK/lote.err" &
LOTE_PID=$!
LOTE_URL=""
for _ in $(seq 300); do
  line="$(head -n 1 "$WORK/lote.out" 2>/dev/null || true)"
  case "$line" in "lote server listening on "*) LOTE_URL="${line#lote server listening on }"; break ;; esac
  kill -0 "$LOTE_PID" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$LOTE_URL" ]; then
  echo "lote server did not start: $(head -n 1 "$WORK/lote.out" 2>/dev/null)" >&2
  tail -n 40 "$WORK/lote.err" >&2
  exit 1
fi

PORT="$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
"${MOTO[@]}" -H 127.0.0.1 -p "$PORT" >"$WORK/moto.log" 2>&1 &
MOTO_PID=$!
MOTO_URL="http://127.0.0.1:$PORT"
"$PY" - "$PORT" <<'EOF'
import socket, sys, time
deadline = time.time() + 60
while True:
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1).close()
        break
    except OSError:
        if time.time() > deadline:
            sys.exit("moto_server did not start")
        time.sleep(0.2)
EOF

date -u +"%F %T UTC"
echo "host: $(nproc) CPUs, load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
echo "lote $LOTE_URL (home $WORK/home), moto_server $MOTO_URL ($("$PY" -c 'import moto; print(moto.__version__)'))"
echo "filesystem of the lote home and the dd folder: $(df -PT "$WORK" | awk 'NR==2 {print $1" ("$2")"}')"
status=0
"$PY" "$HERE/s3_bench.py" --lote-endpoint "$LOTE_URL" --lote-home "$WORK/home" \
  --moto-endpoint "$MOTO_URL" --work "$WORK" --rounds "$ROUNDS" --threads "${THREADS:-8}" || status=$?

# The server's own small-object rate, not the client's: the same calls from C++
# (objstore::S3Store over libcurl), 2,000 4 KiB objects, 1 and 8 threads.
cmake --build "$BUILD" --target s3_small >/dev/null
SMALL="$BUILD/bench/s3/s3_small"
KEY="$(sed -n 's/^aws_access_key_id *= *//p' "$WORK/home/credentials")"
SECRET="$(sed -n 's/^aws_secret_access_key *= *//p' "$WORK/home/credentials")"
echo
echo "C++ client (objstore::S3Store), 2000 x 4 KiB, medians of $ROUNDS rounds:"
printf '%-34s %8s %8s %10s\n' measure lote moto lote/moto
for threads in 1 8; do
  lp=(); lg=(); mp=(); mg=()
  for r in $(seq "$ROUNDS"); do
    read -r p g < <("$SMALL" "$LOTE_URL" "$KEY" "$SECRET" "cxx-$threads-$r" 2000 "$threads" 4096) || status=1
    lp+=("$p"); lg+=("$g")
    read -r p g < <("$SMALL" "$MOTO_URL" test test "cxx-$threads-$r" 2000 "$threads" 4096) || status=1
    mp+=("$p"); mg+=("$g")
  done
  median() { printf '%s\n' "$@" | sort -n | sed -n "$(( ($# + 1) / 2 ))p"; }
  for op in PUT GET; do
    if [ "$op" = PUT ]; then l="$(median "${lp[@]}")"; m="$(median "${mp[@]}")"; else l="$(median "${lg[@]}")"; m="$(median "${mg[@]}")"; fi
    printf '%-34s %8s %8s %10s\n' "4 KiB $op ops/s, $threads thread(s)" "$l" "$m" \
      "$(awk -v a="$l" -v b="$m" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')"
  done
done
echo "load average at end $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "$status" != 0 ]; then
  echo "--- lote server stderr (last 40 lines)" >&2
  tail -n 40 "$WORK/lote.err" >&2
  echo "--- moto_server log (last 20 lines)" >&2
  tail -n 20 "$WORK/moto.log" >&2
fi
exit "$status"
