"""API keys: only hashes at rest, roles, replacement, keys from the configuration (both forms)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from uuid import UUID, uuid4

import pytest

from assistant.config import Settings
from assistant.errors import ConfigError, NotFoundError, ValidationFailed
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
    assert principal == Principal(keys.owner_user_id(), "user", "laptop")  # user unless asked
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
    key, _ = keys.create("reader", role="read-only")
    principal = keys.authenticate(key)
    assert principal.role == "read-only" and principal.read_only and not principal.is_admin
    for method in ("GET", "HEAD", "OPTIONS", "get"):
        assert principal.may(method)
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        assert not principal.may(method)
    user = keys.authenticate(keys.create("writer")[0])
    assert all(user.may(m) for m in ("GET", "POST", "DELETE")) and not user.is_admin


def test_roles_and_what_each_sees(keys: KeyStore) -> None:
    admin = keys.authenticate(keys.create("admin", role="admin")[0])
    user = keys.authenticate(keys.create("user", user_id=uuid4())[0])
    assert admin.role == "admin" and admin.is_admin and admin.owner_filter() is None  # sees every user's
    assert user.role == "user" and user.owner_filter() == str(user.user_id)  # sees its own
    assert [r["role"] for r in keys.list()] == ["admin", "user"]


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


def test_invalid_names_and_roles(keys: KeyStore) -> None:
    with pytest.raises(ValidationFailed):
        keys.create("  ")
    for role in ("full", "read", "root"):
        with pytest.raises(ValidationFailed) as info:
            keys.create("x", role=role)  # type: ignore[arg-type]
        assert "admin, user, read-only" in info.value.message


def test_revoke_list_count(keys: KeyStore) -> None:
    key, _ = keys.create("a")
    keys.create("b", role="read-only")
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
    assert keys.authenticate("alices-secret") == Principal(alice, "user", "config")
    assert keys.authenticate("bobs-secret") == Principal(bob, "user", "config")
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


def test_configured_keys_from_a_config_file_short_and_table_forms(tmp_path: Path, db: Database, clean_env) -> None:
    alice, root = uuid4(), uuid4()
    config = tmp_path / "config.toml"
    config.write_text(f"""
[security.api_keys]
"alices-secret" = "{alice}"
"root-secret" = {{ user_id = "{root}", role = "admin" }}
"viewer-secret" = {{ user_id = "{alice}", role = "read-only" }}
"user-secret" = {{ user_id = "{alice}" }}
""")
    settings = Settings.load(config)
    keys = KeyStore(db, settings.security.api_keys)
    assert keys.authenticate("alices-secret") == Principal(alice, "user", "config")  # the short form: user
    assert keys.authenticate("root-secret") == Principal(root, "admin", "config")
    assert keys.authenticate("viewer-secret").role == "read-only"
    assert keys.authenticate("user-secret").role == "user"


@pytest.mark.parametrize(("entry", "expected"), [
    ('{ user_id = "%s", role = "root" }', "has role 'root': the role must be one of admin, user, read-only"),
    ('{ user_id = "%s", role = "full" }', "has role 'full': the role must be one of admin, user, read-only"),
    ('{ role = "admin" }', "user_id: Field required"),
    ('{ user_id = "%s", role = "admin", extra = 1 }', "extra: Extra inputs are not permitted"),
    ('"not-a-uuid"', "user_id: Input should be a valid UUID"),
    ("3", "must map to a user id or to"),
])
def test_a_bad_configured_key_is_a_precise_config_error_that_hides_the_key(
        tmp_path: Path, clean_env, entry: str, expected: str) -> None:
    config = tmp_path / "config.toml"
    body = entry % uuid4() if "%s" in entry else entry
    config.write_text(f'[security.api_keys]\n"super-secret-key-123" = {body}\n')
    with pytest.raises(ConfigError) as info:
        Settings.load(config)
    message = info.value.message
    assert "security.api_keys" in message and expected in message, message
    assert "super-secret-key-123" not in message and "super-…" in message
