"""A stand-in for the base model's tokenizer, where Reef's Tinker sampler looks for it offline.

Reef's Tinker sampler (``reef.inference.tinker.TinkerSDKSampler``) renders chat messages with the
tokenizer the Tinker SDK loads for the base model: ``SamplingClient.get_tokenizer()`` calls
``transformers.AutoTokenizer.from_pretrained(<base model>)``, which downloads from the Hugging
Face Hub. Without the network, :func:`publish_tokenizer` writes a tokenizer into a private Hub
cache under the base model's name (``hub/models--<org>--<name>/snapshots/<revision>``); a
process started with ``HF_HOME=<that folder>`` and ``HF_HUB_OFFLINE=1`` (:func:`offline_env`)
then loads it by that name.

It is not the model's tokenizer: every byte is one token (byte-level, no merges), plus three
ChatML markers (``<|im_start|>``, ``<|im_end|>`` as end of sequence, ``<|endoftext|>``) and a
ChatML chat template that ignores ``enable_thinking``. Text round-trips exactly, so a scripted
answer encoded with :func:`encode` is decoded by Reef's sampler into the same text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers

#: The revision the cache names (any 40 hex digits; the cache's ``refs/main`` points at it).
REVISION = "0" * 40
END = "<|im_end|>"
SPECIAL = ("<|im_start|>", END, "<|endoftext|>")
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _tokenizer() -> Tokenizer:
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tokenizer = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(list(SPECIAL))
    return tokenizer


def publish_tokenizer(hf_home: Path, model: str) -> Path:
    """Write the stand-in tokenizer into ``hf_home``'s Hub cache as ``model`` (``org/name``);
    returns the snapshot folder. Writing it again replaces it."""
    if model.count("/") != 1:
        raise ValueError(f"model {model!r}: the Hub names a model org/name; give that form")
    repo = Path(hf_home) / "hub" / f"models--{model.replace('/', '--')}"
    snapshot = repo / "snapshots" / REVISION
    snapshot.mkdir(parents=True, exist_ok=True)
    _tokenizer().save(str(snapshot / "tokenizer.json"))
    settings = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": END,
        "pad_token": "<|endoftext|>",
        "chat_template": CHAT_TEMPLATE,
    }
    (snapshot / "tokenizer_config.json").write_text(json.dumps(settings, indent=1))
    (snapshot / "config.json").write_text("{}")  # AutoTokenizer reads a model config first
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(REVISION)
    return snapshot


def offline_env(hf_home: Path) -> Mapping[str, str]:
    """The environment under which ``AutoTokenizer`` finds the published tokenizer, offline."""
    return {"HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def encode(text: str, *, end: bool = True) -> list[int]:
    """The stand-in tokenizer's ids of ``text`` (then ``<|im_end|>`` when ``end``)."""
    tokenizer = _tokenizer()
    ids = tokenizer.encode(text, add_special_tokens=False).ids
    return [*ids, tokenizer.token_to_id(END)] if end else ids
