"""``dta doctor``: preflight before ``dta run`` — each check ok or failed, with one fix.

It first says what it read: which configuration file (or none) and which environment
variables, by name only. Then each check names one cause and gives the one fix for it: a
host that does not resolve (DNS), a network that does not connect or answer, credentials
DingTalk refused, DingTalk itself failing, Stream Mode not enabled. Later checks are skipped
when they cannot mean anything — no gateway check after the credentials were refused, so a
bad key never also reads as "enable Stream Mode". Exit status 1 when anything failed.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import ssl
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

import httpx

from agent.cli.card_doctor import card_checks
from agent.cli.probe import probe
from agent.cli.skills import probe_verdict
from agent.clock import SystemClock
from agent.components import build_provider, open_store, transport_config
from agent.config import ENV_KEYS, ConfigError, Settings, load_settings
from agent.contracts.environment import daemon_names
from agent.dingtalk.openapi import TokenError
from agent.dingtalk.transport import DingTalkTransport
from skills.loader import SkillError, SkillLibrary
from storage.integrity import StoreError, remedy


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    cause: str = ""  # dns | network | credentials | platform | stream_mode | config | …
    # False for a line that says how something will be shown, not that it was probed: it
    # fails nothing, and it never reads as a pass.
    checked: bool = True


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, kind):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def network_failure(name: str, url: str, exc: Exception) -> Check:
    """One cause, one fix, for a request that never got an HTTP answer."""
    host = urlsplit(url).hostname or url
    if _caused_by(exc, socket.gaierror):
        return Check(
            name,
            False,
            f"{host} does not resolve (DNS)",
            f"check the host name in openapi_base_url / DINGTALK_OPENAPI_ENDPOINT and this"
            f" machine's DNS (try `getent hosts {host}`)",
            "dns",
        )
    if isinstance(exc, httpx.ProxyError):
        return Check(name, False, f"the proxy refused {host}", "check http_proxy", "proxy")
    if _caused_by(exc, ssl.SSLError):
        return Check(
            name,
            False,
            f"TLS with {host} failed: {exc}",
            "check the system's CA certificates and any intercepting proxy",
            "tls",
        )
    if isinstance(exc, httpx.TimeoutException):
        return Check(
            name,
            False,
            f"{host} did not answer in time ({type(exc).__name__})",
            "check this machine's outbound network or firewall (HTTPS to DingTalk)",
            "network",
        )
    return Check(
        name,
        False,
        f"cannot connect to {host}: {exc or type(exc).__name__}",
        "check this machine's outbound network or firewall (HTTPS to DingTalk)",
        "network",
    )


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
            "config",
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

    url = settings.openapi_base_url
    try:
        asyncio.run(fetch())
    except TokenError as exc:
        answered = re.search(r"answered (\d+)", str(exc))
        status = answered.group(1) if answered else ""
        if status.startswith("5") or status == "429":
            return Check(
                "access token", False, str(exc), "DingTalk is failing: try again later", "platform"
            )
        return Check(
            "access token",
            False,
            f"DingTalk refused the credentials ({exc})",
            "copy the AppKey and AppSecret of the robot's app again (developer console)",
            "credentials",
        )
    except httpx.HTTPError as exc:
        return network_failure("access token", url, exc)
    return Check("access token", True, f"fetched from {url}")


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
        return network_failure("stream gateway", url, exc)
    if response.status_code >= 500 or response.status_code == 429:
        return Check(
            "stream gateway",
            False,
            f"answered {response.status_code}",
            "DingTalk is failing: try again later",
            "platform",
        )
    if response.status_code != 200:
        # The token check passed, so the credentials are good: what is left is the mode.
        return Check(
            "stream gateway",
            False,
            f"answered {response.status_code} although the credentials are valid",
            "enable Stream Mode for the robot in the app's developer console",
            "stream_mode",
        )
    return Check("stream gateway", True, "connection ticket issued")


def _store(settings: Settings) -> Check:
    """Open the configured store (SQLite file or PostgreSQL) and write to it for real."""
    try:
        store = open_store(settings)
    except StoreError as exc:
        return Check(
            "store",
            False,
            str(exc),
            "check the path (or DTA_STORE_URL), and that it is writable",
            "store",
        )
    try:
        health = store.probe(settings.store_probe_timeout_s)
        counts = store.counts()
    finally:
        store.close()
    if not health.ok:
        return Check(
            "store",
            False,
            f"{store.where}: {health.problem} ({health.detail})",
            remedy(health.problem) if health.problem else "see the detail",
            "store",
        )
    return Check("store", True, f"{store.where} ({counts.events} events stored)")


def _skills(settings: Settings) -> Check:
    try:
        library = SkillLibrary(settings.skill_paths, settings.tools)
        build_provider(settings)
    except (SkillError, ConfigError) as exc:
        fix = "fix the named file or field"
        return Check("skills and provider", False, str(exc), fix, "skills")
    names = ", ".join(skill.name for skill in library.skills)
    return Check("skills and provider", True, f"{settings.provider}; skills: {names}")


def _probe(settings: Settings) -> Check:
    result = asyncio.run(probe(settings))
    verdict, explanation = probe_verdict(result)
    if result.loaded is False:
        # A wrong key or model will not mend itself, and every run falls back to rules.
        rejected = "provider failed: rejected" in result.evidence
        remedy = (
            "the model endpoint refused the request: check openai_api_key and openai_model"
            if rejected
            else "check the provider's endpoint, model and skill paths"
        )
        return Check("host loading", False, explanation, remedy, "skills")
    return Check("host loading", True, f"{verdict}: {explanation}")


def mcp_checks(settings: Settings) -> list[Check]:
    """Each MCP server started as the daemon would (in the same restricted environment), its
    tools listed (a write unless its configuration classes it a read), then stopped again;
    a warning for dta's own variables its ``pass_env`` hands it."""
    from agent.tools.mcp.sources import McpSources

    if not settings.mcp_servers:
        return []
    # passed as the operator named them, but said: they may be the daemon's secrets
    warnings = {
        config.name: f"; warning: pass_env gives it {', '.join(names)} (dta's own, may be secret)"
        for config in settings.mcp_servers
        if config.url is None and (names := daemon_names(config.pass_env))
    }

    async def report() -> list[dict[str, Any]]:
        sources = McpSources(settings.mcp_servers)
        try:
            await sources.start()
            return sources.report()
        finally:
            await sources.aclose()

    checks = []
    for server in asyncio.run(report()):
        name = f"mcp server {server['server']}"
        warning = warnings.get(server["server"], "")
        if server["status"] != "ready":
            fix = "check its command or url; until then its tools are absent from every run"
            checks.append(Check(name, False, server["status"] + warning, fix, "mcp"))
            continue
        tools = ", ".join(f"{tool} ({effect})" for tool, effect in server["tools"].items())
        enabled = [tool for tool in server["tools"] if tool in settings.tools]
        detail = f"ready; tools: {tools or 'none'}; enabled: {', '.join(enabled) or 'none'}"
        checks.append(Check(name, True, detail + warning))
    return checks


def diagnose(settings: Settings, card_to: str | None = None) -> list[Check]:
    """``card_to``: in card mode, a staff id to send one test card to."""
    checks = [_credentials(settings)]
    if checks[0].ok:
        token = _token(settings)
        checks.append(token)
        if token.ok:
            checks.append(_stream(settings))
            checks.extend(Check(**line) for line in card_checks(settings, card_to))
    checks.extend([_store(settings), _skills(settings)])
    if checks[-1].ok:
        checks.append(_probe(settings))
    checks.extend(mcp_checks(settings))
    checks.extend(knowledge_checks(settings))
    return checks


def knowledge_checks(settings: Settings) -> list[Check]:
    """Each DingTalk knowledge source as its last sync left it (``dta knowledge sync``
    reads them now): a source whose last sync failed is still served its last good
    snapshot, and says why."""
    if not settings.knowledge_sources:
        return []
    try:
        with open_store(settings) as store:
            states = {s.source: s for s in store.knowledge.source_states()}
    except StoreError:
        return []  # the store's own line says why
    checks = []
    for source in settings.knowledge_sources:
        state = states.get(source.key)
        name = f"knowledge {source.key}"
        if state is None:
            fix = "run `dta knowledge sync` (the daemon syncs at start)"
            checks.append(Check(name, False, "not synced yet", fix, "knowledge"))
        elif state.problem:
            fix = "check the reader's access and the app's doc scopes (its last snapshot is served)"
            checks.append(
                Check(name, False, f"{state.problem} ({state.docs} docs kept)", fix, "knowledge")
            )
        else:
            checks.append(Check(name, True, f"{state.docs} docs"))
    return checks


def sources(config: Path | None, env: dict[str, str] | None = None) -> dict[str, Any]:
    """What ``load_settings`` reads here: the file (or none) and the variables set, by name
    only — their values may be secrets."""
    env = dict(os.environ) if env is None else env
    path = config
    if path is None and Path("dta.toml").exists():
        path = Path("dta.toml")
    return {
        "config_file": str(path.resolve()) if path is not None else None,
        "environment": sorted(name for name in ENV_KEYS if env.get(name)),
    }


def doctor(
    config: Path | None,
    out: TextIO,
    as_json: bool = False,
    card_to: str | None = None,
    robot: str | None = None,
) -> int:
    read = sources(config)
    try:
        settings = load_settings(config)
        robots = [settings.robot(robot)] if robot else settings.robot_settings()
    except ConfigError as exc:
        checks = [Check("config", False, str(exc), "fix the named field", "config")]
    else:
        checks = [Check("config", True, "valid")]
        for one in robots:  # with several robots, each robot's checks under its code
            named = len(robots) > 1 or robot is not None
            for check in diagnose(one, card_to):
                checks.append(
                    replace(check, name=f"{one.robot_code}: {check.name}") if named else check
                )
    ok = all(check.ok for check in checks)
    if as_json:
        document = {**read, "ok": ok, "checks": [asdict(c) for c in checks]}
        print(json.dumps(document, ensure_ascii=False, indent=2), file=out)
        return 0 if ok else 1
    where = read["config_file"] or "none (defaults; `dta init` writes one)"
    print(f"config file: {where}", file=out)
    names = ", ".join(read["environment"]) or "none of dta's variables are set"
    print(f"environment: {names}", file=out)
    for check in checks:
        mark = ("ok  " if check.checked else "----") if check.ok else "FAIL"
        if not check.checked:
            line = f"{mark}  {check.name}: not checked — {check.detail}"
            print(line, file=out)
            continue
        line = f"{mark}  {check.name}: {check.detail}"
        if not check.ok and check.fix:
            line += f"\n      fix: {check.fix}"
        print(line, file=out)
    return 0 if ok else 1
