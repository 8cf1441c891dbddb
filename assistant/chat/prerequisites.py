"""Prerequisite calls (issue 20): a tool whose parameter needs a value another tool produces.

CONTRACT (the lead's):

- A dependency is ``(tool, parameter) <- producer``: declared on the tool (``ToolSpec.requires``) or
  inferred when another offered tool lists the parameter's name in ``ToolSpec.produces``
  (``token`` <- ``GetUserToken``). Only required parameters count.
- :func:`annotate` gives the model the offered specs with each dependent parameter's description
  saying which tool yields it ("get it from GetUserToken first").
- :func:`missing` tells whether a call uses a dependent value that no earlier result of the producer
  in the conversation holds (the model made it up, or left it out): then the loop does not run the
  call but calls the producer first.

The rules, as implemented:

- **Declared wins.** ``requires`` pairs count when their producer is offered (and is not the tool
  itself); a parameter declared with several producers gets the first as its producer and the
  others as :attr:`Dependency.others` (their results are accepted too: ``complete_task`` may use the
  id ``create_task`` returned).
- **Inference only links opaque handles.** ``produces`` says which fields a result carries; a
  required parameter of another tool is inferred to need it only when its name is a *handle* — its
  last word is an id, token, key, reference, ... (:data:`HANDLE_WORDS`). A shared descriptive name
  says nothing about where a value comes from: API-Bank's ``Navigation`` produces ``time`` and
  ``IdentifySong`` ``year``, yet ``AddAgenda``'s time and ``SearchMovieMusic``'s year are the user's.
  A handle is a value the model cannot know unless a tool (or the user) gave it.
- **One producer per parameter.** Several offered tools produce the same handle: the one whose name
  shares the most words with the parameter (``token``: ``GetUserToken`` over ``Login``); a tie is
  ambiguous and yields no dependency at all (a wrong forced call costs more than no hint).
- **Where a value may come from.** :func:`missing` accepts a call's value when it is a value of an
  earlier tool-role result of the producer (or of one of ``others``) — compared with every scalar
  under the dependency's :attr:`~Dependency.field` (``id`` for ``task_id``: a task's title is no id),
  or of the whole result when no such key is in it, at any depth of the parsed JSON, fences and
  labels around the JSON ignored — or, failing the
  parse, found in its text. The user's messages do not count: a value lifted from them is the
  commonest made-up value (qwen2.5-0.5b called API-Bank's ``DeleteAlarm`` with ``token="password"``,
  the user's password). A substring
  only counts when the value has :data:`MIN_SUBSTRING` characters or more and stands apart from
  letters and digits; shorter values ("1", "ab") occur by chance in any text and must match whole.

All functions are pure and linear in the size of the specs / messages: the loop calls them on every
call. No library does this (it is the project's own reading of ``produces``/``requires``); the JSON
walk is the standard library's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from assistant.llm.base import ChatMessage, ToolCall, ToolSpec

# Last words of a parameter name that make it an opaque handle (``task_id``, ``access_token``,
# ``api_key``, ``booking_reference``). Plurals are folded (``ids``, ``tokens``).
HANDLE_WORDS = frozenset({"id", "uid", "uuid", "guid", "token", "key", "handle", "ref", "reference", "cursor",
                          "session"})
# Values shorter than this only count when a result's value equals them: one to three characters
# ("1", "ab", "yes") turn up inside unrelated text by chance; from four on, a match standing apart
# from letters and digits is taken for the value.
MIN_SUBSTRING = 4


@dataclass(frozen=True)
class Dependency:
    tool: str
    parameter: str
    producer: str  # the tool the loop calls first when the value is missing
    others: tuple[str, ...] = ()  # other offered tools whose results may hold the value too
    # The key that holds the value in the producer's result (``token``; ``id`` for ``task_id``);
    # None: any value of the result.
    field: str | None = None

    @property
    def sources(self) -> tuple[str, ...]:
        return (self.producer, *self.others)


def words(name: str) -> list[str]:
    """The lower-case words of an identifier: ``GetUserToken`` and ``get_user_token`` give
    ``["get", "user", "token"]``; a plural's final ``s`` is dropped (``tasks`` -> ``task``)."""
    found = re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+", name)
    return [w[:-1] if len(w) > 2 and w.endswith("s") and not w.endswith(("ss", "us")) else w
            for w in map(str.lower, found)]


def is_handle(name: str) -> bool:
    """Whether a parameter named ``name`` holds an opaque handle (its last word is an id, token, ...)."""
    parts = words(name)
    return bool(parts) and parts[-1] in HANDLE_WORDS


def _required(spec: ToolSpec) -> list[str]:
    required = spec.parameters.get("required") if isinstance(spec.parameters, dict) else None
    return [p for p in required if isinstance(p, str)] if isinstance(required, list) else []


def _field(parameter: str, producer: ToolSpec | None) -> str | None:
    """The key of ``producer``'s result that holds ``parameter``'s value: the parameter's own name
    when it produces it, else its only handle (or only field); None when unknown."""
    if producer is None:
        return None
    if parameter in producer.produces:
        return parameter
    handles = [f for f in producer.produces if is_handle(f)]
    if len(handles) == 1:
        return handles[0]
    return producer.produces[0] if len(producer.produces) == 1 else None


def _pick(parameter: str, candidates: list[str]) -> tuple[str, tuple[str, ...]] | None:
    """The producer of ``parameter`` among ``candidates`` (the one sharing most words with it) and
    the rest; None on a tie."""
    if len(candidates) == 1:
        return candidates[0], ()
    wanted = set(words(parameter))
    scored = sorted(((len(wanted & set(words(c))), c) for c in candidates), key=lambda sc: -sc[0])
    if scored[0][0] == scored[1][0]:
        return None
    best = scored[0][1]
    return best, tuple(c for c in candidates if c != best)


def dependencies(specs: Sequence[ToolSpec]) -> list[Dependency]:
    """Declared and inferred dependencies among ``specs`` (a tool never depends on itself), in the
    order of the specs and of their required parameters."""
    offered = {s.name: s for s in specs}
    producers: dict[str, list[str]] = {}  # field -> offered tools whose results carry it
    for s in specs:
        for name in s.produces:
            producers.setdefault(name, []).append(s.name)
    deps: list[Dependency] = []
    for spec in specs:
        declared: dict[str, list[str]] = {}
        for parameter, producer in spec.requires:
            if producer in offered and producer != spec.name and producer not in declared.get(parameter, []):
                declared.setdefault(parameter, []).append(producer)
        for parameter in _required(spec):
            inferred = [p for p in producers.get(parameter, ()) if p != spec.name]
            if parameter in declared:
                first, *rest = declared[parameter]
                others = tuple(rest) + tuple(p for p in inferred if p not in declared[parameter])
                deps.append(Dependency(spec.name, parameter, first, others, _field(parameter, offered[first])))
            elif inferred and is_handle(parameter):
                picked = _pick(parameter, inferred)
                if picked is not None:
                    deps.append(Dependency(spec.name, parameter, *picked, field=parameter))
    return deps


def hint(dep: Dependency) -> str:
    """The sentence added to the dependent parameter's description."""
    where = f" (the {dep.field} in its result)" if dep.field else ""
    return f"Get it from {dep.producer} first{where}."


def annotate(specs: Sequence[ToolSpec], deps: Sequence[Dependency]) -> tuple[ToolSpec, ...]:
    """``specs`` with each dependent parameter's description naming its producer; a spec without
    dependencies is returned as is, and annotating twice adds nothing."""
    by_tool: dict[str, list[Dependency]] = {}
    for dep in deps:
        by_tool.setdefault(dep.tool, []).append(dep)
    out: list[ToolSpec] = []
    for spec in specs:
        mine = by_tool.get(spec.name)
        properties = spec.parameters.get("properties") if isinstance(spec.parameters, dict) else None
        if not mine or not isinstance(properties, dict):
            out.append(spec)
            continue
        properties = dict(properties)
        for dep in mine:
            prop = properties.get(dep.parameter)
            prop = dict(prop) if isinstance(prop, dict) else {}
            sentence = hint(dep)
            description = str(prop.get("description") or "").rstrip()
            if not description.endswith(sentence):
                if description and description[-1] not in ".!?":
                    description += "."
                prop["description"] = f"{description} {sentence}".lstrip()
            properties[dep.parameter] = prop
        out.append(replace(spec, parameters={**spec.parameters, "properties": properties}))
    return tuple(out)


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, str | list | tuple | dict) and not value) or (
        isinstance(value, str) and not value.strip())


def _values(value: Any) -> list[str]:
    """The strings a call's value must be found as (each element of a list)."""
    if isinstance(value, list | tuple):
        return [s for v in value for s in _values(v)]
    if isinstance(value, dict):
        return [json.dumps(value, sort_keys=True, ensure_ascii=False)]
    if isinstance(value, bool):
        return [str(value).lower()]
    return [str(value).strip()]


def _loads(text: str) -> Any:
    """The JSON of ``text``, or of its span from the first ``{``/``[`` to the last ``}``/``]`` (a
    result fenced as data, or labelled); raises ValueError when there is none."""
    try:
        return json.loads(text)
    except ValueError:
        starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
        end = max(text.rfind("}"), text.rfind("]"))
        if not starts or end < min(starts):
            raise
        return json.loads(text[min(starts):end + 1])


def _under(data: Any, key: str) -> list[Any]:
    """The values of every ``key`` in parsed JSON, at any depth."""
    found, stack = [], [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if key in item:
                found.append(item[key])
            stack.extend(v for k, v in item.items() if k != key)
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _scalars(data: Any) -> Iterator[str]:
    """Every scalar value of parsed JSON (not the keys: a made-up ``token="token"`` is no value) as
    a string."""
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, bool):
            yield str(item).lower()
        elif item is not None:
            yield str(item).strip()


def _inside(value: str, text: str) -> bool:
    """``value`` occurs in ``text`` apart from letters and digits (long enough to mean something)."""
    if len(value) < MIN_SUBSTRING:
        return False
    return re.search(rf"(?<![^\W_]){re.escape(value)}(?![^\W_])", text) is not None


def _holds(content: str, value: str, field: str | None, parsed: dict[tuple[int, str | None], list[str] | None],
           index: int) -> bool:
    key = (index, field)
    if key not in parsed:
        try:
            data = _loads(content)
        except ValueError:
            parsed[key] = None
        else:
            under = _under(data, field) if field else []
            parsed[key] = list(_scalars(under if under else data))
    scalars = parsed[key]
    if scalars is None:
        return _inside(value, content)
    return any(s == value or _inside(value, s) for s in scalars)


def missing(call: ToolCall, deps: Sequence[Dependency], messages: Sequence[ChatMessage]) -> Dependency | None:
    """The first dependency of ``call`` whose value is absent from the call or from every earlier
    tool-role result of its producer (or its ``others``) in ``messages``; None when the call may run."""
    mine = [d for d in deps if d.tool == call.name]
    if not mine:
        return None
    arguments = call.arguments if isinstance(call.arguments, dict) else {}
    parsed: dict[tuple[int, str | None], list[str] | None] = {}  # (message, field) -> its JSON scalars
    for dep in mine:
        value = arguments.get(dep.parameter)
        if _empty(value):
            return dep
        sources = set(dep.sources)
        for wanted in _values(value):
            if not wanted or not any(m.role == "tool" and m.name in sources
                                     and _holds(m.content, wanted, dep.field, parsed, i)
                                     for i, m in enumerate(messages)):
                return dep
    return None
