"""Tables inside the settings: what a model costs, and an MCP server a model may call."""

from __future__ import annotations

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
