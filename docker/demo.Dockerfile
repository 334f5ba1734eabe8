# The embedded CPU demo: `gtpo demo` trains a tiny model with GTPO and GRPO side by side, every
# reward fetched over HTTP from the reward server, and writes a report to /out.
#
#   docker build -f docker/demo.Dockerfile -t gtpo-demo .
#   mkdir -p gtpo-demo && docker run --rm -v "$PWD/gtpo-demo:/out" gtpo-demo gtpo demo --quick --out /out
#
# (Without --reward-url the demo starts its own reward server inside the container; compose.yaml
# points it at the reward-server service instead.)
#
# torch: PyPI's plain `torch` wheel is a multi-GB CUDA build. The CPU build comes from
# TORCH_INDEX_URL (PyTorch's CPU index by default) or from a local wheelhouse: wheels in
# docker/wheelhouse/ or PIP_FIND_LINKS (a directory served over HTTP, for example). Empty
# TORCH_INDEX_URL: use only the wheelhouse and the usual index. The version is pinned by
# constraints.txt (torch==2.13.0, which a 2.13.0+cpu wheel satisfies).
ARG BASE_IMAGE=python:3.11-slim-bookworm

FROM ${BASE_IMAGE} AS build
LABEL io.gtpo.stage=build
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL
ARG PIP_FIND_LINKS
ARG PIP_TRUSTED_HOST
ARG PIP_DEFAULT_TIMEOUT=60
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
RUN python3 -m venv /opt/venv
COPY docker/wheelhouse/ /wheelhouse/
COPY pyproject.toml README.md constraints.txt ./
COPY docker/extra-requirements.py docker/
# Dependencies first (core + `demo` extra, which includes the server's), so that editing the
# sources does not reinstall torch; the project itself follows with --no-deps.
RUN export PIP_FIND_LINKS="/wheelhouse ${PIP_FIND_LINKS:-}" \
 && if [ -n "$TORCH_INDEX_URL" ]; then \
      export PIP_EXTRA_INDEX_URL="$TORCH_INDEX_URL ${PIP_EXTRA_INDEX_URL:-}"; fi \
 && python3 docker/extra-requirements.py --core pyproject.toml demo > /tmp/demo-requirements.txt \
 && /opt/venv/bin/pip install -c constraints.txt -r /tmp/demo-requirements.txt \
 && /opt/venv/bin/python -c "import torch; assert not torch.version.cuda, \
      f'torch {torch.__version__} is a CUDA build: give a CPU wheel (TORCH_INDEX_URL or wheelhouse)'"
COPY plugin/ plugin/
COPY reward_server/ reward_server/
RUN export PIP_FIND_LINKS="/wheelhouse ${PIP_FIND_LINKS:-}" \
 && /opt/venv/bin/pip install --no-deps . \
 && /opt/venv/bin/gtpo demo --help >/dev/null

FROM ${BASE_IMAGE}
RUN groupadd --system --gid 10001 gtpo \
 && useradd --system --uid 10001 --gid gtpo --home-dir /nonexistent --no-create-home \
      --shell /usr/sbin/nologin gtpo
COPY --from=build /opt/venv /opt/venv
LABEL io.gtpo.image=demo
COPY docker/demo-entrypoint.sh /usr/local/bin/gtpo-demo-entrypoint
# matplotlib needs a writable config folder whatever user runs the demo.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    MPLCONFIGDIR=/tmp/matplotlib
WORKDIR /tmp
# Starts as root only to pick the report folder's user and drop to it (see the script).
ENTRYPOINT ["/usr/local/bin/gtpo-demo-entrypoint"]
CMD ["gtpo", "demo", "--out", "/out"]
