"""An app and its services are freed once closed: nothing module-level keeps them.

FastAPI caches every endpoint and dependency callable in module-level LRU caches (4,096 entries).
An endpoint defined as a closure over the app or the services kept both alive, about 10 MB a
test, until the suite's process reached 11 GB. Every route is requested once here, so a closure
added later anywhere in the app is caught.
"""

from __future__ import annotations

import gc
import weakref

from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from api.main import create_app
from assistant.llm.scripted import ScriptedChatModel
from assistant.services import build_services


def test_a_closed_app_and_its_services_are_collected(make_settings) -> None:  # noqa: ANN001
    services = build_services(make_settings(), chat_model=ScriptedChatModel())
    app = create_app(services)
    key, _ = services.keys.create("lifetime", role="admin")
    with TestClient(app) as client:
        for route in app.routes:  # every endpoint and its dependencies through FastAPI's classification
            if isinstance(route, APIRoute) and "{" not in route.path:
                client.request(sorted(route.methods)[0], route.path, headers={"Authorization": f"Bearer {key}"})
        for page in ("/swagger-ui/", "/redoc/", "/api-docs/static/redoc.standalone.js"):
            assert client.get(page).status_code == 200
    services.close()
    refs = weakref.ref(services), weakref.ref(app)
    del services, app, client, route
    gc.collect()
    assert [ref() for ref in refs] == [None, None]
