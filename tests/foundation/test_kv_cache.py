"""plumbing.kv_cache: a buffer-backed KV cache gives the same greedy tokens as transformers' own."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from plumbing import kv_cache  # noqa: E402
from plumbing.kv_cache import GrowingLayer, growing_cache  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    from plumbing.models import load_model

    return load_model(str(tiny_model_dir), dtype="float32").eval()


def _generate(model, ids, mask, cache=None, n=40):
    kw = {"past_key_values": cache} if cache is not None else {}
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n,
                             do_sample=False, pad_token_id=0, return_dict_in_generate=True,
                             output_logits=True, **kw)
    return out


def test_same_tokens_as_the_concatenating_cache_through_regrowth(tiny, monkeypatch):
    monkeypatch.setattr(kv_cache, "_MIN_ROOM", 0)  # room = 2x what is needed: the decode regrows twice
    torch.manual_seed(0)
    ids = torch.randint(5, tiny.config.vocab_size, (2, 17))
    mask = torch.ones_like(ids)
    mask[1, :6] = 0  # a left-padded second row
    plain = _generate(tiny, ids, mask)
    cache = growing_cache(tiny.config)
    grown = _generate(tiny, ids, mask, cache)
    assert torch.equal(plain.sequences, grown.sequences)
    # the tiny model's greedy tokens barely vary, so compare every step's logits as well
    assert torch.allclose(torch.stack(plain.logits), torch.stack(grown.logits), atol=1e-5)
    layer = cache.layers[0]
    assert isinstance(layer, GrowingLayer)
    assert cache.get_seq_length() == 17 + 40 - 1  # the last token is returned, not yet cached
    assert layer._kbuf.shape[-2] > layer.get_seq_length()  # spare room, not an exact-size copy
    assert layer.keys.data_ptr() == layer._kbuf.data_ptr()  # attention reads a view of the buffer


def test_crop_then_continue_matches_a_fresh_prefill(tiny):
    torch.manual_seed(1)
    ids = torch.randint(5, tiny.config.vocab_size, (1, 30))
    with torch.no_grad():
        cache = growing_cache(tiny.config)
        tiny(input_ids=ids, past_key_values=cache, use_cache=True)
        cache.crop(-10)  # keep the first 20 positions
        assert cache.get_seq_length() == 20
        tail = torch.randint(5, tiny.config.vocab_size, (1, 4))
        resumed = tiny(input_ids=tail, past_key_values=cache, use_cache=True).logits
        fresh = tiny(input_ids=torch.cat([ids[:, :20], tail], dim=1)).logits[:, -4:]
    assert torch.allclose(resumed, fresh, atol=1e-5)
    assert cache.get_seq_length() == 24


def test_hf_backend_kv_cache_setting(tiny_model_dir):
    from eval.backends import make_backend
    from plumbing.chat_backend import BackendError, Request

    msgs = [{"role": "user", "content": "Which file holds the parser?"}]
    growing = make_backend("hf", {"model": str(tiny_model_dir)})
    dynamic = make_backend("hf", {"model": str(tiny_model_dir), "kv_cache": "dynamic"})
    assert growing.kv_cache == "growing"
    req = Request(msgs, max_tokens=24)
    assert growing.complete(req).raw_text == dynamic.complete(req).raw_text
    with pytest.raises(BackendError, match="kv_cache"):
        make_backend("hf", {"model": str(tiny_model_dir), "kv_cache": "static"})
