"""The prompt-injection defence: layered detection over normalised text (issue 15).

Used by chat (user messages are flagged, never blocked), by the tool loop and retrieval (indirect
content is wrapped as data with the detected spans neutralised), by learning (a flagged exchange is
never stored as a Fact, Preference or Correction) and by sanitation (poisoned memories, evolved
patterns). No web imports.
"""
