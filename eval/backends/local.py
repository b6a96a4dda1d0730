"""What the local backends (``hf``, ``vllm``) share: the prompt rendered from the model's own
tokenizer and chat template, its token ids, and token counts. Both subclass
:class:`LocalBackend` and set ``tokenizer`` and ``template``."""

from __future__ import annotations

from typing import Any

from plumbing.chat_backend import Backend, Request


class LocalBackend(Backend):
    tokenizer: Any
    template: str | None

    def render(self, request: Request) -> str:
        from plumbing.tool_format import normalise_tool_calls

        return self.tokenizer.apply_chat_template(
            normalise_tool_calls(request.messages), tools=request.tools or None,
            chat_template=self.template, tokenize=False, add_generation_prompt=True)

    def prompt_ids(self, request: Request) -> list[int]:
        """The rendered prompt's token ids, as training makes them; a special-token string in a
        message is text, never a control token (``plumbing.chat_templates.chat_token_ids``)."""
        from plumbing.chat_templates import chat_token_ids

        return chat_token_ids(self.tokenizer, request.messages, request.tools or None, self.template)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])
