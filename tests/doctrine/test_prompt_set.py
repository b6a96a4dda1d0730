"""acp prompt sets: the exported distilled set must reproduce distilled mode byte for byte."""

from __future__ import annotations

import json
import re

import pytest

from doctrine.acp_prompt_set import export_prompt_set, read_prompt_set
from doctrine.render.prompts import (
    EXAMPLE_VIEWS,
    NudgeView,
    RangeView,
    render_nudge,
    render_system_prompt,
    tool_schemas,
)
from doctrine.spec import DoctrineError, load_doctrine, resolve_doctrine

HOST_BASE = "You are a coding agent working in /repo."


def _all_parts(doc, mode):
    out = {
        "system": render_system_prompt(doc, mode),
        "system+base": render_system_prompt(doc, mode, HOST_BASE),
        "tools": json.dumps(tool_schemas(doc, mode)),
        "tools-pi": json.dumps(tool_schemas(doc, mode, "pi")),
    }
    views = dict(EXAMPLE_VIEWS)
    views["empty"] = NudgeView(1, "gentle", [], {})
    views["tier2-emergency"] = NudgeView(2, "emergency", [], {"tool": 5}, target_blocks=EXAMPLE_VIEWS["nudge-tier2"].target_blocks)
    views["one"] = NudgeView(1, "emergency", [RangeView("m00002", "m00002", 1, 300)], {"text": 300})
    for part, view in views.items():
        out[part] = render_nudge(view, doc, mode)
    return out


@pytest.mark.parametrize("mode", ["distilled", "doctrine"])
def test_exported_set_rendered_in_doctrine_mode_equals_the_mode(tmp_path, mode):
    base = load_doctrine("v1")
    export_prompt_set(base, mode, tmp_path / "set")
    imported = resolve_doctrine("v1", prompt_set=tmp_path / "set", acknowledge_risk=True)
    expected, got = _all_parts(base, mode), _all_parts(imported, "doctrine")
    assert expected.keys() == got.keys()
    for part in expected:
        assert got[part] == expected[part], part
    if mode == "distilled":
        assert got["system"] != render_system_prompt(base, "doctrine")  # the import really changed something


def test_export_of_an_overridden_doctrine_carries_the_overrides(tmp_path):
    doc = resolve_doctrine("v1", overrides={"nudge-gentle": "[host] Maintenance."})
    manifest = json.loads(export_prompt_set(doc, "distilled", tmp_path).read_text())
    assert manifest["acknowledgeRisk"] is True
    assert manifest["source"]["overrides_applied"] == ["override:nudge-gentle"]
    assert manifest["source"]["sha256"] == doc.sha256
    again = resolve_doctrine("v1", prompt_set=tmp_path, acknowledge_risk=True)
    assert render_nudge(EXAMPLE_VIEWS["nudge-gentle"], again) == render_nudge(EXAMPLE_VIEWS["nudge-gentle"], doc, "distilled")
    assert "mechanics" not in manifest["sections"]  # reference-only text is not a prompt


def test_import_needs_the_callers_flag_and_names_the_sections(tmp_path):
    export_prompt_set(load_doctrine("v1"), "distilled", tmp_path)
    with pytest.raises(DoctrineError) as err:
        resolve_doctrine("v1", prompt_set=tmp_path)
    for name in ("philosophy", "how-to-compress", "tier2", "tier3"):
        assert name in str(err.value)


def test_callers_flag_is_enough_without_acknowledge_risk_in_the_manifest(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({"format": "acp-prompt-set"}))
    (tmp_path / "how-to-compress.md").write_text("MY RULES")
    doc = resolve_doctrine("v1", prompt_set=tmp_path, acknowledge_risk=True)
    assert doc.sections["how-to-compress"] == "MY RULES"
    with pytest.raises(DoctrineError) as err:  # neither: the error names both
        resolve_doctrine("v1", prompt_set=tmp_path)
    msg = str(err.value)
    assert "how-to-compress" in msg and "--acknowledge-risk" in msg and '"acknowledgeRisk": true' in msg


def test_cli_show_with_acknowledge_risk_applies_a_set_whose_manifest_lacks_it(tmp_path, capsys):
    from doctrine.cli import main

    (tmp_path / "manifest.json").write_text(json.dumps({"prompts": {"tier2": "t2.md"}}))
    (tmp_path / "t2.md").write_text("MY TIER2 RULES")
    assert main(["show", "--prompt-set", str(tmp_path), "--acknowledge-risk"]) == 0
    assert "MY TIER2 RULES" in capsys.readouterr().out
    assert main(["show", "--prompt-set", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "--acknowledge-risk" in err and '"acknowledgeRisk": true' in err and err.count("\n") == 1


def test_partial_set_and_tri_state_sections(tmp_path):
    manifest = {"acknowledgeRisk": True, "prompts": {"tier2": "t2.md", "tier3": None},
                "sections": {"nudge-batch-tip": None, "intro": "s/intro.md"}}
    (tmp_path / "prompt-set.json").write_text(json.dumps(manifest))
    (tmp_path / "t2.md").write_text("MY TIER2\r\n")
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "intro.md").write_text("MY INTRO")
    layer = read_prompt_set(tmp_path)
    assert layer == {"tier2": "MY TIER2", "tier3": "", "nudge-batch-tip": "", "intro": "MY INTRO"}
    doc = resolve_doctrine("v1", prompt_set=tmp_path, acknowledge_risk=True)
    base = load_doctrine("v1")
    assert doc.sections["philosophy"] == base.sections["philosophy"]  # absent key keeps the default
    assert "Tip:" not in render_nudge(EXAMPLE_VIEWS["nudge-gentle"], doc)


def test_camel_and_dashed_prompt_keys(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({"acknowledgeRisk": True, "prompts": {"howToCompress": "a.md"}}))
    (tmp_path / "a.md").write_text("A")
    assert read_prompt_set(tmp_path) == {"how-to-compress": "A"}


@pytest.mark.parametrize(
    "files, message",
    [
        ({}, "no JSON manifest"),
        ({"a.json": "{}", "b.json": "{}"}, "several JSON files"),
        ({"manifest.json": "{bad"}, "malformed JSON"),
        ({"manifest.json": "[]"}, "must be a JSON object"),
        ({"manifest.json": '{"format": "other"}'}, "unsupported format"),
        ({"manifest.json": '{"prompts": {"rules": "x.md"}}'}, "unknown prompt key"),
        ({"manifest.json": '{"prompts": {"tier2": "missing.md"}}'}, "missing file missing.md"),
        ({"manifest.json": '{"prompts": {"tier2": "../../etc/passwd"}}'}, "outside the folder"),
        ({"manifest.json": '{"prompts": {"tier2": 3}}'}, "file name or null"),
        ({"manifest.json": '{"sections": []}'}, "'sections' must be an object"),
        ({"manifest.json": '{"prompts": {"tier2": null}, "sections": {"tier2": null}}'}, "both prompts and sections"),
    ],
)
def test_bad_prompt_sets_are_clear_errors(tmp_path, files, message):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(DoctrineError, match=message):
        read_prompt_set(tmp_path)


def test_unknown_section_in_a_set_is_named(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({"sections": {"banner": None}}))
    with pytest.raises(DoctrineError, match="banner"):
        resolve_doctrine("v1", prompt_set=tmp_path)


def test_missing_folder(tmp_path):
    with pytest.raises(DoctrineError, match="not a folder"):
        resolve_doctrine("v1", prompt_set=tmp_path / "nope")


@pytest.mark.parametrize("manifest, message", [
    ("[" * 100000 + "]" * 100000, "nested too deeply"),
    ('{"formatVersion": ' + "1" * 5000 + "}", "too many digits"),
    (b'{"format": "\xff"}', "not UTF-8"),
    ('{"prompts": {"tier2": "a\\u0000b"}}', "not a usable file name"),
    ('{"prompts": "tier2.md"}', "'prompts' must be an object"),
])
def test_malformed_manifests_are_one_line_errors(tmp_path, manifest, message):
    path = tmp_path / "manifest.json"
    path.write_bytes(manifest if isinstance(manifest, bytes) else manifest.encode())
    with pytest.raises(DoctrineError, match=message) as err:
        read_prompt_set(tmp_path)
    assert "\n" not in str(err.value)


def _fifo_set(tmp_path, how):
    import os

    (tmp_path / "manifest.json").write_text(json.dumps({"sections": {"intro": "intro.md"}}))
    if how == "fifo":
        os.mkfifo(tmp_path / "intro.md")
    elif how == "link-to-fifo":
        os.mkfifo(tmp_path / "pipe")
        (tmp_path / "intro.md").symlink_to(tmp_path / "pipe")
    elif how == "link-to-device":
        (tmp_path / "intro.md").symlink_to("/dev/zero")
    elif how == "folder":
        (tmp_path / "intro.md").mkdir()


@pytest.mark.parametrize("how, message", [
    ("fifo", "a FIFO"), ("link-to-fifo", "a FIFO"), ("link-to-device", "outside the folder|a device"),
    ("folder", "a folder"),
])
def test_sections_that_are_not_regular_files_are_refused_without_hanging(tmp_path, how, message):
    _fifo_set(tmp_path, how)
    err = _error_without_hanging(tmp_path)
    assert re.search(message, str(err)), err


def _error_without_hanging(folder):
    import threading

    result: list = []

    def read():
        try:
            read_prompt_set(folder)
            result.append(None)
        except DoctrineError as exc:
            result.append(exc)

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(10)
    assert result, "read_prompt_set hung"
    assert isinstance(result[0], DoctrineError), result
    return result[0]


def test_a_manifest_that_is_a_fifo_is_refused(tmp_path):
    import os

    os.mkfifo(tmp_path / "set.json")
    assert "a FIFO" in str(_error_without_hanging(tmp_path))


def test_section_files_are_capped(tmp_path):
    from doctrine.acp_prompt_set import MAX_FILE_BYTES

    (tmp_path / "manifest.json").write_text(json.dumps({"sections": {"intro": "intro.md"}}))
    (tmp_path / "intro.md").write_text("x" * (MAX_FILE_BYTES + 1))
    with pytest.raises(DoctrineError, match="intro.md.*256 KiB limit"):
        read_prompt_set(tmp_path)
    (tmp_path / "intro.md").write_text("x" * MAX_FILE_BYTES)
    assert len(read_prompt_set(tmp_path)["intro"]) == MAX_FILE_BYTES
