# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

import os
import re

import yaml

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _bundle
from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _inventory_validation as validation

try:
    from ansible.parsing.vault import VaultHelper
except ImportError:  # pragma: no cover - ansible-core < 2.19
    VaultHelper = None
try:
    from ansible._internal._datatag._tags import Origin
except ImportError:  # pragma: no cover - ansible-core < 2.19
    Origin = None

display = Display()
COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLES = ("prepare", "ray_cluster", "model_distribution", "serve", "monitoring", "bundle")
# "{{ ray_port | default(6379) }}": a role variable that defaults to an llm_solution name.
_LEGACY_RE = re.compile(r"^\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\|\s*default\(\s*([^()]*?)\s*\)\s*\}\}$")
_DEFAULT_NAME_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\|\s*default\(")
# llm_solution's config.yaml keys (script/mindspore-deepseek/config.yaml) and its other switches.
LLM_SOLUTION_KEYS = (
    "image_name", "image_tag", "container_name", "model_path", "ray_port", "node_num", "is_stop_other_container",
    "llm_port", "dp_port", "ray_device", "model_type", "backend_type",
)
# What the playbooks themselves read (playbooks/replace_node.yml: ./deploy.sh replace-node, remove-node).
PLAYBOOK_KEYS = ("replace_node_old", "replace_node_new", "replace_node_retire", "llm_cluster_play_hosts")
SECRET_VARS = ("ansible_password", "ansible_become_password", "ansible_ssh_pass", "ansible_become_pass")
# Port variables that name a port another role opens, not one of their own: the monitoring role reads
# connections to Ray's GCS port and scrapes Ray's metrics port. Equal to Ray's ports by design, so they are
# left out of the clash check (the ray_cluster role's own variables are in it).
REFERENCE_PORTS = ("monitoring_ray_members_port", "monitoring_ray_metrics_port")
# Variables Ansible itself puts in every host's variables.
MAGIC_VARS = frozenset((
    "inventory_hostname", "inventory_hostname_short", "inventory_dir", "inventory_file", "group_names", "groups",
    "omit", "playbook_dir", "role_names", "play_hosts", "hostvars", "vars", "environment", "role_path", "role_name",
    "discovered_interpreter_python", "module_defaults",
))


def _load_yaml(path):
    try:
        with open(path) as handle:
            data = yaml.safe_load(handle)
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def role_defaults():
    """{role: {var: raw default}} read from the collection's roles."""
    return {role: _load_yaml(os.path.join(COLLECTION_ROOT, "roles", role, "defaults", "main.yml")) for role in ROLES}


def known_variables(defaults):
    """Every variable name this collection reads: role inputs, the llm_solution names they default to."""
    names = set(LLM_SOLUTION_KEYS) | set(PLAYBOOK_KEYS)
    for role, values in defaults.items():
        names.update(values)
        for raw in values.values():
            if isinstance(raw, str):
                names.update(_DEFAULT_NAME_RE.findall(raw))
        specs = _load_yaml(os.path.join(COLLECTION_ROOT, "roles", role, "meta", "argument_specs.yml"))
        for entry in (specs.get("argument_specs") or {}).values():
            if isinstance(entry, dict):
                names.update((entry.get("options") or {}).keys())
    return names


def _resolve(raw, task_vars):
    """(label, value) of a role default: its llm_solution name when it defaults to one; None if not plain."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        return None, raw
    match = _LEGACY_RE.match(raw) if isinstance(raw, str) else None
    if match:
        legacy, fallback = match.groups()
        return legacy, task_vars[legacy] if legacy in task_vars else _int_or(fallback)
    return None, None


def _int_or(text):
    try:
        return int(text)
    except ValueError:
        return text


class ActionModule(ActionBase):
    """Validate the inventory on the controller; never connects to a host."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    argument_spec = dict(
        # raw: a list or a number given as a group name is reported by the validator, not stringified here.
        head_group=dict(type="raw", default="masters"),
        worker_group=dict(type="raw", default="workers"),
        node_num=dict(type="raw", required=True),
        ports=dict(type="dict", default={}),
        backend_type=dict(type="raw", required=True),
        model_type=dict(type="raw", required=True),
        model_path=dict(type="raw", required=True),
        paths=dict(type="dict", default={}),
        interface_var=dict(type="str", default="ray_device"),
        cidrs=dict(type="dict", default={}),
        cidr_lists=dict(type="dict", default={}),
        booleans=dict(type="dict", default={}),
        flags=dict(type="dict", default={}),
        container=dict(type="dict", default={}),
        env_maps=dict(type="dict", default={}),
        backend_env=dict(type="dict", default={}),
        accounts=dict(type="dict", default={}),
        tls=dict(type="dict", default={}),
        monitoring=dict(type="dict", default={}),
        watchdog=dict(type="dict", default={}),
        fetch=dict(type="dict", default={}),
        # llm_cluster_serving_groups and serve_topology: each group's members are read from the inventory here.
        serving_groups=dict(type="raw", default=None),
        topology=dict(type="raw", default="auto"),
        cluster_ports=dict(type="bool", default=True),
        strict=dict(type="raw", default=False),
    )

    def _template(self, value):
        try:
            return self._templar.template(value)
        except Exception as exc:  # pylint: disable=broad-except
            return "<cannot be templated: %s>" % exc

    def _cluster_ports(self, defaults, task_vars, legacy_ports):
        """Every port and port range the roles use, by the name an operator sets it with."""
        ports, ranges = {}, {}
        for role in ROLES:
            values = defaults.get(role) or {}
            for key in sorted(values):
                if key.endswith("_port_min") and key[:-4] + "_max" in values:
                    span = []
                    for bound in (key, key[:-4] + "_max"):
                        span.append(self._template(task_vars[bound]) if bound in task_vars
                                    else _resolve(values[bound], task_vars)[1])
                    ranges["%s/%s" % (key, key[:-4] + "_max")] = span
                    continue
                if not key.endswith("_port") or key in REFERENCE_PORTS:
                    continue
                label, value = _resolve(values[key], task_vars)
                if key in task_vars and not label:
                    label, value = key, self._template(task_vars[key])
                elif label and label in task_vars:
                    value = self._template(task_vars[label])
                if value is None:
                    continue
                label = label or key
                if label in legacy_ports or label in ports:
                    continue
                ports[label] = value
        return ports, ranges

    @staticmethod
    def _is_cleartext(value):
        if not isinstance(value, str) or not value or "{{" in value or "{%" in value:
            return False
        if type(value).__name__ in ("EncryptedString", "AnsibleVaultEncryptedUnicode"):
            return False
        if VaultHelper is not None and VaultHelper.get_ciphertext(value, with_tags=False):
            return False
        origin = Origin.get_tag(value) if Origin is not None else None
        path = getattr(origin, "path", None)
        if path:
            try:
                with open(path, "rb") as handle:
                    if handle.read(14) == b"$ANSIBLE_VAULT":
                        return False
            except OSError:
                pass
        return True

    def _host_variables(self, hostvars, members, known):
        """Clear-text secrets per host, unknown variable names by scope, and the SSH options that
        turn host key checking off ({variable: {option: [hosts]}})."""
        secrets, seen, host_keys = {}, {}, {}
        for host in members:
            try:
                raw = hostvars.raw_get(host) if hasattr(hostvars, "raw_get") else hostvars.get(host)
                items = dict(raw or {})
            except Exception:  # pylint: disable=broad-except
                continue
            for name, value in items.items():
                if name in SECRET_VARS and self._is_cleartext(value):
                    secrets.setdefault(host, []).append(name)
                if name in validation.SSH_ARG_VARS:
                    for option in validation.host_key_checking_off(self._template(value)):
                        host_keys.setdefault(name, {}).setdefault(option, []).append(host)
                if not isinstance(name, str) or name in known or name in MAGIC_VARS or name.startswith("ansible_") \
                        or name.startswith("__") or name.startswith("molecule_"):
                    continue
                seen.setdefault(name, []).append(host)
        variables = {}
        for name, hosts in seen.items():
            scope = "every node" if len(hosts) == len(members) else "host " + ", ".join(hosts)
            variables.setdefault(scope, []).append(name)
        return secrets, variables, host_keys

    def _engine_image(self, host_vars):
        """The node's engine image as name:tag, as the serve role reads it (serve_image, else image_name and
        image_tag); "" on the host runtime."""
        runtime = self._template(host_vars.get("serve_runtime", "auto"))
        image = self._template(host_vars.get("serve_image", "")) or ""
        if not image and host_vars.get("image_name"):
            image = "%s:%s" % (self._template(host_vars.get("image_name")),
                               self._template(host_vars.get("image_tag", "latest")))
        return "" if runtime == "host" or not isinstance(image, str) else image

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp

        validation_result, args = self.validate_argument_spec(argument_spec=self.argument_spec)
        del validation_result
        groups = task_vars.get("groups") or {}
        hostvars = task_vars.get("hostvars") or {}
        names = [name for name in (args["head_group"], args["worker_group"]) if isinstance(name, str)]
        members = [host for name in names for host in (groups.get(name) or [])]

        spec = dict(args)
        spec["groups"] = {name: list(groups.get(name) or []) for name in names}
        spec["all_hosts"] = list(groups.get("all") or [])
        spec["monitoring"] = dict(args["monitoring"])
        if isinstance(spec["monitoring"].get("group"), str):
            spec["monitoring"]["hosts"] = list(groups.get(spec["monitoring"]["group"]) or [])
        spec["play_hosts"] = list(task_vars.get("ansible_play_hosts_all") or [])
        named = args["serving_groups"] if isinstance(args["serving_groups"], list) else []
        spec["serving_hosts"] = {name: list(groups.get(name) or []) for name in named
                                 if isinstance(name, str) and name in groups}
        spec["interfaces"] = {}
        spec["addresses"] = {}
        spec["comm_env"] = {}
        spec["tuning"] = {}
        spec["offline"] = {}
        spec["localities"] = {}
        for host in members:
            try:
                host_vars = hostvars.get(host) or {}
                spec["interfaces"][host] = self._template(host_vars.get(args["interface_var"]))
                spec["addresses"][host] = self._template(host_vars.get("ansible_host", host))
                if "model_distribution_locality" in host_vars:
                    spec["localities"][host] = self._template(host_vars.get("model_distribution_locality"))
                # Each node's own environment maps (inventory, host_vars, extra vars): the collective variables
                # are checked per node and across the nodes.
                spec["comm_env"][host] = {name: self._template(host_vars.get(name, {}))
                                          for name in validation.COMM_SOURCES}
                # The host tuning's variables the node has (role defaults are not host variables).
                spec["tuning"][host] = {name: self._template(host_vars.get(name))
                                        for name in validation.TUNING_VARS if name in host_vars}
                # What the offline gate reads (the role defaults are applied by the validator).
                spec["offline"][host] = {name: self._template(host_vars.get(name))
                                         for name in validation.OFFLINE_VARS if name in host_vars}
                bundle = spec["offline"][host].get("llm_cluster_bundle")
                if isinstance(bundle, str) and bundle.strip():
                    # What the bundle gives this node (as the roles' defaults read it), and what it lacks.
                    items, problems = _bundle.resolve(bundle.strip(), host, self._engine_image(host_vars),
                                                      check_files=True)
                    # Where the bundle step's chain puts the content on this node (one message for every node
                    # that has the same value).
                    problems += list(_bundle.node_path_problems(
                        self._template(host_vars.get("llm_cluster_bundle_node_path")),
                        self._template(host_vars.get("model_path", ""))))
                    spec["offline"][host]["__bundle"] = {"items": items, "problems": problems}
            except Exception as exc:  # pylint: disable=broad-except
                spec["addresses"][host] = "<cannot be read: %s>" % exc
        defaults = role_defaults()
        if args["cluster_ports"]:
            spec["cluster_ports"], spec["port_ranges"] = self._cluster_ports(defaults, task_vars, args["ports"])
        known = known_variables(defaults)
        spec["known_variables"] = sorted(known)
        spec["cleartext_secrets"], spec["variables"], spec["host_key_checking_off"] = \
            self._host_variables(hostvars, members, known)
        found = validation.verdict(spec)
        errors, warnings = found["errors"], found["warnings"]
        strict = args["strict"] is True or str(args["strict"]).lower() in ("true", "yes", "1")

        result["changed"] = False
        result["errors"] = errors
        result["warnings_found"] = warnings
        result["hosts"] = members
        lines = [" - " + e for e in errors] + [" - warning: " + w for w in warnings]
        if errors or (strict and warnings):
            result["failed"] = True
            result["msg"] = "Inventory validation found %d problem(s)%s; nothing was changed on any host:\n%s" % (
                len(errors) + (len(warnings) if strict else 0),
                " (warnings count: strict mode)" if strict and warnings else
                (" and %d warning(s)" % len(warnings) if warnings else ""), "\n".join(lines))
        else:
            result["msg"] = "Inventory is valid: %d node(s), head %s." % (
                len(members), ", ".join(spec["groups"].get(args["head_group"], [])))
            if warnings:
                result["msg"] += " %d warning(s):\n%s" % (len(warnings), "\n".join(lines))
                for warning in warnings:
                    display.warning(warning)
        return result
