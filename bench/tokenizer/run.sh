#!/usr/bin/env bash
# Tokenizer and dataset-preparation benchmark, one run on one corpus
# (sotu + moby-dick + wordnet, one document per line, Llama 2 tokenizer):
#   - libsentencepiece called from C++ (1 thread)
#   - lote's encoder, 1 and 2 threads (cold word cache each run), with the count
#     of documents whose ids differ from libsentencepiece's (must be 0)
#   - spm_encode --output_format=id (1 thread), and its mismatching lines vs lote
#   - end-to-end `lote data prepare` (block size 4096) MB/s, 1 and 2 threads
# usage: bench/tokenizer/run.sh BUILD_DIR
set -euo pipefail
BUILD="$(cd "${1:-build}" && pwd)"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
DATA="${LOTE_TEST_DATA:-$ROOT/.cache/testdata}"
MODEL="$DATA/tokenizer.model"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
cat "$DATA/sotu.txt" "$DATA/moby-dick.txt" "$DATA/wordnet.txt" > "$TMP/corpus.txt"

now() { date +%s.%N; }

echo "--- encoders (in-process, same documents)"
LOTE_BENCH_DUMP="$TMP/lote.ids" "$BUILD/bench/tokenizer/tokenizer_bench" "$MODEL" 2 "$TMP/corpus.txt" | tee "$TMP/bench.out"
eval "$(grep -E '^LOTE_[A-Z0-9_]+=' "$TMP/bench.out")"

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

echo "--- lote data prepare end to end (read, tokenize, pack, write; block 4096)"
for t in 1 2; do
  cpu_of "$BUILD/lote" data prepare --input "$DATA/sotu.txt" "$DATA/moby-dick.txt" "$DATA/wordnet.txt" \
    --tokenizer "$MODEL" --block-size 4096 --output "$TMP/ds$t" --threads $t
  printf 'lote data prepare (%d thread%s)       %8.2f s (cpu %6.2f s) %8.2f MB/s (%.2f MB per CPU-second)\n' "$t" \
    "$([ $t = 1 ] || echo s)" "$WALL_S" "$CPU_S" "$(echo "$LOTE_MB / $WALL_S" | bc -l)" "$(echo "$LOTE_MB / $CPU_S" | bc -l)"
done
cmp -s "$TMP/ds1/data.bin" "$TMP/ds2/data.bin" && echo "datasets from 1 and 2 threads: byte-identical" || echo "datasets differ!"

echo "--- ratios"
printf 'lote 1 thread vs spm_encode:        x%.2f\n' "$(echo "$SPM_S / $LOTE_1T_SECONDS" | bc -l)"
printf 'lote 1 thread vs libsentencepiece:  x%.2f\n' "$(echo "$LOTE_REF_SECONDS / $LOTE_1T_SECONDS" | bc -l)"
printf 'lote 2 threads vs lote 1 thread:    x%.2f\n' "$(echo "$LOTE_1T_SECONDS / $LOTE_2T_SECONDS" | bc -l)"
printf 'lote 2 threads vs spm_encode:       x%.2f\n' "$(echo "$SPM_S / $LOTE_2T_SECONDS" | bc -l)"
# CPU time is less sensitive to other load on the machine: the 2-thread speedup
# two free cores would give is 1-thread CPU / (2-thread CPU / 2).
printf 'lote 1 thread vs spm_encode, CPU:   x%.2f\n' "$(echo "$SPM_CPU / $LOTE_1T_CPU" | bc -l)"
printf '2-thread speedup from CPU time:     x%.2f\n' "$(echo "$LOTE_1T_CPU / ($LOTE_2T_CPU / 2)" | bc -l)"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
