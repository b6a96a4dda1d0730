#!/usr/bin/env bash
# Regenerate the acp-kernel differential fixtures (run by hand, never in CI).
#   tools/acp_parity/run.sh ACP_KERNEL_CHECKOUT [N_SCRIPTS] [SEED]
# ACP_KERNEL_CHECKOUT: a checkout of github ranxianglei/acp-kernel at tag v0.0.41, outside
# this repository. It is built here with its own npm dev dependencies (tsc, no bundler).
set -euo pipefail
src=$(cd "$1" && pwd); n=${2:-32}; seed=${3:-7000}
here=$(cd "$(dirname "$0")/../.." && pwd)
out=$here/tests/doctrine/kernel/fixtures/acp_parity
py=${PYTHON:-$here/.venv/bin/python}
# tsc reports type errors in the wire adapters (unused here) but still emits the JS.
(cd "$src" && npm ci --silent && { npx tsc --outDir "$src/build" --declaration false --declarationMap false --noEmit false >/dev/null || true; })
test -f "$src/build/index.js"
tmp=$(mktemp -d)
"$py" "$here/tools/acp_parity/gen_scripts.py" --out "$tmp" --n "$n" --seed "$seed"
rm -f "$out"/script_*.jsonl.gz
for f in "$tmp"/script_*.jsonl; do
  b=$(basename "$f" .jsonl)
  node "$here/tools/acp_parity/driver.mjs" "$src/build" "$f" > "$tmp/$b.expected.jsonl"
  gzip -9 -n -c "$f" > "$out/$b.jsonl.gz"
  gzip -9 -n -c "$tmp/$b.expected.jsonl" > "$out/$b.expected.jsonl.gz"
done
echo "acp-kernel $(node -p "require('$src/package.json').version") -> $out ($n scripts, seed $seed)"
rm -rf "$tmp"
