"""Reading the configuration: ``dta.toml`` overlaid by environment variables, validated once.

Invalid configuration stops start-up with the offending field named (``ConfigError``).
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from agent.config.robots import env_name, robot_code_of
from agent.config.settings import ConfigError, Settings, validate_settings

# Environment variables that map onto settings (env wins over the file).
ENV_KEYS: dict[str, str] = {
    "DINGTALK_CLIENT_ID": "client_id",
    "DINGTALK_CLIENT_SECRET": "client_secret",
    "DINGTALK_ROBOT_CODE": "robot_code",
    "DINGTALK_OPENAPI_ENDPOINT": "openapi_base_url",
    "DINGTALK_OAPI_ENDPOINT": "oapi_base_url",
    "DTA_STORE_PATH": "store_path",
    "DTA_STORE_URL": "store_url",
    "DTA_PROVIDER": "provider",
    "DTA_KNOWLEDGE_DIR": "knowledge_dir",
    "DTA_OPENAI_API_KEY": "openai_api_key",
    "DTA_OPENAI_BASE_URL": "openai_base_url",
    "DTA_OPENAI_MODEL": "openai_model",
    "DTA_HEALTH_PORT": "health_port",
    "DTA_LOG_LEVEL": "log_level",
}


def load_settings(path: Path | None = None, env: dict[str, str] | None = None) -> Settings:
    """Read ``dta.toml`` (if present) and overlay the environment."""
    env = dict(os.environ) if env is None else env
    data: dict[str, Any] = {}
    source = "defaults"
    if path is None and Path("dta.toml").exists():
        path = Path("dta.toml")
    if path is not None:
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"configuration file not found: {path}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path} is not valid TOML: {exc}") from None
        source = str(path)
    for env_key, field in ENV_KEYS.items():
        if env.get(env_key):
            data[field] = env[env_key]
    robots = _robot_credentials(data.get("robots"), env)
    if any(env.get(name) for name in ENV_KEYS) or robots:
        source += " + environment"
    return validate_settings(data, source=source)


def _robot_credentials(robots: Any, env: dict[str, str]) -> bool:
    """Each ``[[robots]]`` table's credentials from ``DTA_ROBOT_<CODE>_CLIENT_ID`` and
    ``…_CLIENT_SECRET``, over the file's (secrets stay out of dta.toml); True if any."""
    found = False
    for table in robots if isinstance(robots, list) else []:
        code = robot_code_of(table) if isinstance(table, dict) else None
        for key in ("client_id", "client_secret"):
            value = env.get(env_name(code, key)) if code else None
            if value:
                table[key], found = value, True
    return found
