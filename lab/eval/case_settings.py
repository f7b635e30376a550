"""What a lab case runs with: its settings (the fake's app for each robot, the lab's short
timeouts), the model it may use, and its scripted provider.

    settings = lab_settings(case, workdir, fake, model_url)
    provider = case_provider(case, settings.robot_settings()[0])
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.components import build_provider
from agent.config import Settings
from agent.config.robots import robot_code_of
from lab.eval.cases import Case
from lab.fake import FakeDingTalk
from lab.fake.docs_state import LAB_KNOWLEDGE_READER
from lab.models.scripted import ScriptedProvider
from skills.providers.base import Provider

LAB_SEND_GAP_S = 0.05  # one conversation's messages this far apart (the daemon's: 1 s)
LAB_MODEL = "lab-model"
LAB_APPROVAL_TEMPLATE = "lab-approval-card.schema"
LAB_FORM_TEMPLATE = "lab-form-card.schema"


def _write_files(folder: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return folder


def uses_model(case: Case) -> bool:
    """Whether the fake model must serve the case: it scripts one, or the case (or a
    restart's overrides) picks the ``openai`` provider."""
    return bool(case.fixtures.model_script) or any(
        config.get("provider") == "openai" for config in case.configs()
    )


def lab_settings(
    case: Case,
    workdir: Path,
    fake: FakeDingTalk,
    model_url: str | None = None,
    overrides: dict[str, Any] | None = None,
) -> Settings:
    """The settings the case's runtime starts with; ``overrides`` are the ``restart.config``
    keys given so far (merged over the case's ``config``, key by key)."""
    fixtures = case.fixtures
    knowledge_dir = (
        _write_files(workdir / "knowledge", fixtures.knowledge) if (fixtures.knowledge) else None
    )
    skill_paths = [_write_files(workdir / "skills", fixtures.skills)] if fixtures.skills else []
    base = Settings(
        store_path=workdir / "dta.db",
        openapi_base_url=fake.base_url,
        webhook_origins=[fake.base_url],  # replies may go to the fake, and nowhere else
        client_id=fake.app_key,
        client_secret=fake.app_secret,
        robot_code=fake.robot_code,
        # Real seconds on loopback: short, so the timeout cases stay fast, but long enough
        # that a loaded machine (CI beside another job) does not turn a slow answer into an
        # uncertain one (0.5 s made a card create "uncertain" once under load).
        connect_timeout_s=1.0,
        read_timeout_s=2.0,
        identity_timeout_s=1.0,
        knowledge_dir=knowledge_dir,
        skill_paths=skill_paths,
        ack_after_s=0.5,
        # Real seconds (the virtual clock stands still during a drain): small, so cases
        # stay fast, and still measured (``platform.min_gap_s``).
        send_gap_s=LAB_SEND_GAP_S,
        openai_base_url=model_url,
        openai_model=LAB_MODEL if model_url else None,
        openai_timeout_s=5.0,
        command_runs_root=workdir / "runs",
        media_dir=workdir / "media",
        download_timeout_s=0.5,  # the fake's slow-download fault takes 1 s
        # the lab's approval card (agent/acts/approval_card.py has its contract), supplied
        # as the credentials are, so cases need not configure one
        approval_card_template_id=LAB_APPROVAL_TEMPLATE,
        # the lab's form card (agent/acts/form_card.py); a case sets it to null to ask a
        # form as a numbered question
        form_card_template_id=LAB_FORM_TEMPLATE,
    )
    if case.fixtures.agent is not None:
        base = base.with_overrides({"agent": case.fixtures.agent.model_dump()})
    config = {**case.config, **(overrides or {})}
    if config.get("client_id", "") is None or config.get("client_secret", "") is None:
        # no OpenAPI, no form card (the settings refuse one): a form is asked in words
        config.setdefault("form_card_template_id", None)
    config = with_knowledge_reader(config, "knowledge_reader")
    return base.with_overrides(with_robot_apps(config, fake))


def with_robot_apps(config: dict[str, Any], fake: FakeDingTalk) -> dict[str, Any]:
    """The case's config with each robot of ``robots`` given an app of its own on the fake,
    as the lab gives the one robot its credentials (a table's own keys still win)."""
    robots = config.get("robots")
    if not isinstance(robots, list) or not robots:
        return config
    tables = []
    for table in robots:
        code = robot_code_of(table) if isinstance(table, dict) else None
        if code is None:
            tables.append(table)  # refused by the settings, naming the table
            continue
        app = fake.add_robot(code)
        tables.append({"client_id": app.app_key, "client_secret": app.app_secret, **table})
    first = robot_code_of(tables[0]) if isinstance(tables[0], dict) else None
    if first is not None:
        fake.use_robot(first)  # a step that names no robot goes to the first (send.robot)
    return {**config, "robots": tables}


def with_knowledge_reader(config: dict[str, Any], key: str) -> dict[str, Any]:
    """The case's config with the lab's knowledge reader under ``key`` (the settings field
    that names whose unionId knowledge is synced as), as the lab supplies credentials: only
    when the case reads knowledge (``knowledge_sources``) and names no reader of its own.
    The fake lets ``LAB_KNOWLEDGE_READER`` read every doc and table (lab/fake/docs_state.py).
    """
    if not config.get("knowledge_sources") or key in config:
        return config
    return {**config, key: LAB_KNOWLEDGE_READER}


def case_provider(case: Case, settings: Settings) -> Provider | None:
    """The case's scripted provider, if it scripts one (else the runtime builds its own)."""
    if not case.fixtures.provider_script:
        return None
    return ScriptedProvider(case.fixtures.provider_script, build_provider(settings))
