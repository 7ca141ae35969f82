#!/usr/bin/env bash
# Build the systemd-capable Debian base image that the Molecule scenarios use as
# stand-ins for inference servers, without any container registry:
# debootstrap -> tar -> docker import.
#
# Idempotent: exits at once when the tag exists and carries the label
# aihost.llm_cluster.recipe equal to the hash of this file + suite + mirror.
# FORCE=1 rebuilds anyway. Downloaded .debs are kept in $CACHE_DIR, so a
# rebuild on the same machine downloads nothing.
set -euo pipefail

IMAGE="${IMAGE:-aihost-llm-cluster/debian-systemd:bookworm}"
SUITE="${SUITE:-bookworm}"
MIRROR="${MIRROR:-http://deb.debian.org/debian}"
WORKDIR="${WORKDIR:-/var/tmp/aihost-llm-cluster-image}"
CACHE_DIR="${CACHE_DIR:-$WORKDIR/debs}"
ROOTFS="$WORKDIR/rootfs"
# libnuma1, g++ and python3-dev: the CPU build of vLLM loads its kernels (vllm._C) against libnuma and
# compiles small helper kernels (C++ against Python.h) with torch inductor at start, as on a real server.
PKGS="python3,python3-apt,python3-venv,python3-pip,sudo,iproute2,procps,rsync,openssh-client,openssh-server,ca-certificates,systemd,systemd-sysv,dbus,iputils-ping,less,nftables,kmod,libnuma1,g++,python3-dev"

RECIPE="$( (cat "$0"; echo "$SUITE $MIRROR") | sha256sum | cut -c1-16)"
have="$(docker image inspect -f '{{ index .Config.Labels "aihost.llm_cluster.recipe" }}' "$IMAGE" 2>/dev/null || true)"
old_id="$(docker image inspect -f '{{ .Id }}' "$IMAGE" 2>/dev/null || true)"
if [ "${FORCE:-0}" != 1 ] && [ "$have" = "$RECIPE" ]; then
  echo "image $IMAGE (recipe $RECIPE) already present, skipping build"
  exit 0
fi

if ! command -v debootstrap >/dev/null; then
  echo "debootstrap is missing: apt-get install debootstrap" >&2
  exit 2
fi

mkdir -p "$CACHE_DIR"
rm -rf "$ROOTFS"
debootstrap --variant=minbase --cache-dir="$CACHE_DIR" --include="$PKGS" \
  "$SUITE" "$ROOTFS" "$MIRROR"

cat > "$ROOTFS/etc/apt/sources.list" <<SRC
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb http://deb.debian.org/debian-security $SUITE-security main
SRC
cat > "$ROOTFS/etc/apt/apt.conf.d/90container" <<'APT'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
APT
# A fresh machine-id per container (systemd creates it at first boot).
: > "$ROOTFS/etc/machine-id"
rm -f "$ROOTFS/var/lib/dbus/machine-id"
# Units that make no sense, or hang, in a container.
for u in getty.target systemd-udevd.service systemd-udev-trigger.service \
         systemd-remount-fs.service sys-kernel-debug.mount sys-kernel-tracing.mount \
         sys-fs-fuse-connections.mount dev-hugepages.mount systemd-logind.service \
         console-getty.service getty@tty1.service; do
  ln -sf /dev/null "$ROOTFS/etc/systemd/system/$u"
done
# sshd: no baked-in host keys; each container generates its own at first start.
rm -f "$ROOTFS"/etc/ssh/ssh_host_*
mkdir -p "$ROOTFS/etc/systemd/system/ssh.service.d"
printf '[Service]\nExecStartPre=\nExecStartPre=/usr/bin/ssh-keygen -A\nExecStartPre=/usr/sbin/sshd -t\n' \
  > "$ROOTFS/etc/systemd/system/ssh.service.d/hostkeys.conf"
echo 'Defaults !requiretty' > "$ROOTFS/etc/sudoers.d/container"
chmod 0440 "$ROOTFS/etc/sudoers.d/container"
rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/* \
       "$ROOTFS"/usr/share/doc/* "$ROOTFS"/usr/share/man/* "$ROOTFS"/usr/share/info/* \
       "$ROOTFS"/var/log/*.log "$ROOTFS"/tmp/* 2>/dev/null || true
# The apt lists were emptied: make the directory look old, or apt's
# cache_valid_time believes the empty cache is fresh.
touch -d @0 "$ROOTFS/var/lib/apt/lists"

# docker import --change knows no STOPSIGNAL: the scenarios set stop_signal.
tar --numeric-owner -C "$ROOTFS" -c . | docker import \
  --change 'ENV container=docker' \
  --change 'CMD ["/sbin/init"]' \
  --change "LABEL aihost.llm_cluster.recipe=$RECIPE" \
  - "$IMAGE"
rm -rf "$ROOTFS"
if [ -n "$old_id" ]; then
  docker rmi "$old_id" >/dev/null 2>&1 || true
fi
docker image ls "$IMAGE"
