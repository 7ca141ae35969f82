# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# Note that this module util is **PRIVATE** to the aihost.llm_cluster collection.
# It can have breaking changes at any time. Do not use it from other collections
# or standalone plugins/modules!
"""The contract of the modules that change a host (npu_bind, npu_network, affinity_apply).

Each of them:

1. reads the current value of every object it manages (``before``) and computes
   ``planned``; nothing differs: ``changed=False`` and nothing is written;
2. in check mode reports ``before`` against ``planned`` and stops;
3. records the original of every object it is about to change in its state
   file (``StateRecord.record_originals``) and changes nothing when that fails;
4. applies, re-reads (``after``) and fails when ``after`` is not ``planned``;
5. with ``state=restored``, puts recorded originals back and drops each record
   once its object reads the original again (``StateRecord.drop`` / ``save``);
6. reports a diff of ``before`` and ``planned``/``after`` (``diff_of``).

Every failure on the way is a ``ChangeError``: the message (naming the device,
file or variable and the fix) and the result keys to report with it.
``run_change`` turns the outcome into ``exit_json``/``fail_json``, so the
planning and applying code never needs an AnsibleModule.
"""

from __future__ import annotations

from ansible_collections.aihost.llm_cluster.plugins.module_utils._statefile import (
    StateFileError,
    drop_entry,
    drop_other_boots,
    load_state,
    record_original,
    remove_state,
    save_state,
    state_path,
)

_UNSET = object()


class ChangeError(Exception):
    """Why a state-changing module fails, with the result keys it reports.

    ``result`` is reported without its ``changed`` key, unless ``changed`` is given.
    """

    def __init__(self, msg, result=None, changed=_UNSET):
        super().__init__(msg)
        self.msg = msg
        self.result = dict((key, value) for key, value in (result or {}).items() if key != "changed")
        if changed is not _UNSET:
            self.result["changed"] = changed

    def __str__(self):
        return self.msg


def run_change(module, action, *args, **kwargs):
    """Call ``action``; exit with the result dict it returns, fail with a ChangeError it raises."""
    try:
        result = action(*args, **kwargs)
    except ChangeError as exc:
        module.fail_json(msg=exc.msg, **exc.result)
    module.exit_json(**result)


class StateRecord:
    """The state file of one module: where originals are recorded before the first change.

    A thin layer over ``_statefile`` that raises ``ChangeError`` and knows
    whether the document changed since it was loaded (``dirty``).
    """

    def __init__(self, state_dir, kind, boot_id=None):
        self.state_dir = state_dir
        self.kind = kind
        self.boot_id = boot_id
        self.path = state_path(state_dir, kind)
        self.doc = None
        self.dirty = False

    @property
    def entries(self):
        return self.doc["entries"]

    def load(self, failure="", result=None):
        """Load the document; a file that cannot be used raises ChangeError(``failure`` + why)."""
        try:
            self.doc = load_state(self.state_dir, self.kind, self.boot_id)
        except StateFileError as exc:
            raise ChangeError(failure + str(exc), result)
        self.dirty = False
        return self.doc

    def save(self, failure="", result=None):
        """Write the document, or remove the file once it holds no record; raises ChangeError(``failure`` + why)."""
        try:
            if self.doc["entries"]:
                save_state(self.state_dir, self.kind, self.doc, self.boot_id)
            else:
                remove_state(self.state_dir, self.kind)
        except StateFileError as exc:
            raise ChangeError(failure + str(exc), result)
        self.dirty = False
        return self.path

    def record(self, key, entry):
        """Record ``entry`` unless ``key`` holds an original already (which is never replaced)."""
        stored = record_original(self.doc, key, entry)
        self.dirty = self.dirty or stored
        return stored

    def drop(self, key):
        """Forget the record of ``key`` (restored, or no longer restorable); returns it or None."""
        entry = drop_entry(self.doc, key)
        self.dirty = True
        return entry

    def record_originals(self, originals, result=None, only_when_stored=False, record_more=None):
        """Load, drop records of other boots, record each ``(key, entry)`` and save, before anything changes.

        ``record_more(doc)``, when given, records further originals into the loaded document
        (with ``_statefile.record_original``). Raises ChangeError("nothing was changed: ...") when
        the file cannot be read or written. With ``only_when_stored`` the file is written only when
        one of ``originals`` was newly recorded.
        """
        failure = "nothing was changed: "
        self.load(failure, result)
        drop_other_boots(self.doc, self.boot_id)
        if record_more is not None:
            record_more(self.doc)
        stored = False
        for key, entry in originals:
            stored = self.record(key, entry) or stored
        if stored or not only_when_stored:
            self.save(failure, result)
        return stored


def lines_text(lines):
    """Diff text from a list of lines: each line ends with a newline."""
    return "".join(line + "\n" for line in lines)


def diff_of(before, after, subject, check_mode):
    """The ``diff`` result of a module: ``before`` against ``planned`` (check mode) or ``after``."""
    return dict(before=before, after=after, before_header="%s (before)" % subject,
                after_header="%s (%s)" % (subject, "planned" if check_mode else "after"))
