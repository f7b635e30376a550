"""The strict base every part of a lab case file is built on: no field it does not name
(a typo is an error, never an ignored key), and the text a case matches on."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class CaseModel(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


# Text a case matches on: an empty fragment is in every text, so it would check nothing.
Fragment = Annotated[str, Field(min_length=1)]
