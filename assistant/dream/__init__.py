"""Dream mode: nightly sessions that consolidate memories (NREM) and synthesise insights (REM).

The parts (no web imports):

- :mod:`types` — sessions, journal entries, insights, their states and the 12 journal operations;
- :mod:`budget` — the pure NREM/REM split per cycle;
- :mod:`store` — SQLite rows (journal details, snapshots, insight text sealed like memories);
- :mod:`journal` — journal-before-commit: a planned operation is written (pending), applied by its
  idempotent applier, then marked applied; a restart replays what was pending;
- :mod:`activity` — when each user was last active (the idle gate);
- :mod:`nrem` / :mod:`rem` — the steps of each phase (REM's statistical detectors in
  :mod:`patterns`, its engine calls in :mod:`engine`); :mod:`insights` — the insight lifecycle and
  proactive surfacing;
- :mod:`session` — one run of a session (cycles, pause/resume, budgets, the time cap);
- :mod:`service` — :class:`~assistant.dream.service.DreamService`, what the API, scheduler,
  notebooks and dashboards use.
"""
