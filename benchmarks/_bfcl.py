"""BFCL v4 ``live_simple`` for benchmarks/tool_calling.py: reading the cases, their function schemas
as JSON schema and as stub tools, and BFCL's AST scoring of one call.

The data (Apache-2.0, from the ``bfcl-eval`` package) is read in place from
``../shared/benchmarks/tool_calling/bfcl_live_simple/``: one JSON object per line, a case's
``question`` (chat turns), ``function`` (one schema in BFCL's dialect: ``"type": "dict"``, ``float``,
``tuple``, ``any``) and, in ``possible_answer/``, the accepted values of every parameter.

The scorer follows BFCL's published AST rules for a simple call (written here from those rules, not
taken from BFCL's code, so that it has no dependency on the evaluation package and its model
handlers): the function name is right; every required parameter is present; every parameter given
is one the function has and one the answer lists; each value has the schema's type (an integer is
accepted for a number) and is among the accepted values, where ``""`` among them means the parameter
may be left out; strings are compared after BFCL's normalisation (case-insensitive, without spaces
and the characters ``,./-_*^``); lists element by element, dictionaries key by key with the same rules.
Two cases (``live_simple_106-63-0``, ``live_simple_112-68-0``) list no accepted value at all for a
required parameter (``[]``, meant as "an empty list"): as in BFCL's scoring, no call passes them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from assistant.llm.base import ChatMessage, ToolCall, ToolSpec

_ROOT = Path(__file__).resolve().parent.parent
# ../shared/benchmarks/tool_calling from the repository (a worktree sits one level deeper)
SHARED = next((p / "shared" / "benchmarks" / "tool_calling" for p in _ROOT.parents
               if (p / "shared" / "benchmarks" / "tool_calling").is_dir()),
              _ROOT.parent / "shared" / "benchmarks" / "tool_calling")
DATA = SHARED / "bfcl_live_simple"
CASES = DATA / "BFCL_v4_live_simple.json"
ANSWERS = DATA / "possible_answer" / "BFCL_v4_live_simple.json"
# BFCL's type names (Python's) -> JSON schema's; "any" means no type constraint.
BFCL_TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": None}
_IGNORED = re.compile(r"[ ,./\-_*^]")


@dataclass(frozen=True)
class Case:
    id: str
    messages: list[ChatMessage]  # the question's turns (no system prompt of ours)
    specs: tuple[ToolSpec, ...]  # the offered functions, parameters as JSON schema
    answer: dict[str, dict[str, list[Any]]]  # {function name: {parameter: [accepted values]}}

    @property
    def expected(self) -> ToolCall:
        """The answer as a call (for reports): each parameter's first accepted value, "" left out."""
        (name, params), = self.answer.items()
        return ToolCall("expected", name, _first(params))


def _first(accepted: dict[str, list[Any]]) -> dict[str, Any]:
    return {k: _plain(v[0]) for k, v in accepted.items() if v and v[0] != ""}


def _plain(value: Any) -> Any:
    """An accepted value as a plain one (a dict in an answer maps its keys to accepted values)."""
    if isinstance(value, dict):
        return _first(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def to_json_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A BFCL parameter schema as JSON schema: ``dict`` -> object, ``float`` -> number, ``tuple`` ->
    array, ``any`` -> no type; enum, required, default, description and the rest kept (an enum on an
    array, which BFCL means for its elements, moves to ``items``)."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type":
            mapped = BFCL_TYPES.get(value, value)
            if mapped is not None:
                out["type"] = mapped
        elif key == "properties" and isinstance(value, dict):
            out["properties"] = {name: to_json_schema(p) for name, p in value.items()}
        elif key == "items" and isinstance(value, dict):
            out["items"] = to_json_schema(value)
        else:
            out[key] = value
    if out.get("type") == "array" and "enum" in out and isinstance(out.get("items"), dict):
        out["items"].setdefault("enum", out.pop("enum"))  # BFCL's enum of an array is its items'
    return out


def load_cases(cases: Path = CASES, answers: Path = ANSWERS) -> list[Case]:
    """Every case with its accepted answer, in the file's order."""
    accepted = {}
    for line in answers.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            accepted[row["id"]] = row["ground_truth"][0]
    out = []
    for line in cases.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        messages = [ChatMessage(m["role"], m["content"]) for turn in row["question"] for m in turn]
        # the stub tool refuses keys the function does not declare: the schema the model sees says so
        specs = tuple(ToolSpec(f["name"], f.get("description", ""),
                               {**to_json_schema(f["parameters"]), "additionalProperties": False})
                      for f in row["function"])
        out.append(Case(row["id"], messages, specs, accepted[row["id"]]))
    return out


# -- stub tools: a pydantic model from a JSON schema ------------------------------------------------

_SCALARS: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool}


def python_type(schema: dict[str, Any], name: str = "value") -> Any:
    """The pydantic type of a JSON schema node (objects with properties become models that forbid
    keys they do not declare; an enum becomes a Literal)."""
    if "enum" in schema and schema["enum"]:
        return Literal[tuple(schema["enum"])]
    kind = schema.get("type")
    if kind in _SCALARS:
        return _SCALARS[kind]
    if kind == "array":
        items = schema.get("items")
        return list[python_type(items, f"{name}_item")] if isinstance(items, dict) else list[Any]
    if kind == "object":
        return arguments_model(schema, name) if schema.get("properties") else dict[str, Any]
    return Any


def arguments_model(schema: dict[str, Any], name: str) -> type[BaseModel]:
    """A model validating arguments against an object schema: required properties required, the
    others optional (None), unknown keys an error. Fields are aliased, so parameter names that are
    not Python names or that shadow BaseModel's attributes (``json``, ``copy``) work."""
    required = set(schema.get("required", ()))
    fields: dict[str, Any] = {}
    for i, (prop, sub) in enumerate(schema.get("properties", {}).items()):
        kind = python_type(sub, f"{name}_{i}")
        if prop in required:
            fields[f"p{i}"] = (kind, Field(..., alias=prop))
        else:
            fields[f"p{i}"] = (kind | None, Field(None, alias=prop))
    safe = re.sub(r"\W", "_", name)
    return create_model(f"{safe}_arguments", __config__=ConfigDict(extra="forbid"), **fields)


# -- scoring -----------------------------------------------------------------------------------------


def standardize(text: str) -> str:
    """BFCL's string normalisation: lower case, without spaces and ``,./-_*^``, ' as "."""
    return _IGNORED.sub("", text).lower().replace("'", '"')


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def type_ok(value: Any, schema: dict[str, Any]) -> bool:
    """``value`` has the schema's type (an integer passes for a number; no type: anything)."""
    kind = schema.get("type")
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return _number(value)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "array":
        items = schema.get("items")
        return isinstance(value, list) and (not isinstance(items, dict) or all(type_ok(v, items) for v in value))
    if kind == "object":
        return isinstance(value, dict)
    return True


def same(value: Any, accepted: Any) -> bool:
    """``value`` equals one accepted value: strings normalised, numbers by value (not booleans),
    lists element by element, an accepted dict as ``{key: [accepted values]}``."""
    if isinstance(accepted, dict):
        return isinstance(value, dict) and dict_ok(value, accepted)
    if isinstance(accepted, list):
        return (isinstance(value, list) and len(value) == len(accepted)
                and all(same(v, a) for v, a in zip(value, accepted, strict=True)))
    if isinstance(accepted, str):
        return isinstance(value, str) and standardize(value) == standardize(accepted)
    if isinstance(accepted, bool) or accepted is None:
        return value is accepted
    if _number(accepted):
        return _number(value) and value == accepted
    return value == accepted


def among(value: Any, accepted: list[Any]) -> bool:
    return any(same(value, a) for a in accepted)


def dict_ok(value: dict[str, Any], accepted: dict[str, list[Any]]) -> bool:
    """Every key given is an accepted key with an accepted value; every key left out may be."""
    if any(k not in accepted or not among(v, accepted[k]) for k, v in value.items()):
        return False
    return all("" in options for k, options in accepted.items() if k not in value)


def check(call: ToolCall | None, spec: ToolSpec, answer: dict[str, dict[str, list[Any]]]) -> tuple[bool, bool, str]:
    """BFCL's AST check of one call against a simple case: (name right, call right, why not)."""
    if call is None:
        return False, False, "no call"
    (name, accepted), = answer.items()
    if call.name != name:
        return False, False, f"wrong function {call.name!r}"
    properties = spec.parameters.get("properties", {})
    for param in spec.parameters.get("required", ()):
        if param not in call.arguments:
            return True, False, f"required parameter {param!r} missing"
    for param, value in call.arguments.items():
        if param not in properties or param not in accepted:
            return True, False, f"unknown parameter {param!r}"
        if value is None and None in accepted[param]:
            continue
        if not type_ok(value, properties[param]):
            return True, False, f"{param}: {value!r} is not of type {properties[param].get('type')}"
        if not among(value, accepted[param]):
            return True, False, f"{param}: {value!r} is not among {accepted[param]!r}"
    for param, options in accepted.items():
        if param not in call.arguments and "" not in options:
            return True, False, f"parameter {param!r} missing"
    return True, True, ""
