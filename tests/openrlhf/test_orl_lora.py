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


def test_the_sync_holds_one_merged_weight_at_a_time(monkeypatch):
    """GTPO's `broadcast_to_vllm` with LoRA (NCCL or gloo broadcast path): each merged copy is
    sent and dropped before the next is made. OpenRLHF's own loop lists every parameter before
    sending the first, so over the merged view every rank held a merged copy of every adapted
    layer at once (GBs for a 3B model, beside vLLM's weights). Only the transport is faked here:
    Ray's object refs, the broadcast group and the CUDA stream."""
    pytest.importorskip("openrlhf")
    import types
    import weakref

    import ray
    from openrlhf.trainer.ray import ppo_actor
    from openrlhf.utils import distributed_util

    from gtpo.openrlhf import actors, lora

    model, base_names = tiny_peft()
    own = {p.data_ptr() for p in model.parameters()}
    made: list[weakref.ref] = []  # every merged copy the sync made
    produce = lora.rollout_parameters

    def watched(*args, **kwargs):
        for name, tensor in produce(*args, **kwargs):
            if tensor.data_ptr() not in own:
                made.append(weakref.ref(tensor))
            yield name, tensor
            del tensor  # the watcher holds no copy

    sent, alive_at_send = [], []

    class Group:  # the weight-update group: records what was broadcast
        def broadcast(self, tensor, src, stream=None):
            alive_at_send.append(sum(ref() is not None for ref in made))

    class Engine:
        def __init__(self):
            self.update_weight = types.SimpleNamespace(
                remote=lambda name, **kw: sent.append((name, kw["empty_cache"]))
            )
            self.reset_prefix_cache = types.SimpleNamespace(remote=lambda: None)

    monkeypatch.setattr(lora, "rollout_parameters", watched)
    monkeypatch.setattr(actors, "rollout_parameters", watched)
    monkeypatch.setattr(ray, "get", lambda refs: refs)
    monkeypatch.setattr(torch.distributed, "get_rank", lambda *a: 0)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *a: None)
    for module in (distributed_util, ppo_actor):  # one rank: no barrier to wait at
        monkeypatch.setattr(module, "torch_dist_barrier_and_cuda_sync", lambda: None)
    args = types.SimpleNamespace(
        ds=types.SimpleNamespace(zero_stage=2, tensor_parallel_size=1),
        vllm=types.SimpleNamespace(enable_prefix_caching=False, sync_with_ray=False),
    )
    trainer = actors.GTPOActorPPOTrainer.__new__(actors.GTPOActorPPOTrainer)
    trainer.args, trainer.strategy = args, types.SimpleNamespace(args=args)
    trainer.actor = types.SimpleNamespace(model=types.SimpleNamespace(module=model))
    trainer.use_cuda_ipc, trainer.vllm_engines = False, [Engine()]
    trainer._model_update_group = Group()

    trainer.broadcast_to_vllm()
    assert [name for name, _ in sent] == base_names
    assert [last for _, last in sent] == [False] * (len(sent) - 1) + [True]
    assert len(made) > 10  # every linear layer of both blocks was merged
    assert max(alive_at_send) == 1, alive_at_send  # OpenRLHF's loop: all of them at once
