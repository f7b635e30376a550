"""MCP servers as tool sources, over the official ``mcp`` SDK (stdio and streamable HTTP).

Each server in ``[[mcp_servers]]`` is connected when the runtime starts, by a task that holds
its session open for the runtime's life (the SDK's sessions are ``async with`` scopes, which
must end in the task that entered them). Its tools become ``ToolSpec``s named
``mcp.<server>.<tool>``: a read when the configuration lists it in ``reads``, else a write
(an act, through the action gate), irreversible unless listed in ``reversible``.

A stdio server inherits only harmless variables, the names its ``pass_env`` lists and its
``env``, never the daemon's secrets (``agent/contracts/environment.py``).

A server that does not start, or dies, is reported (``status``, ``dta doctor``) and its
tools are simply absent from the next run; nothing else stops. A call's result is data: its
text (and structured content) goes to the model marked as data, never as instructions.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from agent.config import McpServer
from agent.contracts import ToolSpec
from agent.contracts.environment import child_env

log = logging.getLogger("dta.mcp")

PREFIX = "mcp."


def tool_name(server: str, tool: str) -> str:
    return f"{PREFIX}{server}.{tool}"


def split_name(name: str) -> tuple[str, str] | None:
    """(server, tool) of ``mcp.<server>.<tool>``, else None."""
    if not name.startswith(PREFIX):
        return None
    server, _, tool = name[len(PREFIX) :].partition(".")
    return (server, tool) if server and tool else None


@dataclass(frozen=True)
class McpAnswer:
    ok: bool
    data: Any = None
    # mcp_unavailable (not sent) | mcp_error (answered an error) | mcp_timeout | mcp_broken
    # (the session broke after the call went: it may have been applied)
    error: str | None = None
    detail: str | None = None


def _schema(raw: Any) -> dict[str, Any]:
    """The tool's input schema as an object schema (``title`` keys dropped: noise)."""
    schema = dict(raw) if isinstance(raw, dict) else {}
    schema.pop("title", None)
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    for prop in schema["properties"].values():
        if isinstance(prop, dict):
            prop.pop("title", None)
    return schema


def _content(result: Any) -> Any:
    """What a ``CallToolResult`` carries, as plain data."""
    structured = getattr(result, "structured_content", None)
    texts = [
        getattr(item, "text", None)
        for item in getattr(result, "content", None) or []
        if getattr(item, "type", None) == "text"
    ]
    if structured is not None:
        return structured
    return texts[0] if len(texts) == 1 else texts


def _server_stderr() -> Any:
    """Where a stdio server's stderr goes: the daemon's own, as a real file descriptor.

    The SDK's default is ``sys.stderr`` as it was when ``mcp.client.stdio`` was first
    imported, which may be a replaced stream without a descriptor (a test's capture, an
    embedding host's logger); the child process needs one.
    """
    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None:
                stream.fileno()
                return stream
        except (AttributeError, OSError, ValueError):
            continue
    return subprocess.DEVNULL


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class McpSource:
    """One MCP server: its connection, its tools and its state."""

    def __init__(self, config: McpServer) -> None:
        self.config = config
        self.status = "not started"
        self.tools: dict[str, ToolSpec] = {}
        self._client: Any = None
        self._holder: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._closing = asyncio.Event()

    @property
    def alive(self) -> bool:
        return self.status == "ready"

    def _target(self) -> Any:
        from mcp.client.stdio import StdioServerParameters, stdio_client

        config = self.config
        if config.url is not None:
            return config.url
        if config.python_module is not None:
            command, args = sys.executable, ["-m", config.python_module]
        else:
            command, args = config.command[0], config.command[1:]
        # not the daemon's environment: it holds the app's and robots' secrets and the model key
        env = {**child_env(config.pass_env), **config.env}
        params = StdioServerParameters(command=command, args=args, env=env)
        return stdio_client(params, errlog=_server_stderr())

    async def start(self) -> None:
        """Connect and list the tools; a failure is a status, never an exception."""
        self._holder = asyncio.create_task(self._hold(), name=f"mcp-{self.config.name}")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._ready.wait(), self.config.start_timeout_s)
        if not self._ready.is_set():
            self.status = f"failed: no answer within {self.config.start_timeout_s:g} s"
            self._holder.cancel()
        log.info("mcp server", extra={"server": self.config.name, "status": self.status})

    async def _hold(self) -> None:
        from mcp import Client

        try:
            async with Client(self._target(), read_timeout_seconds=self.config.call_timeout_s) as c:
                listed = await c.list_tools()
                self.tools = {
                    tool_name(self.config.name, t.name): self._spec(t) for t in listed.tools
                }
                self._client, self.status = c, "ready"
                self._ready.set()
                await self._closing.wait()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # the SDK reports a dead server as an exception group
            leaf = _leaf(exc)
            reason = f"{type(leaf).__name__}: {leaf}"[:300]
            self.status = ("dead: " if self._ready.is_set() else "failed: ") + reason
            log.warning("mcp server down", extra={"server": self.config.name, "error": reason})
            self._ready.set()
        finally:
            self._client = None

    def _spec(self, tool: Any) -> ToolSpec:
        config = self.config
        read = tool.name in config.reads
        schema = getattr(tool, "input_schema", None) or getattr(tool, "inputSchema", None)
        return ToolSpec(
            name=tool_name(config.name, tool.name),
            description=(tool.description or tool.name)[:500],
            parameters=_schema(schema),
            effect="read" if read else "write",
            reversible=read or tool.name in config.reversible,
            label=f"{config.name}.{tool.name}",
            # which arguments name people, as the operator declared (None: undeclared)
            people_args=list(config.people[tool.name]) if tool.name in config.people else None,
            effects=list(config.effects.get(tool.name) or ["other"]),
        )

    async def call(self, tool: str, arguments: dict[str, Any]) -> McpAnswer:
        from mcp import MCPError  # the SDK is loaded once a server is configured, not before
        from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        client = self._client
        if client is None or not self.alive:
            return McpAnswer(False, error="mcp_unavailable", detail=self.status)
        try:
            result = await asyncio.wait_for(
                client.call_tool(tool, arguments), self.config.call_timeout_s
            )
        except TimeoutError:
            return McpAnswer(False, error="mcp_timeout", detail="no answer in time")
        except MCPError as exc:
            code = getattr(getattr(exc, "error", None), "code", None)
            if code != CONNECTION_CLOSED:  # the server answered with an error: it is alive
                kind = "mcp_timeout" if code == REQUEST_TIMEOUT else "mcp_error"
                return McpAnswer(False, error=kind, detail=str(exc)[:300])
            return self._broke(exc)
        except Exception as exc:  # the session broke (the server died): not a tool's error
            return self._broke(exc)
        data = _content(result)
        if getattr(result, "is_error", False):
            return McpAnswer(False, data, error="mcp_error", detail=str(data)[:300])
        return McpAnswer(True, data)

    def _broke(self, exc: BaseException) -> McpAnswer:
        """The session broke after the call went (the server died): a write may have been
        applied; its tools leave the next run."""
        self.status = f"dead: {type(exc).__name__}: {exc}"[:300]
        log.warning("mcp server died", extra={"server": self.config.name})
        return McpAnswer(False, error="mcp_broken", detail=self.status)

    async def aclose(self) -> None:
        self._closing.set()
        if self._holder is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(self._holder, 5)


class McpSources:
    """Every configured server; their live tools by name."""

    def __init__(self, configs: list[McpServer]) -> None:
        self.sources = {config.name: McpSource(config) for config in configs}

    async def start(self) -> None:
        await asyncio.gather(*(source.start() for source in self.sources.values()))

    async def aclose(self) -> None:
        await asyncio.gather(*(source.aclose() for source in self.sources.values()))

    def spec(self, name: str) -> ToolSpec | None:
        """The tool's spec while its server is alive (a dead server's tools are absent)."""
        where = split_name(name)
        source = self.sources.get(where[0]) if where else None
        return source.tools.get(name) if source is not None and source.alive else None

    async def call(self, name: str, arguments: dict[str, Any]) -> McpAnswer:
        where = split_name(name)
        source = self.sources.get(where[0]) if where else None
        if where is None or source is None:
            return McpAnswer(False, error="mcp_unavailable", detail=f"no server for {name}")
        return await source.call(where[1], arguments)

    def report(self) -> list[dict[str, Any]]:
        """Each server's state and tools (``dta doctor``)."""
        return [
            {
                "server": name,
                "status": source.status,
                "tools": {tool: spec.effect for tool, spec in sorted(source.tools.items())},
            }
            for name, source in self.sources.items()
        ]
