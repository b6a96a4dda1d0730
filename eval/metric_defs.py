"""What each figure of the report means: one definition per name, printed once per report.

``DEFINITIONS`` is the only place a metric's meaning is written; the report prints the
entries of the names its tables show (``eval.report``), and ``tests/eval/test_report_cli.py``
checks that every column the report can print has one. ``COUNTS`` are printed as integers.
"""

from __future__ import annotations

from eval.metrics import SUMMED

COUNTS = frozenset(SUMMED | {"n"})

DEFINITIONS: dict[str, str] = {
    # held-out decisions (one model call per curriculum row of a split never trained on)
    "cases": "number of cases (held-out rows, sessions or probe cases) the arm ran; a count",
    "balanced_acc": "mean over the labelled decision kinds (compress, refuse, recover, ordinary) of the share of "
                    "held-out decisions answered with the labelled kind; always compressing or never compressing "
                    "cannot score well on it whatever the mix of cases",
    "kind_correct": "share of held-out decisions answered with the labelled kind (a reader's judgement of the reply's "
                    "form: compress call, recovery call, task action, decline or answer)",
    "decision_acc": "the glance table's name for kind_correct",
    "compress_success": "share of compress-labelled decisions answered with a valid compress call over visible ranges "
                        "that the kernel applies, every summary of which passes the conformance checker",
    "compress_chosen": "share of compress-labelled decisions answered with a compress call (the first graded step "
                       "to compress_success)",
    "compress_parsed": "share of compress-labelled decisions answered with a compress call whose arguments are valid "
                       "and name at least one range",
    "compress_accepted": "share of compress-labelled decisions whose compress call the kernel applied without error "
                         "(every range folded)",
    "ranges_visible": "share of compress-labelled decisions whose every range boundary is a ref or block id the "
                      "context showed the model",
    "summary_score": "mean conformance-checker score of the summaries written at compress-labelled decisions "
                     "(0 where no parsed compress call was made)",
    "exact_values_kept": "share of the label's source exact values (settings, numbers, versions) that the reply's "
                         "summaries keep verbatim, mean over compress-labelled decisions whose source has any",
    "nearest_train_sim": "difflib ratio of a compress reply's summaries (joined) to the nearest train label's; near 1: "
                         "the reply repeats a train target, whatever its context said (eval/workloads/held_out/recall.py); "
                         "mean over replies that write a summary",
    "values_copied": "exact items (quoted spans, key=value pairs, paths, error strings) of the compress replies' "
                     "summaries that occur verbatim in the context the model saw (count, summed)",
    "values_not_in_context": "exact items of the compress replies' summaries that occur nowhere in the context the "
                             "model saw: invented or recalled values (count, summed)",
    "values_not_in_context_share": "share of a compress reply's exact items not in its context, mean over replies "
                                   "with any",
    "recover_success": "share of recovery-labelled decisions whose reply restores a block the next step needs",
    "recover_chosen": "share of decisions labelled with a recovery call (the step needs a detail only a folded "
                      "block holds) answered with a recovery call (search_context or decompress), whatever its "
                      "target: the first step to recover_success",
    "false_recovery": "share of ordinary decisions (counter-lessons included: the step's detail is still in view, "
                      "raw or quoted by a summary) answered with a recovery call nobody needed; lower is better",
    "tool_call_valid": "of the replies that write a tool call (or try to), the share whose calls parse, name an offered tool and carry JSON-object arguments",
    "range_valid": "share of compress replies whose every range the kernel (or the row's refs) accepts",
    "range_overlap": "Jaccard overlap of the messages/blocks a compress reply folds with those the label folds",
    "conformance_score": "mean conformance-checker score (0-1) of the summaries a compress reply writes",
    "summary_conf": "the glance table's name for conformance_score",
    "conformance_passed": "share of compress replies all of whose summaries pass the checker",
    "kernel_errors": "kernel errors raised applying the replies (count, summed over cases)",
    "kernel_warnings": "kernel warnings raised applying the replies (count, summed over cases)",
    "prompt_tokens": "prompt tokens sent (count, summed over cases and calls)",
    "completion_tokens": "tokens generated (count, summed over cases and calls)",
    "doctrine_tokens": "prompt tokens that were doctrine text: system-prompt rules, nudges, tool descriptions "
                       "(count, summed)",
    "malformed_calls": "model calls whose reply had a tool call that did not parse (count, summed)",
    "cut_at_cap": "share of held-out replies that ran to the recipe's max_tokens (cut off; a cut call is malformed)",
    "label_over_cap": "share of held-out decisions whose labelled reply is longer than max_tokens (it could not be "
                      "written out: raise max_tokens)",
    "prefix_cache_hit_rate": "share of prompt tokens served from the engine's prefix cache",
    "decision_logprob": "teacher-forced log-probability (nats, summed over the first K tokens) the model gives the "
                        "labelled reply of a held-out decision; mean over decisions; higher is more likely",
    "decision_margin": "decision_logprob of the label minus that of the best alternative reply of another decision "
                       "kind built from the same context (a task action, a decline, a compress call); > 0: the "
                       "label is preferred",
    "decision_win": "share of held-out decisions where the labelled reply's first K tokens are more likely than every "
                    "alternative's",
    "decision_candidates": "alternative replies scored against the labels (count, summed)",
    # sessions (scripted replay and the Session Marathon)
    "calls": "model calls made, summary calls included (count, summed over cases)",
    "model_calls": "calls answered by the model under test (count, summed)",
    "billed_tokens": "prompt plus completion tokens of every call (count, summed)",
    "mean_context": "mean context (retained tokens) per agent call",
    "peak_context": "largest context of any agent call (tokens)",
    "compressions_succeeded": "compress calls the kernel applied (count, summed)",
    "compressions_attempted": "compress calls made (count, summed)",
    "refetches": "times an agent step needed a fact that was no longer in view (count, summed)",
    "recovery_calls": "recovery tool calls made: the kernel's search_context / decompress, the policy arms' "
                      "read_tool_output / expand / search_history / read_history (count, summed)",
    "recoveries": "recovery tool calls that returned what they asked for: a known block, handle, summary or "
                  "message, a search with hits (count, summed)",
    "recovery_refetches": "policy recovery calls that re-opened a target already opened in the same state "
                          "(count, summed)",
    "probe_accuracy": "scripted probes: share of the facts a probe asks for that the answer quotes verbatim "
                      "(whitespace-normalised), mean over probes; a strict string check",
    "probe_score": "Marathon probes: share of the graded probe items answered right, an item accepting any of its "
                   "listed forms (a value, path or name in any wording); the Marathon's own grader, so it can be "
                   "1.0 where probe_accuracy, which needs the whole fact verbatim, is 0.0",
    "marathon_probe": "the glance table's name for the Marathon's probe_score",
    "evidence_survival": "share of the facts a probe (or question) needs that are still visible in the context",
    "deep_items_correct": "Marathon probe items about early, deep history answered right (count, summed)",
    "summary_conformance": "mean conformance score of the summaries the arm's compress calls wrote",
    "window_overflows": "calls whose context exceeded the window (count, summed)",
    # recall probes
    "questions": "probe questions asked (count, summed over cases)",
    "accuracy": "share of probe questions answered right",
    "compacted": "share of cases with a compaction before the first question",
    "forced_compaction": "share of cases where the compaction had to be forced (the session raised none)",
    "recall_probes": "the glance table's name for the probes workload's accuracy",
    # over every call of an arm
    "prompt_tok/call": "prompt tokens per real model call, over every workload",
    "max_prompt": "the longest prompt sent (tokens), to compare with the model's context length",
    "doctrine_share": "share of the prompt tokens that was doctrine text",
    # intervals and comparisons
    "95% interval": "the 95% interval by the small-n rule (eval/README.md, 'Intervals'): Wilson (continuity-"
                    "corrected) for a rate, Tango's score interval for a paired difference of rates, per-kind "
                    "intervals combined by MOVER for balanced_acc, bootstrap only for continuous figures at n >= 30; "
                    "where some session supplies more than one of the cases, the cluster bootstrap (sessions "
                    "resampled whole), widened to hold the case-level interval",
    "n": "the cases an interval or difference is over; beside every interval",
    "sessions": "the sessions those cases come from (cases of one session are not independent); fewer sessions "
                "than cases makes the interval a cluster bootstrap",
    "n per kind": "paired cases per labelled decision kind; a verdict needs min_per_kind in every kind",
    "method": "the interval method: wilson, tango, tango+mover, bootstrap (n >= 30), t, or cluster bootstrap "
              "(more than one case of a session)",
}


def definitions_for(names: list[str]) -> list[tuple[str, str]]:
    """(name, definition) of each name that has one, in first-seen order, each once."""
    return [(n, DEFINITIONS[n]) for n in dict.fromkeys(names) if n in DEFINITIONS]
