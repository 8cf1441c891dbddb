"""Sealing at rest (XChaCha20-Poly1305, 256-bit key, 192-bit unique nonce), the key file and the
store's key check (spec: Retrieval and learning for chat, rule 7)."""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import replace
from pathlib import Path

import pytest
from nacl.exceptions import CryptoError

from assistant.crypto import (
    KEY_BYTES,
    NONCE_BYTES,
    KeyMismatchError,
    SealContext,
    SealedValueMismatch,
    Sealer,
    load_or_create_key,
    open_sealer,
)
from assistant.errors import AssistantError, ConfigError
from assistant.storage.db import Database

TAG_BYTES = 16
AT = SealContext("memories", "content", "row-1", "user-a")


@pytest.fixture
def sealer() -> Sealer:
    return Sealer(os.urandom(32))


def meta(db: Database) -> dict[str, str]:
    return {r["key"]: r["value"] for r in db.query("SELECT key, value FROM meta WHERE key LIKE 'memory_%'")}


# --- sealing -----------------------------------------------------------------------------------------


def test_sizes_are_the_spec_ones() -> None:
    assert KEY_BYTES == 32  # 256-bit key
    assert NONCE_BYTES == 24  # 192-bit nonce


@pytest.mark.parametrize("text", ["My name is Alice.", "", "Grüße aus Köln — 東京 🙂", "x" * 100_000])
def test_round_trip(sealer: Sealer, text: str) -> None:
    sealed = sealer.seal(text, AT)
    assert isinstance(sealed, bytes)
    assert len(sealed) == NONCE_BYTES + len(text.encode("utf-8")) + TAG_BYTES
    assert sealer.open(sealed, AT) == text


def test_sealed_bytes_do_not_contain_the_plaintext(sealer: Sealer) -> None:
    sealed = sealer.seal("Alice lives in Berlin", AT)
    assert b"Alice" not in sealed
    assert b"Berlin" not in sealed


def test_same_text_sealed_twice_differs_by_a_fresh_nonce(sealer: Sealer) -> None:
    sealed = [sealer.seal("the same words", AT) for _ in range(50)]
    nonces = {s[:NONCE_BYTES] for s in sealed}
    assert len(nonces) == 50
    assert len(set(sealed)) == 50
    assert all(sealer.open(s, AT) == "the same words" for s in sealed)


def test_tampering_fails(sealer: Sealer) -> None:
    sealed = bytearray(sealer.seal("transfer 100 EUR to Bob", AT))
    for position in (0, NONCE_BYTES - 1, NONCE_BYTES, len(sealed) // 2, len(sealed) - 1):
        tampered = bytearray(sealed)
        tampered[position] ^= 0x01
        with pytest.raises(SealedValueMismatch):
            sealer.open(bytes(tampered), AT)
    with pytest.raises(SealedValueMismatch):
        sealer.open(bytes(sealed[:-1]), AT)
    with pytest.raises(SealedValueMismatch):
        sealer.open(bytes(sealed) + b"\x00", AT)


def test_another_key_cannot_open(sealer: Sealer) -> None:
    sealed = sealer.seal("secret", AT)
    with pytest.raises(SealedValueMismatch):
        Sealer(os.urandom(32)).open(sealed, AT)


def test_associated_data_is_bound(sealer: Sealer) -> None:
    sealed = sealer.seal_bytes(b"value", aad=b"row-1")
    assert sealer.open_bytes(sealed, aad=b"row-1") == b"value"
    with pytest.raises(CryptoError):
        sealer.open_bytes(sealed, aad=b"row-2")


def test_a_value_opens_only_where_it_was_sealed(sealer: Sealer) -> None:
    sealed = sealer.seal("Alice's secret", AT)
    assert sealer.open(sealed, AT) == "Alice's secret"
    for elsewhere in (replace(AT, table="snippets"), replace(AT, column="summary"), replace(AT, row_id="row-2"),
                      replace(AT, user_id="user-b"), replace(AT, user_id="")):
        with pytest.raises(SealedValueMismatch) as caught:
            sealer.open(sealed, elsewhere)
        assert caught.value.message.startswith("data integrity error")
        assert elsewhere.describe() in caught.value.message
        assert "secret" not in caught.value.message
    with pytest.raises(CryptoError):
        sealer.open_bytes(sealed)  # nor without associated data


def test_the_integrity_error_is_an_internal_error_with_its_place() -> None:
    error = SealedValueMismatch(AT)
    assert isinstance(error, AssistantError)
    assert error.code == "INTERNAL_ERROR"
    assert error.details == {"table": "memories", "column": "content", "row_id": "row-1"}
    assert "memories.content of row row-1" in error.message
    assert "user-a" not in error.message  # the owner is logged, not returned


def test_fields_cannot_run_into_each_other() -> None:
    assert SealContext("a", "bc", "1", "u").aad() != SealContext("ab", "c", "1", "u").aad()
    assert SealContext("t", "c", "1", "23").aad() != SealContext("t", "c", "12", "3").aad()
    assert SealContext("t", "c", "1\x00u", "").aad() != SealContext("t", "c", "1", "u").aad()


def test_key_must_be_32_bytes() -> None:
    with pytest.raises(ValueError):
        Sealer(b"short")
    with pytest.raises(ValueError):
        Sealer(os.urandom(33))


def test_disabled_sealer_stores_utf8(sealer: Sealer) -> None:
    plain = Sealer(None)
    assert not plain.encrypted
    assert sealer.encrypted
    assert plain.seal("héllo", AT) == "héllo".encode()
    assert plain.open("héllo".encode(), AT) == "héllo"


# --- key file ----------------------------------------------------------------------------------------


def test_key_file_is_created_with_mode_0600_and_32_bytes(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "memory.key"
    key = load_or_create_key(path)
    assert path.exists()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_bytes() == key
    assert len(key) == 32
    assert load_or_create_key(path) == key  # read back, not replaced


def test_key_file_mode_is_0600_even_with_a_permissive_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        path = tmp_path / "memory.key"
        load_or_create_key(path)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_two_new_key_files_hold_different_keys(tmp_path: Path) -> None:
    assert load_or_create_key(tmp_path / "a.key") != load_or_create_key(tmp_path / "b.key")


def test_a_key_file_of_the_wrong_length_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "memory.key"
    path.write_bytes(b"x" * 31)
    with pytest.raises(ConfigError, match="31 bytes"):
        load_or_create_key(path)
    assert path.read_bytes() == b"x" * 31


def test_missing_key_file_without_create_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "memory.key"
    with pytest.raises(ConfigError, match="missing"):
        load_or_create_key(path, create=False)
    assert not path.exists()


# --- open_sealer: the store's key check ---------------------------------------------------------


@pytest.fixture
def db(tmp_path: Path):
    database = Database(tmp_path / "assistant.db")
    yield database
    database.close()


def test_open_sealer_creates_key_and_check_on_first_use(db: Database, tmp_path: Path) -> None:
    key_path = tmp_path / "memory.key"
    sealer = open_sealer(db, key_path)
    assert sealer.encrypted
    assert key_path.exists()
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    values = meta(db)
    assert values["memory_encryption"] == "xchacha20poly1305"
    assert sealer.verify(bytes.fromhex(values["memory_key_check"]))
    # the same key file opens the store again, and reads what the first sealer wrote
    sealed = sealer.seal("kept", AT)
    again = open_sealer(db, key_path)
    assert again.open(sealed, AT) == "kept"


def test_open_sealer_refuses_a_wrong_key(db: Database, tmp_path: Path) -> None:
    key_path = tmp_path / "memory.key"
    open_sealer(db, key_path)
    before = meta(db)
    wrong = tmp_path / "wrong.key"
    wrong.write_bytes(os.urandom(32))
    with pytest.raises(KeyMismatchError) as caught:
        open_sealer(db, wrong)
    assert isinstance(caught.value, ConfigError)
    assert "wrong key" in caught.value.message
    assert str(wrong) in caught.value.message
    assert meta(db) == before  # the check value is not replaced by one of the wrong key


def test_open_sealer_refuses_a_missing_key_for_an_encrypted_store_and_makes_no_new_key(
    db: Database, tmp_path: Path
) -> None:
    key_path = tmp_path / "memory.key"
    open_sealer(db, key_path)
    before = meta(db)
    key_path.unlink()
    with pytest.raises(ConfigError, match="missing") as caught:
        open_sealer(db, key_path)
    assert not isinstance(caught.value, KeyMismatchError)
    assert not key_path.exists()  # never silently a new key
    assert meta(db) == before
    other = tmp_path / "elsewhere" / "memory.key"
    with pytest.raises(ConfigError):
        open_sealer(db, other)
    assert not other.exists()


def test_open_sealer_refuses_switching_encryption_off_and_on(db: Database, tmp_path: Path) -> None:
    open_sealer(db, tmp_path / "memory.key")
    with pytest.raises(ConfigError, match="enable_encryption"):
        open_sealer(db, tmp_path / "memory.key", enabled=False)


def test_open_sealer_refuses_turning_encryption_on_for_a_plain_store(tmp_path: Path) -> None:
    database = Database(tmp_path / "plain.db")
    try:
        plain = open_sealer(database, tmp_path / "memory.key", enabled=False)
        assert not plain.encrypted
        assert not (tmp_path / "memory.key").exists()
        with pytest.raises(ConfigError, match="enable_encryption"):
            open_sealer(database, tmp_path / "memory.key", enabled=True)
        assert not (tmp_path / "memory.key").exists()
    finally:
        database.close()


def test_open_sealer_uses_an_existing_key_for_a_new_store(db: Database, tmp_path: Path) -> None:
    key_path = tmp_path / "memory.key"
    key = load_or_create_key(key_path)
    sealer = open_sealer(db, key_path)
    assert Sealer(key).open(sealer.seal("shared", AT), AT) == "shared"
    assert key_path.read_bytes() == key


# --- keyword tokens ------------------------------------------------------------------------------


def test_tokens_are_equal_for_equal_words(sealer: Sealer) -> None:
    assert sealer.token("berlin") == sealer.token("berlin")
    assert sealer.token("berlin") != sealer.token("berlim")
    assert len(sealer.token("berlin")) == 12


def test_tokens_reveal_nothing_of_the_word(sealer: Sealer) -> None:
    for word in ("berlin", "alice", "zanzibar"):  # a one-letter word is in a random 12 bytes 5 % of the time
        token = sealer.token(word)
        assert word.encode() not in token
        assert token != word.encode()
        # not an unkeyed digest anyone could compute from a word list
        assert token != hashlib.blake2b(word.encode(), digest_size=12).digest()
        assert token != hashlib.sha256(word.encode()).digest()[:12]


def test_tokens_depend_on_the_key(sealer: Sealer) -> None:
    other = Sealer(os.urandom(32))
    assert sealer.token("berlin") != other.token("berlin")
    key = os.urandom(32)
    assert Sealer(key).token("berlin") == Sealer(key).token("berlin")
