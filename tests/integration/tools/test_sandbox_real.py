"""The escape suite: programs run in the real bubblewrap sandbox try to reach the network, read the
key file, write outside their directory, fork-bomb, allocate 4 GB, print 100 MB and run forever;
each is stopped and reported. The runner is built the production way (``CAPABILITY.create`` from
settings whose data directory, with a real key file, is under ``tmp_path``); limits are small for
speed. No test asserts a duration."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from assistant.config import DEFAULT_DATA_DIR, Settings
from assistant.crypto import load_or_create_key
from assistant.tools import code
from assistant.tools.base import CapabilityDeps, CapabilityUnavailable
from assistant.tools.catalog import build_toolbox
from assistant.tools.sandbox import BubblewrapRunner, RunResult, RunStatus, SandboxLimits, SandboxUnavailable
from tests.integration.tools.sandbox_server import (  # noqa: F401
    HostListener,
    host_listener_fixture,
    sandboxed_pids,
)

pytestmark = pytest.mark.integration

LIMITS = {"cpu_time_secs": 1, "wall_time_secs": 10, "memory_mb": 128, "max_output_bytes": 4096,
          "max_processes": 8}

Runner = Callable[..., BubblewrapRunner]


@pytest.fixture
def code_settings(make_settings: Callable[..., Settings]) -> Settings:
    """Settings whose data directory (under tmp_path) holds a real memory key file."""
    settings = make_settings(code_execution=LIMITS)
    settings.data_dir.mkdir(parents=True)
    load_or_create_key(settings.data_dir / "memory.key")
    return settings


@pytest.fixture
def make_runner(code_settings: Settings) -> Runner:
    """``make_runner(wall_time_secs=2)``: the real sandbox from the capability, limits overridden."""

    def make(**limits: float) -> BubblewrapRunner:
        for name, value in limits.items():
            setattr(code_settings.code_execution, name, value)
        runner = code.CAPABILITY.create(CapabilityDeps(code_settings, data_dir=code_settings.data_dir))
        assert isinstance(runner, BubblewrapRunner)
        return runner

    return make


@pytest.fixture
def runner(make_runner: Runner) -> BubblewrapRunner:
    return make_runner()


def sandboxed_processes(runner: BubblewrapRunner) -> list[int]:
    return sandboxed_pids(runner, "/code/main.py")


def report(result: RunResult) -> dict:
    """The JSON a probe program printed as its last line."""
    assert result.status == RunStatus.OK, (result.status, result.stderr)
    return json.loads(result.stdout.strip().splitlines()[-1])


def attempts(paths: Iterable[str]) -> str:
    """A program that tries to create each path and prints {path: outcome}."""
    return ("import json\nout = {}\n"
            f"for path in {list(paths)!r}:\n"
            "    try:\n"
            "        with open(path, 'w') as f:\n"
            "            f.write('escaped')\n"
            "        out[path] = 'written'\n"
            "    except OSError as exc:\n"
            "        out[path] = type(exc).__name__\n"
            "print(json.dumps(out))\n")


# --- it works ---------------------------------------------------------------------------------------


def test_a_computation_runs_and_returns_stdout(runner: BubblewrapRunner) -> None:
    result = runner.run("import math, statistics\n"
                        "print(sum(i * i for i in range(10)), math.comb(10, 3), statistics.median([3, 1, 2]))\n")
    assert (result.status, result.exit_code, result.stdout, result.stderr) == (RunStatus.OK, 0, "285 120 2\n", "")
    assert result.truncated is False


def test_the_tool_is_registered_and_runs_in_the_sandbox(code_settings: Settings) -> None:
    toolbox = build_toolbox(CapabilityDeps(code_settings, data_dir=code_settings.data_dir), [code.CAPABILITY])
    assert toolbox.registry.names() == ["execute_code"]
    answer = toolbox.registry.get("execute_code")(toolbox.context("u1"), {"code": "print(6 * 7)"})
    assert (answer["status"], answer["stdout"], answer["exit_code"]) == ("ok", "42\n", 0)
    failed = toolbox.registry.get("execute_code")(toolbox.context("u1"), {"code": "1 / 0"})
    assert failed["status"] == "error" and failed["exit_code"] == 1
    assert 'File "/code/main.py", line 1' in failed["stderr"] and "ZeroDivisionError" in failed["stderr"]


def test_the_interpreter_is_isolated_and_unprivileged(runner: BubblewrapRunner, monkeypatch) -> None:
    monkeypatch.setenv("SANDBOX_TEST_SECRET", "do-not-leak")
    found = report(runner.run(
        "import json, os, sys\n"
        "try:\n    import pydantic\n    venv = 'importable'\nexcept ImportError:\n    venv = 'missing'\n"
        "print(json.dumps({'uid': os.getuid(), 'isolated': sys.flags.isolated, 'no_site': sys.flags.no_site,\n"
        "                  'env': sorted(os.environ), 'pydantic': venv}))\n"))
    assert found["uid"] != 0 and found["isolated"] == 1 and found["no_site"] == 1
    assert found["pydantic"] == "missing"  # the venv's packages are not there
    assert "SANDBOX_TEST_SECRET" not in found["env"] and set(found["env"]) <= {"HOME", "LANG", "PATH", "PWD", "TMPDIR"}


# --- escapes ----------------------------------------------------------------------------------------


def test_no_network_not_even_the_hosts_loopback(runner: BubblewrapRunner, host_listener: HostListener) -> None:
    found = report(runner.run(
        "import json, socket\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {host_listener.port}), timeout=3).recv(64)\n"
        "    outcome = 'connected'\n"
        "except OSError as exc:\n"
        "    outcome = type(exc).__name__\n"
        "print(json.dumps({'connect': outcome, 'interfaces': [n for _, n in socket.if_nameindex()]}))\n"))
    assert found["connect"] in ("ConnectionRefusedError", "OSError")  # nothing listens in its own namespace
    assert found["interfaces"] == ["lo"]  # no interface that leads anywhere
    assert host_listener.accepted == []


def test_the_key_file_and_the_data_directory_are_not_there(runner: BubblewrapRunner, code_settings: Settings) -> None:
    key = code_settings.data_dir / "memory.key"
    assert key.stat().st_size == 32
    wanted = {"key": str(key), "data": str(code_settings.data_dir), "default_data": str(DEFAULT_DATA_DIR.expanduser()),
              "venv": sys.prefix, "repo": str(Path(code.__file__).resolve().parent), "home_ssh": "/root/.ssh",
              "passwd": "/etc/passwd"}
    found = report(runner.run(
        "import json, os\n"
        f"paths = {wanted!r}\n"
        "try:\n"
        "    open(paths['key'], 'rb').read()\n"
        "    key = 'read'\n"
        "except OSError as exc:\n"
        "    key = type(exc).__name__\n"
        "print(json.dumps({'read_key': key, **{k: os.path.lexists(p) for k, p in paths.items()}}))\n"))
    assert found.pop("read_key") == "FileNotFoundError"
    assert not any(found.values()), found


def test_writes_outside_the_working_directory_fail(runner: BubblewrapRunner, tmp_path: Path) -> None:
    host_file = tmp_path / "escaped.txt"
    targets = [str(host_file), "/etc/escaped.txt", "/usr/escaped.txt", "/code/main.py", "/escaped.txt",
               str(Path(sys.base_prefix) / "escaped.txt")]
    found = report(runner.run(attempts(targets)))
    assert set(found) == set(targets) and "written" not in found.values(), found
    assert not host_file.exists() and not Path("/etc/escaped.txt").exists() and not Path("/usr/escaped.txt").exists()
    assert not (Path(sys.base_prefix) / "escaped.txt").exists()


def test_the_working_directory_is_private_empty_and_gone_after_the_run(runner: BubblewrapRunner) -> None:
    program = ("import json, os\n"
               "listed = os.listdir('.')\n"
               "open('note.txt', 'w').write('left behind?')\n"
               "mounts = [line.split() for line in open('/proc/self/mountinfo')]\n"
               "fstype = next(m[m.index('-') + 1] for m in mounts if m[4] == os.getcwd())\n"
               "print(json.dumps({'cwd': os.getcwd(), 'listed': listed, 'fstype': fstype,\n"
               "                  'tmp': os.path.realpath('/tmp')}))\n")
    first, second = report(runner.run(program)), report(runner.run(program))
    assert first == second == {"cwd": "/work", "listed": [], "fstype": "tmpfs", "tmp": "/work"}


def test_a_fork_bomb_is_stopped_and_the_host_is_fine(make_runner: Runner) -> None:
    runner = make_runner(wall_time_secs=5)
    bomb = runner.run("import os\nwhile True:\n    os.fork()\n")
    assert bomb.status == RunStatus.PROCESS_LIMIT, (bomb.status, bomb.stderr[-300:])
    assert "8 processes" in bomb.message and "BlockingIOError" in bomb.stderr
    stubborn = runner.run("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n")
    assert stubborn.status in (RunStatus.TIMEOUT, RunStatus.PROCESS_LIMIT, RunStatus.KILLED, RunStatus.CPU_LIMIT)
    assert sandboxed_processes(runner) == []  # the whole pid namespace is gone when run() returns
    assert runner.run("print('still fine')").stdout == "still fine\n"


def test_allocating_4_gb_hits_the_memory_limit(runner: BubblewrapRunner) -> None:
    result = runner.run("block = bytearray(4 * 1024 ** 3)\nprint(len(block))\n")
    assert result.status == RunStatus.MEMORY_LIMIT and "128 MB" in result.message
    assert "MemoryError" in result.stderr and result.stdout == ""


def test_printing_100_mb_hits_the_output_limit(runner: BubblewrapRunner) -> None:
    result = runner.run("import sys\nfor _ in range(100):\n    sys.stdout.write('x' * 1_000_000)\n")
    assert result.status == RunStatus.OUTPUT_LIMIT and result.stdout_truncated
    assert 0 < len(result.stdout.encode()) <= 4096 and set(result.stdout) == {"x"}
    noisy = runner.run("import sys\nfor _ in range(100):\n    sys.stderr.write('e' * 1_000_000)\n")
    assert noisy.status == RunStatus.OUTPUT_LIMIT and noisy.stderr_truncated and len(noisy.stderr) <= 4096
    assert sandboxed_processes(runner) == []


def test_a_busy_loop_hits_the_cpu_limit(runner: BubblewrapRunner) -> None:
    result = runner.run("while True:\n    pass\n")
    assert result.status in (RunStatus.CPU_LIMIT, RunStatus.TIMEOUT), result
    assert result.exit_code is None and result.signal is not None


def test_sleeping_forever_hits_the_wall_clock(make_runner: Runner) -> None:
    runner = make_runner(wall_time_secs=2)
    result = runner.run("import time\nprint('going to sleep', flush=True)\ntime.sleep(1000)\n")
    assert result.status == RunStatus.TIMEOUT and result.exit_code is None
    assert result.stdout == "going to sleep\n" and "wall-clock limit of 2 s" in result.message
    assert sandboxed_processes(runner) == []


# --- no sandbox, no tool ----------------------------------------------------------------------------


def test_without_bwrap_the_tool_is_not_registered(code_settings: Settings, tmp_path: Path, monkeypatch) -> None:
    def missing_bwrap(limits: SandboxLimits, hidden: Iterable[Path]) -> BubblewrapRunner:
        runner = BubblewrapRunner(limits, bwrap=str(tmp_path / "not-installed" / "bwrap"), hidden=hidden)
        runner.check()
        return runner

    monkeypatch.setitem(code.BACKENDS, "sandbox", missing_bwrap)
    deps = CapabilityDeps(code_settings, data_dir=code_settings.data_dir)
    with pytest.raises(CapabilityUnavailable, match="bubblewrap .* is not installed"):
        code.CAPABILITY.create(deps)
    toolbox = build_toolbox(deps, [code.CAPABILITY])
    assert "execute_code" not in toolbox.registry
    assert toolbox.status[0].available is False and "not installed" in toolbox.status[0].reason


def test_a_sandbox_that_would_show_the_data_directory_is_refused(code_settings: Settings) -> None:
    exposed = Path(sys.base_prefix) / "share" / "assistant-data"  # under a read-only bind
    with pytest.raises(SandboxUnavailable, match="would be visible in the sandbox"):
        BubblewrapRunner(SandboxLimits(), hidden=[exposed]).check()
    code_settings.server.data_dir = Path(sys.base_prefix) / "var" / "assistant"
    with pytest.raises(CapabilityUnavailable, match="would be visible in the sandbox"):
        code.CAPABILITY.create(CapabilityDeps(code_settings))
