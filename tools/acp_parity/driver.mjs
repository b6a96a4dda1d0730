// Differential driver: replays a doctrine.kernel replay script through a built
// acp-kernel and prints one structural JSON line per op (the same shape as
// `python -m doctrine.kernel replay --structural`). Run by hand, see README.md:
//   node tools/acp_parity/driver.mjs ACP_KERNEL_BUILD_DIR SCRIPT.jsonl > OUT.jsonl
import { readFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { pathToFileURL } from "node:url";
import { join } from "node:path";

const [buildDir, scriptPath] = process.argv.slice(2);
const kernel = await import(pathToFileURL(join(buildDir, "index.js")).href);
const { createCore, createInitialState, defaultConfig } = kernel;
const core = createCore();

// ACP_TIMING=1: print only {"op", "n", "ms"} per op (processTurn / applyCompression time).
const TIMING = !!process.env.ACP_TIMING;
const sha = (t) => createHash("sha256").update(t ?? "", "utf8").digest("hex").slice(0, 16);

// Map the reference's error / warning prose onto the kinds both sides share.
const KINDS = [
  ["none_resolved", /None of the .* requested range\(s\) resolved/],
  ["gate_consumed", /Requested range\(s\) already compressed/],
  ["too_small", /Total compressible content too small/],
  ["overlap", /overlaps an earlier range/],
  ["snapped_message", /refers to a message already compressed into an active block/],
  ["snapped_block", /was consumed by a higher-tier block — anchored/],
  ["already_compressed", /Skipped range .* already compressed/],
  ["protected_zone", /entirely within the protected zone/],
  ["protected_excluded", /Excluded \d+ protected message/],
  ["no_new_messages", /contains no new compressible messages/],
  ["summary_empty", /Summary is empty/],
  ["summary_short", /Summary too short/],
  ["summary_long", /Summary too long/],
  ["nothing_compressible", /Range contains no compressible messages/],
  ["unknown_ref", /does not exist in this session/],
  ["invalid_ref", /Invalid boundary ref/],
  ["not_visible", /not found in visible context|none of its content .* is visible/],
];
function kindOf(msg) {
  for (const [k, re] of KINDS) if (re.test(msg)) return k;
  return "other:" + msg.slice(0, 60);
}

function toCore(m) {
  const out = { id: m.id, role: m.role, contentType: m.content_type ?? m.contentType ?? "text", text: m.text ?? "" };
  const tn = m.tool_name ?? m.toolName;
  const tc = m.tool_call_id ?? m.toolCallId;
  if (tn != null) out.toolName = tn;
  if (tc != null) out.toolCallId = tc;
  return out;
}

const rng = (r) => ({ start: r.startRef, end: r.endRef, count: r.count, tokens: r.tokens, chars: r.chars ?? null,
  tool_pct: r.toolPct, text_pct: r.textPct, dangerous: !!r.dangerous });

function stateRecord(s) {
  return {
    refs: Object.keys(s.messageRefs.byRef).length,
    blocked: Object.values(s.messageRefs.byRaw).filter((v) => v === "BLOCKED").length,
    snapshot: Object.keys(s.tokenSnapshot ?? {}).length,
    stamps: [s.nudge.lastPerMessageNudgeTokens, s.nudge.lastNudgeShownTokens,
      Object.fromEntries(Object.entries(s.nudge.lastShownByTier ?? {}).map(([k, v]) => [String(k), v]))],
    stats: [s.stats.tokensCompressed, s.stats.compressionCount],
    next_block_id: s.nextBlockId,
    next_run_id: s.nextRunId,
    blocks: s.blocks.map((b) => ({ id: b.blockId, tier: b.tier, active: b.active, direct: b.directMessageIds,
      effective: b.effectiveMessageIds, direct_blocks: b.directBlockIds, tokens: b.compressedTokens,
      survived: b.survivedCount, generation: b.generation })),
  };
}

const lines = readFileSync(scriptPath, "utf8").split("\n");
let config = null;
let state = createInitialState();
let history = [];
let lastMessages = [];
let lastView = [];
for (const raw of lines) {
  const s = raw.trim();
  if (!s || s.startsWith("#") || s.startsWith("//")) continue;
  const d = JSON.parse(s);
  if (config === null) {
    const { model_context_limit, ...rest } = d;
    config = defaultConfig(model_context_limit, rest);
    continue;
  }
  let rec;
  if (d.op === "turn") {
    if (d.messages) history = d.messages.map(toCore);
    else history = history.concat((d.append ?? []).map(toCore));
    const t0 = performance.now();
    const r = core.processTurn({ messages: history, state, config, tokenCount: d.token_count, renderTags: d.render_tags ?? "all" });
    const ms = performance.now() - t0;
    state = r.state;
    if (TIMING) {
      lastMessages = history;
      lastView = r.messages;
      process.stdout.write(JSON.stringify({ op: "turn", n: history.length, ms }) + "\n");
      continue;
    }
    lastMessages = history;
    lastView = r.messages;
    const n = r.nudge;
    rec = {
      op: "turn",
      inject: n.shouldInject,
      tier: n.shouldInject ? n.tier : null,
      emergency: !!(n.breakdown?.emergencyOverride || n.breakdown?.overLimit),
      ranges: n.compressibleRanges.map(rng),
      protected: (n.protectedRanges ?? []).map((p) => ({ start: p.startRef, end: p.endRef, count: p.count, tokens: p.tokens, tools: p.tools })),
      tier_targets: (n.tierTargetBlocks ?? []).map((b) => b.blockId),
      messages: r.messages.map((m) => [m.id, m.role, m.contentType, sha(m.text)]),
      ...stateRecord(state),
    };
  } else if (d.op === "compress") {
    // The host's side of a compress call: startId / endId (or messageId) become the refs.
    const ranges = d.ranges.map((x) => {
      const r = { startRef: x.startId ?? x.startRef ?? x.messageId, endRef: x.endId ?? x.endRef ?? x.messageId,
        summary: x.summary, compressCallId: d.call_id };
      if (x.topic !== undefined) r.topic = x.topic;
      if (x.summaryMaxChars !== undefined) r.summaryMaxChars = x.summaryMaxChars;
      return r;
    });
    const t0 = performance.now();
    const r = core.applyCompression({ ranges, messages: d.on === "view" ? lastView : lastMessages, state, config });
    const ms = performance.now() - t0;
    state = r.state;
    if (TIMING) {
      process.stdout.write(JSON.stringify({ op: "compress", n: lastMessages.length, ms, blocks: r.result.blocksCreated }) + "\n");
      continue;
    }
    rec = {
      op: "compress",
      blocks_created: r.result.blocksCreated,
      tokens_compressed: r.result.tokensCompressed,
      errors: r.result.errors.map(kindOf),
      warnings: r.result.warnings.map(kindOf),
      ...stateRecord(state),
    };
    if (process.env.ACP_PROSE) rec.prose = [...r.result.errors, ...r.result.warnings];
  } else {
    throw new Error("unknown op " + d.op);
  }
  process.stdout.write(JSON.stringify(rec) + "\n");
}
