"""ShellSandbox's bubblewrap command line, built and not run (the real sandbox runs in
tests/integration/test_catalog_sandbox_real.py): what is bound, what is covered, what is never
there, the network switch, the launcher's limits and uid, and the checks before a first run."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from assistant.tools.sandbox import BubblewrapRunner, SandboxLimits, SandboxUnavailable
from assistant.tools.shell_sandbox import ETC_SECRETS, HOST_SERVICES, SCRIPT_PATH, ShellSandbox, cover

LIMITS = SandboxLimits(cpu_time_secs=3, wall_time_secs=10, memory_mb=128, max_output_bytes=4096, max_processes=32)
FDS = {SCRIPT_PATH: 7, "/etc/passwd": 8, "/etc/group": 9}
UID = 1_000_000_321


def argv_of(sandbox: ShellSandbox, **options: object) -> list[str]:
    return sandbox.command(FDS, 5, UID, **options)


def binds(argv: list[str]) -> list[tuple[str, str, str]]:
    """(kind, source, destination) of every bind of a command line."""
    return [(a, argv[i + 1], argv[i + 2]) for i, a in enumerate(argv) if a in ("--ro-bind", "--bind", "--dev-bind")]


def test_only_the_system_is_bound_read_only() -> None:
    argv = argv_of(ShellSandbox(LIMITS, bwrap="/usr/bin/bwrap"))
    found = binds(argv)
    assert all(kind == "--ro-bind" for kind, _, _ in found)  # nothing writable from the host
    sources = {src for _, src, _ in found}
    assert {"/usr", "/etc", "/sys"} <= sources
    allowed = {"/usr", "/etc", "/sys", "/dev/null", "/var/log/wtmp", "/run/utmp", "/run/systemd/resolve"}
    assert sources <= allowed
    for never in (str(Path.home()), sys.prefix, sys.base_prefix, os.getcwd(), "/var", "/root", "/home", "/"):
        assert never not in sources
    assert ("--proc", "/proc") in zip(argv, argv[1:], strict=False)  # the sandbox's own pid namespace
    assert "--unshare-pid" in argv and "--unshare-net" in argv and "--clearenv" in argv
    assert "--unshare-uts" not in argv and "--hostname" not in argv  # `hostname` names the machine


def test_the_working_directory_is_a_private_tmpfs_and_home() -> None:
    argv = argv_of(ShellSandbox(LIMITS, bwrap="bwrap"))
    work = argv.index("/work")
    assert argv[work - 3:work] == ["--size", str(128 * 2**20), "--tmpfs"] and argv[argv.index("--chdir") + 1] == "/work"
    env = {argv[i + 1]: argv[i + 2] for i, a in enumerate(argv) if a == "--setenv"}
    assert env["HOME"] == env["TMPDIR"] == "/work" and env["USER"] == "sandbox"
    assert set(env) == {"PATH", "HOME", "TMPDIR", "LANG", "USER", "LOGNAME"}  # nothing of the server's


def test_secrets_of_etc_are_covered_and_passwd_is_replaced() -> None:
    argv = argv_of(ShellSandbox(LIMITS, bwrap="bwrap"))
    etc = argv.index("/etc")
    for name in ETC_SECRETS:
        path = Path("/etc", name)
        if path.is_dir():
            assert argv[argv.index(str(path)) - 1] == "--tmpfs" and argv.index(str(path)) > etc
        elif path.exists():
            assert ("--ro-bind", "/dev/null", str(path)) in binds(argv)
    data = {argv[i + 2]: argv[i + 1] for i, a in enumerate(argv) if a == "--ro-bind-data"}
    assert data == {"/etc/passwd": "8", "/etc/group": "9", SCRIPT_PATH: "7"}
    files = ShellSandbox(LIMITS)._files("uptime", UID)
    assert files[SCRIPT_PATH] == "uptime"
    user = next(line for line in files["/etc/passwd"].splitlines() if line.startswith("sandbox:"))
    expected = UID if os.geteuid() == 0 else os.getuid()
    assert user.split(":")[2:4] == [str(expected), str(expected if os.geteuid() == 0 else os.getgid())]


def test_hidden_paths_under_a_bind_are_covered_after_it() -> None:
    hidden_file, hidden_dir = Path("/etc/hostname"), Path("/etc/apt")  # stand-ins for a config under /etc
    argv = argv_of(ShellSandbox(LIMITS, hidden=[hidden_file, hidden_dir, "/tmp/not-under-a-bind"]))
    assert ("--ro-bind", "/dev/null", str(hidden_file)) in binds(argv)
    assert argv[argv.index(str(hidden_dir)) - 1] == "--tmpfs"
    assert argv.index(str(hidden_dir)) > argv.index("/etc")
    assert "/tmp/not-under-a-bind" not in argv  # never mounted: nothing to cover


def test_cover_skips_what_does_not_exist(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("secret")
    assert cover([tmp_path, tmp_path / "file", tmp_path / "missing"]) == [
        "--tmpfs", str(tmp_path), "--ro-bind", "/dev/null", str(tmp_path / "file")]


def test_the_network_is_shared_only_when_asked() -> None:
    sandbox = ShellSandbox(LIMITS)
    offline, online = argv_of(sandbox), argv_of(sandbox, network=True)
    assert "--unshare-net" in offline and "--unshare-net" not in online
    for service in HOST_SERVICES:
        assert service not in offline
        assert (service in online) == Path(service).exists()


def test_the_launcher_sets_the_limits_and_drops_root() -> None:
    sandbox = ShellSandbox(LIMITS, setpriv="/usr/bin/setpriv", prlimit="/usr/bin/prlimit")
    argv = argv_of(sandbox)
    program = argv[argv.index("--chdir") + 2:]
    limits = ["/usr/bin/prlimit", "--cpu=3:4", f"--as={128 * 2**20}", f"--fsize={128 * 2**20}", "--nproc=32",
              "--core=0", "--", "/bin/sh", SCRIPT_PATH]
    if sandbox.privileged:
        assert program == ["/usr/bin/setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups", "--", *limits]
        assert argv[argv.index("--cap-drop") + 1] == "ALL"
        assert [argv[i + 1] for i, a in enumerate(argv) if a == "--cap-add"] == ["CAP_SETUID", "CAP_SETGID"]
    else:
        assert program == limits and "--unshare-user" in argv and "--disable-userns" in argv


def test_a_missing_bwrap_or_launcher_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SandboxUnavailable, match="bubblewrap .* is not installed"):
        ShellSandbox(LIMITS, bwrap=str(tmp_path / "no-bwrap")).check()
    with pytest.raises(SandboxUnavailable, match="util-linux's .*prlimit is not installed"):
        ShellSandbox(LIMITS, prlimit=str(tmp_path / "prlimit")).check()


@pytest.mark.parametrize("hidden", ["/", "/etc", "/usr/../etc"])
def test_a_hidden_path_that_holds_the_system_is_refused(hidden: str) -> None:
    with pytest.raises(SandboxUnavailable, match="cannot be hidden"):
        ShellSandbox(LIMITS, bwrap="/bin/true", hidden=[hidden]).check()


def test_the_probe_must_show_only_lo_no_root_and_nothing_hidden() -> None:
    sandbox = ShellSandbox(LIMITS)
    assert sandbox._probe_problem("lo \n1000000001\n") is None
    assert "expected only lo" in sandbox._probe_problem("lo eth0 \n1000000001\n")
    assert sandbox._probe_problem("lo \n1\nvisible: /etc/assistant\n") == "visible: /etc/assistant"
    if sandbox.privileged:
        assert sandbox._probe_problem("lo \n0\n") == "the command runs as root"


def test_the_catalog_and_the_code_tool_never_share_a_uid_at_once() -> None:
    code, shell = BubblewrapRunner(LIMITS), ShellSandbox(LIMITS)
    with code.uids.lease() as first, shell.uids.lease() as second, shell.uids.lease() as third:
        assert len({first, second, third}) == 3
