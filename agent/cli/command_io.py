"""What every ``dta`` handler shares: the one-line failure, the JSON document, and the
settings and store a command reads.

A failure a person can fix is one line on stderr starting with ``dta:`` and an exit status
(``agent/cli/main.py`` lists them), never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.config import ConfigError, Settings, load_settings
from storage import Store
from storage.integrity import StoreError


def fail(message: str, code: int = 2) -> int:
    print(f"dta: {message}", file=sys.stderr)
    return code


def emit(document: Any) -> None:
    print(json.dumps(document, ensure_ascii=False, indent=2))


def settings_or_none(config: Path | None, robot: str | None = None) -> Settings | None:
    """The settings a command works with: with several ``[[robots]]``, the one robot
    ``--robot`` names (one line naming the robots when it names none or an unknown one)."""
    try:
        settings = load_settings(config)
        return settings.robot(robot) if settings.robots or robot else settings
    except ConfigError as exc:
        fail(str(exc))
        return None


def store_path(args: argparse.Namespace) -> Path | None:
    """A SQLite file named on the command line (``--store``, ``--dev``), or None for the
    configured store."""
    if getattr(args, "store", None) is not None:
        return Path(args.store)
    if getattr(args, "dev", False):
        from agent.cli.devstate import newest_instance

        instance = newest_instance(Path(".dta/dev"))
        return instance.store_path if instance is not None else Path(".dta/dev/(none)")
    return None


def opener(args: argparse.Namespace, settings: Settings) -> Callable[[], Store]:
    """How to open the store a reading command reads, as often as it needs to."""
    from agent.components import open_store as open_configured

    path = store_path(args)
    if path is None:
        return lambda: open_configured(settings)
    return lambda: Store(path, settings.store_synchronous)


def open_store(args: argparse.Namespace, must_exist: bool = True) -> tuple[Settings, Store] | int:
    """The settings and the store to read, or the exit status after one line saying why not:
    1 when there is no store to read (nothing found), 2 when the command cannot run."""
    settings = settings_or_none(args.config, getattr(args, "robot", None))
    if settings is None:
        return 2
    path = store_path(args)
    if path is None and not settings.store_url:
        path = settings.store_path
    if must_exist and path is not None and not path.exists():
        from agent.cli.devstate import newest_instance

        hint = ""
        if getattr(args, "dev", False):
            hint = " (no `dta dev` instance under .dta/dev: start `dta dev` first)"
        elif newest_instance(Path(".dta/dev")) is not None:
            hint = "; `dta dev` keeps its own store: add --dev"
        return fail(f"no store at {path}{hint}", 1)
    try:
        return settings, opener(args, settings)()
    except StoreError as exc:
        return fail(str(exc))
