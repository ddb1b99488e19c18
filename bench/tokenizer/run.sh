#!/usr/bin/env bash
# Tokenizer and dataset-preparation benchmark, one run on one corpus
# (sotu + moby-dick + wordnet, one document per line, Llama 2 tokenizer):
#   - libsentencepiece called from C++ (1 thread, one pass)
#   - lote's encoder, 1 and 2 threads, RUNS runs each with a fresh tokenizer
#     (cold word cache), median reported, with the count of documents whose
#     ids differ from libsentencepiece's (must be 0):
#       a) one pass over the corpus (~0.3-0.6 s: cold cache, short)
#       b) PASSES passes in a row (a longer run: the corpus read as if it were
#          PASSES times larger with the same words, as on a big corpus)
#   - spm_encode --output_format=id (1 thread), and its mismatching lines vs lote
#   - end-to-end `lote data prepare` (block size 4096) MB/s, 1 and 2 threads
# Wall and CPU time are both printed. On a busy machine (see the load average
# at the end) wall time measures the other load; the "free-core" figures take
# out each thread's time spent runnable but waiting for a CPU (schedstat).
# usage: bench/tokenizer/run.sh BUILD_DIR   (env: RUNS=5 PASSES=4)
set -euo pipefail
BUILD="$(cd "${1:-build}" && pwd)"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
DATA="${LOTE_TEST_DATA:-$ROOT/.cache/testdata}"
MODEL="$DATA/tokenizer.model"
RUNS="${RUNS:-5}"
PASSES="${PASSES:-4}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
cat "$DATA/sotu.txt" "$DATA/moby-dick.txt" "$DATA/wordnet.txt" > "$TMP/corpus.txt"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"

now() { date +%s.%N; }

echo "--- encoders, one pass (in-process, same documents)"
LOTE_BENCH_DUMP="$TMP/lote.ids" "$BUILD/bench/tokenizer/tokenizer_bench" --threads 2 --runs "$RUNS" \
  "$MODEL" "$TMP/corpus.txt" | tee "$TMP/bench.out" | grep -v '^LOTE_'
eval "$(grep -E '^LOTE_[A-Z0-9_]+=' "$TMP/bench.out")"
P1_1T=$LOTE_1T_SECONDS P1_2T=$LOTE_2T_SECONDS P1_1T_CPU=$LOTE_1T_CPU P1_2T_CPU=$LOTE_2T_CPU
P1_1T_FREE=$LOTE_1T_FREE P1_2T_FREE=$LOTE_2T_FREE

echo "--- lote encoder, $PASSES passes per run (longer run)"
"$BUILD/bench/tokenizer/tokenizer_bench" --threads 2 --runs "$RUNS" --passes "$PASSES" --no-reference \
  "$MODEL" "$TMP/corpus.txt" | tee "$TMP/bench_long.out" | grep -v '^LOTE_'
eval "$(grep -E '^LOTE_[12]T_[A-Z]+=' "$TMP/bench_long.out")"

echo "--- spm_encode --output_format=id (1 thread)"
# cpu_of CMD...: runs CMD, sets CPU_S to its user+sys seconds and WALL_S to wall seconds.
cpu_of() {
  local t0 t1 out
  TIMEFORMAT='%U %S'
  t0=$(now)
  out=$( { time "$@" ; } 2>&1 >/dev/null | tail -1 )
  t1=$(now)
  CPU_S=$(echo "$out" | awk '{print $1 + $2}')
  WALL_S=$(echo "$t1 - $t0" | bc -l)
}
cpu_of sh -c "spm_encode --model='$MODEL' --output_format=id < '$TMP/corpus.txt' > '$TMP/spm.ids'"
SPM_S=$WALL_S
SPM_CPU=$CPU_S
SPM_MISMATCH=$(paste -d '\t' "$TMP/spm.ids" "$TMP/lote.ids" | awk -F '\t' '$1 != $2 {n++} END {print n+0}')
SPM_LINES=$(wc -l < "$TMP/spm.ids")
printf 'spm_encode                          %8.2f s (cpu %6.2f s) %8.2f MB/s %10.0f tokens/s  lines: %d, differing from lote: %d\n' \
  "$SPM_S" "$SPM_CPU" "$(echo "$LOTE_MB / $SPM_S" | bc -l)" "$(echo "$LOTE_TOKENS / $SPM_S" | bc -l)" "$SPM_LINES" "$SPM_MISMATCH"

echo "--- lote data prepare end to end (read, tokenize, pack, write; block 4096), 3 runs each"
for t in 1 2; do
  for r in 1 2 3; do
    rm -rf "$TMP/ds$t"
    cpu_of "$BUILD/lote" data prepare --input "$DATA/sotu.txt" "$DATA/moby-dick.txt" "$DATA/wordnet.txt" \
      --tokenizer "$MODEL" --block-size 4096 --output "$TMP/ds$t" --threads $t
    printf 'lote data prepare (%d thread%s)       %8.2f s (cpu %6.2f s) %8.2f MB/s (%.2f MB per CPU-second)\n' "$t" \
      "$([ $t = 1 ] || echo s)" "$WALL_S" "$CPU_S" "$(echo "$LOTE_MB / $WALL_S" | bc -l)" "$(echo "$LOTE_MB / $CPU_S" | bc -l)"
  done
done
cmp -s "$TMP/ds1/data.bin" "$TMP/ds2/data.bin" && echo "datasets from 1 and 2 threads: byte-identical" || echo "datasets differ!"

echo "--- ratios (medians of $RUNS runs)"
r() { echo "$1 / $2" | bc -l; }
printf 'lote 1 thread vs spm_encode:        x%.2f wall, x%.2f CPU\n' "$(r "$SPM_S" "$P1_1T")" "$(r "$SPM_CPU" "$P1_1T_CPU")"
printf 'lote 1 thread vs libsentencepiece:  x%.2f\n' "$(r "$LOTE_REF_SECONDS" "$P1_1T")"
printf 'lote 2 threads vs spm_encode:       x%.2f wall\n' "$(r "$SPM_S" "$P1_2T")"
printf '2 threads vs 1, one pass:           x%.2f wall, x%.2f free-core, x%.2f from CPU (1T CPU / (2T CPU / 2))\n' \
  "$(r "$P1_1T" "$P1_2T")" "$(r "$P1_1T_FREE" "$P1_2T_FREE")" "$(r "$P1_1T_CPU" "($P1_2T_CPU / 2)")"
printf '2 threads vs 1, %d passes:           x%.2f wall, x%.2f free-core, x%.2f from CPU\n' "$PASSES" \
  "$(r "$LOTE_1T_SECONDS" "$LOTE_2T_SECONDS")" "$(r "$LOTE_1T_FREE" "$LOTE_2T_FREE")" "$(r "$LOTE_1T_CPU" "($LOTE_2T_CPU / 2)")"
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
