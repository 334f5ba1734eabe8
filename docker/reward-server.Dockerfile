# The GTPO reward service (POST /get_reward for OpenRLHF): FastAPI + uvicorn, Lark and sympy.
# No torch, no compilers, non-root. Build from the repository root:
#
#   docker build -f docker/reward-server.Dockerfile -t gtpo-reward-server .
#   docker run -p 8000:8000 gtpo-reward-server
#
# BASE_IMAGE: any Debian-like image with python3 >= 3.11 and the venv module, e.g. the
# official slim image (default) or the one docker/offline-base.sh makes on hosts without a
# registry. The build and run stages must use the same base (the venv links its python).
ARG BASE_IMAGE=python:3.11-slim-bookworm

FROM ${BASE_IMAGE} AS build
# Lets a cleanup find the intermediate image the classic builder keeps for this stage.
LABEL io.gtpo.stage=build
# pip's own settings, passed through from the host for mirrors, proxies and air-gapped builds
# (only this stage sees them; it is not part of the final image or its history).
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL
ARG PIP_FIND_LINKS
ARG PIP_TRUSTED_HOST
ARG PIP_DEFAULT_TIMEOUT=60
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
RUN python3 -m venv /opt/venv
# Wheels dropped in docker/wheelhouse/ come first (see its README); the directory always exists.
COPY docker/wheelhouse/ /wheelhouse/
COPY pyproject.toml README.md constraints.txt ./
COPY docker/extra-requirements.py docker/
# `torch` is a core dependency of the `gtpo` distribution (the training side), but the server
# never imports it: install the `server` extra's requirements, read from pyproject.toml, and
# then the project itself with --no-deps. This layer only changes with pyproject.toml.
RUN export PIP_FIND_LINKS="/wheelhouse ${PIP_FIND_LINKS:-}" \
 && python3 docker/extra-requirements.py pyproject.toml server > /tmp/server-requirements.txt \
 && /opt/venv/bin/pip install -c constraints.txt -r /tmp/server-requirements.txt
COPY plugin/ plugin/
COPY reward_server/ reward_server/
RUN export PIP_FIND_LINKS="/wheelhouse ${PIP_FIND_LINKS:-}" \
 && /opt/venv/bin/pip install --no-deps . \
 && /opt/venv/bin/python -c "import reward_server.service.app, uvloop, httptools, lark, sympy" \
 && ! /opt/venv/bin/python -c "import torch" 2>/dev/null

FROM ${BASE_IMAGE}
# A fixed numeric id, so orchestrators can check runAsNonRoot and volumes can be chowned to it.
RUN groupadd --system --gid 10001 gtpo \
 && useradd --system --uid 10001 --gid gtpo --home-dir /nonexistent --no-create-home \
      --shell /usr/sbin/nologin gtpo
COPY --from=build /opt/venv /opt/venv
LABEL io.gtpo.image=reward-server
# GTPO_RS_* are the server's settings (reward_server/service/settings.py). 0.0.0.0 so a published port
# reaches it; WORKERS uvicorn processes, each with VERIFY_WORKERS verification processes
# (unset: one per core).
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    GTPO_RS_HOST=0.0.0.0 \
    GTPO_RS_PORT=8000 \
    GTPO_RS_WORKERS=2
USER 10001:10001
WORKDIR /tmp
EXPOSE 8000
# The slim base has no curl: probe with the standard library, on the port the server uses.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["python3", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('GTPO_RS_PORT', '8000'), timeout=4)"]
CMD ["gtpo-reward-server"]
