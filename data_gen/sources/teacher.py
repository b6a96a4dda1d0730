"""Teacher labels: decision points answered by a model behind an OpenAI-compatible endpoint.

The teacher sees each decision point in ``doctrine`` mode (full doctrine in the system
prompt, rules restated in the nudge), whatever mode the curriculum is rendered in. Its
answer is validated before it becomes a label:

- a reply that does not parse, or a tool call that is not ``compress``, is rejected;
- a compress call is parsed by the kernel's lenient parser and applied to a copy of the
  kernel state: argument errors, kernel errors (unknown, protected or consumed ranges,
  summaries out of bounds) and calls that fold nothing are rejected;
- every summary is scored by the conformance checker against the messages its block
  replaced; one that fails the doctrine version's verdict is rejected; a lead before the
  call must be one plain line (``doctrine.replies.lead_problem``);
- a text reply is kept as the teacher's refusal (refusing is the model's right), with the
  session's own next action, only when it is a decline as the evaluation reads one
  (``doctrine.replies``): one plain line, no imitated markup, where a *gentle* nudge was
  shown (an emergency nudge may not be declined; with no nudge a text reply is no decline);
- a reply holding a secret (the key sent, a configured variable's value, a common key
  shape: ``plumbing.secret_scan``) is rejected whatever its form.

Non-decision points (the labeler's ``ordinary`` turns) keep the labeler's label. Every
rejection is counted by reason; a rejected point falls back to nothing (it is skipped),
never to a crash. :meth:`TeacherLabeler.shortfall` says when the teacher kept too few
replies (none, or under the recipe's ``min_accepted_share``); the build then fails.
Base URL, model and the *name* of the key's environment variable come from the recipe;
the key itself only from the environment.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

__all__ = ["TeacherLabeler", "make_teacher_labeler", "teacher_messages", "teacher_request"]

TEACHER_KINDS = {"nudged_compress", "refusal", "spontaneous_compress", "tier2", "tier3", "emergency"}


def teacher_request(point, doctrine):
    """The decision point as the reference (doctrine-mode) host would send it: the point's
    serving profile in doctrine mode, through the one request renderer, at the same size
    (so the kernel decides exactly as it did for the student's row)."""
    import dataclasses

    from doctrine.kernel.profile import resolve_profile
    from doctrine.render.request import render_request, request_frame

    prof = point.profile or resolve_profile(point.window)
    prof = dataclasses.replace(prof, prompt_mode="doctrine")
    msgs = point.session.messages
    base = (msgs[0].get("content") or "") if msgs and msgs[0].get("role") == "system" else ""
    frame = request_frame(prof, doctrine, base_prompt=base, task_tools=list(point.session.tools))
    return render_request(frame, point.flat, point.state_before, token_count=point.token_count)


def teacher_messages(point, doctrine) -> list[dict[str, Any]]:
    return teacher_request(point, doctrine).messages


class TeacherLabeler:
    """A drop-in for ``doctrine.label.label_decision`` that asks a teacher model."""

    def __init__(self, backend, *, model_name: str, max_tokens: int = 768, counts: Counter | None = None,
                 scanner=None):
        from plumbing.secret_scan import SecretScanner

        self.backend = backend
        self.model_name = model_name
        self.max_tokens = max_tokens
        self.counts = counts if counts is not None else Counter()
        self.scanner = scanner if scanner is not None else SecretScanner()
        self.asked = self.kept = 0
        self.reasons: Counter = Counter()  # why replies were rejected, for shortfall()

    def __call__(self, point, *, doctrine, horizon: int, seed: int, config=None):
        from doctrine.label import LabelSkipped, label_decision

        reference = label_decision(point, doctrine=doctrine, horizon=horizon, seed=seed, config=config)
        if reference.kind not in TEACHER_KINDS:
            return reference
        self.asked += 1
        try:
            label = self._ask(point, doctrine, reference)
        except Exception as exc:  # a reply the checks did not foresee is one rejected
            # point, counted by its reason; it must not drop the rest of the session (replay_error)
            reason = exc.reason if isinstance(exc, _Rejected) else f"error_{type(exc).__name__}"
            detail = exc.detail if isinstance(exc, _Rejected) else str(exc)[:200]
            self.counts[f"teacher:{reason}"] += 1
            self.reasons[reason] += 1
            raise LabelSkipped(f"teacher_{reason}", detail) from None
        self.kept += 1
        return label

    def shortfall(self, min_share: float = 0.0) -> str | None:
        """Why the teacher's labels cannot make a build (it kept none of the points it was
        asked, or fewer than ``min_share`` of them), with the main rejection reasons; None
        when it did its part (or was never asked)."""
        if self.asked == 0 or (self.kept > 0 and self.kept >= min_share * self.asked):
            return None
        top = ", ".join(f"{r} {n}" for r, n in self.reasons.most_common(4)) or "none"
        need = f" (min_accepted_share {min_share:g})" if min_share > 0 else ""
        return (f"teacher {self.model_name}: kept {self.kept} of {self.asked} replies{need}; rejected: {top}. "
                "Nothing was marked complete; check the teacher server (base_url, model, key) and its replies")

    # ------------------------------------------------------------------ internals

    def _ask(self, point, doctrine, reference):
        from plumbing.chat_backend import BackendError, Request

        req = teacher_request(point, doctrine)
        try:
            reply = self.backend.complete(Request(messages=req.messages, tools=req.tools,
                                                  max_tokens=self.max_tokens))
        except BackendError as exc:
            raise _Rejected("backend_error", str(exc)) from None
        said = [reply.raw_text, reply.message.get("content") or ""]
        said += [c["function"]["arguments"] for c in reply.tool_calls]
        hit = next((h for h in map(self.scanner.text, said) if h), None)
        if hit:  # an echoed key, a pasted token: never training data (the kind only is counted)
            raise _Rejected("secret_in_reply", hit)
        if reply.parse_errors:
            raise _Rejected("unparseable", "; ".join(reply.parse_errors))
        calls = reply.tool_calls
        if not calls:
            return self._refusal(point, doctrine, reference, reply.message.get("content") or "")
        if len(calls) != 1 or calls[0]["function"]["name"] != "compress":
            raise _Rejected("not_a_compress_call", ",".join(c["function"]["name"] for c in calls))
        return self._compress(point, doctrine, reference, calls[0], reply.message.get("content") or "")

    def _refusal(self, point, doctrine, reference, text: str):
        from doctrine.label import Label
        from doctrine.label.actions import session_message
        from doctrine.replies import decline_problem

        voice = point.nudge.voice if point.nudge_shown and point.nudge is not None else None
        problem = decline_problem(text, nudge_shown=point.nudge_shown, voice=voice)
        if problem:
            raise _Rejected(problem, text[:80])
        nxt = point.session.messages[point.visible] if point.visible < len(point.session.messages) else None
        msg = session_message(nxt) if nxt and nxt.get("role") == "assistant" else {"role": "assistant", "content": ""}
        msg["content"] = text.strip() + ("\n" + msg["content"] if msg.get("content") else "")
        self.counts["teacher:accepted_refusal"] += 1
        return Label(kind="refusal", message=msg, reason=f"teacher {self.model_name} declined",
                     labeler=f"teacher:{self.model_name}", labeler_version="1",
                     doctrine_version=doctrine.version, doctrine_sha256=doctrine.sha256,
                     action={"type": "session"})

    def _compress(self, point, doctrine, reference, call: dict, content: str):
        from doctrine.conform import check_summary
        from doctrine.kernel.compress import apply_compression
        from doctrine.kernel.compress_args import parse_compress_args
        from doctrine.label import Label
        from doctrine.replies import lead_problem

        if content.strip() and (problem := lead_problem(content)):
            raise _Rejected(f"lead_{problem}", content[:80])
        parsed = parse_compress_args(call["function"]["arguments"])
        if parsed.errors or not parsed.ranges:
            raise _Rejected("bad_arguments", "; ".join(parsed.errors) or "no ranges")
        result = apply_compression(parsed.ranges, point.flat, point.state, point.kconfig,
                                   compress_call_id=call["id"], count_tokens=point.count_tokens,
                                   clock_ms=lambda: 0)
        if result.errors:
            raise _Rejected("kernel_error", "; ".join(result.errors))
        if result.blocks_created == 0:
            raise _Rejected("nothing_folded")
        by_id = {m.id: m for m in point.flat}
        scores = []
        for block_id in result.new_block_ids:
            block = result.state.block(block_id)
            source = [by_id[i].to_dict() for i in block.direct_message_ids if i in by_id]
            report = check_summary(source, block.summary, tier=block.tier, doctrine=doctrine)
            if not report.passed:
                raise _Rejected("conformance", f"{block_id} scored {report.score}: {'; '.join(report.reasons)[:200]}")
            scores.append(report.score)
        args = json.loads(call["function"]["arguments"])
        if isinstance(args.get("content"), str):
            args["content"] = json.loads(args["content"])
        kind = reference.kind if reference.kind != "refusal" else (
            "nudged_compress" if point.nudge_shown else "spontaneous_compress")
        self.counts["teacher:accepted_compress"] += 1
        call_id = call.get("id") or "teacher_call"
        message = {"role": "assistant", "content": content,
                   "tool_calls": [{"id": call_id, "type": "function",
                                   "function": {"name": "compress",
                                                "arguments": json.dumps(args, ensure_ascii=False)}}]}
        return Label(kind=kind, message=message, reason=f"teacher {self.model_name}",
                     ranges=[{"startId": r.start_ref, "endId": r.end_ref} for r in parsed.ranges],
                     conformance={"score": min(scores), "passed": True},
                     labeler=f"teacher:{self.model_name}", labeler_version="1",
                     doctrine_version=doctrine.version, doctrine_sha256=doctrine.sha256,
                     action={"type": "compress", "args": args, "call_id": call_id})


class _Rejected(Exception):
    def __init__(self, reason: str, detail: str = ""):
        super().__init__(reason)
        self.reason, self.detail = reason, detail


def make_teacher_labeler(cfg, counts: Counter, secret_envs: tuple[str, ...] = ()) -> TeacherLabeler:
    """A labeler for a ``TeacherSource`` recipe section (the key comes from the environment)."""
    from plumbing.openai_backend import OpenAIBackend
    from plumbing.secret_scan import SecretScanner

    backend = OpenAIBackend(base_url=cfg.base_url, model=cfg.model, api_key_env=cfg.api_key_env,
                            timeout_s=cfg.timeout_s)
    scanner = SecretScanner([*([cfg.api_key_env] if cfg.api_key_env else []), *secret_envs])
    return TeacherLabeler(backend, model_name=cfg.model, max_tokens=cfg.max_tokens, counts=counts,
                          scanner=scanner)
