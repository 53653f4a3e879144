"""Write a tiny Llama config and a byte-level BPE tokenizer that vLLM can serve with dummy weights.

Runs under the vLLM virtual environment's Python (it needs the `tokenizers` library), as
`python tests/support/tiny_model.py DEST`; the output is byte-identical on every run.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

# One worker thread keeps the BPE trainer's merge order independent of the machine.
os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

VOCAB_SIZE = 1024
MAX_POSITIONS = 2048
BOS, EOS, UNK = "<s>", "</s>", "<unk>"

_WORD_TEXT = (
    "the a of to and in is it that for on with as was at by be this have from or one had "
    "not but what all were when we there can an your which their said if do will each about "
    "how up out them then she many some so these would other into has more her two like him "
    "see time could no make than first been its who now people my made over did down only way "
    "find use may water long little very after words called just where most know get through "
    "back much before go good new write our used me man too any day same right look think also "
    "around another came come work three word must because does part even place well such here "
    "take why things help put years different away again off went old number great tell men say "
    "small every found still between name should home big give air line set own under read last "
    "never us left end along while might next sound below saw something thought both few those "
    "latency token cache block batch prefill decode queue replica request percentile budget"
)
_WORDS = _WORD_TEXT.split()


def _corpus() -> list[str]:
    """Return a fixed pseudo-random corpus built from a linear congruential generator."""
    state = 20240601
    lines = []
    for _ in range(4000):
        words = []
        for _ in range(12):
            state = (state * 1103515245 + 12345) % (1 << 31)
            words.append(_WORDS[state % len(_WORDS)])
        lines.append(" ".join(words) + ".")
    return lines


def _tokenizer_json() -> str:
    """Train the tokenizer and return its serialised JSON."""
    from tokenizers import (  # type: ignore[import-not-found]  # only in the vLLM venv
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        processors,
        trainers,
    )

    tokenizer = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=[UNK, BOS, EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_corpus(), trainer=trainer)
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A",
        pair=f"{BOS} $A {BOS} $B",
        special_tokens=[(BOS, tokenizer.token_to_id(BOS))],
    )
    text: str = tokenizer.to_str(pretty=True)
    return text


def _config(vocab_size: int, bos_id: int, eos_id: int) -> dict[str, object]:
    """Return a Llama config small enough to run on two CPU cores."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "hidden_act": "silu",
        "max_position_embeddings": MAX_POSITIONS,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "vocab_size": vocab_size,
        "bos_token_id": bos_id,
        "eos_token_id": eos_id,
        "torch_dtype": "float32",
    }


def write_tiny_model(dest: Path) -> None:
    """Write config.json, tokenizer.json and tokenizer_config.json into dest."""
    dest.mkdir(parents=True, exist_ok=True)
    tokenizer_text = _tokenizer_json()
    vocab = json.loads(tokenizer_text)["model"]["vocab"]
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS,
        "eos_token": EOS,
        "unk_token": UNK,
        "model_max_length": MAX_POSITIONS,
        "clean_up_tokenization_spaces": False,
    }
    files = {
        "config.json": _config(len(vocab), vocab[BOS], vocab[EOS]),
        "tokenizer_config.json": tokenizer_config,
        "generation_config.json": {"bos_token_id": vocab[BOS], "eos_token_id": vocab[EOS]},
    }
    for name, content in files.items():
        (dest / name).write_text(json.dumps(content, indent=2, sort_keys=True) + "\n")
    (dest / "tokenizer.json").write_text(tokenizer_text + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: tiny_model.py DEST")
    write_tiny_model(Path(sys.argv[1]))
