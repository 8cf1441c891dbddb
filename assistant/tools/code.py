"""execute_code: a Python program run in a sandbox (capability ``code_execution``).

The program runs through a :class:`~assistant.tools.sandbox.CodeRunner`; the ``sandbox`` backend
is :class:`~assistant.tools.sandbox.BubblewrapRunner` (no network, CPU/memory/process/output and
wall-clock limits, a private working directory, and neither the data directory nor the key file
visible). The backend is probed when the toolbox is built: where no sandbox can be set up the
capability is unavailable and the tool is not registered, so code never runs unsandboxed.

A program that fails or hits a limit is a normal result with its status, stdout and stderr, so the
model can read the traceback and try again; only a sandbox that cannot start is a ToolError. The
streams are clipped for the model (the head of stdout, the tail of stderr, where tracebacks end)
so the result stays valid JSON under the loop's 4,000-character cap.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated

from pydantic import Field

from assistant.tools.base import (
    Capability,
    CapabilityDeps,
    CapabilityUnavailable,
    ToolContext,
    ToolError,
    pick_backend,
    tool,
)
from assistant.tools.sandbox import (
    BubblewrapRunner,
    CodeRunner,
    RunResult,
    RunStatus,
    SandboxError,
    SandboxLimits,
    SandboxUnavailable,
)

MAX_CODE_CHARS = 20_000
STDOUT_CHARS = 2_500  # the head of stdout shown to the model
STDERR_CHARS = 1_000  # the tail of stderr shown to the model


def _bubblewrap(limits: SandboxLimits, hidden: Iterable[Path]) -> CodeRunner:
    runner = BubblewrapRunner(limits, hidden=hidden)
    runner.check()
    return runner


# backend id -> factory(limits, hidden paths); a factory raises SandboxUnavailable if it cannot run
BACKENDS: dict[str, Callable[[SandboxLimits, Iterable[Path]], CodeRunner]] = {"sandbox": _bubblewrap}


@tool("code_execution", icon="🐍")
def execute_code(
    ctx: ToolContext,
    code: Annotated[str, Field(min_length=1, max_length=MAX_CODE_CHARS,
                               description="A complete Python 3 program. print() every result you want to see.")],
) -> dict:
    """Run a short Python 3 program for calculations, math, dates, or text and data processing, and
    get what it prints. It runs in a sandbox: standard library only, no network, no files kept, a few
    seconds of CPU time; print() the results.

    The status is ok, error, timeout, cpu_limit, memory_limit, output_limit, process_limit or killed.
    """
    runner: CodeRunner = ctx.backend("code_execution")
    try:
        result = runner.run(_unfence(code))
    except SandboxError as exc:
        raise ToolError(f"the code sandbox could not start: {exc}") from None
    return present(result)


def present(result: RunResult) -> dict:
    """The tool's answer: the run's status and clipped streams."""
    stdout, stdout_clipped = _head(result.stdout, STDOUT_CHARS)
    stderr, stderr_clipped = _tail(result.stderr, STDERR_CHARS)
    message = result.message
    if result.status == RunStatus.OK and not result.stdout.strip():
        message += "; it printed nothing (use print() to see results)"
    return {"status": result.status.value, "stdout": stdout, "stderr": stderr, "exit_code": result.exit_code,
            "duration_ms": result.duration_ms, "truncated": result.truncated or stdout_clipped or stderr_clipped,
            "message": message}


def _head(text: str, limit: int) -> tuple[str, bool]:
    return (text, False) if len(text) <= limit else (text[:limit] + "\n[... cut]", True)


def _tail(text: str, limit: int) -> tuple[str, bool]:
    return (text, False) if len(text) <= limit else ("[cut ...]\n" + text[-limit:], True)


def _unfence(code: str) -> str:
    """The program inside a Markdown code fence, which small models often send."""
    lines = code.strip().splitlines()
    if len(lines) >= 2 and lines[0].startswith("```") and lines[-1].strip() == "```":
        return "\n".join(lines[1:-1]) + "\n"
    return code


def hidden_paths(deps: CapabilityDeps) -> tuple[Path, ...]:
    """What the sandbox must never show: the data directory and the memory key file."""
    settings = deps.settings
    data_dir = (deps.data_dir or settings.data_dir).expanduser()
    key = settings.memory.encryption_key_path.expanduser()
    return (data_dir, key if key.is_absolute() else data_dir / key)


def _create(deps: CapabilityDeps) -> CodeRunner:
    section = deps.settings.code_execution
    factory = pick_backend("code_execution", BACKENDS, section.backend)
    try:
        return factory(SandboxLimits.from_settings(section), hidden_paths(deps))
    except SandboxUnavailable as exc:
        raise CapabilityUnavailable(f"no sandbox for running code: {exc}") from None


CAPABILITY = Capability(
    "code_execution", (execute_code,), configured=lambda settings: settings.code_execution.enabled,
    create=_create, description="Python programs in a sandbox (bubblewrap: no network, limited resources)",
)
