"""eval: does the distilled model match the prompt-doctrine kernel while paying less?

    python -m eval run configs/eval/smoke.yaml --out runs/smoke/eval
    python -m eval report runs/smoke/eval [--vs runs/other/eval]

``backends/`` (hf, vllm, openai, oracle behind ``plumbing.chat_backend``), ``arms/`` (what each
context-management arm shows the model; ``policies/``: the seeds' other policies as arms), ``workloads/`` (held-out decisions, scripted
sessions), ``harness.py`` (resumable arm x case x window x seed runs), ``judges.py`` and
``metrics.py`` (programmatic scoring), ``report.py`` (markdown, HTML, JSON, plots).
Nothing here imports torch, transformers or vLLM at module level.
"""
