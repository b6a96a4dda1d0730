"""The in-memory TypeScript repository: editor, fake tsc, fake jest, bash."""

from __future__ import annotations

import pytest

from eval.workloads.marathon.fake_ts_repo import TestCheck, TsRepo

MOD = "export function add(a: number, b: number): number {\n  return a - b;\n}\n"
TEST = ("import { add } from '../src/math';\n\ndescribe('math', () => {\n  describe('add', () => {\n"
        "    it('adds', () => {\n      expect(add(2, 3)).toBe(5);\n    });\n    it('is defined', () => {\n"
        "      expect(add).toBeDefined();\n    });\n  });\n});\n")


@pytest.fixture()
def repo():
    r = TsRepo("/workspace/demo")
    r.write("src/math.ts", MOD)
    r.write("src/index.ts", "export * from './math';\n")
    r.write("tests/math.test.ts", TEST)
    r.checks["tests/math.test.ts::adds"] = TestCheck("src/math.ts", ["return a + b;"], ["return a - b;"], "5", "-1")
    return r


def test_jest_failure_report_then_fix(repo):
    out, code = repo.jest()
    assert code == 1
    assert " FAIL  tests/math.test.ts" in out and "● math › add › adds" in out
    assert "Expected: 5" in out and "Received: -1" in out
    assert ">   6 |       expect(add(2, 3)).toBe(5);" in out
    assert "at Object.<anonymous> (tests/math.test.ts:6:7)" in out
    assert "Tests:       1 failed, 1 passed, 2 total" in out
    msg = repo.editor({"command": "str_replace", "path": "/workspace/demo/src/math.ts", "old_str": "a - b", "new_str": "a + b"})
    assert msg.startswith("The file /workspace/demo/src/math.ts has been edited.")
    out, code = repo.jest(["tests/math.test.ts"], verbose=True)
    assert code == 0 and "✓ adds" in out and "Tests:       2 passed, 2 total" in out
    assert out == repo.jest(["tests/math.test.ts"], verbose=True)[0]  # deterministic


def test_tsc_diagnostics(repo):
    assert repo.tsc() == ("", 0)
    repo.write("src/bad.ts", "import { sub } from './math';\nimport { x } from './nope';\n"
                             "export const W: number = '12';\nexport function f(): number {\n  return helper(1);\n}\n")
    out, code = repo.tsc()
    assert code == 2
    assert "src/bad.ts(1,10): error TS2305: Module '\"./math\"' has no exported member 'sub'." in out
    assert "error TS2307: Cannot find module './nope'" in out
    assert "src/bad.ts(3,14): error TS2322: Type 'string' is not assignable to type 'number'." in out
    assert "error TS2304: Cannot find name 'helper'." in out
    assert out.endswith("Found 4 errors in src/bad.ts:1")


def test_suite_fails_to_run_when_imports_break(repo):
    repo.bash("sed -i 's/\\badd\\b/plus/g' /workspace/demo/src/math.ts")
    out, code = repo.jest()
    assert code == 1 and "Test suite failed to run" in out and "has no exported member 'add'" in out


def test_editor_errors_and_views(repo):
    ed = repo.editor
    assert "did not appear verbatim" in ed({"command": "str_replace", "path": "/workspace/demo/src/math.ts",
                                           "old_str": "nope", "new_str": "x"})
    repo.write("src/dup.ts", "a\na\n")
    assert "Multiple occurrences" in ed({"command": "str_replace", "path": "/workspace/demo/src/dup.ts",
                                         "old_str": "a", "new_str": "b"})
    assert "File already exists" in ed({"command": "create", "path": "/workspace/demo/src/math.ts", "file_text": ""})
    assert "absolute path" in ed({"command": "view", "path": "src/math.ts"})
    assert "does not exist" in ed({"command": "view", "path": "/elsewhere/x.ts"})
    view = ed({"command": "view", "path": "/workspace/demo/src/math.ts", "view_range": [2, 2]})
    assert view.endswith("     2\t  return a - b;")
    ed({"command": "insert", "path": "/workspace/demo/src/math.ts", "insert_line": 0, "new_str": "// top"})
    assert repo.files["src/math.ts"].startswith("// top\n")
    assert "/workspace/demo/src/index.ts" in ed({"command": "view", "path": "/workspace/demo"})


def test_bash_commands(repo):
    out, code = repo.bash("cd /workspace/demo && grep -rn 'add\\|math' src")
    assert code == 0 and "/workspace/demo/src/index.ts:1:export * from './math';" in out
    assert repo.bash("grep -rn zzz src")[1] == 1
    assert repo.bash("frobnicate")[1] == 127
    out, code = repo.bash("npx tsc --noEmit && frobnicate && echo never")
    assert code == 127 and "never" not in out
    out, code = repo.bash("npm run build")
    assert code == 0 and "[build] src/math.ts -> dist/math.js" in out
    assert repo.bash("cat /workspace/demo/src/index.ts") == ("export * from './math';\n", 0)
    assert repo.bash("rm /workspace/demo/src/index.ts")[1] == 0 and "src/index.ts" not in repo.files
