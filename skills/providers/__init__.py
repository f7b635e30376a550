"""Providers: turn an invocation and its skills into ActionRequest JSON (``base``), the
embedded ``rules`` one, ``openai`` (any OpenAI-compatible endpoint) and ``command`` (an
external agent program). Import each from its module; this package imports none of them, so
no provider module depends on another through it."""
