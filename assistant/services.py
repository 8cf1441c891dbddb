"""build_services(settings) -> Services: the one place where the parts are wired together."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assistant.agents.profiles import ProfileStore
from assistant.agents.tasks import AgenticService, build_agentic
from assistant.breaker import Breakers
from assistant.catalog import CommandCatalog, build_catalog
from assistant.catalog.executor import create_runner, secret_paths
from assistant.chat.approvals import ToolApprovals
from assistant.chat.arguments import warm_up
from assistant.chat.conversations import ConversationStore
from assistant.chat.service import ChatService
from assistant.chat.tool_runs import ToolRunStore
from assistant.commands.service import CommandService
from assistant.config import Settings
from assistant.crypto import Sealer
from assistant.defence.types import Detector, NoDefence
from assistant.dream.build import build_dream
from assistant.dream.service import DreamService
from assistant.embeddings.base import Embedder, create_embedder
from assistant.errors import ConfigError
from assistant.extended.cognitive import CognitiveLoad, build_cognitive, load_signal
from assistant.extended.explain_store import ExplanationStore, build_explanations
from assistant.extended.immune import ImmuneView, build_immune
from assistant.extended.precache import Precache, build_precache
from assistant.extended.privacy import PrivacyBudget, build_privacy
from assistant.extended.red_team import RedTeam, build_red_team
from assistant.extended.sovereignty_probe import SovereigntyMonitor, build_sovereignty
from assistant.graph.build import build_graph
from assistant.graph.service import KnowledgeGraph
from assistant.guarded import EMBEDDER, LLM, MESSENGER, GuardedEmbedder, GuardedSender, guard_tools, tool_breaker_name
from assistant.health import (
    NOT_CONFIGURED,
    HealthProbe,
    ServiceHealth,
    database_health,
    http_health,
    tcp_health,
    timed,
)
from assistant.learning.build import build_training
from assistant.learning.distill import Distillation, build_distillation
from assistant.learning.federated import FederatedSync, build_federated
from assistant.learning.optimize import Optimizer, build_optimizer
from assistant.learning.service import TrainingService
from assistant.llm.base import ChatModel
from assistant.llm.queue import InferenceQueue
from assistant.llm.registry import create_chat_model
from assistant.memory.store import MemoryStore
from assistant.mesh import Mesh, build_mesh
from assistant.messaging.service import MessagingService, create_messaging
from assistant.observability.bridges import bridge_signals
from assistant.observability.metrics import Metrics, knowledge_graph_figures
from assistant.observability.signals import SignalBus
from assistant.ratelimit import RateLimiter
from assistant.sanitation.anomalies import AnomalyMonitor
from assistant.sanitation.build import build_sanitation
from assistant.sanitation.service import SanitationService
from assistant.sanitation.supervisor import ComponentSupervisor
from assistant.security import KeyStore
from assistant.snippets import SnippetStore
from assistant.storage.analytics import Analytics
from assistant.storage.db import Database
from assistant.storage.memory_key import open_store_sealer
from assistant.system import SystemMonitor
from assistant.tools.base import CapabilityDeps
from assistant.tools.catalog import Toolbox, build_toolbox
from assistant.voice.service import VoiceService, build_voice

if TYPE_CHECKING:  # APScheduler is imported when the scheduler starts, not with the package
    from apscheduler.schedulers.background import BackgroundScheduler

DB_FILE = "assistant.db"
ANALYTICS_FILE = "analytics.duckdb"


@dataclass
class Services:
    settings: Settings
    db: Database
    analytics: Analytics
    chat_model: ChatModel
    queue: InferenceQueue
    conversations: ConversationStore
    chat: ChatService
    keys: KeyStore
    metrics: Metrics
    system: SystemMonitor
    probe: HealthProbe
    rate_limiter: RateLimiter | None
    sealer: Sealer
    memory: MemoryStore | None = None
    tools: Toolbox | None = None
    voice: VoiceService | None = None  # while a [voice] section is present
    commands: CommandService | None = None
    messaging: MessagingService | None = None  # while [messenger] enabled
    agentic: AgenticService | None = None
    catalog: CommandCatalog | None = None
    profiles: ProfileStore | None = None
    snippets: SnippetStore | None = None
    graph: KnowledgeGraph | None = None  # while [knowledge_graph] enabled and the memory store on
    dream: DreamService | None = None  # while [dream] enabled and the memory store on
    defence: Detector = field(default_factory=NoDefence)  # the prompt-injection defence ([defence])
    sanitation: SanitationService | None = None  # while [sanitation] enabled and the memory store on
    supervisor: ComponentSupervisor | None = None  # restarts failing components (sanitation's anomalies)
    scheduler: BackgroundScheduler | None = None  # once `start_background` ran
    breakers: Breakers = field(default_factory=Breakers)  # one circuit breaker per backend
    signals: SignalBus = field(default_factory=SignalBus)  # typed signals of the extended features
    # Extended features (assistant/extended/), each None while its section is disabled:
    explanations: ExplanationStore | None = None  # [sovereign_intelligence]: answers' provenance, recorded
    cognitive: CognitiveLoad | None = None  # [cognitive_load]: the user's load and the answer format
    precache: Precache | None = None  # [precache_prediction]: predicted queries answered ahead of time
    privacy: PrivacyBudget | None = None  # [privacy]: differential-privacy budgets of aggregate outputs
    sovereignty: SovereigntyMonitor | None = None  # [sovereign_intelligence]: the sovereignty score
    red_team: RedTeam | None = None  # [red_team]: generated attacks against the defence and the chat path
    immune: ImmuneView | None = None  # [sovereign_intelligence]: the immune status audit view
    # feedback and per-user LoRA adapters; always built (feedback is collected), training needs [lora] enabled
    training: TrainingService | None = None
    distillation: Distillation | None = None  # [distillation]: a teacher's answers train the user's adapter
    mesh: Mesh | None = None  # [mesh]: chat requests forwarded to peer instances, local fallback
    optimization: Optimizer | None = None  # [optimization]: per-user retrieval parameters tuned with optuna
    federated: FederatedSync | None = None  # [federated]: adapter rounds with the user's own peer instances
    started_at: float = field(default_factory=time.time)

    @property
    def data_dir(self) -> Path:
        return self.settings.data_dir

    def service_health(self) -> dict[str, ServiceHealth]:
        """Every service of /ready/all, probed for real (at most once per
        ``server.readiness_cache_secs``, see :class:`HealthProbe`); unconfigured ones are unhealthy
        with no latency. ``circuit`` is the backend's breaker state, read fresh on every call."""
        messenger = self.settings.messenger
        probes: dict[str, Callable[[], ServiceHealth]] = {
            "inference": self._inference_health,
            "database": lambda: database_health(self.db),
            "cache": self._cache_health,
            "messenger": (lambda: http_health(messenger.api_base_url)) if messenger.enabled else _not_configured,
            **self._tool_health(),
            "embedder": self._embedder_health,
        }
        report = self.probe.all(probes)
        circuits = {"inference": LLM, "embedder": EMBEDDER, "messenger": MESSENGER,
                    **{name: tool_breaker_name(name) for name in ("email", "calendar", "weather")}}
        return {
            name: replace(health, circuit=self.breakers.get(circuits[name]).state.value)
            if circuits.get(name) in self.breakers else health
            for name, health in report.items()
        }

    def _inference_health(self) -> ServiceHealth:
        inference = self.probe.inference()
        self.metrics.inference_healthy = inference.healthy
        return ServiceHealth(inference.healthy, inference.latency_ms, inference.detail)

    def _cache_health(self) -> ServiceHealth:
        """llama.cpp's KV prefix cache lives in the loaded model: healthy once the default model is
        in memory; other engines keep their own cache (not configured here)."""
        stats = getattr(self.chat_model, "cache_stats", None)
        is_loaded = getattr(self.chat_model, "is_loaded", None)
        if stats is None or is_loaded is None:
            return NOT_CONFIGURED
        self.probe.inference()  # loads the model when it can be loaded

        def check() -> str:
            if not is_loaded():
                raise RuntimeError("the model is not loaded, so its KV prefix cache does not exist")
            return f"llama.cpp KV prefix cache, hit rate {stats.hit_rate:.2f}"

        return timed(check)

    def _embedder_health(self) -> ServiceHealth:
        """One embedding of a short text, bypassing the breaker (a probe is not traffic)."""
        if self.memory is None:
            return NOT_CONFIGURED
        embedder = getattr(self.memory.embedder, "inner", self.memory.embedder)
        return timed(lambda: f"{embedder.id}, {len(embedder.embed(['readiness probe'])[0])} dimensions")

    def _tool_health(self) -> dict[str, Callable[[], ServiceHealth]]:
        """email, calendar and weather: reachability of the configured backend (a registered
        capability), else not configured."""
        backends = self.tools.backends if self.tools is not None else {}
        s = self.settings
        return {
            "email": (lambda: tcp_health(s.email.imap_host, s.email.imap_port))
            if "email" in backends else _not_configured,
            "calendar": (lambda: http_health(s.calendar.url)) if "calendar" in backends else _not_configured,
            "weather": (lambda: http_health(s.weather.geocoding_url)) if "weather" in backends else _not_configured,
        }

    def start_background(self) -> None:
        """Start the daily jobs (memory decay, reminders) and, with a [voice] section, the voice pipeline.
        The server calls this; notebooks need not."""
        from assistant.scheduler import start_scheduler

        if self.scheduler is None:
            reminders = self.tools.backends.get("reminders") if self.tools is not None else None
            if self.dream is not None:
                self.dream.recover()  # sessions a previous process left active (assistant/dream/service.py)
            self.scheduler = start_scheduler(self.memory, reminders, self.settings.reminders.check_interval_secs,
                                             self.graph, self.dream)
            if self.precache is not None:  # every precache_prediction.check_interval_minutes
                self.precache.schedule(self.scheduler)
        if self.voice is not None:
            self.voice.start(self.chat)  # engines validated (ConfigError if broken), bus connecting
            self.metrics.voice_dropped = self.voice.dropped

    def cache_hit_rate(self) -> float:
        stats = getattr(self.chat_model, "cache_stats", None)
        return round(stats.hit_rate, 4) if stats is not None else 0.0

    def engine_status(self) -> dict[str, Any]:
        """The engine's backend, llama.cpp CPU variant (once loaded) and sizes, for /v1/system/status."""
        from assistant.llm import cpu_backend

        status: dict[str, Any] = {"backend": self.settings.inference.backend}
        sizes = getattr(self.chat_model, "sizes", None)
        if sizes is not None:  # the embedded engine
            status.update(sizes.__dict__)
            info = cpu_backend.current()
            if info is not None:
                status.update(cpu_variant=info.variant, cpu_variant_source=info.source, cpu_features=info.features,
                              rejected_variants=info.rejected,
                              self_test_tokens_per_second=info.self_test_tokens_per_second)
        return status

    def close(self) -> None:
        if self.voice is not None:
            self.voice.stop()
        if self.dream is not None:
            self.dream.close()  # running sessions stop between two operations (journaled)
        if self.graph is not None:
            self.graph.close()
        if self.scheduler is not None:
            self.scheduler.shutdown(wait=True)  # a running job finishes before the database closes
        if self.precache is not None:
            self.precache.close()  # its statistics (m026) are written
        if self.red_team is not None:
            self.red_team.close()  # a run stops between two attacks; its ephemeral users are erased
        if self.distillation is not None:
            self.distillation.close()  # collecting stops (those runs fail); a run in training keeps its course
        if self.training is not None:
            self.training.close()  # a run under way is cancelled between two steps; its worker stops
        if self.mesh is not None:
            self.mesh.close()  # its worker threads and its HTTP connections to the peers
        if self.optimization is not None:
            self.optimization.close()  # a run stops after its current trial
        self.queue.close()
        if self.messaging is not None:
            self.messaging.close()
        if self.tools is not None:
            self.tools.close()
        self.analytics.close()
        self.db.close()


def _not_configured() -> ServiceHealth:
    return NOT_CONFIGURED


def key_path(settings: Settings) -> Path:
    path = settings.memory.encryption_key_path.expanduser()
    return path if path.is_absolute() else settings.data_dir / path


def supervise(services: Services) -> None:
    """Sanitation's anomaly watch: a supervisor that restarts the engine, the embedder and the voice
    bus with backoff (then marks them degraded in /ready), fed by the request window of the metrics."""
    settings = services.settings.sanitation
    supervisor = ComponentSupervisor(settings.max_restart_count, settings.restart_backoff_base_secs)
    supervisor.register("engine", services.queue.restart)
    embedder = services.memory.embedder if services.memory is not None else None
    if callable(getattr(embedder, "reload", None)):
        supervisor.register("embedder", embedder.reload)
    voice = services.voice
    if voice is not None:
        def restart_bus() -> None:
            if voice.bus is None:
                raise RuntimeError("the voice pipeline is not running")
            voice.bus.stop()
            voice.bus.start()
        supervisor.register("bus", restart_bus)
    services.supervisor = supervisor
    services.probe.degraded = supervisor.degraded
    if services.sanitation is not None:
        services.sanitation.deps.anomalies = AnomalyMonitor(services.metrics.window, settings, supervisor)


def build_services(settings: Settings, *, chat_model: ChatModel | None = None,
                   embedder: Embedder | None = None) -> Services:
    """Open storage under the data directory and build every part from ``settings``.

    ``chat_model`` and ``embedder`` replace the configured backends (tests and notebooks pass
    fakes). A wrong or missing encryption key for an existing store raises ConfigError here.
    """
    data_dir = settings.data_dir
    data_dir.mkdir(parents=True, exist_ok=True)
    db = Database(data_dir / DB_FILE)
    mem = settings.memory
    try:
        sealer = open_store_sealer(db, key_path(settings), enabled=mem.enable_encryption)
    except Exception:
        db.close()
        raise
    server = settings.server
    breakers = Breakers(server.circuit_failure_threshold, server.circuit_reset_secs)
    memory = None
    if mem.enabled:
        base_url = settings.inference.base_url if mem.embedding_backend == "ollama" else None
        guarded = GuardedEmbedder(embedder or create_embedder(mem, base_url), breakers.get(EMBEDDER))
        memory = MemoryStore(db, sealer, guarded, mem)
    analytics = Analytics(data_dir / ANALYTICS_FILE)
    metrics = Metrics()
    metrics.circuits = lambda: {name: state.value for name, state in breakers.states().items()}
    model = chat_model or create_chat_model(settings.inference, data_dir)
    inference = settings.inference
    queue = InferenceQueue(
        model, queue_timeout_secs=inference.queue_timeout_secs, request_timeout_secs=inference.request_timeout_secs,
        breaker=breakers.get(LLM),
    )
    conversations = ConversationStore(db, sealer)
    profiles = ProfileStore(db, sealer)
    security = settings.security
    try:
        toolbox = build_toolbox(CapabilityDeps(settings, db, sealer, data_dir, memory))
    except Exception:
        db.close()
        raise
    toolbox.registry = guard_tools(toolbox.registry, breakers)
    for capability in toolbox.backends:
        breakers.get(tool_breaker_name(capability))
    catalog = build_catalog(db, sealer, settings.commands,
                            runner=create_runner(settings.commands, secret_paths(settings)))
    tool_runs = ToolRunStore(db, sealer)
    chat = ChatService(queue, conversations, inference, metrics, analytics, memory=memory, memory_settings=mem,
                       toolbox=toolbox, tool_settings=settings.tool_calling, tool_runs=tool_runs, profiles=profiles,
                       approvals=ToolApprovals(catalog.approvals, toolbox, conversations, tool_runs, catalog.audit))
    metrics.tool_calls = chat.tool_counters.snapshot
    threading.Thread(target=warm_up, name="warm-up-jsonschema", daemon=True).start()
    services = Services(
        settings=settings,
        db=db,
        analytics=analytics,
        chat_model=model,
        queue=queue,
        conversations=conversations,
        chat=chat,
        keys=KeyStore(db, security.api_keys),
        metrics=metrics,
        system=SystemMonitor(),
        probe=HealthProbe(model, inference.health_cache_secs, all_cache_secs=server.readiness_cache_secs,
                          rpm=server.readiness_rpm),
        rate_limiter=RateLimiter(security.rate_limit_rpm) if security.rate_limit_enabled else None,
        sealer=sealer,
        memory=memory,
        tools=toolbox,
        commands=CommandService.create(settings, toolbox, queue),
        agentic=build_agentic(settings, db, sealer, queue, toolbox, profiles, chat.selector),
        catalog=catalog,
        profiles=profiles,
        snippets=SnippetStore(db, sealer),
        graph=build_graph(settings, db, sealer, memory, queue),
        voice=build_voice(settings, db, sealer=sealer),
        breakers=breakers,
    )
    sovereign = settings.sovereign_intelligence
    services.signals = SignalBus(analytics, sovereign.signal_bus_capacity, sovereign.signal_retention_days)
    if services.graph is not None:
        metrics.knowledge_graph = partial(knowledge_graph_figures, services.graph)
    services.defence, services.sanitation = build_sanitation(settings, db, sealer, memory, services.graph, queue,
                                                             conversations)
    services.dream = build_dream(settings, db, sealer, memory, services.graph, queue, chat, services.sanitation)
    chat.defence, chat.neutralise = services.defence, settings.defence.neutralise
    if services.agentic is not None:
        services.agentic.defence = services.defence
    supervise(services)
    if services.dream is not None:
        metrics.dream = services.dream.counters.snapshot
    bridge_signals(services.signals, services.sanitation, services.dream)  # quality, anomalies, dream phases
    services.explanations = chat.explanations = build_explanations(settings, db, sealer)  # recorded per answer
    services.cognitive = chat.cognitive = build_cognitive(settings, db, sealer)  # the answer format
    if services.cognitive is not None:
        chat.load_signal = load_signal(services.signals)  # one CognitiveLoadEstimate per answer
    services.privacy = build_privacy(settings, db, services.signals)
    services.sovereignty = build_sovereignty(settings, db, sealer, key_path(settings), services.signals, catalog)
    services.precache = build_precache(settings, db, sealer, memory, toolbox, services.signals)  # wraps the tools
    if services.precache is not None:
        chat.precache = services.precache  # ChatService.recall asks it before retrieving
    services.red_team = build_red_team(settings, db, sealer, services.defence, chat, services.signals,
                                       services.sanitation, analytics)  # its bypasses feed defence evolution
    services.immune = build_immune(settings, services.defence, sanitation=services.sanitation,
                                   red_team=services.red_team, supervisor=services.supervisor, memory=memory,
                                   signals=services.signals)
    if services.voice is not None:  # 0 until the pipeline runs, however it is started (server, notebook, test)
        metrics.voice_speaker_unavailable = services.voice.speaker_unavailable
    services.mesh = build_mesh(settings, chat)  # the chat service's engine is its local fallback
    services.training = build_training(settings, db, sealer, conversations, services.signals,
                                       memory.embedder if memory is not None else None)  # implicit feedback
    if services.training is not None and settings.lora.enabled:  # each user's answers with their own adapter
        chat.adapter_for = services.training.active_gguf
    services.distillation = build_distillation(  # the teacher's answers go through the training pipeline
        settings.distillation, settings.lora, db, conversations, services.training, data_dir=data_dir,
        system_prompt=inference.system_prompt, detector=services.defence, signals=services.signals)
    services.optimization = build_optimizer(  # the memory store reads each user's applied parameters from it
        settings, db, memory, explanations=services.explanations, conversations=conversations,
        signals=services.signals, useful=getattr(services.training, "feedback_store", None))
    try:  # averages the user's active adapter with their peers' (noised: charged to the privacy budget)
        services.federated = build_federated(settings, db, services.privacy, services.training, services.signals)
    except ConfigError:  # federated.enabled without privacy.enabled: refuse to start
        services.close()
        raise
    services.messaging = create_messaging(settings.messenger, db, services.chat)  # needs the chat service
    if services.messaging is not None and services.messaging.sender is not None:
        services.messaging.sender = GuardedSender(services.messaging.sender, breakers.get(MESSENGER))
    return services
