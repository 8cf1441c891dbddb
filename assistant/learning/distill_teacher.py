"""The teacher of a distillation run: a configured engine (Ollama or any OpenAI-compatible server) asked one
prompt at a time.

The teacher is built from ``[distillation]`` alone, through the engines of :mod:`assistant.llm` (the
backend registry), with an :class:`~assistant.config.InferenceSettings` made for it: the ``[inference]``
section (the student's engine) is neither read nor changed. Its identity as the status shows it is the
engine, the model and the host (scheme, host name and port of its URL): never its API key, a path or
credentials written into the URL.

The teacher's answers are data: they become training targets and nothing else. They are never put in a
prompt, never followed as instructions, and a tool call in place of an answer is not a sample. An answer
in which the prompt-injection defence's pattern layers (hidden characters and encodings, the shipped and the
user's evolved patterns: :data:`DROP_LAYERS`) find an injection is dropped too, so the student is not trained
to say it. The defence's classifier is not asked: it is tuned for indirect content, where a false positive
only fences a span, and it rates plain answers as injections (measured here: "The planet Jupiter is the
largest planet in our solar system." 98 % as a document, with MiniLM and with the n-gram model alike), which
would drop most of a dataset.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from assistant.config import InferenceSettings
from assistant.config.extended import DistillationSettings
from assistant.defence.types import Detector, Layer, NoDefence, Source
from assistant.errors import AssistantError, ServiceUnavailableError, UpstreamError
from assistant.llm.base import ChatMessage, ChatModel, GenerationOptions, collect

BACKENDS = {"ollama": "ollama", "openai_compatible": "openai"}  # teacher_engine -> backend registry id
DROP_LAYERS = frozenset({Layer.NORMALISATION, Layer.STATIC, Layer.DYNAMIC})  # high precision; not the classifier
NOT_CONFIGURED = ("no teacher is configured: set distillation.teacher_base_url and distillation.teacher_model "
                  "(and distillation.teacher_engine, \"ollama\" or \"openai_compatible\")")


@dataclass(frozen=True)
class TeacherIdentity:
    engine: str  # "ollama" | "openai_compatible"
    model: str
    host: str  # scheme://host:port of its URL, without credentials or path

    def as_dict(self) -> dict[str, str]:
        return {"engine": self.engine, "model": self.model, "host": self.host}


def host_of(url: str) -> str:
    """``scheme://host[:port]`` of ``url``: no user name, password, path or query."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}"


def identity(settings: DistillationSettings) -> TeacherIdentity | None:
    if not settings.teacher_base_url or not settings.teacher_model:
        return None
    return TeacherIdentity(settings.teacher_engine, settings.teacher_model, host_of(settings.teacher_base_url))


def teacher_inference(settings: DistillationSettings) -> InferenceSettings:
    """The engine settings of the teacher (a new InferenceSettings, not the server's)."""
    if not settings.teacher_base_url or not settings.teacher_model:
        raise ServiceUnavailableError(NOT_CONFIGURED)
    key = settings.teacher_api_key.get_secret_value() if settings.teacher_api_key is not None else None
    return InferenceSettings(backend=BACKENDS[settings.teacher_engine], model=settings.teacher_model,
                             base_url=settings.teacher_base_url, api_key=key,
                             request_timeout_secs=settings.timeout_secs, max_tokens=settings.max_tokens,
                             temperature=settings.temperature)


def build_teacher_model(settings: DistillationSettings, data_dir: Path) -> ChatModel:
    from assistant.llm.registry import create_chat_model

    return create_chat_model(teacher_inference(settings), data_dir)


class Outcome(StrEnum):
    ANSWERED = "answered"
    TRUNCATED = "truncated"  # answered, cut at max_tokens (kept: still the teacher's answer)
    FAILED = "failed"  # the engine failed, answered nothing, or asked for a tool
    FLAGGED = "flagged"  # the defence flagged the answer: dropped
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class TeacherAnswer:
    outcome: Outcome
    text: str = ""
    reason: str = ""  # why it failed or was dropped (never the prompt's or the answer's text)

    @property
    def usable(self) -> bool:
        return self.outcome in (Outcome.ANSWERED, Outcome.TRUNCATED)


class Teacher(Protocol):
    """Answers one prompt (the distillation run's view of the teacher; fakes implement it in tests)."""

    identity: TeacherIdentity

    def answer(self, prompt: str, cancelled: Callable[[], bool]) -> TeacherAnswer: ...

    def close(self) -> None: ...


class EngineTeacher:
    """A :class:`Teacher` over a :class:`ChatModel` (the configured Ollama or OpenAI-compatible engine).
    ``system_prompt`` is the student's (``inference.system_prompt``), so the targets answer the same frame."""

    def __init__(self, model: ChatModel, who: TeacherIdentity, settings: DistillationSettings, *,
                 system_prompt: str | None = None, detector: Detector | None = None, user_id: str | None = None):
        self.model = model
        self.identity = who
        self.settings = settings
        self.system_prompt = system_prompt
        self.detector = detector or NoDefence()
        self.user_id = user_id

    def answer(self, prompt: str, cancelled: Callable[[], bool]) -> TeacherAnswer:
        messages = [ChatMessage("system", self.system_prompt)] if self.system_prompt else []
        messages.append(ChatMessage("user", prompt))
        options = GenerationOptions(model=self.identity.model, temperature=self.settings.temperature,
                                    max_tokens=self.settings.max_tokens, should_stop=cancelled)
        try:
            result = collect(self.model.stream(messages, options))
        except UpstreamError as exc:  # its message may quote the engine's body (and so the prompt): not kept
            status = exc.details.get("upstream_status")
            return TeacherAnswer(Outcome.FAILED, reason=f"the teacher answered HTTP {status}" if status
                                 else "the teacher's stream was malformed")
        except AssistantError as exc:  # unreachable, timed out: the message names the URL, not the prompt
            return TeacherAnswer(Outcome.FAILED, reason=exc.message)
        except Exception as exc:  # noqa: BLE001 - any engine failure is one failed prompt, counted
            return TeacherAnswer(Outcome.FAILED, reason=f"the teacher failed: {type(exc).__name__}")
        if result.finish_reason == "cancelled" or cancelled():
            return TeacherAnswer(Outcome.CANCELLED)
        if result.tool_calls:
            return TeacherAnswer(Outcome.FAILED, reason="the teacher asked for a tool instead of answering")
        text = result.content.strip()
        if not text:
            return TeacherAnswer(Outcome.FAILED, reason="the teacher's answer was empty")
        verdict = self.detector.inspect(text, Source.DOCUMENT, self.user_id)
        layers = sorted({h.layer.value for h in verdict.hits if h.layer in DROP_LAYERS})
        if verdict.flagged and layers:
            return TeacherAnswer(Outcome.FLAGGED, reason=f"the defence flagged the teacher's answer ({', '.join(layers)})")
        return TeacherAnswer(Outcome.TRUNCATED if result.finish_reason == "length" else Outcome.ANSWERED, text)

    def close(self) -> None:
        client = getattr(self.model, "client", None)
        if client is not None and callable(getattr(client, "close", None)):
            client.close()


TeacherFactory = Callable[[str], Teacher]  # user_id -> a teacher for one run


def engine_teachers(settings: DistillationSettings, data_dir: Path, *, system_prompt: str | None = None,
                    detector: Detector | None = None) -> TeacherFactory:
    """The default factory: a new engine client per run (closed when the run ends)."""

    def make(user_id: str) -> Teacher:
        who = identity(settings)
        if who is None:
            raise ServiceUnavailableError(NOT_CONFIGURED)
        return EngineTeacher(build_teacher_model(settings, data_dir), who, settings, system_prompt=system_prompt,
                             detector=detector, user_id=user_id)

    return make
