from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from assistant.agents.profiles import (
    ALLOWED_PLACEHOLDERS,
    MAX_EMOJI_CHARS,
    MAX_MODEL_CHARS,
    MAX_ROLE_CHARS,
    MAX_SKILLS,
    MAX_TEMPLATE_CHARS,
    MAX_TOKENS_LIMIT,
    MAX_TONE_CHARS,
    NAME_MAX,
    NAME_RE,
    NAME_RULE,
    SKILL_RE,
    SKILL_RULE,
    AgentProfile,
    InferenceOverrides,
    ProfileDraft,
    Style,
)

# The validators in assistant.agents.profiles give the messages; the schema states the same rules.
NAME_SCHEMA = {"pattern": f"^{NAME_RE.pattern}$"}
Skill = Annotated[str, Field(json_schema_extra={"pattern": f"^{SKILL_RE.pattern}$"})]
# The validators in assistant.agents.profiles give the messages; the schema states the same rules.
NAME_SCHEMA = {"pattern": f"^{NAME_RE.pattern}$"}
Skill = Annotated[str, Field(json_schema_extra={"pattern": f"^{SKILL_RE.pattern}$"})]
VerbosityValue = Literal["terse", "normal", "verbose"]
DepthValue = Literal["standard", "deep"]
AutonomyValue = Literal["low", "medium", "high"]

NAME_DOC = f"{NAME_RULE}; unique per user ignoring case (409 CONFLICT otherwise). Mention it as `@name` in chat."
SKILLS_DOC = (f"Skill identifiers ({SKILL_RULE}; at most {MAX_SKILLS}, no duplicates). A skill equal to a registered "
              "tool name enables that tool: when any skill does, chat offers only those tools.")
TEMPLATE_DOC = (f"The profile's system prompt, with placeholders {ALLOWED_PLACEHOLDERS} ({{date}} is today's UTC "
                "date, {user_prompt} the message); `{{` and `}}` are literal braces. An unknown placeholder is 422. "
                "Empty: \"You are <name> <emoji>. Your role: <role>.\"")


class StyleIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tone: str = Field("", max_length=MAX_TONE_CHARS, description="Free text, e.g. `friendly`, `formal`.")
    verbosity: VerbosityValue = Field("normal", description="terse (max_tokens hint at most 256), normal, "
                                                            "verbose (max_tokens hint at least 1,024).")
    reasoning_depth: DepthValue = "standard"


class InferenceOverridesIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    temperature: float | None = Field(None, ge=0.0, le=2.0, description="0.0 to 2.0; a request's value wins.")
    max_tokens: int | None = Field(None, ge=1, le=MAX_TOKENS_LIMIT,
                                   description="Capped at the context length; a request's value wins.")
    model: str | None = Field(None, min_length=1, max_length=MAX_MODEL_CHARS,
                              description="A model id (see /v1/system/models); a request's value wins.")


class AgentProfileCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=NAME_MAX, description=NAME_DOC, json_schema_extra=NAME_SCHEMA)
    role: str = Field("", max_length=MAX_ROLE_CHARS, description="What the agent does.")
    emoji: str = Field("", max_length=MAX_EMOJI_CHARS)
    skills: list[Skill] = Field(default_factory=list, max_length=MAX_SKILLS, description=SKILLS_DOC,
                                json_schema_extra={"uniqueItems": True})
    style: StyleIn = Field(default_factory=StyleIn)
    system_prompt_template: str = Field("", max_length=MAX_TEMPLATE_CHARS, description=TEMPLATE_DOC)
    inference_overrides: InferenceOverridesIn = Field(default_factory=InferenceOverridesIn)
    autonomy_level: AutonomyValue = Field("medium", description="low, medium or high (told to the model).")

    def draft(self) -> ProfileDraft:
        return ProfileDraft(
            name=self.name, role=self.role, emoji=self.emoji, skills=tuple(self.skills),
            style=Style(**self.style.model_dump()), system_prompt_template=self.system_prompt_template,
            inference_overrides=InferenceOverrides(**self.inference_overrides.model_dump()),
            autonomy_level=self.autonomy_level,
        )


class StylePatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tone: str = Field(None, max_length=MAX_TONE_CHARS)
    verbosity: VerbosityValue = Field(None)
    reasoning_depth: DepthValue = Field(None)

    @field_validator("tone", "verbosity", "reasoning_depth", mode="before")
    @classmethod
    def _not_null(cls, value: object) -> object:
        if value is None:  # only an explicit null reaches here: omitted fields are not validated
            raise ValueError("must not be null")
        return value


class AgentProfileUpdate(BaseModel):
    """Only the supplied fields change; `style` and `inference_overrides` are merged key by key. A
    field is omitted to keep it: `null` is refused (the schema types carry no null), except inside
    `inference_overrides`, where `null` clears an override."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(None, min_length=1, max_length=NAME_MAX, description=NAME_DOC, json_schema_extra=NAME_SCHEMA)
    role: str = Field(None, max_length=MAX_ROLE_CHARS)
    emoji: str = Field(None, max_length=MAX_EMOJI_CHARS)
    skills: list[Skill] = Field(None, max_length=MAX_SKILLS, description=SKILLS_DOC,
                                json_schema_extra={"uniqueItems": True})
    style: StylePatch = Field(None)
    system_prompt_template: str = Field(None, max_length=MAX_TEMPLATE_CHARS, description=TEMPLATE_DOC)
    inference_overrides: InferenceOverridesIn = Field(
        None, description="Supplied keys only; a key set to null clears that override."
    )
    autonomy_level: AutonomyValue = Field(None)

    @field_validator("name", "role", "emoji", "skills", "style", "system_prompt_template", "inference_overrides",
                     "autonomy_level", mode="before")
    @classmethod
    def _not_null(cls, value: object) -> object:
        if value is None:  # only an explicit null reaches here: omitted fields are not validated
            raise ValueError("must not be null")
        return value

    def changes(self) -> dict[str, object]:
        return self.model_dump(exclude_unset=True)


class StyleOut(BaseModel):
    tone: str
    verbosity: VerbosityValue
    reasoning_depth: DepthValue


class InferenceOverridesOut(BaseModel):
    temperature: float | None
    max_tokens: int | None
    model: str | None


class AgentProfileOut(BaseModel):
    id: str
    name: str
    role: str
    emoji: str
    skills: list[str]
    style: StyleOut
    system_prompt_template: str
    inference_overrides: InferenceOverridesOut
    autonomy_level: AutonomyValue
    created_at: str
    updated_at: str

    @classmethod
    def of(cls, p: AgentProfile) -> AgentProfileOut:
        return cls(
            id=p.id, name=p.name, role=p.role, emoji=p.emoji, skills=list(p.skills),
            style=StyleOut(tone=p.style.tone, verbosity=p.style.verbosity, reasoning_depth=p.style.reasoning_depth),
            system_prompt_template=p.system_prompt_template,
            inference_overrides=InferenceOverridesOut(
                temperature=p.inference_overrides.temperature, max_tokens=p.inference_overrides.max_tokens,
                model=p.inference_overrides.model,
            ),
            autonomy_level=p.autonomy_level, created_at=p.created_at, updated_at=p.updated_at,
        )
