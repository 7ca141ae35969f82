#!/usr/bin/env bash
# Puts Debian's promtool (from the prometheus package of the build machine's
# release) at $1/promtool, for the rule tests of `make unit`. Prometheus
# publishes its binaries on GitHub, which the build machines cannot reach;
# Debian's archive they can. Idempotent: an existing promtool is kept.
set -euo pipefail
dest="${1:?usage: get-promtool.sh DIR}"
[ -x "$dest/promtool" ] && exit 0
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
# apt-get download needs the package lists; a new machine may have none yet.
apt-get download prometheus >/dev/null 2>&1 || { apt-get update -qq && apt-get download prometheus >/dev/null; }
dpkg-deb -x prometheus_*.deb root
mkdir -p "$dest"
install -m 0755 root/usr/bin/promtool "$dest/promtool"
"$dest/promtool" --version | head -1
