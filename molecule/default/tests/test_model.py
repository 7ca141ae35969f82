# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""deploy.yml's model step: the head's model is on every node, byte for byte, with its manifest."""

from __future__ import annotations

import json

testinfra_hosts = ["ansible://all"]

MODEL = "/srv/models/tiny"


def test_model_is_on_every_node_as_on_the_head(host):
    manifest = json.loads(host.file(MODEL + "/.llm_cluster-manifest.json").content_string)
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {f["path"] for f in manifest["files"]}
    for entry in manifest["files"]:
        assert host.check_output("sha256sum %s/%s" % (MODEL, entry["path"])).split()[0] == entry["sha256"]
        assert host.file("%s/%s" % (MODEL, entry["path"])).size == entry["size"]


def test_no_transfer_daemon_or_password_left_behind(host):
    assert not host.service("llm-cluster-model-rsyncd").is_running
    assert not host.file("/run/llm_cluster/model/password").exists
    assert not host.file("/run/llm_cluster/model/rsyncd.secrets").exists
