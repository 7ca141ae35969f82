#!/usr/bin/env bash
# deploy.sh - the operator's entry point to aihost.llm_cluster.
#
#   ./deploy.sh [SUBCOMMAND] -i INVENTORY [--tags T] [--skip-tags T] [--limit L]
#               [--check] [--diff] [-e VAR=VALUE ...] [-v ...] [--strict]
#               [--ask-vault-pass | --vault-password-file FILE | --vault-id ID]
#
# On first use it creates .venv from requirements.txt (pinned by
# requirements-lock.txt) and then runs the collection's playbooks with
# ansible-playbook. See ./deploy.sh --help.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="${LLM_CLUSTER_VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3}"

usage() {
  cat <<'USAGE'
Usage: ./deploy.sh [SUBCOMMAND] -i INVENTORY [OPTIONS]

Subcommands:
  deploy      validate, prepare and bring up the cluster (default)
  status      report the cluster: accelerators, Ray, engine, binding, and the
              endpoint's models and a timed completion (artifacts/status.json)
  teardown    stop and remove the engine, Ray, the firewall rules and the files deploy wrote (venv and model kept)
  restore     put back host settings deploy changed (CPU binding, NPU addresses, hccn.conf,
              the host tuning)
  tuning      apply the host tuning profile (sysctl, hugepages, CPU governor), recording
              the host's values for restore; with --check --diff, show the drift
  bench       run vllm bench serve against the endpoint (artifacts/bench-*.json)
  rolling-restart
              the replicas topology's engines restarted one node at a time
              through vLLM's router: drained, restarted, proven, re-admitted;
              single, dp and ray restarted as a group in their order, the
              outage measured (artifacts/rolling-restart.json)
  replace-node OLD NEW [--retire]
              after NEW took OLD's place in the inventory (or OLD's own name on
              new hardware): checks that, then deploys; NEW gets the model's
              missing files from the nearest holder and joins; OLD is not touched,
              or with --retire (OLD kept as a host outside masters and workers)
              torn down and its host settings restored once the others let it go
  remove-node OLD [--retire]
              after OLD left the inventory: checks that, then deploys the others
  monitoring  exporters on every node, Prometheus and Alertmanager on the
              monitoring host (or the head), rules, alerts, dashboards and the
              metric truth check (artifacts/monitoring.json)
  bundle      on a connected machine: every Python package the roles install, for each
              node's platform, with a lock per platform and MANIFEST.json (./bundle;
              -e bundle_dir=DIR), for an air-gapped cluster
  demo        start a 2-node local container cluster, deploy a tiny model to it
              and print a curl that works (no -i needed; needs Docker)
  demo-down   remove the local demo cluster

Options:
  -i, --inventory PATH   inventory (an llm_solution config.yaml works as is)
  -t, --tags TAGS        only these parts: prepare, npu_network, binding, bundle, ray,
                         model, serve, monitoring, tuning (comma separated); status: prepare, ray,
                         serve, verify (verify = every report)
      --skip-tags TAGS   skip these parts
  -l, --limit HOSTS      limit to these hosts
  -C, --check            dry run: change nothing, report what would change
  -D, --diff             show the differences of changed files and settings
  -e, --extra-vars X     extra variables (VAR=VALUE, @file.yml or JSON), repeatable
  -J, --ask-vault-pass   ask for the Ansible Vault password (vaulted secrets)
      --vault-password-file FILE, --vault-id ID
                         Ansible Vault password file or vault id, repeatable
      --strict           validation warnings (clear-text passwords, unknown
                         variables, hosts outside masters/workers) fail the run
  -v, -vv, -vvv          more output
  -h, --help             this text

Environment:
  LLM_CLUSTER_VENV       virtualenv to use or create (default: .venv next to deploy.sh)
  LLM_CLUSTER_ARTIFACTS  where reports are written (default: ./artifacts)
USAGE
}

die() {
  echo "deploy.sh: $*" >&2
  exit 2
}

subcommand="deploy"
case "${1:-}" in
  deploy | status | teardown | restore | bench | rolling-restart | monitoring | tuning | bundle | demo | demo-down)
    subcommand="$1"
    shift
    ;;
  replace-node | remove-node)
    subcommand="$1"
    shift
    # The node names come first; the playbook refuses a pattern or a group (docs/node-replacement.md).
    declare -a nodes=()
    wanted=2
    [ "$subcommand" = remove-node ] && wanted=1
    while [ ${#nodes[@]} -lt "$wanted" ]; do
      if [ $# -eq 0 ] || [ -z "$1" ] || [ "${1#-}" != "$1" ]; then
        die "'$subcommand' needs $([ "$wanted" = 2 ] && echo "OLD NEW" || echo OLD) first (see ./deploy.sh --help)"
      fi
      nodes+=("$1")
      shift
    done
    ;;
esac

inventory=""
declare -a passthrough=()
while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help)
      usage
      exit 0
      ;;
    -i | --inventory)
      [ $# -ge 2 ] || die "$1 needs a path"
      inventory="$2"
      shift 2
      ;;
    --inventory=*)
      inventory="${1#*=}"
      shift
      ;;
    -t | --tags | --skip-tags | -l | --limit | -e | --extra-vars | --vault-password-file | --vault-pass-file | --vault-id)
      [ $# -ge 2 ] || die "$1 needs a value"
      passthrough+=("$1" "$2")
      shift 2
      ;;
    --tags=* | --skip-tags=* | --limit=* | --extra-vars=* | --vault-password-file=* | --vault-pass-file=* | --vault-id=*)
      passthrough+=("$1")
      shift
      ;;
    -C | --check | -D | --diff | -v | -vv | -vvv | -vvvv | -J | --ask-vault-pass | --ask-vault-password | --list-hosts | --list-tasks)
      passthrough+=("$1")
      shift
      ;;
    --strict)
      passthrough+=("-e" "llm_cluster_validate_strict=true")
      shift
      ;;
    --retire)
      [ "$subcommand" = replace-node ] || [ "$subcommand" = remove-node ] ||
        die "--retire goes with replace-node or remove-node (see ./deploy.sh --help)"
      passthrough+=("-e" '{"replace_node_retire": true}')
      shift
      ;;
    *)
      die "unknown argument '$1' (see ./deploy.sh --help)"
      ;;
  esac
done

# The virtualenv is (re)built when requirements change.
bootstrap_venv() {
  local req_hash
  req_hash="$(cat "$ROOT/requirements.txt" "$ROOT/requirements-lock.txt" | sha256sum | cut -c1-16)"
  if [ ! -x "$VENV/bin/ansible-playbook" ] || [ "$(cat "$VENV/.llm_cluster-requirements" 2>/dev/null)" != "$req_hash" ]; then
    echo "deploy.sh: preparing $VENV from requirements.txt (first use)" >&2
    "$PYTHON" -m venv "$VENV"
    # --no-compile: the ansible package brings about a hundred collections of which a run imports
    # a few; Python compiles those on first use. 10 s instead of 40 s (docs/benchmarks.md).
    "$VENV/bin/pip" install --quiet --no-compile -r "$ROOT/requirements.txt" -c "$ROOT/requirements-lock.txt"
    echo "$req_hash" > "$VENV/.llm_cluster-requirements"
  fi
}

case "$subcommand" in
  deploy) playbook="deploy" ;;
  restore) playbook="restore" ;;
  status) playbook="status" ;;
  teardown) playbook="teardown" ;;
  bench) playbook="bench" ;;
  rolling-restart) playbook="rolling_restart" ;;
  replace-node | remove-node) playbook="replace_node" ;;
  monitoring) playbook="monitoring" ;;
  tuning) playbook="tuning" ;;
  bundle) playbook="bundle" ;;
  demo | demo-down)
    [ -z "$inventory" ] || die "'$subcommand' builds its own inventory; drop -i"
    [ ${#passthrough[@]} -eq 0 ] || die "'$subcommand' takes no options"
    if [ "$subcommand" = demo ]; then
      bootstrap_venv
      VENV="$VENV" exec bash "$ROOT/demo/demo.sh" up
    fi
    exec bash "$ROOT/demo/demo.sh" down
    ;;
esac

if [ -z "$inventory" ]; then
  die "an inventory is required: ./deploy.sh $subcommand -i inventories/sample/hosts.yml"
fi
if [ ! -e "$inventory" ]; then
  die "inventory '$inventory' does not exist"
fi
if [ ! -r "$inventory" ]; then
  die "inventory '$inventory' is not readable by $(id -un)"
fi

bootstrap_venv

# The repository is the collection: expose it as aihost.llm_cluster.
collections="$ROOT/.cache/collections"
mkdir -p "$collections/ansible_collections/aihost"
ln -sfn ../../../.. "$collections/ansible_collections/aihost/llm_cluster"

export PATH="$VENV/bin:$PATH"
export ANSIBLE_CONFIG="${ANSIBLE_CONFIG:-$ROOT/ansible.cfg}"
export ANSIBLE_COLLECTIONS_PATH="$collections"
export LLM_CLUSTER_ARTIFACTS="${LLM_CLUSTER_ARTIFACTS:-$PWD/artifacts}"

if [ "$playbook" = replace_node ]; then
  # The names reach Ansible as JSON (a name with a quote or a space stays one value, which the playbook refuses).
  [ ${#nodes[@]} -eq 2 ] || nodes+=("")
  passthrough+=("-e" "$("$VENV/bin/python" -c 'import json, sys; print(json.dumps({"replace_node_old": sys.argv[1], "replace_node_new": sys.argv[2]}))' "${nodes[0]}" "${nodes[1]}")")
fi

exec ansible-playbook -i "$inventory" "${passthrough[@]}" "aihost.llm_cluster.$playbook"
