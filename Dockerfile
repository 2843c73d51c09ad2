# syntax=docker/dockerfile:1.7
# The image helm/gpufleet runs: web (gunicorn), worker (celery), beat, the migrate hook (gpufleet migrate),
# the push sidecar (sh + git) and `helm test` (python). Non-root (UID/GID 10001, the chart's
# podSecurityContext), fit for a read-only root filesystem: bytecode compiled at build time, HOME and every
# runtime write under /tmp or the volumes the chart mounts (/var/lib/gpufleet for the GitOps working copy).
#
#   docker build -t registry.example.com/platform/gpufleet:0.1.0 .
#
# `reference` is the upstream schema bundle (CRDs, vCluster values schema; the directory
# GPUFLEET_REFERENCE_DIR points at in development): gpufleet validates every rendered object against it, so it
# is part of the image, at /opt/gpufleet/reference (the chart's config.referenceDir). It is not a file of this
# repository: the `reference-fetch` stage downloads it (network needed) at the commits
# infra/reference-manifest.json pins and refuses any file whose sha256 differs (python -m infra.reference).
# Offline, fetch it first on a machine with network (`make reference` writes var/reference) and pass it as a
# named context, which replaces the stage of the same name:
#   docker build -t ... --build-context reference=var/reference .
# Optional CLIs (used by `gpufleet cilium-status` and hubble checks):
#   --build-arg CILIUM_CLI_VERSION=v0.18.3 --build-arg CILIUM_CLI_SHA256=<sha256 of the linux-amd64 tarball>
#   --build-arg HUBBLE_VERSION=v1.17.2 --build-arg HUBBLE_SHA256=<sha256 of the linux-amd64 tarball>
# tests/helm/test_dockerfile.py checks this file against the repository and the chart (no docker engine there).

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md manage.py ./
COPY platform ./platform
COPY infra ./infra
COPY tenants ./tenants
COPY scheduling ./scheduling
COPY billing ./billing
RUN python -m venv /opt/gpufleet/venv \
 && /opt/gpufleet/venv/bin/pip install . \
 && /opt/gpufleet/venv/bin/python -m compileall -q /opt/gpufleet/venv

# Only what the running image reads (the manifest's `runtime` files: crds/index.json, the CRDs it names,
# vcluster/values.schema.json); the collector's notes and SYNTHETIC fixtures are test data, never fetched.
FROM ${PYTHON_IMAGE} AS reference-fetch
WORKDIR /src
COPY infra/__init__.py infra/reference.py infra/reference-manifest.json ./infra/
RUN python -m infra.reference fetch --dest /reference

# The bundle's files at the root of a stage, the same shape as a `--build-context reference=<dir>`.
FROM scratch AS reference
COPY --from=reference-fetch /reference/ /

FROM ${PYTHON_IMAGE} AS clis
ARG CILIUM_CLI_VERSION=""
ARG CILIUM_CLI_SHA256=""
ARG HUBBLE_VERSION=""
ARG HUBBLE_SHA256=""
WORKDIR /clis
RUN set -eu; mkdir -p /clis/bin; \
    fetch() { python -c "import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])" "$1" "$2"; \
              echo "$3  $2" | sha256sum -c -; tar -xzf "$2" -C /clis/bin; rm "$2"; }; \
    if [ -n "$CILIUM_CLI_VERSION" ]; then \
      fetch "https://github.com/cilium/cilium-cli/releases/download/${CILIUM_CLI_VERSION}/cilium-linux-amd64.tar.gz" cilium.tgz "$CILIUM_CLI_SHA256"; fi; \
    if [ -n "$HUBBLE_VERSION" ]; then \
      fetch "https://github.com/cilium/hubble/releases/download/${HUBBLE_VERSION}/hubble-linux-amd64.tar.gz" hubble.tgz "$HUBBLE_SHA256"; fi

FROM ${PYTHON_IMAGE}
# git + ssh: the worker's GitOps working copy and the push sidecar; coreutils' sleep: the web preStop hook;
# util-linux's flock: the background index update after each one-tenant commit (infra/gitops/git.py).
RUN apt-get update \
 && apt-get install -y --no-install-recommends git openssh-client ca-certificates util-linux \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 10001 gpufleet \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin gpufleet \
 && install -d -o 10001 -g 10001 /var/lib/gpufleet
COPY --from=build /opt/gpufleet/venv /opt/gpufleet/venv
COPY --from=clis /clis/bin/ /usr/local/bin/
COPY --from=reference . /opt/gpufleet/reference
ENV PATH=/opt/gpufleet/venv/bin:$PATH \
    HOME=/tmp \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    DJANGO_SETTINGS_MODULE=gpufleet.settings.production \
    GPUFLEET_REFERENCE_DIR=/opt/gpufleet/reference \
    GPUFLEET_VAR_DIR=/var/lib/gpufleet
USER 10001:10001
WORKDIR /tmp
EXPOSE 8000
# The chart's web command (helm/gpufleet: gthread, one process per CPU, 4 threads each; benchmarks/README.md).
CMD ["gunicorn", "gpufleet.wsgi:application", "--bind=0.0.0.0:8000", "--worker-class=gthread", "--workers=2", "--threads=4"]
