# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import shutil
import stat

import pytest

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _manifest

MIB = 1024 * 1024
EMPTY_SHA = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
BIG = bytes(range(256)) * (20 * MIB // 256) + b"end"  # 20 MiB + 3 bytes: two full chunks and a short one
CONTENTS = {
    "config.json": b'{"architectures": ["LlamaForCausalLM"]}\n',
    "empty.txt": b"",
    "generation_config.json": b'{"do_sample": true}\n',
    "model.safetensors": BIG,
    "sub/deeper/tokenizer.json": b'{"vocab": {}}',
}
PATHS = sorted(CONTENTS)


def sha(data):
    return hashlib.sha256(data).hexdigest()


def expected_digest(contents):
    rows = [[path, len(data), sha(data)] for path, data in sorted(contents.items())]
    return sha(json.dumps(rows, separators=(",", ":")).encode())


def make_tree(root, contents=None):
    for path, data in (CONTENTS if contents is None else contents).items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return str(root)


def set_mtime(path, mtime_ns):
    os.utime(str(path), ns=(mtime_ns, mtime_ns))


def rewrite_keeping_mtime(path, data):
    before = os.stat(str(path)).st_mtime_ns
    path.write_bytes(data)
    set_mtime(path, before)


@pytest.fixture(name="tree")
def fixture_tree(tmp_path):
    return make_tree(tmp_path / "model")


@pytest.fixture(name="built")
def fixture_built(tree):
    manifest, _stats = _manifest.build(tree)
    return tree, manifest


# ---------------------------------------------------------------------------
# Hashing and walking
# ---------------------------------------------------------------------------

def test_sha256_file_crosses_chunk_boundaries(tmp_path):
    path = tmp_path / "big"
    path.write_bytes(BIG)
    assert len(BIG) == 20 * MIB + 3
    assert _manifest.sha256_file(str(path)) == sha(BIG)
    assert _manifest.sha256_file(str(path), chunk_size=1000) == sha(BIG)
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert _manifest.sha256_file(str(empty)) == EMPTY_SHA


def test_hash_files_in_parallel_matches_serial(tree):
    paths = [os.path.join(tree, *path.split("/")) for path in PATHS]
    want = {os.path.join(tree, *path.split("/")): sha(CONTENTS[path]) for path in PATHS}
    assert _manifest.hash_files(paths, workers=4) == want
    assert _manifest.hash_files(paths, workers=1) == want
    assert _manifest.hash_files(paths) == want
    assert _manifest.hash_files([], workers=4) == {}
    assert 1 <= _manifest.default_workers() <= 8


def test_hash_files_raises_for_an_unreadable_file(tree):
    with pytest.raises(FileNotFoundError):
        _manifest.hash_files([os.path.join(tree, "config.json"), os.path.join(tree, "nope")], workers=2)


def test_walk_lists_regular_files_sorted_with_slashes(tree):
    files = _manifest.walk(tree)
    assert [(entry["path"], entry["size"]) for entry in files] == [(path, len(CONTENTS[path])) for path in PATHS]
    for entry in files:
        assert entry["mtime"] == os.stat(os.path.join(tree, entry["path"])).st_mtime_ns
        assert isinstance(entry["mtime"], int)


def test_walk_of_a_missing_root_raises(tmp_path):
    with pytest.raises(FileNotFoundError):
        _manifest.walk(str(tmp_path / "absent"))


def test_bookkeeping_and_rsync_leftovers_are_ignored(tree):
    extra = {
        ".llm_cluster-manifest.json": b"{}",
        ".llm_cluster-verified.json": b"{}",
        ".llm_cluster-manifest.json.tmp-k2j4h5g6": b"{",
        ".model.safetensors.Xa3bQ9": b"partial",
        ".~tmp~/model.safetensors": b"delayed",
        "sub/.tokenizer.json.AbC123": b"partial",
        "sub/.~tmp~": b"delayed file",
        # kept: bookkeeping names below the top level, hidden files that are not rsync temporaries
        "sub/.llm_cluster-verified.json": b"kept",
        ".gitattributes": b"*.safetensors filter=lfs\n",
        ".hidden.tar": b"kept",
        ".model.safetensors.Xa3bQ": b"kept, five characters",
    }
    make_tree(pathlib.Path(tree), extra)
    paths = [entry["path"] for entry in _manifest.walk(tree)]
    assert paths == sorted(PATHS + ["sub/.llm_cluster-verified.json", ".gitattributes", ".hidden.tar", ".model.safetensors.Xa3bQ"])
    assert _manifest.is_rsync_leftover(".a.b.c.XXXXXX") is True
    assert _manifest.is_rsync_leftover(".cache", is_dir=True) is False
    assert _manifest.is_rsync_leftover("model.safetensors.abcdef") is False


def test_symlinks_are_not_followed_out_of_the_tree(tree, tmp_path):
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"outside")
    (tmp_path / "outside_dir").mkdir()
    (tmp_path / "outside_dir" / "f").write_bytes(b"f")
    os.symlink("config.json", os.path.join(tree, "alias.json"))
    os.symlink("../../model.safetensors", os.path.join(tree, "sub", "deeper", "weights"))
    os.symlink(str(outside), os.path.join(tree, "escape.bin"))
    os.symlink("missing-target", os.path.join(tree, "dangling"))
    os.symlink("sub", os.path.join(tree, "sub-link"))
    os.symlink(str(tmp_path / "outside_dir"), os.path.join(tree, "dir-escape"))
    manifest, stats = _manifest.build(tree)
    sizes = {entry["path"]: entry["size"] for entry in manifest["files"]}
    assert sizes["alias.json"] == len(CONTENTS["config.json"])
    assert sizes["sub/deeper/weights"] == len(BIG)
    assert sorted(sizes) == sorted(PATHS + ["alias.json", "sub/deeper/weights"])
    assert stats["skipped"] == ["dangling", "dir-escape", "escape.bin", "sub-link"]
    assert {entry["path"]: entry["sha256"] for entry in manifest["files"]}["sub/deeper/weights"] == sha(BIG)


# ---------------------------------------------------------------------------
# Build
# ---------------------------------------------------------------------------

def test_build_lists_every_file_with_size_mtime_and_sha256(tree):
    manifest, stats = _manifest.build(tree, workers=3)
    assert manifest == {
        "version": 1,
        "files": [{"path": path, "size": len(CONTENTS[path]), "sha256": sha(CONTENTS[path]),
                   "mtime": os.stat(os.path.join(tree, path)).st_mtime_ns} for path in PATHS],
        "total_bytes": sum(len(data) for data in CONTENTS.values()),
        "digest": expected_digest(CONTENTS),
    }
    assert manifest["total_bytes"] == 20 * MIB + 3 + 40 + 20 + 13
    assert {entry["path"]: entry["sha256"] for entry in manifest["files"]}["empty.txt"] == EMPTY_SHA
    assert stats == {"hashed": 5, "reused": 0, "hashed_bytes": manifest["total_bytes"], "skipped": []}


def test_digest_ignores_mtime_and_order(tree, tmp_path):
    first, _stats = _manifest.build(tree)
    for index, path in enumerate(PATHS):
        set_mtime(os.path.join(tree, path), 1_000_000_000 * (index + 1) + 7)
    second, _stats = _manifest.build(tree)
    assert second["digest"] == first["digest"] == expected_digest(CONTENTS)
    assert [entry["mtime"] for entry in second["files"]] == [1_000_000_007, 2_000_000_007, 3_000_000_007, 4_000_000_007, 5_000_000_007]
    assert _manifest.canonical_digest(list(reversed(second["files"]))) == first["digest"]
    copy, _stats = _manifest.build(make_tree(tmp_path / "copy"))
    assert copy["digest"] == first["digest"]
    changed = dict(CONTENTS, **{"empty.txt": b"x"})
    assert _manifest.build(make_tree(tmp_path / "other", changed))[0]["digest"] == expected_digest(changed) != first["digest"]


def test_second_build_reuses_every_sha256(built):
    tree, first = built
    second, stats = _manifest.build(tree, previous=first)
    assert second == first
    assert stats == {"hashed": 0, "reused": 5, "hashed_bytes": 0, "skipped": []}


def test_same_size_new_mtime_is_hashed_again(built):
    tree, first = built
    path = os.path.join(tree, "sub", "deeper", "tokenizer.json")
    with open(path, "wb") as handle:
        handle.write(b'{"vocab": []}')
    set_mtime(path, first["files"][-1]["mtime"] + 1_000_000_000)
    second, stats = _manifest.build(tree, previous=first)
    assert stats["hashed"] == 1 and stats["reused"] == 4 and stats["hashed_bytes"] == 13
    assert second["files"][-1]["sha256"] == sha(b'{"vocab": []}')
    assert second["digest"] == expected_digest(dict(CONTENTS, **{"sub/deeper/tokenizer.json": b'{"vocab": []}'}))


def test_fast_path_trusts_size_and_mtime_until_full(built, tmp_path):
    tree, first = built
    rewrite_keeping_mtime(tmp_path / "model" / "config.json", b'{"architectures": ["LlamaForCausalLX"]}\n')
    stale, stats = _manifest.build(tree, previous=first)
    assert stats["hashed"] == 0 and stale["digest"] == first["digest"]
    fresh, stats = _manifest.build(tree, previous=first, full=True)
    assert stats == {"hashed": 5, "reused": 0, "hashed_bytes": first["total_bytes"], "skipped": []}
    assert fresh["files"][0]["sha256"] == sha(b'{"architectures": ["LlamaForCausalLX"]}\n')
    assert fresh["digest"] != first["digest"]


def test_a_malformed_previous_manifest_is_ignored(built):
    tree, first = built
    broken = dict(first, digest="0" * 64)
    _again, stats = _manifest.build(tree, previous=broken)
    assert stats["hashed"] == 5
    _again, stats = _manifest.build(tree, previous={"version": 99})
    assert stats["hashed"] == 5


def test_check_manifest_rejects_bad_manifests(built):
    _tree, manifest = built
    assert _manifest.check_manifest(manifest) == manifest
    with pytest.raises(ValueError, match="digest"):
        _manifest.check_manifest(dict(manifest, digest="0" * 64))
    with pytest.raises(ValueError, match="version"):
        _manifest.check_manifest(dict(manifest, version=2))
    for bad_path in ("../etc/passwd", "/etc/passwd", "a//b", "./a", ""):
        files = [dict(manifest["files"][0], path=bad_path)]
        with pytest.raises(ValueError, match="relative path"):
            _manifest.check_manifest({"version": 1, "files": files, "digest": _manifest.canonical_digest(files)})
    files = [manifest["files"][0], manifest["files"][0]]
    with pytest.raises(ValueError, match="twice"):
        _manifest.check_manifest({"version": 1, "files": files, "digest": _manifest.canonical_digest(files)})


# ---------------------------------------------------------------------------
# Verify
# ---------------------------------------------------------------------------

def copy_of(tree, tmp_path, name="copy"):
    target = str(tmp_path / name)
    shutil.copytree(tree, target)
    return target


def test_verify_a_faithful_copy(built, tmp_path):
    tree, manifest = built
    copy = copy_of(tree, tmp_path)
    for path in PATHS:
        set_mtime(os.path.join(copy, path), 42)
    result = _manifest.verify(copy, manifest, workers=2)
    assert result == {
        "ok": True,
        "mismatches": [],
        "bad_files": [],
        "present_bytes": manifest["total_bytes"],
        "missing_bytes": 0,
        "hashed": 5,
        "trusted": 0,
        "digest": manifest["digest"],
        "total_bytes": manifest["total_bytes"],
        "record": {"version": 1, "digest": manifest["digest"],
                   "files": {path: {"size": len(CONTENTS[path]), "mtime": 42, "sha256": sha(CONTENTS[path])} for path in PATHS}},
    }


def test_verify_reports_missing_size_sha256_and_extra(built, tmp_path):
    tree, manifest = built
    copy = copy_of(tree, tmp_path)
    os.remove(os.path.join(copy, "config.json"))
    with open(os.path.join(copy, "sub", "deeper", "tokenizer.json"), "wb") as handle:
        handle.write(b"{}")
    corrupt = bytearray(BIG)
    corrupt[12 * MIB] ^= 0xFF
    with open(os.path.join(copy, "model.safetensors"), "wb") as handle:
        handle.write(corrupt)
    with open(os.path.join(copy, "notes.txt"), "wb") as handle:
        handle.write(b"hello")
    result = _manifest.verify(copy, manifest)
    assert result["ok"] is False
    assert result["mismatches"] == [
        {"path": "config.json", "reason": "missing", "expected": 40, "found": None},
        {"path": "model.safetensors", "reason": "sha256", "expected": sha(BIG), "found": sha(bytes(corrupt))},
        {"path": "notes.txt", "reason": "extra", "expected": None, "found": 5},
        {"path": "sub/deeper/tokenizer.json", "reason": "size", "expected": 13, "found": 2},
    ]
    assert result["bad_files"] == ["config.json", "model.safetensors", "sub/deeper/tokenizer.json"]
    assert result["present_bytes"] == 20  # empty.txt (0) + generation_config.json (20)
    assert result["missing_bytes"] == 40 + len(BIG) + 13
    assert result["hashed"] == 3 and result["trusted"] == 0
    assert sorted(result["record"]["files"]) == ["empty.txt", "generation_config.json"]


def test_verify_an_extra_file_alone_is_not_ok_but_sends_nothing(built, tmp_path):
    tree, manifest = built
    copy = copy_of(tree, tmp_path)
    with open(os.path.join(copy, "sub", "stale.safetensors"), "wb") as handle:
        handle.write(b"old")
    result = _manifest.verify(copy, manifest)
    assert result["ok"] is False and result["bad_files"] == [] and result["missing_bytes"] == 0
    assert result["present_bytes"] == manifest["total_bytes"]


def test_verify_a_missing_root(built, tmp_path):
    _tree, manifest = built
    result = _manifest.verify(str(tmp_path / "nowhere" / "model"), manifest)
    assert result["ok"] is False
    assert result["bad_files"] == PATHS
    assert [item["reason"] for item in result["mismatches"]] == ["missing"] * 5
    assert result["present_bytes"] == 0 and result["missing_bytes"] == manifest["total_bytes"]
    assert result["hashed"] == 0 and result["trusted"] == 0


def test_verify_ignores_bookkeeping_and_rsync_leftovers(built, tmp_path):
    tree, manifest = built
    copy = copy_of(tree, tmp_path)
    make_tree(pathlib.Path(copy), {".llm_cluster-manifest.json": b"{}", ".llm_cluster-verified.json": b"{}",
                                   ".model.safetensors.Qz81Kp": b"partial", ".~tmp~/config.json": b"delayed",
                                   "sub/.llm_cluster-partial/shard.safetensors": b"half"})
    assert _manifest.verify(copy, manifest)["ok"] is True


def test_verify_trusts_unchanged_files_from_a_matching_record(built, tmp_path):
    tree, manifest = built
    copy = copy_of(tree, tmp_path)
    record = _manifest.verify(copy, manifest)["record"]
    again = _manifest.verify(copy, manifest, record=record)
    assert again["ok"] is True and again["hashed"] == 0 and again["trusted"] == 5
    assert again["record"] == record
    assert _manifest.verify(copy, manifest, record=record, full=True)["hashed"] == 5
    other = dict(record, digest="f" * 64)
    result = _manifest.verify(copy, manifest, record=other)
    assert result["hashed"] == 5 and result["trusted"] == 0


def test_verify_rehashes_a_file_whose_mtime_changed(built, tmp_path):
    tree, manifest = built
    copy = copy_of(tree, tmp_path)
    record = _manifest.verify(copy, manifest)["record"]
    target = os.path.join(copy, "generation_config.json")
    with open(target, "wb") as handle:
        handle.write(b'{"do_sample": fals}\n')
    set_mtime(target, record["files"]["generation_config.json"]["mtime"] + 5)
    result = _manifest.verify(copy, manifest, record=record)
    assert result["hashed"] == 1 and result["trusted"] == 4
    assert result["bad_files"] == ["generation_config.json"]
    assert result["mismatches"] == [{"path": "generation_config.json", "reason": "sha256", "expected": sha(CONTENTS["generation_config.json"]),
                                     "found": sha(b'{"do_sample": fals}\n')}]


def test_verify_trusts_the_record_until_full(built, tmp_path):
    tree, manifest = built
    copy = copy_of(tree, tmp_path)
    record = _manifest.verify(copy, manifest)["record"]
    rewrite_keeping_mtime(pathlib.Path(copy) / "generation_config.json", b'{"do_sample": fals}\n')
    assert _manifest.verify(copy, manifest, record=record)["ok"] is True
    result = _manifest.verify(copy, manifest, record=record, full=True)
    assert result["ok"] is False and result["bad_files"] == ["generation_config.json"] and result["trusted"] == 0


def test_verify_rejects_a_bad_manifest(tree):
    with pytest.raises(ValueError):
        _manifest.verify(tree, {"version": 1, "files": [], "digest": "nope"})


# ---------------------------------------------------------------------------
# JSON files
# ---------------------------------------------------------------------------

def test_save_json_is_atomic_and_leaves_0644(tmp_path):
    path = str(tmp_path / _manifest.MANIFEST_NAME)
    old_umask = os.umask(0o077)
    try:
        _manifest.save_json(path, {"b": 1, "a": [1, 2]})
        _manifest.save_json(path, {"b": 2})
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
    assert _manifest.load_json(path) == {"b": 2}
    with open(path, encoding="utf-8") as handle:
        assert handle.read() == '{\n "b": 2\n}\n'
    assert os.listdir(str(tmp_path)) == [_manifest.MANIFEST_NAME]


def test_save_json_cleans_up_when_it_fails(tmp_path):
    path = str(tmp_path / "out.json")
    with pytest.raises(TypeError):
        _manifest.save_json(path, {"not json": object()})
    assert os.listdir(str(tmp_path)) == []


def test_load_json(tmp_path):
    assert _manifest.load_json(str(tmp_path / "absent.json")) is None
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(ValueError, match="not valid JSON"):
        _manifest.load_json(str(bad))
