"""Several robots in one deployment: how a ``[[robots]]`` table and the top level make one
robot's settings.

    [[robots]]
    robot_code = "finance"            # or client_id, which it defaults to
    client_id = "ding…"
    client_secret = "…"              # or DTA_ROBOT_FINANCE_CLIENT_SECRET in the environment
    knowledge_dir = "knowledge/finance"

A robot's keys are its table's; every key it does not give comes from the top level, which
then holds defaults only (it is not a robot itself). Except:

- its credentials and code (``client_id``, ``client_secret``, ``robot_code``) are its own
  and never inherited: two robots never share an app;
- its records are its own: its SQLite file is ``<folder of store_path>/<robot code>.db``
  unless it names one — except the robot the top level named (its ``robot_code`` or
  ``client_id``), which keeps ``store_path`` itself, the file it used before there were
  robots — and on PostgreSQL its schema is ``dta_<robot code>`` unless it names one (a
  top-level ``store_schema`` would put every robot in one schema: refused); its folders
  (``media_dir``, ``command_runs_root``, ``run_dir`` when set) are ``<folder>/<robot code>``
  unless it names them;
- the process's own keys (health port, logging) are set once, at the top level.

Pure dictionaries here: ``Settings.robot_settings`` validates what these tables become.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from agent.contracts.base import schema_for

# Keys of the process, not of a robot: set once for the deployment, at the top level.
DEPLOYMENT_KEYS = frozenset({"health_host", "health_port", "log_level", "log_format", "robots"})
# A robot's own: never taken from the top level.
OWN_KEYS = frozenset({"client_id", "client_secret", "robot_code", "store_path", "store_schema"})
# A robot's folders (media, each run's message text): beside its siblings', never shared.
OWN_FOLDERS = ("media_dir", "command_runs_root", "run_dir")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def robot_code_of(table: dict[str, Any]) -> str | None:
    """The robot's code as its table gives it: ``robot_code``, else its ``client_id``."""
    code = table.get("robot_code") or table.get("client_id")
    return str(code) if code else None


def file_name_for(robot_code: str) -> str:
    """A robot's SQLite file name: its code, made safe for a file system."""
    return _UNSAFE.sub("_", robot_code).strip("._")[:100] or "robot"


def env_name(robot_code: str, key: str) -> str:
    """``DTA_ROBOT_<CODE>_<KEY>``: where a robot's credentials may come from instead of
    dta.toml (the code upper-cased, anything but letters and digits as ``_``)."""
    slug = re.sub(r"[^A-Za-z0-9]+", "_", robot_code).strip("_").upper()
    return f"DTA_ROBOT_{slug}_{key.upper()}"


def robot_tables(
    top: dict[str, Any], robots: list[Any], store_path: Path, folders: dict[str, Path | None]
) -> list[tuple[str, dict[str, Any]]]:
    """``(where, settings data)`` for each robot: its table over the top level's keys.

    ``top`` is what the top level set (not its defaults); ``store_path`` and ``folders`` (by
    key, ``OWN_FOLDERS``; None: not set) are the top level's own, defaults included (robots'
    files go beside and in them); ``where`` names the table in errors (``robots[1]
    (finance)``). Raises ``ValueError`` for a table that cannot be a robot: not a table, no
    code, a process key, a code or a store used twice.
    """
    inherited = {k: v for k, v in top.items() if k not in DEPLOYMENT_KEYS | OWN_KEYS}
    if top.get("store_schema"):
        raise ValueError(
            "store_schema at the top level would put every robot's records in one schema;"
            " give each robot its own in its [[robots]] table (or none: dta_<robot code>)"
        )
    tables: list[tuple[str, dict[str, Any]]] = []
    codes: dict[str, str] = {}
    stores: dict[str, str] = {}
    for index, table in enumerate(robots):
        where = f"robots[{index}]"
        if not isinstance(table, dict):
            raise ValueError(f"{where}: a robot is a table of keys, got {table!r}")
        code = robot_code_of(table)
        if code is None:
            raise ValueError(f"{where}: give robot_code (or client_id, which it defaults to)")
        where = f"{where} ({code})"
        shared = sorted(DEPLOYMENT_KEYS & set(table))
        if shared:
            raise ValueError(f"{where}: set once for the deployment, at the top level: {shared}")
        if code in codes:
            raise ValueError(f"{where}: robot_code {code!r} is also {codes[code]}'s")
        codes[code] = where
        data = {**inherited, **table}
        if "store_path" not in table and not data.get("store_url"):
            top_file = store_path
            # The robot the top level named before there were [[robots]] keeps its file: a
            # new one would answer DingTalk's redeliveries of old messages again.
            former = code == (top.get("robot_code") or top.get("client_id"))
            data["store_path"] = (
                top_file if former else top_file.parent / f"{file_name_for(code)}.db"
            )
        # each run's message text and media stay the robot's (media pruned by its own
        # media_keep_days)
        for key, folder in folders.items():
            if key not in table and folder is not None:
                data[key] = folder / file_name_for(code)
        store = _store_of(data, code)
        if store in stores:
            raise ValueError(f"{where}: its records would share {stores[store]}'s store")
        stores[store] = where
        tables.append((where, data))
    return tables


def _store_of(data: dict[str, Any], code: str) -> str:
    """Where a robot's records live, to tell two robots' apart."""
    if data.get("store_url"):
        return f"{data['store_url']}#{data.get('store_schema') or schema_for(code)}"
    return str(Path(str(data["store_path"])).expanduser().resolve())
