"""The Session Marathon's material: module templates, the base repository, the migration plan.

Kept apart from the generator (``marathon.py``) so the generator reads as the task list.
Every string is written for this project; the marathon is an evaluation workload and is
never used for training (``data_gen.synthetic`` has its own, different families).
"""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class Template:
    """One module a pass creates, tests, renames and extends."""

    stem: str  # src/<stem>.ts, tests/<stem>.test.ts
    type_name: str
    f1: str  # the function with the seeded bug (renamed later)
    f1_new: str
    type_new: str
    f2: str
    f3: str
    helper: str  # extracted to src/utils/<helper>.ts in the next pass
    helper_block: str  # the helper's code, exactly as in the module
    body: str  # the rest of the module (uses {f1} {T}), the buggy line included
    buggy: str
    fixed: str
    fail_test: str  # the test that fails until the bug is fixed
    fail_expect: str  # its expect line
    expected: str
    received: str
    tests: str  # other it-blocks, by describe (uses {f1} {T})
    f3_code: str  # uses {f1} {T}
    f3_test: str
    spec: str  # what the user asks for, in words


TEMPLATES: tuple[Template, ...] = (
    Template(
        "pricing", "Cents", "toCents", "amountToCents", "MinorUnits", "formatCents", "sumCents", "padAmount",
        "export function padAmount(text: string, width: number): string {\n"
        "  return text.length >= width ? text : ' '.repeat(width - text.length) + text;\n}\n",
        "export function {f1}(amount: number): {T} {\n  return Math.floor(amount * 100);\n}\n\n"
        "export function formatCents(value: {T}, currency: string): string {\n"
        "  return padAmount(`${currency} ${(value / 100).toFixed(2)}`, 12);\n}\n",
        "  return Math.floor(amount * 100);", "  return Math.round(amount * 100);",
        "rounds fractional amounts", "expect({f1}(19.99)).toBe(1999);", "1999", "1998",
        "    it('converts whole amounts', () => {\n      expect({f1}(12)).toBe(1200);\n    });\n",
        "export function sumCents(values: {T}[]): {T} {\n  return values.reduce((total, v) => total + v, 0);\n}\n",
        "    it('adds amounts', () => {\n      expect(sumCents([100, 250])).toBe(350);\n    });\n",
        "a `Cents` type, `toCents(amount)` that converts a decimal amount to whole cents, and "
        "`formatCents(value, currency)` that prints it right-aligned with two decimals"),
    Template(
        "slugs", "Slug", "slugify", "toSlug", "UrlSlug", "isSlug", "truncateSlug", "collapseSpaces",
        "export function collapseSpaces(text: string): string {\n  return text.trim().replace(/\\s+/g, ' ');\n}\n",
        "export function {f1}(title: string): {T} {\n"
        "  return collapseSpaces(title).toLowerCase().split(' ').join('_');\n}\n\n"
        "export function isSlug(value: string): boolean {\n  return /^[a-z0-9]+(-[a-z0-9]+)*$/.test(value);\n}\n",
        "  return collapseSpaces(title).toLowerCase().split(' ').join('_');",
        "  return collapseSpaces(title).toLowerCase().split(' ').join('-');",
        "joins words with hyphens", "expect({f1}('Hello Big World')).toBe('hello-big-world');",
        '"hello-big-world"', '"hello_big_world"',
        "    it('lower-cases a single word', () => {\n      expect({f1}('Hello')).toBe('hello');\n    });\n",
        "export function truncateSlug(slug: {T}, max: number): {T} {\n"
        "  return slug.length <= max ? slug : slug.slice(0, max).replace(/-+$/, '');\n}\n",
        "    it('cuts at a word boundary', () => {\n      expect(truncateSlug('a-b-c', 3)).toBe('a-b');\n    });\n",
        "a `Slug` type, `slugify(title)` that lower-cases a title and joins its words with hyphens, and "
        "`isSlug(value)` that validates one"),
    Template(
        "retry", "RetryPolicy", "backoffDelay", "delayForAttempt", "BackoffPolicy", "shouldRetry", "totalDelay",
        "clampMs",
        "export function clampMs(ms: number, max: number): number {\n  return Math.min(Math.max(ms, 0), max);\n}\n",
        "export interface {T} {\n  attempts: number;\n  baseMs: number;\n}\n\n"
        "export function {f1}(policy: {T}, attempt: number): number {\n"
        "  return clampMs(policy.baseMs * attempt, 30_000);\n}\n\n"
        "export function shouldRetry(policy: {T}, attempt: number): boolean {\n"
        "  return attempt < policy.attempts;\n}\n",
        "  return clampMs(policy.baseMs * attempt, 30_000);",
        "  return clampMs(policy.baseMs * 2 ** (attempt - 1), 30_000);",
        "doubles the delay on each attempt", "expect({f1}({ attempts: 5, baseMs: 100 }, 4)).toBe(800);",
        "800", "400",
        "    it('waits the base delay first', () => {\n      expect({f1}({ attempts: 3, baseMs: 50 }, 1)).toBe(50);\n"
        "    });\n",
        "export function totalDelay(policy: {T}): number {\n  let total = 0;\n"
        "  for (let attempt = 1; attempt < policy.attempts; attempt++) total += {f1}(policy, attempt);\n"
        "  return total;\n}\n",
        "    it('sums every wait', () => {\n      expect(totalDelay({ attempts: 3, baseMs: 100 })).toBe(300);\n    });\n",
        "a `RetryPolicy` interface (`attempts`, `baseMs`), `backoffDelay(policy, attempt)` with exponential "
        "backoff capped at 30 s, and `shouldRetry(policy, attempt)`"),
    Template(
        "paging", "PageRequest", "pageOffset", "offsetOf", "PageQuery", "pageCount", "hasNextPage", "positiveInt",
        "export function positiveInt(value: number): number {\n  return Math.max(1, Math.floor(value));\n}\n",
        "export interface {T} {\n  page: number;\n  size: number;\n}\n\n"
        "export function {f1}(req: {T}): number {\n  return positiveInt(req.page) * positiveInt(req.size);\n}\n\n"
        "export function pageCount(total: number, size: number): number {\n"
        "  return Math.ceil(total / positiveInt(size));\n}\n",
        "  return positiveInt(req.page) * positiveInt(req.size);",
        "  return (positiveInt(req.page) - 1) * positiveInt(req.size);",
        "starts the first page at offset 0", "expect({f1}({ page: 1, size: 25 })).toBe(0);", "0", "25",
        "    it('counts partial pages', () => {\n      expect(pageCount(51, 25)).toBe(3);\n    });\n",
        "export function hasNextPage(req: {T}, total: number): boolean {\n  return {f1}(req) + req.size < total;\n}\n",
        "    it('sees a second page', () => {\n      expect(hasNextPage({ page: 1, size: 10 }, 25)).toBe(true);\n"
        "    });\n",
        "a `PageRequest` interface (`page` from 1, `size`), `pageOffset(req)` giving the first row index of "
        "the page, and `pageCount(total, size)`"),
    Template(
        "durations", "Millis", "parseDuration", "durationToMs", "Milliseconds", "formatDuration", "addDurations",
        "unitFactor",
        "export function unitFactor(unit: string): number {\n"
        "  const factors: Record<string, number> = { s: 1000, m: 1000, h: 3_600_000 };\n"
        "  return factors[unit] ?? 0;\n}\n",
        "export type {T} = number;\n\n"
        "export function {f1}(text: string): {T} {\n  const match = /^(\\d+)([smh])$/.exec(text.trim());\n"
        "  return match ? Number(match[1]) * unitFactor(match[2]) : 0;\n}\n\n"
        "export function formatDuration(ms: {T}): string {\n"
        "  return ms >= 60_000 ? `${Math.round(ms / 60_000)}m` : `${Math.round(ms / 1000)}s`;\n}\n",
        "  const factors: Record<string, number> = { s: 1000, m: 1000, h: 3_600_000 };",
        "  const factors: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000 };",
        "reads minutes", "expect({f1}('3m')).toBe(180000);", "180000", "3000",
        "    it('reads seconds', () => {\n      expect({f1}('45s')).toBe(45000);\n    });\n",
        "export function addDurations(a: {T}, b: {T}): {T} {\n  return a + b;\n}\n",
        "    it('adds two durations', () => {\n      expect(addDurations(1000, 500)).toBe(1500);\n    });\n",
        "a `Millis` type, `parseDuration(text)` for strings like `45s`, `3m` or `2h`, and "
        "`formatDuration(ms)`"),
    Template(
        "masking", "MaskOptions", "maskCard", "redactCard", "RedactOptions", "maskEmail", "isMasked", "repeatChar",
        "export function repeatChar(char: string, count: number): string {\n"
        "  return count > 0 ? char.repeat(count) : '';\n}\n",
        "export interface {T} {\n  visible: number;\n  char: string;\n}\n\n"
        "export function {f1}(digits: string, opts: {T}): string {\n  const kept = digits.slice(0, opts.visible);\n"
        "  return repeatChar(opts.char, digits.length - kept.length) + kept;\n}\n\n"
        "export function maskEmail(address: string): string {\n  const [user, domain] = address.split('@');\n"
        "  return `${user.slice(0, 1)}***@${domain}`;\n}\n",
        "  const kept = digits.slice(0, opts.visible);", "  const kept = digits.slice(-opts.visible);",
        "keeps the last four digits", "expect({f1}('4111111111111111', { visible: 4, char: '*' })).toBe('************1111');",
        '"************1111"', '"************4111"',
        "    it('masks the local part of an email', () => {\n      expect(maskEmail('ada@example.org')).toBe("
        "'a***@example.org');\n    });\n",
        "export function isMasked(value: string, opts: {T}): boolean {\n  return value.startsWith(opts.char);\n}\n",
        "    it('recognises masked values', () => {\n      expect(isMasked('**12', { visible: 2, char: '*' })).toBe(true);"
        "\n    });\n",
        "a `MaskOptions` interface (`visible`, `char`), `maskCard(digits, opts)` that keeps only the last "
        "`visible` digits, and `maskEmail(address)`"),
)

PROJECTS = ("ledgerline", "tidewater", "quillmark", "harborview", "fernwick", "copperleaf")
TTL_VALUES = (450, 900, 1200, 1800, 2700, 3300, 5400, 7200, 10800)
NAMESPACES = ("kv:v2:", "sess:kv:", "store:v2:", "kv2/")
STORE_TESTS = ("round-trips a value", "keeps keys apart", "reads back what it wrote")

SYSTEM = ("You are a coding agent working in a TypeScript repository at {root}. Use `str_replace_editor` "
          "to read and edit files and `execute_bash` to run commands (`npx tsc --noEmit`, `npx jest`, "
          "`npm run build`, grep). Work in small verified steps and say briefly what you did after each task.")

TOOLS = [
    {"type": "function", "function": {
        "name": "execute_bash", "description": "Run a bash command in the repository's shell.",
        "parameters": {"type": "object", "properties": {
            "command": {"type": "string", "description": "The command line to run."}}, "required": ["command"]}}},
    {"type": "function", "function": {
        "name": "str_replace_editor", "description": "View, create and edit files (absolute paths).",
        "parameters": {"type": "object", "properties": {
            "command": {"type": "string", "enum": ["view", "create", "str_replace", "insert"],
                        "description": "What to do."},
            "path": {"type": "string", "description": "Absolute path of a file or folder."},
            "file_text": {"type": "string", "description": "Content of a new file (create)."},
            "old_str": {"type": "string", "description": "Exact text to replace (str_replace)."},
            "new_str": {"type": "string", "description": "Replacement or inserted text."},
            "insert_line": {"type": "integer", "description": "Insert after this line (insert)."},
            "view_range": {"type": "array", "items": {"type": "integer"}, "description": "First and last line."}},
            "required": ["command", "path"]}}},
    {"type": "function", "function": {
        "name": "finish", "description": "Say the task is done, with a one-line report.",
        "parameters": {"type": "object", "properties": {"message": {"type": "string", "description": "Report."}},
                       "required": ["message"]}}},
]


def fill(text: str, f1: str, t: str) -> str:
    return text.replace("{f1}", f1).replace("{T}", t)


def module_text(tpl: Template) -> str:
    return tpl.helper_block + "\n" + fill(tpl.body, tpl.f1, tpl.type_name)


def test_text(tpl: Template, extra: int) -> str:
    imports = ", ".join([tpl.f1, tpl.f2, tpl.helper])
    filler = "".join(f"    it('handles case {k + 1}', () => {{\n      expect({tpl.helper}).toBeDefined();\n    }});\n"
                     for k in range(extra))
    body = (f"import {{ {imports} }} from '../src/{tpl.stem}';\n\n"
            f"describe('{tpl.stem}', () => {{\n  describe('{tpl.f1}', () => {{\n"
            + fill(tpl.tests, tpl.f1, tpl.type_name)
            + f"    it('{tpl.fail_test}', () => {{\n      {fill(tpl.fail_expect, tpl.f1, tpl.type_name)}\n    }});\n"
            + f"  }});\n  describe('{tpl.helper}', () => {{\n" + filler + "  });\n});\n")
    return body


def base_files(project: str, ttl: int, report_lines: int) -> dict[str, str]:
    """The repository at the start of the session."""
    rows = max(2, report_lines // 4)
    report = ["export interface ReportRow {", "  label: string;", "  value: number;", "}", ""]
    for k in range(1, 7):
        report.append(f"export const COLUMN_WIDTH_{k}: number = {8 + 2 * k};")
    report.append("")
    for k in range(rows):
        report += [f"export function formatRow{k}(row: ReportRow): string {{",
                   f"  return row.label.padEnd(COLUMN_WIDTH_{k % 6 + 1}) + String(row.value * {k + 1});", "}", ""]
    return {
        "package.json": json.dumps({"name": project, "version": "1.4.0", "private": True, "scripts": {
            "build": "tsc -p tsconfig.build.json", "test": "jest", "typecheck": "tsc --noEmit"},
            "devDependencies": {"jest": "29.7.0", "ts-jest": "29.1.2", "typescript": "5.4.5"}}, indent=2) + "\n",
        "tsconfig.json": json.dumps({"compilerOptions": {"target": "ES2022", "module": "commonjs", "strict": True,
                                                         "outDir": "dist"}, "include": ["src", "tests"]}, indent=2) + "\n",
        "README.md": f"# {project}\n\nSmall TypeScript utilities shared by the {project} services.\n\n## Modules\n",
        "CHANGELOG.md": "# Changelog\n\n## Unreleased\n\n## 1.4.0\n- Session expiry helpers.\n",
        "src/index.ts": "export * from './config';\nexport * from './session';\nexport * from './text';\n"
                        "export * from './report';\n",
        "src/config.ts": f"export const APP_NAME = '{project}';\nexport const SESSION_TTL_SECONDS = {ttl};\n"
                         "export const MAX_SESSIONS = 250;\n",
        "src/text.ts": "export function normaliseWhitespace(text: string): string {\n"
                       "  return text.replace(/\\s+/g, ' ').trim();\n}\n\n"
                       "export function titleCase(text: string): string {\n"
                       "  return normaliseWhitespace(text).split(' ').map((w) => w[0].toUpperCase() + w.slice(1)).join(' ');\n}\n",
        "src/session.ts": "import { SESSION_TTL_SECONDS } from './config';\nimport { LegacyStore } from './legacy/store';\n\n"
                          "const store = new LegacyStore();\n\n"
                          "export function saveSession(id: string, payload: string): void {\n  store.put(id, payload);\n}\n\n"
                          "export function loadSession(id: string): string | undefined {\n  return store.get(id);\n}\n\n"
                          "export function sessionExpiry(createdAt: number): number {\n"
                          "  return createdAt + SESSION_TTL_SECONDS * 1000;\n}\n",
        "src/legacy/store.ts": "export class LegacyStore {\n  private data = new Map<string, string>();\n\n"
                               "  get(key: string): string | undefined {\n    return this.data.get(key);\n  }\n\n"
                               "  put(key: string, value: string): void {\n    this.data.set(key, value);\n  }\n}\n",
        "src/report.ts": "\n".join(report),
        "tests/text.test.ts": "import { titleCase, normaliseWhitespace } from '../src/text';\n\n"
                              "describe('text', () => {\n  it('title-cases words', () => {\n"
                              "    expect(titleCase('hello  world')).toBe('Hello World');\n  });\n"
                              "  it('collapses whitespace', () => {\n    expect(normaliseWhitespace(' a  b ')).toBe('a b');\n"
                              "  });\n});\n",
        "tests/session.test.ts": "import { sessionExpiry, saveSession, loadSession } from '../src/session';\n"
                                 "import { SESSION_TTL_SECONDS } from '../src/config';\n\n"
                                 "describe('session', () => {\n  it('expires after the TTL', () => {\n"
                                 "    expect(sessionExpiry(0)).toBe(SESSION_TTL_SECONDS * 1000);\n  });\n"
                                 "  it('stores payloads', () => {\n    saveSession('a', 'x');\n"
                                 "    expect(loadSession('a')).toBe('x');\n  });\n});\n",
    }


BASE_HELPER = ("text", "normaliseWhitespace",
               "export function normaliseWhitespace(text: string): string {\n  return text.replace(/\\s+/g, ' ').trim();\n}\n")

KV_TEXT = ("export interface KeyValueStore {\n  read(key: string): string | undefined;\n"
           "  write(key: string, value: string): void;\n}\n\n"
           "export class MemoryStore implements KeyValueStore {\n  private data = new Map<string, string>();\n\n"
           "  read(key: string): string | undefined {\n    return this.data.get(key);\n  }\n\n"
           "  write(key: string, value: string): void {\n    this.data.set(key, value);\n  }\n}\n")
SHIM = "export { MemoryStore as LegacyStore } from '../store/kv';\n"
