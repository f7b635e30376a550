"""The settings of a deployment: every key of ``dta.toml``, each default written once.

Invalid configuration stops start-up with the offending field named (``ConfigError``).
Secrets are ``SecretStr`` so that printing a Settings object never shows them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from agent.config.parts import McpServer, ModelPrice
from agent.config.robots import robot_tables
from agent.contracts import AgentDefinition
from agent.contracts.filetypes import MAX_UPLOAD_BYTES
from agent.contracts.quiet_hours import parse_quiet_hours
from agent.contracts.tools import BUILTIN

DINGTALK_API = "https://api.dingtalk.com"


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    # behaviour
    provider: Literal["rules", "openai", "command"] = "rules"
    paused: bool = False
    allow_users: list[str] = Field(default_factory=list)
    deny_users: list[str] = Field(default_factory=list)
    allow_conversations: list[str] = Field(default_factory=list)
    max_event_age_s: float = Field(default=900, gt=0)
    # "*": every type DingTalk sends; list types to exclude the rest (unsupported_msgtype)
    supported_msgtypes: list[str] = Field(default_factory=lambda: ["*"])
    write_budget_per_conversation_per_minute: int = Field(default=20, ge=0)
    write_budget_per_day: int = Field(default=10000, ge=0)
    max_reply_chars: int = Field(default=3800, ge=100, le=6000)
    max_reply_chunks: int = Field(default=4, ge=1)
    # pictures and files a reply may carry (each its own message after the text), and the
    # largest one: DingTalk's media upload takes up to 20 MB
    max_attachments_per_reply: int = Field(default=4, ge=0, le=20)
    max_attachment_bytes: int = Field(default=MAX_UPLOAD_BYTES, ge=1024, le=MAX_UPLOAD_BYTES)
    agent: AgentDefinition = Field(default_factory=AgentDefinition)

    # the enriched invocation (agent/run/invocation.py)
    burst_window_s: float = Field(default=120, ge=0)
    # a provider sees the person's last context_turns messages to the robot in this
    # conversation within context_window_s, with the robot's delivered replies (0: none)
    context_window_s: float = Field(default=1800, ge=0)
    context_turns: int = Field(default=6, ge=0, le=50)
    max_text_chars: int = Field(default=4000, ge=100)
    max_quote_chars: int = Field(default=1000, ge=50)
    max_burst_messages: int = Field(default=10, ge=0)
    identity_lookup: bool = True
    identity_ttl_s: float = Field(default=86400, ge=0)
    identity_timeout_s: float = Field(default=2.0, gt=0)
    # the old-style OpenAPI host (user details); defaults to oapi.dingtalk.com for the
    # real platform and to openapi_base_url for anything else (the bundled fake)
    oapi_base_url: str | None = None
    # write response-gate.json, enriched-invocation.json and CONTEXT.md per run here
    run_dir: Path | None = None
    knowledge_dir: Path | None = None
    # a run is given at most knowledge_items matching sections (and memories), each cut to
    # knowledge_item_chars (agent/run/grounding.py)
    knowledge_items: int = Field(default=3, ge=0, le=20)
    knowledge_item_chars: int = Field(default=1500, ge=100)
    skill_paths: list[Path] = Field(default_factory=list)

    # media (agent/run/media.py): fetched only for runs the response gate engaged
    media_dir: Path = Path(".dta/media")  # one folder per run, beside the store by default
    max_download_bytes: int = Field(default=20 * 1024 * 1024, ge=1024)
    download_timeout_s: float = Field(default=30, gt=0)
    media_keep_days: float = Field(default=7, gt=0)  # `dta store prune` removes older media
    max_file_chars: int = Field(default=8000, ge=100)  # of a text file shown to a model

    # the robot and its app
    client_id: str | None = None
    client_secret: SecretStr | None = None
    robot_code: str | None = None
    openapi_base_url: str = DINGTALK_API
    # Webhooks within this many seconds of expiry are treated as expired.
    webhook_expiry_margin_s: float = Field(default=30, ge=0)
    # Session webhooks are contacted only on these origins (scheme://host[:port]); a frame
    # naming any other URL is answered by OpenAPI instead, with the reason on the receipt.
    webhook_origins: list[str] = Field(default_factory=lambda: ["https://oapi.dingtalk.com"])

    # outbound HTTP
    connect_timeout_s: float = Field(default=5, gt=0)
    read_timeout_s: float = Field(default=10, gt=0)
    send_retries: int = Field(default=3, ge=0, le=10)
    max_retry_after_s: float = Field(default=30, ge=0)
    http_proxy: str | None = None  # e.g. http://proxy:3128 for the OpenAPI and webhooks
    # Requests in flight to DingTalk at once (and kept-alive connections). 8 at a 100 ms
    # answer time is 80 requests/s, more than the ~20 QPS per API a standard app gets;
    # more only help a platform that answers slowly, and each costs CPU on every request
    # (httpcore's pool checks every connection against every other).
    http_max_connections: int = Field(default=8, ge=1, le=100)

    # runtime
    store_path: Path = Path(".dta/dta.db")
    # PostgreSQL instead of the SQLite file, for several replicas of one robot
    # (postgresql://user@host/db); each robot's records live in their own schema,
    # ``dta_<robot code>`` unless ``store_schema`` names one.
    store_url: str | None = None
    store_schema: str | None = None
    store_synchronous: Literal["normal", "full"] = "normal"
    # How long one statement waits for another process's write lock before the store
    # counts as unavailable (the run then waits and is driven again; nothing is dropped).
    store_busy_timeout_s: float = Field(default=10, gt=0)
    # Runs at their provider (the model, a command agent) at once; the rest of every run
    # in memory goes on meanwhile, so its "稍等" still comes ack_after_s after arrival.
    max_concurrent_runs: int = Field(default=16, ge=1)
    shutdown_grace_s: float = Field(default=10, ge=0)
    # The store is the queue: at most this many runs wait in memory; the rest stay durable
    # in the store and are picked up by the recovery loop as capacity frees.
    max_queued_runs: int = Field(default=1000, ge=1)
    # A run is owned under a lease renewed while it works; the recovery loop takes over
    # only runs whose lease expired (an owner that stopped renewing).
    run_lease_s: float = Field(default=60, gt=0)
    # How often the recovery loop looks for stored events without a finished run.
    recovery_interval_s: float = Field(default=5, gt=0)
    # Readiness: the store's write probe gives up after this long (never the busy timeout).
    store_probe_timeout_s: float = Field(default=0.5, gt=0)
    # Frames up to this size are read; larger ones are quarantined (and acked when their
    # id can be read) instead of dropping the connection.
    max_frame_bytes: int = Field(default=4 * 1024 * 1024, ge=64 * 1024)

    # the Stream Mode connection (see agent/dingtalk/connector.py)
    stream_ping_interval_s: float = Field(default=10, gt=0)
    stream_ping_timeout_s: float = Field(default=10, gt=0)
    open_connection_timeout_s: float = Field(default=10, gt=0)
    reconnect_backoff_base_s: float = Field(default=0.5, gt=0)
    reconnect_backoff_max_s: float = Field(default=30, gt=0)

    # operations
    health_host: str = "127.0.0.1"
    health_port: int = Field(default=8765, ge=0, le=65535)  # 0: no health server
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["json", "text"] = "json"

    # How a reply is delivered: a text message, a markdown message, or an AI card that fills
    # in as the model writes (agent/cards/broker.py). Acks and the host's own short messages stay
    # text. Card mode needs the OpenAPI credentials and a published card template whose
    # streaming variable is ``card_content_key``.
    reply_mode: Literal["text", "markdown", "card"] = "text"
    card_template_id: str | None = None
    card_content_key: str = Field(default="content", min_length=1)
    # Frames of one card go at least this far apart (a frame carries the full text so far,
    # so skipping ahead loses nothing).
    card_frame_interval_ms: int = Field(default=500, ge=0)
    # Card calls per second for the whole app, shared through the store by every replica;
    # DingTalk throttles at about 20 per second per API on standard plans.
    card_frames_per_second: float = Field(default=10, gt=0, le=100)
    # A card with no progress for this long is finalized with what was streamed and a note
    # that the answer was cut off.
    card_stall_s: float = Field(default=45, gt=0)
    # DingTalk renders a card block of more than about 3,000 Chinese characters blank while
    # its API answers success: a longer answer goes on as the next card (``<key>#2``, …).
    card_block_chars: int = Field(default=2500, ge=100, le=3000)

    # Proactive work (agent/proactive/heartbeat.py): every beat looks for due follow-ups, reminders
    # and expiries. Off unless ``heartbeat_interval_s`` is set; reminders need it.
    heartbeat_interval_s: float | None = Field(default=None, ge=1)
    # A task waiting for an answer gets a follow-up after this long without one (off when
    # unset), at most ``max_follow_ups`` times; the next one would expire it instead.
    follow_up_after_s: float | None = Field(default=None, ge=1)
    max_follow_ups: int = Field(default=1, ge=0, le=10)
    # A task (not a reminder) still open this long after it began expires (off when unset).
    task_expiry_s: float | None = Field(default=None, ge=1)
    # "22:00-08:00" (in ``timezone``): follow-ups due then wait for the end; reminders,
    # whose time the person chose, do not.
    quiet_hours: str | None = None
    timezone: str = "Asia/Shanghai"  # how reminder times are read and said
    max_reminder_days: float = Field(default=30, gt=0)

    # read OpenAPI sends back from DingTalk: receipts say "verified", not just "accepted"
    verify_by_readback: bool = False
    # a message not answered this long after it arrived gets an ack ("seen, working on it")
    ack_after_s: float = Field(default=3.0, gt=0)
    # messages to one conversation start at least this far apart (DingTalk may show closer
    # ones out of order); other conversations never wait on it; 0 = no spacing
    send_gap_s: float = Field(default=1.0, ge=0, le=10)

    # openai provider: any OpenAI-compatible /chat/completions endpoint
    openai_base_url: str | None = None
    openai_model: str | None = None
    openai_api_key: SecretStr | None = None
    openai_timeout_s: float = Field(default=60, gt=0)
    openai_max_retries: int = Field(default=2, ge=0, le=10)
    openai_response_format: bool = True  # {"type": "json_object"}; some servers reject it
    openai_vision: bool = False  # the model reads images: pictures go as image parts

    # What a model may cost (0 = no limit), checked before each call (a call that crosses a
    # limit is still delivered); over one, or with the model down, runs fall back to the
    # rules provider and say so. Prices per 1,000 tokens, by model name.
    model_tokens_per_person_per_day: int = Field(default=0, ge=0)
    model_tokens_per_conversation_per_day: int = Field(default=0, ge=0)
    model_tokens_per_month: int = Field(default=0, ge=0)
    model_prices: dict[str, ModelPrice] = Field(default_factory=dict)

    # workspace tools a model may call (agent/contracts/tools.py); the openai provider only.
    # Reads run at once; writes are acts through the action gate (agent/acts/).
    tools: list[str] = Field(default_factory=list)
    max_tool_steps: int = Field(default=4, ge=1, le=20)  # rounds of tool calls per answer
    # The working signal when an answer takes longer than ack_after_s: a short text (as
    # ever), DingTalk's emotion reaction on the person's message (recalled when the run
    # ends), or nothing.
    ack_style: Literal["text", "reaction", "none"] = "text"
    ack_reaction: str = Field(default="🤔思考中", min_length=1, max_length=20)
    # MCP servers as tool sources (agent/mcp/); their tools join ``tools`` by name
    mcp_servers: list[McpServer] = Field(default_factory=list)
    max_acts_per_run: int = Field(default=3, ge=1, le=20)
    act_budget_per_conversation_per_day: int = Field(default=20, ge=1)
    act_budget_per_day: int = Field(default=200, ge=1)
    # An act that touches others waits for its asker's approval this long, then expires.
    approval_timeout_s: float = Field(default=3600, gt=0)
    # The approval card (agent/acts/approval_card.py for its contract); without one the
    # asker approves with a text code (「确认 4F2A」).
    approval_card_template_id: str | None = None

    # command provider: an external agent run in a prepared run directory
    command: list[str] = Field(default_factory=list)  # argv, never a shell line
    command_timeout_s: float = Field(default=60, gt=0)
    command_runs_root: Path = Path(".dta/runs")
    command_env: list[str] = Field(default_factory=list)  # extra env names to pass on
    command_keep_runs: bool = False

    # Several robots in one deployment (``[[robots]]``): each table is one robot's own keys,
    # the rest come from the top level, which then holds defaults only and is no robot
    # itself (agent/config/robots.py). Empty: the top level is the one robot.
    robots: list[dict[str, Any]] = Field(default_factory=list, repr=False)  # holds secrets
    _robots: list[Settings] | None = PrivateAttr(default=None)
    # A robot's siblings' secrets: never said by it either (its action gate checks them)
    _sibling_secrets: tuple[str, ...] = PrivateAttr(default=())

    @field_validator("openapi_base_url", "openai_base_url", "oapi_base_url")
    @classmethod
    def _no_trailing_slash(cls, value: str | None) -> str | None:
        return value.rstrip("/") if value else value

    @field_validator("webhook_origins")
    @classmethod
    def _origins(cls, values: list[str]) -> list[str]:
        origins = []
        for value in values:
            parts = urlsplit(value)
            if parts.scheme not in ("https", "http") or not parts.hostname:
                raise ValueError(f"{value!r} is not an origin like https://oapi.dingtalk.com")
            if parts.path.strip("/") or parts.query or parts.fragment or parts.username:
                raise ValueError(f"{value!r}: an origin is scheme://host[:port], nothing more")
            origins.append(f"{parts.scheme}://{parts.netloc.lower()}")
        return origins

    @model_validator(mode="before")
    @classmethod
    def _robot_code_defaults_to_client_id(cls, data: Any) -> Any:
        # An app robot's code is its app key unless the operator says otherwise.
        if isinstance(data, dict) and data.get("client_id") and not data.get("robot_code"):
            data = {**data, "robot_code": data["client_id"]}
        return data

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError, OSError):  # "Asia" is a directory
            raise ValueError(f"{value!r} is not a time zone name like Asia/Shanghai") from None
        return value

    @field_validator("quiet_hours")
    @classmethod
    def _quiet_hours(cls, value: str | None) -> str | None:
        if value is not None and parse_quiet_hours(value) is None:
            raise ValueError(f"{value!r} is not a span like 22:00-08:00")
        return value or None

    @field_validator("store_url")
    @classmethod
    def _postgres_url(cls, value: str | None) -> str | None:
        if value and not value.startswith(("postgresql://", "postgres://")):
            raise ValueError("must be a PostgreSQL URL (postgresql://user@host:5432/db)")
        return value or None

    @model_validator(mode="after")
    def _one_store(self) -> Settings:
        if self.store_url and "store_path" in self.model_fields_set:
            raise ValueError(
                "store_url and store_path: set one (store_path is the SQLite file,"
                " store_url the PostgreSQL database)"
            )
        return self

    @property
    def store_target(self) -> str:
        """Where the store is: the PostgreSQL URL, else the SQLite file's path."""
        return self.store_url or str(self.store_path)

    @model_validator(mode="after")
    def _scheduling_needs_a_heartbeat(self) -> Settings:
        # Follow-ups, expiry and quiet hours happen on beats: set without one, they would
        # silently never happen.
        needing = ("follow_up_after_s", "task_expiry_s", "quiet_hours")
        orphans = [name for name in needing if getattr(self, name) is not None]
        if orphans and self.heartbeat_interval_s is None:
            raise ValueError(
                f"{', '.join(orphans)} need heartbeat_interval_s: they happen on its beats"
            )
        return self

    @field_validator("tools")
    @classmethod
    def _tools_are_known(cls, value: list[str]) -> list[str]:
        unknown = [name for name in value if name not in BUILTIN and not name.startswith("mcp.")]
        if unknown:
            raise ValueError(
                f"unknown tools {unknown}; built-in: {sorted(BUILTIN)}, or mcp.<server>.<tool>"
            )
        return value

    @model_validator(mode="after")
    def _mcp_tools_name_a_server(self) -> Settings:
        servers = {server.name for server in self.mcp_servers}
        if len(servers) != len(self.mcp_servers):
            raise ValueError("mcp_servers: two servers have the same name")
        for name in self.tools:
            if name.startswith("mcp."):
                _, server, tool = [*name.split(".", 2), "", ""][:3]
                if server not in servers or not tool:
                    raise ValueError(
                        f"tools: {name!r} names no [[mcp_servers]] entry (have {sorted(servers)})"
                    )
        return self

    @model_validator(mode="after")
    def _provider_is_configured(self) -> Settings:
        if self.provider == "openai" and not (self.openai_base_url and self.openai_model):
            raise ValueError(
                "openai_base_url and openai_model are required when provider is 'openai'"
            )
        if self.reply_mode == "card" and not self.card_template_id:
            raise ValueError("card_template_id is required when reply_mode is 'card'")
        if self.reply_mode == "card" and not self.has_openapi_credentials and not self.robots:
            raise ValueError(
                "reply_mode 'card' needs client_id and client_secret: cards go through the OpenAPI"
            )
        if self.provider == "command" and not self.command:
            raise ValueError("command (an argv list) is required when provider is 'command'")
        return self

    @property
    def directory_base_url(self) -> str:
        if self.oapi_base_url:
            return self.oapi_base_url
        if self.openapi_base_url == DINGTALK_API:
            return "https://oapi.dingtalk.com"
        return self.openapi_base_url

    @property
    def secret_values(self) -> list[str]:
        """Values that must never appear in logs, recordings, reports or chat (every
        robot's, in a deployment of several)."""
        values = [self.client_secret, self.openai_api_key]
        own = [v.get_secret_value() for v in values if v is not None and v.get_secret_value()]
        if not self.robots:
            return list(dict.fromkeys([*own, *self._sibling_secrets]))
        theirs = [value for robot in self.robot_settings() for value in robot.secret_values]
        return list(dict.fromkeys([*own, *theirs]))

    @model_validator(mode="after")
    def _robots_are_valid(self) -> Settings:
        if self.robots:
            self.robot_settings()  # raises naming the table and the field
        return self

    def robot_settings(self) -> list[Settings]:
        """One ``Settings`` per robot: each ``[[robots]]`` table over the top level's keys,
        or this one alone when there are none (agent/config/robots.py)."""
        if not self.robots:
            return [self]
        if self._robots is None:
            top = self.model_dump(exclude_unset=True)
            robots = []
            for where, data in robot_tables(top, self.robots, self.store_path, self.media_dir):
                try:
                    robots.append(Settings.model_validate(data))
                except ValidationError as exc:
                    raise ValueError(f"{where}: {_problems(exc)}") from None
            every = tuple(value for robot in robots for value in robot.secret_values)
            for robot in robots:
                robot._sibling_secrets = every
            self._robots = robots
        return list(self._robots)

    def robot(self, code: str | None) -> Settings:
        """The settings of the robot ``code`` (the only one when None and there is one);
        ``ConfigError`` naming the robots there are otherwise."""
        robots = self.robot_settings()
        if code is None and len(robots) == 1:
            return robots[0]
        for robot in robots:
            if code is not None and robot.robot_code == code:
                return robot
        names = ", ".join(str(r.robot_code) for r in robots)
        if code is None:
            raise ConfigError(
                f"this deployment serves several robots ({names}): name one with --robot"
            )
        raise ConfigError(f"no robot {code!r} in this deployment (robots: {names})")

    @property
    def has_openapi_credentials(self) -> bool:
        return bool(self.client_id and self.client_secret and self.robot_code)

    def with_overrides(self, overrides: dict[str, Any]) -> Settings:
        """A copy with ``overrides`` applied and validated (used by lab cases).

        Only what was set is carried over, so defaults stay defaults; a store URL given
        here replaces the SQLite path the copy came with.
        """
        merged = self.model_dump(exclude_unset=True)
        merged.update(overrides)
        if overrides.get("store_url") and "store_path" not in overrides:
            merged.pop("store_path", None)
        return validate_settings(merged, source="config overrides")


class ConfigError(Exception):
    """Configuration that cannot be used; the message names each bad field."""


def _problems(exc: ValidationError) -> str:
    """Each error as ``field: message`` (the field dotted, ``(top level)`` for a rule over
    several fields)."""
    problems = []
    for err in exc.errors():
        field = ".".join(str(part) for part in err["loc"]) or "(top level)"
        message = str(err["msg"]).removeprefix("Value error, ")
        # a robot's own problem already names its table (robots[1] (hr): …)
        problems.append(message if message.startswith("robots[") else f"{field}: {message}")
    return "; ".join(problems)


def validate_settings(data: dict[str, Any], source: str) -> Settings:
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"invalid configuration in {source}: {_problems(exc)}") from None
