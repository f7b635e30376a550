"""``dta doctor``: preflight before ``dta run`` — each check ok or failed, with the fix.

Checks run in order and later ones are skipped when they cannot mean anything (no point
fetching a token without credentials). The exit status is non-zero when anything failed.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import httpx

from agent.clock import SystemClock
from agent.components import build_provider, transport_config
from agent.config import ConfigError, Settings, load_settings
from agent.probe import probe
from agent.transport import DingTalkTransport
from skills.loader import SkillError, SkillLibrary
from storage import Store


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""


def _credentials(settings: Settings) -> Check:
    missing = [
        env
        for env, value in (
            ("DINGTALK_CLIENT_ID", settings.client_id),
            ("DINGTALK_CLIENT_SECRET", settings.client_secret),
        )
        if not value
    ]
    if missing:
        return Check(
            "credentials",
            False,
            f"missing {', '.join(missing)}",
            "set them in the environment or as client_id/client_secret in dta.toml",
        )
    return Check("credentials", True, f"client id {settings.client_id}")


def _token(settings: Settings) -> Check:
    robot = settings.robot_code or settings.client_id
    transport = DingTalkTransport(
        transport_config(settings.with_overrides({"robot_code": robot})), SystemClock()
    )

    async def fetch() -> str:
        try:
            return await transport.access_token()
        finally:
            await transport.aclose()

    try:
        asyncio.run(fetch())
    except (httpx.HTTPError, Exception) as exc:  # any failure is the operator's to see
        return Check(
            "access token",
            False,
            f"{type(exc).__name__}: {exc}",
            f"check the app key/secret and that {settings.openapi_base_url} is reachable",
        )
    return Check("access token", True, f"fetched from {settings.openapi_base_url}")


def _stream(settings: Settings) -> Check:
    assert settings.client_secret is not None
    body = {
        "clientId": settings.client_id,
        "clientSecret": settings.client_secret.get_secret_value(),
        "subscriptions": [{"type": "CALLBACK", "topic": "/v1.0/im/bot/messages/get"}],
        "ua": "dta-doctor",
        "localIp": "",
    }
    url = f"{settings.openapi_base_url}/v1.0/gateway/connections/open"
    try:
        response = httpx.post(url, json=body, timeout=settings.open_connection_timeout_s)
    except httpx.HTTPError as exc:
        return Check("stream gateway", False, type(exc).__name__, f"is {url} reachable?")
    if response.status_code != 200:
        return Check(
            "stream gateway",
            False,
            f"answered {response.status_code}",
            "enable Stream Mode for the robot's app and check its credentials",
        )
    return Check("stream gateway", True, "connection ticket issued")


def _store(settings: Settings) -> Check:
    try:
        store = Store(settings.store_path, settings.store_synchronous)
        writable = store.writable()
        counts = store.counts()
        store.close()
    except (OSError, sqlite3.Error, RuntimeError) as exc:
        return Check(
            "store",
            False,
            f"{settings.store_path}: {exc}",
            "check the directory exists and is writable, or set DTA_STORE_PATH",
        )
    if not writable:
        return Check(
            "store", False, f"{settings.store_path} is locked", "another process holds a write lock"
        )
    return Check("store", True, f"{settings.store_path} ({counts.events} events stored)")


def _skills(settings: Settings) -> Check:
    try:
        library = SkillLibrary(settings.skill_paths)
        build_provider(settings)
    except (SkillError, ConfigError) as exc:
        return Check("skills and provider", False, str(exc), "fix the named file or field")
    names = ", ".join(skill.name for skill in library.skills)
    return Check("skills and provider", True, f"{settings.provider}; skills: {names}")


def _probe(settings: Settings) -> Check:
    result = asyncio.run(probe(settings))
    if result.loaded is None:
        return Check("host loading", True, result.evidence)
    if result.loaded:
        return Check("host loading", True, f"{result.provider} returned the probe marker")
    return Check(
        "host loading",
        False,
        f"{result.provider} did not return the marker: {result.evidence}",
        "check the provider's endpoint, model and skill paths",
    )


def diagnose(settings: Settings) -> list[Check]:
    checks = [_credentials(settings)]
    if checks[0].ok:
        checks.append(_token(settings))
        checks.append(_stream(settings))
    steps: list[Callable[[Settings], Check]] = [_store, _skills]
    checks.extend(step(settings) for step in steps)
    if checks[-1].ok:
        checks.append(_probe(settings))
    return checks


def doctor(config: Path | None, out: TextIO) -> int:
    try:
        settings = load_settings(config)
    except ConfigError as exc:
        print(f"FAIL  config: {exc}", file=out)
        return 1
    print("ok    config: loaded", file=out)
    checks = diagnose(settings)
    for check in checks:
        mark = "ok  " if check.ok else "FAIL"
        line = f"{mark}  {check.name}: {check.detail}"
        if not check.ok and check.fix:
            line += f"\n      fix: {check.fix}"
        print(line, file=out)
    return 0 if all(check.ok for check in checks) else 1
