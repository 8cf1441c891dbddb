"""A keyword (BM25) index that stores no plaintext.

Words are normalised (lower case, Snowball stem, stop words dropped) and stored as keyed BLAKE2b
tokens (:meth:`assistant.crypto.Sealer.token`): equal words match, the words themselves are not
on disk. BM25 is computed over the user's memories at query time.
PyStemmer (Snowball, C) is used for stemming because it is fast and dependency-free.

Words are runs of Unicode letters and digits (numbers are kept: "2023", "18th"); a possessive or
contraction suffix is dropped ("Caroline's" -> "caroline", also with the typographic apostrophe).

``b = 0.5`` rather than the textbook 0.75: memories are short chat messages whose length varies
with how much was said, not with padding, so a long message is penalised less. On LoCoMo
(benchmarks/locomo_recall.py, recall@5, categories 1-4) this lifted keyword search from .542 to
.556 ("Speaker: text" memories) and hybrid search with the store's defaults from .652 to .659;
k1 from 0.6 to 2.0 stayed within .01, so it stays at 1.2. Dropping question words ("kind",
"type", "many", "likely", ...) from queries, keeping stop words, not stemming, or indexing word
pairs did not help (-.03 to +.002).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable

import Stemmer

from assistant.crypto import Sealer
from assistant.storage.db import Database

K1 = 1.2
B = 0.5
WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?")
APOSTROPHES = str.maketrans({"\u2019": "'", "\u02bc": "'", "\u2018": "'"})
STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just me more most my
    myself no nor not now of off on once only or other our ours ourselves out over own same she should so
    some such than that the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom why will with would you your
    yours yourself yourselves s t don i'm it's""".split()
)
_stemmer = Stemmer.Stemmer("english")


def normalise_words(text: str) -> list[str]:
    """Lower-cased, stemmed words of ``text`` without stop words (the form that is tokenised)."""
    words = [w.split("'")[0] for w in WORD.findall(text.lower().translate(APOSTROPHES))]
    return _stemmer.stemWords([w for w in words if w and w not in STOP_WORDS])


class KeywordIndex:
    def __init__(self, db: Database, sealer: Sealer, *, k1: float = K1, b: float = B):
        self.db = db
        self.sealer = sealer
        self.k1 = k1
        self.b = b

    def terms(self, text: str) -> Counter[bytes]:
        return Counter(self.sealer.token(w) for w in normalise_words(text))

    def add(self, rows: Iterable[tuple[int, str, str]]) -> None:
        """Index ``(memory_rowid, user_id, text)``; call inside the caller's transaction."""
        batch = []
        lengths = []
        for rowid, user_id, text in rows:
            terms = self.terms(text)
            lengths.append((sum(terms.values()), rowid))
            batch.extend((token, user_id, rowid, tf) for token, tf in terms.items())
        if batch:
            self.db.executemany(
                "INSERT OR REPLACE INTO memory_terms (token, user_id, memory_rowid, tf) VALUES (?, ?, ?, ?)", batch
            )
        if lengths:
            self.db.executemany("UPDATE memories SET term_count = ? WHERE rowid = ?", lengths)

    def remove(self, rowids: Iterable[int]) -> None:
        self.db.executemany("DELETE FROM memory_terms WHERE memory_rowid = ?", [(r,) for r in rowids])

    def search(self, user_id: str, query: str, limit: int = 50) -> dict[int, float]:
        """BM25 score per memory rowid, best ``limit`` of them."""
        tokens = list(self.terms(query))
        if not tokens:
            return {}
        stats = self.db.one(
            "SELECT count(*) AS n, avg(term_count) AS avgdl FROM memories WHERE user_id = ?", (user_id,)
        )
        n = stats["n"] if stats else 0
        if not n:
            return {}
        avgdl = stats["avgdl"] or 1.0
        marks = ",".join("?" * len(tokens))
        rows = self.db.query(
            f"SELECT t.token, t.memory_rowid, t.tf, m.term_count FROM memory_terms t "
            f"JOIN memories m ON m.rowid = t.memory_rowid WHERE t.user_id = ? AND t.token IN ({marks})",
            (user_id, *tokens),
        )
        df = Counter(r["token"] for r in rows)
        scores: dict[int, float] = {}
        for r in rows:
            idf = math.log(1 + (n - df[r["token"]] + 0.5) / (df[r["token"]] + 0.5))
            tf = r["tf"]
            norm = tf * (self.k1 + 1) / (tf + self.k1 * (1 - self.b + self.b * (r["term_count"] or 0) / avgdl))
            scores[r["memory_rowid"]] = scores.get(r["memory_rowid"], 0.0) + idf * norm
        best = sorted(scores.items(), key=lambda kv: -kv[1])[:limit]
        return dict(best)
