"""Settings: the defaults of both spec documents, TOML loading, environment overrides, validation."""

from __future__ import annotations

from datetime import time
from pathlib import Path

import pytest

from assistant.config import Settings, VoiceSettings
from assistant.errors import ConfigError

pytestmark = pytest.mark.usefixtures("clean_env")


@pytest.fixture
def defaults() -> Settings:
    return Settings.load()


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "assistant.toml"
    path.write_text(text, encoding="utf-8")
    return path


# --- defaults --------------------------------------------------------------------------------------


def test_memory_defaults(defaults: Settings) -> None:
    m = defaults.memory
    assert (m.enabled, m.enable_rag, m.enable_learning, m.enable_encryption) == (True, True, True, True)
    assert m.rag_limit == 5
    assert m.rag_threshold == 0.5
    assert m.merge_threshold == 0.85
    assert m.min_importance == 0.1
    assert m.decay_factor == 0.95
    assert m.embedding_dimension == 384
    assert m.embedding_timeout_ms == 30_000
    assert m.encryption_key_path.name  # a file name
    assert m.ebbinghaus_base_stability == 1.0
    assert m.recall_bonus == 1.5


def test_tool_calling_defaults(defaults: Settings) -> None:
    t = defaults.tool_calling
    assert t.enabled is True
    assert (t.max_iterations, t.iteration_timeout_secs, t.total_timeout_secs) == (5, 30, 120)
    assert t.parallel_tool_execution is True
    assert t.require_approval_for == []


def test_dream_defaults(defaults: Settings) -> None:
    d = defaults.dream
    assert d.enabled is True
    assert len(d.schedule.split()) == 6
    fields = d.schedule.split()
    assert fields[:3] == ["0", "0", "0"]  # second, minute, hour: midnight
    assert fields[3:] == ["*", "*", "*"]  # daily
    assert d.idle_threshold_secs == 7200
    assert d.re_idle_secs == 1800
    assert d.max_cycles == 5
    assert d.max_duration_hours == 6
    assert d.hypothesis_ttl_days == 30
    n = d.nrem
    assert (n.enabled, n.merge_threshold, n.archive_consolidated) == (True, 0.85, True)
    assert (n.max_edge_reviews_per_cycle, n.edge_prune_threshold, n.decay_rate) == (20, 0.2, 0.95)
    r = d.rem
    assert (r.enabled, r.pattern_window_days, r.hypothesis_confidence_threshold) == (True, 7, 0.3)
    assert (r.max_node_merges_per_cycle, r.proactive_surfacing) == (10, True)
    assert (r.surfacing_similarity_threshold, r.surfacing_confidence_threshold) == (0.5, 0.5)
    j = d.journal
    assert (j.enabled, j.store_before_after_snapshots, j.retention_days) == (True, True, 90)


def test_sanitation_defaults(defaults: Settings) -> None:
    s = defaults.sanitation
    assert s.enabled is True
    assert (s.quarantine_ttl_days, s.memory_batch_size, s.max_restart_count) == (7, 10, 4)
    assert (s.restart_backoff_base_secs, s.anomaly_window_secs) == (30, 300)
    assert (s.latency_spike_multiplier, s.error_rate_threshold) == (2.0, 0.05)
    assert (s.quality_re_ask_weight, s.quality_correction_weight, s.quality_abandonment_weight) == (0.4, 0.4, 0.2)


def test_voice_is_disabled_by_default(defaults: Settings) -> None:
    assert defaults.voice is None


def test_voice_settings_defaults() -> None:
    v = VoiceSettings()
    assert (v.mqtt.keep_alive_secs, v.mqtt.max_inflight) == (30, 100)
    assert v.wake_word.words  # a list of words
    assert (v.wake_word.sensitivity, v.wake_word.timeout_ms) == (0.5, 2000)
    assert (v.speaker_id.min_enrollment_samples, v.speaker_id.match_threshold, v.speaker_id.timeout_ms) == (3, 0.75, 5000)
    assert (v.conversation.follow_up_window_ms, v.conversation.max_session_duration_ms) == (10_000, 300_000)
    assert (v.whisper_mode.quiet_start, v.whisper_mode.quiet_end) == (time(22, 0), time(7, 0))
    assert v.whisper_mode.quiet_volume == 30
    assert (v.gpio.enabled, v.gpio.privacy_led_pin) == (False, 17)
    assert (v.rooms.default_volume, v.rooms.heartbeat_timeout_ms, v.rooms.stale_check_interval_secs) == (80, 30_000, 30)


def test_security_and_core_defaults(defaults: Settings) -> None:
    assert defaults.security.rate_limit_rpm == 120
    assert defaults.security.rate_limit_enabled is True
    assert defaults.security.api_keys == {}
    assert defaults.server.max_body_bytes == 1_048_576
    assert defaults.server.openapi_enabled is True
    assert defaults.agentic.total_timeout_minutes == 10
    assert defaults.agentic.sub_agent_timeout_minutes == 5
    assert defaults.messenger.signature_required is True


def test_extended_feature_defaults(defaults: Settings) -> None:
    d = defaults
    assert (d.privacy.epsilon, d.privacy.delta, d.privacy.budget_reset_interval) == (1.0, 1e-5, "daily")
    c = d.cognitive_load
    assert (c.circadian_weight, c.duration_weight, c.latency_weight, c.complexity_weight, c.multitask_weight) == (
        0.3, 0.25, 0.2, 0.15, 0.1)
    assert (c.fatigue_onset_minutes, c.bullet_points_threshold, c.tldr_first_threshold) == (30, 0.4, 0.7)
    p = d.precache_prediction
    assert (p.min_probability, p.check_interval_minutes, p.max_precached_queries, p.thermal_pause_celsius) == (
        0.7, 15, 20, 65.0)
    assert (d.knowledge_visualization.max_nodes, d.knowledge_visualization.min_retention_threshold) == (5000, 0.1)
    assert (d.sovereign_intelligence.signal_bus_capacity, d.sovereign_intelligence.signal_retention_days) == (1024, 90)
    assert (d.red_team.enabled, d.red_team.max_attacks_per_run) == (False, 100)
    assert (d.lora.enabled, d.lora.learning_rate, d.lora.rank, d.lora.min_samples) == (False, 0.0001, 8, 50)
    assert (d.optimization.enabled, d.optimization.max_iterations, d.optimization.exploration_weight) == (False, 50, 1.0)
    assert (d.pqc.enabled, d.pqc.hybrid_mode) == (False, True)
    assert (d.homomorphic.enabled, d.homomorphic.security_level) == (False, 128)


# --- loading ---------------------------------------------------------------------------------------


def test_toml_file_is_loaded(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        [server]
        port = 9090
        data_dir = "/tmp/somewhere"

        [memory]
        rag_limit = 3
        rag_threshold = 0.6

        [voice.whisper_mode]
        quiet_start = 23:30:00
        """,
    )
    s = Settings.load(path)
    assert s.server.port == 9090
    assert s.data_dir == Path("/tmp/somewhere")
    assert (s.memory.rag_limit, s.memory.rag_threshold) == (3, 0.6)
    assert s.memory.merge_threshold == 0.85  # untouched keys keep their defaults
    assert s.voice is not None  # a [voice] section enables the subsystem
    assert s.voice.whisper_mode.quiet_start == time(23, 30)
    assert s.voice.rooms.default_volume == 80


def test_environment_beats_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, "[memory]\nrag_limit = 3\nrag_threshold = 0.6\n")
    monkeypatch.setenv("ASSISTANT_MEMORY__RAG_LIMIT", "7")
    s = Settings.load(path)
    assert s.memory.rag_limit == 7
    assert s.memory.rag_threshold == 0.6  # the rest of the file's section is kept


def test_environment_beats_keyword_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSISTANT_SECURITY__RATE_LIMIT_RPM", "33")
    assert Settings.load(security={"rate_limit_rpm": 10}).security.rate_limit_rpm == 33


def test_keyword_overrides_merge_into_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "[memory]\nrag_limit = 3\n")
    s = Settings.load(path, memory={"rag_threshold": 0.25})
    assert (s.memory.rag_limit, s.memory.rag_threshold) == (3, 0.25)


def test_invalid_value_names_key_and_range(tmp_path: Path) -> None:
    path = write(tmp_path, "[memory]\nrag_threshold = 1.5\n")
    with pytest.raises(ConfigError) as info:
        Settings.load(path)
    message = info.value.message
    assert "memory.rag_threshold" in message
    assert "[0.0, 1.0]" in message
    assert "1.5" in message
    assert str(path) in message


def test_invalid_environment_value_names_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSISTANT_MEMORY__RAG_LIMIT", "lots")
    with pytest.raises(ConfigError) as info:
        Settings.load()
    assert "memory.rag_limit" in info.value.message
    assert "[1, 100]" in info.value.message


def test_exclusive_bound_is_shown_open(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.load(memory={"decay_factor": 0})
    assert "memory.decay_factor" in info.value.message
    assert "(0.0, 1.0]" in info.value.message


@pytest.mark.parametrize(
    ("text", "key"),
    [("[memory]\nbogus = 1\n", "memory.bogus"), ("[bogus]\nx = 1\n", "bogus"),
     ("[voice.rooms]\nvolume = 3\n", "voice.rooms.volume")],
)
def test_unknown_key_is_refused(tmp_path: Path, text: str, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.load(write(tmp_path, text))
    assert f"{key}: Extra inputs are not permitted" in info.value.message


def test_unknown_nested_environment_key_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSISTANT_MEMORY__RAG_LIMT", "3")
    with pytest.raises(ConfigError, match="memory.rag_limt"):
        Settings.load()


def test_missing_file_and_bad_toml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        Settings.load(tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match="not valid TOML"):
        Settings.load(write(tmp_path, "[memory\nrag_limit = "))


@pytest.mark.parametrize(("value", "ok"), [(0, False), (1, True), (30, True), (31, False)])
def test_quarantine_ttl_days_bounded_1_to_30(value: int, ok: bool) -> None:
    if ok:
        assert Settings.load(sanitation={"quarantine_ttl_days": value}).sanitation.quarantine_ttl_days == value
    else:
        with pytest.raises(ConfigError) as info:
            Settings.load(sanitation={"quarantine_ttl_days": value})
        assert "sanitation.quarantine_ttl_days" in info.value.message
        assert "[1, 30]" in info.value.message


@pytest.mark.parametrize(("value", "ok"), [(4, False), (5, True), (50, True), (51, False)])
def test_memory_batch_size_bounded_5_to_50(value: int, ok: bool) -> None:
    if ok:
        assert Settings.load(sanitation={"memory_batch_size": value}).sanitation.memory_batch_size == value
    else:
        with pytest.raises(ConfigError) as info:
            Settings.load(sanitation={"memory_batch_size": value})
        assert "sanitation.memory_batch_size" in info.value.message
        assert "[5, 50]" in info.value.message


def test_dream_schedule_needs_six_fields() -> None:
    with pytest.raises(ConfigError, match="dream.schedule"):
        Settings.load(dream={"schedule": "0 0 * * *"})
    assert Settings.load(dream={"schedule": "0 30 2 * * *"}).dream.schedule == "0 30 2 * * *"


def test_several_problems_are_all_reported() -> None:
    with pytest.raises(ConfigError) as info:
        Settings.load(memory={"rag_limit": 0}, voice={"rooms": {"default_volume": 101}})
    message = info.value.message
    assert "memory.rag_limit" in message
    assert "voice.rooms.default_volume" in message
    assert "[0, 100]" in message


def test_assignment_is_validated(defaults: Settings) -> None:
    with pytest.raises(ValueError):
        defaults.memory.rag_threshold = 2.0


def test_data_dir_expands_user(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    s = Settings.load(server={"data_dir": "~/assistant-data"})
    assert s.data_dir == tmp_path / "assistant-data"


def test_api_keys_map_keys_to_user_uuids() -> None:
    s = Settings.load(security={"api_keys": {"k1": "6f9619ff-8b86-d011-b42d-00c04fc964ff"}})
    assert str(s.security.api_keys["k1"].user_id) == "6f9619ff-8b86-d011-b42d-00c04fc964ff"
    assert s.security.api_keys["k1"].role == "user"  # the short form is a user key
    with pytest.raises(ConfigError, match="security.api_keys"):
        Settings.load(security={"api_keys": {"k1": "not-a-uuid"}})


def test_tool_calling_timezone_must_be_a_known_zone() -> None:
    from pydantic import ValidationError

    from assistant.config import ToolCallingSettings

    assert ToolCallingSettings(timezone="Europe/Berlin").timezone == "Europe/Berlin"
    with pytest.raises(ValidationError, match="unknown IANA time zone 'Mars/Olympus'"):
        ToolCallingSettings(timezone="Mars/Olympus")


@pytest.mark.parametrize(("section", "reason"), [("pqc", "post-quantum key exchange is not implemented"),
                                                 ("homomorphic", "homomorphic encryption is not implemented")])
def test_unimplemented_protections_refuse_to_load_naming_the_key(section: str, reason: str) -> None:
    with pytest.raises(ConfigError) as refused:
        Settings.load(None, **{section: {"enabled": True}})
    assert f"{section}.enabled" in str(refused.value) and reason in str(refused.value)
    assert getattr(Settings.load(None, **{section: {"enabled": False}}), section).enabled is False
