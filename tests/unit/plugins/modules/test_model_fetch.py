# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""model_fetch against a real rsync daemon on 127.0.0.1 (rsync is a test prerequisite, installed by .ci/run)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import time

import pytest

from ansible_collections.aihost.llm_cluster.plugins.modules import model_fetch

from utils import run_module

pytestmark = pytest.mark.skipif(shutil.which("rsync") is None, reason="rsync is not installed")


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


HOOK = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(model_fetch.__file__)))),
                    "roles", "model_distribution", "files", "sender_wait.py")


def start_daemon(tmp_path, hook="", port=None):
    source = tmp_path / "source"
    (source / "sub").mkdir(parents=True)
    (source / "a.safetensors").write_bytes(os.urandom(3 * 1024 * 1024))
    (source / "sub" / "b.json").write_text('{"b": 1}\n')
    secrets = tmp_path / "secrets"
    secrets.write_text("llmc:s3cret\n")
    secrets.chmod(0o600)
    password = tmp_path / "password"
    password.write_text("s3cret\n")
    password.chmod(0o600)
    port = port or free_port()
    conf = tmp_path / "rsyncd.conf"
    conf.write_text("address = 127.0.0.1\nport = %d\nuse chroot = no\npid file = %s\nlock file = %s\nlog file = %s\n"
                    "[model]\n path = %s\n read only = yes\n auth users = llmc\n secrets file = %s\n"
                    " hosts allow = 127.0.0.1\n%s" % (port, tmp_path / "pid", tmp_path / "lock", tmp_path / "log",
                                                      source, secrets, " pre-xfer exec = %s\n" % hook if hook else ""))
    proc = subprocess.Popen(["rsync", "--daemon", "--no-detach", "--config=%s" % conf])
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            break
        except OSError:
            time.sleep(0.1)
    return proc, {"url": "rsync://llmc@127.0.0.1:%d/model" % port, "source": source, "password": str(password),
                  "dest": tmp_path / "dest", "log": tmp_path / "log"}


@pytest.fixture()
def daemon(tmp_path):
    proc, info = start_daemon(tmp_path)
    yield info
    proc.terminate()
    proc.wait()


@pytest.fixture()
def holding_daemon(tmp_path):
    """A daemon whose pre-xfer exec is the role's hook, holding a request for at most 2 s per try."""
    proc, info = start_daemon(tmp_path, "%s -S -I %s --slice 2" % (sys.executable, HOOK))
    yield info
    proc.terminate()
    proc.wait()


def connections(daemon):
    """Requests the daemon served or turned away, from its log ("rsync on <module>/<paths> from ..." each)."""
    return daemon["log"].read_text().count("] rsync on ")


def arrive_later(path, data, delay):
    """Write path the way rsync does, under a temporary name renamed at the end, after delay seconds."""
    def write():
        temporary = path.parent / (".%s.Xy12Ab" % path.name)
        temporary.write_bytes(data)
        temporary.rename(path)
    timer = threading.Timer(delay, write)
    timer.start()
    return timer


def args(daemon, files, **extra):
    base = {"url": daemon["url"], "dest": str(daemon["dest"]), "files": files, "password_file": daemon["password"],
            "partial_dir": ".llm_cluster-partial"}
    base.update(extra)
    return base


def test_pulls_listed_files_into_their_directories(daemon):
    result = run_module(model_fetch.main, args(daemon, ["a.safetensors", "sub/b.json"]))
    assert result["changed"] and [f["path"] for f in result["files"]] == ["a.safetensors", "sub/b.json"]
    assert (daemon["dest"] / "a.safetensors").read_bytes() == (daemon["source"] / "a.safetensors").read_bytes()
    assert (daemon["dest"] / "sub" / "b.json").read_text() == '{"b": 1}\n'
    assert result["bytes_received"] >= 3 * 1024 * 1024
    # Same mtime as the source: the manifest's fast path holds on the destination.
    assert os.stat(str(daemon["dest"] / "a.safetensors")).st_mtime == os.stat(str(daemon["source"] / "a.safetensors")).st_mtime


def test_a_damaged_file_costs_only_its_differing_blocks(daemon):
    run_module(model_fetch.main, args(daemon, ["a.safetensors"]))
    with open(str(daemon["dest"] / "a.safetensors"), "r+b") as handle:
        handle.seek(1024 * 1024)
        handle.write(b"\0" * 4096)
    result = run_module(model_fetch.main, args(daemon, ["a.safetensors"]))
    assert (daemon["dest"] / "a.safetensors").read_bytes() == (daemon["source"] / "a.safetensors").read_bytes()
    assert result["bytes_received"] < 1024 * 1024


def test_a_stopped_transfer_resumes_from_its_partial_file(daemon):
    source = (daemon["source"] / "a.safetensors").read_bytes()
    partial = daemon["dest"] / ".llm_cluster-partial"
    partial.mkdir(parents=True)
    (partial / "a.safetensors").write_bytes(source[:2 * 1024 * 1024])
    result = run_module(model_fetch.main, args(daemon, ["a.safetensors"]))
    assert (daemon["dest"] / "a.safetensors").read_bytes() == source
    assert result["bytes_received"] < 1536 * 1024
    assert not (partial / "a.safetensors").exists()


def test_waits_for_a_file_the_peer_is_still_receiving(daemon):
    later = daemon["source"] / "c.safetensors"
    timer = threading.Timer(1.5, later.write_bytes, args=(b"x" * 1000,))
    timer.start()
    try:
        result = run_module(model_fetch.main, args(daemon, ["c.safetensors"], wait=30, poll=0.2))
    finally:
        timer.cancel()
    assert result["files"][0]["waited"] >= 1.0
    assert (daemon["dest"] / "c.safetensors").read_bytes() == b"x" * 1000


def test_a_file_that_never_comes_is_named(daemon):
    result = run_module(model_fetch.main, args(daemon, ["never.safetensors"], wait=1, poll=0.2))
    assert result["failed"]
    assert result["msg"].startswith("never.safetensors did not appear at %s within 1s" % daemon["url"])


def test_a_wrong_password_fails_with_rsyncs_reason(daemon, tmp_path):
    wrong = tmp_path / "wrong"
    wrong.write_text("nope\n")
    wrong.chmod(0o600)
    result = run_module(model_fetch.main, args(daemon, ["a.safetensors"], password_file=str(wrong)))
    assert result["failed"] and "rsync of a.safetensors from %s exited 5: " % daemon["url"] in result["msg"]
    # A refused login is not a transient failure: tried once.
    assert result["tries"] == 1


def test_a_port_briefly_closed_is_retried_and_the_pull_passes(tmp_path):
    # The sender's daemon comes up a second after the pull began (a restart, a table reloaded).
    port = free_port()
    started = {}
    timer = threading.Timer(1.0, lambda: started.update(zip(("proc", "info"), start_daemon(tmp_path, port=port))))
    timer.start()
    try:
        info = {"url": "rsync://llmc@127.0.0.1:%d/model" % port, "dest": tmp_path / "dest",
                "password": str(tmp_path / "password")}
        result = run_module(model_fetch.main, args(info, ["a.safetensors"], retries=4, retry_delay=0.5))
    finally:
        timer.join()
        started["proc"].terminate()
        started["proc"].wait()
    assert not result.get("failed"), result
    assert result["pulls"][0]["tries"] >= 2
    assert (tmp_path / "dest" / "a.safetensors").read_bytes() == (tmp_path / "source" / "a.safetensors").read_bytes()


def test_a_port_that_stays_closed_fails_after_the_retries_with_rsync_s_error(tmp_path):
    password = tmp_path / "password"
    password.write_text("s3cret\n")
    password.chmod(0o600)
    info = {"url": "rsync://llmc@127.0.0.1:%d/model" % free_port(), "dest": tmp_path / "dest", "password": str(password)}
    started = time.time()
    result = run_module(model_fetch.main, args(info, ["a.safetensors"], retries=2, retry_delay=0.2))
    assert result["failed"] and result["tries"] == 3
    assert result["msg"].startswith("rsync of a.safetensors from %s exited 10 after 3 tries: " % info["url"]), result["msg"]
    assert "error in socket IO" in result["msg"] or "Connection refused" in result["msg"], result["msg"]
    # Backed off: 0.2 s, then 0.4 s.
    assert time.time() - started >= 0.6
    # The next node of a chain sees the failure at once.
    assert (tmp_path / "dest" / model_fetch.FAILED_MARKER).exists()


@pytest.mark.parametrize("bad, message", [
    ({"files": ["../etc/passwd"]}, "must be a relative path inside the model"),
    ({"files": ["/etc/passwd"]}, "must be a relative path inside the model"),
    ({"url": "ssh://host/model"}, "url must be an rsync daemon module"),
    ({"retries": -1}, "retries and retry_delay must be 0 or more"),
])
def test_bad_inputs_are_refused(daemon, bad, message):
    result = run_module(model_fetch.main, dict(args(daemon, ["a.safetensors"]), **bad))
    assert result["failed"] and message in result["msg"]


def test_check_mode_pulls_nothing(daemon):
    result = run_module(model_fetch.main, args(daemon, ["a.safetensors"]), check_mode=True)
    assert result["changed"] and not (daemon["dest"] / "a.safetensors").exists()


def test_parse_received():
    assert model_fetch.parse_received("Number of files: 1\nTotal bytes received: 3,146,035\n") == 3146035
    assert model_fetch.parse_received("nothing") == 0


def test_a_refused_login_fails_at_once_even_while_waiting(daemon, tmp_path):
    wrong = tmp_path / "wrong"
    wrong.write_text("nope\n")
    wrong.chmod(0o600)
    started = time.time()
    result = run_module(model_fetch.main, args(daemon, ["a.safetensors"], password_file=str(wrong), wait=60))
    assert result["failed"] and "cannot list a.safetensors at %s (rsync exited 5)" % daemon["url"] in result["msg"]
    assert time.time() - started < 30


def test_a_failed_peer_stops_the_wait_and_a_failure_leaves_the_marker(daemon):
    (daemon["source"] / ".llm_cluster-fetch-failed").write_text("rsync of x exited 20\n")
    started = time.time()
    result = run_module(model_fetch.main, args(daemon, ["coming.safetensors"], wait=60, poll=0.2))
    assert result["failed"] and "the node before this one in the chain (%s) failed" % daemon["url"] in result["msg"]
    assert time.time() - started < 30
    # This node failed in turn: the node after it will see the marker, until the next run clears it.
    assert (daemon["dest"] / ".llm_cluster-fetch-failed").exists()
    (daemon["source"] / ".llm_cluster-fetch-failed").unlink()
    run_module(model_fetch.main, args(daemon, ["a.safetensors"]))
    assert not (daemon["dest"] / ".llm_cluster-fetch-failed").exists()


def test_progress_file_reports_bytes_and_percent(daemon):
    progress = daemon["dest"].parent / "progress.json"
    size = (daemon["source"] / "a.safetensors").stat().st_size + (daemon["source"] / "sub" / "b.json").stat().st_size
    run_module(model_fetch.main, args(daemon, ["a.safetensors", "sub/b.json"], progress_file=str(progress), total_bytes=size))
    final = __import__("json").loads(progress.read_text())
    assert final["finished"] and final["files_done"] == 2 and final["files_total"] == 2
    assert final["bytes_done"] == size and final["percent"] == 100.0 and final["file"] is None


def test_partial_size_reads_rsyncs_temporary_file(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".shard[1].safetensors.Ab12Cd").write_bytes(b"x" * 123)
    assert model_fetch.partial_size(str(tmp_path), "sub/shard[1].safetensors") == 123
    assert model_fetch.partial_size(str(tmp_path), "sub/other") == 0


def test_a_holding_sender_lets_the_pull_through_once_the_file_is_complete(holding_daemon):
    timer = arrive_later(holding_daemon["source"] / "c.safetensors", b"x" * 1000, 3.5)
    try:
        result = run_module(model_fetch.main, args(holding_daemon, ["c.safetensors"], wait=60, sender_waits=True))
    finally:
        timer.cancel()
    assert (holding_daemon["dest"] / "c.safetensors").read_bytes() == b"x" * 1000
    assert result["pulls"][0]["paths"] == ["c.safetensors"] and result["files"][0]["waited"] >= 1.0
    # No --list-only polling: the first try was held for its 2 s slice and answered "not yet", the second was
    # held until the file came and brought it.
    assert connections(holding_daemon) == 2


def test_a_file_already_complete_at_a_holding_sender_costs_one_connection(holding_daemon):
    result = run_module(model_fetch.main, args(holding_daemon, ["a.safetensors"], wait=60, sender_waits=True))
    assert result["bytes_received"] >= 3 * 1024 * 1024 and connections(holding_daemon) == 1


def test_a_holding_sender_that_failed_fails_the_chain_with_the_same_message(holding_daemon):
    marker = holding_daemon["source"] / ".llm_cluster-fetch-failed"
    timer = threading.Timer(0.5, marker.write_text, args=("rsync of coming.safetensors exited 20\n",))
    timer.start()
    try:
        result = run_module(model_fetch.main, args(holding_daemon, ["coming.safetensors"], wait=600, sender_waits=True))
    finally:
        timer.cancel()
    assert result["failed"]
    assert "coming.safetensors: the node before this one in the chain (%s) failed" % holding_daemon["url"] in result["msg"]
    assert (holding_daemon["dest"] / ".llm_cluster-fetch-failed").exists()


def test_a_file_that_never_comes_to_a_holding_sender_is_named(holding_daemon):
    result = run_module(model_fetch.main, args(holding_daemon, ["never.safetensors"], wait=1, sender_waits=True))
    assert result["failed"]
    assert result["msg"].startswith("never.safetensors did not appear at %s within 1s" % holding_daemon["url"])
    assert "(last answer: llm_cluster: not yet: never.safetensors)" in result["msg"]


def test_small_files_come_together_over_one_connection(holding_daemon):
    (holding_daemon["source"] / "c.json").write_text("{}\n")
    sizes = {"a.safetensors": 3 * 1024 * 1024, "sub/b.json": 9, "c.json": 3}
    result = run_module(model_fetch.main, args(holding_daemon, ["a.safetensors", "sub/b.json", "c.json"],
                                               sizes=sizes, wait=60, sender_waits=True))
    assert [pull["paths"] for pull in result["pulls"]] == [["sub/b.json", "c.json"], ["a.safetensors"]]
    assert [(f["path"], f["pull"]) for f in result["files"]] == [("sub/b.json", 0), ("c.json", 0), ("a.safetensors", 1)]
    assert (holding_daemon["dest"] / "sub" / "b.json").read_text() == '{"b": 1}\n'
    assert (holding_daemon["dest"] / "c.json").read_text() == "{}\n"
    assert (holding_daemon["dest"] / "a.safetensors").read_bytes() == (holding_daemon["source"] / "a.safetensors").read_bytes()
    assert connections(holding_daemon) == 2


def test_a_batch_is_held_until_every_file_of_it_is_complete(holding_daemon):
    timer = arrive_later(holding_daemon["source"] / "sub" / "late.json", b"{}\n", 1.0)
    try:
        result = run_module(model_fetch.main, args(holding_daemon, ["sub/b.json", "sub/late.json"],
                                                   sizes={"sub/b.json": 9, "sub/late.json": 3}, wait=60,
                                                   sender_waits=True))
    finally:
        timer.cancel()
    assert [pull["paths"] for pull in result["pulls"]] == [["sub/b.json", "sub/late.json"]]
    assert (holding_daemon["dest"] / "sub" / "late.json").read_bytes() == b"{}\n"


def test_pulls_of_batches_the_small_files_first_and_keeps_the_order_of_the_others():
    files = ["model-1.safetensors", "config.json", "model-2.safetensors", "tokenizer.json", ".llm_cluster-manifest.json"]
    sizes = {"model-1.safetensors": 4 << 20, "config.json": 700, "model-2.safetensors": 4 << 20,
             "tokenizer.json": 2 << 20}
    assert model_fetch.pulls_of(files, sizes, 1 << 20) == [
        ["config.json"], ["model-1.safetensors"], ["model-2.safetensors"], ["tokenizer.json"],
        [".llm_cluster-manifest.json"]]
    assert model_fetch.pulls_of(files, sizes, 3 << 20) == [
        ["config.json", "tokenizer.json"], ["model-1.safetensors"], ["model-2.safetensors"],
        [".llm_cluster-manifest.json"]]
    assert model_fetch.pulls_of(files, sizes, 0) == [[path] for path in files]
    # Shards of at most batch_bytes together, in order; a larger one, and one without a size, alone.
    shards = ["s%02d.safetensors" % index for index in range(7)] + [".llm_cluster-manifest.json"]
    shard_sizes = dict.fromkeys(shards[:7], 4 << 20)
    shard_sizes["s03.safetensors"] = 40 << 20
    assert model_fetch.pulls_of(shards, shard_sizes, 1 << 20, 8 << 20) == [
        ["s00.safetensors", "s01.safetensors"], ["s02.safetensors"], ["s03.safetensors"],
        ["s04.safetensors", "s05.safetensors"], ["s06.safetensors"], [".llm_cluster-manifest.json"]]
    assert model_fetch.pulls_of(shards, shard_sizes, 1 << 20, 0) == [[path] for path in shards]
    many = ["f%03d.json" % index for index in range(model_fetch.BATCH_FILES + 2)]
    split = model_fetch.pulls_of(many, dict.fromkeys(many, 10), 1 << 20)
    assert [len(pull) for pull in split] == [model_fetch.BATCH_FILES, 2] and sum(split, []) == many


def test_sizes_that_are_not_numbers_are_refused(daemon):
    result = run_module(model_fetch.main, args(daemon, ["a.safetensors"], sizes={"a.safetensors": "big"}))
    assert result["failed"] and "sizes must map each file to its size in bytes" in result["msg"]
