"""The ``oracle`` arm: the reference fold beside the model arms, whatever the run's backend."""

from __future__ import annotations

from pathlib import Path

from eval.backends.oracle import OracleBackend
from eval.harness import load_results, reference_backend, run_eval
from eval.recipe import EvalRecipe
from plumbing.recipe_loader import load_config

ROOT = Path(__file__).resolve().parents[2]


def test_oracle_arm_folds_where_the_model_arm_never_does(tmp_path):
    path = ROOT / "configs/eval/marathon_demo.yaml"
    recipe = load_config(path, EvalRecipe, ['arms=["doctrine","oracle"]'])
    lazy = OracleBackend(name="never_compress")  # the "model": a plain reply to every decision
    summary = run_eval(recipe, tmp_path / "eval", backend=lazy, base_dir=path.parent, log=lambda s: None)
    assert summary.complete
    by_arm = {r["arm"]: r["metrics"] for r in load_results(tmp_path / "eval")}
    assert by_arm["doctrine"]["compressions_succeeded"] == 0
    assert by_arm["oracle"]["compressions_succeeded"] > 0
    assert by_arm["oracle"]["peak_context"] < by_arm["doctrine"]["peak_context"]
    assert lazy.calls > 0  # the model arm was asked, and only it


def test_reference_backend_counts_with_the_engines_tokenizer():
    class Engine(OracleBackend):
        def count_tokens(self, text: str) -> int:
            return 7 * len(text)

    engine = Engine(name="never_compress")
    engine.name = "hf"  # a model engine: the reference counts on its scale
    assert reference_backend(engine).count_tokens("abc") == 21
    assert reference_backend(OracleBackend()).count_tokens("abcd") == OracleBackend().count_tokens("abcd")
