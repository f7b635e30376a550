"""Finding the knowledge sections that answer a message, for Chinese and English alike.

No language model and no word segmenter: text is cut into the terms of
``skills.retrieval.terms`` (Chinese character bigrams, single characters at a low
weight, ASCII words) and sections are ranked by BM25 (``bm25``). SQLite's FTS5 trigram
index (``trigram``) is kept beside it as the measured alternative: ``python -m
lab.retrieval_recall`` runs both over the labelled questions in ``lab/retrieval/`` and
docs/architecture.md quotes the figures that chose BM25 over bigrams.

Only sections that match are returned (``Hit``), never padded to a fixed count: a model
told "nothing matched" can say so, a model handed three weak sections tends to answer
from them anyway.
"""

from skills.retrieval.bm25 import Bm25Index, Hit

__all__ = ["Bm25Index", "Hit"]
