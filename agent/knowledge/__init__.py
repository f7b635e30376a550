"""Knowledge that lives in DingTalk: docs, knowledge bases and AI tables, snapshotted with
provenance (``sync``), indexed beside the knowledge folder (``sections``), and served only
where the operator lets them be and to people who may read them (``rights``)."""
