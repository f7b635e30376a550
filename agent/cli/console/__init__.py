"""The operators' web console (``dta console``, and inside ``dta dev``): see ``server``."""
