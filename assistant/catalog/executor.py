"""Running one catalog command: in the bubblewrap sandbox on Linux, in the host shell on Windows.

:class:`CommandRunner` is the contract (unit tests use a fake). :func:`create_runner` picks the
implementation for the platform:

- Linux (and any POSIX system): :class:`SandboxedRunner` runs ``/bin/sh`` on the command inside
  :class:`~assistant.tools.shell_sandbox.ShellSandbox`: a spare unprivileged uid, read-only
  ``/usr``, ``/etc`` (minus its secrets) and ``/sys``, ``/proc`` of the sandbox's own pid
  namespace, a private tmpfs as working directory and ``HOME``; the data directory, the key file,
  the config file and the real home are not mounted at all (:func:`secret_paths`). No network
  unless the entry says ``network = true``; CPU, memory, process, wall-clock and output limits
  from ``[commands]``. Where no sandbox can be set up (bwrap missing) nothing runs: the run raises
  :class:`~assistant.errors.ServiceUnavailableError` (503), never falling back to the host shell.
- Windows (``os.name == "nt"``): :class:`SubprocessRunner`, **unsandboxed**: the command runs as
  the service's user through ``cmd.exe /c`` with only the timeout and the output cap. Only admins
  can create entries; treat every entry as code run with the service's rights.

:class:`SubprocessRunner` runs the command in a new process group (session), so a timeout kills
the whole group: the shell and everything it started. Each of stdout and stderr keeps its first
``max_output_bytes``; the rest is read and dropped (the command is never blocked on a full pipe)
and ``truncated`` says so. When the shell has exited, background children still holding its output
open get a short grace and are then killed with the group: the catalog runs commands, not daemons.
The sandbox behaves the same way (the whole sandbox dies with the shell).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import IO, Protocol

from assistant.config import CommandsSettings, Settings
from assistant.errors import ServiceUnavailableError
from assistant.tools.sandbox import RunResult, RunStatus, SandboxError, SandboxLimits, SandboxUnavailable
from assistant.tools.shell_sandbox import ShellSandbox

DRAIN_GRACE_SECS = 1.0
CHUNK_BYTES = 65_536


class ExecutionStatus(StrEnum):
    COMPLETED = "completed"  # exit code 0
    FAILED = "failed"  # a non-zero exit code, or the shell could not start
    TIMED_OUT = "timed_out"  # killed at the timeout


@dataclass(frozen=True)
class RunOutcome:
    """What one run did. ``exit_code`` is None when the command was killed or never started."""

    exit_code: int | None
    stdout: str
    stderr: str
    duration_ms: int
    timed_out: bool = False
    truncated: bool = False

    @property
    def status(self) -> ExecutionStatus:
        if self.timed_out:
            return ExecutionStatus.TIMED_OUT
        return ExecutionStatus.COMPLETED if self.exit_code == 0 else ExecutionStatus.FAILED


class CommandRunner(Protocol):
    def run(self, command: str, *, timeout_secs: float, max_output_bytes: int, network: bool = False) -> RunOutcome:
        """Run ``command`` in a shell (with the network when ``network``); never raises for a
        failing command. ServiceUnavailableError: nothing can run here (no sandbox)."""
        ...


class _Capture:
    """One stream's first ``cap`` bytes, read by a thread until the stream closes."""

    def __init__(self, stream: IO[bytes], cap: int):
        self.data = bytearray()
        self.truncated = False
        self._stream = stream
        self._cap = cap
        self.thread = threading.Thread(target=self._pump, daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        try:
            while chunk := self._stream.read1(CHUNK_BYTES):  # type: ignore[attr-defined]
                room = self._cap - len(self.data)
                if room > 0:
                    self.data += chunk[:room]
                if len(chunk) > room:
                    self.truncated = True
        except (OSError, ValueError):
            pass
        finally:  # closed by its reader: closing it from another thread would wait for this read
            _close_quietly(self._stream)

    def text(self) -> str:
        return bytes(self.data).decode("utf-8", "replace")


class SubprocessRunner:
    """Runs commands through the platform shell, unsandboxed (Windows); see the module docstring.
    ``network`` is accepted and has no effect: the host's network is always there."""

    def __init__(self, cwd: str | None = None):
        self.cwd = cwd

    def run(self, command: str, *, timeout_secs: float, max_output_bytes: int, network: bool = False) -> RunOutcome:
        started = time.monotonic()
        try:
            proc = subprocess.Popen(command, shell=True, cwd=self.cwd, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, **_new_group())
        except (OSError, ValueError) as exc:
            return RunOutcome(None, "", f"the command could not start: {exc}", _ms(started))
        out = _Capture(proc.stdout, max_output_bytes)  # type: ignore[arg-type]
        err = _Capture(proc.stderr, max_output_bytes)  # type: ignore[arg-type]
        timed_out = False
        try:
            proc.wait(timeout_secs)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
            proc.wait()
        duration = _ms(started)
        _finish(proc, (out, err))
        return RunOutcome(None if timed_out else proc.returncode, out.text(), err.text(), duration, timed_out,
                          out.truncated or err.truncated)


class SandboxedRunner:
    """Runs commands in a :class:`ShellSandbox`, checked (a probe run) before the first command;
    an unusable sandbox is a ServiceUnavailableError for every run until a check passes."""

    def __init__(self, sandbox: ShellSandbox):
        self.sandbox = sandbox
        self._checked = False
        self._lock = threading.Lock()

    def ready(self) -> None:
        """ServiceUnavailableError unless the sandbox works here."""
        with self._lock:
            if self._checked:
                return
            try:
                self.sandbox.check()
            except SandboxUnavailable as exc:
                raise _unavailable(str(exc)) from None
            self._checked = True

    def run(self, command: str, *, timeout_secs: float, max_output_bytes: int, network: bool = False) -> RunOutcome:
        self.ready()
        limits = replace(self.sandbox.limits, wall_time_secs=timeout_secs, max_output_bytes=max_output_bytes)
        try:
            result = self.sandbox.run(command, limits=limits, network=network)
        except SandboxError as exc:
            raise _unavailable(str(exc)) from None
        return outcome_of(result)


def outcome_of(result: RunResult) -> RunOutcome:
    """A sandbox run as an execution: a limit that stopped it is named on stderr's last line."""
    stderr = result.stderr
    if result.status not in (RunStatus.OK, RunStatus.ERROR, RunStatus.TIMEOUT):
        stderr += ("" if not stderr or stderr.endswith("\n") else "\n") + f"[sandbox] {result.message}\n"
    return RunOutcome(result.exit_code, result.stdout, stderr, result.duration_ms,
                      result.status is RunStatus.TIMEOUT, result.truncated)


def _unavailable(reason: str) -> ServiceUnavailableError:
    return ServiceUnavailableError(
        f"catalog commands cannot run on this server: no sandbox ({reason}); they never run unsandboxed",
        {"reason": reason})


def sandbox_limits(settings: CommandsSettings) -> SandboxLimits:
    return SandboxLimits(settings.cpu_time_secs, settings.execution_timeout_secs, settings.memory_mb,
                         settings.max_output_bytes, settings.max_processes)


def secret_paths(settings: Settings, config_file: Path | str | None = None) -> tuple[Path, ...]:
    """What catalog commands must never see: the data directory, the memory key file, the
    service user's home (unless it is /) and the config file (:func:`create_runner` adds
    ``commands.hidden_paths``)."""
    key = settings.memory.encryption_key_path.expanduser()
    paths = [settings.data_dir.expanduser(), key if key.is_absolute() else settings.data_dir / key]
    home = Path.home()
    if home != Path("/"):
        paths.append(home)
    if config_file is not None:
        paths.append(Path(config_file).expanduser())
    return tuple(paths)


def create_runner(settings: CommandsSettings, hidden: Iterable[Path] = (), *,
                  platform: str = os.name) -> CommandRunner:
    """The platform's runner: the sandbox, or on Windows the host shell (see the module docstring)."""
    if platform == "nt":
        return SubprocessRunner()
    extra = (p.expanduser() for p in settings.hidden_paths)
    return SandboxedRunner(ShellSandbox(sandbox_limits(settings), hidden=(*hidden, *extra)))


def _finish(proc: subprocess.Popen, captures: tuple[_Capture, ...]) -> None:
    """Let the readers reach the end of output; kill the group's leftovers if they hold it open."""
    deadline = time.monotonic() + DRAIN_GRACE_SECS
    for capture in captures:
        capture.thread.join(max(deadline - time.monotonic(), 0))
    if any(c.thread.is_alive() for c in captures):
        _kill_group(proc)
        for capture in captures:
            capture.thread.join(DRAIN_GRACE_SECS)  # a process that left the group may hold it: keep what we have


def _new_group() -> dict:
    if sys.platform == "win32":
        return {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}  # type: ignore[attr-defined]
    return {"start_new_session": True}


def _kill_group(proc: subprocess.Popen) -> None:
    if sys.platform == "win32":
        subprocess.run(["taskkill", "/F", "/T", "/PID", str(proc.pid)], capture_output=True, check=False)
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _close_quietly(stream: IO[bytes] | None) -> None:
    try:
        if stream is not None:
            stream.close()
    except OSError:
        pass


def _ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)
