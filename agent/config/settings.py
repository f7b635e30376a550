"""The settings of a deployment: every key of ``dta.toml`` (``agent/config/fields.py``, each
default written once), checked, with what follows from them and the robots it serves.

Invalid configuration stops start-up with the offending field named (``ConfigError``).
Secrets are ``SecretStr`` so that printing a Settings object never shows them.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from agent.config.fields import DINGTALK_API, SettingsFields
from agent.config.robots import OWN_FOLDERS, robot_tables
from agent.contracts.quiet_hours import parse_quiet_hours
from agent.tools.builtin import BUILTIN


class Settings(SettingsFields):
    """One deployment's (or one robot's) configuration: the keys of ``SettingsFields``,
    checked here field by field and across fields, with what follows from them."""

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
    def _knowledge_sources_can_be_read(self) -> Settings:
        keys = [source.key for source in self.knowledge_sources]
        if len(set(keys)) != len(keys):
            raise ValueError("knowledge_sources: two entries name the same doc, wiki or table")
        for i, source in enumerate(self.knowledge_sources):
            if source.reader is None and self.knowledge_reader is None:
                raise ValueError(
                    f"knowledge_sources[{i}]: no reader; set its reader or knowledge_reader"
                    " (the unionId whose rights the snapshots are taken with)"
                )
        if self.knowledge_sources and not (self.client_id and self.client_secret):
            raise ValueError(
                "knowledge_sources needs client_id and client_secret: docs are read by the OpenAPI"
            )
        return self

    @model_validator(mode="after")
    def _jobs_can_run(self) -> Settings:
        names = [job.name for job in self.jobs]
        if len(set(names)) != len(names):
            raise ValueError("jobs: two [[jobs]] entries have the same name")
        if self.jobs and self.heartbeat_interval_s is None:
            raise ValueError("jobs: [[jobs]] run on the heartbeat; set heartbeat_interval_s")
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
        if self.form_card_template_id and not self.has_openapi_credentials and not self.robots:
            raise ValueError(
                "form_card_template_id needs client_id and client_secret: form cards go"
                " through the OpenAPI"
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
            folders = {key: getattr(self, key) for key in OWN_FOLDERS}
            for where, data in robot_tables(top, self.robots, self.store_path, folders):
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
