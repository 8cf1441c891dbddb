"""Tools the model may call: typed functions, registered when their capability is configured."""

from assistant.tools.base import Tool, ToolContext, ToolError, ToolRegistry, tool

__all__ = ["Tool", "ToolContext", "ToolError", "ToolRegistry", "tool"]
