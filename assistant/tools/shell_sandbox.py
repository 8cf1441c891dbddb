"""A shell command in the bubblewrap sandbox: the profile the command catalog runs under.

It is :class:`~assistant.tools.sandbox.BubblewrapRunner` (same start, watch, whole-sandbox kill, spare
uid and classification) with a host view made for system-information commands (``df``, ``free``,
``uptime``, ``ps``, ``uname``, ``cat /etc/os-release``...), each point checked by experiment on
Debian bookworm (bubblewrap 0.8):

- Read-only: ``/usr`` (and the merged-/usr links), ``/etc`` minus its secrets (:data:`ETC_SECRETS`
  are covered by an empty tmpfs or ``/dev/null``; ``/etc/passwd`` and ``/etc/group`` are replaced by
  three-line files naming the sandbox's user), ``/sys``, and the login records and resolver state
  ``last``, ``uptime`` and a systemd ``resolv.conf`` read (:data:`HOST_VIEWS`). ``/proc`` is the
  sandbox's own pid namespace: the server's ``/proc/<pid>/environ`` does not exist in there, and
  bwrap itself (the sandbox's pid 1) is started with an empty environment.
- Not there at all: the home directory, the data directory, the key file, the config file, the
  venv, ``/var``, ``/srv``, ``/opt``... ``hidden`` paths that would fall under a read-only bind (a
  config in ``/etc/assistant``) are covered like the secrets; :meth:`check` refuses a hidden path
  that contains a bind and verifies, from inside, that every hidden path is absent or empty.
- The working directory and ``HOME`` are ``/work``, a size-limited tmpfs private to the run
  (``/tmp`` points to it).
- No network (a new network namespace with only ``lo``) unless the run asks for it: then the host's
  network namespace and the system D-Bus socket (``systemctl``, ``resolvectl``: polkit still decides
  what the sandbox's unprivileged user may do).
- The host name stays the host's (``hostname``, ``uname -a`` report the machine, not the sandbox).
- No Python: the launcher is util-linux's ``setpriv`` (as root: drop to the spare uid, no groups)
  and ``prlimit`` (RLIMIT_CPU, AS, FSIZE, NPROC, no core), which then run ``/bin/sh`` on the command,
  a read-only file ``/code/command.sh``. So the interpreter's install (under ``/root`` with pyenv)
  is not bound either.
- Output past the cap is read and dropped (the command finishes; ``truncated`` says so), not a
  reason to kill.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from assistant.tools.sandbox import (
    MERGED_USR_LINKS,
    WORK_DIR,
    BubblewrapRunner,
    RunResult,
    SandboxLimits,
    SandboxUnavailable,
    code_files,
    parents,
    system_binds,
    work_dir,
)

SCRIPT_PATH = "/code/command.sh"
SANDBOX_USER = "sandbox"
SHELL_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# under /etc: what holds passwords, private keys or this service's own settings
ETC_SECRETS = ("shadow", "shadow-", "gshadow", "gshadow-", "sudoers", "sudoers.d", "ssh", "ssl/private",
               "security/opasswd", "krb5.keytab", "assistant")
HOST_VIEWS = ("/var/log/wtmp", "/run/utmp", "/run/systemd/resolve")  # read by last, uptime, resolv.conf
HOST_SERVICES = ("/run/dbus/system_bus_socket", "/run/systemd/system")  # with network: systemctl
BOUND_TREES = ("/usr", "/etc", "/sys", *HOST_VIEWS, *HOST_SERVICES)


class ShellSandbox(BubblewrapRunner):
    """Runs ``/bin/sh`` on one command in a fresh sandbox; see the module docstring."""

    drain_output = True

    def __init__(self, limits: SandboxLimits, *, bwrap: str = "bwrap", hidden: Iterable[Path | str] = (),
                 setpriv: str = "setpriv", prlimit: str = "prlimit"):
        super().__init__(limits, bwrap=bwrap, python="/usr/bin/false", hidden=hidden)
        self.prefix = None  # no interpreter runs inside
        self.setpriv = setpriv
        self.prlimit = prlimit

    def run(self, command: str, *, limits: SandboxLimits | None = None, network: bool = False) -> RunResult:  # type: ignore[override]
        """Run ``command`` with ``limits`` (default: the runner's); SandboxError if it cannot start."""
        return self._execute(command, limits or self.limits, network=network)

    def check(self) -> None:
        for attr, needed in (("setpriv", self.privileged), ("prlimit", True)):
            if needed:
                binary = shutil.which(getattr(self, attr))
                if binary is None:
                    raise SandboxUnavailable(f"util-linux's {getattr(self, attr)} is not installed")
                setattr(self, attr, binary)
        super().check()

    # --- the profile ---------------------------------------------------------------------------------

    def _namespaces(self, *, network: bool = False, **options: Any) -> list[str]:
        net = [] if network else ["--unshare-net"]
        if self.privileged:
            return net + ["--unshare-pid", "--unshare-ipc", "--unshare-cgroup", "--cap-drop", "ALL",
                          "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        return net + ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-cgroup-try",
                      "--disable-userns", "--cap-drop", "ALL"]

    def _filesystem(self, fds: Mapping[str, int], limits: SandboxLimits, uid: int, *, network: bool = False,
                    **options: Any) -> list[str]:
        args = system_binds() + ["--ro-bind", "/etc", "/etc"]
        args += [*cover(Path("/etc", name) for name in ETC_SECRETS)]
        for path in ("/etc/passwd", "/etc/group"):
            args += ["--perms", "0444", "--ro-bind-data", str(fds[path]), path]
        for view in HOST_VIEWS + (HOST_SERVICES if network else ()):
            if Path(view).exists():
                args += parents(Path(view)) + ["--ro-bind", view, view]
        args += ["--proc", "/proc", "--dev", "/dev", "--ro-bind", "/sys", "/sys"]
        args += work_dir(limits) + code_files({SCRIPT_PATH: fds[SCRIPT_PATH]})
        return args + cover(self._covered())

    def _environment(self, uid: int) -> dict[str, str]:
        return {"PATH": SHELL_PATH, "HOME": WORK_DIR, "TMPDIR": WORK_DIR, "LANG": "C.UTF-8",
                "USER": SANDBOX_USER, "LOGNAME": SANDBOX_USER}

    def _program(self, limits: SandboxLimits, uid: int) -> list[str]:
        memory = limits.memory_mb * 1024 * 1024
        cpu = max(int(limits.cpu_time_secs + 0.999), 1)
        drop = [self.setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"] if self.privileged else []
        return drop + [self.prlimit, f"--cpu={cpu}:{cpu + 1}", f"--as={memory}", f"--fsize={memory}",
                       f"--nproc={limits.max_processes}", "--core=0", "--", "/bin/sh", SCRIPT_PATH]

    def _files(self, source: str, uid: int) -> dict[str, str]:
        uid, gid = (uid, uid) if self.privileged else (os.getuid(), os.getgid())
        passwd = (f"root:x:0:0:root:/root:/usr/sbin/nologin\n"
                  f"{SANDBOX_USER}:x:{uid}:{gid}:catalog command sandbox:{WORK_DIR}:/usr/sbin/nologin\n"
                  f"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
        group = f"root:x:0:\n{SANDBOX_USER}:x:{gid}:\nnogroup:x:65534:\n"
        return {SCRIPT_PATH: source, "/etc/passwd": passwd, "/etc/group": group}

    def _probe(self) -> str:
        hidden = " ".join(shlex.quote(str(p)) for p in self.hidden)
        return ("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ' '; echo\n"
                "id -u\n"
                f"for p in {hidden}; do\n"
                '  if [ -d "$p" ]; then [ -z "$(ls -A "$p" 2>/dev/null)" ] || echo "visible: $p"\n'
                '  elif [ -s "$p" ]; then echo "visible: $p"; fi\n'
                "done\n")

    def _probe_problem(self, stdout: str) -> str | None:
        lines = stdout.splitlines()
        if not lines or lines[0].split() != ["lo"]:
            return f"network interfaces {lines[:1]} (expected only lo)"
        if self.privileged and lines[1:2] == ["0"]:
            return "the command runs as root"
        visible = [line for line in lines[2:] if line.startswith("visible: ")]
        return "; ".join(visible) or None

    def _check_hidden(self) -> None:
        """A hidden path may lie under a bind (it is covered) but never contain one."""
        for path in self.hidden:
            for tree in self._read_only_binds():
                if path == tree or path in tree.parents:
                    raise SandboxUnavailable(f"{path} cannot be hidden: the sandbox needs {tree} inside it")

    def _read_only_binds(self) -> list[Path]:
        binds = [Path(t) for t in BOUND_TREES] + [Path("/", n) for n in MERGED_USR_LINKS if Path("/", n).is_dir()]
        return [Path(os.path.realpath(b)) for b in binds]

    def _covered(self) -> list[Path]:
        """The hidden paths that a read-only bind would otherwise show."""
        trees = self._read_only_binds()
        return [p for p in self.hidden if any(tree in p.parents for tree in trees)]


def cover(paths: Iterable[Path]) -> list[str]:
    """Mount an empty tmpfs over each existing directory and /dev/null over each existing file."""
    args: list[str] = []
    for path in paths:
        if path.is_dir():
            args += ["--tmpfs", str(path)]
        elif path.exists():
            args += ["--ro-bind", "/dev/null", str(path)]
    return args

