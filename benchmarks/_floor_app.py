"""The floor of the overhead benchmark: the same uvicorn serving a constant JSON, nothing else."""

from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route


async def constant(request):  # noqa: ANN001, ANN201
    await request.body()
    return JSONResponse({"ok": True})


app = Starlette(routes=[Route("/floor", constant, methods=["POST"])])
