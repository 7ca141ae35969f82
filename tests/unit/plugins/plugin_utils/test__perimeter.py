# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""systemd escaping of unit lines and the firewall's address sets.

How systemd reads an escaped line back is checked against systemd itself in the ray Molecule scenario
(test_hostile_values_stay_one_argument); here the written form is pinned down.
"""

from __future__ import annotations

import json

import pytest

from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _perimeter as p


def test_plain_words_stay_as_they_are():
    assert p.systemd_exec_args(["/opt/ray/bin/ray", "start", "--port=6379", "--temp-dir=/var/lib/x"], " ") == \
        "/opt/ray/bin/ray start --port=6379 --temp-dir=/var/lib/x"


@pytest.mark.parametrize("value, written", [
    ("$(id)", "'$$(id)'"),
    ("${HOME}", "'$${HOME}'"),
    ("$HOME", "$$HOME"),
    ("50%", "50%%"),
    ("%n", "%%n"),
    ("a b", "'a b'"),
    ("it's", "'it\\'s'"),
    ('{"NPU": 8}', "'{\"NPU\": 8}'"),
    ("back\\slash", "'back\\\\slash'"),
    (";", "';'"),
    ("", "''"),
    ("tab\there", "'tab\\there'"),
    ("\x01\x7f", "'\\x01\\x7f'"),
])
def test_every_special_character_is_escaped(value, written):
    assert p.systemd_word(value) == written


def test_a_newline_cannot_start_a_directive():
    text = p.systemd_exec_args(["/bin/vllm", "serve", "/m\nExecStartPre=/bin/touch /tmp/pwned"])
    lines = text.split("\n")
    # Every line but the last continues the command; none starts a directive.
    assert all(line.endswith("\\") for line in lines[:-1])
    assert not any(line.lstrip().startswith("ExecStartPre=") for line in lines)
    assert lines[-1] == "    '/m\\nExecStartPre=/bin/touch /tmp/pwned'"


def test_a_systemd_prefix_on_the_command_is_refused():
    with pytest.raises(ValueError, match="prefix"):
        p.systemd_exec_args(["-/bin/true"])
    with pytest.raises(ValueError, match="empty"):
        p.systemd_exec_args([])


def test_environment_assignments():
    assert p.systemd_environment("PYTHONPATH", "/opt/x") == '"PYTHONPATH=/opt/x"'
    assert p.systemd_environment("V", 'a"b\nc%d$e') == '"V=a\\"b\\nc%%d$e"'
    with pytest.raises(ValueError, match="not an environment variable name"):
        p.systemd_environment("A=B\nExecStartPre", "x")


def test_address_sets_split_families_and_clear_host_bits():
    assert p.address_sets(["10.0.0.7/24", "192.168.1.5", "fd00::1/64", "10.0.0.0/24"], "v") == {
        "ipv4": ["10.0.0.0/24", "192.168.1.5"], "ipv6": ["fd00::/64"]}


@pytest.mark.parametrize("value, message", [
    ("10.0.0.0/24", "v must be a list"),
    (["10.0.0.0/33"], "v: '10.0.0.0/33' is not an IPv4/IPv6 address or CIDR"),
    (["eth0"], "v: 'eth0' is not"),
    (["10.0.0.0/24 }; accept"], "is not an IPv4/IPv6"),
])
def test_bad_addresses_name_the_variable(value, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("/", "/")):
        p.address_sets(value, "v")


def test_allow_rules():
    rules = p.allow_rules([{"port": 9100, "sources": ["10.0.0.0/24", "fd00::/8"]}, {"port": "7000-7010", "protocol": "UDP"}])
    assert rules == [
        {"protocol": "tcp", "port": "9100", "ipv4": ["10.0.0.0/24"], "ipv6": ["fd00::/8"], "any": False},
        {"protocol": "udp", "port": "7000-7010", "ipv4": [], "ipv6": [], "any": True}]


@pytest.mark.parametrize("entries, message", [
    ({"port": 1}, "must be a list"),
    (["9100"], r"llm_cluster_firewall_allow\[0\] must be a mapping"),
    ([{"port": 0}], r"\[0\]: port 0 is outside"),
    ([{"port": "9200-9100"}], "runs backwards"),
    ([{"port": "80; accept"}], "is not a port"),
    ([{"port": True}], "is not a port"),
    ([{"port": 80, "protocol": "icmp"}], "protocol 'icmp'"),
    ([{"port": 80, "source": ["10.0.0.0/8"]}], "unknown key"),
    ([{"port": 80, "sources": ["x"]}], r"\[0\].sources: 'x' is not"),
])
def test_bad_allow_entries_are_named(entries, message):
    with pytest.raises(ValueError, match=message):
        p.allow_rules(entries)


def test_firewalld_rules():
    assert p.firewalld_rule({"family": "ipv4", "address": "10.0.0.2"}) == \
        'rule family="ipv4" source address="10.0.0.2" accept'
    assert p.firewalld_rule({"family": "ipv6", "address": "fd00::/8"}, 8000) == \
        'rule family="ipv6" source address="fd00::/8" port port="8000" protocol="tcp" accept'
    assert p.firewalld_rule({"family": None, "address": None, "port": "9100", "protocol": "udp"}) == \
        'rule port port="9100" protocol="udp" accept'


MEMBER = 'rule family="ipv4" source address="%s" accept'
RECORD = "/etc/llm_cluster/ray-firewalld-rules.json"


def test_the_firewalld_record_reads_back_what_it_wrote():
    rules = [MEMBER % "10.0.0.2", MEMBER % "10.0.0.1", MEMBER % "10.0.0.1"]
    written = json.dumps(p.firewalld_record("", rules))
    assert p.firewalld_recorded(written, RECORD) == [{"zone": "", "rule": MEMBER % "10.0.0.1"},
                                                     {"zone": "", "rule": MEMBER % "10.0.0.2"}]
    # No file yet (a node deployed before the record, or a first deploy): nothing recorded.
    assert p.firewalld_recorded("", RECORD) == []


def test_a_member_that_left_and_a_zone_changed_leave_stale_rules():
    recorded = p.firewalld_record("", [MEMBER % "10.0.0.1", MEMBER % "10.0.0.3"])["rules"]
    # 10.0.0.3 was replaced by 10.0.0.9: its rule goes, the kept one stays.
    assert p.firewalld_stale(recorded, "", [MEMBER % "10.0.0.1", MEMBER % "10.0.0.9"]) == [
        {"zone": "", "rule": MEMBER % "10.0.0.3"}]
    # The same rules in another zone: every rule of the old zone goes.
    assert p.firewalld_stale(recorded, "cluster", [MEMBER % "10.0.0.1", MEMBER % "10.0.0.3"]) == recorded
    assert p.firewalld_stale(recorded, "", [MEMBER % "10.0.0.3", MEMBER % "10.0.0.1"]) == []


def test_the_record_written_before_the_rules_are_added_keeps_those_not_yet_removed():
    recorded = p.firewalld_record("", [MEMBER % "10.0.0.1", MEMBER % "10.0.0.3"])["rules"]
    union = p.firewalld_union(recorded, "", [MEMBER % "10.0.0.1", MEMBER % "10.0.0.9"])
    assert union == {"rules": [{"zone": "", "rule": MEMBER % "10.0.0.1"}, {"zone": "", "rule": MEMBER % "10.0.0.9"},
                               {"zone": "", "rule": MEMBER % "10.0.0.3"}]}
    # Nothing changed: the same record as the one written after the rules, so a second run writes nothing.
    assert p.firewalld_union(recorded, "", [MEMBER % "10.0.0.3", MEMBER % "10.0.0.1"]) == {"rules": recorded}


@pytest.mark.parametrize("text", [
    "not json", "[]", '{"rules": {}}', '{"rules": [{"zone": "", "rule": ""}]}', '{"rules": [{"rule": "x"}]}',
    '{"rules": [{"zone": null, "rule": "x"}]}', '{"rules": [["", "x"]]}', '{"rules": [{"zone": "", "rule": 7}]}',
])
def test_a_record_that_is_not_ours_names_the_file_and_what_to_do(text):
    with pytest.raises(ValueError) as error:
        p.firewalld_recorded(text, RECORD)
    assert str(error.value).startswith("%s is not the record of firewalld rules this role writes" % RECORD)
    assert "remove the rules of members that left by hand (firewall-cmd --list-rich-rules), then the file" in str(error.value)
