"""Chat templates for training, and the tokenisation of one SFT sample.

Which template a model trains with (``model.chat_template`` in a recipe):

- ``auto`` (default): the model's own template when it renders tools; with TRL's
  training variant (``{% generation %}`` markers) when its own lacks them; otherwise the
  project's ChatML-with-tools template (``templates/chatml_tools.jinja``). SmolLM2's
  template has no tool calling, so the embedded model gets the project's.
- ``native``: the model's own (or TRL's training variant of it); fails if neither has
  generation markers.
- ``project``: always the project's template.
- a path to a ``.jinja`` file.

Loss is on the sample's *target* only: the final assistant message (the decision). We
tokenise samples ourselves instead of handing conversations to TRL because (a) earlier
assistant turns are context, not targets, and TRL's assistant mask would train them; (b)
an over-long sample must be dropped and counted, not truncated from the right (that would
cut the target away); (c) tool-call arguments are JSON strings in the parquet rows (so
that Arrow keeps one schema) and must become objects for the templates.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .tool_format import normalise_tool_calls

__all__ = ["PROJECT_TEMPLATE", "SampleRejected", "TemplateChoice", "choose_template",
           "has_generation_markers", "tokenize_sample"]

PROJECT_TEMPLATE = Path(__file__).with_name("templates") / "chatml_tools.jinja"
_MARKER = re.compile(r"\{%-?\s*generation\s*-?%\}")


class SampleRejected(ValueError):
    """A sample that cannot be trained on; ``reason`` is a short key counted in manifests."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


def has_generation_markers(template: str | None) -> bool:
    return bool(template) and _MARKER.search(template) is not None


def _renders_tools(template: str | None) -> bool:
    return bool(template) and "tools" in template and "tool_call" in template


@dataclass(frozen=True)
class TemplateChoice:
    template: str
    source: str  # "project" | "native" | "native+trl-training" | "file:<path>"


def choose_template(tokenizer: Any, choice: str = "auto") -> TemplateChoice:
    """Pick the training chat template for ``tokenizer`` (see module docstring)."""
    own = getattr(tokenizer, "chat_template", None)
    if isinstance(own, dict):  # named variants: the default one is the chat template
        own = own.get("default")
    if choice not in ("auto", "native", "project"):
        path = Path(choice)
        if not path.is_file():
            raise ValueError(f"chat_template {choice!r}: not auto/native/project nor a file")
        text = path.read_text()
        if not has_generation_markers(text):
            raise ValueError(f"{path}: template has no {{% generation %}} markers; the loss mask would be empty")
        return TemplateChoice(text, f"file:{path}")
    if choice == "project" or (choice == "auto" and not _renders_tools(own)):
        return TemplateChoice(PROJECT_TEMPLATE.read_text(), "project")
    if has_generation_markers(own):
        return TemplateChoice(own, "native")
    try:
        from trl.chat_template_utils import get_training_chat_template

        patched = get_training_chat_template(tokenizer)
    except Exception as exc:  # TRL knows no training variant of this template
        patched, why = None, str(exc)
    else:
        why = "TRL returned a template without markers"
    if patched and has_generation_markers(patched):
        return TemplateChoice(patched, "native+trl-training")
    raise ValueError(
        "the model's chat template has no {% generation %} markers and TRL has no training "
        f"variant for it ({why}); assistant-only loss would train on nothing. Set "
        "model.chat_template: project (or a .jinja file with markers)."
    )


def tokenize_sample(tokenizer: Any, messages: list[dict], tools: list[dict] | None,
                    template: str, max_length: int | None = None) -> dict[str, list[int]]:
    """Token ids and a loss mask that is 1 exactly on the final assistant message.

    Raises :class:`SampleRejected` (``no_target``, ``empty_mask``, ``too_long``).
    """
    if not messages or messages[-1].get("role") != "assistant":
        raise SampleRejected("no_target", "the last message is not an assistant message")
    msgs = normalise_tool_calls(messages)
    out = tokenizer.apply_chat_template(
        msgs, tools=tools or None, chat_template=template, tokenize=True, return_dict=True,
        return_assistant_tokens_mask=True,
    )
    ids = list(out["input_ids"])
    mask = list(out["assistant_masks"])
    if 1 not in mask:
        raise SampleRejected("empty_mask", "the template marked no assistant tokens")
    # Keep the last contiguous span only: the target. Earlier assistant turns are context.
    end = len(mask) - 1 - mask[::-1].index(1)
    start = end
    while start > 0 and mask[start - 1] == 1:
        start -= 1
    target = [0] * len(mask)
    target[start:end + 1] = [1] * (end + 1 - start)
    if max_length is not None and len(ids) > max_length:
        raise SampleRejected("too_long", f"{len(ids)} tokens > max_length {max_length}")
    return {"input_ids": ids, "assistant_masks": target}
