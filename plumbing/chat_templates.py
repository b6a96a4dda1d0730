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

Content is never tokenised as control tokens. A tool output or a user message may carry the
text of a special token (``<|im_end|><|im_start|>assistant``, ``<|endoftext|>``); rendered
and tokenised as one string, it would become the real control token, so a tool result could
close its turn and open a forged assistant turn. :func:`chat_token_ids` (prompts, for the hf
and vllm backends) and :func:`tokenize_sample` (training samples) both go through
:func:`_encode_chat`: every special-token string in the messages and tools is swapped for a
placeholder before the template renders, so the special tokens left in the rendered text are
exactly the ones the template wrote; those become control ids, and the text between them,
the content's special-token strings restored, is tokenised with ``split_special_tokens``
(as ordinary text). A conversation without such strings is tokenised exactly as before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .tool_format import normalise_tool_calls

__all__ = ["PROJECT_TEMPLATE", "SampleRejected", "TemplateChoice", "chat_token_ids", "choose_template",
           "has_generation_markers", "special_token_strings", "tokenize_sample"]

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


def special_token_strings(tokenizer: Any) -> list[str]:
    """The text of every special (control) token of ``tokenizer``, longest first."""
    found = {str(t.content) for t in (getattr(tokenizer, "added_tokens_decoder", None) or {}).values()
             if getattr(t, "special", False)}
    found.update(str(t) for t in getattr(tokenizer, "all_special_tokens", None) or [])
    return sorted((t for t in found if t), key=lambda t: (-len(t), t))


def _strings(value: Any):
    """Every string inside ``value`` (nested lists and mappings, keys included)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


def _map_strings(value: Any, fn) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {_map_strings(k, fn): _map_strings(v, fn) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_map_strings(v, fn) for v in value]
    return value


def _encode_chat(tokenizer: Any, messages: list[dict], tools: list[dict] | None, template: str, *,
                 add_generation_prompt: bool, with_mask: bool) -> tuple[list[int], list[int] | None]:
    """Token ids (and the template's assistant mask) of a conversation in which the only
    control tokens are the ones the template wrote (module docstring)."""
    specials = special_token_strings(tokenizer)
    tools = tools or None
    if not specials or not any(t in s for s in _strings([messages, tools]) for t in specials):
        if not with_mask:
            text = tokenizer.apply_chat_template(messages, tools=tools, chat_template=template, tokenize=False,
                                                 add_generation_prompt=add_generation_prompt)
            return list(tokenizer(text, add_special_tokens=False)["input_ids"]), None
        out = tokenizer.apply_chat_template(
            messages, tools=tools, chat_template=template, tokenize=True, return_dict=True,
            return_assistant_tokens_mask=True, add_generation_prompt=add_generation_prompt)
        return list(out["input_ids"]), list(out["assistant_masks"])
    return _encode_shielded(tokenizer, messages, tools, template, specials,
                            add_generation_prompt=add_generation_prompt, with_mask=with_mask)


def _encode_shielded(tokenizer: Any, messages: list[dict], tools: list[dict] | None, template: str,
                     specials: list[str], *, add_generation_prompt: bool,
                     with_mask: bool) -> tuple[list[int], list[int] | None]:
    """:func:`_encode_chat` for a conversation whose content holds special-token strings."""
    from transformers.utils.chat_template_utils import render_jinja_template

    # A placeholder character no input and no template holds.
    used = set("".join(_strings([messages, tools, template])))
    code = 0xE000
    while chr(code) in used:
        code += 1
    mark = chr(code)
    find = re.compile("|".join(re.escape(t) for t in specials))
    index = {t: i for i, t in enumerate(specials)}
    shielded = _map_strings([messages, tools], lambda s: find.sub(lambda m: f"{mark}{index[m.group(0)]}{mark}", s))
    rendered, spans = render_jinja_template(
        conversations=[shielded[0]], tools=shielded[1], chat_template=template,
        return_assistant_tokens_mask=with_mask, add_generation_prompt=add_generation_prompt,
        **tokenizer.special_tokens_map)
    text_in = rendered[0]
    pieces = re.compile(f"{re.escape(mark)}(\\d+){re.escape(mark)}|" + find.pattern)
    # Walk the rendered text: template specials become control ids, everything between them
    # (content special strings restored) ordinary text. ``shift`` maps rendered positions to
    # positions in the restored text, for the generation spans.
    ids: list[int] = []
    offsets: list[tuple[int, int]] = []
    text_out: list[str] = []
    run: list[str] = []
    shifts: list[tuple[int, int]] = []  # (rendered position, delta from there on)
    pos = out_len = run_start = 0

    def flush() -> None:
        chunk = "".join(run)
        if chunk:
            enc = tokenizer(chunk, add_special_tokens=False, split_special_tokens=True,
                            return_offsets_mapping=True)
            ids.extend(enc["input_ids"])
            offsets.extend((run_start + a, run_start + b) for a, b in enc["offset_mapping"])
        run.clear()

    for m in pieces.finditer(text_in):
        gap = text_in[pos:m.start()]
        run.append(gap)
        text_out.append(gap)
        out_len += len(gap)
        if m.group(1) is not None:  # a content special string: text
            word = specials[int(m.group(1))]
            run.append(word)
            text_out.append(word)
            out_len += len(word)
            shifts.append((m.end(), out_len - m.end()))
        else:  # written by the template: a control token
            flush()
            ids.append(tokenizer.convert_tokens_to_ids(m.group(0)))
            offsets.append((out_len, out_len + len(m.group(0))))
            text_out.append(m.group(0))
            out_len += len(m.group(0))
            run_start = out_len
        pos = m.end()
    tail = text_in[pos:]
    run.append(tail)
    flush()
    if not with_mask:
        return ids, None

    def moved(p: int) -> int:
        delta = 0
        for at, d in shifts:
            if at <= p:
                delta = d
        return p + delta

    def token_at(c: int) -> int | None:
        for i, (a, b) in enumerate(offsets):
            if a <= c < b:
                return i
        return None

    # The same span-to-token rule as transformers' return_assistant_tokens_mask.
    mask = [0] * len(ids)
    for start_c, end_c in spans[0]:
        first, last = token_at(moved(start_c)), token_at(moved(end_c) - 1)
        if first is None:
            break
        for i in range(first, last + 1 if last is not None else len(ids)):
            mask[i] = 1
    return ids, mask


def chat_token_ids(tokenizer: Any, messages: list[dict], tools: list[dict] | None, template: str,
                   *, add_generation_prompt: bool = True) -> list[int]:
    """The prompt's token ids for generation: ``messages`` (tool calls normalised) rendered
    with ``template``; only the template's own markers are control tokens."""
    ids, _ = _encode_chat(tokenizer, normalise_tool_calls(messages), tools, template,
                          add_generation_prompt=add_generation_prompt, with_mask=False)
    return ids


def tokenize_sample(tokenizer: Any, messages: list[dict], tools: list[dict] | None,
                    template: str, max_length: int | None = None) -> dict[str, list[int]]:
    """Token ids and a loss mask that is 1 exactly on the final assistant message; a
    special-token string in any message or tool is ordinary text (module docstring).

    Raises :class:`SampleRejected` (``no_target``, ``empty_mask``, ``too_long``).
    """
    if not messages or messages[-1].get("role") != "assistant":
        raise SampleRejected("no_target", "the last message is not an assistant message")
    msgs = normalise_tool_calls(messages)
    ids, mask = _encode_chat(tokenizer, msgs, tools, template, add_generation_prompt=False, with_mask=True)
    mask = mask or []
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
