# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

import pytest

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _cpuset as cpuset

try:
    from hypothesis import given, settings, strategies as st
except ImportError:  # pragma: no cover - the property tests need hypothesis
    HAS_HYPOTHESIS = False
else:
    HAS_HYPOTHESIS = True


# ---------------------------------------------------------------------------
# cpulist
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("", []),
    ("\n", []),
    ("0", [0]),
    ("0-3,8,10-11", [0, 1, 2, 3, 8, 10, 11]),
    ("0-3,8,10-11\n", [0, 1, 2, 3, 8, 10, 11]),
    ("  144-167 \n", list(range(144, 168))),
    ("0-55,112-167", list(range(0, 56)) + list(range(112, 168))),
    ("8,0-3,2", [0, 1, 2, 3, 8]),
    ("5-5", [5]),
])
def test_parse_cpulist(text, expected):
    assert cpuset.parse_cpulist(text) == expected


@pytest.mark.parametrize("text", ["a", "1-", "-1", "3-1", "0,,1", "0;1", "1 2", "0-3:2/4", "0x1"])
def test_parse_cpulist_rejects(text):
    with pytest.raises(ValueError) as exc:
        cpuset.parse_cpulist(text)
    assert repr(text) in str(exc.value)


def test_parse_cpulist_rejects_non_strings():
    with pytest.raises(ValueError):
        cpuset.parse_cpulist(None)


@pytest.mark.parametrize("cpus, expected", [
    ([], ""),
    ([0], "0"),
    ([0, 1], "0-1"),
    ([3, 2, 1, 0, 8, 11, 10, 8], "0-3,8,10-11"),
    (range(144, 168), "144-167"),
    ({1, 3, 5}, "1,3,5"),
])
def test_format_cpulist(cpus, expected):
    assert cpuset.format_cpulist(cpus) == expected


@pytest.mark.parametrize("cpus", [[-1], [1.0], ["1"], [True]])
def test_format_cpulist_rejects(cpus):
    with pytest.raises(ValueError):
        cpuset.format_cpulist(cpus)


# ---------------------------------------------------------------------------
# cpumask: the examples of vendor-tools.md section 3.1
# ---------------------------------------------------------------------------

KUNPENG_MASKS = [
    (list(range(192)), "ffffffff,ffffffff,ffffffff,ffffffff,ffffffff,ffffffff"),
    (list(range(144, 168)), "000000ff,ffff0000,00000000,00000000,00000000,00000000"),
    (list(range(0, 24)), "00000000,00000000,00000000,00000000,00000000,00ffffff"),
    ([23], "00000000,00000000,00000000,00000000,00000000,00800000"),
    ([164, 165, 166, 167], "000000f0,00000000,00000000,00000000,00000000,00000000"),
]


@pytest.mark.parametrize("cpus, mask", KUNPENG_MASKS)
def test_format_cpumask_kunpeng(cpus, mask):
    assert cpuset.format_cpumask(cpus, 192) == mask


@pytest.mark.parametrize("cpus, mask", KUNPENG_MASKS)
def test_parse_cpumask_kunpeng(cpus, mask):
    assert cpuset.parse_cpumask(mask) == cpus
    assert cpuset.parse_cpumask(mask + "\n") == cpus


@pytest.mark.parametrize("text, expected", [
    ("3", [0, 1]),
    ("3\n", [0, 1]),
    ("0", []),
    ("ffffffff,ffffffff", list(range(64))),
    ("00000008,00000000", [35]),
    ("ff,ffff0000,00000000,00000000,00000000,00000000", list(range(144, 168))),
    ("FF,FFFF0000,0,0,0,0", list(range(144, 168))),
])
def test_parse_cpumask_kernel_and_short_forms(text, expected):
    assert cpuset.parse_cpumask(text) == expected


@pytest.mark.parametrize("text", ["", "\n", "xyz", "123456789", "ff,,ff", "0x3", "ff ff", ",ff"])
def test_parse_cpumask_rejects(text):
    with pytest.raises(ValueError) as exc:
        cpuset.parse_cpumask(text)
    assert repr(text) in str(exc.value)


@pytest.mark.parametrize("cpus, nr_cpus, mask", [
    ([0, 1], 2, "00000003"),
    ([], 2, "00000000"),
    ([3], 32, "00000008"),
    ([35], 64, "00000008,00000000"),
    ([32], 33, "00000001,00000000"),
    ([4095], 4096, "80000000" + ",00000000" * 127),
])
def test_format_cpumask_widths(cpus, nr_cpus, mask):
    assert cpuset.format_cpumask(cpus, nr_cpus) == mask


@pytest.mark.parametrize("cpus, nr_cpus", [([192], 192), ([0], 0), ([0], True), ([-1], 8), ([0], "8")])
def test_format_cpumask_rejects(cpus, nr_cpus):
    with pytest.raises(ValueError):
        cpuset.format_cpumask(cpus, nr_cpus)


# ---------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------

if HAS_HYPOTHESIS:
    CPU_SETS = st.sets(st.integers(min_value=0, max_value=4095), max_size=300)

    @settings(max_examples=200, deadline=None)
    @given(CPU_SETS)
    def test_cpulist_round_trip(cpus):
        text = cpuset.format_cpulist(cpus)
        assert cpuset.parse_cpulist(text) == sorted(cpus)
        assert cpuset.parse_cpulist(text + "\n") == sorted(cpus)

    @settings(max_examples=200, deadline=None)
    @given(CPU_SETS)
    def test_cpulist_is_compressed(cpus):
        items = [item for item in cpuset.format_cpulist(cpus).split(",") if item]
        bounds = [tuple(int(value) for value in item.split("-")) for item in items]
        for bound in bounds:
            assert len(bound) == 1 or bound[0] < bound[1]
        for previous, current in zip(bounds, bounds[1:]):
            assert current[0] >= previous[-1] + 2

    @settings(max_examples=200, deadline=None)
    @given(st.data())
    def test_cpumask_round_trip_up_to_4096(data):
        nr_cpus = data.draw(st.integers(min_value=1, max_value=4096))
        cpus = data.draw(st.sets(st.integers(min_value=0, max_value=nr_cpus - 1), max_size=300))
        mask = cpuset.format_cpumask(cpus, nr_cpus)
        words = mask.split(",")
        assert len(words) == (nr_cpus + 31) // 32
        assert all(len(word) == 8 for word in words)
        assert cpuset.parse_cpumask(mask) == sorted(cpus)

    @settings(max_examples=100, deadline=None)
    @given(st.sets(st.integers(min_value=0, max_value=4095), min_size=1, max_size=300))
    def test_cpumask_leading_zero_words_do_not_matter(cpus):
        mask = cpuset.format_cpumask(cpus, 4096)
        stripped = ",".join(word.lstrip("0") or "0" for word in mask.split(","))
        assert cpuset.parse_cpumask(stripped) == sorted(cpus)
else:  # pragma: no cover
    @pytest.mark.skip(reason="hypothesis is not installed")
    def test_properties_need_hypothesis():
        pass
