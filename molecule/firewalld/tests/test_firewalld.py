# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The firewalld path on two CPU-only nodes that run Debian's firewalld (1.3.3) from before the first deploy, the head
on firewalld's nftables backend and the worker on its iptables backend.

The converge (prepare and Ray) passed its preflight although each member's zone rejected the other's probe
("No route to host": no rule of ours admitted it yet); its second run changed nothing (Molecule's idempotence).
The tests run in order: what the deploy left, a non-member's scan, check mode, a zone firewalld does not have,
a cluster interface in another zone than the rules, zones that bind sources, a worker replaced at a new address,
the teardown.
"""

from __future__ import annotations

import importlib.util
import json
import os

import pytest
import testinfra

testinfra_hosts = ["ansible://fwd-master1"]

SCENARIO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
NAMES = ["fwd-master1", "fwd-worker1"]
UNIT = {"fwd-master1": "llm-cluster-ray-head", "fwd-worker1": "llm-cluster-ray-worker"}
# firewalld's backend on each node (molecule.yml, prepare.yml), and how each shows a member's rule in the kernel.
BACKEND = {"fwd-master1": "nftables", "fwd-worker1": "iptables"}
KERNEL_RULES = {"nftables": ("nft list chain inet firewalld filter_IN_public_allow", "ip saddr %s accept"),
                "iptables": ("iptables -S IN_public_allow", "-A IN_public_allow -s %s/32 -j ACCEPT")}
PY = "/opt/llm_cluster/ray/bin/python"
AUTH_ENV = "/etc/llm_cluster/ray-auth.env"
RECORD = "/etc/llm_cluster/ray-firewalld-rules.json"
MEMBER = 'rule family="ipv4" source address="%s" accept'
# llm_cluster_client_cidrs (molecule.yml): the API port, on the head only.
CLIENTS = 'rule family="ipv4" source address="192.0.2.0/24" port port="8000" protocol="tcp" accept'
_SPEC = importlib.util.spec_from_file_location("perimeter", os.path.join(os.path.dirname(SCENARIO), "shared", "perimeter.py"))
perimeter = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(perimeter)
_SPEC = importlib.util.spec_from_file_location("replace", os.path.join(os.path.dirname(SCENARIO), "shared", "replace.py"))
replace = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(replace)

MARK = "llm_cluster-result: "
ALIVE = r'''
import json, sys, ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
print("llm_cluster-result: " + json.dumps(sorted(n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"])))
'''


@pytest.fixture(scope="module")
def nodes():
    return {name: testinfra.get_host("ansible://%s?ansible_inventory=%s" % (name, INVENTORY)) for name in NAMES}


@pytest.fixture(scope="module")
def addresses(nodes):
    return {name: node.check_output("ip -4 -o addr show dev eth0").split()[3].split("/")[0] for name, node in nodes.items()}


def alive(nodes, addresses):
    """The addresses of the Ray nodes alive, seen from the head by a driver with the cluster's token."""
    out = nodes["fwd-master1"].run("set -a; . %s; set +a; runuser -u llm-cluster -- %s - %s:6379 <<'EOF'\n%s\nEOF"
                                   % (AUTH_ENV, PY, addresses["fwd-master1"], ALIVE))
    lines = [line[len(MARK):] for line in out.stdout.splitlines() if line.startswith(MARK)]
    assert out.rc == 0 and lines, (out.stdout[-2000:], out.stderr[-2000:])
    return json.loads(lines[-1])


def rich_rules(node, permanent=False):
    return sorted(node.check_output("firewall-cmd %s--list-rich-rules" % ("--permanent " if permanent else "")).splitlines())


def wanted(name, addresses):
    """The rich rules of a node's zone: every member on every port, the clients on the head's API port."""
    return sorted([MEMBER % address for address in addresses.values()] + ([CLIENTS] if name == "fwd-master1" else []))


def failure_text(result):
    """A run's output on one line, the quotes of Ansible's YAML message lists undone (an apostrophe is doubled)."""
    return " ".join(result.stdout.replace("''", "'").split())


def main_pid(node, unit):
    return node.check_output("systemctl show -p MainPID --value %s" % unit)


def test_ray_formed_behind_firewalld_with_the_guard_bound_to_it(nodes, addresses):
    for name, node in nodes.items():
        assert node.check_output("firewall-cmd --state") == "running"
        assert node.check_output("sed -n 's/^FirewallBackend=//p' /etc/firewalld/firewalld.conf") == BACKEND[name]
        assert node.check_output("systemctl is-active llm-cluster-firewall %s" % UNIT[name]).split() == ["active", "active"]
        guard = node.file("/etc/systemd/system/llm-cluster-firewall.service").content_string
        assert "BindsTo=firewalld.service" in guard and "ExecStart=/bin/true" in guard
        # Nothing of this collection's nftables path: firewalld holds the rules.
        assert node.run("nft list table inet llm_cluster").rc != 0
    assert alive(nodes, addresses) == sorted(addresses.values())


def test_each_zone_admits_the_members_on_every_port_and_the_rules_are_recorded(nodes, addresses):
    for name, node in nodes.items():
        want = wanted(name, addresses)
        assert rich_rules(node) == want and rich_rules(node, permanent=True) == want, name
        record = node.file(RECORD)
        assert record.mode == 0o600 and record.user == "root"
        assert json.loads(record.content_string) == {"rules": [{"rule": rule, "zone": ""} for rule in want]}
        # In the kernel, through the node's backend: each member's address accepted on every port.
        command, line = KERNEL_RULES[BACKEND[name]]
        kernel = node.check_output(command)
        assert all(line % address in kernel for address in addresses.values()), (name, kernel)


def test_a_non_member_reaches_no_port_of_ours(nodes, addresses):
    # Ray listens beyond loopback on both nodes: the head's GCS and client server, each node's raylet.
    head = nodes["fwd-master1"].check_output("ss -Htln")
    assert ":6379 " in head and ":10001 " in head
    for name, node in nodes.items():
        beyond = [line.split()[3] for line in node.check_output("ss -Htln").splitlines()
                  if not line.split()[3].startswith(("127.", "[::1]", "[::ffff:127.")) and not line.split()[3].endswith(":22")]
        assert beyond, (name, node.check_output("ss -Htlnp"))
    with perimeter.Outsider("llmc-firewalld-outsider", "fwd-master1") as outsider:
        scan = outsider.scan(addresses.values())
    for name, address in addresses.items():
        sshd = nodes[name].run("ss -Htln 'sport = :22'").stdout.strip() != ""
        # firewalld's public zone keeps its ssh service; it rejects the rest (an ICMP the kernel rate-limits, so
        # most connects go unanswered): no port of ours is reachable. On the nftables backend the reject is an
        # admin-prohibited (EHOSTUNREACH) and nothing refuses; on the iptables backend it is a port-unreachable,
        # which a connect reads as refused, as it reads a closed port's reset. The scan reads the ICMP answers
        # too: every refusal there was the zone's reject, no port reached the node's TCP stack to be reset.
        assert scan[address]["open"] == ([22] if sshd else []), (name, scan[address]["open"])
        assert scan[address]["reset"] == [], (name, scan[address]["reset"][:20])
        if BACKEND[name] == "nftables":
            assert scan[address]["refused"] == [], (name, scan[address]["refused"][:20])
            assert set(scan[address]["unreachable"]) <= {"admin-prohibited"}, (name, scan[address]["unreachable"])
        else:
            iptables_rejects = nodes[name].check_output("iptables -S IN_public")
            assert "-A IN_public -j REJECT --reject-with icmp-port-unreachable" in iptables_rejects, iptables_rejects
            assert scan[address]["refused"] and scan[address]["unreachable"].get("port", 0) >= len(
                scan[address]["refused"]), (name, scan[address]["unreachable"], len(scan[address]["refused"]))
        assert set(scan[address]["errors"].values()) <= {"EHOSTUNREACH"}, (name, scan[address]["errors"])


def test_check_mode_changes_nothing(nodes):
    result, changed = replace.playbook(INVENTORY, os.path.join(SCENARIO, "converge.yml"), "--check", "--diff")
    assert result.returncode == 0, result.stdout[-3000:]
    assert changed == {name: 0 for name in NAMES}, changed


def test_a_zone_firewalld_does_not_have_fails_the_preflight_naming_it_before_any_change(nodes, addresses):
    zone = "llmc-nosuch; reboot"
    result, changed = replace.playbook(INVENTORY, os.path.join(SCENARIO, "converge.yml"),
                                       "-e", json.dumps({"ray_cluster_firewalld_zone": zone}))
    output = failure_text(result)
    assert result.returncode != 0
    assert "No firewall the Ray step can close the cluster interface with; nothing was changed:" in output
    for name in NAMES:
        assert ("%s: firewalld cannot list the rich rules of the zone the Ray step writes to (firewall-cmd "
                "--zone=%s --list-rich-rules: Error: INVALID_ZONE: %s); set ray_cluster_firewalld_zone" % (name, zone, zone)) \
            in output, output[-3000:]
    assert changed == {name: 0 for name in NAMES}, changed
    for name, node in nodes.items():
        assert rich_rules(node) == wanted(name, addresses)


def test_a_cluster_interface_in_another_zone_fails_the_preflight_naming_the_zone_to_set(nodes, addresses):
    # As NetworkManager binds a connection to a zone: the worker's eth0 taken by the internal zone (runtime only),
    # where the rules of the Ray step, in the default zone, do not apply. The worker is replaced next.
    worker = nodes["fwd-worker1"]
    worker.check_output("firewall-cmd --zone=internal --change-interface=eth0")
    try:
        result, changed = replace.playbook(INVENTORY, os.path.join(SCENARIO, "converge.yml"))
    finally:
        worker.check_output("firewall-cmd --zone=internal --remove-interface=eth0")
    output = failure_text(result)
    assert result.returncode != 0
    assert "No firewall the Ray step can close the cluster interface with; nothing was changed:" in output
    assert ("fwd-worker1: eth0 is in firewalld zone internal, but the Ray step would write its rules to zone public, "
            "which does not see that interface's traffic; set ray_cluster_firewalld_zone: internal") in output, output[-3000:]
    assert "fwd-master1: eth0 is in firewalld zone" not in output
    assert changed == {name: 0 for name in NAMES}, changed


def test_zones_that_bind_sources_fail_the_preflight_when_they_refuse_a_member_or_accept_non_members(nodes, addresses):
    # firewalld hands a packet to the zone of its source before the zone of its interface (runtime only, undone
    # after): on the head the drop zone takes the worker's address, so the members' rules in the default zone
    # never see its traffic; on the worker the trusted zone accepts every port from a network that is neither a
    # member nor an admin network. A blocklist of non-members (the head's block zone) harms nothing. On the
    # worker the drop zone takes the head's address in the permanent configuration only: not running until
    # firewalld's next reload or the node's boot, which would then cut the head off.
    head, worker = nodes["fwd-master1"], nodes["fwd-worker1"]
    worker_address, head_address = addresses["fwd-worker1"], addresses["fwd-master1"]
    changes = [(head, "--zone=drop --add-source=%s" % worker_address), (head, "--zone=block --add-source=198.51.100.0/24"),
               (worker, "--zone=trusted --add-source=203.0.113.0/24"),
               (worker, "--permanent --zone=drop --add-source=%s" % head_address)]
    try:
        for node, change in changes:
            node.check_output("firewall-cmd %s" % change)
        result, changed = replace.playbook(INVENTORY, os.path.join(SCENARIO, "converge.yml"))
    finally:
        for node, change in changes:
            node.run("firewall-cmd %s" % change.replace("--add-source", "--remove-source"))
    output = failure_text(result)
    assert result.returncode != 0
    assert "No firewall the Ray step can close the cluster interface with; nothing was changed:" in output
    assert ("fwd-master1: firewalld zone drop takes the traffic of member fwd-worker1 (%s, source %s) before zone "
            "public, where the Ray step admits the members, and refuses what it does not open (target DROP): Ray and "
            "the engine could not reach this node from fwd-worker1; take it out (firewall-cmd --zone=drop "
            "--remove-source=%s, and again with --permanent)" % (worker_address, worker_address, worker_address)) \
        in output, output[-3000:]
    assert ("fwd-worker1: firewalld zone trusted accepts every port (target ACCEPT) from 203.0.113.0/24 before the "
            "rules of the Ray step see it, and that is not only the members and llm_cluster_admin_cidrs: hosts there "
            "would reach Ray and the engine; take it out (firewall-cmd --zone=trusted --remove-source=203.0.113.0/24, "
            "and again with --permanent), or list the network in llm_cluster_admin_cidrs to let it in on purpose") \
        in output, output[-3000:]
    assert ("fwd-worker1: firewalld zone drop takes the traffic of member fwd-master1 (%s, source %s) before zone "
            "public, where the Ray step admits the members, and refuses what it does not open (target DROP): Ray and "
            "the engine could not reach this node from fwd-master1; take it out (firewall-cmd --permanent --zone=drop "
            "--remove-source=%s); this is firewalld's permanent configuration, not running yet: its next reload or "
            "the node's boot makes it so" % (head_address, head_address, head_address)) in output, output[-3000:]
    assert "zone block" not in output
    assert changed == {name: 0 for name in NAMES}, changed
    for name, node in nodes.items():
        assert rich_rules(node) == wanted(name, addresses)
        assert "sources: " not in node.check_output("firewall-cmd --get-active-zones")
        assert node.check_output("firewall-cmd --permanent --zone=drop --list-sources") == ""


def test_a_worker_replaced_at_a_new_address_is_pending_then_admitted_and_the_old_rule_goes(nodes, addresses, tmp_path):
    # ./deploy.sh replace-node fwd-worker1 fwd-worker1 with the old machine dead: its container removed, a new
    # one made from the scenario's platform (another container holds the freed address meanwhile) and prepared
    # as at the start, firewalld running on it.
    old_address = addresses["fwd-worker1"]
    head_pid = main_pid(nodes["fwd-master1"], UNIT["fwd-master1"])
    replace.renew(SCENARIO, "fwd-worker1", INVENTORY, new_address=True)
    new_address = nodes["fwd-worker1"].check_output("ip -4 -o addr show dev eth0").split()[3].split("/")[0]
    assert new_address != old_address
    result, changed = replace.replace_node(INVENTORY, "fwd-worker1", "fwd-worker1", "--tags", "prepare,ray",
                                           "-e", "llm_cluster_artifacts_dir=%s" % tmp_path)
    assert result.returncode == 0, result.stdout[-3000:]
    # The head's zone rejected the new address's probe ("No route to host"): pending, not a site firewall.
    with open(os.path.join(str(tmp_path), "preflight-fwd-worker1.json"), encoding="utf-8") as handle:
        reachability = [(c["ok"], c["detail"]) for c in json.load(handle)["checks"] if c["check"] == "reachability"]
    assert reachability == [(True, "reaches 0 peer(s) on port 6379; not yet fwd-master1, whose firewall admits this "
                                   "node's %s only once the Ray step writes its rules (Ray's join then proves the "
                                   "path)" % new_address)]
    addresses["fwd-worker1"] = new_address
    # Both zones admit the head and the new address; on the head the old address's rule was removed (runtime
    # and permanent) because its record listed it, and the record follows.
    removed = [line for line in result.stdout.splitlines() if line.startswith("changed: [fwd-master1]")
               and 'source address="%s" accept' % old_address in line]
    assert len(removed) == 1 and "default zone" in removed[0], removed
    for name, node in nodes.items():
        want = wanted(name, addresses)
        assert rich_rules(node) == want and rich_rules(node, permanent=True) == want, name
        assert [entry["rule"] for entry in json.loads(node.file(RECORD).content_string)["rules"]] == want
    # The head's Ray kept running.
    assert main_pid(nodes["fwd-master1"], UNIT["fwd-master1"]) == head_pid
    assert alive(nodes, addresses) == sorted(addresses.values())


def test_teardown_removes_every_rule_it_added_and_leaves_firewalld_running(nodes):
    result, changed = replace.playbook(INVENTORY, os.path.join(replace.ROOT, "playbooks", "teardown.yml"),
                                       "--tags", "ray")
    assert result.returncode == 0, result.stdout[-3000:]
    assert all(changed[name] > 0 for name in NAMES), changed
    for node in nodes.values():
        assert rich_rules(node) == [] and rich_rules(node, permanent=True) == []
        assert not node.file(RECORD).exists
        assert node.run("pgrep -f '[/]opt/llm_cluster/ray/'").rc == 1
        assert node.check_output("firewall-cmd --state") == "running"
    again, changed = replace.playbook(INVENTORY, os.path.join(replace.ROOT, "playbooks", "teardown.yml"), "--tags", "ray")
    assert again.returncode == 0 and changed == {name: 0 for name in NAMES}, changed
