"""Ask-user forms: what a provider may ask for with an ``ask`` (``FormSpec``), the form as
the store keeps it while it waits for its asker (``FormRecord``), and the validated answer a
provider is shown when the task resumes (``FormAnswer``).

A form is a few typed fields — text, number, date, one choice, several choices — that the
asker fills in on a card (``form_card_template_id``) or, without one, in a numbered text
reply. Only the asker's submission counts; its values are checked against the fields here
(``gates/form_values.py``) before anything else sees them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from agent.contracts.base import Contract, sha256_text

FieldType = Literal["text", "number", "date", "single", "multi"]
FormStatus = Literal["pending", "submitted", "expired", "cancelled"]
CHOICES: tuple[FieldType, ...] = ("single", "multi")
MAX_FORM_FIELDS = 10  # a form longer than this is a conversation, not a question
MAX_FORM_OPTIONS = 20
# a value is a string, a number or a list of strings (a multi choice) once checked
FormValue = str | int | float | list[str]


class FormOption(Contract):
    value: str = Field(min_length=1, max_length=64)
    text: str = Field(min_length=1, max_length=100)


class FormField(Contract):
    """One field: its key (``name``), what the asker reads (``label``) and its type;
    ``options`` for a choice (single or multi) and only for one."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,39}$")
    label: str = Field(min_length=1, max_length=40)
    type: FieldType = "text"
    required: bool = True
    options: list[FormOption] = Field(default_factory=list, max_length=MAX_FORM_OPTIONS)
    placeholder: str | None = Field(default=None, max_length=100)

    @model_validator(mode="after")
    def _options_match_type(self) -> FormField:
        if self.type in CHOICES and not self.options:
            raise ValueError(f"field {self.name!r}: a {self.type} choice needs its options")
        if self.type not in CHOICES and self.options:
            raise ValueError(f"field {self.name!r}: only a choice (single, multi) has options")
        values = [o.value for o in self.options]
        if len(set(values)) != len(values):
            raise ValueError(f"field {self.name!r}: option values must be unique")
        return self


class FormSpec(Contract):
    """The fields an ``ask`` asks for (the ask's ``text`` stays the question's words)."""

    fields: list[FormField] = Field(min_length=1, max_length=MAX_FORM_FIELDS)

    @model_validator(mode="after")
    def _unique_names(self) -> FormSpec:
        names = [f.name for f in self.fields]
        if len(set(names)) != len(names):
            raise ValueError("field names must be unique")
        return self

    def field(self, name: str) -> FormField | None:
        return next((f for f in self.fields if f.name == name), None)


def form_id_for(event_id: str) -> str:
    """The form the run of ``event_id`` asks (one per run): the same for every execution."""
    return "form_" + sha256_text(event_id)[:20]


def form_event_id(form_id: str) -> str:
    """The runtime's own event that carries a form's end out (a submit on the card, an
    expiry, a cancel): stored once."""
    return f"form:{form_id}"


class FormRecord(Contract):
    """A form as the store keeps it (the ``forms`` table): pending until its asker submits
    it, cancels it, a newer form replaces it, or it expires."""

    schema_: Literal["dta.form/1"] = Field(default="dta.form/1", alias="$schema")
    form_id: str
    event_id: str  # the message whose run asked
    run_id: str
    thread_key: str
    asker_id: str  # the only person whose submission counts (the asking event's sender)
    conversation_id: str
    question: str
    spec: FormSpec
    status: FormStatus = "pending"
    asked_with: Literal["card", "text"] = "text"
    out_track_id: str | None = None
    values: dict[str, FormValue] | None = None
    submitted_by: str | None = None
    # the event that carries the form's end: ``form:<id>`` for a card's submit, an expiry
    # or a cancel; the asker's own message for a text reply
    answer_event_id: str | None = None
    english: bool = False
    created_at: float
    expires_at: float
    decided_at: float | None = None


class FormAnswer(Contract):
    """What a resumed run's provider is shown of a submitted form: trusted, typed data —
    the values the form's asker submitted, each checked against its field's type."""

    form_id: str
    asked_in: str  # the message whose run asked (its event id)
    question: str
    fields: dict[str, str]  # name → label
    values: dict[str, FormValue]
    submitted_by: str
    note: str = (
        "These are the form's validated values, submitted by the person who was asked; "
        "each matches its field's type. Continue the task with them."
    )
