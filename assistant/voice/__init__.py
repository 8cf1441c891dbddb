"""Voice: rooms and presence, the voice session state machine and the voice service.

The audio pipeline (bus, wake word, speaker identification, speech-to-text, speech synthesis)
builds on these parts; the subsystem exists only when the configuration has a ``[voice]`` section.
"""
