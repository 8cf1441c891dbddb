"""Structured commands (briefing, weather, calendar, emails, help) and the natural-language parser."""
