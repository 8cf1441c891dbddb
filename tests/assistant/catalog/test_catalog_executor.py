"""SubprocessRunner: real shell runs with exit codes, per-stream output caps, a timeout that kills
the whole process group, and background children that do not outlive the command (POSIX shell)."""

from __future__ import annotations

import os
from pathlib import Path

from assistant.catalog import ExecutionStatus, RunOutcome, SubprocessRunner

RUNNER = SubprocessRunner()


def run(command: str, timeout: float = 20, cap: int = 65_536) -> RunOutcome:
    return RUNNER.run(command, timeout_secs=timeout, max_output_bytes=cap)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ")[-1].startswith("Z"))  # a zombie is dead


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
