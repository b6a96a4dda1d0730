"""The doctrine as a labeling function: decision point -> labelled decision.

    from doctrine.label import label_decision, LabelConfig
    label = label_decision(point, doctrine=doc, horizon=2, seed=0)
    label.kind, label.message, label.conformance

Kinds: ``nudged_compress``, ``refusal``, ``spontaneous_compress``, ``tier2``, ``tier3``,
``emergency``, ``recovery``, ``ordinary`` (rules in :mod:`doctrine.label.labeler`).
The labeler is versioned with the doctrine: ``LABELER_ID``/``LABELER_VERSION`` and the
doctrine's version and sha256 go into every label. ``data_gen.replay`` drives sessions
through the kernel and calls it at every step boundary.
"""

from .config import LabelConfig
from .labeler import KINDS, LABELER_ID, LABELER_VERSION, Label, LabelSkipped, label_decision
from .point import DecisionPoint, RecoveryState

__all__ = ["KINDS", "LABELER_ID", "LABELER_VERSION", "DecisionPoint", "Label", "LabelConfig", "LabelSkipped",
           "RecoveryState", "label_decision"]
