"""LoRA's weight sync (gtpo.openrlhf.lora): what the rollout engine receives is the merged model,
under the base model's names. The fit() run with LoRA is in test_orl_settings.py (slow)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
peft = pytest.importorskip("peft")
pytest.importorskip("deepspeed")

from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

from gtpo.openrlhf.lora import base_name, is_peft, merged_view, rollout_parameters  # noqa: E402


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
    with merged_view(model, gather=False):
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


@pytest.mark.parametrize("transport", ["broadcast", "cuda_ipc"])
def test_the_sync_holds_one_merged_weight_at_a_time(monkeypatch, transport):
    """GTPO's `broadcast_to_vllm` with LoRA, over both of OpenRLHF's transports: each merged
    copy is sent and dropped before the next is made, and the engines get the merged values,
    in the model's order. OpenRLHF's own loop lists every parameter before sending the first,
    so over the merged view every rank held a merged copy of every adapted layer at once (GBs
    for an 8B model, beside vLLM's weights).

    `cuda_ipc` is what a GPU run with `--vllm.sync_backend nccl --train.colocate_all` takes;
    here its GTPO side runs with the transport's CUDA parts stood in: the handle is torch's
    own `reduce_tensor` of a CPU tensor (shared memory, not a CUDA IPC handle), the GPU's UUID
    is a name, the all-gather has one rank, and the engine rebuilds the tensor from the handle
    as vLLM's worker does. What only a GPU shows: CUDA IPC itself (the handle's device field,
    which the worker rewrites), NCCL, and the engine's load on its GPU. Ray's object refs, the
    broadcast group and the CUDA stream are faked for `broadcast`."""
    pytest.importorskip("openrlhf")
    import types
    import weakref

    import ray
    from openrlhf.trainer.ray import ppo_actor
    from openrlhf.utils import distributed_util

    from gtpo.openrlhf import lora, policy, seam

    model, base_names = tiny_peft()
    expected = dict(tiny_peft()[0].merge_and_unload().named_parameters())
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

    def arrived(name, value, last):
        alive_at_send.append(sum(ref() is not None for ref in made))
        sent.append((name, last))
        torch.testing.assert_close(value, expected[name].detach(), rtol=1e-6, atol=1e-6)

    class Group:  # the broadcast transport: rank 0 announces a weight, then broadcasts it
        def announced(self, name, empty_cache, **_):
            self.name, self.last = name, empty_cache

        def broadcast(self, tensor, src, stream=None):
            arrived(self.name, tensor, self.last)

    group = Group()

    def loaded_from_handle(name, dtype, shape, ipc_handles, empty_cache):
        rebuild, rebuild_args = ipc_handles["GPU-0"]  # what vLLM's worker does, on its GPU
        value = rebuild(*rebuild_args)
        assert value.dtype == dtype and value.shape == shape
        arrived(name, value, empty_cache)

    class Engine:
        def __init__(self):
            self.update_weight = types.SimpleNamespace(remote=group.announced)
            self.update_weight_cuda_ipc = types.SimpleNamespace(remote=loaded_from_handle)
            self.reset_prefix_cache = types.SimpleNamespace(remote=lambda: None)

    def all_gather_object(out, obj, group=None):  # one rank
        out[0] = obj

    monkeypatch.setattr(lora, "rollout_parameters", watched)
    monkeypatch.setattr(policy, "rollout_parameters", watched)
    monkeypatch.setattr(ray, "get", lambda refs: refs)
    monkeypatch.setattr(torch.distributed, "get_rank", lambda *a: 0)
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda *a: 1)
    monkeypatch.setattr(torch.distributed, "all_gather_object", all_gather_object)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *a: None)
    # The GPU's UUID, where GTPO's sync and OpenRLHF's read it.
    monkeypatch.setattr(seam, "physical_gpu_id", lambda: "GPU-0")
    monkeypatch.setattr(ppo_actor, "get_physical_gpu_id", lambda: "GPU-0")
    for module in (distributed_util, ppo_actor):  # one rank: no barrier to wait at
        monkeypatch.setattr(module, "torch_dist_barrier_and_cuda_sync", lambda: None)
    args = types.SimpleNamespace(
        ds=types.SimpleNamespace(zero_stage=2, tensor_parallel_size=1),
        vllm=types.SimpleNamespace(enable_prefix_caching=False, sync_with_ray=False),
    )
    trainer = policy.GTPOActorPPOTrainer.__new__(policy.GTPOActorPPOTrainer)
    trainer.args, trainer.strategy = args, types.SimpleNamespace(args=args)
    trainer.actor = types.SimpleNamespace(model=types.SimpleNamespace(module=model))
    trainer.use_cuda_ipc, trainer.vllm_engines = transport == "cuda_ipc", [Engine()]
    trainer._model_update_group = group

    trainer.broadcast_to_vllm()
    assert [name for name, _ in sent] == base_names
    assert [last for _, last in sent] == [False] * (len(sent) - 1) + [True]
    assert len(made) > 10  # every linear layer of both blocks was merged
    assert max(alive_at_send) == 1, alive_at_send  # OpenRLHF's loop: all of them at once


# --- QLoRA: a 4-bit base (--ds.load_in_4bit) -----------------------------------------------

PROJECTIONS = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    """A tiny Llama saved as a checkpoint, for OpenRLHF's Actor to load (in 4 bits or not)."""
    config = LlamaConfig(
        vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True,
    )  # fmt: skip
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("tiny-llama")
    LlamaForCausalLM(config).save_pretrained(path)
    return path


def openrlhf_actor(path, ds):
    """OpenRLHF's Actor as its policy actor builds it (`PolicyModelActor.
    init_model_from_pretrained`), from the parsed `args.ds`, without DeepSpeed."""
    from openrlhf.models import Actor

    return Actor(
        str(path), attn_implementation="sdpa", param_dtype=ds.param_dtype,
        load_in_4bit=ds.load_in_4bit, lora_rank=ds.lora.rank, lora_alpha=ds.lora.alpha,
        target_modules=ds.lora.target_modules, lora_dropout=ds.lora.dropout,
    )  # fmt: skip


def adapted_layers(model) -> set[str]:
    from peft.tuners.lora import LoraLayer

    return {n.rsplit(".", 1)[-1] for n, m in model.named_modules() if isinstance(m, LoraLayer)}


@pytest.mark.parametrize("four_bit", [False, True], ids=["bf16", "4bit"])
def test_all_linear_on_the_command_line_adapts_every_projection(
    openrlhf_args, tiny_checkpoint, four_bit
):
    """`--ds.lora.target_modules all-linear`, as both LoRA recipes pass it, reaches OpenRLHF as
    the list ['all-linear'] (nargs="*"), and peft failed to load the model with it ("Target
    modules {'all-linear'} not found"). Through the launcher's parse and OpenRLHF's own model
    loading: every linear projection is adapted; a list of names stays a list."""
    if four_bit:
        pytest.importorskip("bitsandbytes")
    flags = ["--ds.lora.rank", "4", *(["--ds.load_in_4bit"] if four_bit else [])]
    args = openrlhf_args(*flags, "--ds.lora.target_modules", "all-linear")
    assert adapted_layers(openrlhf_actor(tiny_checkpoint, args.ds).model) == PROJECTIONS
    args = openrlhf_args(*flags, "--ds.lora.target_modules", "q_proj", "v_proj")
    assert args.ds.lora.target_modules == ["q_proj", "v_proj"]
    assert adapted_layers(openrlhf_actor(tiny_checkpoint, args.ds).model) == {"q_proj", "v_proj"}


def qlora_model(path, target_modules, rank=4, alpha=8):
    """OpenRLHF's QLoRA policy model (NF4 base, double quant, bf16 adapters) with trained
    adapters: B no longer zero."""
    pytest.importorskip("bitsandbytes")
    from types import SimpleNamespace

    lora = SimpleNamespace(rank=rank, alpha=alpha, target_modules=target_modules, dropout=0)
    ds = SimpleNamespace(param_dtype="bf16", load_in_4bit=True, lora=lora)
    model = openrlhf_actor(path, ds).model
    torch.manual_seed(1)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(std=0.5)
    return model


@pytest.mark.parametrize("targets", ["all-linear", ["q_proj", "v_proj"]])
def test_qlora_sync_sends_the_dequantized_base_with_the_adapters_merged(tiny_checkpoint, targets):
    """With a 4-bit base every sent weight is a weight in the engine's dtype (bf16): each 4-bit
    layer's NF4 base dequantized (tests/openrlhf/nf4_reference.py, from the format), its LoRA
    update B·A·α/r added; a 4-bit layer LoRA does not target, dequantized. The old sync added
    the update to the packed NF4 bytes and sent uint8 tensors of shape [n·m/2, 1]."""
    from nf4_reference import bf16_rounding_ratio, dequantize_nf4

    model = qlora_model(tiny_checkpoint, targets)
    checkpoint = dict(LlamaForCausalLM.from_pretrained(tiny_checkpoint).named_parameters())
    sent = dict(rollout_parameters(model, gather=False))
    assert list(sent) == list(checkpoint)  # the engine's names, in order, no adapter tensors
    quantized = 0
    for peft_name, param in model.named_parameters():
        if "lora_" in peft_name:
            continue
        name = base_name(peft_name)
        state = getattr(param, "quant_state", None)
        if state is None:  # embeddings and norms: sent as they are (DeepSpeed casts them to bf16)
            assert torch.equal(sent[name], param), name
            continue
        quantized += 1
        assert sent[name].dtype == torch.bfloat16 and sent[name].shape == checkpoint[name].shape
        base = dequantize_nf4(param.data, state.as_dict())
        # NF4 keeps a weight within about a tenth of its norm; packed bytes are nowhere near.
        error = (base - checkpoint[name].float()).norm() / checkpoint[name].float().norm()
        assert error < 0.15, (name, float(error))
        update = torch.zeros_like(base)
        if peft_name.endswith(".base_layer.weight"):
            layer = model.get_submodule(peft_name.removesuffix(".base_layer.weight"))
            a, b = layer.lora_A["default"].weight.float(), layer.lora_B["default"].weight.float()
            update = (b @ a) * layer.scaling["default"]
        assert bf16_rounding_ratio(sent[name], base, update) <= 1, name
    assert quantized == 2 * len(PROJECTIONS)  # every projection is 4-bit, targeted or not


def test_a_weight_repacked_for_bitsandbytes_cpu_kernel_is_refused(tiny_checkpoint):
    """bitsandbytes 0.50 on a CPU with AVX-512 BF16 repacks a 4-bit weight at its first no-grad
    eval forward (tests/standins/bnb_cpu_layout.py); `dequantize_4bit` reads that layout as
    garbage, so the sync stops instead of sending it. Repacked here with bitsandbytes' own
    conversion, which `Linear4bit.forward` calls."""
    pytest.importorskip("bitsandbytes")
    from bitsandbytes.functional import _convert_weight_packed_for_cpu

    from gtpo.openrlhf.lora import CPU_REPACKED

    model = qlora_model(tiny_checkpoint, "all-linear")
    weight = model.get_submodule("base_model.model.model.layers.0.self_attn.q_proj.base_layer")
    weight = weight.weight
    packed, state = _convert_weight_packed_for_cpu(weight.data, weight.quant_state)
    weight.data, weight.quant_state = packed, state
    with pytest.raises(RuntimeError, match="repacked") as refused:
        dict(rollout_parameters(model, gather=False))
    assert str(refused.value) == CPU_REPACKED
