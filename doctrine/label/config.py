"""LabelConfig: every threshold the labeling function uses, with documented defaults."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class LabelConfig:
    """Thresholds of :func:`doctrine.label.label_decision`.

    * ``min_piece_tokens``: a compress range cut out of a kernel recommendation (split at
      still-needed messages) is kept only if it holds this many tokens; 200 is the
      kernel's "viable range" floor, the same one the nudge list uses.
    * ``emergency_min_piece_tokens``: the same floor under an urgent nudge (60): the doctrine
      says fold first, so consumed output the kernel accepts is folded even when small.
    * ``spontaneous_min_tokens``: with no nudge shown, compress anyway when the consumed,
      compressible content reaches this many tokens. ``None`` (default) means
      ``spontaneous_window_share`` of the window (0.06), and never under
      ``min_piece_tokens``: the kernel's growth gate opens a nudge soon after output
      accumulates, so a phase whose consumed output is folded without being asked is one
      that ended before the gate opened. The label reads the window
      size, the model never sees the ratio.
    * ``emergency_target_share``: an emergency fold frees content until the context
      would be at most this share of the window (0.6), consumed tool output first;
      needed ranges are added only if the consumed ones do not get there.
    * ``summary_ratio``: tier-1 summaries aim at source tokens / this (2.5, above the
      checker's 2.0 floor); ``summary_min_tokens`` is the floor of that budget.
    * ``drop_note_min_tokens``: tool results at least this large get a one-line DROP
      note in the summary.
    * ``recovery_lookahead``: recovery looks at the facts used by the current step and
      the next ``recovery_lookahead`` steps (0 = the current step only).
    * ``keep_session_facts``: a tier-1 summary also keeps the session's own facts of the
      range verbatim (they are KEEP-class strings by construction) while the budget
      allows; needed facts are kept whatever the budget. Off, a summary keeps only the
      needed facts unless that falls short of the checker (a range whose one value or
      path:line is a session fact): then it keeps the session's facts as with it on.
    * ``max_actions_per_boundary``: compress / recovery actions the replay takes at one
      step boundary before the task's own action (a guard against loops).
    * ``tools_host``: ``"proxy"`` (default, the tool schemas a base-URL client sees) or
      ``"pi"``: whose tool argument shapes the samples carry and whose search/decompress
      semantics recovery follows. Proxy: search matches active block summaries, decompress
      returns the block body (and switches the block off). Pi: search also ranks the folded
      messages, decompress restores inline (``inline: true``, or a single message by its
      ref) and the block stays folded.
    """

    min_piece_tokens: int = 200
    emergency_min_piece_tokens: int = 60
    spontaneous_min_tokens: int | None = None
    spontaneous_window_share: float = 0.06
    emergency_target_share: float = 0.6
    summary_ratio: float = 2.5
    summary_min_tokens: int = 40
    drop_note_min_tokens: int = 150
    recovery_lookahead: int = 0
    keep_session_facts: bool = True
    max_actions_per_boundary: int = 3
    tools_host: str = "proxy"

    def __post_init__(self) -> None:
        if self.tools_host not in ("pi", "proxy"):
            raise ValueError(f"tools_host must be 'pi' or 'proxy', got {self.tools_host!r}")
        if not 0 < self.emergency_target_share < 1:
            raise ValueError("emergency_target_share must be in (0, 1)")
        if self.summary_ratio <= 1:
            raise ValueError("summary_ratio must be > 1")

    def spontaneous_threshold(self, window: int) -> int:
        if self.spontaneous_min_tokens is not None:
            return int(self.spontaneous_min_tokens)
        return max(self.min_piece_tokens, int(self.spontaneous_window_share * window))

    def to_dict(self) -> dict:
        return asdict(self)
