"""A self-hosted personal assistant: chat with a local model, memory, tools, voice.

``import assistant`` is cheap: heavy libraries load inside the backends that need them.
"""

__version__ = "0.1.0"
