"""Watching one bubblewrap run from outside: both output streams (capped), bwrap's JSON status
documents, the wall clock, and killing the whole sandbox when a limit is passed.

Past ``max_output_bytes`` a stream is either the reason to stop the sandbox (``drain=False``: a
program printing forever wastes the CPU budget) or read on and dropped (``drain=True``: a shell
command's long listing keeps its head and still finishes); ``*_truncated`` says so either way.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass, field

KILL_GRACE_SECS = 5.0


@dataclass
class Watch:
    """What was read from one run: both streams (capped) and bwrap's status documents."""

    stdout: bytearray = field(default_factory=bytearray)
    stderr: bytearray = field(default_factory=bytearray)
    status: bytearray = field(default_factory=bytearray)
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    timed_out: bool = False
    output_exceeded: bool = False


def watch(proc: subprocess.Popen, status_fd: int, wall_time_secs: float, max_output_bytes: int,
          started: float, *, drain: bool = False) -> Watch:
    """Read the streams until they close, the output cap is passed (unless ``drain``) or the wall
    clock runs out; then stop the sandbox if needed and wait for bwrap."""
    seen = Watch()
    deadline = started + wall_time_secs
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ, "stdout")  # type: ignore[arg-type]
        sel.register(proc.stderr, selectors.EVENT_READ, "stderr")  # type: ignore[arg-type]
        sel.register(status_fd, selectors.EVENT_READ, "status")
        while sel.get_map() and not seen.output_exceeded:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                seen.timed_out = True
                break
            for key, _ in sel.select(remaining):
                chunk = os.read(key.fd, 65_536)
                if not chunk:
                    sel.unregister(key.fileobj)
                else:
                    keep(seen, key.data, chunk, max_output_bytes, drain=drain)
    if seen.timed_out or seen.output_exceeded:
        stop(proc, seen.status)
    try:
        proc.wait(max(deadline - time.monotonic(), 0) + KILL_GRACE_SECS)
    except subprocess.TimeoutExpired:  # bwrap itself hangs on: kill it, the sandbox dies with it
        kill_bwrap(proc)
        proc.wait()
        seen.timed_out = True
    return seen


def keep(seen: Watch, stream: str, chunk: bytes, cap: int, *, drain: bool = False) -> None:
    buffer: bytearray = getattr(seen, stream)
    if stream == "status":
        buffer += chunk
        return
    room = max(cap - len(buffer), 0)
    buffer += chunk[:room]
    if len(chunk) > room:
        setattr(seen, f"{stream}_truncated", True)
        seen.output_exceeded = seen.output_exceeded or not drain


def stop(proc: subprocess.Popen, status: bytes) -> None:
    """Kill the sandbox's init: the kernel kills its whole pid namespace, then bwrap exits. Before
    its pid is known, kill bwrap (the sandbox dies with its parent)."""
    child = child_pid(status)
    if child is not None and proc.poll() is None:  # bwrap is still up: the pid is still its child's
        try:
            os.kill(child, signal.SIGKILL)
            return
        except ProcessLookupError:
            pass
    kill_bwrap(proc)


def await_gone(uid: int, timeout_secs: float = 10.0) -> None:
    """Wait until no process of ``uid`` is left (dying members of a killed pid namespace linger a
    moment), killing any that still run; the uid is then free for the next run."""
    deadline = time.monotonic() + timeout_secs
    while True:
        left = []
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    if entry.stat().st_uid == uid:
                        left.append(int(entry.name))
                except OSError:  # gone meanwhile
                    continue
        if not left or time.monotonic() > deadline:
            return
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)


def kill_bwrap(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _status_docs(status: bytes) -> list[dict]:
    docs = []
    for line in status.decode(errors="replace").splitlines():
        try:
            doc = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(doc, dict):
            docs.append(doc)
    return docs


def child_pid(status: bytes) -> int | None:
    return next((int(d["child-pid"]) for d in _status_docs(status) if "child-pid" in d), None)


def exit_code(status: bytes) -> int | None:
    """bwrap's ``exit-code`` (None: the program never ran, or bwrap was killed)."""
    return next((int(d["exit-code"]) for d in _status_docs(status) if "exit-code" in d), None)
