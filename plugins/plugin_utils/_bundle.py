# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The offline bundle: the nodes' platforms, pip's platform tags for them, the pins of downloaded wheels, and the
engine images' archive names.

Pure functions (no Ansible objects), used by the ``bundle_*`` filters.
"""

from __future__ import annotations

import json
import os
import re

from ansible_collections.aihost.llm_cluster.plugins.module_utils._manifest import canonical_digest
from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _inventory_validation

ARCHES = ("x86_64", "aarch64")
# The oldest glibc of a manylinux_2_x tag pip is given (manylinux2014 is 2.17).
OLDEST_GLIBC = 17
_PLATFORM = re.compile(r"^(?P<arch>[a-z0-9_]+)/(?P<python>3\.\d{1,2})$")
_VERSION_TAIL = re.compile(r"^[A-Za-z0-9.+!_]+$")


def platform(host, value, arch_fact=None, python_fact=None):
    """A node's platform ``{"arch", "python", "name"}``: from ``value`` ("aarch64/3.9") when given, else from
    the node's facts. Raises ValueError naming the host and the fix."""
    if value:
        match = _PLATFORM.match(str(value))
        if not match:
            raise ValueError("%s: bundle_platform %r is not ARCH/PYTHON (for example aarch64/3.9 on a Kunpeng node "
                             "with openEuler 22.03)" % (host, value))
        arch, python = match.group("arch"), match.group("python")
    else:
        if not arch_fact or not python_fact:
            raise ValueError("%s: its platform is unknown: reach the node once from here, or set bundle_platform "
                             "(ARCH/PYTHON, for example x86_64/3.11) for it" % host)
        arch, python = str(arch_fact), ".".join(str(python_fact).split(".")[:2])
    if arch == "arm64":
        arch = "aarch64"
    if arch not in ARCHES:
        raise ValueError("%s: architecture %r has no wheels of the engine; the bundle serves %s"
                         % (host, arch, " and ".join(ARCHES)))
    return {"arch": arch, "python": python, "name": "%s-py%s" % (arch, python)}


def pip_platforms(arch, glibc):
    """pip's --platform values for a node with this architecture and glibc: every manylinux_2_x tag up to its
    glibc, newest first, and manylinux2014 (pip does not widen one tag to the older ones)."""
    match = re.match(r"^2\.(\d{2})$", str(glibc))
    if arch not in ARCHES:
        raise ValueError("bundle: architecture %r is not one of %s" % (arch, ", ".join(ARCHES)))
    if not match or int(match.group(1)) < OLDEST_GLIBC:
        raise ValueError("bundle_glibc %r is not a glibc version of 2.17 or later (ldd --version on a node)" % (glibc,))
    newest = int(match.group(1))
    return ["manylinux_2_%d_%s" % (minor, arch) for minor in range(newest, OLDEST_GLIBC - 1, -1)] + [
        "manylinux2014_%s" % arch]


def wheel_pins(filenames, where="the bundle"):
    """``name==version`` lines, sorted, for the wheels among ``filenames`` (PEP 503 names, the wheel's own version,
    a local label included). Raises ValueError when one project has two versions there."""
    found = {}
    for name in sorted(filenames):
        if not name.endswith(".whl"):
            continue
        parts = name[:-len(".whl")].split("-")
        if len(parts) < 5 or not _VERSION_TAIL.match(parts[1]):
            raise ValueError("%s: %s is not a wheel's file name (name-version-python-abi-platform.whl)" % (where, name))
        project = re.sub(r"[-_.]+", "-", parts[0]).lower()
        if project in found and found[project] != parts[1]:
            raise ValueError("%s holds two versions of %s (%s and %s): build the bundle into an empty directory"
                             % (where, project, found[project], parts[1]))
        found[project] = parts[1]
    return ["%s==%s" % item for item in sorted(found.items())]


_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def _is_image_ref(ref):
    """An image name with its tag, by the grammar the inventory's image_name and image_tag are checked with (no
    digest form: an archive is saved by name, its ID and repository digests are recorded beside it)."""
    if not isinstance(ref, str):
        return False
    name, _sep, tag = ref.rpartition(":")
    return bool(name) and "/" not in tag and bool(_inventory_validation.IMAGE_NAME_RE.fullmatch(name)) \
        and bool(_inventory_validation.IMAGE_TAG_RE.fullmatch(tag))


def image_problems(refs, digests):
    """Messages for the images asked for (``bundle_images``) and their pins (``bundle_image_digests``); [] when
    every one is a name:tag and every pin a sha256 of one of them."""
    if not isinstance(refs, list):
        return ["bundle_images must be a list of image names with their tag (name:tag), not %s" % type(refs).__name__]
    problems = []
    for ref in refs:
        if not _is_image_ref(ref):
            problems.append("bundle_images: %r is not an image name with its tag (for example "
                            "quay.io/ascend/vllm-ascend:v0.9.1; the ID and digests are recorded, pin them in "
                            "bundle_image_digests)" % (ref,))
    if not isinstance(digests, dict):
        return problems + ["bundle_image_digests must map an image of bundle_images to its sha256 (ID or repository "
                           "digest), not %s" % type(digests).__name__]
    for ref, digest in sorted(digests.items(), key=lambda item: str(item[0])):
        if ref not in refs:
            problems.append("bundle_image_digests names %r, which is not in bundle_images" % (ref,))
        elif not isinstance(digest, str) or not _DIGEST.match(digest):
            problems.append("bundle_image_digests: %r for %s is not sha256:<64 hex digits> (docker images --no-trunc, "
                            "or a repository digest)" % (digest, ref))
    return problems


def image_archive(ref):
    """The archive's path under the bundle's content for an image name:tag: images/<name with / and : as _>.tar."""
    return "images/%s.tar" % re.sub(r"[/:]", "_", ref)


def _normal(ref):
    """A reference as Docker lists it in RepoTags: no docker.io/ nor library/ prefix."""
    for prefix in ("docker.io/library/", "docker.io/", "library/"):
        if ref.startswith(prefix):
            return ref[len(prefix):]
    return ref


def image_records(refs, images):
    """{ref: {"ref", "id", "repo_digests", "archive"}} for the images of ``refs`` found among ``images`` (the
    ``images`` of docker_image_info: Id, RepoTags, RepoDigests); a ref not found is not in the result."""
    records = {}
    for ref in refs:
        for image in images or []:
            if _normal(ref) in [_normal(tag) for tag in image.get("RepoTags") or []]:
                records[ref] = {"ref": ref, "id": image.get("Id"), "repo_digests": sorted(image.get("RepoDigests") or []),
                                "archive": image_archive(ref)}
                break
    return records


def image_pin_problems(records, digests):
    """Messages for each pinned image (``bundle_image_digests``) whose ID and repository digests do not hold its pin."""
    problems = []
    for ref, digest in sorted(digests.items()):
        record = records.get(ref)
        if record is None:
            continue
        held = [record["id"]] + [entry.split("@", 1)[-1] for entry in record["repo_digests"]]
        if digest not in held:
            shown = ", ".join(record["repo_digests"]) or "none"
            problems.append("%s is %s (repository digests %s), not the pinned %s: pull the pinned image, or pin this "
                            "one in bundle_image_digests" % (ref, record["id"], shown, digest))
    return problems


def mismatch_line(mismatch):
    """One line for a file of a bundle that does not match its manifest (model_manifest's ``mismatches``)."""
    reason, path = mismatch.get("reason"), mismatch.get("path")
    if reason == "missing":
        return "%s is missing (%s bytes expected)" % (path, mismatch.get("expected"))
    if reason == "size":
        return "%s has %s bytes, the manifest %s" % (path, mismatch.get("found"), mismatch.get("expected"))
    if reason == "sha256":
        return "%s is damaged: SHA-256 %s, the manifest %s" % (path, mismatch.get("found"), mismatch.get("expected"))
    if reason == "extra":
        return "%s is not in the manifest (%s bytes): added after the bundle was built" % (path, mismatch.get("found"))
    return "%s: %s" % (path, reason)


# The items a node takes from a bundle (llm_cluster_bundle), as the roles' defaults read them.
ITEMS = ("wheels", "lock", "image_archive", "image_id", "model", "platform")
# The items the chain carries to the nodes (llm_cluster_bundle_node_path): the nodes read them there, and the
# controller copies them to no node. The model takes its own chain to model_path; the lock and the image's ID are
# read on the controller.
CARRIED = ("wheels", "image_archive")
# Where the bundle's content lands on every node unless llm_cluster_bundle_node_path says otherwise.
NODE_PATH = "/var/cache/llm_cluster/bundle"
_NODE_PATH = re.compile(r"^(/[A-Za-z0-9._+@-]+)+$")


def _content(document):
    """The folder of a manifest's files, under the bundle's directory."""
    return document.get("content") if isinstance(document.get("content"), str) else "content"


def _listed(document):
    """{path under the content: size} of a manifest's files; {} when it lists none."""
    files = document.get("files") if isinstance(document, dict) else None
    return {entry["path"]: entry.get("size") for entry in files or []
            if isinstance(entry, dict) and isinstance(entry.get("path"), str)}


def node_items(document, host, image="", bundle="the bundle"):
    """What a built bundle (its MANIFEST.json, parsed) gives one node, and what it lacks for it.

    Returns ``({"platform", "wheels", "lock", "image_archive", "image_id", "model"}, problems)``: paths relative to
    the bundle's directory ("" where the bundle has none). The node's platform is the one whose nodes name it, or
    the only one; ``image`` (name:tag, "" on the host runtime) must be among the bundle's images. Problems are
    messages naming the node and the fix; the sizes of the files are checked by ``missing_files``.
    """
    items = dict.fromkeys(ITEMS, "")
    if not isinstance(document, dict) or document.get("version") != 1 or not isinstance(document.get("files"), list):
        return items, ["%s has no MANIFEST.json of a bundle (version 1, with its files): build it with ./deploy.sh "
                       "bundle -e bundle_dir=%s" % (bundle, bundle)]
    problems = []
    content = _content(document)
    listed = _listed(document)
    platforms = document.get("platforms") if isinstance(document.get("platforms"), dict) else {}
    named = sorted(name for name, hosts in platforms.items() if isinstance(hosts, list) and host in hosts)
    if named:
        items["platform"] = named[0]
    elif len(platforms) == 1:
        items["platform"] = next(iter(platforms))
    else:
        problems.append("%s is in none of the platforms of %s (%s): build the bundle with this inventory, so that "
                        "it names this node's platform" % (host, bundle, ", ".join(sorted(platforms)) or "none"))
    if items["platform"]:
        items["wheels"] = "%s/wheels/%s" % (content, items["platform"])
        lock = "wheels/%s/engine-lock.txt" % items["platform"]
        if lock in listed:
            items["lock"] = "%s/%s" % (content, lock)
    if image:
        records = [record for record in document.get("images") or [] if isinstance(record, dict)
                   and _normal(str(record.get("ref", ""))) == _normal(image)]
        if records and records[0].get("archive") in listed:
            items["image_archive"] = "%s/%s" % (content, records[0]["archive"])
            items["image_id"] = str(records[0].get("id") or "")
        else:
            shown = ", ".join(sorted(str(record.get("ref")) for record in document.get("images") or []
                                     if isinstance(record, dict))) or "none"
            problems.append("%s runs the engine image %s, which %s does not hold (it holds %s): add it to "
                            "bundle_images and build the bundle again" % (host, image, bundle, shown))
    model = document.get("model")
    if isinstance(model, dict) and isinstance(model.get("path"), str) and model["path"]:
        items["model"] = "%s/%s" % (content, model["path"])
    return items, problems


def node_files(document, items):
    """{path under the bundle's directory: size} of every file of the manifest that a node with these items takes
    (its platform's wheels, its image's archive, the model)."""
    if not isinstance(document, dict):
        return {}
    content = _content(document)
    prefixes = [items[name][len(content) + 1:] + "/" for name in ("wheels", "model") if items.get(name)]
    wanted = {}
    for path, size in _listed(document).items():
        if any(path.startswith(prefix) for prefix in prefixes) or (
                items.get("image_archive") and "%s/%s" % (content, path) == items["image_archive"]):
            wanted["%s/%s" % (content, path)] = size
    return wanted


def missing_files(sizes_found, wanted, bundle="the bundle"):
    """Messages for the files a node takes from a bundle that are not there, or not of the manifest's size
    (``sizes_found``: path -> size on the controller, None when absent). The hashes are bundle_verify's."""
    problems = []
    for path, size in sorted(wanted.items()):
        found = sizes_found.get(path)
        if found is None:
            problems.append("%s/%s is missing" % (bundle, path))
        elif size is not None and found != size:
            problems.append("%s/%s has %s bytes, its MANIFEST.json %s" % (bundle, path, found, size))
    return problems


_MANIFESTS = {}


def read_manifest(bundle):
    """The parsed MANIFEST.json of the bundle directory ``bundle`` on the controller (kept while the file is
    unchanged), or ``(None, why)``."""
    path = os.path.join(str(bundle), "MANIFEST.json")
    try:
        stat = os.stat(path)
        key = (path, stat.st_mtime_ns, stat.st_size)
        if key not in _MANIFESTS:
            with open(path, "rb") as handle:
                _MANIFESTS.clear()
                _MANIFESTS[key] = json.loads(handle.read().decode("utf-8"))
        return _MANIFESTS[key], ""
    except OSError as exc:
        return None, "%s cannot be read (%s)" % (path, exc.strerror or exc)
    except ValueError as exc:
        return None, "%s is not JSON (%s)" % (path, exc)


def resolve(bundle, host, image="", check_files=False):
    """What the bundle directory ``bundle`` (on the controller) gives ``host``: absolute paths (and the image's ID),
    "" where it has none, and the problems, named with the node and the fix. With ``check_files``, every file the
    node takes is looked for, with its manifest size."""
    bundle = str(bundle).rstrip("/") or "/"
    document, why = read_manifest(bundle)
    if document is None:
        return dict.fromkeys(ITEMS, ""), ["llm_cluster_bundle %s: %s: build it with ./deploy.sh bundle -e bundle_dir=%s, "
                                          "or give the directory that holds MANIFEST.json" % (bundle, why, bundle)]
    items, problems = node_items(document, host, image, "llm_cluster_bundle " + bundle)
    if check_files:
        wanted = node_files(document, items)
        found = {}
        for path in wanted:
            try:
                found[path] = os.stat(os.path.join(bundle, path)).st_size
            except OSError:
                found[path] = None
        problems += ["%s needs %s: check the copy with ./deploy.sh bundle -e bundle_dir=%s -e bundle_verify=true"
                     % (host, line, bundle) for line in missing_files(found, wanted, bundle)[:10]]
    resolved = {name: (os.path.join(bundle, value) if value and name not in ("image_id", "platform") else value)
                for name, value in items.items()}
    return resolved, problems


def node_path_problems(value, model_path=""):
    """Messages for llm_cluster_bundle_node_path: "" (no chain) or an absolute path of plain characters, not the
    model's directory, inside it or around it (the model's chain verifies that directory file by file)."""
    if value is None:
        return []
    if not isinstance(value, str):
        return ["llm_cluster_bundle_node_path must be a path or \"\" (got %s): where the bundle's content lands on "
                "every node, e.g. %s" % (type(value).__name__, NODE_PATH)]
    if value == "":
        return []
    if not _NODE_PATH.match(value) or any(part in (".", "..") for part in value.split("/")[1:]):
        return ["llm_cluster_bundle_node_path %r is not an absolute path of letters, digits and ._+@- (no '..', no "
                "trailing '/'): give a directory such as %s, or \"\" to copy each node's files from the controller"
                % (value, NODE_PATH)]
    model = model_path.rstrip("/") if isinstance(model_path, str) else ""
    if model and (value == model or value.startswith(model + "/") or model.startswith(value + "/")):
        return ["llm_cluster_bundle_node_path %s overlaps model_path %s: the model and the bundle are verified file "
                "by file, each against its own manifest; give the bundle a directory of its own, e.g. %s"
                % (value, model, NODE_PATH)]
    return []


def on_nodes(bundle, items, node_path):
    """``items`` (as ``resolve`` returns them) as the nodes find them when the chain carried the bundle's content to
    ``node_path`` on every node: the carried items' paths under it; "" for them when ``node_path`` is "" (no chain).
    The other items are returned as they are."""
    bundle = str(bundle).rstrip("/") or "/"
    document, _why = read_manifest(bundle)
    content = os.path.join(bundle, _content(document) if isinstance(document, dict) else "content")
    placed = dict(items)
    for name in CARRIED:
        value = items.get(name) or ""
        if value and node_path and (value + "/").startswith(content + "/"):
            placed[name] = node_path.rstrip("/") + value[len(content):]
        else:
            placed[name] = ""
    return placed


def payload_manifest(document):
    """The manifest (model_manifest's format: version, files with path, size and SHA-256, their digest, total
    bytes) of what the chain carries to every node: the bundle's content without its model, which takes the
    model's own chain. Raises ValueError when ``document`` is not a bundle's MANIFEST.json."""
    if not isinstance(document, dict) or document.get("version") != 1 or not isinstance(document.get("files"), list):
        raise ValueError("not a bundle's MANIFEST.json (version 1, with its files): build it with ./deploy.sh bundle")
    model = document.get("model")
    prefix = model["path"].strip("/") + "/" if isinstance(model, dict) and isinstance(model.get("path"), str) \
        and model["path"].strip("/") else None
    files = []
    for entry in document["files"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
            raise ValueError("MANIFEST.json lists a file without a path: %r" % (entry,))
        if prefix and entry["path"].startswith(prefix):
            continue
        files.append({"path": entry["path"], "size": entry.get("size"), "sha256": entry.get("sha256")})
    try:
        digest = canonical_digest(files)
        total = sum(int(entry["size"]) for entry in files)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise ValueError("MANIFEST.json lists a file without a size or SHA-256 (%s)" % exc)
    return {"version": 1, "files": sorted(files, key=lambda entry: entry["path"]), "digest": digest,
            "total_bytes": total, "content": _content(document), "excluded": [prefix.rstrip("/")] if prefix else []}
