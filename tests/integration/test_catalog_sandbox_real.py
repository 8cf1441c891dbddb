"""The catalog's runner as the server builds it (create_runner over secret_paths), on the real
bubblewrap: every Linux default entry runs and says something true about the host, the network
is there only when asked, the limits stop a CPU burner, a memory hog and a fork bomb, a long
listing keeps its head and still finishes, and nothing of the data directory, the key file, the
config file or the home directory is there. No test asserts a duration."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from assistant.catalog import (
    DEFAULT_ENTRIES,
    ExecutionStatus,
    RunOutcome,
    SandboxedRunner,
    TargetOs,
    create_runner,
    secret_paths,
)
from assistant.config import Settings
from assistant.crypto import load_or_create_key
from assistant.tools.shell_sandbox import SCRIPT_PATH
from tests.integration.tools.sandbox_server import (  # noqa: F401
    HostListener,
    host_listener_fixture,
    sandboxed_pids,
)

pytestmark = [pytest.mark.integration, pytest.mark.skipif(os.name != "posix", reason="bubblewrap is Linux only")]

SECRET = "catalog-sandbox-secret-9f3a"


@pytest.fixture
def settings(make_settings: Callable[..., Settings], tmp_path: Path) -> Settings:
    """Settings whose data directory holds a real key file and a database-like file."""
    settings = make_settings(commands={"execution_timeout_secs": 20, "max_output_bytes": 8192, "cpu_time_secs": 2,
                                       "memory_mb": 128, "max_processes": 16})
    settings.data_dir.mkdir(parents=True)
    load_or_create_key(settings.data_dir / "memory.key")
    (settings.data_dir / "assistant.db").write_text(SECRET)
    (tmp_path / "config.toml").write_text(f'api_keys = ["{SECRET}"]\n')
    return settings


@pytest.fixture
def runner(settings: Settings, tmp_path: Path) -> SandboxedRunner:
    runner = create_runner(settings.commands, secret_paths(settings, tmp_path / "config.toml"))
    assert isinstance(runner, SandboxedRunner)
    return runner


def run(runner: SandboxedRunner, command: str, **options: object) -> RunOutcome:
    return runner.run(command, timeout_secs=options.pop("timeout_secs", 20),  # type: ignore[arg-type]
                      max_output_bytes=options.pop("max_output_bytes", 8192), **options)  # type: ignore[arg-type]


LINUX_DEFAULTS = {e.command: e for e in DEFAULT_ENTRIES if e.os in (TargetOs.LINUX, TargetOs.ANY)}


def test_every_linux_default_entry_was_checked() -> None:
    assert set(LINUX_DEFAULTS) == set(EXPECTED) | set(HOST_DEPENDENT)


def _has(*needles: str) -> Callable[[RunOutcome], bool]:
    return lambda outcome: all(n in outcome.stdout for n in needles)


# command -> what its output must show, run in the sandbox
EXPECTED: dict[str, Callable[[RunOutcome], bool]] = {
    "whoami": lambda o: o.stdout == "sandbox\n",
    "hostname": lambda o: o.stdout.strip() == socket.gethostname(),  # the machine's name, not the sandbox's
    "df -h": _has("Filesystem", "/usr", "/work"),
    "uptime": _has("up ", "load average"),
    "free -h": _has("Mem:", "Swap:"),
    "ip -brief address": _has("lo", "127.0.0.1"),
    "ss -tuln": _has("Netid", "Local Address"),
    "ps aux --sort=-%cpu | head -n 16": _has("USER", "PID", "ps aux"),
    "uname -a": lambda o: o.stdout.startswith(f"{os.uname().sysname} {os.uname().nodename} {os.uname().release}"),
    "cat /etc/resolv.conf": lambda o: o.stdout == Path("/etc/resolv.conf").read_text(),
    "cat /etc/os-release": lambda o: o.stdout == Path("/etc/os-release").read_text(),
    "last -n 10": _has("wtmp begins"),
}
# commands whose success depends on the host (systemd, resolvectl installed): same verdict as on it
HOST_DEPENDENT = ("systemctl --failed --no-pager", "systemctl list-units --type=service --state=running --no-pager",
                  "resolvectl flush-caches")


@pytest.mark.parametrize("command", sorted(EXPECTED))
def test_a_default_entry_runs_and_tells_the_truth(runner: SandboxedRunner, command: str) -> None:
    outcome = run(runner, command, network=LINUX_DEFAULTS[command].network)
    assert outcome.status is ExecutionStatus.COMPLETED, (outcome.exit_code, outcome.stderr)
    assert EXPECTED[command](outcome), outcome.stdout


def test_the_host_network_entries_see_the_hosts_interfaces(runner: SandboxedRunner) -> None:
    host = {line.split(":")[0].strip() for line in Path("/proc/net/dev").read_text().splitlines()[2:]}
    shown = {line.split()[0].split("@")[0] for line in run(runner, "ip -brief address", network=True).stdout.splitlines()}
    assert shown == host and LINUX_DEFAULTS["ip -brief address"].network and LINUX_DEFAULTS["ss -tuln"].network


@pytest.mark.parametrize("command", HOST_DEPENDENT)
def test_a_host_dependent_entry_fails_only_where_the_host_lacks_it(runner: SandboxedRunner, command: str) -> None:
    outcome = run(runner, command, network=LINUX_DEFAULTS[command].network)
    program = command.split()[0]
    if not any(Path(d, program).exists() for d in ("/usr/bin", "/usr/sbin")):
        assert outcome.exit_code == 127 and "not found" in outcome.stderr
    elif not Path("/run/systemd/system").exists():  # no systemd here: it says so
        assert outcome.exit_code != 0 and "systemd" in outcome.stderr
    else:
        assert outcome.stderr and outcome.exit_code is not None  # polkit decides; never a sandbox failure


def test_the_network_is_there_only_when_the_entry_allows_it(runner: SandboxedRunner,
                                                             host_listener: HostListener) -> None:
    connect = f"exec 3<>/dev/tcp/127.0.0.1/{host_listener.port} && head -n 1 <&3"
    offline = run(runner, f"bash -c '{connect}'")
    assert offline.status is ExecutionStatus.FAILED and "Connection refused" in offline.stderr
    assert host_listener.accepted == []
    interfaces = run(runner, "ip -brief address").stdout.split()
    assert interfaces[0] == "lo" and "eth0" not in interfaces
    online = run(runner, f"bash -c '{connect}'", network=True)
    assert online.stdout == "hello from the host\n" and len(host_listener.accepted) == 1


def test_nothing_of_the_service_is_there(runner: SandboxedRunner, settings: Settings, tmp_path: Path) -> None:
    targets = [settings.data_dir / "memory.key", settings.data_dir / "assistant.db", tmp_path / "config.toml",
               settings.data_dir, Path.home(), Path(sys.prefix), Path("/proc", str(os.getpid()), "environ")]
    outcome = run(runner, "; ".join(f"cat {t}; ls -A {t}" for t in targets))
    key = (settings.data_dir / "memory.key").read_bytes()
    assert SECRET not in outcome.stdout and key.hex() not in outcome.stdout and outcome.stdout == ""
    assert outcome.stderr.count("No such file or directory") == 2 * len(targets)
    system = run(runner, "cat /etc/shadow; find /etc/ssh /etc/ssl/private -mindepth 1 | wc -l; cut -d: -f1 /etc/passwd")
    assert system.stdout.split() == ["0", "root", "sandbox", "nobody"]  # /etc/shadow: /dev/null, unreadable


def test_limits_stop_a_cpu_burner_a_memory_hog_and_a_fork_bomb(runner: SandboxedRunner) -> None:
    burner = run(runner, "while :; do :; done")
    assert burner.status is ExecutionStatus.FAILED and "CPU-time limit of 2 s" in burner.stderr
    stream = run(runner, "head -c 400000000 /dev/zero | tail -c 1 | wc -c")
    assert stream.status is ExecutionStatus.COMPLETED and stream.stdout == "1\n"  # streaming fits in 128 MB
    hog = run(runner, "head -c 400000000 /dev/zero | tr '\\0' x | fold -w 300000000 > /dev/null")  # one 300 MB line
    assert hog.status is ExecutionStatus.FAILED and "memory limit of 128 MB" in hog.stderr
    bomb = run(runner, "bomb() { bomb | bomb & }; bomb; sleep 1; echo survived", timeout_secs=10)
    assert bomb.status in (ExecutionStatus.COMPLETED, ExecutionStatus.FAILED, ExecutionStatus.TIMED_OUT)
    assert "fork" in bomb.stderr.lower() or "resource temporarily unavailable" in bomb.stderr.lower()
    assert run(runner, "echo alive").stdout == "alive\n"  # the host and the runner are fine


def test_a_long_listing_keeps_its_head_and_finishes(runner: SandboxedRunner) -> None:
    outcome = run(runner, "seq 1 200000; echo done >&2", max_output_bytes=1000)
    assert outcome.status is ExecutionStatus.COMPLETED and outcome.truncated
    assert outcome.stdout.startswith("1\n2\n3\n") and len(outcome.stdout) == 1000 and outcome.stderr == "done\n"


def test_a_timeout_kills_the_command_and_what_it_started(runner: SandboxedRunner) -> None:
    outcome = run(runner, "sleep 60 & sleep 61 & echo started; wait", timeout_secs=1.5)
    assert outcome.status is ExecutionStatus.TIMED_OUT and outcome.stdout == "started\n"
    assert sandboxed_pids(runner.sandbox, SCRIPT_PATH) == []
