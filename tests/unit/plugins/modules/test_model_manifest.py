# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

import hashlib
import json
import os
import shutil

import pytest

from utils import run_module

from ansible_collections.aihost.llm_cluster.plugins.modules import model_manifest

MANIFEST = ".llm_cluster-manifest.json"
RECORD = ".llm_cluster-verified.json"
CONTENTS = {
    "config.json": b'{"model_type": "llama"}\n',
    "model-00001-of-00002.safetensors": b"\x01" * 300000,
    "model-00002-of-00002.safetensors": b"\x02" * 200000,
    "tokenizer/tokenizer.json": b'{"vocab": {}}',
}


@pytest.fixture(name="source")
def fixture_source(tmp_path):
    root = tmp_path / "src"
    for path, data in CONTENTS.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    return str(root)


def build(path, **extra):
    return run_module(model_manifest.main, dict(path=path, state="built", **extra))


def verify(path, **extra):
    return run_module(model_manifest.main, dict(path=path, state="verified", **extra))


def read_json(path):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def test_built_writes_the_manifest_once(source):
    first = build(source)
    assert first["changed"] is True
    assert first["files"] == 4 and first["total_bytes"] == 24 + 300000 + 200000 + 13
    assert first["hashed"] == 4 and first["reused"] == 0 and first["skipped"] == []
    assert first["manifest_path"] == os.path.join(source, MANIFEST)
    assert read_json(first["manifest_path"]) == first["manifest"]
    assert first["manifest"]["digest"] == first["digest"]
    assert [entry["path"] for entry in first["manifest"]["files"]] == sorted(CONTENTS)
    assert first["manifest"]["files"][0]["sha256"] == hashlib.sha256(CONTENTS["config.json"]).hexdigest()
    assert oct(os.stat(first["manifest_path"]).st_mode & 0o777) == "0o644"
    second = build(source)
    assert second["changed"] is False
    assert second["hashed"] == 0 and second["reused"] == 4
    assert second["manifest"] == first["manifest"]


def test_built_rewrites_after_a_change(source):
    first = build(source)
    with open(os.path.join(source, "tokenizer", "added.txt"), "wb") as handle:
        handle.write(b"new")
    second = build(source, workers=2)
    assert second["changed"] is True and second["hashed"] == 1 and second["reused"] == 4
    assert second["digest"] != first["digest"]
    assert read_json(second["manifest_path"]) == second["manifest"]


def test_built_in_check_mode_writes_nothing(source):
    result = run_module(model_manifest.main, dict(path=source, state="built"), check_mode=True)
    assert result["changed"] is True and result["files"] == 4
    assert not os.path.exists(os.path.join(source, MANIFEST))


def test_built_diff_lists_paths_and_sizes(source):
    result = run_module(model_manifest.main, dict(path=source, state="built"), diff=True)
    assert result["diff"]["before"] == ""
    assert result["diff"]["after"] == ("config.json 24\nmodel-00001-of-00002.safetensors 300000\n"
                                       "model-00002-of-00002.safetensors 200000\ntokenizer/tokenizer.json 13\n")
    again = run_module(model_manifest.main, dict(path=source, state="built"), diff=True)
    assert again["changed"] is False and again["diff"]["before"] == again["diff"]["after"]


def test_built_fails_on_a_missing_path(tmp_path):
    missing = str(tmp_path / "absent")
    result = build(missing)
    assert result["failed"] is True
    assert missing in result["msg"] and "does not exist" in result["msg"] and "set path to the model directory" in result["msg"]


def test_negative_workers_fail(source):
    assert build(source, workers=-1)["failed"] is True


def test_verified_reports_a_corrupted_file_and_records_only_when_ok(source, tmp_path):
    manifest = build(source)["manifest"]
    copy = str(tmp_path / "copy")
    shutil.copytree(source, copy)
    os.remove(os.path.join(copy, MANIFEST))
    shard = os.path.join(copy, "model-00002-of-00002.safetensors")
    with open(shard, "r+b") as handle:
        handle.seek(100000)
        handle.write(b"\x00")

    bad = verify(copy, manifest=manifest)
    assert bad.get("failed") is not True
    assert bad["changed"] is False and bad["ok"] is False
    assert bad["bad_files"] == ["model-00002-of-00002.safetensors"]
    assert [item["reason"] for item in bad["mismatches"]] == ["sha256"]
    assert bad["present_bytes"] == 24 + 300000 + 13 and bad["missing_bytes"] == 200000
    assert bad["hashed"] == 4 and bad["trusted"] == 0 and bad["digest"] == manifest["digest"]
    assert bad["free_bytes"] > 0
    assert not os.path.exists(os.path.join(copy, RECORD))

    shutil.copy2(os.path.join(source, "model-00002-of-00002.safetensors"), shard)
    checked = run_module(model_manifest.main, dict(path=copy, state="verified", manifest=manifest), check_mode=True)
    assert checked["ok"] is True and checked["changed"] is True
    assert not os.path.exists(os.path.join(copy, RECORD))

    good = verify(copy, manifest=manifest)
    assert good["ok"] is True and good["changed"] is True and good["bad_files"] == [] and good["mismatches"] == []
    assert good["present_bytes"] == good["total_bytes"] and good["missing_bytes"] == 0
    record = read_json(os.path.join(copy, RECORD))
    assert record["digest"] == manifest["digest"] and sorted(record["files"]) == sorted(CONTENTS)
    assert "record" not in good

    again = verify(copy, manifest=manifest)
    assert again["ok"] is True and again["changed"] is False
    assert again["hashed"] == 0 and again["trusted"] == 4
    full = verify(copy, manifest=manifest, full=True)
    assert full["ok"] is True and full["changed"] is False and full["hashed"] == 4 and full["trusted"] == 0


def test_verified_reads_the_manifest_file_when_none_is_given(source, tmp_path):
    build(source)
    copy = str(tmp_path / "copy")
    shutil.copytree(source, copy)
    result = verify(copy, record=False)
    assert result["ok"] is True and result["changed"] is False
    assert not os.path.exists(os.path.join(copy, RECORD))


def test_verified_without_any_manifest_fails(source):
    result = verify(source)
    assert result["failed"] is True and MANIFEST in result["msg"]


def test_verified_rejects_a_tampered_manifest(source):
    manifest = build(source)["manifest"]
    manifest["files"][0]["size"] = 1
    result = verify(source, manifest=manifest)
    assert result["failed"] is True and "invalid manifest" in result["msg"]


def test_verified_on_a_missing_path(source, tmp_path):
    manifest = build(source)["manifest"]
    target = str(tmp_path / "not" / "yet" / "model")
    result = verify(target, manifest=manifest)
    assert result.get("failed") is not True
    assert result["ok"] is False and result["changed"] is False
    assert result["bad_files"] == sorted(CONTENTS)
    assert result["missing_bytes"] == manifest["total_bytes"] and result["present_bytes"] == 0
    assert result["free_bytes"] > 0
    assert not os.path.exists(target)


def test_free_bytes_uses_the_nearest_existing_parent(tmp_path):
    info = os.statvfs(str(tmp_path))
    assert model_manifest.free_bytes(str(tmp_path / "a" / "b")) > 0
    assert abs(model_manifest.free_bytes(str(tmp_path / "a" / "b")) - info.f_bavail * info.f_frsize) < 1 << 30
