"""A lab case's DingTalk knowledge: the docs and AI tables the fake serves
(``fixtures.docs``, ``fixtures.tables``, ``fixtures.group_members``), the steps that change
them (``edit_doc``, ``delete_doc``), and how they are seeded into the fake.

The keys are ../shared/lab-cases.md's ("Standing work, forms, feedback, DingTalk
knowledge"); dta adds ``workspace`` / ``folder`` / ``parent`` (where a doc sits in a
knowledge base), ``sheets`` (an AI table of several sheets), ``group_members`` and
``delete_doc`` (docs/lab.md). The fake's own rules (lab/fake/docs_state.py) check what
the format cannot: ids unique, a ``parent`` above its child.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from pydantic import AwareDatetime, Field, model_validator

from lab.eval.case_base import CaseModel
from lab.fake.docs_state import Knowledge

if TYPE_CHECKING:
    from lab.eval.cases import Case
    from lab.fake import FakeDingTalk

Id = Annotated[str, Field(min_length=1)]
# epoch seconds, or an ISO-8601 time with its zone
Moment = float | AwareDatetime
_BLOCK_KINDS = ("heading", "paragraph", "bullet", "ordered", "quote", "table", "unknown")


def _epoch(moment: Moment | None) -> float | None:
    if moment is None or isinstance(moment, float | int):
        return moment
    return moment.timestamp()


class BlockFixture(CaseModel):
    """One first-level block of a doc, in short form: exactly one kind."""

    heading: str | None = None
    level: int | None = Field(default=None, ge=1, le=6)  # a heading's (default 1)
    paragraph: str | None = None
    bullet: str | None = Field(default=None, alias="list")  # an item of a bulleted list
    ordered: str | None = None  # an item of a numbered list
    quote: str | None = None
    table: list[list[str | int | float]] | None = None  # rows of cells
    unknown: Any = None  # an image, code, an embed: DingTalk gives no content

    @model_validator(mode="after")
    def _one_kind(self) -> BlockFixture:
        kinds = [k for k in _BLOCK_KINDS if getattr(self, k) is not None]
        if len(kinds) != 1:
            names = ", ".join("list" if k == "bullet" else k for k in _BLOCK_KINDS)
            raise ValueError(f"a block needs exactly one of {names}")
        if self.level is not None and kinds != ["heading"]:
            raise ValueError("level goes with a heading")
        return self

    def seed(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True) | (
            {"unknown": True} if self.unknown is not None else {}
        )


class _Placed(CaseModel):
    """Where a node sits: a knowledge base (default ``ws-lab``) and a folder path or a doc
    above it."""

    workspace: Id | None = None
    folder: Id | None = None  # "HR/Leave": folders made as needed
    parent: Id | None = None  # another doc (listed earlier) this one sits under
    readers: list[Id] | None = None  # staff ids or cids; absent: everyone

    @model_validator(mode="after")
    def _one_place(self) -> _Placed:
        if self.folder is not None and self.parent is not None:
            raise ValueError("a node sits in a folder or under a parent, not both")
        return self

    def placed(self) -> dict[str, Any]:
        return self.model_dump(include={"workspace", "folder", "parent", "readers"})


class DocFixture(_Placed):
    id: Id
    title: Id
    blocks: list[BlockFixture] | None = None
    text: str | None = None  # paragraphs at blank lines; "## …" a heading
    modified_at: Moment | None = None  # absent: the case's start

    @model_validator(mode="after")
    def _content(self) -> DocFixture:
        if (self.blocks is None) == (self.text is None):
            raise ValueError("a doc needs exactly one of blocks, text")
        return self

    def seed(self) -> dict[str, Any]:
        item: dict[str, Any] = {"id": self.id, "title": self.title, **self.placed()}
        if self.blocks is not None:
            item["blocks"] = [b.seed() for b in self.blocks]
        else:
            item["text"] = self.text
        if self.modified_at is not None:
            item["modified_at"] = _epoch(self.modified_at)
        return {k: v for k, v in item.items() if v is not None}


class RecordFixture(CaseModel):
    id: Id | None = None
    fields: dict[str, Any] = Field(default_factory=dict)  # by field name, as DingTalk reads
    modified_at: Moment | None = None

    def seed(self) -> dict[str, Any]:
        item = {"id": self.id, "fields": self.fields, "modified_at": _epoch(self.modified_at)}
        return {k: v for k, v in item.items() if v is not None}


class SheetFixture(CaseModel):
    id: Id | None = None
    name: Id
    records: list[RecordFixture] = Field(default_factory=list)


class TableFixture(_Placed):
    """An AI table: one sheet named ``name`` holding ``records``, or several ``sheets``."""

    id: Id
    name: Id
    records: list[RecordFixture] | None = None
    sheets: list[SheetFixture] | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _sheets(self) -> TableFixture:
        if self.records is not None and self.sheets is not None:
            raise ValueError("a table gives records (one sheet) or sheets, not both")
        return self

    def seed(self) -> dict[str, Any]:
        item = {"id": self.id, "name": self.name, **self.placed()}
        item["records"] = [r.seed() for r in self.records or []]
        if self.sheets is not None:
            item["sheets"] = [
                {"id": s.id, "name": s.name, "records": [r.seed() for r in s.records]}
                for s in self.sheets
            ]
        return {k: v for k, v in item.items() if v is not None}


def group_members(case: Case) -> dict[str, list[str]]:
    """Who is in each group: ``fixtures.group_members``, and everyone who writes in a
    group in the case's ``send`` steps."""
    members = {cid: list(staff) for cid, staff in case.fixtures.group_members.items()}
    for step in case.steps:
        if step.send is not None and step.send.group:
            members.setdefault(step.send.group, []).append(step.send.from_)
    return members


def knowledge_problem(case: Case, now: float) -> str | None:
    """What the fake would refuse in the case's docs, tables and doc steps; None if all
    is well. Checked on a knowledge base of its own, as the fake will seed it."""
    knowledge = Knowledge()
    try:
        knowledge.seed(
            [d.seed() for d in case.fixtures.docs],
            [t.seed() for t in case.fixtures.tables],
            group_members(case),
            now,
        )
    except ValueError as exc:
        return f"field 'fixtures.docs/tables': {exc}"
    for index, step in enumerate(case.steps):
        named = step.edit_doc.id if step.edit_doc is not None else step.delete_doc
        node = knowledge.nodes.get(named) if named is not None else None
        if named is not None and (node is None or (step.edit_doc and node.kind != "doc")):
            return f"field 'steps.{index}': no doc {named!r} in fixtures.docs"
    return None


def seed_knowledge(fake: FakeDingTalk, case: Case) -> None:
    """The case's docs and tables into the fake, modified at the case's start unless told."""
    fake.workspace.knowledge.seed(
        [d.seed() for d in case.fixtures.docs],
        [t.seed() for t in case.fixtures.tables],
        group_members(case),
        fake.clock.now(),
    )
