"""The provider a runtime answers with, chosen here and nowhere else, and the ``rules``
fallback."""

from __future__ import annotations

from zoneinfo import ZoneInfo

from agent.config import Settings
from skills.providers.base import Provider
from skills.providers.command import CommandConfig, CommandProvider
from skills.providers.openai import OpenAIConfig, OpenAIProvider
from skills.providers.openai_stream import StreamingOpenAIProvider
from skills.providers.rules import RulesProvider


def build_provider(settings: Settings) -> Provider:
    if settings.provider == "openai":
        assert settings.openai_base_url and settings.openai_model  # checked by Settings
        key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
        config = OpenAIConfig(
            base_url=settings.openai_base_url,
            model=settings.openai_model,
            api_key=key,
            timeout_s=settings.openai_timeout_s,
            max_retries=settings.openai_max_retries,
            response_format=settings.openai_response_format,
            vision=settings.openai_vision,
            max_file_chars=settings.max_file_chars,
            max_tool_steps=settings.max_tool_steps,
        )
        if settings.reply_mode == "card":  # the answer fills its card as the model writes
            return StreamingOpenAIProvider(config, settings.agent)
        return OpenAIProvider(config, settings.agent)
    if settings.provider == "command":
        return CommandProvider(
            CommandConfig(
                argv=tuple(settings.command),
                runs_root=settings.command_runs_root,
                timeout_s=settings.command_timeout_s,
                env=tuple(settings.command_env),
                keep_runs=settings.command_keep_runs,
            )
        )
    return rules_provider(settings)


def rules_provider(settings: Settings) -> RulesProvider:
    """The rules provider: configured, or the fallback of a model (its knowledge, its
    arithmetic, its honest "I can't answer that now")."""
    return RulesProvider(settings.agent, settings.knowledge_dir, ZoneInfo(settings.timezone))
