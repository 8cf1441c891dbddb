"""Sanitation: between NREM and REM in every dream cycle, and on demand (issue 15).

A run takes a snapshot (one SQLite transaction around every change: see :mod:`.run`), judges the
user's memories in batches (ok, stale, poisoned, contradicted: the bad ones are quarantined), checks
the knowledge graph, evolves the injection defence's dynamic patterns, corrects configuration drift,
scores the conversation quality and looks for anomalies; it writes one result record. No web imports.
"""
