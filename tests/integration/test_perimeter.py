# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The perimeter's files as Ansible renders them from an inventory, hostile values included.

The table is checked by the real nft (`nft -c -f`: parsed and validated by the kernel's rules, nothing
loaded) where the machine has nft and root; the unit files are read back word by word with the rules of
systemd's own parser for the characters we escape (the ray Molecule scenario feeds such a unit to systemd).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PLAYBOOK = os.path.join(HERE, "perimeter", "render.yml")
BIN = os.path.dirname(sys.executable)
NFT = shutil.which("nft") or ("/usr/sbin/nft" if os.path.exists("/usr/sbin/nft") else None)
HOSTS = {"master1": "10.10.0.11", "worker1": "10.10.0.12", "worker2": "10.10.0.13"}
HOSTILE_DIR = "/var/lib/ray tmp\nExecStartPre=/bin/touch /tmp/pwned $(id) %n ${HOME}"
HOSTILE_ENV = {"PYTHONPATH": "/opt/x\nExecStartPre=/bin/true", "WEIRD": 'a"b%n$X'}


def render(tmp_path, host_vars=None, **extra):
    names = sorted(host_vars) if host_vars else sorted(HOSTS)
    hosts = {name: dict({"__ray_cluster_address": "10.10.0.%d" % (11 + index), "__ray_cluster_interface": "eth1"},
                        **(host_vars or {}).get(name, {})) for index, name in enumerate(names)}
    inventory = {"all": {"children": {
        "masters": {"hosts": {"master1": hosts["master1"]}},
        "workers": {"hosts": {name: hosts[name] for name in names if name != "master1"}}},
        "vars": {"ansible_port": 2222}}}
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump(inventory))
    # Extra vars: above the role's defaults and vars, which the playbook loads as vars_files.
    values = tmp_path / "values.json"
    values.write_text(json.dumps(dict(extra, out=str(tmp_path))))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"), ANSIBLE_NOCOLOR="1",
               PATH=BIN + os.pathsep + os.environ.get("PATH", ""))
    result = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", str(path), PLAYBOOK, "-e", "@%s" % values],
                            env=env, capture_output=True, text=True, timeout=300, check=False)
    return result


def systemd_words(line):
    """Split an ExecStart= value as systemd does for what we write: single quotes, C escapes, %% and $$."""
    words, word, quoted, i, started = [], [], False, 0, False
    escapes = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"'}
    while i < len(line):
        char = line[i]
        if char == "\\" and i + 1 < len(line):
            nxt = line[i + 1]
            if nxt == "x":
                word.append(chr(int(line[i + 2:i + 4], 16)))
                i += 4
            else:
                word.append(escapes[nxt])
                i += 2
            started = True
            continue
        if char == "'":
            quoted, started = not quoted, True
        elif char in " \t" and not quoted:
            if started:
                words.append("".join(word))
            word, started = [], False
        else:
            word.append(char)
            started = True
        i += 1
    if started:
        words.append("".join(word))
    return [w.replace("%%", "%").replace("$$", "$") for w in words]


def exec_start(unit):
    lines = unit.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("ExecStart="))
    end = start
    while lines[end].endswith("\\"):
        end += 1
    joined = " ".join(line[:-1] if line.endswith("\\") else line for line in lines[start:end + 1])
    return lines, start, end, systemd_words(joined[len("ExecStart="):])


def nft_check(path):
    if NFT is None or os.geteuid() != 0:
        pytest.skip("nft -c needs the nft command and root")
    result = subprocess.run([NFT, "-c", "-f", str(path)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """One render with the site's networks and openings and hostile values in a path and the environment."""
    tmp_path = tmp_path_factory.mktemp("perimeter")
    result = render(tmp_path, llm_cluster_admin_cidrs=["10.99.0.7/16", "fd00:99::/48"],
                    llm_cluster_client_cidrs=["192.168.50.0/24"],
                    llm_cluster_firewall_allow=[{"port": 9100, "sources": ["10.20.0.0/24"]},
                                                {"port": "7000-7001", "protocol": "udp"}],
                    ray_cluster_temp_dir=HOSTILE_DIR, ray_cluster_environment=HOSTILE_ENV)
    assert result.returncode == 0, result.stdout[-3000:]
    return tmp_path


def test_deny_by_default_table_for_every_member(rendered):
    for host, address in HOSTS.items():
        table = (rendered / host / "ray-firewall.nft").read_text()
        nft_check(rendered / host / "ray-firewall.nft")
        assert table.index("table inet llm_cluster\ndelete table inet llm_cluster\n") < table.index("table inet llm_cluster {")
        assert "elements = { 10.10.0.11, 10.10.0.12, 10.10.0.13 }" in table
        assert 'iifname "eth1" jump cluster' in table and "ip daddr %s jump cluster" % address in table
        assert "tcp dport { 22, 2222 } accept" in table
        assert "elements = { 10.99.0.0/16 }" in table and "elements = { fd00:99::/48 }" in table
        assert "ip saddr { 10.20.0.0/24 } tcp dport 9100 accept" in table and "udp dport 7000-7001 accept" in table
        # Clients reach the API port of the head only, where the engine serves it.
        assert ("ip saddr @clients_ipv4 tcp dport 8000 accept" in table) == (host == "master1"), host
        # Ray's client server is among the ports dropped on the other interfaces.
        guarded = next(line for line in table.splitlines() if line.strip().endswith("counter drop") and "dport" in line)
        assert "10001" in guarded and "6379" in guarded and "20000-20999" in guarded
        cluster = table.split("chain cluster {")[1]
        assert cluster.rstrip().rstrip("}").rstrip().rstrip("}").strip().endswith("counter drop")


def test_units_bind_to_the_guard_and_pin_the_client_server(rendered):
    guard = (rendered / "master1" / "llm-cluster-firewall.service").read_text()
    for line in ("PartOf=nftables.service", "ReloadPropagatedFrom=nftables.service", "After=nftables.service firewalld.service",
                 "ExecStart=/usr/sbin/nft \\\n    -f \\\n    /etc/llm_cluster/ray-firewall.nft",
                 "ExecStop=-/usr/sbin/nft \\\n    delete"):
        assert line in guard
    head = (rendered / "master1" / "ray.service").read_text()
    worker = (rendered / "worker1" / "ray.service").read_text()
    for unit in (head, worker):
        assert "BindsTo=llm-cluster-firewall.service\n" in unit
        assert "After=network-online.target llm-cluster-firewall.service\n" in unit
        assert "EnvironmentFile=/etc/llm_cluster/ray-auth.env\n" in unit
        assert "RAY_AUTH_TOKEN=" not in unit
    assert "--ray-client-server-port=10001" in exec_start(head)[3]
    assert "--address=10.10.0.11:6379" in exec_start(worker)[3]


def test_hostile_values_stay_one_argument_and_add_no_directive(rendered):
    unit = (rendered / "worker1" / "ray.service").read_text()
    lines, start, end, words = exec_start(unit)
    assert "--temp-dir=" + HOSTILE_DIR in words
    assert words[:3] == ["/opt/llm_cluster/ray/bin/ray", "start", "--block"]
    directives = [line.split("=", 1)[0] for line in lines if "=" in line and not line.startswith((" ", "#"))]
    assert "ExecStartPre" not in directives and directives.count("ExecStart") == 1
    assert 'Environment="PYTHONPATH=/opt/x\\nExecStartPre=/bin/true"' in unit
    assert 'Environment="WEIRD=a\\"b%%n$X"' in unit


# One render, a host per case: each fails (or not) on its own (llm_cluster_* values sit below the role's
# defaults, which only read them, so inventory host variables reach them).
CASES = {
    "master1": ({}, None),
    "worker1": ({"llm_cluster_client_cidrs": ["10.0.0.0/8 } ; flush ruleset"]},
                "ray_cluster_client_cidrs: '10.0.0.0/8 } ; flush ruleset' is not an IPv4/IPv6 address or CIDR"),
    "worker2": ({"llm_cluster_admin_cidrs": "10.0.0.0/8"}, "ray_cluster_admin_cidrs must be a list"),
    "worker3": ({"llm_cluster_firewall_allow": [{"port": "22; accept"}]},
                "ray_cluster_firewall_allow[0]: port '22; accept' is not a port"),
    "worker4": ({"llm_cluster_firewall": "none"}, None),
    "worker5": ({"llm_cluster_firewall": "firewalld"}, None),
}


def test_bad_perimeter_values_name_their_variable_and_none_keeps_an_empty_guard(tmp_path):
    result = render(tmp_path, host_vars={host: values for host, (values, dummy) in CASES.items()})
    output = " ".join(result.stdout.split())
    for host, (dummy, message) in CASES.items():
        if message:
            assert "failed: [%s] (item={'src': 'ray-firewall.nft.j2'" % host in output and message in output, host
        else:
            assert (tmp_path / host / "ray.service").exists(), host
    guard = (tmp_path / "worker4" / "llm-cluster-firewall.service").read_text()
    assert "llm_cluster_firewall is none" in guard and "nft" not in guard.split("[Service]")[1]
    assert "PartOf=nftables.service" in (tmp_path / "master1" / "llm-cluster-firewall.service").read_text()
    assert "BindsTo=firewalld.service" in (tmp_path / "worker5" / "llm-cluster-firewall.service").read_text()
    # systemd itself takes each kind of guard: a unit it refuses ("Service has no ExecStart=, ExecStop=, or
    # SuccessAction=. Refusing.", as it did the firewalld and none guards before) leaves Ray unable to start.
    for host in ("master1", "worker4", "worker5"):
        systemd_verify(tmp_path / host / "llm-cluster-firewall.service", tmp_path / "units")


SYSTEMD_ANALYZE = shutil.which("systemd-analyze")


def systemd_verify(path, stand_ins):
    """`systemd-analyze verify` of a unit file; the units it is bound to or ordered after are stand-ins."""
    if SYSTEMD_ANALYZE is None:
        pytest.skip("systemd-analyze verify needs systemd's tools")
    stand_ins.mkdir(exist_ok=True)
    for name in ("firewalld.service", "nftables.service"):
        (stand_ins / name).write_text("[Unit]\nDescription=stand-in\n[Service]\nExecStart=/bin/true\n")
    # The trailing separator keeps systemd's own search path after the stand-ins.
    env = dict(os.environ, SYSTEMD_UNIT_PATH=str(stand_ins) + os.pathsep, SYSTEMD_LOG_LEVEL="notice")
    result = subprocess.run([SYSTEMD_ANALYZE, "verify", "--man=no", str(path)], env=env, capture_output=True,
                            text=True, check=False)
    assert result.returncode == 0 and not result.stderr.strip(), (path, result.stderr)


GATE = {
    "auto": ["a: no firewall: firewalld is not running and there is no nft command"],
    "nftables": ["a: llm_cluster_firewall is nftables but there is no nft command",
                 "c: llm_cluster_firewall is nftables but there is no nft command"],
    "none": [],
}


def test_preflight_fails_a_node_without_a_firewall_before_any_change(tmp_path):
    """The prepare gate (the first step that could change a node) on what its probe reads, per setting."""
    with open(os.path.join(ROOT, "roles", "prepare", "tasks", "preflight.yml")) as handle:
        gate = [t for t in yaml.safe_load(handle) if t["name"].startswith("Preflight | Fail on a node without the firewall")]
    assert len(gate) == 1 and gate[0].pop("any_errors_fatal") is True
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", PATH=BIN + os.pathsep + os.environ.get("PATH", ""),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"))
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {
        "a": {"found": {"firewalld": False, "nft": ""}}, "b": {"found": {"firewalld": False, "nft": "/usr/sbin/nft"}},
        "c": {"found": {"firewalld": True, "nft": ""}}}}}))
    runs = {}
    for mode in GATE:
        play = [{"name": mode, "hosts": "all", "gather_facts": False, "connection": "local",
                 "vars": {"prepare_firewall": mode, "prepare_admin_cidrs": []},
                 "tasks": [{"name": "Stand in for what preflight_info read", "ansible.builtin.set_fact": {
                     "__prepare_node": {"host": "{{ inventory_hostname }}", "facts": {"firewall": "{{ found }}"}}}}] + gate}]
        (tmp_path / ("%s.yml" % mode)).write_text(yaml.safe_dump(play, sort_keys=False))
        runs[mode] = subprocess.Popen(
            [os.path.join(BIN, "ansible-playbook"), "-i", str(tmp_path / "hosts.yml"), str(tmp_path / ("%s.yml" % mode)),
             "-e", "ansible_python_interpreter=%s" % sys.executable],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for mode, messages in GATE.items():
        output = " ".join(runs[mode].communicate(timeout=300)[0].split())
        failed = {m.group(1) for m in re.finditer(r"(\S+) : ok=\d+ changed=\d+ unreachable=\d+ failed=1", output)}
        assert (runs[mode].returncode != 0) == bool(messages) and failed == ({"a"} if messages else set()), output[-3000:]
        for message in messages:
            assert message in output, mode
        if messages:
            listed = output.split("nothing was changed:", 1)[1].split("PLAY RECAP", 1)[0]
            assert "'b: " not in listed, mode
