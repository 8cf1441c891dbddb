"""Federated sync between two real instances on loopback (uvicorn, separate data directories, each the
other's peer) with real peft LoRA adapters for SmolLM2-135M (LoraConfig(init_lora_weights=False) over the
architecture read from the packaged GGUF): a round completes, both sides average, and a tampered or
replayed envelope is refused and logged."""

from __future__ import annotations

import base64
import json
import secrets
import time
from pathlib import Path

import numpy as np
import pytest

from api.federated_loopback import loopback_pair
from assistant.learning.federated_envelope import new_envelope, signed_body
from assistant.learning.federated_identity import load_identity, verify
from assistant.learning.federated_payload import encode, read_adapter

BASE = "SmolLM2-135M-Instruct"
QUICK = {"inference": {"backend": "scripted"}, "memory": {"embedding_backend": "hashing"}}


@pytest.fixture(scope="module")
def smol_config(small_model_path: Path):  # noqa: ANN201
    """SmolLM2-135M's architecture, read by transformers from the packaged GGUF."""
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(small_model_path.parent, gguf_file=small_model_path.name)


@pytest.fixture(scope="module")
def adapters(smol_config, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:  # noqa: ANN001
    """Two real peft adapters (rank 8 on q_proj/v_proj, different random weights) for SmolLM2-135M."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    config = smol_config
    out = tmp_path_factory.mktemp("adapters")
    made = {}
    for seed, name in ((1, "a"), (2, "b")):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config)
        peft = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"],
                                                init_lora_weights=False, task_type="CAUSAL_LM"))
        peft.save_pretrained(out / name)
        made[name] = out / name
    return made


def test_two_instances_complete_a_round(adapters: dict[str, Path], smol_config, tmp_path: Path) -> None:  # noqa: ANN001
    with loopback_pair(tmp_path, {"a": (adapters["a"], 30), "b": (adapters["b"], 10)}, base_model=BASE,
                       **QUICK) as pair:
        response = pair.sync("a")
        assert response.status_code == 200, response.text
        found = response.json()
        assert (found["status"], found["round"], found["total_samples"], found["clipped"]) == ("completed", 1, 40, True)
        assert [(p["name"], p["status"], p["samples"]) for p in found["peers"]] == [("b", "completed", 10)]
        (responder,) = pair.status("b")["rounds"]
        assert (responder["role"], responder["status"], responder["total_samples"]) == ("responder", "completed", 40)

        # A's average: 30/40 of its exact weights + 10/40 of B's clipped and noised ones
        a, b = read_adapter(adapters["a"]), read_adapter(adapters["b"])
        (averaged,) = pair.adapters["a"].submitted
        merged = read_adapter(averaged.peft_dir)
        assert merged.names == a.names and merged.shapes == a.shapes and a.size == 460_800
        released_b = (merged.values - 0.75 * a.values) / 0.25
        clip = 16.0
        noise = released_b - b.values * (clip / np.linalg.norm(b.values))
        ledger = pair.services["b"].privacy.entries(pair.users["b"])
        sigma = ledger[0].parameters["sigma"]
        assert ledger[0].query == "federated_update" and ledger[0].parameters["sensitivity"] == clip
        assert np.std(noise) == pytest.approx(sigma, rel=0.02) and abs(np.mean(noise)) < 0.05 * sigma

        # the averaged adapter is a peft adapter peft loads onto the base architecture
        from peft import PeftModel
        from transformers import AutoModelForCausalLM

        base = AutoModelForCausalLM.from_config(smol_config)
        loaded = PeftModel.from_pretrained(base, str(averaged.peft_dir))
        state = {k: v for k, v in loaded.state_dict().items() if "lora_A" in k}
        assert len(state) == 60  # 30 layers x (q_proj, v_proj)


def test_a_tampered_or_replayed_envelope_is_refused_and_logged(adapters: dict[str, Path], tmp_path: Path) -> None:
    with loopback_pair(tmp_path, {"a": (adapters["a"], 3), "b": (adapters["b"], 3)}, base_model=BASE,
                       **QUICK) as pair:
        me, peer = (load_identity(tmp_path / n / "federated_ed25519.key") for n in "ab")
        local = read_adapter(adapters["a"])
        envelope = new_envelope(kind="update", sender=me.instance_id, recipient=peer.instance_id, round_number=7,
                                base_model=BASE, lora=local.lora, tensors=local.spec, samples=3,
                                payload=encode(np.zeros(local.size)), timestamp=time.time(),
                                nonce=secrets.token_hex(16), in_reply_to=None,
                                privacy={"epsilon": 0.5, "delta": 1e-5, "clip_norm": 16.0, "noise_multiplier": 7.0})
        genuine = signed_body(envelope, me.sign(envelope))
        tampered = json.loads(genuine)
        raw = bytearray(base64.b64decode(tampered["envelope"]["payload"]))
        raw[123] ^= 0x01
        tampered["envelope"]["payload"] = base64.b64encode(bytes(raw)).decode()
        response = pair.post_raw("b", json.dumps(tampered).encode())
        assert response.status_code == 401 and response.json()["error"]["details"]["reason"] == "bad_signature"
        assert pair.adapters["b"].submitted == [] and pair.services["b"].privacy.entries(pair.users["b"]) == []

        answered = pair.post_raw("b", genuine)
        assert answered.status_code == 200, answered.text
        reply = answered.json()
        assert verify(peer.public_key, reply["envelope"], base64.b64decode(reply["signature"]))
        assert (reply["envelope"]["kind"], reply["envelope"]["in_reply_to"]) == ("reply", envelope["nonce"])
        replayed = pair.post_raw("b", genuine)
        assert replayed.status_code == 409 and replayed.json()["error"]["details"]["reason"] == "replayed"

        log = pair.status("b")["rejections"]
        assert [(r["reason"], r["status"], r["peer"]) for r in log] == [("replayed", 409, "a"),
                                                                       ("bad_signature", 401, "a")]
        assert len(pair.adapters["b"].submitted) == 1  # the genuine one only
