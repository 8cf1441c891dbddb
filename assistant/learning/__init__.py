"""Learning and sharing (issue 18): feedback, local LoRA training, retrieval-parameter optimisation,
distillation from a teacher engine and federated adapter sync between the user's own instances.

The shared vocabulary is in :mod:`assistant.learning.types`; each capability is its own module."""
