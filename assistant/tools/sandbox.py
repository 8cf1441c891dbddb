"""Running untrusted Python in a bubblewrap sandbox, with limits, and classifying how it ended.

The parts of the sandbox are hooks of :class:`BubblewrapRunner`; the shell-command profile the
command catalog uses is :class:`~assistant.tools.shell_sandbox.ShellSandbox`.

Design, each point checked by experiment on Debian bookworm (bubblewrap 0.8):

- The sandbox root is an empty tmpfs. Only ``/usr`` (with the ``/lib``, ``/lib64``, ``/bin``
  symlinks of a merged-/usr system) and the *base* interpreter's install (``sys.base_prefix``, e.g. a
  pyenv prefix under ``/root``) are bound, read-only; never the home directory, the venv or the data
  directory. The interpreter runs isolated (``-I -S``: no site-packages, no ``PYTHON*`` variables).
  The code is a read-only file ``/code/main.py`` (tracebacks then quote its lines); the working
  directory ``/work`` is a size-limited tmpfs private to the run (``/tmp`` points to it), so nothing
  of a run survives it. The environment is cleared.
- New network, pid, ipc, uts and cgroup namespaces: only a loopback interface that nothing on the
  host listens on, and the whole pid namespace dies with the program (or with this process:
  ``--die-with-parent``). ``--new-session`` keeps the program away from our terminal.
- Limits are rlimits set by a tiny launcher inside the sandbox that then ``exec``s the program:
  RLIMIT_CPU (SIGXCPU, then SIGKILL a second later), RLIMIT_AS, RLIMIT_FSIZE, RLIMIT_NPROC and no
  core files. Setting them inside matters: RLIMIT_NPROC is not enforced for host uid 0, and a limit
  set before bwrap creates a user namespace also caps that namespace's creator.
- As root (this machine and CI) bwrap runs privileged without a user namespace: inside a user
  namespace that root creates, the program is still host uid 0 and a fork bomb is not limited.
  So the launcher keeps only CAP_SETUID/CAP_SETGID and drops to an unused uid/gid far above any
  account's (one per concurrent run, so each run has its own process budget); with bwrap's
  no-new-privileges it can never regain a capability. As an ordinary user bwrap makes an
  unprivileged user namespace (no capabilities, no nested user namespaces) and the uid is the user's
  own, counted per namespace.
- Wall clock and output are watched from outside (:mod:`assistant.tools.sandbox_watch`): stdout and
  stderr are read together up to ``max_output_bytes`` each; past that, or past ``wall_time_secs``,
  the sandbox is killed.
- bwrap itself is the sandbox's pid 1, whose command line and environment the program can read:
  bwrap is started with an empty environment and its options come through ``--args`` (a memfd).
- bwrap's ``--json-status-fd`` gives the sandbox's init pid (killing it ends the whole pid namespace
  before bwrap exits, so nothing outlives :meth:`BubblewrapRunner.run`) and tells a sandbox that
  could not be set up (no ``exit-code``) from a program that failed. The exit code (128 + signal for
  a signal), stderr's last exception and what was stopped here classify the end.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, ClassVar, Protocol

from assistant.tools import sandbox_watch

UID_BASE = 1_000_000_000  # sandbox uids (as root): unused by any account, one per concurrent run
CODE_PATH = "/code/main.py"
WORK_DIR = "/work"
MERGED_USR_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")

# Runs inside the sandbox before the program: drop root, set the limits, become the program.
LAUNCHER = """\
import os, resource, sys
cpu, mem, fsize, nproc, uid = map(int, sys.argv[1:6])
if uid >= 0 and os.getuid() == 0:
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
for which, value in ((resource.RLIMIT_CPU, (cpu, cpu + 1)), (resource.RLIMIT_AS, (mem, mem)),
                     (resource.RLIMIT_FSIZE, (fsize, fsize)), (resource.RLIMIT_NPROC, (nproc, nproc)),
                     (resource.RLIMIT_CORE, (0, 0))):
    resource.setrlimit(which, value)
os.execv(sys.executable, [sys.executable, "-I", "-S", "-X", "utf8", sys.argv[6]])
"""


class RunStatus(StrEnum):
    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    CPU_LIMIT = "cpu_limit"
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"
    PROCESS_LIMIT = "process_limit"
    KILLED = "killed"


@dataclass(frozen=True)
class SandboxLimits:
    cpu_time_secs: float = 5
    wall_time_secs: float = 10
    memory_mb: int = 256
    max_output_bytes: int = 65_536
    max_processes: int = 8

    @classmethod
    def from_settings(cls, section: Any) -> SandboxLimits:
        """From a ``CodeExecutionSettings`` section."""
        return cls(section.cpu_time_secs, section.wall_time_secs, section.memory_mb,
                   section.max_output_bytes, section.max_processes)


@dataclass(frozen=True)
class RunResult:
    status: RunStatus
    exit_code: int | None  # the program's exit code; None when a signal ended it
    signal: int | None
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    duration_ms: int
    message: str

    @property
    def truncated(self) -> bool:
        return self.stdout_truncated or self.stderr_truncated


class CodeRunner(Protocol):
    """Runs a Python program in isolation and reports how it ended (never raises for the program's
    own failures: those are statuses)."""

    def run(self, code: str) -> RunResult: ...


class SandboxUnavailable(Exception):
    """No sandbox can be set up here (bwrap missing, namespaces refused, a hidden path exposed)."""


class SandboxError(Exception):
    """The sandbox failed to start for one run (not the program's fault)."""


# --- how a run ended ------------------------------------------------------------------------------

# fork() refused by RLIMIT_NPROC (EAGAIN), or a thread refused for the same reason (Python, then sh)
_FORK_FAILED = re.compile(r"^((BlockingIOError|OSError): \[Errno 11\] Resource temporarily unavailable"
                          r"|RuntimeError: can't start new thread)|: [Cc]annot fork$", re.MULTILINE)
_MEMORY_ERROR = re.compile(r"^MemoryError\b|: [Cc]annot allocate memory$|: memory exhausted$", re.MULTILINE)


@dataclass(frozen=True)
class Ending:
    """What was observed when a run ended; :func:`classify` names it."""

    exit_status: int | None  # bwrap's exit-code: the program's code, or 128 + signal; None if killed here
    stderr: str
    timed_out: bool = False
    output_exceeded: bool = False
    duration_secs: float = 0.0


def classify(end: Ending, limits: SandboxLimits) -> tuple[RunStatus, int | None, int | None, str]:
    """(status, exit_code, signal, message) of a finished run, the first that applies of: output
    cap passed, fork refused, wall clock, CPU time, memory, another signal, exit code."""
    code, sig = _split_status(end.exit_status)
    if end.output_exceeded:
        return RunStatus.OUTPUT_LIMIT, code, sig, (
            f"stopped: the output passed the limit of {limits.max_output_bytes} bytes")
    if _FORK_FAILED.search(end.stderr):
        return RunStatus.PROCESS_LIMIT, code, sig, (
            f"stopped: the program tried to run more than {limits.max_processes} processes or threads")
    if end.timed_out:
        return RunStatus.TIMEOUT, code, sig, (
            f"stopped: still running after the wall-clock limit of {limits.wall_time_secs:g} s")
    # SIGXCPU at the soft limit; SIGKILL a second later if the program ignored it (no CPU time can be
    # read back: bwrap does not reap the sandbox's init, so wall time stands in as a lower bound).
    if sig == signal.SIGXCPU or (sig == signal.SIGKILL and end.duration_secs >= limits.cpu_time_secs):
        return RunStatus.CPU_LIMIT, code, sig, f"stopped: used up the CPU-time limit of {limits.cpu_time_secs:g} s"
    if _MEMORY_ERROR.search(end.stderr):
        return RunStatus.MEMORY_LIMIT, code, sig, f"stopped: needed more than the memory limit of {limits.memory_mb} MB"
    if sig is not None:
        return RunStatus.KILLED, code, sig, f"killed by signal {_signal_name(sig)}"
    if code == 0:
        return RunStatus.OK, 0, None, "finished"
    return RunStatus.ERROR, code, None, f"exited with code {code}; see stderr"


def _split_status(status: int | None) -> tuple[int | None, int | None]:
    """(exit code, signal) of bwrap's exit-code, which is 128 + signal for a killed program."""
    if status is None:
        return None, int(signal.SIGKILL)
    if status > 128 and status - 128 in signal.valid_signals():
        return None, status - 128
    return status, None


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return str(sig)


# --- the runner -----------------------------------------------------------------------------------


def base_interpreter() -> Path:
    """The real interpreter behind this (possibly venv) Python: a pyenv install, /usr/bin, ..."""
    candidate = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    return candidate if candidate.exists() else Path(os.path.realpath(sys.executable))


class UidPool:
    """Distinct unprivileged uids for the concurrent runs of this process (RLIMIT_NPROC counts per
    uid, and a finished run kills whatever its uid still runs); ``base`` is offset by the pid so that
    two processes rarely share one. The uids in use are shared by every pool of the process (the code
    tool's and the command catalog's sandboxes run side by side): a uid is an OS-wide resource, so
    this one piece of state is the process's, not a pool's."""

    _in_use: ClassVar[set[int]] = set()
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, base: int = UID_BASE):
        self.base = base + (os.getpid() % 1_000_000) * 1000

    @contextmanager
    def lease(self) -> Iterator[int]:
        with self._lock:
            uid = next(self.base + i for i in range(1000) if self.base + i not in self._in_use)  # never 1000 at once
            self._in_use.add(uid)
        try:
            yield uid
        finally:
            with self._lock:
                self._in_use.discard(uid)


class BubblewrapRunner:
    """A :class:`CodeRunner` that runs each program in a fresh bubblewrap sandbox.

    ``hidden`` are paths that must not be visible inside (the data directory, the key file):
    :meth:`check` refuses a sandbox that would bind them and verifies they are absent inside.

    The sandbox's parts are hooks (:meth:`_namespaces`, :meth:`_filesystem`, :meth:`_environment`,
    :meth:`_program`, :meth:`_files`, the probe) so that other profiles reuse the rest: starting,
    watching, killing and classifying (see :mod:`assistant.tools.shell_sandbox`).
    """

    drain_output = False  # past the output cap: stop the program (False) or drop the rest (True)

    def __init__(self, limits: SandboxLimits, *, bwrap: str = "bwrap", python: Path | str | None = None,
                 hidden: Iterable[Path | str] = ()):
        self.limits = limits
        self.bwrap = bwrap
        self.python = Path(python) if python is not None else base_interpreter()
        self.prefix = _prefix_of(self.python)
        self.hidden = tuple(Path(os.path.realpath(Path(p).expanduser())) for p in hidden)
        self.privileged = os.geteuid() == 0
        self.uids = UidPool()

    def check(self) -> None:
        """Raise :class:`SandboxUnavailable` unless a probe runs sandboxed, offline and blind to
        the hidden paths."""
        binary = shutil.which(self.bwrap)
        if binary is None:
            raise SandboxUnavailable(f"bubblewrap ({self.bwrap}) is not installed")
        self.bwrap = binary
        self._check_hidden()
        try:
            result = self._execute(self._probe(), self.limits)
        except SandboxError as exc:
            raise SandboxUnavailable(str(exc)) from None
        if result.status != RunStatus.OK:
            raise SandboxUnavailable(f"a probe run failed ({result.status}): {result.stderr.strip()[-300:]}")
        problem = self._probe_problem(result.stdout)
        if problem:
            raise SandboxUnavailable(f"the sandbox is not isolated: {problem}")

    def run(self, code: str) -> RunResult:
        """Run ``code`` in a fresh sandbox; raise :class:`SandboxError` if the sandbox cannot start."""
        return self._execute(code, self.limits)

    def _execute(self, source: str, limits: SandboxLimits, **options: Any) -> RunResult:
        started = time.monotonic()
        with self.uids.lease() as uid:
            proc, status_fd = self._start(self._files(source, uid), uid, limits, options)
            try:
                seen = sandbox_watch.watch(proc, status_fd, limits.wall_time_secs, limits.max_output_bytes,
                                           started, drain=self.drain_output)
            finally:
                if proc.poll() is None:  # only when watching failed: never leave a sandbox behind
                    sandbox_watch.kill_bwrap(proc)
                    proc.wait()
                os.close(status_fd)
                proc.stdout.close()  # type: ignore[union-attr]
                proc.stderr.close()  # type: ignore[union-attr]
                if self.privileged:
                    sandbox_watch.await_gone(uid)  # the kernel tears a killed pid namespace down asynchronously
        exit_status = sandbox_watch.exit_code(seen.status)
        stderr = seen.stderr.decode("utf-8", "replace")
        if exit_status is None and not (seen.timed_out or seen.output_exceeded):
            raise SandboxError(f"the sandbox failed to start: {stderr.strip()[-500:] or 'no reason given'}")
        end = Ending(exit_status, stderr, seen.timed_out, seen.output_exceeded, time.monotonic() - started)
        status, exit_code, sig, message = classify(end, limits)
        return RunResult(status, exit_code, sig, seen.stdout.decode("utf-8", "replace"), stderr,
                         seen.stdout_truncated, seen.stderr_truncated,
                         round((time.monotonic() - started) * 1000), message)

    def _start(self, files: Mapping[str, str], uid: int, limits: SandboxLimits,
               options: Mapping[str, Any]) -> tuple[subprocess.Popen, int]:
        """Start bwrap with ``files`` (sandbox path -> text) as read-only memfds; the process and
        the read end of its JSON status pipe. bwrap is the sandbox's pid 1, so the program can read
        its command line and environment: the options come through ``--args`` (a memfd) and the
        environment is empty."""
        fds: dict[str, int] = {}
        status_read, status_write = os.pipe()
        options_fd = os.memfd_create("bwrap-options")
        try:
            for path, text in files.items():
                fds[path] = _memfd(Path(path).name, text.encode("utf-8", "surrogateescape"))
            argv = self.options(fds, status_write, uid, limits, **options)
            os.write(options_fd, b"".join(a.encode() + b"\0" for a in argv))
            os.lseek(options_fd, 0, os.SEEK_SET)
            proc = subprocess.Popen([self.bwrap, "--args", str(options_fd), *self._program(limits, uid)],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    pass_fds=(*fds.values(), options_fd, status_write), start_new_session=True,
                                    env={})
        except OSError as exc:
            os.close(status_read)
            raise SandboxError(f"could not start bubblewrap: {exc}") from exc
        finally:
            for fd in (*fds.values(), options_fd, status_write):
                os.close(fd)
        return proc, status_read

    def command(self, fds: Mapping[str, int], status_fd: int, uid: int = UID_BASE,
                limits: SandboxLimits | None = None, **options: Any) -> list[str]:
        """The bwrap command line of one run: ``fds`` maps each sandbox file to its memfd, ``uid``
        is the program's (when running as root), ``options`` go to the hooks. (Run, the options
        go through ``--args``.)"""
        lim = limits or self.limits
        return [self.bwrap, *self.options(fds, status_fd, uid, lim, **options), *self._program(lim, uid)]

    def options(self, fds: Mapping[str, int], status_fd: int, uid: int, limits: SandboxLimits,
                **options: Any) -> list[str]:
        """bwrap's options: what the sandbox is made of."""
        argv = ["--die-with-parent", "--new-session", "--json-status-fd", str(status_fd)]
        argv += self._namespaces(**options)
        argv += self._filesystem(fds, limits, uid, **options)
        argv += ["--clearenv"]
        for name, value in self._environment(uid).items():
            argv += ["--setenv", name, value]
        return argv + ["--chdir", WORK_DIR]

    # --- the hooks of a profile: here, a Python program ----------------------------------------------

    def _namespaces(self, **options: Any) -> list[str]:
        if self.privileged:
            return ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup",
                    "--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID",
                    "--hostname", "sandbox"]
        return ["--unshare-all", "--unshare-user", "--disable-userns", "--cap-drop", "ALL", "--hostname", "sandbox"]

    def _filesystem(self, fds: Mapping[str, int], limits: SandboxLimits, uid: int, **options: Any) -> list[str]:
        args = system_binds()
        if self.prefix is not None:
            args += parents(self.prefix) + ["--ro-bind", str(self.prefix), str(self.prefix)]
        return args + ["--proc", "/proc", "--dev", "/dev"] + work_dir(limits) + code_files(fds)

    def _environment(self, uid: int) -> dict[str, str]:
        return {"PATH": "/usr/bin:/bin", "HOME": WORK_DIR, "TMPDIR": WORK_DIR, "LANG": "C.UTF-8"}

    def _program(self, limits: SandboxLimits, uid: int) -> list[str]:
        memory = limits.memory_mb * 1024 * 1024
        return [str(self.python), "-I", "-S", "-c", LAUNCHER, str(math.ceil(limits.cpu_time_secs)), str(memory),
                str(memory), str(limits.max_processes), str(uid if self.privileged else -1), CODE_PATH]

    def _files(self, source: str, uid: int) -> dict[str, str]:
        return {CODE_PATH: source}

    def _probe(self) -> str:
        hidden = [str(p) for p in self.hidden]
        return ("import os, socket\n"
                "print(sorted(name for _, name in socket.if_nameindex()))\n"
                f"print([p for p in {hidden!r} if os.path.lexists(p)])\n")

    def _probe_problem(self, stdout: str) -> str | None:
        return None if stdout.splitlines()[:2] == ["['lo']", "[]"] else stdout.strip()

    def _check_hidden(self) -> None:
        for path in self.hidden:
            for bound in self._read_only_binds():
                if path == bound or bound in path.parents:
                    raise SandboxUnavailable(f"{path} would be visible in the sandbox (it is under {bound})")

    def _read_only_binds(self) -> list[Path]:
        binds = [Path("/usr")] + [Path("/", n) for n in MERGED_USR_LINKS if Path("/", n).is_dir()]
        return [Path(os.path.realpath(b)) for b in binds + ([self.prefix] if self.prefix else [])]


def _memfd(name: str, data: bytes) -> int:
    fd = os.memfd_create(name)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def system_binds() -> list[str]:
    """/usr read-only, and the /bin, /lib... of a merged-/usr system as their symlinks."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in MERGED_USR_LINKS:
        host = Path("/") / name
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), str(host)]
        elif host.is_dir():
            args += ["--ro-bind", str(host), str(host)]
    return args


def work_dir(limits: SandboxLimits) -> list[str]:
    """The private working directory: a tmpfs of the memory limit's size; /tmp points to it."""
    return ["--perms", "0777", "--size", str(limits.memory_mb * 1024 * 1024), "--tmpfs", WORK_DIR,
            "--symlink", WORK_DIR, "/tmp"]


def code_files(fds: Mapping[str, int]) -> list[str]:
    """Each memfd read-only at its path (its directory made traversable)."""
    args: list[str] = []
    for path, fd in fds.items():
        args += parents(Path(path)) + ["--perms", "0444", "--ro-bind-data", str(fd), path]
    return args


def _prefix_of(python: Path) -> Path | None:
    """The install to bind for ``python`` (``<prefix>/bin/pythonX.Y``); None when under /usr."""
    real = Path(os.path.realpath(python))
    prefix = real.parent.parent
    return None if prefix == Path("/usr") or Path("/usr") in prefix.parents else prefix


def parents(path: Path) -> list[str]:
    """Directories above ``path`` made traversable (bwrap would create them 0700 as root)."""
    args: list[str] = []
    for parent in reversed(path.parents):
        if parent != Path("/"):
            args += ["--perms", "0755", "--dir", str(parent)]
    return args
