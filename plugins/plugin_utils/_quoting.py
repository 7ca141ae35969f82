# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# PRIVATE to the aihost.llm_cluster collection: no compatibility promise.
"""Values written into files other programs parse: env files, rsyncd.conf, Docker env files.

Each helper either returns text that reads back as exactly the value, or raises
ValueError naming the value: nothing is written half-escaped.

- ``env_quote``: one value of a KEY=value file that is both sourced by sh (profile.d)
  and read by systemd's EnvironmentFile=. POSIX single quotes (``shlex.quote``) mean
  the same to both: no expansion, newlines kept, ``'\"'\"'`` for a quote inside.
- ``env_file_parse``: reads such a file back (shell word rules, ``shlex``).
- ``one_line``: files with no quoting at all (rsyncd.conf, ``docker --env-file``):
  the value must be one line without control characters, or it is refused.
"""

from __future__ import annotations

import re
import shlex
import unicodedata

_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)


def _text(value, what):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if not isinstance(value, str):
        raise ValueError("%s is %s, not a string or a number" % (what, type(value).__name__))
    return value


def env_name(name):
    """An environment variable name, or ValueError."""
    if not isinstance(name, str) or not _ENV_NAME_RE.fullmatch(name):
        raise ValueError("%r is not an environment variable name (letters, digits and '_', not starting with a digit)"
                         % (name,))
    return name


def env_quote(value, what="value"):
    """Quote a value for a KEY=value line read by sh and by systemd alike."""
    text = _text(value, what)
    if "\0" in text:
        raise ValueError("%s %r contains a NUL byte, which no environment can hold" % (what, text))
    return shlex.quote(text)


def env_file_parse(text):
    """KEY=value lines written with env_quote -> dict (comments and blank lines skipped)."""
    values = {}
    lexer = shlex.shlex(text or "", posix=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    for word in lexer:
        key, sep, value = word.partition("=")
        if sep and _ENV_NAME_RE.fullmatch(key):
            values[key] = value
    return values


def one_line(value, what="value"):
    """A value for a file without quoting: one line, no control characters, no edge whitespace."""
    text = _text(value, what)
    bad = sorted({repr(c) for c in text if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")})
    if bad:
        raise ValueError("%s %r contains %s: this file has no quoting, so the value would change its meaning; "
                         "use a value without control characters" % (what, text, ", ".join(bad)))
    if text != text.strip():
        raise ValueError("%s %r starts or ends with whitespace, which this file drops" % (what, text))
    return text
