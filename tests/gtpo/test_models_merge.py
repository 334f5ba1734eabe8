"""`gtpo model merge`: a LoRA run's saved adapter → the merged model `gtpo eval` loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
peft = pytest.importorskip("peft")

from gtpo.cli import main  # noqa: E402
from gtpo.models import ModelUnavailableError, merge_adapter  # noqa: E402

WORDS = [f"w{i}" for i in range(29)]


def _tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2} | {w: i + 3 for i, w in enumerate(WORDS)}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", eos_token="</s>", unk_token="<unk>"
    )


@pytest.fixture
def lora_run(tmp_path: Path):
    """(base dir, adapter dir, the trained PEFT model): what a --ds.lora.rank run leaves, with
    adapters moved off their zero start so that merging changes the weights."""
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
        pad_token_id=0, eos_token_id=1,
    )  # fmt: skip
    base_dir = tmp_path / "base"
    transformers.LlamaForCausalLM(config).save_pretrained(base_dir)
    _tokenizer().save_pretrained(base_dir)
    model = transformers.AutoModelForCausalLM.from_pretrained(base_dir)
    lora = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"])
    trained = peft.get_peft_model(model, lora)
    with torch.no_grad():
        for name, param in trained.named_parameters():
            if "lora_B" in name:
                param.normal_(std=0.5)
    adapter_dir = tmp_path / "final"  # OpenRLHF's --ckpt.output_dir: adapter and tokenizer
    trained.save_pretrained(adapter_dir)
    _tokenizer().save_pretrained(adapter_dir)
    return base_dir, adapter_dir, trained.eval()


def test_merged_model_computes_what_the_trained_adapter_does(lora_run, tmp_path, capsys):
    base_dir, adapter_dir, trained = lora_run
    assert not (adapter_dir / "model.safetensors").exists()  # the adapter alone
    assert json.loads((adapter_dir / "adapter_config.json").read_text())[
        "base_model_name_or_path"
    ] == str(base_dir)
    out = tmp_path / "merged"
    assert main(["model", "merge", str(adapter_dir), "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == str(out)

    merged = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    assert not [k for k in merged.state_dict() if "lora" in k or "base_layer" in k]
    ids = torch.tensor([[3, 7, 9, 4, 12, 5]])
    with torch.no_grad():
        expected = trained(ids).logits
        got = merged(ids).logits
        base = transformers.AutoModelForCausalLM.from_pretrained(base_dir).eval()(ids).logits
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)
    assert (got - base).abs().max() > 1e-2  # the adapters changed the model


def test_gtpo_eval_generates_from_the_merged_directory(lora_run, tmp_path):
    from gtpo.eval.generate import GenerationCache, Sampling, generate

    _, adapter_dir, _ = lora_run
    out = merge_adapter(adapter_dir, tmp_path / "merged")
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    completions = generate(
        str(out), tokenizer, ["w1 w2 w3"], 2, Sampling(max_new_tokens=4),
        GenerationCache(tmp_path / "cache.jsonl"), backend="hf", device="cpu",
    )  # fmt: skip
    assert len(completions) == 1 and len(completions[0]) == 2


def test_a_directory_without_an_adapter_says_what_to_pass(tmp_path):
    with pytest.raises(ModelUnavailableError, match=r"pass the --ckpt\.output_dir of a LoRA run"):
        merge_adapter(tmp_path, tmp_path / "out")
