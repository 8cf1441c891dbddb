"""API keys: only hashes at rest, scopes, replacement, keys from the configuration."""

from __future__ import annotations

import hashlib
from pathlib import Path
from uuid import UUID, uuid4

import pytest

from assistant.errors import NotFoundError, ValidationFailed
from assistant.security import HASH_PREFIX, KeyStore, Principal, hash_key
from assistant.storage.db import Database


@pytest.fixture
def db(tmp_path: Path) -> Database:
    database = Database(tmp_path / "keys.db")
    yield database
    database.close()


@pytest.fixture
def keys(db: Database) -> KeyStore:
    return KeyStore(db)


def test_only_hashes_are_stored(keys: KeyStore, db: Database, tmp_path: Path) -> None:
    key, _ = keys.create("laptop")
    rows = db.query("SELECT * FROM api_keys")
    assert len(rows) == 1
    for value in rows[0].values():
        assert value is None or key not in str(value)
    assert rows[0]["key_hash"] == HASH_PREFIX + hashlib.sha256(key.encode()).hexdigest()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for path in tmp_path.iterdir():
        assert key.encode() not in path.read_bytes(), path


def test_keys_are_long_random_and_distinct(keys: KeyStore) -> None:
    a, _ = keys.create("a")
    b, _ = keys.create("b")
    assert a != b
    assert a.startswith("ak_")
    assert len(a) >= 40


def test_authenticate(keys: KeyStore) -> None:
    key, principal = keys.create("laptop")
    assert keys.authenticate(key) == principal
    assert principal == Principal(keys.owner_user_id(), "full", "laptop")
    assert keys.authenticate(key + "x") is None
    assert keys.authenticate("") is None
    assert keys.authenticate(None) is None


def test_keys_belong_to_the_owner_unless_a_user_is_given(keys: KeyStore) -> None:
    other = uuid4()
    _, mine = keys.create("mine")
    _, theirs = keys.create("theirs", user_id=other)
    assert mine.user_id == keys.owner_user_id()
    assert keys.owner_user_id() == keys.owner_user_id()  # created once
    assert theirs.user_id == other


def test_read_only_key_may_get_but_not_post(keys: KeyStore) -> None:
    key, _ = keys.create("reader", scope="read")
    principal = keys.authenticate(key)
    assert principal.scope == "read"
    for method in ("GET", "HEAD", "OPTIONS", "get"):
        assert principal.may(method)
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        assert not principal.may(method)
    full = keys.authenticate(keys.create("writer")[0])
    assert all(full.may(m) for m in ("GET", "POST", "DELETE"))


def test_duplicate_name_needs_replace(keys: KeyStore) -> None:
    keys.create("laptop")
    with pytest.raises(ValidationFailed) as info:
        keys.create("laptop")
    assert info.value.details["fields"][0]["field"] == "name"


def test_replace_keeps_the_user_and_revokes_the_old_key(keys: KeyStore) -> None:
    other = uuid4()
    old, first = keys.create("phone", user_id=other)
    new, second = keys.create("phone", replace=True)
    assert second.user_id == first.user_id == other
    assert keys.authenticate(old) is None
    assert keys.authenticate(new).user_id == other
    assert len(keys.list()) == 1


def test_invalid_names_and_scopes(keys: KeyStore) -> None:
    with pytest.raises(ValidationFailed):
        keys.create("  ")
    with pytest.raises(ValidationFailed):
        keys.create("x", scope="admin")  # type: ignore[arg-type]


def test_revoke_list_count(keys: KeyStore) -> None:
    key, _ = keys.create("a")
    keys.create("b", scope="read")
    listed = keys.list()
    assert [r["name"] for r in listed] == ["a", "b"]
    assert all("key" not in r and "key_hash" not in r for r in listed)
    assert keys.count() == 2
    keys.revoke("a")
    assert keys.authenticate(key) is None
    assert keys.count() == 1
    with pytest.raises(NotFoundError):
        keys.revoke("a")


def test_configured_keys_in_plain_and_hashed_form(db: Database) -> None:
    alice, bob = uuid4(), uuid4()
    hashed = "sha256:" + hashlib.sha256(b"bobs-secret").hexdigest()
    keys = KeyStore(db, {"alices-secret": alice, hashed: bob})
    assert keys.authenticate("alices-secret") == Principal(alice, "full", "config")
    assert keys.authenticate("bobs-secret") == Principal(bob, "full", "config")
    assert keys.count() == 2
    assert "alices-secret" not in repr(keys._configured)  # hashed when loaded


def test_a_presented_hash_is_never_a_key(db: Database) -> None:
    hashed = "sha256:" + hashlib.sha256(b"bobs-secret").hexdigest()
    keys = KeyStore(db, {hashed: uuid4(), "plain": uuid4()})
    assert keys.authenticate(hashed) is None
    assert keys.authenticate(hash_key("plain")) is None
    stored, _ = keys.create("stored")
    assert keys.authenticate(hash_key(stored)) is None


def test_hash_key() -> None:
    assert hash_key("abc") == "sha256:" + hashlib.sha256(b"abc").hexdigest()
    assert hash_key(hash_key("abc")) == hash_key("abc")


def test_keys_survive_reopening(tmp_path: Path) -> None:
    db = Database(tmp_path / "k.db")
    key, principal = KeyStore(db).create("persist")
    db.close()
    db = Database(tmp_path / "k.db")
    try:
        assert KeyStore(db).authenticate(key) == principal
        assert isinstance(principal.user_id, UUID)
    finally:
        db.close()
