"""Extended features (spec "What the service does" 5): explanations, sovereignty score, red team,
immune status, privacy budget, cognitive load, precache prediction. Each feature is a small module
built by :func:`assistant.services.build_services` from its settings section, publishing typed
signals on :class:`assistant.observability.signals.SignalBus`."""
