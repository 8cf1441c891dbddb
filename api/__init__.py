"""The HTTP API of the spec, served by FastAPI over the ``assistant`` package."""
