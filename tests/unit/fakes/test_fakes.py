# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Tests of the fake npu-smi, hccn_tool and nvidia-smi (tests/fakes/bin).

Outputs are compared byte for byte with the vendor samples in
tests/fixtures/vendor wherever a sample exists; the tools run as processes
with their state, hccn.conf and fabric directory under tmp_path.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import json
import sys
from pathlib import Path

import pytest

FAKES_BIN = Path(__file__).resolve().parents[2] / "fakes" / "bin"

# ---------------------------------------------------------------- npu-smi


@pytest.fixture(name="atlas")
def fixture_atlas(profile):
    return profile("atlas-800i-a2")


def test_npu_smi_info_matches_the_atlas_800i_a2_sample(make_node, atlas, vendor):
    result = make_node("n1", atlas).run("npu-smi", "info")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == vendor("npu-smi-info-800i-a2.txt")


def test_npu_smi_info_prints_processes_like_the_vllm_sample(make_node, atlas, vendor):
    # Sample D: 2 x 910B4-1 64 GB, driver 25.2.2, one VLLMWorker_TP per NPU (5-digit HBM usage).
    atlas["driver_version"] = "25.2.2"
    atlas["npu"]["device_defaults"].update(name="910B4-1", hbm_total=65536)
    atlas["npu"]["devices"] = [
        {"id": 0, "bus_id": "0000:0e:00.0", "power": 78.2, "temp": 40, "hbm_used": 61825},
        {"id": 1, "bus_id": "0000:0f:00.0", "power": 77.9, "temp": 41, "hbm_used": 61825},
    ]
    atlas["processes"] = [
        {"npu": 0, "chip": 0, "pid": 19334, "name": "VLLMWorker_TP", "memory_mb": 58472},
        {"npu": 1, "chip": 0, "pid": 19341, "name": "VLLMWorker_TP", "memory_mb": 58472},
    ]
    result = make_node("n1", atlas).run("npu-smi", "info")
    assert result.stdout == vendor("npu-smi-info-910b4-1-procs.txt")


@pytest.mark.parametrize(
    ("args", "sample"),
    [
        (["info", "-t", "topo"], "npu-smi-info-t-topo-800a2.txt"),
        (["info", "-m"], "npu-smi-info-m-910b4.txt"),
        (["info", "-t", "health", "-i", "0", "-c", "0"], "npu-smi-info-t-health-chip.txt"),
        (["info", "-t", "health", "-i", "0"], "npu-smi-info-t-health-device.txt"),
    ],
)
def test_npu_smi_queries_match_the_samples(make_node, atlas, vendor, args, sample):
    result = make_node("n1", atlas).run("npu-smi", *args)
    assert (result.returncode, result.stdout, result.stderr) == (0, vendor(sample), "")


def test_npu_smi_info_l_matches_the_sample_plus_the_closing_blank_line(make_node, atlas, vendor):
    # The driver prints "Chip Count : N\n\n" for every record; the sample lost the final blank line.
    result = make_node("n1", atlas).run("npu-smi", "info", "-l")
    assert result.stdout == vendor("npu-smi-info-l.txt") + "\n"


def test_npu_smi_board_info_matches_the_910b_sample(make_node, atlas, vendor):
    atlas["driver_version"] = "25.5.1"
    atlas["npu"]["firmware_version"] = "7.8.0.6.201"
    result = make_node("n1", atlas).run("npu-smi", "info", "-t", "board", "-i", "0")
    assert result.stdout == vendor("npu-smi-info-t-board-910b.txt")


@pytest.fixture(name="npu_910a")
def fixture_npu_910a(atlas):
    """A 910A card on driver 23.0.5: the host of the raw mind-cluster capture."""
    atlas["driver_version"] = "23.0.5"
    atlas["npu"]["firmware_version"] = "7.1.0.7.220"
    defaults = atlas["npu"]["device_defaults"]
    del defaults["product_name"]  # 23.0.x prints no product block
    defaults.update(
        name="910A",
        board_id="0x02",
        pci_device_id="0xD801",
        subsystem_vendor_id="0x0200",
        subsystem_device_id="0x0100",
    )
    atlas["npu"]["devices"] = [
        {
            "id": 0,
            "bus_id": "0000:61:00.0",
            "power": 72.0,
            "temp": 39,
            "hbm_used": 3,
            "vdie_id": "42C711D4 20B03704 4A10C8D4 14CC040A D2102003",
            "ndie_id": "27216594 20401010 4E10C8D4 14CC040A A4102003",
        }
    ]
    return atlas


@pytest.mark.parametrize(
    ("args", "sample"),
    [
        (["info", "-i", "0", "-t", "board"], "npu-smi-info-t-board-910a.txt"),
        (["info", "-i", "0", "-c", "0", "-t", "board"], "npu-smi-info-t-board-chip-910a.txt"),
    ],
)
def test_npu_smi_board_info_matches_the_910a_capture(make_node, npu_910a, vendor, args, sample):
    result = make_node("n1", npu_910a).run("npu-smi", *args)
    assert result.stdout == vendor(sample)


def test_npu_smi_health_knob_shows_in_table_and_queries(make_node, atlas):
    atlas["health"] = {"3": "Alarm", "5": "Critical"}
    atlas["error_codes"] = {"3": "0x80E01801"}
    node = make_node("n1", atlas)
    table = node.run("npu-smi", "info").stdout.splitlines()
    rows = {line.split()[1]: line.split("|")[2].strip() for line in table if line.startswith("| ") and "910B4" in line}
    assert rows == {"0": "OK", "1": "OK", "2": "OK", "3": "Alarm", "4": "OK", "5": "Critical", "6": "OK", "7": "OK"}
    device = node.run("npu-smi", "info", "-t", "health", "-i", "3").stdout
    assert "\tHealth                         : Alarm\n" in device
    assert "\tError Code                     : 0x80E01801\n" in device
    chip = node.run("npu-smi", "info", "-t", "health", "-i", "5", "-c", "0").stdout
    assert chip.startswith("\tHealth Status                  : Critical\n")


def test_npu_smi_missing_devices_disappear_everywhere(make_node, atlas):
    atlas["missing_devices"] = [2, 7]
    node = make_node("n1", atlas)
    table = node.run("npu-smi", "info").stdout
    assert "0000:81:00.0" not in table and "0000:42:00.0" not in table
    assert "No running processes found in NPU 2 " not in table
    assert node.run("npu-smi", "info", "-l").stdout.startswith("\tTotal Count                    : 6\n")
    mapping = node.run("npu-smi", "info", "-m").stdout.splitlines()
    logic = [line.split()[:3] for line in mapping[1:] if line.endswith("910B4")]
    assert logic == [["0", "0", "0"], ["1", "0", "1"], ["3", "0", "2"], ["4", "0", "3"], ["5", "0", "4"], ["6", "0", "5"]]
    topo = node.run("npu-smi", "info", "-t", "topo").stdout.splitlines()
    assert topo[0].split() == ["NPU0", "NPU1", "NPU3", "NPU4", "NPU5", "NPU6", "CPU", "Affinity"]
    assert [row.split()[0] for row in topo[1:7]] == ["NPU0", "NPU1", "NPU3", "NPU4", "NPU5", "NPU6"]
    gone = node.run("npu-smi", "info", "-t", "board", "-i", "7")
    assert (gone.returncode, gone.stdout, gone.stderr) == (215, "Invalid card id.\n", "")


def test_npu_smi_driver_version_knob(make_node, atlas):
    atlas["driver_version"] = "24.1.rc1"
    node = make_node("n1", atlas)
    assert node.run("npu-smi", "info").stdout.splitlines()[1] == "| npu-smi 24.1.rc1" + " " * 17 + "Version: 24.1.rc1" + " " * 45 + "|"
    assert "\tSoftware Version               : 24.1.rc1\n" in node.run("npu-smi", "info", "-t", "board", "-i", "1").stdout
    assert node.run("npu-smi", "-v").stdout == "npu-smi version: 24.1.rc1\n"


@pytest.mark.parametrize(
    ("args", "rc", "first_line"),
    [
        (["foo"], 211, "Command or option is not found."),
        ([], 215, "Usage: npu-smi <Command|-h|-v> [Options...]"),
        (["info", "-x"], 215, "Error parameter of -x"),
        (["info", "-t", "bogus", "-i", "0"], 215, "Error parameter of -t"),
        (["info", "-t", "board"], 215, ""),  # "\nThis command must input card id.\n\n"
        (["info", "-t", "board", "-i", "9"], 215, "Invalid card id."),
        (["info", "-t", "board", "-i", "0", "-c", "1"], 215, "Invalid chip id."),
        (["info", "-t", "flash", "-i", "0"], 193, "This device does not support querying flash."),
        (["info", "-t", "topo", "-i", "0"], 215, "This command does not support input card id."),
    ],
)
def test_npu_smi_errors_go_to_stdout_with_dcmi_exit_codes(make_node, atlas, args, rc, first_line):
    result = make_node("n1", atlas).run("npu-smi", *args)
    assert (result.returncode, result.stderr) == (rc, "")
    assert result.stdout.split("\n")[0] == first_line


@pytest.mark.parametrize(
    ("mode", "rc"),
    [("dcmi_init_failed", 187), ("device_busy", 172)],
)
def test_npu_smi_fail_modes(make_node, atlas, vendor, mode, rc):
    atlas["fail_mode"] = mode
    result = make_node("n1", atlas).run("npu-smi", "info")
    assert (result.returncode, result.stderr) == (rc, "")
    if mode == "dcmi_init_failed":
        assert result.stdout == vendor("npu-smi-dcmi-init-failed.txt")
    else:
        assert result.stdout.splitlines()[1] == "dcmi model initialized failed, because the device is used. ret is -8020"


def test_tools_report_an_unreadable_state_file(make_node, atlas):
    node = make_node("n1", atlas)
    node.state_path.unlink()
    for tool, args in (("npu-smi", ["info"]), ("hccn_tool", ["-i", "0", "-link", "-g"]), ("nvidia-smi", ["-L"])):
        result = node.run(tool, *args)
        assert result.returncode == 1
        assert "cannot read state file" in result.stderr


# ---------------------------------------------------------------- hccn_tool


def configure(node, dev: int, address: str, netmask: str = "255.255.255.0") -> None:
    result = node.run("hccn_tool", "-i", str(dev), "-ip", "-s", "address", address, "netmask", netmask)
    assert (result.returncode, result.stdout, result.stderr) == (0, "Cmd executed successfully!\n", "")


def test_hccn_link_follows_the_knob_and_set(make_node, atlas):
    atlas["link"] = {"2": "DOWN"}
    node = make_node("n1", atlas)
    assert node.run("hccn_tool", "-i", "0", "-link", "-g").stdout == "link status: UP\n"
    assert node.run("hccn_tool", "-i", "2", "-link", "-g").stdout == "link status: DOWN\n"
    assert node.run("hccn_tool", "-i", "0", "-link", "-s", "down").stdout == "Cmd executed successfully!\n"
    assert node.run("hccn_tool", "-i", "0", "-link", "-g").stdout == "link status: DOWN\n"


def test_hccn_set_get_round_trip_in_vendor_formats(make_node, atlas, vendor):
    node = make_node("n1", atlas)
    configure(node, 0, "10.10.0.10")
    assert node.run("hccn_tool", "-i", "0", "-ip", "-g").stdout == vendor("hccn-ip-g.txt")
    other = make_node("n2", atlas)
    configure(other, 0, "11.12.165.10")
    set_gw = other.run("hccn_tool", "-i", "0", "-gateway", "-s", "gateway", "11.12.165.1")
    assert set_gw.stdout == vendor("hccn-set-success.txt")
    assert other.run("hccn_tool", "-i", "0", "-gateway", "-g").stdout == vendor("hccn-gateway-g.txt")
    other.run("hccn_tool", "-i", "0", "-netdetect", "-s", "address", "11.12.165.1")
    assert other.run("hccn_tool", "-i", "0", "-netdetect", "-g").stdout == vendor("hccn-netdetect-g.txt")
    assert other.run("hccn_tool", "-i", "0", "-tls", "-g").stdout.startswith("dev_id:0, tls switch[1]")
    other.run("hccn_tool", "-i", "0", "-tls", "-s", "enable", "0")
    assert other.run("hccn_tool", "-i", "0", "-tls", "-g").stdout.splitlines()[0] == vendor("hccn-tls-g-switch.txt").rstrip("\n")


def test_hccn_pfc_prints_the_documented_table_and_follows_its_knob(make_node, atlas, vendor):
    atlas["pfc"] = {"5": [3]}
    atlas["link"] = {"2": "DOWN"}
    node = make_node("n1", atlas)
    assert node.run("hccn_tool", "-i", "0", "-pfc", "-g").stdout == vendor("hccn-pfc-g-hixl-doc.txt")
    assert node.run("hccn_tool", "-i", "5", "-pfc", "-g").stdout.splitlines()[2].split() == ["enabled"] + "0 0 0 1 0 0 0 0".split()
    down = node.run("hccn_tool", "-i", "2", "-pfc", "-g")
    assert (down.returncode, down.stdout, down.stderr.strip()) == (22, "", "Execute failed: Link status is down.")


def test_hccn_sets_persist_to_hccn_conf_in_the_real_key_order(make_node, atlas, vendor):
    node = make_node("n1", atlas)
    configure(node, 0, "29.1.137.205", "255.255.0.0")
    node.run("hccn_tool", "-i", "0", "-gateway", "-s", "gateway", "29.1.0.1")
    node.run("hccn_tool", "-i", "0", "-netdetect", "-s", "address", "29.1.0.1")
    assert node.hccn_conf.read_text() == vendor("hccn-conf-device0.conf")
    node.run("hccn_tool", "-i", "0", "-tls", "-s", "enable", "0")
    configure(node, 1, "29.1.137.206", "255.255.0.0")
    configure(node, 0, "29.1.137.207", "255.255.0.0")
    assert node.hccn_conf.read_text().splitlines() == [
        "address_0=29.1.137.207",
        "netmask_0=255.255.0.0",
        "netdetect_0=29.1.0.1",
        "gateway_0=29.1.0.1",
        "send_arp_status_0=1",
        "tls_enable_0=0",
        "address_1=29.1.137.206",
        "netmask_1=255.255.0.0",
        "send_arp_status_1=1",
    ]


def test_hccn_runtime_state_survives_calls_and_resets_when_the_state_is_rewritten(make_node, atlas):
    node = make_node("n1", atlas)
    configure(node, 3, "10.0.0.3")
    node.run("hccn_tool", "-i", "3", "-link", "-s", "down")
    assert json.loads(node.state_path.read_text()) == atlas  # the state file itself is never rewritten
    atlas["health"] = {"1": "Warning"}
    node.write(atlas)  # a new state is a reboot: runtime changes are gone, hccn.conf is loaded again
    assert node.run("hccn_tool", "-i", "3", "-link", "-g").stdout == "link status: UP\n"
    assert node.run("hccn_tool", "-i", "3", "-ip", "-g").stdout == "ipaddr:10.0.0.3\nnetmask:255.255.255.0\n"


def test_hccn_ip_query_without_address(make_node, atlas):
    node = make_node("n1", atlas)
    result = node.run("hccn_tool", "-i", "4", "-ip", "-g")
    assert (result.returncode, result.stdout) == (13, "")
    assert result.stderr == "Get ipconf failed, because no ip was preset there!\n"
    atlas["quirks"] = {"ip_unset": "empty"}  # older drivers print nothing
    result = node.write(atlas).run("hccn_tool", "-i", "4", "-ip", "-g")
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_hccn_net_health(make_node, atlas):
    atlas["link"] = {"1": "DOWN"}
    node = make_node("n1", atlas)
    for dev in ("0", "1"):
        assert node.run("hccn_tool", "-i", dev, "-net_health", "-g").stdout == "net health status: Init\n"
        configure(node, int(dev), f"10.0.0.{int(dev) + 10}")
        node.run("hccn_tool", "-i", dev, "-netdetect", "-s", "address", "10.0.0.254")
    assert node.run("hccn_tool", "-i", "0", "-net_health", "-g").stdout == "net health status: Success\n"
    assert node.run("hccn_tool", "-i", "1", "-net_health", "-g").stdout == "net health status: Fault\n"


@pytest.mark.parametrize(
    ("args", "rc", "message"),
    [
        (["-i", "x", "-link", "-g"], 4, "Get invalid device id.\n"),
        (["-i", "8", "-link", "-g"], 4, "The device is not exist!\n"),
        (["-i", "0", "-foo", "-g"], 3, "Get invalid major cmd.\nEnter [ hccn_tool -h ] for more details.\n"),
        (["-i", "0", "-link", "-x"], 3, "Get unknown option!\n"),
        (["-i", "0", "-ip", "-s", "address", "10.0.0.300", "netmask", "255.255.255.0"], 6, "The ip address you configured is invalid!\n"),
        (["-i", "0", "-ip", "-s", "address", "10.0.0.1"], 1, "Get invalid parameters!\n"),
        (["-i", "0", "-gateway", "-s", "gateway", "10.0.0.1"], 26, "Unable to configure gateway, because ip is not configured!\n"),
        (["-i", "0", "-gateway", "-g"], 2, "Get gateway failed, because no gateway was preset there!\n"),
        (["-i", "0", "-tls", "-s", "enable", "2"], 16, "Get invalid enable value!\n"),
        (["-link", "-g"], 1, 'Get invalid major cmd type. The valid major cmd type should be "-a" or "-i".\n'
         "Enter [ hccn_tool -h ] for more details.\n"),
    ],
)
def test_hccn_errors_go_to_stderr_with_uda_exit_codes(make_node, atlas, args, rc, message):
    result = make_node("n1", atlas).run("hccn_tool", *args)
    assert (result.returncode, result.stdout, result.stderr) == (rc, "", message)


@pytest.fixture(name="hccn_module", scope="module")
def fixture_hccn_module():
    """The fake hccn_tool.py imported as a module (its _fakelib beside it)."""
    spec = importlib.util.spec_from_file_location("fake_hccn_tool", FAKES_BIN / "hccn_tool.py")
    sys.path.insert(0, str(FAKES_BIN))
    try:
        tool = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(tool)
    finally:
        sys.path.remove(str(FAKES_BIN))
    return tool


@pytest.mark.parametrize("text", [
    "10.0.0.1", "0.0.0.0", "255.255.255.255", "256.0.0.1", "10.0.0", "10.0.0.1.2", "010.0.0.1", "10.0.0.00",
    "1.2.3.-4", "+1.2.3.4", " 1.2.3.4", "1.2.3.4 ", "1..3.4", "", "a.b.c.d", "1.2.3.\u0664", "1.2.3.\u00b2", "1000.0.0.1",
    "1.2.3.0x1", "１.2.3.4"])
def test_hccn_address_check_accepts_what_ipaddress_accepts(hccn_module, text):
    # The fake checks addresses without importing ipaddress (one check per ping); same verdicts.
    try:
        ipaddress.IPv4Address(text)
        expected = True
    except ValueError:
        expected = False
    assert hccn_module.valid_ipv4(text) is expected


def test_hccn_gateway_outside_the_subnet_and_address_conflict(make_node, atlas):
    node = make_node("n1", atlas)
    configure(node, 0, "10.0.0.10")
    result = node.run("hccn_tool", "-i", "0", "-gateway", "-s", "gateway", "10.0.1.1")
    assert (result.returncode, result.stderr) == (8, "The segment of configured gateway doesn't match that of the configured ip adress!\n")
    result = node.run("hccn_tool", "-i", "1", "-ip", "-s", "address", "10.0.0.10", "netmask", "255.255.255.0")
    assert (result.returncode, result.stderr) == (7, "The ip address configured is conflicted!\n")


def test_hccn_missing_device_is_not_exist(make_node, atlas):
    atlas["missing_devices"] = [5]
    result = make_node("n1", atlas).run("hccn_tool", "-i", "5", "-link", "-g")
    assert (result.returncode, result.stderr) == (4, "The device is not exist!\n")


@pytest.fixture(name="pair")
def fixture_pair(make_node, atlas):
    """Two nodes on one fabric: node-a dev 0 = 11.12.165.79, node-b dev 0 = 11.12.165.80."""
    node_a, node_b = make_node("node-a", atlas), make_node("node-b", atlas)
    configure(node_a, 0, "11.12.165.79")
    configure(node_b, 0, "11.12.165.80")
    return node_a, node_b


def test_hccn_ping_between_nodes_prints_the_real_success_output(pair, vendor):
    node_a, node_b = pair
    result = node_a.run("hccn_tool", "-i", "0", "-ping", "-g", "address", "11.12.165.80")
    assert (result.returncode, result.stdout, result.stderr) == (0, vendor("hccn-ping-g-success.txt"), "")
    assert node_b.run("hccn_tool", "-i", "0", "-ping", "-g", "address", "11.12.165.79", "pkt", "1024").returncode == 0


def assert_ping_fails(node, address):
    result = node.run("hccn_tool", "-i", "0", "-ping", "-g", "address", address)
    assert (result.returncode, result.stderr) == (1, "Command execute failed!\n")
    assert result.stdout == (
        f"device 0 PING {address}\nrecv time out seq=0\nrecv time out seq=1\nrecv time out seq=2\n"
        "3 packets transmitted, 0 received, 100.00% packet loss\n"
    )


def test_hccn_ping_fails_for_unknown_addresses_and_peers_with_link_down(pair, atlas):
    node_a, node_b = pair
    assert_ping_fails(node_a, "11.12.165.81")
    node_b.run("hccn_tool", "-i", "0", "-link", "-s", "down")  # publishes the new link state
    assert_ping_fails(node_a, "11.12.165.80")


@pytest.mark.parametrize("blocked", ["11.12.165.80", "node-b"])
def test_hccn_ping_blocked_by_address_or_peer(pair, atlas, blocked):
    node_a = pair[0]
    atlas["ping_blocked"] = [blocked]
    node_a.write(atlas)
    configure(node_a, 0, "11.12.165.79")
    assert_ping_fails(node_a, "11.12.165.80")


def test_hccn_ping_with_local_link_down(pair):
    node_a = pair[0]
    node_a.run("hccn_tool", "-i", "0", "-link", "-s", "down")
    result = node_a.run("hccn_tool", "-i", "0", "-ping", "-g", "address", "11.12.165.80")
    assert (result.returncode, result.stdout, result.stderr) == (22, "", "Execute failed: Link status is down.\n")


def test_hccn_publishes_the_node_into_the_fabric(pair, tmp_path):
    node_a = pair[0]
    node_a.run("hccn_tool", "-i", "1", "-link", "-s", "down")
    record = json.loads((tmp_path / "fabric" / "node-a.json").read_text())
    assert record["hostname"] == "node-a"
    assert record["devices"]["0"] == {"address": "11.12.165.79", "link": "UP"}
    assert record["devices"]["1"] == {"address": None, "link": "DOWN"}


def test_hccn_lldp_and_optical(make_node, atlas, vendor):
    atlas["hccn"]["devices"]["1"]["optical_present"] = False
    node = make_node("n1", atlas)
    ifnames = [node.run("hccn_tool", "-i", str(dev), "-lldp", "-g").stdout.splitlines()[3] + "\n" for dev in range(8)]
    assert "".join(ifnames) == vendor("hccn-lldp-g-grep-ifname.txt")
    assert node.run("hccn_tool", "-i", "0", "-optical", "-g").stdout.splitlines()[1] == "present              : present"
    absent = node.run("hccn_tool", "-i", "1", "-optical", "-g")
    assert (absent.returncode, absent.stdout, absent.stderr) == (20, "Optical module is not present.\n", "")


# ---------------------------------------------------------------- nvidia-smi


@pytest.fixture(name="gpu8")
def fixture_gpu8(profile):
    return profile("nvidia-8gpu")


def topo_state(gpus: list[dict], nics: list[str], matrix: list[list[str]], newer: bool) -> dict:
    return {
        "accelerator": "gpu",
        "driver_version": "550.54.15" if newer else "470.57.02",
        "gpu": {
            "device_defaults": {"name": "NVIDIA GPU", "memory_total": 1, "memory_used": 0},
            "devices": gpus,
            "topo": {"gpu_numa_id_column": newer, "nics": nics, "matrix": matrix},
        },
    }


def test_nvidia_topo_matches_the_rtx4090_sample(make_node, vendor):
    # Sample A: 8 GPUs on two NUMA nodes, two NICs next to GPU6. The stored sample lost
    # the NIC rows' trailing TABs, hence the rstrip.
    affinity = ["0-55,112-167"] * 4 + ["56-111,168-223"] * 4
    gpus = [{"index": i, "bus_id": f"00000000:{i + 1:02X}:00.0", "cpu_affinity": affinity[i], "numa_affinity": i // 4} for i in range(8)]
    matrix = [["SYS"] * 10 for _row in range(10)]
    for nic in (8, 9):
        matrix[6][nic] = matrix[nic][6] = "PHB"
    matrix[8][9] = matrix[9][8] = "PIX"
    result = make_node("n1", topo_state(gpus, ["mlx5_0", "mlx5_1"], matrix, newer=True)).run("nvidia-smi", "topo", "-m")
    assert result.returncode == 0
    sample = vendor("nvidia-smi-topo-m.txt").splitlines()
    assert [line.rstrip() for line in result.stdout.splitlines()[: len(sample)]] == sample
    assert result.stdout.endswith("\n\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n")


def test_nvidia_topo_matches_the_a100_sample_with_legend(make_node, vendor):
    gpus = [
        {"index": 0, "bus_id": "00000000:07:00.0", "cpu_affinity": "0-63", "numa_affinity": 0},
        {"index": 1, "bus_id": "00000000:87:00.0", "cpu_affinity": "64-127", "numa_affinity": 1},
    ]
    matrix = [["X", "SYS", "NODE", "SYS"], ["SYS", "X", "SYS", "NODE"], ["NODE", "SYS", "X", "SYS"], ["SYS", "NODE", "SYS", "X"]]
    result = make_node("n1", topo_state(gpus, ["mlx5_0", "mlx5_1"], matrix, newer=False)).run("nvidia-smi", "topo", "-m")
    assert (result.returncode, result.stdout) == (0, vendor("nvidia-smi-topo-m-2xa100-legend.txt"))


def test_nvidia_topo_matches_the_v100_sample(make_node, vendor):
    gpus = [
        {"index": i, "bus_id": f"00000000:{i + 4:02X}:00.0", "cpu_affinity": "0-63" if i < 2 else "64-127", "numa_affinity": 0 if i < 2 else 8}
        for i in range(4)
    ]
    near = {0: 0, 1: 0, 2: 1, 3: 1, 4: 0, 5: 0, 6: 1, 7: 1}  # socket of each GPU / NIC

    def link(a, b):
        if a < 4 and b < 4:
            return "NV3" if near[a] == near[b] else "SYS"
        if a >= 4 and b >= 4:
            return "PIX" if near[a] == near[b] else "SYS"
        return "NODE" if near[a] == near[b] else "SYS"

    matrix = [[link(a, b) for b in range(8)] for a in range(8)]
    nics = ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    result = make_node("n1", topo_state(gpus, nics, matrix, newer=False)).run("nvidia-smi", "topo", "-m")
    sample = vendor("nvidia-smi-topo-m-4xv100.txt")
    assert result.stdout[: len(sample)] == sample


@pytest.fixture(name="l40s")
def fixture_l40s(gpu8):
    gpu8["driver_version"] = "580.178.04"
    gpu8["gpu"]["device_defaults"].update(name="NVIDIA L40S", memory_total=46068)
    for gpu, bus in zip(gpu8["gpu"]["devices"], ["03", "04", "63", "64", "A3", "A4", "E3", "E4"]):
        gpu["bus_id"] = f"00000000:{bus}:00.0"
    return gpu8


def test_nvidia_query_gpu_matches_the_l40s_sample(make_node, l40s, vendor):
    # The sample elides GPUs 3-5: ask for the others with -i.
    result = make_node("n1", l40s).run(
        "nvidia-smi", "--query-gpu=index,name,pci.bus_id,memory.total,driver_version", "--format=csv", "-i", "0,1,2,6,7"
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, vendor("nvidia-smi-query-gpu.csv"), "")


def test_nvidia_query_single_field_matches_the_sample(make_node, gpu8, vendor):
    gpu8["driver_version"] = "550.107.02"
    gpu8["gpu"]["devices"] = gpu8["gpu"]["devices"][:1]
    result = make_node("n1", gpu8).run("nvidia-smi", "--query-gpu=driver_version", "--format=csv")
    assert result.stdout == vendor("nvidia-smi-query-gpu-driver-version.csv")


def test_nvidia_query_formats_and_aliases(make_node, gpu8):
    gpu8["gpu"]["devices"][1].update(memory_used=1309, utilization=35, temperature=41)
    node = make_node("n1", gpu8)
    fields = "--query-gpu=index,gpu_name,memory.total,memory.used,utilization.gpu,temperature.gpu,uuid"
    header, row0, row1 = node.run("nvidia-smi", fields, "--format=csv").stdout.splitlines()[:3]
    assert header == "index, name, memory.total [MiB], memory.used [MiB], utilization.gpu [%], temperature.gpu, uuid"
    assert row1 == f"1, NVIDIA H100 80GB HBM3, 81559 MiB, 1309 MiB, 35 %, 41, {gpu8['gpu']['devices'][1]['uuid']}"
    bare = node.run("nvidia-smi", fields, "--format=csv,noheader,nounits").stdout.splitlines()
    assert len(bare) == 8 and bare[1].startswith("1, NVIDIA H100 80GB HBM3, 81559, 1309, 35, 41, GPU-")
    assert row0.startswith("0, NVIDIA H100 80GB HBM3, 81559 MiB, 0 MiB, 0 %, 30, GPU-")
    assert node.run("nvidia-smi", "--query-gpu", "pci.bus_id", "--format", "csv,noheader").stdout.splitlines()[0] == "00000000:18:00.0"


def test_nvidia_list_and_missing_devices(make_node, gpu8):
    gpu8["missing_devices"] = [3]
    node = make_node("n1", gpu8)
    listing = node.run("nvidia-smi", "-L").stdout.splitlines()
    assert len(listing) == 7
    assert listing[0] == f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {gpu8['gpu']['devices'][0]['uuid']})"
    assert not any(line.startswith("GPU 3:") for line in listing)
    indexes = node.run("nvidia-smi", "--query-gpu=index", "--format=csv,noheader").stdout.split()
    assert indexes == ["0", "1", "2", "4", "5", "6", "7"]
    topo = node.run("nvidia-smi", "topo", "-m").stdout.splitlines()
    assert "GPU3" not in topo[0].split("\t")


def test_nvidia_summary_table_layout(make_node, gpu8):
    gpu8["processes"] = [{"gpu": 2, "pid": 4242, "name": "python3", "memory_mib": 70240}]
    result = make_node("n1", gpu8).run("nvidia-smi")
    lines = result.stdout.splitlines()
    assert result.returncode == 0
    assert lines[2] == "| NVIDIA-SMI 550.127.05             Driver Version: 550.127.05     CUDA Version: 12.4     |"
    assert lines[8] == "|   0  NVIDIA H100 80GB HBM3          On  |   00000000:18:00.0 Off |                    0 |"
    assert lines[9] == "| N/A   30C    P0             70W /  700W |       0MiB /  81559MiB |      0%      Default |"
    assert all(len(line) == 91 for line in lines[1:] if line.strip())
    assert "|    2   N/A  N/A      4242      C   python3" in result.stdout and "70240MiB |" in result.stdout


@pytest.mark.parametrize(
    ("mode", "rc", "message"),
    [
        ("driver_not_loaded", 9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."),
        ("no_devices", 6, "No devices were found"),
        ("version_mismatch", 18, "Failed to initialize NVML: Driver/library version mismatch"),
        ("gpu_lost", 15, "Unable to determine the device handle for GPU0000:18:00.0: GPU is lost."),
    ],
)
def test_nvidia_fail_modes(make_node, gpu8, mode, rc, message):
    gpu8["fail_mode"] = mode
    node = make_node("n1", gpu8)
    for args in ([], ["-L"], ["topo", "-m"], ["--query-gpu=index", "--format=csv"]):
        result = node.run("nvidia-smi", *args)
        assert (result.returncode, result.stderr) == (rc, "")
        assert result.stdout.startswith(message)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--query-gpu=index,bogus", "--format=csv"], 'Field "bogus" is not a valid field to query.\n\n'),
        (["--query-gpu=index"], "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"),
        (["--query-gpu=index", "--format=json"], "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"),
        (["--frobnicate"], "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"),
        (["topo", "-x"], "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"),
    ],
)
def test_nvidia_invalid_arguments(make_node, gpu8, args, message):
    result = make_node("n1", gpu8).run("nvidia-smi", *args)
    assert (result.returncode, result.stdout, result.stderr) == (2, message, "")


# ---------------------------------------------------------------- profiles


def test_profiles_are_consistent(profile):
    atlas = profile("atlas-800i-a2")
    assert (atlas["accelerator"], atlas["driver_version"], atlas["cann"]["version"]) == ("npu", "25.0.rc1.1", "8.3.RC2")
    assert atlas["npu"]["firmware_version"] == "7.7.0.1.231"
    assert [dev["id"] for dev in atlas["npu"]["devices"]] == list(range(8))
    assert atlas["cpu"]["count"] == 192
    gpu8 = profile("nvidia-8gpu")
    size = len(gpu8["gpu"]["devices"]) + len(gpu8["gpu"]["topo"]["nics"])
    matrix = gpu8["gpu"]["topo"]["matrix"]
    assert len(gpu8["gpu"]["devices"]) == 8 and len(matrix) == size
    assert all(len(row) == size and row[i] == "X" for i, row in enumerate(matrix))
    assert all(matrix[a][b] == matrix[b][a] for a in range(size) for b in range(size))
    assert len({gpu["uuid"] for gpu in gpu8["gpu"]["devices"]}) == 8
    assert profile("cpu-only")["accelerator"] == "none"


def test_cpu_only_profile_has_no_accelerators(make_node, profile):
    node = make_node("n1", profile("cpu-only"))
    assert node.run("npu-smi", "info").returncode == 187
    assert node.run("nvidia-smi").returncode == 9
    assert node.run("hccn_tool", "-i", "0", "-link", "-g").stderr == "The device is not exist!\n"


# ------------------------------------------------ field layouts (issue 14)


def test_driver26_profile_prints_the_26_1_0_capture(make_node, profile, vendor):
    state = profile("atlas-800i-a2-driver26")
    state["processes"] = [{"npu": 0, "chip": 0, "pid": 485946, "name": "pytest", "memory_mb": 5175}]
    result = make_node("n1", state).run("npu-smi", "info")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == vendor("npu-smi-info-910b3x8-26.1.0-procs.txt")


def test_driver26_layout_prints_the_26_0_rc1_capture(make_node, profile, vendor):
    state = profile("atlas-800i-a2-driver26")
    state["driver_version"] = "26.0.rc1"
    state["npu"]["device_defaults"].update(name="910B4", hbm_total=32768)
    state["npu"]["devices"] = [dict(state["npu"]["devices"][0], power=82.6, temp=32, hbm_used=2871)]
    result = make_node("n1", state).run("npu-smi", "info")
    # The published copy ends at the last process line.
    assert result.stdout.startswith(vendor("npu-smi-info-910b4-26.0.rc1.txt"))
    assert result.stdout[len(vendor("npu-smi-info-910b4-26.0.rc1.txt")):] == "+" + "+".join(
        ["=" * 27, "=" * 15, "=" * 70]) + "+\n"


def duo_card(state, card, driver, chips):
    """The 300I Duo profile cut down to one card of a capture: chips = [(temp, used, total), ...]."""
    state["driver_version"] = driver
    first = state["npu"]["devices"][0]
    state["npu"]["devices"] = [dict(first, id=chip, card=card, chip=chip, temp=temp, memory_used=used,
                                    memory_total=total) for chip, (temp, used, total) in enumerate(chips)]
    return state


@pytest.mark.parametrize(
    ("card", "driver", "chips", "sample", "lines"),
    [
        (2, "25.2.0", [(45, 1529, 44280), (43, 1412, 43693)], "npu-smi-info-300iduo-25.2.0-excerpt.txt", 12),
        (1, "25.0.rc1.b033", [(52, 1607, 47304), (50, 1379, 46717)],
         "npu-smi-info-300iduo-25.0.rc1.b033-excerpt.txt", 12),
    ],
)
def test_300i_duo_profile_prints_the_captures(make_node, profile, vendor, card, driver, chips, sample, lines):
    state = duo_card(profile("atlas-300i-duo"), card, driver, chips)
    result = make_node("n1", state).run("npu-smi", "info")
    assert (result.returncode, result.stderr) == (0, "")
    assert "".join(result.stdout.splitlines(True)[:lines]) == vendor(sample)


def test_300i_duo_hugepages_capture(make_node, profile, vendor):
    state = duo_card(profile("atlas-300i-duo"), 0, "25.5.0", [(58, 37623, 44278)])
    state["npu"]["devices"][0].update(hugepages_used=18047, hugepages_total=18047)
    result = make_node("n1", state).run("npu-smi", "info")
    sample = vendor("npu-smi-info-300iduo-25.5.0-hugepages-excerpt.txt")
    # The capture's second card is cut off; its separator after chip 0 is the card-internal rule.
    assert "".join(result.stdout.splitlines(True)[:8]) == "".join(sample.splitlines(True)[:8])


def test_300i_duo_cards_chips_and_health(make_node, profile):
    state = profile("atlas-300i-duo")
    state["health"] = {"3": "Critical"}
    node = make_node("n1", state)
    listing = node.run("npu-smi", "info", "-l").stdout
    assert "Total Count                    : 4" in listing
    assert listing.count("Chip Count                     : 2") == 4
    mapping = node.run("npu-smi", "info", "-m").stdout.splitlines()
    assert [line.split()[:3] for line in mapping[1:4]] == [["1", "0", "0"], ["1", "1", "1"], ["1", "2", "-"]]
    assert node.run("npu-smi", "info", "-t", "health", "-i", "2", "-c", "1").stdout == (
        "\tHealth Status                  : Critical\n\tError Code                     : NA\n"
        "\tError Information              : NA\n")
    assert node.run("npu-smi", "info", "-t", "health", "-i", "2", "-c", "2").returncode == 215
    assert node.run("npu-smi", "info", "-t", "health", "-i", "3").returncode == 215
    board = node.run("npu-smi", "info", "-t", "board", "-i", "4").stdout
    assert "PCI Device ID                  : 0xD500" in board and "Chip Count                     : 2" in board
    table = node.run("npu-smi", "info").stdout
    assert "| 2       310P3                 | Critical        | NA " in table
    # -t topo (no capture: one row per card, keyed like the collection reads it, by NPU id)
    topo = node.run("npu-smi", "info", "-t", "topo").stdout.splitlines()
    assert topo[0].split() == ["NPU1", "NPU2", "NPU4", "NPU5", "CPU", "Affinity"]
    assert [line.split()[-1] for line in topo[1:5]] == ["0-31", "32-63", "64-95", "96-127"]


def test_hccn_ping_lost_knob_reproduces_the_partial_loss_capture(pair, atlas, vendor):
    node_a = pair[0]
    atlas["ping_lost"] = {"node-b": 1}
    atlas["ping_rtt_ms"] = [0.1, 0.097, 0.066]
    node_a.write(atlas)
    configure(node_a, 0, "11.12.165.79")
    result = node_a.run("hccn_tool", "-i", "0", "-ping", "-g", "address", "11.12.165.80")
    assert (result.returncode, result.stderr) == (0, "")
    # The guide's capture types "seq=O" for the first sequence number.
    assert result.stdout == "device 0 PING 11.12.165.80\n" + vendor("hccn-ping-g-partial-loss-doc.txt").replace(
        "seq=O", "seq=0")
