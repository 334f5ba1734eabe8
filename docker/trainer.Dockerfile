# GPU training image: OpenRLHF 0.11 (vLLM, DeepSpeed, flash-attn, Ray) + gtpo, entrypoint
# `gtpo-openrlhf` with the paper's setup (docker/trainer-entrypoint.sh), or `ray-worker` to
# join a multi-node job. Build from the repository root on a machine with Docker and enough
# disk (~30 GB); CUDA hardware is needed to run it, not to build it:
#
#   docker build -f docker/trainer.Dockerfile -t gtpo-trainer .
#
# The base follows OpenRLHF 0.11.2's own image: NVIDIA's PyTorch container, where vLLM,
# DeepSpeed and flash-attn are installed against the same torch/CUDA. BASE_IMAGE can name a
# mirrored or locally loaded copy (`docker load`) on hosts without access to nvcr.io.
ARG BASE_IMAGE=nvcr.io/nvidia/pytorch:26.03-py3
FROM ${BASE_IMAGE}
LABEL io.gtpo.image=trainer

# Versions OpenRLHF 0.11.2 pins (its Requires-Dist: vllm==0.29.0 in the `vllm` extra,
# flash-attn==2.8.3, deepspeed==0.19.6, ray[default]==2.55.0, transformers==5.15.0).
ARG OPENRLHF_VERSION=0.11.2
ARG VLLM_VERSION=0.29.0
ARG FLASH_ATTN_VERSION=2.8.3
# A prebuilt flash-attn wheel matching the base's torch, CUDA and Python (URL, or a path under
# /wheelhouse/ when the wheel is in docker/wheelhouse/). Empty: compile it from source, which
# takes about an hour and needs the base's CUDA toolkit (present in NVIDIA's devel images).
ARG FLASH_ATTN_WHEEL=
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL
ARG PIP_FIND_LINKS
ARG PIP_TRUSTED_HOST
ARG PIP_DEFAULT_TIMEOUT=120
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 DEBIAN_FRONTEND=noninteractive

COPY docker/wheelhouse/ /wheelhouse/
# As in OpenRLHF's image: drop the base's packages that clash with vLLM's and OpenRLHF's pins
# (the base ships its own flash-attn/transformer-engine builds), then vLLM (it may replace torch
# with the build its wheel targets), flash-attn against that torch, then OpenRLHF itself.
RUN pip uninstall -y xgboost transformer_engine flash_attn pynvml opencv-python-headless || true
RUN export PIP_FIND_LINKS="/wheelhouse ${PIP_FIND_LINKS:-}" \
 && pip install "vllm==${VLLM_VERSION}"
RUN export PIP_FIND_LINKS="/wheelhouse ${PIP_FIND_LINKS:-}" \
 && pip install --no-build-isolation "${FLASH_ATTN_WHEEL:-flash-attn==${FLASH_ATTN_VERSION}}"
RUN export PIP_FIND_LINKS="/wheelhouse ${PIP_FIND_LINKS:-}" \
 && pip install "openrlhf[vllm]==${OPENRLHF_VERSION}"

# This project last, so source edits rebuild one small layer. No constraints.txt here: it pins
# the CPU torch used by CI; the GPU torch above satisfies the package's torch>=2.4.
WORKDIR /opt/gtpo
COPY pyproject.toml README.md ./
COPY plugin/ plugin/
COPY reward_server/ reward_server/
RUN export PIP_FIND_LINKS="/wheelhouse ${PIP_FIND_LINKS:-}" \
 && pip install ".[openrlhf,server]" "openrlhf[vllm]==${OPENRLHF_VERSION}" \
 && for p in openrlhf vllm flash-attn deepspeed ray; do pip show -q "$p" >/dev/null || exit 1; done \
 && python -c "import gtpo.openrlhf.flags, reward_server.service.app"
# peft imports torchao whenever it is installed and refuses one below 0.16 at the first LoRA
# layer, so the LoRA recipes' model load would fail in every policy actor; nothing here needs
# it (no dependency above requires it), so the base image's copy goes, once everything is in.
RUN pip uninstall -y torchao || true \
 && python -c "import importlib.util as u, sys; sys.exit(u.find_spec('torchao') is not None)"
# (No import of vllm/flash_attn here: builders often have no GPU driver to load them with.)

COPY docker/trainer-entrypoint.sh /usr/local/bin/gtpo-trainer-entrypoint
# Runs as root, like NGC's images and OpenRLHF's: GPU, /dev/shm and Ray need no extra set-up.
# Hugging Face downloads go to a volume (compose mounts the host cache there).
ENV HF_HOME=/hf TOKENIZERS_PARALLELISM=true PYTHONUNBUFFERED=1
WORKDIR /workspace
# Ray dashboard, Ray GCS (multi-node).
EXPOSE 8265 6379
ENTRYPOINT ["/usr/local/bin/gtpo-trainer-entrypoint"]
CMD ["train"]
