#!/usr/bin/env bash
# Record what the billion-context proxy sends upstream (run by hand, never in CI).
#   tools/proxy_record/run.sh PROXY_CHECKOUT KERNEL_CHECKOUT [OUT_DIR]
# PROXY_CHECKOUT: github ranxianglei/billion-context at 04f15b0 (v0.1.45); KERNEL_CHECKOUT:
# github ranxianglei/acp-kernel at tag v0.0.36 (not on the npm registry: built here and
# installed into the proxy from a local tarball). Both stay outside this repository.
# Raw recordings go to OUT_DIR (default: a temp dir); the structural fixtures are written
# to tests/doctrine/kernel/fixtures/proxy_record/ by fixtures.py.
# Everything listens on 127.0.0.1 only; each server is stopped by its own pid at exit.
set -euo pipefail
bc=$(cd "$1" && pwd); ak=$(cd "$2" && pwd); out=${3:-$(mktemp -d)}
here=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-$here/.venv/bin/python}
mkdir -p "$out"

if [ ! -f "$bc/dist/index.js" ]; then
  (cd "$ak" && npm ci --silent --no-audit --no-fund && npx tsup >/dev/null && npm pack --silent >/dev/null)
  tgz=$(ls "$ak"/acp-kernel-*.tgz | head -1)
  # The proxy pins acp-kernel 0.0.36 from the registry, which lacks it; its lockfile also
  # names a registry mirror for fzstd that is unreachable here. Point both elsewhere.
  sed -i "s#\"acp-kernel\": \"0.0.36\"#\"acp-kernel\": \"file:$tgz\"#" "$bc/package.json"
  sed -i 's#https://registry.npmmirror.com/#https://registry.npmjs.org/#g' "$bc/package-lock.json"
  (cd "$bc" && npm install --silent --no-audit --no-fund && npx tsup >/dev/null)
fi

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# One proxy + mock per recording, each with a fresh home, so no state carries over.
record() {  # NAME WINDOW SCENARIO CONFIG_EXTRA_JSON PPORT MPORT
  local name=$1 window=$2 scenario=$3 extra=$4 pport=$5 mport=$6 d="$out/$1"
  if [ -n "${ONLY:-}" ] && [ "$ONLY" != "$name" ]; then return 0; fi
  rm -rf "$d"; mkdir -p "$d/home"
  "$py" - "$d/cfg.json" "$window" "$mport" "$pport" "$extra" <<'EOF'
import json, sys
path, window, mport, pport, extra = sys.argv[1:]
cfg = {"port": int(pport), "host": "127.0.0.1", "autoUpdate": False,
       "providers": {f"http://127.0.0.1:{mport}": {"models": {"mock-coder": {"context": int(window)}}}}}
cfg.update(json.loads(extra))
json.dump(cfg, open(path, "w"), indent=1)
EOF
  "$py" "$here/tools/proxy_record/mock_upstream.py" --port "$mport" --record "$d/upstream.jsonl" \
    2>"$d/mock.log" & pids+=($!)
  HOME="$d/home" XDG_CONFIG_HOME="$d/home/c" XDG_DATA_HOME="$d/home/d" XDG_STATE_HOME="$d/home/s" \
    XDG_CACHE_HOME="$d/home/k" ACP_AUTO_UPDATE=0 \
    node "$bc/dist/index.js" --config "$d/cfg.json" --no-auto-update >"$d/proxy.log" 2>&1 & pids+=($!)
  for _ in $(seq 50); do
    grep -q "listening" "$d/proxy.log" 2>/dev/null && grep -q "recording" "$d/mock.log" 2>/dev/null && break
    sleep 0.2
  done
  (cd "$here" && PYTHONPATH="$here" "$py" -m tools.proxy_record.driver --proxy "http://127.0.0.1:$pport" \
     --mock "http://127.0.0.1:$mport" --scenario "$scenario" --window "$window" \
     --client-log "$d/client.jsonl" 2>"$d/driver.log")
  cleanup; pids=()
  echo "recorded $name -> $d"
}

# tuned: the recent zone and minimum range shrunk through the proxy's own config keys, so
# folds can happen at an 8K window (with the defaults the 5,000-token recent zone protects
# everything there). prompts: four short texts of our own, to see where the inline set lands.
tuned='"preserveRecentTokens": 800, "minCompressRange": 1000'
prompts='"acknowledgePromptsRisk": true, "prompts": {"compressPhilosophy": "PHILOSOPHY-MARKER", "howToCompressRules": "HOWTO-MARKER", "tier2DistillRules": "TIER2-MARKER", "tier3CondenseRules": "TIER3-MARKER"}'
record session-8k 8192 session '{}' 18787 18790
record tuned-8k 8192 session "{\"compress\": {$tuned}}" 18787 18790
record fold-early-8k 8192 fold-early "{\"compress\": {$tuned}}" 18787 18790
record prompts-8k 8192 session "{\"compress\": {$tuned, $prompts}}" 18787 18790
# One empty text among the four (what an export with empty distilled texts would give).
record prompts-empty-8k 8192 session "{\"compress\": {$tuned, ${prompts/TIER3-MARKER/}}}" 18787 18790
record pocket-3k 3072 session "{\"compress\": {$tuned, $prompts}}" 18787 18790
record ignore-8k 8192 ignore "{\"compress\": {$tuned}}" 18787 18790
record gentle-8k 8192 session "{\"compress\": {$tuned, \"nudgeGrowthTokens\": 500}}" 18787 18790
record retry-loop 8192 retry-loop '{}' 18787 18790
[ -n "${ONLY:-}" ] && exit 0
(cd "$here" && PYTHONPATH="$here" "$py" -m tools.proxy_record.fixtures "$out" \
   "$here/tests/doctrine/kernel/fixtures/proxy_record" --proxy "$bc" --kernel "$ak")
