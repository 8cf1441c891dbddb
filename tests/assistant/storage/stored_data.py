"""A store with something in every user-facing sealed table, and a snapshot of what its owners read,
for the backup, restore and key-rotation tests."""

from __future__ import annotations

from uuid import uuid4

from assistant.agents.profiles import ProfileDraft
from assistant.services import Services


def populate(services: Services, users: int = 2) -> list[str]:
    """Memories, snippets, agent profiles, conversations and agentic tasks of ``users`` users."""
    owners = [str(uuid4()) for _ in range(users)]
    for n, user in enumerate(owners):
        for i in range(3):
            services.memory.add(user, f"User {n} fact {i}: the locker code is {n}{i}42.", tags=[f"u{n}", "codes"])
        services.snippets.create(user, f"Signature {n}", f"Regards, user {n}")
        services.snippets.create(user, f"Standup {n}", "- done\n- next")
        services.profiles.create(user, ProfileDraft(name=f"Helper{n}", role=f"Helps user {n}", skills=("python",)))
        services.conversations.record_exchange(user_id=user, conversation_id=None, user_message=f"Hello from {n}",
                                               reply=f"Hi {n}", model="m", prompt_tokens=1, completion_tokens=1)
        if services.agentic is not None:
            services.agentic.store.create(user, f"Plan a trip for user {n}", False)
    return owners


def snapshot(services: Services, users: list[str]) -> dict:
    """Everything the owners can read back, in plaintext (opening every sealed value)."""
    seen = {}
    for user in users:
        conversations = services.conversations.list(user)
        seen[user] = {
            "memories": sorted((m.id, m.content, m.summary, tuple(m.tags)) for m in services.memory.list(user)),
            "snippets": sorted((s.id, s.title, s.content) for s in services.snippets.list(user).snippets),
            "profiles": sorted((p.id, p.name, p.role) for p in services.profiles.list(user)),
            "conversations": sorted((c.id, c.title, tuple(m.content for m in services.conversations.messages(c.id)))
                                    for c in conversations),
            "tasks": sorted((t.id, t.description) for t in services.agentic.store.list(user))
            if services.agentic is not None else [],
        }
    return seen
