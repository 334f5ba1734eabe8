"""LoRA's weight sync (gtpo.openrlhf.lora): what the rollout engine receives is the merged model,
under the base model's names. The fit() run with LoRA is in test_orl_settings.py (slow)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
peft = pytest.importorskip("peft")
pytest.importorskip("deepspeed")

from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

from gtpo.openrlhf.lora import PeftSync, base_name, is_peft, rollout_parameters  # noqa: E402


def tiny_peft(target_modules="all-linear"):
    config = LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, tie_word_embeddings=True,
    )  # fmt: skip
    torch.manual_seed(0)
    base = LlamaForCausalLM(config)
    names = [n for n, _ in base.named_parameters()]
    lora = peft.LoraConfig(r=4, lora_alpha=8, target_modules=target_modules)
    model = peft.get_peft_model(base, lora)
    with torch.no_grad():  # trained adapters: B is no longer zero
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(std=0.5)
    return model, names


@pytest.mark.parametrize("targets", ["all-linear", ["q_proj", "v_proj"]])
def test_rollout_parameters_are_the_merged_model_under_base_names(targets):
    model, base_names = tiny_peft(targets)
    assert is_peft(model)
    sent = dict(rollout_parameters(model, gather=False))
    assert list(sent) == base_names  # the engine's names, in order, no adapter tensors
    wrapped = {base_name(n) for n, _ in model.named_parameters() if ".base_layer." in n}
    merged = model.merge_and_unload()  # peft's own merge of the same weights
    for name, value in merged.named_parameters():
        torch.testing.assert_close(sent[name], value.detach(), rtol=1e-6, atol=1e-6)
        if name in wrapped:  # a merged copy: OpenRLHF's sync reads its ds_shape under ZeRO-3
            assert sent[name].ds_shape == value.shape


def test_the_trained_weights_are_left_alone_and_the_sync_view_ends_with_the_block():
    model, _ = tiny_peft()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    with PeftSync(model, gather=False):
        synced = dict(model.named_parameters())
        assert not any("lora_" in n for n in synced)
    after = dict(model.named_parameters())
    assert any("lora_" in n for n in after)
    for name, value in after.items():
        assert torch.equal(value, before[name]), name
    # A merged weight differs from the base weight it came from: the adapters are in it.
    name = "model.layers.0.self_attn.q_proj.weight"
    peft_name = "base_model.model.model.layers.0.self_attn.q_proj.base_layer.weight"
    assert base_name(peft_name) == name
    assert not torch.equal(synced[name], after[peft_name])
