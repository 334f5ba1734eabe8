"""The extra memory a LoRA weight sync takes on a policy rank: GTPO's streamed sync against
OpenRLHF's list of every parameter, side by side on the same model.

With `--ds.lora.rank`, the rollout engines get each adapted weight merged (W + B·A·α/r,
`gtpo.openrlhf.lora.rollout_parameters`). OpenRLHF 0.11.2's `broadcast_to_vllm` lists every
parameter before sending the first, so every merged copy exists at once; GTPO's sync
(`seam.stream_to_engines`) sends each and drops it before making the next. Each way runs in
its own process on the real model in bf16 with LoRA on every linear layer (rank 8), and the
peak resident memory above the loaded model is measured (Linux: VmHWM, reset before the sync).

    python benchmarks/lora_sync_memory.py                      # SmolLM2-135M-Instruct
    python benchmarks/lora_sync_memory.py --model DIR_OR_NAME   # another model (gtpo model prepare)

The last line is `lora sync extra memory: listed X MiB, streamed Y MiB (Y/X = R)`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from resident import ARM_ENV, peak_above, reset_peak


def arm(model_path: str, way: str) -> dict:
    """One sync's worth of merged weights, listed or streamed; the peak kB above the start."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from gtpo.openrlhf.lora import rollout_parameter_count, rollout_parameters

    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.bfloat16)
    config = LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", lora_dropout=0.0)
    model = get_peft_model(model, config)
    sent = torch.zeros(())

    def send(weight: torch.Tensor) -> None:
        # A checksum over a strided sample: it allocates nothing of the weight's size (a
        # broadcast reads the tensor in place), so the peak is the sync's own.
        sent.add_(weight.reshape(-1)[::997].float().sum())

    # What either way pays once, before the measured sync: rollout_parameters imports
    # DeepSpeed's ZeRO modules (about 80 MiB), and the first reduction sets up its threads.
    warm_up = rollout_parameters(model, gather=False)
    send(next(warm_up)[1])
    warm_up.close()
    before = reset_peak()
    if way == "listed":
        for _, weight in list(rollout_parameters(model, gather=False)):
            send(weight)
    else:
        for _, weight in rollout_parameters(model, gather=False):
            send(weight)
    return {
        "extra_kb": peak_above(before),
        "weights": rollout_parameter_count(model),
        "checksum": float(sent),
    }


def main() -> None:
    from gtpo.cli import end_on_sigterm

    end_on_sigterm()  # a caller's timeout (SIGTERM) ends the arms this started
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct", help="name, hub id or dir")
    parser.add_argument("--arm", choices=["listed", "streamed"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.arm:
        print(json.dumps(arm(args.model, args.arm)))
        return
    from gtpo.models import prepare_model

    model_path = str(prepare_model(args.model).path)
    results = {}
    for way in ("listed", "streamed"):
        out = subprocess.run(
            [sys.executable, __file__, "--model", model_path, "--arm", way],
            check=True, capture_output=True, text=True, env=ARM_ENV,
        )  # fmt: skip
        results[way] = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{way}: {results[way]['extra_kb'] / 1024:.0f} MiB above the loaded model, "
              f"{results[way]['weights']} weights", flush=True)  # fmt: skip
    if results["listed"]["checksum"] != results["streamed"]["checksum"]:
        raise SystemExit("the two ways sent different weights")
    listed, streamed = (results[w]["extra_kb"] / 1024 for w in ("listed", "streamed"))
    print(f"lora sync extra memory: listed {listed:.0f} MiB, streamed {streamed:.0f} MiB "
          f"(streamed/listed = {streamed / listed:.2f})")  # fmt: skip


if __name__ == "__main__":
    main()
