# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.aihost.llm_cluster.plugins.filter.cluster import cluster_hosts, serving_group_hosts
from ansible_collections.aihost.llm_cluster.plugins.plugin_utils._cluster import group_hosts, host_records

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


GROUPS = {"all": ["a2-01", "a2-02", "duo1"], "ascend_a2": ["a2-01", "a2-02"], "duo": ["duo1"], "empty": []}


def test_serving_groups_keep_their_order_and_the_inventory_s_hosts():
    assert group_hosts(["duo", "ascend_a2"], GROUPS) == [["duo", ["duo1"]], ["ascend_a2", ["a2-01", "a2-02"]]]
    assert serving_group_hosts(["ascend_a2"], GROUPS) == [["ascend_a2", ["a2-01", "a2-02"]]]


def test_a_group_the_inventory_lacks_or_a_name_of_another_type_gives_no_hosts_for_the_check_to_name():
    # The inventory check and the serve plan name a missing or empty group; the pairs only carry it there.
    assert group_hosts(["gone", "empty", 7], GROUPS) == [["gone", []], ["empty", []], ["7", []]]
    assert group_hosts(["ascend; rm -rf /"], GROUPS) == [["ascend; rm -rf /", []]]


def test_no_serving_groups_give_no_pairs():
    assert group_hosts(None, GROUPS) == [] and group_hosts([], GROUPS) == []


@pytest.mark.parametrize("value", ["ascend_a2", {"ascend_a2": 1}, 3])
def test_a_value_that_is_no_list_is_refused_by_name(value):
    with pytest.raises(AnsibleFilterError, match="llm_cluster_serving_groups must be a list of inventory group names"):
        serving_group_hosts(value, GROUPS)


def test_the_filter_wants_the_inventory_s_groups():
    with pytest.raises(AnsibleFilterError, match="expects the inventory's groups"):
        serving_group_hosts(["duo"], ["duo1"])
