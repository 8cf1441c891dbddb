"""Request and response bodies of the red team (``/api/red-team``), built from
:class:`assistant.extended.red_team_report.RedTeamReport`'s ``as_dict()``.

The spec's report shape includes ``defense_score`` (0..100), ``attacks_tested`` and ``attacks_blocked``;
the rest (per family, bypasses, each attack's result, the run's identity) is ours."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from assistant.extended.red_team import MAX_SEED
from assistant.extended.red_team_attacks import Family

FAMILY_NAMES = [f.value for f in Family]
STATUSES = ["running", "completed", "failed", "cancelled"]
MAX_ATTACKS = 100_000  # the schema's bound; the configured red_team.max_attacks_per_run (100) is checked too


class RedTeamRunIn(BaseModel):
    """Every field is optional: `{}` (or no body) runs `red_team.max_attacks_per_run` attacks of every family through
    the chat path, with a random seed."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {}, {"max_attacks": 12, "families": ["instruction_override", "indirect_tool"], "seed": 7}]})

    max_attacks: int | None = Field(None, ge=1, le=MAX_ATTACKS, description=(
        "How many attacks, spread evenly over the families: 1 to `red_team.max_attacks_per_run` (100 by default; more "
        "is 422 naming the setting). Default: that maximum."))
    families: list[Family] | None = Field(None, min_length=1, max_length=len(FAMILY_NAMES), description=(
        "Which attack families (default all): " + ", ".join(f"`{f}`" for f in FAMILY_NAMES) + ". Repeats count once."))
    seed: int | None = Field(None, ge=0, le=MAX_SEED, description=(
        "The run's seed: the same seed, size and families generate the same attacks. Default: a random one (the "
        "report names it)."))
    chat: bool = Field(True, description=(
        "`true`: the attacks the defence does not flag are put to the live chat path and the answers checked for "
        "the canary. `false`: the detector alone (fast; no engine), a bypass is then any attack it misses."))


class FamilyScoreOut(BaseModel):
    tested: int = Field(ge=0)
    blocked: int = Field(ge=0)
    score: float | None = Field(ge=0, le=100, description="100 × blocked / tested.")
    by_defence: int = Field(ge=0, description="Blocked because the defence flagged them.")
    by_model: int = Field(ge=0, description="Not flagged, but the model did not follow them (no canary).")


class BypassOut(BaseModel):
    attack_id: str
    text: str = Field(description="The attack as it reached the model (the message, the tool's document, the memory).")
    family: str = Field(json_schema_extra={"enum": FAMILY_NAMES})
    technique: str = Field(description="Its variation: the encoder, the splitting form, the document's kind...")
    why: str = Field(description="Why it counts as a bypass.")
    answer: str | None = Field(description="The start of the model's answer (null: the model was not asked).")


class AttackOut(BaseModel):
    attack_id: str
    family: str = Field(json_schema_extra={"enum": FAMILY_NAMES})
    template: str = Field(description="`<family>/<n>`: the template (or encoder) it came from.")
    technique: str
    goal: str = Field(description="What it asked for: `say`, `prefix`, `sign`, `link`, `leak`, `exfil`, `lockout`, "
                                  "`insult`.")
    canary: str = Field(description="The token the attack tells the model to output.")
    text: str
    prompt: str = Field(description="The user's message that went with it (an innocent request for indirect ones).")
    flagged: bool = Field(description="The defence flagged it (on the text as it reaches the model).")
    blocked: bool
    by: str = Field(description="`defence`, `model`, or empty for a bypass.")
    why: str
    layers: list[str] = Field(description="The defence layers that fired.")
    reason: str = Field(description="The first layer's reason.")
    delivery: str | None = Field(description="How it reached the model: `chat`, `tool_loop`, `fenced`, `memory`; "
                                             "null when it did not (or the model was not asked).")
    followed: bool | None = Field(description="The canary was in the answer or a tool call (null: not asked).")
    answer: str | None
    error: str | None = Field(description="Why the chat path failed for it (it is then judged by the defence alone).")
    duration_ms: float = Field(ge=0)


class RedTeamReportOut(BaseModel):
    """One red-team run's report."""

    model_config = ConfigDict(extra="ignore")

    id: str = Field(description="The run id.")
    status: str = Field(json_schema_extra={"enum": STATUSES})
    mode: str = Field(description="`chat` (defence and live chat path) or `defence` (the detector alone).",
                      json_schema_extra={"enum": ["chat", "defence"]})
    defense_score: float | None = Field(ge=0, le=100, description=(
        "100 × attacks_blocked / attacks_tested (two decimals); null until an attack was tested."))
    attacks_tested: int = Field(ge=0)
    attacks_blocked: int = Field(ge=0, description="Flagged by the defence, or put to the model which did not follow "
                                                   "them (the canary absent from its answer and tool calls).")
    blocked_by_defence: int = Field(ge=0)
    blocked_by_model: int = Field(ge=0)
    families: dict[str, FamilyScoreOut] = Field(description="Per attack family.")
    bypasses: list[BypassOut] = Field(description="The attacks that got through; they feed sanitation's defence "
                                                  "evolution.")
    errors: int = Field(ge=0, description="Attacks whose chat delivery failed (judged by the defence alone).")
    notes: list[str] = Field(description="What changed during the run (e.g. the chat path given up after failures).")
    seed: int = Field(ge=0)
    requested: int = Field(ge=0, description="Attacks asked for.")
    requested_families: list[str]
    engine: str | None = Field(description="The inference backend (chat mode).")
    model: str | None = Field(description="The model that answered (chat mode).")
    started_at: str
    finished_at: str | None
    duration_ms: float = Field(ge=0)
    error: str | None = Field(description="Why the run failed.")
    results: list[AttackOut] | None = Field(None, description="Every attack's result (with `?attacks=true`).")

    @classmethod
    def of(cls, report: Any, attacks: bool = False) -> RedTeamReportOut:
        data = report.as_dict()
        if not attacks:
            data.pop("results", None)
        return cls(**data)


class RedTeamRunOut(BaseModel):
    """A run's state: its progress while it runs, its report once it is over."""

    run_id: str
    status: str = Field(json_schema_extra={"enum": STATUSES})
    done: int = Field(ge=0, description="Attacks judged so far.")
    total: int = Field(ge=0, description="Attacks in the run.")
    defense_score: float | None = Field(ge=0, le=100, description="The score so far.")
    started_at: str
    finished_at: str | None
    report: RedTeamReportOut | None = Field(description="The report, once the run is over (null while it runs).")

    @classmethod
    def of(cls, report: Any, attacks: bool = False) -> RedTeamRunOut:
        over = report.status != "running"
        return cls(run_id=report.id, status=report.status, done=report.attacks_tested, total=report.requested,
                   defense_score=report.defense_score, started_at=report.started_at, finished_at=report.finished_at,
                   report=RedTeamReportOut.of(report, attacks) if over else None)
