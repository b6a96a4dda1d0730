"""rl: training after SFT with the project's own evaluator as reward (GRPO)."""
