"""Prerequisite calls (issue 20): a tool whose parameter needs a value another tool produces.

CONTRACT (the lead's; the helper fills it in):

- A dependency is ``(tool, parameter) <- producer``: declared on the tool (``ToolSpec.requires``) or
  inferred when another offered tool lists the parameter's name in ``ToolSpec.produces``
  (``token`` <- ``GetUserToken``). Only required parameters count.
- :func:`annotate` gives the model the offered specs with each dependent parameter's description
  saying which tool yields it ("get it from GetUserToken first").
- :func:`missing` tells whether a call uses a dependent value that no earlier result of the producer
  in the conversation holds (the model made it up, or left it out): then the loop does not run the
  call but calls the producer first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from assistant.llm.base import ChatMessage, ToolCall, ToolSpec


@dataclass(frozen=True)
class Dependency:
    tool: str
    parameter: str
    producer: str


def dependencies(specs: Sequence[ToolSpec]) -> list[Dependency]:
    """Declared and inferred dependencies among ``specs`` (a tool never depends on itself)."""
    return []


def annotate(specs: Sequence[ToolSpec], deps: Sequence[Dependency]) -> tuple[ToolSpec, ...]:
    """``specs`` with each dependent parameter's description naming its producer."""
    return tuple(specs)


def missing(call: ToolCall, deps: Sequence[Dependency], messages: Sequence[ChatMessage]) -> Dependency | None:
    """The first dependency of ``call`` whose value is absent from the call or from every earlier
    tool-role result of its producer in ``messages``; None when the call may run."""
    return None
