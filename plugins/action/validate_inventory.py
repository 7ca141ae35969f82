# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _inventory_validation as validation


class ActionModule(ActionBase):
    """Validate the inventory on the controller; never connects to a host."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    argument_spec = dict(
        head_group=dict(type="str", default="masters"),
        worker_group=dict(type="str", default="workers"),
        node_num=dict(type="raw", required=True),
        ports=dict(type="dict", default={}),
        backend_type=dict(type="raw", required=True),
        model_type=dict(type="raw", required=True),
        model_path=dict(type="raw", required=True),
        interface_var=dict(type="str", default="ray_device"),
        cidrs=dict(type="dict", default={}),
        booleans=dict(type="dict", default={}),
        flags=dict(type="dict", default={}),
        container=dict(type="dict", default={}),
    )

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp

        validation_result, args = self.validate_argument_spec(argument_spec=self.argument_spec)
        del validation_result
        groups = task_vars.get("groups") or {}
        hostvars = task_vars.get("hostvars") or {}
        members = list(groups.get(args["head_group"]) or []) + list(groups.get(args["worker_group"]) or [])

        spec = dict(args)
        spec["groups"] = {name: list(groups.get(name) or []) for name in (args["head_group"], args["worker_group"])}
        spec["interfaces"] = {}
        spec["addresses"] = {}
        for host in members:
            host_vars = hostvars.get(host) or {}
            spec["interfaces"][host] = self._templar.template(host_vars.get(args["interface_var"]))
            spec["addresses"][host] = self._templar.template(host_vars.get("ansible_host", host))
        try:
            errors = validation.validate(spec)
        except RuntimeError as exc:
            raise AnsibleActionFail(str(exc))

        result["changed"] = False
        result["errors"] = errors
        result["hosts"] = members
        if errors:
            result["failed"] = True
            result["msg"] = "Inventory validation found %d problem(s); nothing was changed on any host:\n%s" % (
                len(errors), "\n".join(" - " + e for e in errors))
        else:
            result["msg"] = "Inventory is valid: %d node(s), head %s." % (len(members), ", ".join(spec["groups"][args["head_group"]]))
        return result
