"""Token counters: JavaScript length semantics and the CJK-aware default."""

from plumbing.tokens import (
    TokenizerCounter,
    default_count_tokens,
    estimate_fast,
    js_len,
    js_round,
    js_slice,
    memo_counter,
)


def test_js_len_counts_utf16_units():
    assert js_len("abc") == 3
    assert js_len("😀") == 2  # astral: a surrogate pair
    assert js_len("é中") == 2


def test_default_counter_cjk_and_rest():
    assert default_count_tokens("") == 0
    assert default_count_tokens("abcd") == 1
    assert default_count_tokens("abcde") == 2
    assert default_count_tokens("中文字") == 3  # each CJK char is one token
    assert default_count_tokens("ひらがなカタカナ") == 8
    assert default_count_tokens("한국어") == 3
    assert default_count_tokens("中ab") == 1 + 1  # 1 CJK + ceil(2/4)
    assert default_count_tokens("😀") == 1  # 2 units, ceil(2/4)
    assert default_count_tokens("😀😀a") == 2  # 5 units


def test_estimate_fast_and_js_round():
    assert estimate_fast("") == 0 and estimate_fast("abcde") == 2 and estimate_fast("中中中中中") == 2
    assert js_round(2.5) == 3 and js_round(66.5) == 67 and js_round(-0.5) == 0 and js_round(1.49) == 1


def test_js_slice_uses_utf16_indices():
    assert js_slice("a😀b", 0, 3) == "a😀"
    assert js_slice("abcdef", 4) == "ef"


class FakeHFTokenizer:
    def encode(self, text, add_special_tokens=True):
        return text.split() + (["<s>"] if add_special_tokens else [])


class FakeCallable:
    def __call__(self, text):
        return {"input_ids": list(text)}


class KwlessEncoder:
    def encode(self, text):
        return [0] * len(text.split(","))


def test_tokenizer_counter_wraps_encoders():
    assert TokenizerCounter(FakeHFTokenizer())("a b c") == 3  # no special tokens
    assert TokenizerCounter(FakeCallable())("abcd") == 4
    assert TokenizerCounter(KwlessEncoder())("a,b") == 2
    assert TokenizerCounter(FakeHFTokenizer())("") == 0


def test_memo_counter_calls_once_per_text():
    calls = []

    def count(t):
        calls.append(t)
        return len(t)

    c = memo_counter(count)
    assert c("abc") == 3 and c("abc") == 3 and calls == ["abc"]
    assert memo_counter(None) is default_count_tokens


def test_message_from_dict_accepts_camel_case_and_keeps_extra():
    import pytest

    from doctrine.kernel.messages import Message

    m = Message.from_dict({"id": "x", "role": "tool", "contentType": "tool-result", "text": None,
                           "toolName": "bash", "toolCallId": "k", "is_error": True})
    assert (m.content_type, m.text, m.tool_name, m.tool_call_id, m.extra) == (
        "tool-result", "", "bash", "k", {"is_error": True})
    assert Message.from_dict(m.to_dict()) == m
    for bad in [{"role": "user"}, {"id": "x", "role": "bot"}, {"id": "x", "role": "user", "content_type": "img"},
                {"id": "x", "role": "user", "text": 5}, "str"]:
        with pytest.raises(ValueError):
            Message.from_dict(bad)
