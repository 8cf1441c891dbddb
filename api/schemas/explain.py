"""Response bodies of the explanation route (``GET /api/chat/{message_id}/explain``) and of the
cognitive-load route (``GET /api/v1/cognitive-load``).

The spec's explanation shape is ``{steps: [...], summary}``; the rest are additions (the answer's
ids, engine and model, tokens, timings, precache hit, the turn's defence). Built from
:class:`assistant.extended.explain.Explanation` and :class:`assistant.extended.cognitive.LoadEstimate`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from assistant.extended.cognitive import LoadEstimate
from assistant.extended.explain import Explanation

STEP_DATA = (
    "What the step did, by `kind`: `defence` the verdict on the user's message (`flagged`, `score`, `layers`, "
    "`hits`); `embedding` `dimensions`; `precache` `hit`; `memories` `threshold`, `threshold_mode`, `rag_limit`, "
    "`budget_chars`, `context_chars`, `precache` and `candidates` (each `id`, `memory_type`, `preview`, `status` "
    "— `injected`, `cut_budget` (not whole within the budget), `over_limit` (beyond `rag_limit`) or "
    "`below_threshold` —, `similarity`, `cosine`, `keyword`, `importance`, `freshness`, the weighted `parts` "
    "(`similarity` + `importance` + `freshness`, × `factor`) and the final `relevance`; an injected one also "
    "`flagged`); `insights` `insights` (their lines), `chars`, `budget_left`; `cognitive_load` `load`, "
    "`components`, `weights`, `format`, `instruction`, `details`; `prompt` `sections` (`name`, `chars`: "
    "system_prompt, profile_block, cognitive_load, data_rule, memory_context, insights, history, message), "
    "`chars`, `messages`, `tools`; `generation` `engine`, `model`, token counts, `first_token_ms`, "
    "`finish_reason` (with tools: one per model turn, `tool_calls` it asked for); `tool` `tool`, `arguments`, "
    "`status`, `duration_ms`, `error`, `result_preview`, `defence`, `review`; `approval` `approval_id`, `tool`, "
    "`arguments`; `learning` `learned`, `refused`, `allowed`.")


class StepOut(BaseModel):
    kind: str = Field(description="`defence`, `embedding`, `precache`, `memories`, `insights`, `cognitive_load`, "
                                  "`prompt`, `generation`, `tool`, `approval` or `learning`.",
                      json_schema_extra={"enum": ["defence", "embedding", "precache", "memories", "insights",
                                                  "cognitive_load", "prompt", "generation", "tool", "approval",
                                                  "learning"]})
    label: str = Field(description="The step in words (a tool's name, `model turn 2`, ...).")
    started_ms: float = Field(description="When it began, in milliseconds from the turn's start.")
    duration_ms: float = Field(ge=0.0, description="How long it took, in milliseconds.")
    data: dict[str, Any] = Field(description=STEP_DATA)


class TokensOut(BaseModel):
    prompt: int
    completion: int
    total: int
    cached_prompt: int = Field(0, description="Prompt tokens the engine served from its cache, when it says so.")


class TimingsOut(BaseModel):
    recall_ms: float | None = Field(None, description="Defence, embedding, precache, retrieval and insights.")
    first_token_ms: float | None = Field(None, description="From the turn's start to the answer's first piece.")
    generation_ms: float | None = Field(None, description="The model's work (with tools: the whole loop).")
    learning_ms: float | None = Field(None, description="Learning the exchange into the user's memories.")
    total_ms: float | None = Field(None, description="From the turn's start to the explanation being stored.")


class ExplanationOut(BaseModel):
    steps: list[StepOut] = Field(description="What happened, in the order it began.")
    summary: list[str] = Field(description="Short sentences: the model and tokens, memories injected and cut, "
                                           "insights, tools, approvals, the defence, the answer format, learning.")
    message_id: str = Field(description="The answer explained.")
    conversation_id: str
    created_at: str = Field(description="When the answer was stored (ISO 8601, UTC).")
    engine: str = Field(description="The inference backend (`llama-cpp`, `ollama`, `openai`, ...).")
    model: str = Field(description="The model that answered.")
    tokens: TokensOut
    timings: TimingsOut
    precache_hit: bool | None = Field(None, description="Whether the memory context came from the precache (null: "
                                                        "no precache was asked).")
    finish_reason: str
    defence: dict[str, Any] | None = Field(None, description="The turn's defence: `flagged`, `user` (the verdict on "
                                                             "the message), `indirect` (flagged data), `inspected`, "
                                                             "`learning_refused`, `verdicts` (every text inspected).")

    @classmethod
    def of(cls, e: Explanation) -> ExplanationOut:
        d = e.as_dict()
        return cls(**{**d, "steps": [StepOut(**s) for s in d["steps"]], "tokens": TokensOut(**d["tokens"]),
                      "timings": TimingsOut(**d["timings"])})


COMPONENTS = ("circadian", "duration", "latency", "complexity", "multitask")


class CognitiveLoadOut(BaseModel):
    load: float = Field(ge=0.0, le=1.0, description="Σ weight × component / Σ weights.")
    format: str = Field(description="`TlDrFirst` at load ≥ 0.7, `BulletPoints` at ≥ 0.4, else `Narrative`.",
                        json_schema_extra={"enum": ["Narrative", "BulletPoints", "TlDrFirst"]})
    instruction: str = Field(description="What the system prompt is told for this format (empty for Narrative).")
    components: dict[str, float] = Field(description="Each in 0..1: " + ", ".join(f"`{c}`" for c in COMPONENTS)
                                                     + ".")
    weights: dict[str, float] = Field(description="The configured weights (`cognitive_load.*_weight`).")
    details: dict[str, Any] = Field(description="The measured inputs: local time, session start and minutes, "
                                                "reply latency and samples, messages, conversations, switches.")

    @classmethod
    def of(cls, e: LoadEstimate) -> CognitiveLoadOut:
        return cls(**e.as_dict())
