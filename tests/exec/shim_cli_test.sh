#!/bin/bash
# Runs one node through `lote exec-shim` by hand (as the local executor would):
# the outcome is recorded, output captured, and a second supervisor never runs
# the node again.
set -euo pipefail
LOTE="$1"
# Debian's interpreter starts fastest; any python3 will do (stdlib only).
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
HOME_DIR="$(mktemp -d /tmp/lote-exec-cli-XXXXXX)"
trap 'rm -rf "$HOME_DIR"' EXIT
NODE="$HOME_DIR/jobs/cli-job/1/0"
mkdir -p "$NODE/work"
cat > "$NODE/spec.json" <<JSON
{
  "node": {"job_id": "cli-job", "attempt": 1, "node_index": 0},
  "argv": ["sh", "-c", "echo hello from \$AWS_BATCH_JOB_ID; echo oops >&2; pwd; exit 7"],
  "env": ["PATH=/usr/bin:/bin", "AWS_BATCH_JOB_ID=cli-job"],
  "working_dir": "$NODE/work",
  "output_path": "$NODE/output.log",
  "rlimits": [{"name": "nofile", "resource": 7, "soft": 512, "hard": 512}],
  "notices": ["warning: this is a notice"]
}
JSON

"$LOTE" exec-shim --node-dir "$NODE"
"$PY" - "$NODE" <<'PY'
import json, sys
node = sys.argv[1]
st = json.load(open(node + "/status.json"))
assert st["outcome"] == "exited" and st["exit_code"] == 7, st
out = open(node + "/output.log").read()
# The output holds only what the command wrote; lote's notices go to the supervisor's log.
want = "hello from cli-job\noops\n" + node + "/work\n"
assert out == want, repr(out)
assert "this is a notice" in open(node + "/shim.log").read()
for rec in ("shim.json", "command.json"):
    r = json.load(open(node + "/" + rec))
    assert r["process"]["pid"] > 0 and r["process"]["start_time"] > 0, r
PY

# A second supervisor for the same node must not run it again.
"$LOTE" exec-shim --node-dir "$NODE"
test "$(grep -c '^hello' "$NODE/output.log")" = 1
grep -q "already has an outcome" "$NODE/shim.log"

# Missing --node-dir is a usage error.
if "$LOTE" exec-shim 2>/dev/null; then echo "exec-shim without --node-dir succeeded"; exit 1; fi
echo "exec_shim_cli: ok"
