"""Response body of the sovereignty score (``GET /api/sovereignty``), built from
:meth:`assistant.extended.sovereignty.SovereigntyReport.as_dict`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

SEVERITIES = ["high", "medium", "low", "info"]


class FindingOut(BaseModel):
    severity: str = Field(description="`high`, `medium`, `low` or `info`.", json_schema_extra={"enum": SEVERITIES})
    message: str = Field(description="What was found (never a secret's value: settings are named, not shown).")
    fix: str = Field(description="How to fix it.")
    setting: str | None = Field(description="The setting to change, when one does.")


class PartOut(BaseModel):
    part: str = Field(description="The rule, e.g. `key file` or `server bind`.")
    points: float = Field(ge=0, description="Points it gave.")
    max_points: float = Field(gt=0, description="Points it can give.")
    detail: str = Field(description="What it measured.")


class FindingsOut(BaseModel):
    data_locality: list[FindingOut]
    encryption_coverage: list[FindingOut]
    secret_management: list[FindingOut]
    network_isolation: list[FindingOut]


class BreakdownOut(BaseModel):
    data_locality: list[PartOut]
    encryption_coverage: list[PartOut]
    secret_management: list[PartOut]
    network_isolation: list[PartOut]


class SovereigntyOut(BaseModel):
    """The spec's shape, `{total, data_locality, encryption_coverage, secret_management, network_isolation}`, plus
    the findings and the parts of each dimension."""

    total: int = Field(ge=0, le=100, description="The sum of the four dimensions.")
    data_locality: int = Field(ge=0, le=25, description="Configured endpoints on this machine or the LAN, weighted by "
                                                         "what they receive.")
    encryption_coverage: int = Field(ge=0, le=25, description="Sealed share of the stored values (20) and TLS to "
                                                               "remote endpoints (5).")
    secret_management: int = Field(ge=0, le=25, description="Key file (8), data directory (2), secrets outside the "
                                                             "config file (10), hashed API keys (5).")
    network_isolation: int = Field(ge=0, le=25, description="Server bind (10), companion services (10), catalog "
                                                             "sandbox (5).")
    findings: FindingsOut = Field(description="Per dimension, what costs points and how to fix it, most severe "
                                              "first within each.")
    breakdown: BreakdownOut = Field(description="Per dimension, the points of each rule.")
    computed_at: str = Field(description="When it was computed (ISO 8601, UTC).")

    @classmethod
    def of(cls, report: Any) -> SovereigntyOut:
        return cls(**report.as_dict())
