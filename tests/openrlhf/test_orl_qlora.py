"""QLoRA, the authors' setting, in OpenRLHF's real fit() loop (slow stage).

One run of the real instruct model (tests/real_model_task.py) loaded in 4 bits by OpenRLHF
(bitsandbytes NF4, double quantization, bf16 compute) with LoRA on every linear projection,
typed as a user types it:

    --ds.load_in_4bit --ds.lora.rank 8 --ds.lora.alpha 16 --ds.lora.target_modules all-linear
    --ds.param_dtype bf16

with gradient checkpointing as the paper recipe has it, on vLLM 0.29's CPU build itself
(fit_harness.py, `engine="vllm"`; bitsandbytes' 4-bit layers in the layout a GPU keeps:
tests/standins/bnb_cpu_layout.py). After every sync the test reads back what vLLM holds and
recomputes what it should hold from the trainer's raw state, without bitsandbytes or peft: each
NF4 base dequantized from its bytes (tests/openrlhf/nf4_reference.py) plus B·A·α/r. Then vLLM's
greedy continuations of several prompts, generated right after the sync through its prefix
cache, are compared with transformers' on those recomputed weights.

The run also carries the checks of LoRA on the real engine (one real-model fit() start, about
three minutes of the slow stage, instead of two): vLLM holds exactly what each sync sent, under
its own names, no adapter tensor among them; the greedy continuations after each sync go through
vLLM's prefix cache (`--vllm.enable_prefix_caching`), which holds the prompts' blocks from the
previous sync (OpenRLHF resets it before new weights: test_orl_real_model.py checks every
reset); and the model's `generation_config` lists a second stop id, `<|im_end|>` (the end of a
turn and the pad token) beside the tokenizer's eos `<|endoftext|>`, Llama-3-Instruct's and
Qwen's arrangement: vLLM stops on either, and a completion that ends on `<|im_end|>` is trained
to that end. LoRA's merge on a bf16 base, the one step a 4-bit base does differently, is checked
in the default stage (test_orl_lora.py) and runs on the real engine in recipes/lora.md's
documented run.
"""

from __future__ import annotations

import json
import os

import pytest

# A run's own timeout (run_fit) stays below pytest's, which ends the test that sets up a fixture.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

pytest.importorskip("openrlhf")
pytest.importorskip("deepspeed")
pytest.importorskip("vllm")
pytest.importorskip("peft")
pytest.importorskip("bitsandbytes")

import float32_on_cpu  # noqa: E402  (tests/standins)
import torch  # noqa: E402
from fit_harness import (  # noqa: E402
    Fixture,
    build_real_fixture,
    check_engines_hold_what_was_sent,
    check_factors,
    completions_of,
    paper_terms,
    real_model_argv,
    run_fit,
    with_flags,
)
from nf4_reference import bf16_rounding_ratio, lora_layers, merged_weights  # noqa: E402
from real_model_task import G  # noqa: E402

STEPS = 2
# The run's peak for the memory gate (tests/memory_gate.py): 8.1 GiB measured, the machine's used
# memory less what it held before; 8.5 GiB its process group's, in the slow stage.
QLORA_RUN_GIB = 9.0
PROMPTS_PER_STEP = 4
RANK, ALPHA = 8, 16
QLORA = [
    "--ds.load_in_4bit", "--ds.lora.rank", str(RANK), "--ds.lora.alpha", str(ALPHA),
    "--ds.lora.target_modules", "all-linear", "--ds.param_dtype", "bf16",
]  # fmt: skip
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
GREEDY_PROMPTS = 6
GREEDY_TOKENS = 24
# vLLM computes in bf16: fed the same ids, transformers' float32 logit of a token vLLM chose sits
# below its top one by a gap, averaged over the 144 tokens of a sync. On the weights vLLM was
# sent that mean is at most this fraction of the mean on the unquantized checkpoint (the
# control: NF4's error, about 9% of each weight, added back). Measured in two runs, two syncs
# each: 0.001-0.015 against 0.155-0.214 (at most 0.10 of the control); at least this share of
# vLLM's tokens is also transformers' top token (0.965-0.993 there, 0.83-0.85 on the control).
GREEDY_MEAN_GAP_OF_CONTROL = 0.25
GREEDY_TOP_SHARE = 0.9
END_OF_TURN = "<|im_end|>"
TOKENIZER_EOS = "<|endoftext|>"


@pytest.fixture(scope="module")
def fixture_files(real_model, tmp_path_factory):
    return build_real_fixture(tmp_path_factory.mktemp("real-fixture"), real_model.path, 16)


def second_stop_id_model(fixture: Fixture, out) -> Fixture:
    """`fixture`'s model (weights linked) whose tokenizer's eos is <|endoftext|> and whose
    generation config stops on <|endoftext|> and <|im_end|>."""
    from transformers import AutoTokenizer, GenerationConfig

    out.mkdir(parents=True, exist_ok=True)
    for item in fixture.model.iterdir():
        if item.name.startswith(("tokenizer", "generation_config")):
            continue
        os.symlink(item.resolve(), out / item.name)
    tokenizer = AutoTokenizer.from_pretrained(fixture.model)
    tokenizer.eos_token = TOKENIZER_EOS
    tokenizer.save_pretrained(out)
    stops = [tokenizer.convert_tokens_to_ids(t) for t in (TOKENIZER_EOS, END_OF_TURN)]
    GenerationConfig(eos_token_id=stops, pad_token_id=tokenizer.pad_token_id).save_pretrained(out)
    assert tokenizer.pad_token == END_OF_TURN  # the second stop id is also the padding
    return Fixture(out, fixture.prompts)


def greedy_prompts(fixture) -> list[list[int]]:
    """The first prompts of the dataset as OpenRLHF renders them: the chat template to text,
    then its ids without added tokens."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(fixture.model)
    rows = [json.loads(line) for line in fixture.prompts.read_text().splitlines()]
    texts = [
        tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=False)
        for row in rows[:GREEDY_PROMPTS]
    ]
    return [tokenizer(text, add_special_tokens=False).input_ids for text in texts]


@pytest.fixture(scope="module")
def qlora(fixture_files, reward_server, tmp_path_factory):
    if not float32_on_cpu.cpu_has_bf16_units():
        # The harness's float32 stand-in cannot help: OpenRLHF computes 4-bit layers in bf16.
        pytest.skip("QLoRA computes in bf16, ~70x slower on a CPU without bf16 units")
    out = tmp_path_factory.mktemp("qlora")
    model = second_stop_id_model(fixture_files, out / "model")
    argv = with_flags(
        real_model_argv(model, reward_server.url, out),
        {
            "--data.max_samples": str(STEPS * PROMPTS_PER_STEP),
            "--rollout.batch_size": str(PROMPTS_PER_STEP),
            "--train.batch_size": str(PROMPTS_PER_STEP * G),
            "--train.micro_batch_size": str(PROMPTS_PER_STEP * G),
            "--gtpo.h_ini_prompts": "2",
            "--actor.adam.lr": "1e-3",  # the adapters move visibly in two steps,
            "--actor.lr_warmup_ratio": "0",  # the first one too (a warm-up's first lr is 0)
        },
    )
    prompts = greedy_prompts(fixture_files)
    env = {
        "GTPO_TEST_FLOAT32": "0",  # bf16, what the engine receives and the checks expect
        "GTPO_TEST_GREEDY_PROMPT": json.dumps(prompts),
        "GTPO_TEST_GREEDY_TOKENS": str(GREEDY_TOKENS),
    }
    # Gradient checkpointing as the paper recipe has it: the recomputed forward runs through
    # bitsandbytes' 4-bit matmul with autograd.
    argv = [*argv, *QLORA, "--actor.gradient_checkpointing_enable", "--vllm.enable_prefix_caching"]
    run = run_fit(argv, out, timeout=840, engine="vllm", env=env, memory_gib=QLORA_RUN_GIB)
    assert run.returncode == 0, run.failure()
    run.model, run.prompts = fixture_files.model, prompts
    return run


def raw_states(run) -> list[dict]:
    """What each sync was made from (fit_site's trainer_raw_*), in order."""
    files = sorted(run.capture.glob("trainer_raw_*.pt"), key=lambda f: int(f.stem.split("_")[-1]))
    return [torch.load(f, weights_only=True) for f in files]


def checkpoint_weights(model_dir) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    weights = {}
    for path in sorted(model_dir.glob("*.safetensors")):
        weights.update(load_file(str(path)))
    return weights


def test_qlora_trains_the_adapters_on_a_frozen_4bit_base(qlora):
    """Two steps ran; every projection of every layer is a 4-bit base with adapters, whose
    bytes never changed, and every adapter moved in each step; the final save holds the last
    sync's adapters. No operation in the backward
    lacked a gradient formula (bitsandbytes' CPU inference kernel has none: it dropped the
    gradient through every base layer before tests/standins/bnb_cpu_layout.py)."""
    assert len(qlora.experiences()) == STEPS
    assert "autograd kernel was not registered" not in qlora.log
    raws = raw_states(qlora)
    assert len(raws) == 1 + STEPS  # the sync at start-up, then one after each step
    bases = [n for n, v in raws[0].items() if isinstance(v, dict)]
    layers = {n.split(".layers.")[1].split(".")[0] for n in bases}
    assert len(bases) == len(layers) * len(PROJECTIONS) and len(layers) == 30
    assert all(n.endswith(".base_layer.weight") for n in bases)  # all targeted by all-linear
    for name in bases:
        assert torch.equal(raws[0][name]["packed"], raws[-1][name]["packed"]), name
    adapters = [n for n in raws[0] if ".lora_" in n]
    assert len(adapters) == 2 * len(bases)
    for name in adapters:
        if ".lora_B." in name:  # B starts at zero: the first step moved it
            assert raws[0][name].abs().max() == 0, name
            assert raws[1][name].abs().max() > 0, name
        assert not torch.equal(raws[1][name], raws[2][name]), name  # and the second
    # OpenRLHF's final save is the adapter the last sync merged, on every projection.
    from safetensors.torch import load_file

    final = qlora.out / "final"
    config = json.loads((final / "adapter_config.json").read_text())
    assert sorted(config["target_modules"]) == sorted(PROJECTIONS) and config["r"] == RANK
    saved = load_file(str(final / "adapter_model.safetensors"))
    assert set(saved) == {n.replace(".default.", ".") for n in adapters}
    for name in adapters:
        assert torch.equal(saved[name.replace(".default.", ".")], raws[-1][name]), name


def test_every_sync_gives_vllm_the_dequantized_base_with_the_adapters_merged(qlora):
    """After each sync, vLLM's weights (read back under its own names, stacked qkv_proj and
    gate_up_proj split back) are the NF4 base dequantized plus B·A·α/r recomputed from the
    trainer's raw state, within the bf16 roundings the sync makes; the base is the checkpoint's
    weight within NF4's error; embeddings and norms, which LoRA does not train, are the
    checkpoint's in bf16."""
    checkpoint = checkpoint_weights(qlora.model)
    syncs = list(qlora.engine_syncs().values())
    assert len(syncs) == 1 and len(syncs[0]) == 1 + STEPS  # one engine: start-up, each step
    for n, (raw, (held, layout)) in enumerate(zip(raw_states(qlora), syncs[0], strict=True), 1):
        assert layout["tied"] and layout["lm_head_is_embedding"]
        assert set(held) == set(checkpoint) - {"lm_head.weight"}, n
        layers = lora_layers(raw, ALPHA / RANK)
        assert len(layers) == 30 * len(PROJECTIONS)
        worst = 0.0
        for name, (base, update) in layers.items():
            wanted = checkpoint[name].float()
            assert (base - wanted).norm() / wanted.norm() < 0.15, (n, name)  # NF4's error
            assert held[name].dtype == torch.bfloat16
            worst = max(worst, bf16_rounding_ratio(held[name], base, update))
        assert worst <= 1, (n, worst)
        for name in set(held) - set(layers):
            assert torch.equal(held[name], checkpoint[name].to(torch.bfloat16)), (n, name)


def test_vllms_greedy_after_each_sync_is_transformers_on_the_merged_weights(qlora):
    """Right after each sync, vLLM's greedy continuations of 6 prompts (24 tokens each) are what
    transformers computes on the recomputed dequantized, merged weights (rounded to bf16, as
    sent; float32 arithmetic): fed the same ids, nearly every token vLLM chose is transformers'
    top token, and the mean gap between transformers' top logit and that of vLLM's token is a
    small fraction of the same mean on the unquantized checkpoint. Exact equality does not hold,
    as vLLM computes in bf16: in four runs 6 to 8 of the 12 continuations were identical and the
    largest single gap was 0.51, and in two more one token of 144 had a gap of 1.74 and 1.80
    (mean 0.015 in both; 0.20 and 0.155 on the unquantized checkpoint, whose largest gap was
    2.85 to 7.3): a bound on the largest gap alone fails on one bf16 outlier, the mean over a
    sync does not. (The adapters'
    own effect after two steps is below what it resolves: without them the largest gap was 0.5
    to 1.04; the previous test checks them weight by weight.)"""
    from transformers import AutoModelForCausalLM

    greedy: dict[int, dict[int, list[int]]] = {}
    (path,) = qlora.capture.glob("greedy_*.jsonl")
    for line in path.read_text().splitlines():
        row = json.loads(line)
        greedy.setdefault(row["syncs"], {})[row["prompt"]] = row["ids"]
    assert sorted(greedy) == list(range(1, STEPS + 2))  # start-up's sync, then each step's
    model = AutoModelForCausalLM.from_pretrained(qlora.model, dtype=torch.float32).eval()
    unquantized = {k: v.to(torch.bfloat16).float() for k, v in model.state_dict().items()}

    def gaps(weights: dict, n: int) -> torch.Tensor:
        """For each token of sync n's continuations, the gap between transformers' top logit and
        its logit of the token vLLM chose, on `weights`. One forward of the continuations,
        left-padded, positions counted from each row's first token."""
        _, unexpected = model.load_state_dict(weights, strict=False)
        assert not unexpected, unexpected
        rows = [prompt + greedy[n][k] for k, prompt in enumerate(qlora.prompts)]
        width, longest = max(map(len, rows)), max(len(greedy[n][k]) for k in greedy[n])
        ids = torch.tensor([[0] * (width - len(row)) + row for row in rows])
        mask = torch.tensor([[0] * (width - len(row)) + [1] * len(row) for row in rows])
        positions = (mask.cumsum(1) - 1).clamp(min=0)
        with torch.no_grad():
            logits = model(
                ids, attention_mask=mask, position_ids=positions, logits_to_keep=longest + 1
            ).logits
        found = []
        for k, row in enumerate(logits):
            engine = greedy[n][k]
            assert engine, (n, k)
            scores = row[-len(engine) - 1 : -1]  # position t scores token t + 1
            chosen = scores.gather(1, torch.tensor(engine)[:, None])[:, 0]
            found.append(scores.max(dim=1).values - chosen)
        return torch.cat(found)

    for n, raw in enumerate(raw_states(qlora), 1):
        merged = {
            k: v.to(torch.bfloat16).float() for k, v in merged_weights(raw, ALPHA / RANK).items()
        }
        sent, control = gaps(merged, n), gaps(unquantized, n)
        assert float(sent.mean()) <= GREEDY_MEAN_GAP_OF_CONTROL * float(control.mean()), (
            n, float(sent.mean()), float(control.mean()),
        )  # fmt: skip
        assert float((sent == 0).float().mean()) >= GREEDY_TOP_SHARE, (n, sent.tolist())


def test_every_generation_samples_the_trainers_4bit_model(qlora):
    """The engine loads the checkpoint's bf16 weights; the trainer computes with the NF4 base
    dequantized. GTPO syncs them before anything is generated, so H_ini's generations (the
    first call) and every rollout come from dequant(NF4) + B·A·α/r: each completion the engine
    generated was sampled after at least one sync. Before that sync, H_ini's 2 × G
    generations and the first step's rollout were sampled from the bf16 model."""
    syncs_then = [n for each in qlora.engine_versions().values() for n in each]
    assert len(syncs_then) == (2 + STEPS * PROMPTS_PER_STEP) * G
    # H_ini's and step 1's rollouts after the start-up sync, step 2's after step 1's sync.
    assert sorted(set(syncs_then)) == list(range(1, STEPS + 1)), sorted(set(syncs_then))


def test_the_engine_holds_exactly_what_each_sync_sent_under_its_own_names(qlora):
    """What GTPO's sync sent (the dequantized base plus B·A·α/r, under the base names) is what
    vLLM's load_weights put in its stacked qkv_proj / gate_up_proj, bit for bit, after the
    start-up sync and each step's; no adapter or 4-bit tensor was sent."""
    check_engines_hold_what_was_sent(qlora, engines=1, steps=1 + STEPS)
    sent = qlora.trainer_weights()[0]
    assert not [n for n in sent if "lora_" in n or "base_layer" in n]


def test_a_completion_ending_on_the_second_stop_id_is_trained_to_that_end(qlora):
    """Completions end on <|im_end|> although the tokenizer's eos is <|endoftext|>: the token
    is the last trained one (not padding, although it is the pad token too), and λ on every
    token, the backward run from that end included, is the paper's (Eq. 5)."""
    from transformers import AutoTokenizer

    end = AutoTokenizer.from_pretrained(qlora.model).convert_tokens_to_ids(END_OF_TURN)
    ended = 0
    for record in qlora.experiences():
        check_factors(record, paper_terms(record, G, record["h_ini"]))
        ended += sum(row["tokens"][-1] == end for row in completions_of(record).values())
    assert ended > 0
