"""The gates: pure decisions over data handed to them (they import only ``agent.contracts``).

The response gate decides whether to respond at all, the action gate whether a request may
become a side effect; the store facts the action gate needs are loaded by
``agent.run.gate_facts``, outside this package.
"""
