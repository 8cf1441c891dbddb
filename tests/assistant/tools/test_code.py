"""execute_code with a fake runner: the result shown to the model, the capability's set-up, how a
run's end is classified, and the bubblewrap command line (built, not run; the real sandbox is
tested in tests/integration/tools/test_sandbox_real.py)."""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

from assistant.errors import ConfigError
from assistant.tools import code
from assistant.tools.base import CapabilityDeps, CapabilityUnavailable, ToolContext, ToolError
from assistant.tools.catalog import build_toolbox
from assistant.tools.sandbox import (
    BubblewrapRunner,
    Ending,
    RunResult,
    RunStatus,
    SandboxError,
    SandboxLimits,
    SandboxUnavailable,
    UidPool,
    classify,
)

LIMITS = SandboxLimits(cpu_time_secs=5, wall_time_secs=10, memory_mb=256, max_output_bytes=65_536, max_processes=8)


def result(status: RunStatus = RunStatus.OK, stdout: str = "", stderr: str = "", exit_code: int | None = 0,
           message: str = "finished", truncated: bool = False) -> RunResult:
    return RunResult(status, exit_code, None, stdout, stderr, truncated, False, 12, message)


class FakeRunner:
    """A CodeRunner that runs nothing: it records the programs and answers with queued results."""

    def __init__(self, *results: RunResult | Exception):
        self.results = list(results)
        self.programs: list[str] = []

    def run(self, program: str) -> RunResult:
        self.programs.append(program)
        answer = self.results.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def call(runner: FakeRunner, program: str) -> dict:
    return code.execute_code(ToolContext("u1", {"code_execution": runner}), {"code": program})


# --- the tool ---------------------------------------------------------------------------------------


def test_the_model_gets_status_streams_and_exit_code() -> None:
    runner = FakeRunner(result(stdout="285\n"))
    assert call(runner, "print(sum(i * i for i in range(10)))") == {
        "status": "ok", "stdout": "285\n", "stderr": "", "exit_code": 0, "duration_ms": 12,
        "truncated": False, "message": "finished"}
    assert runner.programs == ["print(sum(i * i for i in range(10)))"]


def test_a_failing_program_is_a_result_not_a_tool_error() -> None:
    trace = 'Traceback (most recent call last):\n  File "/code/main.py", line 1\nZeroDivisionError: division by zero\n'
    runner = FakeRunner(result(RunStatus.ERROR, stderr=trace, exit_code=1, message="exited with code 1; see stderr"),
                        result(RunStatus.TIMEOUT, exit_code=None, message="stopped: still running after 10 s"))
    failed = call(runner, "1/0")
    assert failed["status"] == "error" and failed["exit_code"] == 1 and failed["stderr"] == trace
    timed_out = call(runner, "while True: pass")
    assert timed_out["status"] == "timeout" and timed_out["exit_code"] is None


def test_silence_is_pointed_out() -> None:
    assert "use print()" in call(FakeRunner(result()), "x = 6 * 7")["message"]


def test_long_streams_are_clipped_for_the_model() -> None:
    stdout = "".join(f"line {i}\n" for i in range(2000))
    stderr = "noise\n" * 1000 + "ValueError: the last line matters\n"
    answer = call(FakeRunner(result(RunStatus.ERROR, stdout=stdout, stderr=stderr, exit_code=1)), "...")
    assert answer["truncated"] is True
    assert answer["stdout"].startswith("line 0\n") and len(answer["stdout"]) < code.STDOUT_CHARS + 20
    assert answer["stderr"].endswith("ValueError: the last line matters\n")
    assert len(answer["stderr"]) < code.STDERR_CHARS + 20
    assert call(FakeRunner(result(stdout="x", truncated=True)), "...")["truncated"] is True


def test_a_markdown_fence_around_the_program_is_removed() -> None:
    runner = FakeRunner(result(stdout="4\n"), result(stdout="4\n"))
    call(runner, "```python\nprint(2 + 2)\n```")
    call(runner, "print('```')")
    assert runner.programs == ["print(2 + 2)\n", "print('```')"]


def test_a_sandbox_that_cannot_start_is_a_tool_error() -> None:
    with pytest.raises(ToolError, match="could not start: the sandbox failed to start: bwrap: no"):
        call(FakeRunner(SandboxError("the sandbox failed to start: bwrap: no")), "print(1)")


def test_arguments_are_checked() -> None:
    for bad in ({"code": ""}, {"code": "x" * (code.MAX_CODE_CHARS + 1)}, {"program": "print(1)"}):
        with pytest.raises(ToolError, match="invalid arguments for execute_code"):
            code.execute_code(ToolContext("u1", {"code_execution": FakeRunner()}), bad)


def test_the_description_says_what_it_is_for() -> None:
    spec = code.execute_code.spec
    assert spec.name == "execute_code" and code.execute_code.capability == "code_execution"
    assert "calculations" in spec.description and "print()" in spec.description
    assert spec.parameters["required"] == ["code"]


# --- the capability ---------------------------------------------------------------------------------


def test_the_capability_builds_the_runner_from_settings(make_settings, monkeypatch) -> None:
    settings = make_settings(code_execution={"cpu_time_secs": 2, "memory_mb": 64, "max_processes": 3},
                             memory={"encryption_key_path": "/srv/keys/memory.key"})
    made: list[tuple[SandboxLimits, tuple[Path, ...]]] = []

    def factory(limits: SandboxLimits, hidden: Iterable[Path]) -> FakeRunner:
        made.append((limits, tuple(hidden)))
        return FakeRunner(result(stdout="ok\n"))

    monkeypatch.setitem(code.BACKENDS, "sandbox", factory)
    toolbox = build_toolbox(CapabilityDeps(settings, data_dir=settings.data_dir), [code.CAPABILITY])
    assert toolbox.registry.names() == ["execute_code"]
    limits, hidden = made[0]
    assert (limits.cpu_time_secs, limits.memory_mb, limits.max_processes) == (2, 64, 3)
    assert hidden == (settings.data_dir, Path("/srv/keys/memory.key"))
    tool = toolbox.registry.get("execute_code")
    assert tool(toolbox.context("u1"), {"code": "print('ok')"})["stdout"] == "ok\n"


def test_the_default_key_file_lives_in_the_data_directory(make_settings) -> None:
    settings = make_settings()
    assert code.hidden_paths(CapabilityDeps(settings)) == (settings.data_dir, settings.data_dir / "memory.key")


def test_no_sandbox_means_no_tool(make_settings, monkeypatch) -> None:
    def unavailable(limits: SandboxLimits, hidden: Iterable[Path]) -> FakeRunner:
        raise SandboxUnavailable("bubblewrap (bwrap) is not installed")

    monkeypatch.setitem(code.BACKENDS, "sandbox", unavailable)
    deps = CapabilityDeps(make_settings())
    with pytest.raises(CapabilityUnavailable, match="bubblewrap"):
        code.CAPABILITY.create(deps)
    toolbox = build_toolbox(deps, [code.CAPABILITY])
    assert "execute_code" not in toolbox.registry
    [status] = toolbox.status
    assert status.configured and not status.available and "not installed" in status.reason


def test_disabled_or_unknown_backend(make_settings) -> None:
    assert code.CAPABILITY.configured(make_settings()) is True
    assert code.CAPABILITY.configured(make_settings(code_execution={"enabled": False})) is False
    with pytest.raises(ConfigError, match="code_execution.backend: unknown backend 'docker'"):
        code.CAPABILITY.create(CapabilityDeps(make_settings(code_execution={"backend": "docker"})))


# --- how a run ended --------------------------------------------------------------------------------


def end(status: int | None, stderr: str = "", **kw: object) -> tuple[RunStatus, int | None, int | None]:
    return classify(Ending(status, stderr, **kw), LIMITS)[:3]  # type: ignore[arg-type]


def test_exit_codes_and_signals() -> None:
    assert end(0) == (RunStatus.OK, 0, None)
    assert end(1, "Traceback ...\nZeroDivisionError: division by zero\n") == (RunStatus.ERROR, 1, None)
    assert end(128 + signal.SIGSEGV) == (RunStatus.KILLED, None, signal.SIGSEGV)
    assert end(128 + signal.SIGKILL, duration_secs=0.1) == (RunStatus.KILLED, None, signal.SIGKILL)


def test_limits() -> None:
    assert end(128 + signal.SIGXCPU)[0] == RunStatus.CPU_LIMIT
    assert end(128 + signal.SIGKILL, duration_secs=6.0)[0] == RunStatus.CPU_LIMIT  # SIGXCPU was ignored
    assert end(1, "Traceback (most recent call last):\n  ...\nMemoryError\n")[0] == RunStatus.MEMORY_LIMIT
    fork_failed = "BlockingIOError: [Errno 11] Resource temporarily unavailable\n"
    assert end(1, fork_failed)[0] == RunStatus.PROCESS_LIMIT
    assert end(None, fork_failed, timed_out=True)[0] == RunStatus.PROCESS_LIMIT
    assert end(1, "RuntimeError: can't start new thread\n")[0] == RunStatus.PROCESS_LIMIT
    assert end(None, timed_out=True) == (RunStatus.TIMEOUT, None, signal.SIGKILL)
    assert end(None, "MemoryError\n", output_exceeded=True)[0] == RunStatus.OUTPUT_LIMIT


def test_messages_name_the_limit() -> None:
    assert classify(Ending(None, "", timed_out=True), LIMITS)[3] == (
        "stopped: still running after the wall-clock limit of 10 s")
    assert "256 MB" in classify(Ending(1, "MemoryError\n"), LIMITS)[3]
    assert "65536 bytes" in classify(Ending(None, "", output_exceeded=True), LIMITS)[3]


# --- the bubblewrap command line --------------------------------------------------------------------


def test_the_command_binds_only_the_base_interpreter_read_only() -> None:
    runner = BubblewrapRunner(LIMITS, bwrap="/usr/bin/bwrap")
    assert Path(sys.base_prefix) in (runner.python.parents if runner.prefix is None else [runner.prefix])
    argv = runner.command({"/code/main.py": 7}, 8, 1_000_000_123)
    binds = [(a, argv[i + 1], argv[i + 2]) for i, a in enumerate(argv) if a.endswith("bind")]
    assert ("--ro-bind", "/usr", "/usr") in binds
    assert all(kind == "--ro-bind" for kind, _, _ in binds)
    sources = {src for _, src, _ in binds}
    assert sources <= {"/usr", str(runner.prefix)}  # never the home directory, the venv, the data dir
    assert sys.prefix not in sources and str(Path.home()) not in sources
    for flag in ("--die-with-parent", "--new-session", "--clearenv", "--cap-drop"):
        assert flag in argv
    assert {"--unshare-net", "--unshare-pid"} <= set(argv) or "--unshare-all" in argv
    assert argv[argv.index("--chdir") + 1] == "/work"
    assert argv[argv.index("--tmpfs") - 1] == str(256 * 2**20)  # the working directory's size
    assert argv[argv.index("--json-status-fd") + 1] == "8"
    assert argv[argv.index("--ro-bind-data") + 1:argv.index("--ro-bind-data") + 3] == ["7", "/code/main.py"]
    assert argv[-6:] == ["5", str(256 * 2**20), str(256 * 2**20), "8",
                         "1000000123" if runner.privileged else "-1", "/code/main.py"]


def test_concurrent_runs_get_their_own_uid() -> None:
    pool = UidPool(base=2_000)
    with pool.lease() as first, pool.lease() as second:
        assert first != second and min(first, second) >= 2_000
    with pool.lease() as again:
        assert again == first


def test_a_missing_bwrap_or_an_exposed_path_is_refused_before_running(tmp_path: Path) -> None:
    with pytest.raises(SandboxUnavailable, match="not installed"):
        BubblewrapRunner(LIMITS, bwrap=str(tmp_path / "no-bwrap")).check()
    exposed = Path("/usr/share/assistant-data")
    with pytest.raises(SandboxUnavailable, match="would be visible"):
        BubblewrapRunner(LIMITS, bwrap="/bin/true", hidden=[exposed]).check()
