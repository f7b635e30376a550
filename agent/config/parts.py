"""Tables inside the settings: what a model costs, and an MCP server a model may call."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agent.contracts.jobs import schedule_error


class ModelPrice(BaseModel):
    """What 1,000 tokens cost, in the operator's currency."""

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)


class McpServer(BaseModel):
    """One MCP server whose tools a model may call (``[[mcp_servers]]`` in dta.toml).

    Started with ``command`` (stdio; ``python_module`` runs a module with dta's own Python)
    or reached at ``url`` (streamable HTTP). Its tools are named ``mcp.<name>.<tool>`` in
    ``tools``. Each is a write unless listed in ``reads``; a write is irreversible (it waits
    for the asker's approval) unless listed in ``reversible``.

    A stdio server's environment is a short harmless list (``PATH``, ``HOME``, …), the names
    in ``pass_env`` with the daemon's values, and ``env`` as given: never the daemon's
    secrets unless named (``dta doctor`` warns of a ``DTA_*`` or ``DINGTALK_*`` name).
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,31}$")
    command: list[str] = Field(default_factory=list)
    python_module: str | None = None
    url: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    pass_env: list[str] = Field(default_factory=list)  # names passed on from dta's environment
    reads: list[str] = Field(default_factory=list)
    reversible: list[str] = Field(default_factory=list)
    # Per tool, the arguments that name people (staff ids). A write's are who it touches
    # (each must be someone the run resolved); an undeclared write counts as touching
    # others and waits for approval. A read's are filled with the asker's id, whatever the
    # model said: a read runs for the asker only.
    people: dict[str, list[str]] = Field(default_factory=dict)
    # Per tool, the kinds of effect a write has (message, todo, event, approve, submit,
    # delete, update, upload, group, pay, done): what its result may be said to have done.
    # Undeclared: "other" — it backs only a claim that names no kind (「办好了」).
    effects: dict[str, list[str]] = Field(default_factory=dict)
    start_timeout_s: float = Field(default=10, gt=0)
    call_timeout_s: float = Field(default=20, gt=0)

    @model_validator(mode="after")
    def _one_way_to_reach_it(self) -> McpServer:
        ways = [bool(self.command), self.python_module is not None, self.url is not None]
        if sum(ways) != 1:
            raise ValueError(
                f"mcp server {self.name!r}: give exactly one of command, python_module, url"
            )
        return self


class JobEntry(BaseModel):
    """A recurring job an operator declares (``[[jobs]]`` in dta.toml): ``schedule`` in
    cron's five fields, read in ``timezone``; ``owner`` the staff id whose authority and
    budget it runs with; ``conversation`` a group's ``cid``, or unset for the owner's own
    chat with the robot; ``instruction`` what is asked each time. ``name`` keeps the job the
    same job across restarts (an edited schedule or instruction changes it in place)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    schedule: str = Field(min_length=9, max_length=120)
    owner: str = Field(min_length=1)
    conversation: str | None = None
    instruction: str = Field(min_length=1, max_length=2000)

    @model_validator(mode="after")
    def _cron(self) -> JobEntry:
        error = schedule_error(self.schedule)
        if error is not None:
            raise ValueError(f"schedule {self.schedule!r}: {error}")
        return self


class KnowledgeSource(BaseModel):
    """A knowledge source in DingTalk (``[[knowledge_sources]]``): exactly one of ``doc`` (one
    doc's node id), ``wiki`` (a knowledge base: its workspace id, every doc and AI table in
    it) or ``table`` (an AI table's base id; ``fields`` the columns that make a record's text,
    all of them when empty). ``reader``: the unionId whose rights the snapshots are taken
    with. ``scope``: where its sections may be served — ``"dm"``, ``"groups"`` or a list of
    group ``cid``s; unset: DMs only. In a DM each section also needs the asker's own right to
    read its doc; in a group, the source must name the group (or ``"groups"``: the operator
    marks it fit for every group, as shared with them)."""

    model_config = ConfigDict(extra="forbid")

    doc: str | None = Field(default=None, min_length=1)
    wiki: str | None = Field(default=None, min_length=1)
    table: str | None = Field(default=None, min_length=1)
    fields: list[str] = Field(default_factory=list)
    reader: str | None = Field(default=None, min_length=1)
    scope: Literal["dm", "groups"] | list[str] | None = None
    name: str | None = Field(default=None, max_length=64)  # how status and the console call it

    @model_validator(mode="after")
    def _one_target(self) -> KnowledgeSource:
        given = [k for k in ("doc", "wiki", "table") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("a knowledge source names exactly one of doc, wiki, table")
        if self.fields and self.table is None:
            raise ValueError("fields are a table's")
        return self

    @property
    def kind(self) -> Literal["doc", "wiki", "table"]:
        return "doc" if self.doc else "wiki" if self.wiki else "table"

    @property
    def target(self) -> str:
        return str(self.doc or self.wiki or self.table)

    @property
    def key(self) -> str:
        """The source's identity in the store: its kind and target."""
        return f"{self.kind}:{self.target}"
