"""The built-in workspace tools by name: each module of ``agent/tools/workspace/`` with a
``TOOL`` (found here, so a new tool is its one module), their specs (``BUILTIN``, what the
configuration checks ``tools`` against) and the reads among them."""

from __future__ import annotations

import importlib
import pkgutil

from agent.contracts import ToolSpec
from agent.tools import workspace
from agent.tools.base import ReadTool, WorkspaceTool, WriteTool


def _found() -> dict[str, WorkspaceTool]:
    tools: dict[str, WorkspaceTool] = {}
    for info in sorted(pkgutil.iter_modules(workspace.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{workspace.__name__}.{info.name}")
        tool = getattr(module, "TOOL", None)
        if isinstance(tool, ReadTool | WriteTool):
            assert tool.spec.name not in tools, f"two tools named {tool.spec.name}"
            tools[tool.spec.name] = tool
    return tools


TOOLS: dict[str, WorkspaceTool] = _found()
READS: dict[str, ReadTool] = {n: t for n, t in TOOLS.items() if isinstance(t, ReadTool)}
WRITES: dict[str, WriteTool] = {n: t for n, t in TOOLS.items() if isinstance(t, WriteTool)}
BUILTIN: dict[str, ToolSpec] = {name: tool.spec for name, tool in TOOLS.items()}
READ_TOOLS = frozenset(READS)
