"""build_training(settings, ...) -> TrainingService: the real trainer, scorer, converter and smoke check.

The service is always built (feedback is collected whatever ``lora.enabled`` says); its training
methods refuse while ``lora.enabled = false``. The base model is ``lora.base_model_path``, else
``inference.model_path``, else the packaged model named ``inference.model`` in the data directory;
adapters live under ``<data>/adapters/<user>/<run>/``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from assistant.learning.evaluate import PeftScorer, engine_smoke_check
from assistant.learning.feedback import FeedbackStore
from assistant.learning.runs import RunStore
from assistant.learning.service import TrainingService
from assistant.learning.trainer import PeftTrainer
from assistant.llm.catalog import PACKAGED_MODELS

if TYPE_CHECKING:
    from assistant.chat.conversations import ConversationStore
    from assistant.config import Settings
    from assistant.crypto import Sealer
    from assistant.observability.signals import SignalBus
    from assistant.storage.db import Database

ADAPTERS_DIR = "adapters"


def base_model(settings: Settings) -> tuple[Path | None, str]:
    """``(the base GGUF to train on, the engine's name for it)``; the path may not exist yet."""
    lora, inference = settings.lora, settings.inference
    if lora.base_model_path is not None:
        path = Path(lora.base_model_path).expanduser()
        return path, inference.model if inference.model_path is not None and \
            Path(inference.model_path).expanduser() == path else path.stem
    if inference.model_path is not None:
        return Path(inference.model_path).expanduser(), inference.model
    packaged = PACKAGED_MODELS.get(inference.model)
    return (packaged.path(settings.data_dir) if packaged is not None else None), inference.model


def real_converter(settings: Settings) -> Any:
    lora, cache = settings.lora, settings.data_dir / ADAPTERS_DIR / ".base-config"

    def convert(peft_dir: Path, base: Path, out_path: Path) -> Path:
        from assistant.learning.convert import convert_to_gguf

        return convert_to_gguf(peft_dir, base, out_path, converter_dir=lora.converter_dir, cache_dir=cache)

    return convert


def build_training(settings: Settings, db: Database, sealer: Sealer, conversations: ConversationStore,
                   signals: SignalBus | None = None, embedder: Any = None) -> TrainingService:
    lora = settings.lora
    path, name = base_model(settings)
    service = TrainingService(
        lora, FeedbackStore(db, sealer, conversations, system_prompt=settings.inference.system_prompt,
                            context_messages=lora.context_messages),
        RunStore(db), adapters_dir=settings.data_dir / ADAPTERS_DIR, base_model=path, base_model_name=name,
        trainer=PeftTrainer.from_settings(lora), scorer=PeftScorer(lora.max_seq_tokens, lora.threads),
        converter=real_converter(settings), smoke_check=engine_smoke_check(lora.threads), signals=signals,
        embedder=embedder)
    service.recover()
    if signals is not None:
        service.listen(signals)
    return service
