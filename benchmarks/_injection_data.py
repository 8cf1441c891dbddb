"""The data recipe of the injection classifier and benchmark (shared by train_injection.py and
injection.py): every source read in place from ../shared/benchmarks, split deterministically by a hash
of the text (70 % train / 30 % held-out) BEFORE anything is trained or tuned.

Attacks: dev_attacks.jsonl (user source), BIPIA text and code attack instructions (indirect source:
they are attacks only inside indirect content; as user messages they are ordinary requests and serve
as user-source negatives), the BIPIA attacks inserted at the start/middle/end of the BIPIA email
contexts (as BIPIA does), and generated variants of every attack (assistant/defence/variants.py; a
variant inherits the split of its base text). Benign: NotInject (user source), clean BIPIA contexts
(email source), LoCoMo turns (memory source), assistant/defence/data/benign.txt (user source).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from assistant.defence.types import Source

DATA = Path(os.environ.get("INJECTION_DATA", Path(__file__).resolve().parents[2] / "shared/benchmarks"))
if not (DATA / "prompt_injection").exists():
    DATA = Path("/work/shared/benchmarks")
PI = DATA / "prompt_injection"
HELD_OUT = 0.30


def split_of(text: str, salt: str = "") -> str:
    """"train" or "held_out", from a hash of the text (stable across runs and machines)."""
    h = int.from_bytes(hashlib.sha256((salt + text).encode()).digest()[:8], "big") / 2**64
    return "held_out" if h < HELD_OUT else "train"


def fold_of(text: str, folds: int = 5) -> int:
    """The cross-validation fold of a TRAIN source text (a hash with its own salt, so folds are not
    correlated with the train/held-out split); every example built from the text follows it."""
    return int.from_bytes(hashlib.sha256(("cv:" + text).encode()).digest()[:8], "big") % folds


@dataclass(frozen=True)
class Example:
    text: str
    label: int  # 1 attack, 0 benign
    source: Source
    corpus: str  # dev_attacks | bipia_text | bipia_code | bipia_context | variants | notinject | locomo | benign_txt | ...
    split: str
    family: str = ""
    category: str = ""
    inserted: str = ""  # for an attack placed inside content: the attack itself (its chunks are the positives)


def dev_attacks() -> list[Example]:
    rows = [json.loads(line) for line in open(PI / "dev_attacks.jsonl", encoding="utf-8")]
    return [Example(r["text"], 1, Source.USER, "dev_attacks", split_of(r["text"]), r.get("family", ""))
            for r in rows if r.get("label") == "injection"]


def bipia_attacks() -> list[Example]:
    out = []
    for name, corpus in (("text_attack_train.json", "bipia_text"), ("code_attack_train.json", "bipia_code")):
        for category, texts in json.load(open(PI / "bipia" / name, encoding="utf-8")).items():
            for t in texts:
                out.append(Example(t, 1, Source.EMAIL, corpus, split_of(t), "bipia", category))
    return out


def bipia_contexts() -> list[str]:
    return [json.loads(line)["context"] for line in open(PI / "bipia" / "train.jsonl", encoding="utf-8")]


def insert(context: str, attack: str, where: str) -> str:
    """BIPIA's placements: the attack before, in the middle (at a sentence boundary) or after."""
    if where == "start":
        return f"{attack}\n{context}"
    if where == "end":
        return f"{context}\n{attack}"
    cut = [i + 1 for i, c in enumerate(context) if c in ".!?\n"]
    mid = min(cut, key=lambda i: abs(i - len(context) // 2)) if cut else len(context) // 2
    return f"{context[:mid]} {attack} {context[mid:]}"


def bipia_in_context(attacks: list[Example], contexts: list[str], split: str) -> list[Example]:
    """Every attack of ``split`` in every context of ``split``, at start/middle/end (a fixed rotation
    of the placement per pair keeps the count at one per pair)."""
    out = []
    ctx = [c for c in contexts if split_of(c) == split]
    for i, a in enumerate(x for x in attacks if x.split == split):
        for j, c in enumerate(ctx):
            where = ("start", "middle", "end")[(i + j) % 3]
            out.append(Example(insert(c, a.text, where), 1, Source.EMAIL, "bipia_in_context", split, "bipia",
                               a.category, a.text))
    return out


def notinject() -> list[Example]:
    out = []
    for part in ("one", "two", "three"):
        for r in json.load(open(PI / f"NotInject_{part}.json", encoding="utf-8")):
            out.append(Example(r["prompt"], 0, Source.USER, "notinject", split_of(r["prompt"]), "", r.get("category", "")))
    return out


def locomo_turns() -> list[Example]:
    out = []
    for conv in json.load(open(DATA / "locomo" / "locomo_dev5.json", encoding="utf-8")):
        for key, turns in conv["conversation"].items():
            if key.startswith("session_") and isinstance(turns, list):
                for t in turns:
                    text = t.get("text", "")
                    if text:
                        out.append(Example(text, 0, Source.MEMORY, "locomo", split_of(text)))
    return out


def benign_txt() -> list[Example]:
    path = Path(__file__).resolve().parents[1] / "assistant/defence/data/benign.txt"
    lines = [x.strip() for x in path.read_text(encoding="utf-8").splitlines()]
    return [Example(x, 0, Source.USER, "benign_txt", split_of(x)) for x in lines if x and not x.startswith("#")]


def clean_contexts() -> list[Example]:
    return [Example(c, 0, Source.EMAIL, "bipia_context", split_of(c)) for c in bipia_contexts()]
