"""The lab's cases and what runs and judges them: the case format, the in-process and
``--live`` runners, the judge, ``dta lab eval`` / ``replay`` / ``security`` and
``--against-model``."""
