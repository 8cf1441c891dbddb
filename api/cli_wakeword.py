"""``assistant wakeword calibrate --negatives DIR``: per-word wake-word thresholds from a false-alarm budget.

Argument parsing and printing only: the work is in :mod:`assistant.voice.wake_calibration`. api/cli.py calls
:func:`register`.

Where the thresholds go: ``--output`` when given, else ``<data_dir>/wakeword_thresholds.json``, the file the
engine reads before the calibration packaged with the models (``[voice.wake_word] thresholds_file`` names
another one). A running server reads it when its voice pipeline next starts.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

wakeword_app = typer.Typer(help="Wake words: calibrate their thresholds.", no_args_is_help=True)

ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="TOML settings file.")]
DataDirOpt = Annotated[Path | None, typer.Option("--data-dir", help="Data directory (default ~/.local/share/assistant).")]


def register(app: typer.Typer) -> None:
    app.add_typer(wakeword_app, name="wakeword")


@wakeword_app.command("calibrate")
def calibrate(
    negatives: Annotated[Path, typer.Option(
        "--negatives", help="Directory of speech WITHOUT wake words: every WAV/FLAC under it (recursive). A file "
                            "under a directory named after a packaged word (e.g. hey_jarvis/) is a negative for "
                            "the other words only.")],
    budget: Annotated[float | None, typer.Option(
        help="False alarms per hour allowed (default: [voice.wake_word] max_false_alarms_per_hour, 0.5).",
        min=0.0)] = None,
    margin: Annotated[float, typer.Option(help="Added to the highest tolerated negative score.", min=0.0,
                                          max=1.0)] = 0.1,
    min_threshold: Annotated[float, typer.Option(help="No calibrated threshold is lower.", min=0.0,
                                                 max=1.0)] = 0.5,
    words: Annotated[list[str] | None, typer.Option(
        "--words", help="Words to calibrate (repeat, or comma-separated; default: every packaged word).")] = None,
    output: Annotated[Path | None, typer.Option(
        help="Where to write the thresholds (default: <data_dir>/wakeword_thresholds.json, read by the "
             "engine before the packaged calibration).")] = None,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Score every clip with the real models and choose, per word, the lowest threshold whose false alarms stay
    within the budget (plus the margin); print a table and write the thresholds file."""
    from tqdm import tqdm

    from api.cli import fail, load_settings
    from assistant.errors import AssistantError
    from assistant.voice.wake import PACKAGED_WORDS, check_words
    from assistant.voice.wake_calibration import calibrate_directory
    from assistant.voice.wake_thresholds import user_file

    settings = load_settings(config, data_dir)
    section = settings.voice.wake_word if settings.voice else None
    chosen_budget = budget if budget is not None else section.max_false_alarms_per_hour if section else 0.5
    try:
        chosen = check_words([w.strip() for item in (words or list(PACKAGED_WORDS)) for w in item.split(",")
                              if w.strip()])
    except AssistantError as exc:
        fail(f"--words: {exc.message.replace('voice.wake_word.words', 'the list')}")
    if not negatives.is_dir():
        fail(f"--negatives {negatives}: not a directory")
    target = output or user_file(settings.data_dir)
    if not target.parent.is_dir():
        fail(f"--output {target}: the directory {target.parent} does not exist")
    skipped: list[tuple[str, str]] = []
    try:
        result = calibrate_directory(negatives, chosen, chosen_budget, margin, floor=min_threshold, skipped=skipped,
                                     progress=lambda it: tqdm(it, desc="scoring", unit="clip", file=sys.stderr))
    except ValueError as exc:
        fail(str(exc))
    except AssistantError as exc:
        fail(exc.message, 1)
    for name, reason in skipped:
        typer.echo(f"left out {name}: {reason}", err=True)
    typer.echo(f"{result.negative_hours:.3f} h of negative speech in "
               f"{sum(s.clips for s in result.sources)} clips, budget {chosen_budget:g} false alarms/hour, "
               f"margin {margin:g}, at least {min_threshold:g}")
    typer.echo(f"{'word':<13} {'threshold':>9} {'false alarms/h':>14} {'alarms':>6} {'hours':>7} "
               f"{'highest negative':>16}")
    for word, w in result.words.items():
        note = "" if w.meets_budget else "  over budget even at the cap"
        typer.echo(f"{word:<13} {w.threshold:>9.3f} {w.false_alarms_per_hour:>14.2f} {w.false_alarms:>6} "
                   f"{w.negative_hours:>7.3f} {w.highest_negative:>16.4f}{note}")
    result.save(target)
    typer.echo(f"thresholds written to {target}")
    if not all(w.meets_budget for w in result.words.values()):
        raise typer.Exit(1)
