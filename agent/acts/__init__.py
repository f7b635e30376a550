"""Acts: what a write does to the workspace, and who may let it — the authorization
snapshot, the approvals (cards, text codes, clicks), the act's intent, attempt and receipt
with its read-back, and what the asker is told (one outcome vocabulary, ``told``)."""
