"""Tool schemas the model sees: compress, decompress, search_context, acp_status.

OpenAI function format (``{"type": "function", "function": {name, description,
parameters}}``) with the argument shapes the serving hosts accept (behaviour spec §6.1 for
the billion-context proxy, §6.2 for billion-context-pi). The proxy variant is the default
because it is what a base URL client sees; ``host="pi"`` adds the Pi extras.

Only the descriptions come from the doctrine (sections ``tool-<name>``), so a mode or an
override changes them and nothing else; the argument shapes are the wire contract.
"""

from __future__ import annotations

import copy

from doctrine.spec import Doctrine, DoctrineError

__all__ = ["HOSTS", "TOOL_NAMES", "TOOL_SECTIONS", "tool_schemas"]

HOSTS = ("proxy", "pi")
TOOL_NAMES = ("compress", "decompress", "search_context", "acp_status")
# Doctrine section holding each tool's description (distilled variant = the one-liner).
TOOL_SECTIONS = {
    "compress": "tool-compress",
    "decompress": "tool-decompress",
    "search_context": "tool-search-context",
    "acp_status": "tool-acp-status",
}


def _compress_params(limits: dict, host: str) -> dict:
    lo, hi = limits.get("min_summary_chars", 50), limits.get("max_summary_chars", 20000)
    item = {
        "type": "object",
        "properties": {
            "startId": {"type": "string", "description": "First message ref of the range (m00012) or first block id (b3)."},
            "endId": {"type": "string", "description": "Last message ref (inclusive) or last block id."},
            "summary": {"type": "string", "description": f"Text that replaces the range ({lo}-{hi} characters)."},
            "topic": {"type": "string", "description": "Short label for this range."},
        },
        "required": ["startId", "endId", "summary"],
    }
    params: dict = {
        "type": "object",
        "properties": {
            "topic": {"type": "string", "description": "Short label for the whole compression."},
            "content": {
                "type": "array",
                "description": "REQUIRED. The ranges to fold, oldest first.",
                "items": item,
                "minItems": 1,
            },
        },
        "required": ["content"],
    }
    if host == "pi":
        params["properties"]["summaryMaxChars"] = {
            "type": "integer",
            "description": f"Raise the per-summary character maximum (default {hi}).",
        }
    return params


def _decompress_params(host: str) -> dict:
    props: dict = {
        "blockId": {"type": "string", "description": "Block id (b3) or message ref (m00042) to restore."},
        "toFile": {"type": "string", "description": "Write the restored text to this path instead of into the context."},
        "full": {"type": "boolean", "description": "Also expand nested blocks."},
    }
    if host == "pi":
        props["inline"] = {"type": "boolean", "description": "Return a block's text inline instead of writing a file."}
    return {"type": "object", "properties": props, "required": ["blockId"]}


def _search_params(host: str) -> dict:
    default = 10 if host == "pi" else 5
    return {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Keywords to look for."},
            "limit": {"type": "integer", "description": f"Maximum number of hits (default {default}).", "default": default},
        },
        "required": ["query"],
    }


def _status_params(host: str) -> dict:
    if host != "pi":
        return {"type": "object", "properties": {}}
    return {
        "type": "object",
        "properties": {
            "scope": {"type": "string", "enum": ["compressed", "uncompressed"]},
            "view": {"type": "string", "enum": ["ranges", "messages"]},
            "tool": {"type": "string", "description": "Only messages of this tool."},
            "sort": {"type": "string", "enum": ["size", "time", "tool", "age"]},
            "limit": {"type": "integer", "default": 30},
        },
    }


def tool_schemas(doctrine: Doctrine, mode: str = "doctrine", host: str = "proxy") -> list[dict]:
    """The four tool schemas in OpenAI function format, descriptions taken from ``mode``'s texts.

    ``host`` picks the argument shapes: "proxy" (spec §6.1, default) or "pi" (§6.2).
    """
    if host not in HOSTS:
        raise DoctrineError(f"unknown host variant {host!r}; expected one of {list(HOSTS)}")
    params = {
        "compress": _compress_params(doctrine.limits, host),
        "decompress": _decompress_params(host),
        "search_context": _search_params(host),
        "acp_status": _status_params(host),
    }
    out = []
    for name in TOOL_NAMES:
        out.append(
            {
                "type": "function",
                "function": {
                    "name": name,
                    "description": doctrine.text(TOOL_SECTIONS[name], mode) if TOOL_SECTIONS[name] in doctrine.sections else name,
                    "parameters": copy.deepcopy(params[name]),
                },
            }
        )
    return out
