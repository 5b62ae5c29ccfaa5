#!/usr/bin/env python3
"""Writes a tiny random-weight Llama that vLLM can serve, with no model hub.

    python make_model.py OUT_DIR [--seed 7]

The weights come from a seeded generator and the tokenizer is a byte-level BPE trained here on
text generated from the same seed, so the same seed always gives the same files. The model is
sized for a CPU: 2 layers, hidden size 128, 4 attention heads of 64 (vLLM's CPU attention needs
a head size of at least 32), a 2,048-token vocabulary, 4,096 positions. Its answers are noise;
it exists so a real engine does real work per token and publishes real metrics.

Writes OUT_DIR/.complete last, so a half-written folder is never taken for a model.
"""

import argparse
import json
import os
import random
import shutil
import sys
import tempfile

VOCAB = 2048
LAYERS = 2
HIDDEN = 128
HEADS = 4
HEAD_DIM = 64
INTERMEDIATE = 256
POSITIONS = 4096


def corpus(seed: int, lines: int = 4000):
    """Pseudo-words from a seeded generator: enough variety for a 2,048-token BPE."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 9))) for _ in range(3000)]
    for _ in range(lines):
        yield " ".join(rng.choice(words) for _ in range(rng.randint(5, 20))) + "."


def write_tokenizer(out: str, seed: int) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=["<|begin_of_text|>", "<|end_of_text|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus(seed), trainer=trainer)
    tokenizer.save(os.path.join(out, "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<|begin_of_text|>",
        "eos_token": "<|end_of_text|>",
        "model_max_length": POSITIONS,
        "clean_up_tokenization_spaces": False,
        # Plain concatenation: the chat endpoint works, and prompts stay what the client sent.
        "chat_template": "{% for m in messages %}{{ m['content'] }}\n{% endfor %}",
    }
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(out, "special_tokens_map.json"), "w") as f:
        json.dump({"bos_token": config["bos_token"], "eos_token": config["eos_token"]}, f)


def write_model(out: str, seed: int) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=INTERMEDIATE,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=HEADS,
        head_dim=HEAD_DIM,
        max_position_embeddings=POSITIONS,
        bos_token_id=0,
        eos_token_id=1,
        tie_word_embeddings=True,
        torch_dtype="bfloat16",
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    if os.path.exists(os.path.join(args.out, ".complete")):
        return 0
    parent = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(dir=parent, prefix=".model.")
    try:
        write_tokenizer(tmp, args.seed)
        write_model(tmp, args.seed)
        open(os.path.join(tmp, ".complete"), "w").close()
        shutil.rmtree(args.out, ignore_errors=True)
        os.rename(tmp, args.out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
