# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The read and atomic-write helpers that the state file, the manifest and the irqbalance file share."""

from __future__ import annotations

import os
import stat

import pytest

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _fileio


def test_read_bytes_and_text(tmp_path):
    path = tmp_path / "comm"
    path.write_bytes(b"VLLM::EngineCor\n\xff")
    assert _fileio.read_bytes(str(path)) == b"VLLM::EngineCor\n\xff"
    assert _fileio.read_text(str(path)) == "VLLM::EngineCor\n\ufffd"
    assert _fileio.read_text(str(path), encoding="ascii", errors="strict") is None


def test_read_of_a_missing_file_or_directory_is_none(tmp_path):
    assert _fileio.read_bytes(str(tmp_path / "gone")) is None
    assert _fileio.read_text(str(tmp_path / "gone")) is None
    assert _fileio.read_text(str(tmp_path)) is None


def test_atomic_write_new_file_gets_0644_whatever_the_umask(tmp_path):
    path = str(tmp_path / "irqbalance")
    old_umask = os.umask(0o077)
    try:
        assert _fileio.atomic_write(path, "IRQBALANCE_BANNED_CPULIST=0-1\n") == path
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
    with open(path, encoding="utf-8") as handle:
        assert handle.read() == "IRQBALANCE_BANNED_CPULIST=0-1\n"
    assert os.listdir(str(tmp_path)) == ["irqbalance"]


def test_atomic_write_keeps_the_mode_of_the_file_it_replaces(tmp_path):
    path = tmp_path / "config"
    path.write_text("old\n")
    os.chmod(str(path), 0o640)
    _fileio.atomic_write(str(path), b"new\n")
    assert path.read_bytes() == b"new\n"
    assert stat.S_IMODE(os.stat(str(path)).st_mode) == 0o640


def test_atomic_write_explicit_mode_and_directory(tmp_path):
    path = str(tmp_path / "a" / "b" / "state.json")
    _fileio.atomic_write(path, b"{}\n", mode=0o600, dir_mode=0o755, prefix=".state.", suffix=".tmp")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert os.listdir(str(tmp_path / "a" / "b")) == ["state.json"]


def test_atomic_write_without_dir_mode_needs_the_directory(tmp_path):
    with pytest.raises(FileNotFoundError):
        _fileio.atomic_write(str(tmp_path / "missing" / "file"), "x")
    assert not (tmp_path / "missing").exists()


def test_atomic_write_uses_the_given_move_with_the_temporary_name(tmp_path):
    moves = []

    def move(src, dest):
        moves.append((os.path.basename(src), os.path.basename(dest)))
        os.rename(src, dest)

    path = str(tmp_path / "irqbalance")
    _fileio.atomic_write(path, "x\n", move=move)
    (src, dest), = moves
    assert src.startswith(".irqbalance.") and dest == "irqbalance"
    _fileio.atomic_write(path, "y\n", prefix="irqbalance.tmp-", move=move)
    assert moves[1][0].startswith("irqbalance.tmp-")
    assert os.listdir(str(tmp_path)) == ["irqbalance"]


def test_a_failed_move_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "config"
    path.write_text("old\n")

    def refuse(src, dest):
        raise OSError(13, "Permission denied")

    with pytest.raises(OSError, match="Permission denied"):
        _fileio.atomic_write(str(path), "new\n", move=refuse)
    assert path.read_text() == "old\n"
    assert os.listdir(str(tmp_path)) == ["config"]


def test_fsync_dir_ignores_what_cannot_be_opened(tmp_path):
    assert _fileio.fsync_dir(str(tmp_path / "absent")) is None
    assert _fileio.fsync_dir(str(tmp_path)) is None
