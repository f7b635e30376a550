"""The layers of docs/architecture.md ("Imports run one way"), as data, and every module's
imports checked against them — at module level, inside functions and under
``if TYPE_CHECKING:`` alike (a type-only import is still a dependency on that layer).

A row is the files it covers (a folder ends with ``/``) and what they may import besides
each other; a file belongs to the row with its longest matching path. Only the project's
own packages are checked: the standard library and third-party packages are free.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("agent", "gates", "skills", "storage", "lab")


class Row(NamedTuple):
    name: str
    covers: tuple[str, ...]
    may_import: tuple[str, ...]  # row names


BOTTOM = ("contracts", "ground")
# The provider interface: what the runtime may know of any provider.
INTERFACE = (
    "skills/providers/base.py",
    "skills/providers/streaming.py",
    "skills/providers/model_media.py",
)
RUNTIME_BELOW = (*BOTTOM, "config", "storage", "gates", "skills", "interface")

ROWS = (
    Row("contracts", ("agent/contracts/",), ()),
    Row(
        "ground",
        ("agent/__init__.py", "agent/clock.py", "agent/logs.py", "agent/crashpoints.py"),
        ("contracts",),
    ),
    # config also reads the built-in tools' names
    Row("config", ("agent/config/",), (*BOTTOM, "builtin_tools")),
    Row("storage", ("storage/",), BOTTOM),
    Row("gates", ("gates/",), ("contracts",)),
    Row("skills", ("skills/",), ("contracts", "gates", "interface")),
    Row("interface", INTERFACE, ("contracts", "gates", "skills")),
    Row("dingtalk", ("agent/dingtalk/",), RUNTIME_BELOW),
    # the tools read the acts' outcome vocabulary (pure: contracts and gates)
    Row("builtin_tools", ("agent/tools/builtin.py",), (*RUNTIME_BELOW, "tools", "dingtalk")),
    Row("tools", ("agent/tools/",), (*RUNTIME_BELOW, "builtin_tools", "dingtalk", "told")),
    # DingTalk docs as knowledge: synced through the wire, served by the run's grounding
    Row("knowledge", ("agent/knowledge/",), (*RUNTIME_BELOW, "dingtalk")),
    Row("run", ("agent/run/",), (*RUNTIME_BELOW, "dingtalk", "tools", "builtin_tools")),
    Row("cards", ("agent/cards/",), (*RUNTIME_BELOW, "dingtalk", "tools", "builtin_tools", "run")),
    Row("told", ("agent/acts/told.py",), ("contracts", "gates")),
    Row(
        "acts",
        ("agent/acts/",),
        (*RUNTIME_BELOW, "dingtalk", "tools", "builtin_tools", "run", "cards", "told"),
    ),
    Row("proactive", ("agent/proactive/",), (*RUNTIME_BELOW, "dingtalk", "tools", "run")),
    # a carrier says how its form goes, over the wing that sends it (cards, acts, run)
    Row(
        "carriers",
        ("agent/carriers/",),
        (*RUNTIME_BELOW, "dingtalk", "tools", "builtin_tools", "run", "cards", "acts", "told"),
    ),
    # a particular provider: only components choose one (``build_provider``)
    Row("providers", ("skills/providers/",), ("contracts", "gates", "skills", "interface")),
    Row(
        "components",
        ("agent/components/", "agent/runtime.py", "agent/runtime_chores.py"),
        ("*",),
    ),
    Row("daemon", ("agent/daemon/",), ("*",)),
    Row("cli", ("agent/cli/",), ("*",)),  # the lab commands import the lab
    Row("lab", ("lab/",), ("*",)),
)
# Rows "*" may import: everything but the rows above them.
ABOVE = {"components": {"daemon", "cli", "lab"}, "daemon": {"cli", "lab"}}


def row_of(path: str, rows: tuple[Row, ...] = ROWS) -> Row | None:
    """The row of a file or module path (``agent/run/acting.py``), by its longest cover."""
    best: tuple[int, Row] | None = None
    for row in rows:
        for cover in row.covers:
            hit = path == cover or (cover.endswith("/") and path.startswith(cover))
            if hit and (best is None or len(cover) > best[0]):
                best = (len(cover), row)
    return best[1] if best is not None else None


def module_path(module: str, root: Path = ROOT) -> str | None:
    """The file a project module is (``agent.run.acting`` → ``agent/run/acting.py``)."""
    parts = module.split(".")
    if parts[0] not in PACKAGES:
        return None
    # the longest prefix that is a file or a package of this checkout
    for end in range(len(parts), 0, -1):
        base = "/".join(parts[:end])
        if (root / f"{base}.py").is_file():
            return f"{base}.py"
        if (root / base / "__init__.py").is_file():
            return f"{base}/__init__.py"
    return "/".join(parts) + ".py"


def imports(source: str, path: str) -> list[tuple[int, str]]:
    """Every import in the source: module level, in functions, under TYPE_CHECKING."""
    found: list[tuple[int, str]] = []
    package = path.removesuffix(".py").split("/")
    package = package[:-1]  # the module's package (an __init__'s own folder)
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package[: len(package) - node.level + 1]
                base = ".".join([*up, *([base] if base else [])])
            # ``from agent.cards import stream`` imports the module agent.cards.stream
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return found


def allowed(source_row: Row, target_row: Row, rows: tuple[Row, ...] = ROWS) -> bool:
    if source_row.name == target_row.name:
        return True
    if "*" in source_row.may_import:
        return target_row.name not in ABOVE.get(source_row.name, set())
    return target_row.name in source_row.may_import


def violations(
    path: str, source: str, root: Path = ROOT, rows: tuple[Row, ...] = ROWS
) -> list[str]:
    """Each import of the file at ``path`` its row does not allow."""
    mine = row_of(path, rows)
    assert mine is not None, f"{path} is in no row of the table"
    wrong = []
    for line, module in imports(source, path):
        target = module_path(module, root)
        if target is None:
            continue
        theirs = row_of(target, rows)
        assert theirs is not None, f"{path}:{line}: {module} is in no row of the table"
        if not allowed(mine, theirs, rows):
            wrong.append(f"{path}:{line}: {mine.name} imports {theirs.name} ({module})")
    return wrong


def project_files() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def test_every_import_keeps_to_the_table() -> None:
    wrong = []
    for file in project_files():
        path = file.relative_to(ROOT).as_posix()
        wrong += violations(path, file.read_text(encoding="utf-8"))
    assert not wrong, "\n".join(wrong)


def test_every_file_is_in_a_row() -> None:
    assert [p for p in project_files() if row_of(p.relative_to(ROOT).as_posix()) is None] == []


def test_the_checker_finds_a_wrong_import() -> None:
    """A synthetic module of the run layer importing up, three ways: each is found."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "import json\n"
        "from agent.contracts import Run\n"
        "from agent.cards.stream import CardReplies\n"
        "if TYPE_CHECKING:\n"
        "    from agent.components import ActParts\n"
        "def f():\n"
        "    from agent.proactive import reminders\n"
        "    from . import outcome\n"
    )
    found = violations("agent/run/example.py", source)
    assert [line.split(": ")[1] for line in found] == [
        "run imports cards (agent.cards.stream.CardReplies)",
        "run imports components (agent.components.ActParts)",
        "run imports proactive (agent.proactive.reminders)",
    ]
    # the same imports are fine one layer up, and the relative one is its own row's
    assert violations("agent/components/example.py", source) == []


def test_the_table_is_the_page() -> None:
    """Every row's files are named on docs/architecture.md's table."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    table = text.split("Imports run one way", 1)[1].split("\n\n", 2)[1]
    for row in ROWS:
        for cover in row.covers:
            if cover != "agent/__init__.py":
                assert f"`{cover}`" in table, cover
