"""Running one shell command with a timeout and an output cap.

:class:`CommandRunner` is the contract (unit tests use a fake); :class:`SubprocessRunner` runs the
command through the platform shell (``/bin/sh -c`` on Unix, ``cmd.exe /c`` on Windows) in a new
process group (session), so a timeout kills the whole group: the shell and everything it started.

Each of stdout and stderr keeps its first ``max_output_bytes``; the rest is read and dropped (the
command is never blocked on a full pipe) and ``truncated`` says so. When the shell has exited,
background children still holding its output open get a short grace and are then killed with the
group: the catalog runs commands, not daemons.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import IO, Protocol

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
        """Run ``command`` in a shell (with network access when ``network``); never raises for a
        failing command."""
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
    """Runs commands through the platform shell; see the module docstring."""

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
