"""Agent profiles (personas applied in chat and to sub-agents) and agentic tasks."""
