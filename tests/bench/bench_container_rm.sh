#!/usr/bin/env bash
# How long removing a scenario's node containers takes when each holds an
# installed engine in its writable layer (as default's nodes do after the serve
# step): one `docker rm` per container, as molecule/shared/destroy.yml does with
# community.docker.docker_container, against one `docker rm` of all of them
# (the Docker CLI removes its arguments in parallel). Each round copies the
# engine image's venv (/opt/engine) inside three containers of that image, so
# the files sit in their writable layers, then removes them; ROUNDS rounds of
# both, alternated.
#
#   bash tests/bench/bench_container_rm.sh        (needs make engine-image)
set -euo pipefail
IMAGE="${ENGINE_IMAGE:-aihost-llm-cluster/engine-vllm-cpu:0.32.0}"
ROUNDS="${ROUNDS:-2}"
NAMES=(llmc-rmbench1 llmc-rmbench2 llmc-rmbench3)
trap 'docker rm -f -v "${NAMES[@]}" >/dev/null 2>&1 || true' EXIT

make_nodes() {
  for name in "${NAMES[@]}"; do
    docker run --detach --name "$name" --network none "$IMAGE" sleep infinity >/dev/null
    docker exec "$name" cp -a /opt/engine /opt/copy
  done
  sync
}

for round in $(seq 1 "$ROUNDS"); do
  make_nodes
  start=$(date +%s.%N)
  for name in "${NAMES[@]}"; do docker rm -f -v "$name" >/dev/null; done
  echo "round $round, one docker rm per container: $(echo "$(date +%s.%N) - $start" | bc) s"
  make_nodes
  start=$(date +%s.%N)
  docker rm -f -v "${NAMES[@]}" >/dev/null
  echo "round $round, one docker rm for all three: $(echo "$(date +%s.%N) - $start" | bc) s"
done
