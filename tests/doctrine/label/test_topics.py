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
