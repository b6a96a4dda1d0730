"""The kernel input of one decision point, kept in a curriculum row so a reply can be applied.

data_gen records it in every row (``meta.kernel_input``); the eval rebuilds the kernel state
from it and applies the model's reply through the same serving profile, instead of guessing
what a range covers from the rendered text:

    snap = kernel_snapshot(point.flat, point.state_before, point.profile, point.token_count)
    ...
    rebuilt = rebuild(snap)            # None for a row without one (older builds, fixtures)
    rebuilt.state, rebuilt.view        # the kernel state after the turn, the view it rendered
    rebuilt.compress_messages          # what the host hands a compress call
    rebuilt.chat                       # the view as chat messages (to check against the row)

The state is the one *before* the turn plus the size the kernel decided on, so the rebuilt
turn is the recorded one (refs, nudge decision, truncation) and nothing depends on prompt text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from doctrine.kernel.messages import Message
from doctrine.kernel.profile import ServingProfile, resolve_profile
from doctrine.kernel.state import CompressionState

__all__ = ["SNAPSHOT_VERSION", "Rebuilt", "kernel_snapshot", "rebuild"]

SNAPSHOT_VERSION = 1


def kernel_snapshot(flat: list[Message], state_before: CompressionState, profile: ServingProfile,
                    token_count: int, needed: dict[str, Any] | None = None) -> dict[str, Any]:
    """A JSON-ready record of one kernel turn's input. ``needed`` (recovery rows): the
    ``blocks`` that hold the facts the next step uses and those facts' ``facts`` texts."""
    out: dict[str, Any] = {
        "version": SNAPSHOT_VERSION,
        "profile": {"window": profile.window, "preset": profile.preset, "host": profile.host,
                    "prompt_mode": profile.prompt_mode, "nudge_style": profile.nudge_style,
                    "kernel_overrides": profile.to_dict()["kernel_overrides"], "sha256": profile.sha256,
                    **({"usage_counter": profile.usage_counter} if profile.usage_counter != "acp-default" else {})},
        "token_count": int(token_count),
        "state": state_before.to_json(),
        "flat": [m.to_dict() for m in flat],
    }
    if needed:
        out["needed"] = needed
    return out


@dataclass
class Rebuilt:
    profile: ServingProfile
    flat: list[Message]
    state: CompressionState  # after the turn: refs assigned, what a compress call applies to
    view: Any  # doctrine.kernel.host.ModelView
    needed: dict[str, Any]

    @property
    def compress_messages(self) -> list[Message]:
        """What the host hands a compress call: its own messages (proxy) or the view (Pi)."""
        return self.view.messages if self.profile.variant.compress_on == "view" else self.flat

    @property
    def chat(self) -> list[dict[str, Any]]:
        """The rendered view as chat messages, without the trailing nudge (and, for a host whose
        system message is a view message, ``proxy_chat``, without it: a row shows it merged
        with the host's block)."""
        from doctrine.kernel.chat import to_chat

        out = to_chat([m for m in self.view.messages if m.id != "acp_nudge"])
        if self.profile.variant.system_in_view and out and out[0].get("role") == "system":
            out = out[1:]
        return out


def rebuild(snap: Any) -> Rebuilt | None:
    """The recorded turn run again: None when ``snap`` is missing; ValueError when it is
    malformed or its serving profile no longer resolves to the recorded hash."""
    if not snap:
        return None
    if not isinstance(snap, dict) or snap.get("version") != SNAPSHOT_VERSION:
        raise ValueError(f"kernel_input: expected a version {SNAPSHOT_VERSION} record")
    from doctrine.kernel.host import render_for_model

    p = snap.get("profile") or {}
    try:
        profile = resolve_profile(int(p["window"]), p["preset"], p["host"], prompt_mode=p["prompt_mode"],
                                  nudge_style=p["nudge_style"], kernel_overrides=p.get("kernel_overrides") or {},
                                  usage_counter=p.get("usage_counter", "acp-default"))
        flat = [Message.from_dict(d) for d in snap["flat"]]
        state = CompressionState.from_json(snap["state"], source="kernel_input.state")
        token_count = int(snap["token_count"])
    except (KeyError, TypeError) as exc:
        raise ValueError(f"kernel_input: missing or malformed field {exc}") from None
    if p.get("sha256") and p["sha256"] != profile.sha256:
        raise ValueError(f"kernel_input: serving profile {str(p['sha256'])[:12]} resolves to {profile.sha256[:12]} "
                         "here (the kernel or its presets changed since the row was built)")
    # The nudge text plays no part in the state: render with no renderer; the decision stays.
    view = render_for_model(flat, state, profile.kernel, token_count, profile.host_config, None,
                            count_tokens=profile.count_tokens)
    return Rebuilt(profile, flat, view.state, view, dict(snap.get("needed") or {}))
