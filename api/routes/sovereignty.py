"""The sovereignty score: `GET /api/sovereignty`.

Role: any key (`read-only` included). The score is server-wide: it describes the running configuration,
holds no user's data, and its findings name settings, hosts, file paths and counts, never a secret's
value. While `sovereign_intelligence.enabled = false` it is 503 `SERVICE_UNAVAILABLE` naming the key.
The work is :class:`assistant.extended.sovereignty_probe.SovereigntyMonitor`'s.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter

from api.deps import ROLE_READ, CurrentPrincipal, service
from api.schemas.common import AUTH_ERRORS, error_responses
from api.schemas.sovereignty import SovereigntyOut
from assistant.extended.sovereignty_probe import SovereigntyMonitor

DISABLED = "the sovereignty score is disabled (sovereign_intelligence.enabled = false)"
SOVEREIGNTY = service("sovereignty", DISABLED)
Sovereignty = Annotated[SovereigntyMonitor, SOVEREIGNTY]
router = APIRouter(prefix="/api", tags=["extended"], dependencies=[SOVEREIGNTY])


@router.get("/sovereignty", response_model=SovereigntyOut, responses=error_responses(*AUTH_ERRORS, 503),
            summary="The sovereignty score of the running service",
            description="How much of this installation stays under its owner's control, computed now from the running "
                        "configuration and system: `data_locality` (every configured endpoint on loopback or the LAN, "
                        "by parsing its host: no DNS), `encryption_coverage` (the share of stored values that are "
                        "really sealed, sampled from the database, and TLS to remote endpoints), `secret_management` "
                        "(key file mode and owner, data directory, secrets in the config file rather than "
                        "environment variables, hashed API keys) and `network_isolation` (bound addresses, companion "
                        "services on 8083/8084 and the MQTT broker, the catalog sandbox), 0..25 each; `total` is "
                        "their sum (0..100). `findings` say, per dimension, what costs points and how to fix it; "
                        "`breakdown` gives each rule's points. Each call publishes a `SovereigntyScore` signal."
                        + ROLE_READ + "Server-wide (no user data); findings never carry a secret's value.")
def sovereignty(user: CurrentPrincipal, monitor: Sovereignty) -> SovereigntyOut:
    return SovereigntyOut.of(monitor.report())
