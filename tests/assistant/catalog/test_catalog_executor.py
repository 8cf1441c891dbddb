"""The catalog's runners. SubprocessRunner (the unsandboxed Windows runner, run here through the
POSIX shell): exit codes, per-stream output caps, a timeout that kills the whole process group,
background children that do not outlive the command. SandboxedRunner with a fake sandbox: no
sandbox is a 503 and nothing runs, the settings' limits and the entry's network reach the sandbox,
a sandbox's end becomes an execution; and which runner each platform gets, hiding what."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from assistant.catalog import (
    ExecutionStatus,
    RunOutcome,
    SandboxedRunner,
    SubprocessRunner,
    create_runner,
    secret_paths,
)
from assistant.catalog.executor import outcome_of
from assistant.config import CommandsSettings, Settings
from assistant.errors import ServiceUnavailableError
from assistant.tools.sandbox import RunResult, RunStatus, SandboxError, SandboxLimits, SandboxUnavailable

RUNNER = SubprocessRunner()


def run(command: str, timeout: float = 20, cap: int = 65_536) -> RunOutcome:
    return RUNNER.run(command, timeout_secs=timeout, max_output_bytes=cap)


def alive(pid: int, grace_secs: float = 10.0) -> bool:
    """Whether ``pid`` still runs once a SIGKILL sent to it had ``grace_secs`` to land (a zombie is dead)."""
    deadline = time.monotonic() + grace_secs
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        stat = Path(f"/proc/{pid}/stat")
        if stat.exists() and stat.read_text().split(") ")[-1].startswith("Z"):
            return False
        if time.monotonic() > deadline:
            return True
        time.sleep(0.05)


def test_success_and_both_streams() -> None:
    outcome = run("echo out; echo err >&2")
    assert (outcome.exit_code, outcome.stdout, outcome.stderr) == (0, "out\n", "err\n")
    assert outcome.status is ExecutionStatus.COMPLETED and not outcome.timed_out and not outcome.truncated
    assert outcome.duration_ms >= 0


def test_non_zero_exit_is_failed() -> None:
    outcome = run("echo nope >&2; exit 7")
    assert outcome.exit_code == 7 and outcome.status is ExecutionStatus.FAILED and outcome.stderr == "nope\n"


def test_unknown_program_is_failed_with_the_shell_message() -> None:
    outcome = run("definitely-not-a-program-xyz")
    assert outcome.exit_code == 127 and outcome.status is ExecutionStatus.FAILED
    assert "not found" in outcome.stderr


def test_each_stream_is_capped_and_the_command_still_finishes() -> None:
    outcome = run("head -c 300000 /dev/zero | tr '\\0' o; head -c 5000 /dev/zero | tr '\\0' e >&2; exit 3",
                  cap=1000)
    assert outcome.stdout == "o" * 1000 and outcome.stderr == "e" * 1000
    assert outcome.truncated and outcome.exit_code == 3 and not outcome.timed_out


def test_output_at_the_cap_is_not_truncated() -> None:
    outcome = run("printf 1234567890", cap=10)
    assert outcome.stdout == "1234567890" and not outcome.truncated


def test_invalid_utf8_is_replaced() -> None:
    outcome = run("printf 'a\\377b'")
    assert outcome.stdout == "a\ufffdb"


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    outcome = run(f"sleep 60 & echo $! > {pid_file}; echo started; wait", timeout=1.5)
    assert outcome.timed_out and outcome.status is ExecutionStatus.TIMED_OUT and outcome.exit_code is None
    assert outcome.stdout == "started\n"
    assert not alive(int(pid_file.read_text()))


def test_a_background_child_holding_the_output_is_ended(tmp_path: Path) -> None:
    pid_file = tmp_path / "bg.pid"
    outcome = run(f"sleep 60 & echo $! > {pid_file}; echo done")
    assert outcome.exit_code == 0 and outcome.stdout == "done\n" and not outcome.timed_out
    assert not alive(int(pid_file.read_text()))


def test_stdin_is_empty() -> None:
    assert run("cat; echo end").stdout == "end\n"


def test_a_missing_working_directory_is_a_failed_run() -> None:
    outcome = SubprocessRunner(cwd="/no/such/dir").run("echo hi", timeout_secs=5, max_output_bytes=100)
    assert outcome.exit_code is None and outcome.status is ExecutionStatus.FAILED
    assert "could not start" in outcome.stderr


def test_the_host_shell_runner_accepts_and_ignores_network() -> None:
    assert RUNNER.run("echo x", timeout_secs=5, max_output_bytes=10, network=True).stdout == "x\n"


# --- the sandboxed runner, with a fake sandbox --------------------------------------------------------

LIMITS = SandboxLimits(cpu_time_secs=4, wall_time_secs=99, memory_mb=64, max_output_bytes=99, max_processes=9)


class FakeSandbox:
    """A ShellSandbox that runs nothing: records checks and runs, answers with queued results."""

    def __init__(self, *results: RunResult | Exception, broken: str | None = None):
        self.limits = LIMITS
        self.results = list(results)
        self.broken = broken
        self.checks = 0
        self.runs: list[tuple[str, SandboxLimits, bool]] = []

    def check(self) -> None:
        self.checks += 1
        if self.broken:
            raise SandboxUnavailable(self.broken)

    def run(self, command: str, *, limits: SandboxLimits, network: bool = False) -> RunResult:
        self.runs.append((command, limits, network))
        answer = self.results.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def ended(status: RunStatus, exit_code: int | None = 0, stderr: str = "", message: str = "finished",
          truncated: bool = False) -> RunResult:
    return RunResult(status, exit_code, None, "out\n", stderr, truncated, False, 21, message)


def test_without_a_sandbox_nothing_runs_and_it_is_a_503() -> None:
    sandbox = FakeSandbox(broken="bubblewrap (bwrap) is not installed")
    runner = SandboxedRunner(sandbox)  # type: ignore[arg-type]
    for _ in range(2):  # checked again each time: installing bwrap needs no restart
        with pytest.raises(ServiceUnavailableError, match="bwrap.*not installed.*never run unsandboxed") as caught:
            runner.run("uptime", timeout_secs=5, max_output_bytes=100)
        assert caught.value.code == "SERVICE_UNAVAILABLE"
        assert caught.value.details == {"reason": "bubblewrap (bwrap) is not installed"}
    assert sandbox.checks == 2 and sandbox.runs == []


def test_a_sandbox_that_fails_to_start_is_a_503() -> None:
    runner = SandboxedRunner(FakeSandbox(SandboxError("the sandbox failed to start: no namespaces")))  # type: ignore[arg-type]
    with pytest.raises(ServiceUnavailableError, match="no namespaces"):
        runner.run("uptime", timeout_secs=5, max_output_bytes=100)


def test_the_limits_and_the_network_reach_the_sandbox_which_is_checked_once() -> None:
    sandbox = FakeSandbox(ended(RunStatus.OK), ended(RunStatus.OK))
    runner = SandboxedRunner(sandbox)  # type: ignore[arg-type]
    runner.run("df -h", timeout_secs=7, max_output_bytes=512)
    runner.run("curl -s example.org", timeout_secs=3, max_output_bytes=256, network=True)
    assert sandbox.checks == 1
    (first, limits, network), (_, second_limits, second_network) = sandbox.runs
    assert (first, network, second_network) == ("df -h", False, True)
    assert (limits.wall_time_secs, limits.max_output_bytes, second_limits.max_output_bytes) == (7, 512, 256)
    assert (limits.cpu_time_secs, limits.memory_mb, limits.max_processes) == (4, 64, 9)  # from the settings


@pytest.mark.parametrize(("result", "status", "exit_code", "note"), [
    (ended(RunStatus.OK), ExecutionStatus.COMPLETED, 0, None),
    (ended(RunStatus.ERROR, 3, "boom\n", "exited with code 3"), ExecutionStatus.FAILED, 3, None),
    (ended(RunStatus.TIMEOUT, None, message="stopped: still running"), ExecutionStatus.TIMED_OUT, None, None),
    (ended(RunStatus.CPU_LIMIT, None, "x", "stopped: used up the CPU-time limit of 4 s"), ExecutionStatus.FAILED,
     None, "x\n[sandbox] stopped: used up the CPU-time limit of 4 s\n"),
    (ended(RunStatus.MEMORY_LIMIT, 2, "", "stopped: needed more than 64 MB"), ExecutionStatus.FAILED, 2,
     "[sandbox] stopped: needed more than 64 MB\n"),
])
def test_how_a_sandbox_run_ended_becomes_an_execution(result: RunResult, status: ExecutionStatus,
                                                      exit_code: int | None, note: str | None) -> None:
    outcome = outcome_of(result)
    assert (outcome.status, outcome.exit_code, outcome.stdout, outcome.duration_ms) == (status, exit_code, "out\n", 21)
    assert outcome.stderr == (note if note is not None else result.stderr)


def test_truncation_is_kept() -> None:
    assert outcome_of(ended(RunStatus.OK, truncated=True)).truncated is True


# --- which runner, hiding what ------------------------------------------------------------------------


def test_windows_keeps_the_host_shell_and_everything_else_gets_the_sandbox(tmp_path: Path) -> None:
    settings = CommandsSettings(execution_timeout_secs=12, max_output_bytes=1000, cpu_time_secs=2, memory_mb=256,
                                max_processes=16, hidden_paths=[tmp_path / "extra"])
    assert isinstance(create_runner(settings, platform="nt"), SubprocessRunner)
    runner = create_runner(settings, [tmp_path / "data"], platform="posix")
    assert isinstance(runner, SandboxedRunner)
    assert runner.sandbox.limits == SandboxLimits(2, 12, 256, 1000, 16)
    assert set(runner.sandbox.hidden) == {tmp_path / "data", tmp_path / "extra"}


def test_secret_paths_are_the_data_dir_key_home_and_config(make_settings: Callable[..., Settings],
                                                           tmp_path: Path) -> None:
    settings = make_settings(memory={"encryption_key_path": "/srv/keys/memory.key"})
    paths = secret_paths(settings, tmp_path / "config.toml")
    assert paths == (settings.data_dir, Path("/srv/keys/memory.key"), Path.home(), tmp_path / "config.toml")
    relative = secret_paths(make_settings())
    assert relative[1] == relative[0] / "memory.key" and len(relative) == 3
