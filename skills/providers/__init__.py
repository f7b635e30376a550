"""Providers turn an enriched invocation plus the selected skills into action requests."""

from skills.providers.base import Provider, ProviderFailed, ProviderReply
from skills.providers.rules import RulesProvider

__all__ = ["Provider", "ProviderFailed", "ProviderReply", "RulesProvider"]
