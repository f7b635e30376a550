"""The carriers room: one module per form a message can go in — text and Markdown
(``messages.py``), pictures and files (``attachments.py``), an AI card (``cards.py``), an
approval card (``approval_card.py``), the working signal's reaction (``reaction.py``). Each
says which requests it carries (the form the action gate judges), how an approved intent
goes, and what the recovery pass owes it; the acting step dispatches through their table
(``agent/run/carriers.py``), built in ``agent/components/``.

Adding a form: its module here, its row in ``build_carriers`` (agent/components/build.py),
its msgtype in ``MessageContent`` (agent/contracts/actions.py).
"""
