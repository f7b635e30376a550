"""The lab case format (``dta.lab.case/1``): load and validate case files.

A case file that does not fit the format is rejected before anything runs, with the file,
the field and the reason (``CaseError``), so a typo in an expectation can never turn into
a silently passing case.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    Field,
    ValidationError,
    field_validator,
)

from agent.config import ConfigError, Settings
from agent.contracts import (
    AgentDefinition,
)
from lab.eval.case_base import CaseModel
from lab.eval.case_expect import (
    ApprovalExpect,
    CallsExpect,
    DecisionExpect,
    EventExpect,
    Expect,
    MessageExpect,
    ModelRequestExpect,
    PlatformExpect,
    ReactionExpect,
    ReceiptExpect,
    RefusalExpect,
    RunExpect,
    TodoExpect,
)
from lab.eval.case_steps import (
    REPLIED_MSG_KEYS,
    STEP_KINDS,
    ClickSpec,
    OperatorSpec,
    RestartSpec,
    SendSpec,
    Step,
)
from lab.eval.knowledge_cases import DocFixture, TableFixture, knowledge_problem
from lab.fake import parse_fault_spec
from lab.fake.docs_state import LAB_KNOWLEDGE_READER
from lab.fake.files import parse_files
from lab.fake.workspace_state import UNION_PREFIX
from lab.models.fake_model import FakeModel

# The case format's parts, importable from here as before the split.
__all__ = [
    "REPLIED_MSG_KEYS",
    "SCHEMA",
    "STEP_KINDS",
    "ApprovalExpect",
    "CallsExpect",
    "Case",
    "CaseError",
    "CasePathError",
    "Category",
    "ClickSpec",
    "DecisionExpect",
    "EventExpect",
    "Expect",
    "Fixtures",
    "MessageExpect",
    "ModelRequestExpect",
    "OperatorSpec",
    "PlatformExpect",
    "ReactionExpect",
    "ReceiptExpect",
    "RefusalExpect",
    "RestartSpec",
    "RunExpect",
    "SendSpec",
    "Step",
    "TodoExpect",
    "TodoFixture",
    "UserFixture",
    "directory",
    "discover",
    "discover_all",
    "load_case",
]

SCHEMA = "dta.lab.case/1"


class CaseError(Exception):
    """A case file that cannot be run; the message names file, field and reason."""


class CasePathError(CaseError):
    """A path given to the lab that holds no case. A mistyped or absent folder must never read
    as "nothing to check": the run would pass without the cases it was asked to run."""


class Category(StrEnum):
    HOST_LOADING = "host-loading"
    CONVERSATION_CONTRACT = "conversation-contract"
    AUTHORITY_AND_EGRESS = "authority-and-egress"
    TASK_LIFECYCLE = "task-lifecycle"
    MEMORY_AND_STORAGE = "memory-and-storage"
    WORKSPACE_AND_ARTIFACTS = "workspace-and-artifacts"
    PLATFORM_RELIABILITY = "platform-reliability"


class UserFixture(CaseModel):
    """One person in the fake's staff directory (``fixtures.users``)."""

    name: str = Field(min_length=1)
    title: str | None = None
    dept_names: list[str] = Field(default_factory=list)
    dept_id_list: list[int] = Field(default_factory=list)
    union_id: str | None = None


class TodoFixture(CaseModel):
    """A to-do the fake workspace holds from the start (``fixtures.todos``)."""

    subject: str = Field(min_length=1)
    executors: list[Annotated[str, Field(min_length=1)]] = Field(min_length=1)  # staff ids
    done: bool = False
    due: AwareDatetime | None = None
    # the to-do id the fake gives it (absent: one of its own), so a script can name it
    id: str | None = Field(default=None, min_length=1)

    def seed(self) -> dict[str, Any]:
        """As ``PlatformState.seed_todos`` takes it (the due time in milliseconds)."""
        due_ms = None if self.due is None else int(self.due.timestamp() * 1000)
        return (
            {"subject": self.subject, "executors": self.executors, "done": self.done}
            | ({} if due_ms is None else {"due_ms": due_ms})
            | ({} if self.id is None else {"id": self.id})
        )


def directory(users: dict[str, UserFixture]) -> dict[str, dict[str, Any]]:
    """``fixtures.users`` as the fake's staff directory takes it."""
    return {uid: user.model_dump(exclude_none=True) for uid, user in users.items()}


class Fixtures(CaseModel):
    knowledge: dict[str, str] = Field(default_factory=dict)
    agent: AgentDefinition | None = None
    # dta extensions: extra skill files (path under a skills folder -> text), and raw
    # provider output for chosen messages (msgId -> list of raw requests)
    skills: dict[str, str] = Field(default_factory=dict)
    provider_script: dict[str, list[Any]] = Field(default_factory=dict)
    # the fake platform's staff directory: user id -> {name, title, dept_names}
    users: dict[str, UserFixture] = Field(default_factory=dict)
    # the fake model's scripted answers (lab.models.fake_model): msgId -> list of entries
    model_script: dict[str, list[dict[str, Any]]] = Field(default_factory=dict)
    # files the fake platform serves: download code -> {name, type, content | base64 |
    # fixture (a path under lab/fixtures/), size}
    files: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # to-dos the fake workspace holds at the start (executors are staff ids)
    todos: list[TodoFixture] = Field(default_factory=list)
    # DingTalk docs and AI tables the fake serves (lab/eval/knowledge_cases.py), and who is
    # in which group for a doc's ``cid`` readers (besides those who write in it)
    docs: list[DocFixture] = Field(default_factory=list)
    tables: list[TableFixture] = Field(default_factory=list)
    group_members: dict[str, list[Annotated[str, Field(min_length=1)]]] = Field(
        default_factory=dict
    )

    @field_validator("todos")
    @classmethod
    def _one_todo_per_id(cls, todos: list[TodoFixture]) -> list[TodoFixture]:
        # A script names a seeded to-do by its id: two with one id could not be told apart.
        seen: dict[str, int] = {}
        for index, todo in enumerate(todos):
            if todo.id is None:
                continue
            if todo.id in seen:
                raise ValueError(f"todos {seen[todo.id]} and {index} share the id {todo.id!r}")
            seen[todo.id] = index
        return todos

    @field_validator("users")
    @classmethod
    def _one_person_per_union_id(cls, users: dict[str, UserFixture]) -> dict[str, UserFixture]:
        # The workspace APIs name people by unionId only: two people sharing one could not
        # be told apart when the fake turns it back into a staff id.
        seen: dict[str, str] = {}
        for user_id, user in users.items():
            union = user.union_id or UNION_PREFIX + user_id
            if union in seen:
                raise ValueError(f"{user_id} and {seen[union]} share the union_id {union!r}")
            seen[union] = user_id
        return users


class Case(CaseModel):
    schema_: Literal["dta.lab.case/1"] = Field(alias="schema")
    id: str = Field(min_length=1)
    category: Category
    title: str
    description: str = ""  # dta extension: why the case exists (dta feedback case fills it)
    tags: list[str] = Field(default_factory=list)
    config: dict[str, Any] = Field(default_factory=dict)
    fixtures: Fixtures = Field(default_factory=Fixtures)
    steps: list[Step] = Field(min_length=1)
    expect: Expect
    path: str = Field(default="", exclude=True)

    def configs(self) -> list[dict[str, Any]]:
        """Every configuration the case runs under, in order: its ``config``, then the
        config as each restart that carries overrides leaves it (they accumulate)."""
        configs = [self.config]
        for step in self.steps:
            if isinstance(step.restart, RestartSpec) and step.restart.config:
                configs.append({**configs[-1], **step.restart.config})
        return configs


def _problem(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        where = ".".join(str(p) for p in err["loc"] if p != "__frame__") or "(case)"
        parts.append(f"field '{where}': {err['msg']}")
    return "; ".join(parts)


def load_case(path: Path) -> Case:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise CaseError(f"{path}: not valid JSON: {exc}") from None
    except OSError as exc:
        raise CaseError(f"{path}: cannot read: {exc}") from None
    if not isinstance(document, dict):
        raise CaseError(f"{path}: a case must be a JSON object")
    try:
        case = Case.model_validate(document)
    except ValidationError as exc:
        raise CaseError(f"{path}: {_problem(exc)}") from None
    # the lab supplies the model endpoint, the app and the knowledge reader; the case
    # supplies everything else
    lab = Settings(
        openai_base_url="http://127.0.0.1/v1",
        openai_model="lab",
        client_id="lab",
        client_secret="lab",
        knowledge_reader=LAB_KNOWLEDGE_READER,
    )
    try:
        lab.with_overrides(case.config)
    except ConfigError as exc:
        raise CaseError(f"{path}: field 'config': {exc}") from None
    config = case.config
    for index, step in enumerate(case.steps):
        if isinstance(step.restart, RestartSpec) and step.restart.config:
            # checked as the runtime will start with it: over the case's and earlier ones
            config = {**config, **step.restart.config}
            try:
                lab.with_overrides(config)
            except ConfigError as exc:
                raise CaseError(f"{path}: field 'steps.{index}.restart.config': {exc}") from None
    try:
        FakeModel(case.fixtures.model_script)  # checks the script's entries
    except ValueError as exc:
        raise CaseError(f"{path}: field 'fixtures.model_script': {exc}") from None
    try:
        parse_files(case.fixtures.files)
    except ValueError as exc:
        raise CaseError(f"{path}: field 'fixtures.files': {exc}") from None
    problem = knowledge_problem(case, 0.0)
    if problem is not None:
        raise CaseError(f"{path}: {problem}")
    for index, step in enumerate(case.steps):
        if step.fault is not None:
            try:
                parse_fault_spec(step.fault)
            except ValueError as exc:
                raise CaseError(f"{path}: field 'steps.{index}.fault': {exc}") from None
    case.path = str(path)
    return case


def discover_all(paths: list[Path]) -> tuple[list[Case], list[CaseError]]:
    """Every valid case under the given files and folders (recursively, ``*.json``, in a
    stable order), and an error for each path or file that cannot run.

    One invalid file must not hide the verdicts of all the others: the caller runs the
    valid cases and still fails the run (exit 2) for the rest.
    """
    files: list[Path] = []
    errors: list[CaseError] = []
    for path in paths:
        if path.is_dir():
            found = sorted(path.rglob("*.json"))
            if not found:
                errors.append(CasePathError(f"{path}: no *.json case files in this folder"))
            files.extend(found)
        elif path.exists():
            files.append(path)
        else:
            errors.append(CasePathError(f"{path}: no such file or folder"))
    cases: list[Case] = []
    seen: dict[str, str] = {}
    for file in files:
        try:
            case = load_case(file)
        except CaseError as exc:
            errors.append(exc)
            continue
        if case.id in seen:
            errors.append(
                CaseError(f"{case.path}: field 'id': \"{case.id}\" is also used by {seen[case.id]}")
            )
            continue
        seen[case.id] = case.path
        cases.append(case)
    return cases, errors


def discover(paths: list[Path]) -> list[Case]:
    """Like ``discover_all``, but the first problem raises (for callers that need all)."""
    cases, errors = discover_all(paths)
    if errors:
        raise errors[0]
    return cases
