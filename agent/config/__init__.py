"""Runtime configuration: ``dta.toml`` overlaid by environment variables, validated once.

    settings = load_settings()            # dta.toml (if present) + DINGTALK_*/DTA_* variables
    for robot in settings.robot_settings():   # one Settings per robot ([[robots]]), or itself
        ...

- ``settings``: ``Settings`` (the keys of ``fields``, each with its default, checked) and
  ``validate_settings`` / ``ConfigError``; ``parts``: the tables inside it (``McpServer``,
  ``ModelPrice``);
- ``robots``: how a ``[[robots]]`` table and the top level make one robot's settings;
- ``loading``: the file and the environment.
"""

from agent.config.loading import ENV_KEYS, load_settings
from agent.config.parts import McpServer, ModelPrice
from agent.config.settings import DINGTALK_API, ConfigError, Settings, validate_settings

__all__ = [
    "DINGTALK_API",
    "ENV_KEYS",
    "ConfigError",
    "McpServer",
    "ModelPrice",
    "Settings",
    "load_settings",
    "validate_settings",
]
