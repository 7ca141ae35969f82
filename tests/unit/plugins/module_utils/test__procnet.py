# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

import os
import socket

from ansible_collections.aihost.llm_cluster.plugins.module_utils._procnet import (
    container_of_cgroup,
    describe_owners,
    foreign_owners,
    listening_ports,
    parse_proc_net_tcp,
    unit_of_cgroup,
)

TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:18EB 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 31337 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0
   2: 020012AC:18EB 030012AC:C350 01 00000000:00000000 00:00000000 00000000     0        0 5555 1 0000000000000000 20 4 1 10 -1
"""
TCP6 = "\n".join([
    "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt"
    "   uid  timeout inode",
    "   0: 00000000000000000000000000000000:1F40 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000"
    "     0        0 4343 1 0000000000000000 100 0 0 10 0",
    "",
])


def test_parse_keeps_only_listeners():
    assert parse_proc_net_tcp(TCP) == {6379: {"31337"}, 8000: {"4242"}}
    assert parse_proc_net_tcp(TCP6) == {8000: {"4343"}}


def test_unit_of_cgroup_v1_and_v2():
    assert unit_of_cgroup("0::/system.slice/llm-cluster-ray-head.service\n") == "llm-cluster-ray-head.service"
    assert unit_of_cgroup("12:pids:/\n1:name=systemd:/system.slice/nginx.service\n") == "nginx.service"
    assert unit_of_cgroup("0::/user.slice/user-0.slice/session-3.scope\n") == "session-3.scope"
    assert unit_of_cgroup("0::/\n") is None


SYSTEM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "fixtures", "system")
DOCKER_ID = "be8e7f6895712f56c5e3ef179db02e157a8bce26ce44d3e79a229915f07fb491"


def docker_cgroup():
    """A container's /proc/<pid>/cgroup as the host reads it (tests/fixtures/system/README.md)."""
    with open(os.path.join(SYSTEM, "proc-cgroup-docker-cgroupfs-v1.txt"), encoding="utf-8") as handle:
        return handle.read()


def test_container_of_cgroup_for_both_docker_drivers():
    assert container_of_cgroup(docker_cgroup()) == DOCKER_ID
    assert unit_of_cgroup(docker_cgroup()) is None
    # The systemd driver: a scope per container (Docker's documented cgroup path).
    systemd = "0::/system.slice/docker-%s.scope\n" % DOCKER_ID
    assert container_of_cgroup(systemd) == DOCKER_ID and unit_of_cgroup(systemd) == "docker-%s.scope" % DOCKER_ID
    assert container_of_cgroup("0::/system.slice/docker.service\n") is None
    assert container_of_cgroup("0::/docker/abc\n") is None
    assert container_of_cgroup("0::/system.slice/llm-cluster-ray-head.service\n") is None


def test_foreign_owners_leave_out_our_units_and_our_containers():
    ours = {"pid": 1, "comm": "vllm", "unit": None, "container": DOCKER_ID}
    other = {"pid": 2, "comm": "nginx", "unit": None, "container": "f" * 64}
    unit = {"pid": 3, "comm": "raylet", "unit": "llm-cluster-ray-head.service", "container": None}
    assert foreign_owners([ours, other, unit]) == [ours, other]
    assert foreign_owners([ours, other, unit], containers=[DOCKER_ID]) == [other]
    assert describe_owners([other]) == "pid 2 (nginx, container ffffffffffff)"


def make_proc(root, pid, comm, cgroup, inodes):
    base = root / str(pid)
    (base / "fd").mkdir(parents=True)
    (base / "comm").write_text(comm + "\n")
    (base / "cgroup").write_text(cgroup)
    for number, inode in enumerate(inodes):
        os.symlink("socket:[%s]" % inode, str(base / "fd" / str(number + 3)))
    os.symlink("/dev/null", str(base / "fd" / "0"))


def test_listening_ports_on_a_fake_proc_tree(tmp_path):
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "tcp").write_text(TCP)
    (tmp_path / "net" / "tcp6").write_text(TCP6)
    make_proc(tmp_path, 100, "gcs_server", "0::/system.slice/llm-cluster-ray-head.service\n", ["31337"])
    make_proc(tmp_path, 200, "nginx", "0::/system.slice/nginx.service\n", ["4242", "4343"])
    make_proc(tmp_path, 201, "nginx", docker_cgroup(), ["4343"])
    (tmp_path / "self").mkdir()
    ports = listening_ports(str(tmp_path))
    assert ports[6379] == [{"pid": 100, "comm": "gcs_server", "unit": "llm-cluster-ray-head.service", "container": None}]
    assert [(o["pid"], o["container"]) for o in ports[8000]] == [(200, None), (201, DOCKER_ID)]


def test_listening_ports_sees_a_real_socket():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    try:
        port = sock.getsockname()[1]
        owners = listening_ports()[port]
        assert os.getpid() in [o["pid"] for o in owners]
    finally:
        sock.close()
