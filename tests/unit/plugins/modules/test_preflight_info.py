# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""preflight_info: meminfo, the model directory, the cluster interface and port owners.

The interface and port tests run the module against this machine's own loopback interface and sockets
(real ``ip -j`` and ``/proc``); the failure paths of ``ip`` use its real messages.
"""

from __future__ import annotations

import os
import socket
from unittest.mock import MagicMock

import pytest

from ansible_collections.aihost.llm_cluster.plugins.modules import preflight_info
from ansible_collections.aihost.llm_cluster.tests.unit.plugins.modules.utils import run_module

# The head of /proc/meminfo in the layout of the kernel's Documentation/filesystems/proc.rst.
MEMINFO = """MemTotal:       16344972 kB
MemFree:        13634064 kB
MemAvailable:   14836172 kB
Buffers:            3656 kB
Cached:          1195708 kB
HugePages_Total:       0
Hugepagesize:       2048 kB
"""


def write(path, text):
    path.write_text(text)
    return str(path)


def test_meminfo_reads_total_and_available_in_bytes(tmp_path):
    memory = preflight_info.read_meminfo(write(tmp_path / "meminfo", MEMINFO))
    assert memory == {"total": 16344972 * 1024, "available": 14836172 * 1024}


def test_meminfo_without_memavailable_falls_back_to_memfree(tmp_path):
    # Kernels before 3.14 have no MemAvailable line.
    old = "".join(line + "\n" for line in MEMINFO.splitlines() if not line.startswith("MemAvailable"))
    assert preflight_info.read_meminfo(write(tmp_path / "meminfo", old))["available"] == 13634064 * 1024


def test_model_directory_files_size_and_free_space(tmp_path):
    model = tmp_path / "DeepSeek-R1"
    (model / "shards").mkdir(parents=True)
    (model / "config.json").write_bytes(b"{}")
    (model / "shards" / "model-00001.safetensors").write_bytes(b"\0" * 4096)
    facts = preflight_info.model_facts(str(model))
    assert facts["exists"] is True and facts["files"] == 2 and facts["size"] == 4098
    assert facts["disk_path"] == str(model) and facts["disk_free"] > 0


def test_missing_model_directory_measures_the_nearest_existing_parent(tmp_path):
    facts = preflight_info.model_facts(str(tmp_path / "models" / "not-yet"))
    assert facts["exists"] is False and facts["files"] == 0 and facts["size"] == 0
    assert facts["disk_path"] == str(tmp_path) and facts["disk_free"] > 0


def test_no_model_path_measures_nothing():
    assert preflight_info.model_facts("") == {"path": "", "exists": False, "files": 0, "size": 0,
                                              "disk_path": None, "disk_free": None}


@pytest.fixture
def held_port():
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    yield sock.getsockname()[1]
    sock.close()


def free_port():
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def test_auto_interface_is_the_one_routing_to_the_head_and_ports_name_their_owners(held_port):
    free = free_port()
    result = run_module(preflight_info.main, dict(interface="auto", head_address="127.0.0.1", ports=[held_port, free]),
                        check_mode=True)
    assert result["changed"] is False
    iface = result["interface"]
    assert iface["requested"] == "auto" and iface["name"] == "lo" and iface["error"] is None
    assert iface["exists"] is True and iface["up"] is True
    assert iface["address"] == "127.0.0.1" and "127.0.0.1" in iface["ipv4"]
    assert "lo" not in iface["available"]
    held, unused = result["ports"]
    assert held["port"] == held_port and held["free"] is False
    assert os.getpid() in [owner["pid"] for owner in held["owners"]]
    assert unused == {"port": free, "free": True, "owners": []}
    assert result["kernel"] == os.uname().release
    assert result["memory"]["total"] >= result["memory"]["available"] > 0


def test_an_interface_that_does_not_exist_is_reported_not_fatal():
    result = run_module(preflight_info.main, dict(interface="llmc-none0"))
    iface = result["interface"]
    assert iface["name"] == "llmc-none0" and iface["exists"] is False and iface["up"] is False
    assert iface["address"] is None and 'Device "llmc-none0" does not exist.' in iface["error"]


def ip_module(route):
    """A module whose ``ip -j route get`` answers ``route`` (rc, stdout, stderr)."""
    module = MagicMock()
    module.get_bin_path.return_value = "/usr/sbin/ip"
    module.run_command.return_value = route
    return module


def test_no_route_to_the_head_is_an_error_naming_the_head():
    # iproute2's answer when no route leads to the address.
    module = ip_module((2, "", "RTNETLINK answers: Network is unreachable\n"))
    facts = preflight_info.interface_facts(module, "auto", "10.20.0.1")
    assert facts["name"] is None and facts["exists"] is False
    assert facts["error"] == "no route to 10.20.0.1 (RTNETLINK answers: Network is unreachable)"
    argv = module.run_command.call_args[0][0]
    assert argv == ["/usr/sbin/ip", "-j", "route", "get", "10.20.0.1"]
    assert module.run_command.call_args[1]["environ_update"] == {"LANGUAGE": "C", "LC_ALL": "C"}


def test_without_a_head_the_default_route_decides_and_its_absence_is_reported():
    # `ip -j route show default` with no default route prints an empty list.
    module = ip_module((0, "[]\n", ""))
    facts = preflight_info.interface_facts(module, "", "")
    assert module.run_command.call_args[0][0] == ["/usr/sbin/ip", "-j", "route", "show", "default"]
    assert facts["error"] == "no route by default (empty)"


SYSTEM = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "system")


def capture(name):
    """A capture of the real tool, byte-exact (tests/fixtures/system/README.md)."""
    with open(os.path.join(SYSTEM, name), encoding="utf-8") as handle:
        return handle.read()


def firewall_module(active_rc, nft, nft_answer=(1, "", ""), firewall_cmd_answer=(252, "", "FirewallD is not running\n"),
                    zones=None):
    """systemctl answers is-active with ``active_rc``; nft (at ``nft``) answers ``nft_answer``, firewall-cmd
    ``--list-rich-rules`` ``firewall_cmd_answer`` and its zone queries ``zones`` ({option: answer}; with
    ``--permanent`` the answer of ``"--permanent " + option`` where there is one)."""
    module = MagicMock()
    paths = {"systemctl": "/usr/bin/systemctl", "nft": nft, "firewall-cmd": "/usr/bin/firewall-cmd"}
    module.get_bin_path.side_effect = lambda name, opt_dirs=None: paths[name]

    def answer(argv, **kwargs):
        if argv[0] == "/usr/bin/systemctl":
            return active_rc, "", ""
        if argv[0] == "/usr/bin/firewall-cmd":
            if argv[-1] == "--list-rich-rules":
                return firewall_cmd_answer
            option = argv[-1].split("=")[0]
            if "--permanent" in argv and "--permanent " + option in (zones or {}):
                option = "--permanent " + option
            return (zones or {}).get(option, (252, "", "FirewallD is not running\n"))
        return nft_answer
    module.run_command.side_effect = answer
    return module


# firewalld 1.3.3's answers (tests/fixtures/system/README.md).
DEFAULT_ZONE = {"--get-default-zone": (0, capture("firewall-cmd-get-default-zone.txt"), "")}
UNBOUND = {"--get-zone-of-interface": (2, capture("firewall-cmd-get-zone-of-interface-unbound.txt"),
                                       capture("firewall-cmd-get-zone-of-interface-unbound.stderr.txt"))}
INTERNAL = {"--get-zone-of-interface": (0, capture("firewall-cmd-get-zone-of-interface-internal.txt"), "")}


@pytest.mark.parametrize("zone, bound, expected", [
    # Neither named nor bound: the default zone holds the rules and takes the interface's traffic.
    ("", UNBOUND, ("public", "public")),
    ("trusted", UNBOUND, ("trusted", "public")),
    ("", INTERNAL, ("public", "internal")),
    ("internal", INTERNAL, ("internal", "internal")),
])
def test_with_firewalld_the_rules_zone_and_the_cluster_interface_s_zone_are_read(zone, bound, expected):
    module = firewall_module(0, "/usr/sbin/nft", firewall_cmd_answer=(0, "", ""), zones=dict(DEFAULT_ZONE, **bound))
    facts = preflight_info.firewall_facts(module, zone, "eth0")
    assert (facts["zone"], facts["interface_zone"]) == expected
    assert ["/usr/bin/firewall-cmd", "--get-zone-of-interface=eth0"] in [c[0][0] for c in module.run_command.call_args_list]


@pytest.mark.parametrize("active_rc, nft, expected", [
    # firewalld runs: its zone's rich rules are what admits a member (here none can be listed).
    (0, "/usr/sbin/nft", {"firewalld": True, "nft": "/usr/sbin/nft", "members": None, "members_from": None,
                          "error": "firewall-cmd --list-rich-rules: FirewallD is not running", "zone": None,
                          "interface_zone": None, "source_zones": [
                              {"zone": None, "target": None, "sources": [], "ipsets": {}, "permanent": False,
                               "error": "firewall-cmd --list-all-zones: FirewallD is not running"},
                              {"zone": None, "target": None, "sources": [], "ipsets": {}, "permanent": True,
                               "error": "firewall-cmd --permanent --list-all-zones: FirewallD is not running"}]}),
    # systemctl is-active exits 3 for an inactive or unknown unit.
    (3, None, {"firewalld": False, "nft": "", "members": None, "members_from": None, "error": None, "zone": None,
               "interface_zone": None, "source_zones": None}),
    (4, "/sbin/nft", {"firewalld": False, "nft": "/sbin/nft", "members": None, "members_from": None, "error": None,
                      "zone": None, "interface_zone": None, "source_zones": None}),
])
def test_firewall_is_a_running_firewalld_or_the_nft_command(active_rc, nft, expected):
    module = firewall_module(active_rc, nft, (1, capture("nft-json-list-set-no-table.txt"),
                                              capture("nft-json-list-set-no-table.stderr.txt")))
    assert preflight_info.firewall_facts(module) == expected
    assert module.run_command.call_args_list[0][0][0] == ["/usr/bin/systemctl", "is-active", "--quiet", "firewalld.service"]


def test_no_systemctl_means_no_firewalld():
    module = MagicMock()
    module.get_bin_path.side_effect = lambda name, opt_dirs=None: None
    assert preflight_info.firewall_facts(module) == {"firewalld": False, "nft": "", "members": None, "members_from": None,
                                                     "error": None, "zone": None, "interface_zone": None,
                                                     "source_zones": None}
    assert module.run_command.call_count == 0


def test_the_members_this_collection_s_table_admits_are_read_with_nft_json():
    module = firewall_module(3, "/usr/sbin/nft", (0, capture("nft-json-list-set-members.txt"), ""))
    facts = preflight_info.firewall_facts(module)
    assert facts["members"] == ["172.27.0.2", "172.27.0.3"] and facts["members_from"] == "nftables"
    assert module.run_command.call_args_list[-1][0][0] == ["/usr/sbin/nft", "-j", "list", "set", "inet", "llm_cluster", "members"]
    assert module.get_bin_path.call_args_list[-1][1] == {"opt_dirs": ["/usr/sbin", "/sbin"]}


def test_an_empty_members_set_admits_no_one_and_a_missing_table_is_none():
    # nft leaves "elem" out of an empty set: the table is there and admits nobody.
    assert preflight_info.nft_set_elements(capture("nft-json-list-set-members-empty.txt")) == []
    module = firewall_module(3, "/usr/sbin/nft", (1, "", capture("nft-json-list-set-no-table.stderr.txt")))
    assert preflight_info.firewall_facts(module)["members"] is None


def test_with_firewalld_the_members_are_the_sources_its_zone_accepts_on_every_port():
    # firewalld 1.3.3's own listing (tests/fixtures/system/README.md): two members and two admin networks as the
    # Ray step writes them; the API port from a client network, a port from anywhere, NOT and ipset rules do not
    # admit a member.
    module = firewall_module(0, "/usr/sbin/nft", firewall_cmd_answer=(0, capture("firewall-cmd-list-rich-rules.txt"), ""))
    assert preflight_info.firewall_facts(module, "trusted-cluster") == {
        "firewalld": True, "nft": "/usr/sbin/nft", "members": ["10.20.0.0/16", "172.19.0.2", "172.19.0.9", "fd00:20::/64"],
        "members_from": "firewalld", "error": None, "zone": "trusted-cluster", "interface_zone": None,
        "source_zones": [{"zone": None, "target": None, "sources": [], "ipsets": {}, "permanent": False,
                          "error": "firewall-cmd --list-all-zones: FirewallD is not running"},
                         {"zone": None, "target": None, "sources": [], "ipsets": {}, "permanent": True,
                          "error": "firewall-cmd --permanent --list-all-zones: FirewallD is not running"}]}
    assert ["/usr/bin/firewall-cmd", "--zone=trusted-cluster", "--list-rich-rules"] in [c[0][0] for c in module.run_command.call_args_list]
    # No zone: firewalld's default zone, as the Ray step's rules without ray_cluster_firewalld_zone.
    module = firewall_module(0, "/usr/sbin/nft", firewall_cmd_answer=(0, capture("firewall-cmd-list-rich-rules-empty.txt"), ""))
    assert preflight_info.firewall_facts(module)["members"] == []
    assert ["/usr/bin/firewall-cmd", "--list-rich-rules"] in [c[0][0] for c in module.run_command.call_args_list]


def test_a_zone_firewalld_does_not_have_gives_no_members_and_firewall_cmd_s_message():
    module = firewall_module(0, "/usr/sbin/nft", firewall_cmd_answer=(
        112, capture("firewall-cmd-list-rich-rules-invalid-zone.txt"), capture("firewall-cmd-list-rich-rules-invalid-zone.stderr.txt")))
    facts = preflight_info.firewall_facts(module, "nosuch")
    assert facts["members"] is None and facts["members_from"] is None
    assert facts["error"] == "firewall-cmd --zone=nosuch --list-rich-rules: Error: INVALID_ZONE: nosuch"


def test_firewalld_without_its_command_says_so():
    module = firewall_module(0, "/usr/sbin/nft")
    module.get_bin_path.side_effect = lambda name, opt_dirs=None: {"systemctl": "/usr/bin/systemctl"}.get(name)
    assert preflight_info.firewall_facts(module)["error"] == "firewalld runs but there is no firewall-cmd command"


def test_no_zone_of_a_fresh_firewalld_binds_a_source():
    # firewalld 1.3.3's listing of every zone, none with a source (tests/fixtures/system/README.md).
    assert preflight_info.list_all_zones_sources(capture("firewall-cmd-list-all-zones-default.txt")) == []


def test_the_zones_that_bind_sources_are_read_with_their_targets_and_ipsets():
    # firewalld 1.3.3's own listing with five zones that bind sources: an address, a network, an ipset, a MAC
    # address and an IPv6 network; the public zone's tab-indented rich rules are not settings.
    listing = capture("firewall-cmd-list-all-zones-sources.txt")
    assert preflight_info.list_all_zones_sources(listing) == [
        {"zone": "block", "target": "%%REJECT%%", "sources": ["ipset:blk"]},
        {"zone": "drop", "target": "DROP", "sources": ["172.19.0.9"]},
        {"zone": "internal", "target": "default", "sources": ["fd00:20::/64"]},
        {"zone": "trusted", "target": "ACCEPT", "sources": ["203.0.113.0/24"]},
        {"zone": "work", "target": "default", "sources": ["AA:BB:CC:DD:EE:FF"]}]
    module = firewall_module(0, "/usr/sbin/nft", firewall_cmd_answer=(0, "", ""), zones=dict(
        DEFAULT_ZONE, **{"--list-all-zones": (0, listing, ""),
                         "--get-entries": (0, capture("firewall-cmd-ipset-get-entries.txt"), ""),
                         "--permanent --list-all-zones": (0, capture("firewall-cmd-list-all-zones-default.txt"), "")}))
    zones = preflight_info.firewall_facts(module, "", "eth0")["source_zones"]
    assert zones[0] == {"zone": "block", "target": "%%REJECT%%", "sources": ["ipset:blk"],
                        "ipsets": {"blk": ["198.51.100.0/24", "172.19.0.2"]}, "permanent": False, "error": None}
    assert [z["ipsets"] for z in zones[1:]] == [{}] * 4 and [z["error"] for z in zones] == [None] * 5
    assert ["/usr/bin/firewall-cmd", "--ipset=blk", "--get-entries"] in [c[0][0] for c in module.run_command.call_args_list]


def test_the_permanent_configuration_s_source_zones_are_read_too():
    # firewalld 1.3.3 with two sources added with --permanent only (no reload): the running configuration binds
    # none (tests/fixtures/system/README.md).
    module = firewall_module(0, "/usr/sbin/nft", firewall_cmd_answer=(0, "", ""), zones={
        "--list-all-zones": (0, capture("firewall-cmd-list-all-zones-default.txt"), ""),
        "--permanent --list-all-zones": (0, capture("firewall-cmd-permanent-list-all-zones-sources.txt"), ""),
        "--permanent --get-entries": (0, capture("firewall-cmd-permanent-ipset-get-entries.txt"), "")})
    assert preflight_info.firewall_facts(module)["source_zones"] == [
        {"zone": "block", "target": "%%REJECT%%", "sources": ["ipset:blk"], "ipsets": {"blk": ["10.9.9.0/24"]},
         "permanent": True, "error": None},
        {"zone": "drop", "target": "DROP", "sources": ["172.19.0.9"], "ipsets": {}, "permanent": True, "error": None}]
    calls = [c[0][0] for c in module.run_command.call_args_list]
    assert ["/usr/bin/firewall-cmd", "--permanent", "--list-all-zones"] in calls
    assert ["/usr/bin/firewall-cmd", "--permanent", "--ipset=blk", "--get-entries"] in calls


def test_an_ipset_that_cannot_be_read_is_named_with_firewall_cmd_s_message():
    listing = "block (active)\n  target: %%REJECT%%\n  sources: ipset:nosuch 10.9.0.0/16\n"
    module = firewall_module(0, "/usr/sbin/nft", firewall_cmd_answer=(0, "", ""), zones={
        "--list-all-zones": (0, listing, ""),
        "--get-entries": (135, capture("firewall-cmd-ipset-get-entries-invalid.txt"),
                          capture("firewall-cmd-ipset-get-entries-invalid.stderr.txt"))})
    assert preflight_info.firewall_facts(module)["source_zones"] == [
        {"zone": "block", "target": "%%REJECT%%", "sources": ["ipset:nosuch", "10.9.0.0/16"], "ipsets": {},
         "permanent": permanent, "error": "firewall-cmd %s--ipset=nosuch --get-entries: Error: INVALID_IPSET: nosuch"
         % ("--permanent " if permanent else "")} for permanent in (False, True)]


@pytest.mark.parametrize("line, expected", [
    ('rule priority="-10" family="ipv4" source address="10.0.0.7" accept', ["10.0.0.7"]),
    ('rule family="ipv4" source address="10.0.0.7" destination address="10.0.0.1" accept', []),
    ('rule family="ipv4" source address="10.0.0.7" log prefix="x" level="info" accept', []),
    ('rule family="ipv4" source address="10.0.0.7" reject', []),
    ('rule family="ipv4" source address="10.0.0.7" drop', []),
    ('rule family="ipv4" source address="10.0.0.7" accept\nrule family="ipv4" source address="10.0.0.7" accept extra', ["10.0.0.7"]),
    ("", []), ("FirewallD is not running", []),
])
def test_only_a_rule_that_accepts_a_source_on_every_port_admits_it(line, expected):
    assert preflight_info.rich_rule_sources(line) == expected


@pytest.mark.parametrize("text, expected", [
    # A set with counters lists element objects (libnftables-json(5), ELEM): their "val" is the address.
    ('{"nftables": [{"set": {"name": "members", "elem": [{"elem": {"val": "10.0.0.2", "counter": {"packets": 1}}}, '
     '"10.0.0.1"]}}]}', ["10.0.0.1", "10.0.0.2"]),
    ("", None), ("not json", None), ('{"nftables": [{"metainfo": {}}]}', None), ("[1, 2]", None),
    ('{"nftables": [{"set": {"elem": [{"prefix": {"addr": "10.0.0.0", "len": 8}}, 7]}}]}', []),
])
def test_the_set_parser_takes_addresses_and_nothing_else(text, expected):
    assert preflight_info.nft_set_elements(text) == expected
