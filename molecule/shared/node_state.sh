#!/usr/bin/env bash
# What a deployment may change on a node, one line per item, sorted within each
# part, so that the state before the first deploy and after teardown + restore
# can be compared line by line:
#   file   every file, link and directory under the directories a deployment
#          writes to, with type, mode, owner and the content's SHA-256 (or the
#          link's target); modification times are left out, and so are the
#          contents of Ray's venv (listed, not hashed: the operator keeps it);
#   unit   every unit file with its enablement state;
#   nft    the whole nftables ruleset, without counters;
#   hccn   each NPU's address, netmask, gateway, netdetect address and TLS
#          switch as hccn_tool reads them (the live settings, not the file);
#   docker the containers, with their state, when Docker is installed.
# Left out: logs, /root (Ansible's and pip's own files), /tmp and /run, and
# the backups the shadow tools keep of the account files they edit
# (/etc/passwd- and the like, /etc/.pwd.lock): adding and removing an account
# leaves the account files as they were, not their backups.
set -o pipefail
# One stream, whoever reads it (Ansible's script module or a shell): nft and
# hccn_tool print part of what they say on stderr.
exec 2>&1
export LC_ALL=C
dirs=$(ls -d /etc /usr/local /opt /srv /var/lib/llm_cluster /var/cache/llm_cluster \
  /var/lib/llm-cluster-fakes/sys/devices/virtual 2>/dev/null)
skip=(-regex '/etc/\(passwd\|group\|shadow\|gshadow\|subuid\|subgid\)-' -o -path /etc/.pwd.lock)
# shellcheck disable=SC2086  # one word per directory
find $dirs -xdev \( "${skip[@]}" \) -prune -o -printf 'file %y %m %u:%g %p %l\n' | sort
# shellcheck disable=SC2086
find $dirs -xdev \( "${skip[@]}" -o -path /opt/llm_cluster/ray \) -prune -o -type f -print0 | sort -z \
  | xargs -0 -r sha256sum | sed 's/^/sha256 /'
systemctl list-unit-files --no-legend --no-pager | awk '{print "unit", $1, $2}' | sort
nft --stateless list ruleset | sed 's/^/nft /'
if command -v hccn_tool >/dev/null; then
  for dev in /dev/davinci[0-9]*; do
    i=${dev#/dev/davinci}
    for query in ip gateway netdetect; do
      # A setting that is not there fails; its message is the state.
      hccn_tool -i "$i" -"$query" -g 2>&1 | sed "s/^/hccn $i $query /"
    done
    hccn_tool -i "$i" -tls -g 2>&1 | grep -o 'tls switch\[[01]\]' | sed "s/^/hccn $i /"
  done
fi
if command -v docker >/dev/null; then
  docker ps --all --format 'docker {{.Names}} {{.Image}} {{.State}}' | sort
else
  echo "docker absent"
fi
