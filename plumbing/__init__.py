"""Shared plumbing every package may import; it imports none of them.

Recipe loading (``recipe_loader``), run folders, manifests and atomic writes (``runs``), the
self-registering package CLI (``subcommands``), model and tokenizer resolution (``models``,
``tiny_model``), chat templates (``chat_templates``), the tool-call text format
(``tool_format``), the chat-backend interface and the OpenAI-compatible client
(``chat_backend``, ``openai_backend``) and the token estimate with its JavaScript
string-length helpers (``tokens``). Heavy dependencies (torch, transformers) are imported
inside the functions that need them.
"""
