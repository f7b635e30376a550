"""The environment of a process dta starts (a ``command`` agent, a stdio MCP server).

It inherits only a short list of harmless variables and the names the operator chose to pass
on, never the whole of the daemon's: that holds the app's secret, each robot's, the model key
and the store URL with its password, and a child that had them could reach DingTalk around
the action gate.

    child_env(["GITHUB_TOKEN"])   # {"PATH": …, "HOME": …, "GITHUB_TOKEN": …} as they are set
"""

from __future__ import annotations

import os
from collections.abc import Iterable

INHERITED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV")
# dta's own variables and DingTalk's: where the daemon's secrets are named
_OWN_PREFIXES = ("DTA_", "DINGTALK_")


def child_env(names: Iterable[str] = ()) -> dict[str, str]:
    """The harmless variables and ``names``, with the values this process has (unset ones
    are left out)."""
    return {k: os.environ[k] for k in (*INHERITED_ENV, *names) if k in os.environ}


def daemon_names(names: Iterable[str]) -> list[str]:
    """Those of ``names`` that are dta's or DingTalk's variables (may hold its secrets)."""
    return [name for name in names if name.upper().startswith(_OWN_PREFIXES)]
