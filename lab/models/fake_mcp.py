"""A fake MCP server (stdio) for the lab: a notebook with one read and one write tool,
and a tool that tells which environment it was started with.

    python -m lab.models.fake_mcp            # speaks MCP on stdin/stdout
    python -m lab.models.fake_mcp --http 8765   # streamable HTTP on 127.0.0.1:8765/mcp

- ``read_note {name}`` → the note's text (a read);
- ``append_note {name, text}`` → appends a line, answers the note's new length (a write);
- ``environment_names {}`` → the sorted names of its environment variables, never their
  values (a test shows the daemon's secrets do not reach a server).

The notes live in this process (one server per runtime, so per case), or in the JSON file
named by ``DTA_FAKE_MCP_NOTES`` when a test wants to read what a write left;
``DTA_FAKE_MCP_SEED`` (JSON) seeds them: a case may seed a note that tries to give the
model orders, to show a tool result is data and widens nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from mcp.server import MCPServer

server = MCPServer("dta-fake-notes")


_SEED = {str(k): str(v) for k, v in json.loads(os.environ.get("DTA_FAKE_MCP_SEED", "{}")).items()}
_IN_MEMORY: dict[str, str] = dict(_SEED)


def _path() -> Path | None:
    named = os.environ.get("DTA_FAKE_MCP_NOTES")
    return Path(named) if named else None


def _notes() -> dict[str, str]:
    path = _path()
    if path is None:
        return _IN_MEMORY
    if path.exists():
        return dict(json.loads(path.read_text(encoding="utf-8")))
    return dict(_SEED)


@server.tool()
def read_note(name: str) -> str:
    """Read the note called ``name`` (empty when there is none)."""
    return _notes().get(name, "")


@server.tool()
def append_note(name: str, text: str) -> str:
    """Append a line to the note called ``name``; answers its new length in lines."""
    notes = _notes()
    lines = [line for line in notes.get(name, "").splitlines() if line]
    lines.append(text)
    notes[name] = "\n".join(lines)
    path = _path()
    if path is not None:
        path.write_text(json.dumps(notes, ensure_ascii=False), encoding="utf-8")
    return f"{name}: {len(lines)} lines"


@server.tool()
async def slow_append(name: str, text: str, seconds: float = 3.0) -> str:
    """Append a line, but answer only after ``seconds`` (a tool slower than its caller's
    timeout: the write happens, the answer comes too late)."""
    said = append_note(name, text)
    await asyncio.sleep(seconds)
    return said


@server.tool()
def environment_names() -> list[str]:
    """The names of this server's environment variables, sorted (never their values)."""
    return sorted(os.environ)


if __name__ == "__main__":
    import sys

    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
