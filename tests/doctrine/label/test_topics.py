"""The topic a compress call names: files of every common toolchain, not only Python's."""

from __future__ import annotations

import json

from doctrine.kernel.messages import Message
from doctrine.label.labeler import _topic


def _call(path: str) -> Message:
    return Message(id="x", role="assistant", content_type="tool-call", tool_name="str_replace_editor",
                   text=json.dumps({"command": "view", "path": path}))


def test_files_of_other_toolchains_name_the_topic():
    for path, name in (("/src/gw/internal/proxy/handler.go", "handler.go"), ("/src/kv/src/cache.rs", "cache.rs"),
                       ("/app/app/models/order.rb", "order.rb"), ("/infra/logging/prod.tfvars", "prod.tfvars"),
                       ("/etc/nginx/sites-enabled/app.conf", "app.conf"), ("/srv/Makefile", "Makefile"),
                       ("/src/billing/InvoiceService.java", "InvoiceService.java")):
        assert _topic([_call(path)]) == f"work on {name}", path


def test_a_config_file_printed_by_cat_is_read_for_its_settings():
    from doctrine.label.handoff import read_range

    call = Message(id="a1", role="assistant", content_type="tool-call", tool_name="execute_bash", tool_call_id="c1",
                   text=json.dumps({"command": "cat /srv/app/config/app.env"}))
    out = Message(id="t1", role="tool", content_type="tool-result", tool_name="execute_bash", tool_call_id="c1",
                  text="POOL_SIZE=23\nCACHE_TTL_S=80\nMAX_BODY_KB=670\n")
    rd = read_range([call, out], {"a1": "m00003", "t1": "m00004"}, big_output_tokens=10_000, count=len)
    step = next(ln.text for ln in rd.lines if ln.section == "steps")
    assert all(f"`{kv}`" in step for kv in ("POOL_SIZE=23", "CACHE_TTL_S=80", "MAX_BODY_KB=670")), step
