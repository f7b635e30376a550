"""Where ``dta dev`` instances keep their state, and how other commands find them.

Each ``dta dev`` gets its own folder under ``.dta/dev/`` (its configuration, store, logs and
a ``dev.json`` describing it), so two instances in one project never share a store or
delete each other's state. ``dta dev say``, ``dta trace --dev`` and ``dta console --dev``
find the newest one here. This lives in ``agent`` (not ``lab``) because those commands
must find a store without importing the lab.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STATE_FILE = "dev.json"
KEEP_STOPPED = 5  # stopped instances kept for `dta trace --dev`; older ones are removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class Instance:
    folder: Path
    state: dict[str, Any]

    @property
    def name(self) -> str:
        return self.folder.name

    @property
    def store_path(self) -> Path:
        return Path(self.state.get("store_path") or self.folder / "dta.db")

    @property
    def running(self) -> bool:
        pid = self.state.get("pid")
        return isinstance(pid, int) and not self.state.get("stopped_at") and _alive(pid)


def instances(root: Path) -> list[Instance]:
    """Every instance under ``root``, newest first (a folder without state is skipped)."""
    found = []
    if not root.is_dir():
        return []
    for folder in root.iterdir():
        state_file = folder / STATE_FILE
        try:
            state = json.loads(state_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(state, dict):
            found.append(Instance(folder, state))
    return sorted(found, key=lambda i: float(i.state.get("started_at") or 0), reverse=True)


def newest_instance(root: Path, running: bool = False) -> Instance | None:
    for instance in instances(root):
        if instance.running or not running:
            return instance
    return None


def new_folder(root: Path) -> Path:
    """A fresh instance folder, named by start time and pid so names sort and never clash."""
    folder = root / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    folder.mkdir(parents=True, exist_ok=False)
    return folder


def write_state(folder: Path, state: dict[str, Any]) -> None:
    """Replace ``dev.json`` atomically: a reader never sees half of it."""
    tmp = folder / f".{STATE_FILE}.tmp"
    tmp.write_text(json.dumps(state, ensure_ascii=False, indent=2), encoding="utf-8")
    os.replace(tmp, folder / STATE_FILE)


def prune(root: Path, keep: int = KEEP_STOPPED) -> list[Path]:
    """Remove stopped instances beyond the newest ``keep``; running ones are never touched."""
    stopped = [i for i in instances(root) if not i.running]
    removed = []
    for instance in stopped[keep:]:
        shutil.rmtree(instance.folder, ignore_errors=True)
        removed.append(instance.folder)
    return removed
