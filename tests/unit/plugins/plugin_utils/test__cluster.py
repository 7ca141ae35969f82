# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.aihost.llm_cluster.plugins.filter.cluster import cluster_hosts
from ansible_collections.aihost.llm_cluster.plugins.plugin_utils._cluster import host_records

HOSTVARS = {
    "master1": {"addr": "10.0.0.1", "found": {"ok": True, "bad_files": []}, "results": [{"rc": 0}]},
    "worker1": {"addr": "10.0.0.2", "found": {"ok": False, "bad_files": ["a.bin"]}},
    "worker2": {},
}


def test_records_keep_the_host_order_and_read_dotted_paths():
    records = host_records(["worker1", "master1"], HOSTVARS, {"address": "addr", "ok": "found.ok", "bad": "found.bad_files"})
    assert records == [{"host": "worker1", "address": "10.0.0.2", "ok": False, "bad": ["a.bin"]},
                       {"host": "master1", "address": "10.0.0.1", "ok": True, "bad": []}]


def test_absent_hosts_variables_and_keys_give_the_default():
    records = host_records(["worker2", "gone", 7], HOSTVARS, {"address": "addr", "ok": "found.ok", "rc": "results.0"}, default="-")
    assert records == [{"host": "worker2", "address": "-", "ok": "-", "rc": "-"},
                       {"host": "gone", "address": "-", "ok": "-", "rc": "-"},
                       {"host": 7, "address": "-", "ok": "-", "rc": "-"}]


def test_a_step_of_digits_indexes_a_list():
    assert host_records(["master1"], HOSTVARS, {"rc": "results.0.rc", "first": "results.0"}) == [
        {"host": "master1", "rc": 0, "first": {"rc": 0}}]


def test_common_values_go_into_every_record_and_win():
    records = host_records(["master1"], HOSTVARS, {"address": "addr"}, {"firewall": "auto", "address": "fixed"})
    assert records == [{"host": "master1", "address": "fixed", "firewall": "auto"}]


def test_filter_refuses_what_is_no_host_list_or_mapping():
    assert cluster_hosts(["master1"], HOSTVARS, {"address": "addr"}) == [{"host": "master1", "address": "10.0.0.1"}]
    for args in (("master1", HOSTVARS, {}), (["master1"], [], {}), (["master1"], HOSTVARS, ["addr"]),
                 (["master1"], HOSTVARS, {}, ["x"])):
        with pytest.raises(AnsibleFilterError):
            cluster_hosts(*args)
