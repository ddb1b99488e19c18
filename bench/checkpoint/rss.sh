#!/usr/bin/env bash
# Peak memory of the checkpoint tools at 7B scale (issue 23): a checkpoint of LAYERS
# Llama 2 7B-shaped layers (hidden 4096, MLP 11008, 32 heads, vocabulary 32000) in a
# TP x DP layout, written without training by bench/checkpoint/synthetic_checkpoint
# (the training loop's CheckpointWriter, one rank at a time), then
#   lote checkpoint export         (whole model.safetensors)
#   lote checkpoint reshard        (to 1 x 1: every tensor whole)
#   resume on another layout       (LoadCheckpoint for rank 0 of 1 x 8, the rank's own
#                                   state subtracted: that is what it must hold)
#   BEFORE=<another lote binary>   its export in the same run, if given (the peer: an
#                                   export that assembles the whole model in memory)
# each under /usr/bin/time (maximum resident set), printed against the largest tensor
# (the embedding, 32000 x 4096 fp32 = 500 MiB). The export of the re-sharded checkpoint
# must be byte-identical to the export of the original (cmp). Everything is deleted at
# the end. usage: bench/checkpoint/rss.sh BUILD_DIR   (env: LAYERS=2 TP=2 DP=2 BEFORE=)
set -euo pipefail
BUILD="$(cd "${1:-build}" && pwd)"
LOTE="$BUILD/lote"
SYNTH="$BUILD/bench/checkpoint/synthetic_checkpoint"
LAYERS="${LAYERS:-2}"
TP="${TP:-2}"
DP="${DP:-2}"
BEFORE="${BEFORE:-}"
WORK="$(mktemp -d "$BUILD/bench-ckpt-rss.XXXXXX")"  # on the build folder's disk
trap 'rm -rf "$WORK"' EXIT
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores; free disk: $(df -h "$WORK" | awk 'NR==2 {print $4}')"

cat > "$WORK/config.json" <<EOF
{"hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": $LAYERS,
 "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32000,
 "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "tie_word_embeddings": false}
EOF
LARGEST=$((32000 * 4096 * 4))
mib() { echo "$1" | awk '{printf "%.0f", $1 / 1048576}'; }

t0=$(date +%s.%N)
"$SYNTH" write --config "$WORK/config.json" --tp "$TP" --dp "$DP" --uri "file://$WORK/ck" --job j --step 10 >/dev/null
t1=$(date +%s.%N)
SRC="$WORK/ck/j/step_10"
echo "checkpoint: $LAYERS 7B-shaped layers, ${TP}x${DP}, $(du -sb "$SRC" | awk '{printf "%.2f GB", $1 / 1e9}') (model shards $(du -cb "$SRC"/model-tp*.safetensors | tail -1 | awk '{printf "%.2f GB", $1 / 1e9}')), written in $(echo "$t1 - $t0" | bc -l | xargs printf '%.1f') s"
echo "largest tensor: $(mib $LARGEST) MiB (model.embed_tokens.weight, lm_head.weight: 32000 x 4096 fp32)"

# peak RSS in bytes of a command (its stdout/stderr to $WORK/last.log)
peak() {
  if ! /usr/bin/time -f '%M' -o "$WORK/time.txt" "$@" >"$WORK/last.log" 2>&1; then
    echo "failed: $*" >&2; cat "$WORK/last.log" >&2; return 1
  fi
  echo $(( $(tail -1 "$WORK/time.txt") * 1024 ))
}
row() { printf '%-44s %8s MiB  %5.2f x largest tensor\n' "$1" "$(mib "$2")" "$(echo "$2 / $LARGEST" | bc -l)"; }

printf '%-44s %12s  %s\n' "tool" "peak RSS" "ratio"
rss=$(peak "$LOTE" checkpoint export "$SRC" --output "$WORK/ex1") || exit 1
row "lote checkpoint export (${TP}x${DP})" "$rss"
if [ -n "$BEFORE" ]; then
  rss_before=$(peak "$BEFORE" checkpoint export "$SRC" --output "$WORK/ex0") || exit 1
  row "BEFORE checkpoint export (${TP}x${DP})" "$rss_before"
  cmp "$WORK/ex0/model.safetensors" "$WORK/ex1/model.safetensors"
  rm -rf "$WORK/ex0"
  echo "export memory, this build / BEFORE: $(echo "$rss / $rss_before" | bc -l | xargs printf '%.3f')"
fi
rss=$(peak "$LOTE" checkpoint reshard "$SRC" --output "$WORK/r11" --tensor-parallel-size 1 --data-parallel-size 1) || exit 1
row "lote checkpoint reshard (${TP}x${DP} -> 1x1)" "$rss"
out=$("$SYNTH" load --config "$WORK/config.json" --tp 1 --dp 8 --rank 0 --uri "file://$SRC")
state=$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["state_bytes"])')
rss=$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["peak_rss_bytes"])')
row "resume as rank 0 of 1x8: peak RSS" "$rss"
row "  ... less the rank's state ($(mib "$state") MiB)" "$((rss - state))"
rm -rf "$WORK/ck"
"$LOTE" checkpoint export "$WORK/r11/step_10" --output "$WORK/ex2" >/dev/null 2>&1
cmp "$WORK/ex1/model.safetensors" "$WORK/ex2/model.safetensors"
echo "export of the 1x1 re-shard == export of the ${TP}x${DP} original: byte-identical ($(du -b "$WORK/ex1/model.safetensors" | awk '{printf "%.2f GB", $1 / 1e9}'))"
