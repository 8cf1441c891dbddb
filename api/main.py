"""create_app(services) -> FastAPI. No settings are read here: everything comes from Services."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

import assistant
from api import errors
from api.mcp_http import McpHttp
from api.middleware import Authenticate, JsonDepth, MethodCheck, RateLimit, RequestContext, documented_methods
from api.routes import (
    agent_profiles,
    agentic,
    approvals,
    catalog,
    chat,
    cognitive,
    commands,
    distillation,
    docs,
    dream,
    explain,
    federated,
    health,
    immune,
    knowledge,
    memories,
    mesh,
    metrics,
    openai_compat,
    optimization,
    precache,
    privacy,
    quarantine,
    red_team,
    sanitation,
    signals,
    snippets,
    sovereignty,
    system,
    tools,
    training,
    voice,
    webhooks,
)
from assistant.services import Services

DESCRIPTION = """
A self-hosted personal assistant: chat with a local model, with memory, tools and voice.

**Authentication.** Protected routes need `Authorization: Bearer <API key>`, or `X-API-Key: <API key>`
(the form the spec's dream-mode examples use; both schemes are accepted on every protected route, and
`Authorization` wins when both are sent). Keys map to user ids; only SHA-256 hashes of keys are stored. The key is checked
before the body is read, so an unauthenticated request is 401 whatever its body. Missing or invalid key: 401 `UNAUTHORIZED`.
Every key has a role. `read-only` (`assistant keys create --role read-only`, or `--read-only`) may
only use GET/HEAD/OPTIONS; any other method with it is 403 `FORBIDDEN`. `user` (the default) uses
its own user's data. `admin` may also create and delete command-catalog entries and approve or
deny approval requests: these answer 403 `FORBIDDEN` with `details.required_role: "admin"` to any
other role, and an approval is decided by an admin other than its requester (403 otherwise).
A user's resources belong to the user of the key that created them (command-catalog entries are
shared by all): another user's resource is 404 `NOT_FOUND` and is not listed (admins see every user's catalog executions and approval requests,
since they decide them). Keys in the config file's `security.api_keys` are `user` keys when written
`"<key>" = "<user uuid>"`, and have the named role when written
`"<key>" = { user_id = "<user uuid>", role = "admin" }`. Unauthenticated: `/health`, `/ready`, `/ready/all`, `/metrics`,
`/metrics/prometheus` (and these docs).

**Errors** always use the envelope `{"error": {code, message, details?, request_id}}` (the
OpenAI-compatible routes excepted: OpenAI's shape, see below).
400 `BAD_REQUEST` is for bodies that cannot be read, and its message says why: malformed JSON, a
body that is not a JSON object, a Content-Type other than `application/json` (400, not 415: the
body is unreadable as sent), invalid UTF-8, arrays and objects nested deeper than 32 levels, an
integer of more than 4,300 digits. 422 `VALIDATION_ERROR` is for readable bodies and parameters
with wrong fields (wrong types, out-of-range values, unknown fields, unknown references);
`details.fields` lists `{field, error}`. Every integer parameter and field has its bounds in this
document (`limit` 1 to 1,000 or less, `offset` 0 to 1,000,000,000). Unknown routes are 404
`NOT_FOUND`; a method the path does not support is 405 `METHOD_NOT_ALLOWED` with an `Allow` header
listing every method it does (a fixed path such as `/v1/commands/catalog/audit` is never taken for
an `{id}`); a body over `server.max_body_bytes` (1 MiB), declared or chunked, is 413
`PAYLOAD_TOO_LARGE`; a chat message is at most 32,000 characters. A refused request stores
nothing.

**Client IP.** The rate limit counts the TCP peer's address. `X-Forwarded-For` is believed only
from the proxies listed in `security.trusted_proxies` (default none).

**Rate limiting** (when `security.rate_limit_enabled`, default 120 requests per minute per
client IP) applies to every route except health, readiness and metrics. Responses carry
`X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset` (seconds until the
current 60-second window closes); a 429 carries `Retry-After` and `retry_after`.

Every response carries `X-Request-Id` (a UUID; a valid incoming one is kept).

**Tools.** With `[tool_calling] enabled` (the default) and at least one tool registered, a chat
message goes through the tool loop: the model may call tools (up to `max_iterations` turns, with
`iteration_timeout_secs` and `total_timeout_secs`) before its final answer, which alone is
streamed. A message starting with `/` is a command and never calls tools; `enabled_tools: []`
turns tools off for one request; an unknown name in `enabled_tools` is 422 naming it. Omitted or
null `enabled_tools` offers every registered tool (`[tool_calling] selection = "all"`, the
default); with `selection = "auto"` the message is offered only the tools it is about (MiniLM
similarity of the message to each tool's description ≥ `selection_threshold`, or a trigger word
such as "weather" or "remind"; at most `max_offered_tools`), and a message about none is answered
without tools, which keeps a small model's prompt short. A profile whose skills name tools
restricts an omitted `enabled_tools` to those tools. A tool's
failure is told to the model, never an error response. Each capability is configured in its own
settings section (`[weather]`, `[web_search]`, `[calendar]`, `[tasks]`, `[contacts]`,
`[reminders]`, `[transit]`, `[code_execution]`, `[email]`, plus `[memory]`); `GET /v1/tools`
lists only the tools of configured capabilities. Tool runs (arguments, result, duration) are
returned with the answer and listed by `GET /v1/tools/runs`.

**Memory in chat.** With `[memory] enable_rag` a chat message gets the caller's memories whose
retrieval similarity is at least `rag_threshold` (0.5), the `rag_limit` (5) most relevant of them.
What the threshold reads is `rag_threshold_mode`: `"fused"` (the default) is hybrid search's score,
0.6 × cosine + 0.4 × BM25 keyword score (normalised to the best match), so a memory that shares the
message's words counts even when a small embedding model puts it at cosine 0.4; `"cosine"` is the
embedding cosine alone (the spec's reading), the candidates then come from dense search and
relevance uses that cosine.

**OpenAI-compatible endpoint.** `POST /v1/chat/completions` and `GET /v1/models` follow OpenAI's API
so that its clients (the `openai` SDK, Open WebUI, Home Assistant) work unchanged with an API key of
this service as their key: the key's user's memories are retrieved and learned as in `/v1/chat`
(the `memory` extension field switches this per request), client `tools` come back as `tool_calls`
and are never executed, and errors on these routes use OpenAI's shape `{"error": {message, type,
param, code}}` (400 for invalid input, not 422).

**MCP.** `/mcp` serves the Model Context Protocol (Streamable HTTP, stateless, JSON responses; `assistant mcp`
serves the same on stdio): the registered tools with their JSON schemas (a tool in
`tool_calling.require_approval_for` only files an approval request, as chat does), memory search and store,
snippets, dream insights, and resources `memory://{id}`, `graph://snapshot`, `graph://node/{id}`.
Role: any key; every request needs one (401 without). A `read-only` key lists and calls only the tools
that change nothing and reads resources (a write is an MCP error with `data.code` `FORBIDDEN`).
Owner rule: the key's user's data only; another user's memory or node is not found. Rate-limited like
every route.
"""


def create_app(services: Services) -> FastAPI:
    openapi_url = docs.OPENAPI_URL if services.settings.server.openapi_enabled else None
    mcp = McpHttp(services)
    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if services.voice is not None:  # the voice pipeline's chat calls run on this loop
            services.voice.bind_loop(asyncio.get_running_loop())
        if services.graph is not None:  # the llm extractor's engine calls too (one loop owns the queue)
            services.graph.bind_loop(asyncio.get_running_loop())
        if services.dream is not None:  # REM's hypotheses and suggestions too
            services.dream.bind_loop(asyncio.get_running_loop())
        if services.sanitation is not None:  # the contradiction judge's engine calls
            services.sanitation.bind_loop(asyncio.get_running_loop())
        if services.red_team is not None:  # the red team's attacks through the chat path
            services.red_team.bind_loop(asyncio.get_running_loop())
        async with mcp.run():  # the MCP transport's session manager
            yield

    app = FastAPI(
        lifespan=lifespan,
        title="Assistant API",
        version=assistant.__version__,
        description=DESCRIPTION,
        openapi_url=openapi_url,
        docs_url=None,
        redoc_url=None,
    )
    app.state.services = services
    errors.install(app)
    # quarantine before memories: /v1/memories/quarantine is not a memory id
    for router in (health.router, metrics.router, chat.router, quarantine.router, memories.router, system.router,
                   tools.router, snippets.router, agent_profiles.router, catalog.router, approvals.router,
                   agentic.router, webhooks.router, commands.router, voice.router, knowledge.router, dream.router,
                   sanitation.router, openai_compat.router, signals.router, precache.router,
                   privacy.router, sovereignty.router, explain.router, cognitive.router, red_team.router,
                   immune.router, mesh.router, distillation.router, training.router, federated.router,
                   optimization.router):
        app.include_router(router)
    visualization = services.settings.knowledge_visualization
    app.add_route("/mcp", mcp, include_in_schema=False)  # the MCP server (api/mcp_http.py)
    knowledge.document_limits(app, visualization.max_nodes, visualization.min_retention_threshold)
    if openapi_url:
        docs.install(app)
    # Added last = outermost: RequestContext wraps RateLimit wraps Authenticate wraps JsonDepth wraps MethodCheck
    # wraps the routes.
    app.add_middleware(MethodCheck, routes=lambda: documented_methods(app))
    app.add_middleware(JsonDepth)
    app.add_middleware(Authenticate, services=services)
    app.add_middleware(RateLimit, services=services)
    app.add_middleware(RequestContext, services=services)
    return app
