"""Build a tiny, random-weight Llama model directory that vLLM can serve.

This is a DEMO / TEST model.  Its weights are random numbers drawn from a
seeded pseudo-random generator, so the text it generates is meaningless.
Tests may check status codes, token counts, finish reasons and the like,
but must never assert on the generated text itself.

The script needs only the Python standard library plus the ``tokenizers``
package (no torch, transformers or numpy), so it can run on an Ansible
controller.  It writes, into OUT_DIR:

* ``tokenizer.json``: a byte-level BPE tokenizer trained on local text
  (``/usr/share/common-licenses/*`` and a fixed list of stdlib modules).
  Its initial alphabet is the full byte-level alphabet, so any input
  encodes.  Special tokens: ``<|endoftext|>`` (bos), ``<|im_start|>``,
  ``<|im_end|>`` (eos) and ``<|pad|>``.
* ``tokenizer_config.json`` and ``chat_template.jinja`` (ChatML).
* ``config.json`` and ``generation_config.json`` (``LlamaForCausalLM``).
* ``model.safetensors``: bf16 weights, Normal(0, 0.02), norms 1.0,
  written by hand in the safetensors format.

The output is byte-identical for identical arguments on the same host (the
training corpus comes from the local Python and Debian installation, so two
different hosts may produce different tokenizers).  Files are staged in a
temporary directory and renamed into place, so an interrupted build never
leaves a half-written file behind; files that are already identical are not
touched (their mtimes are kept), which keeps checksum manifests stable.
"""

import argparse
import json
import os
import random
import shutil
import signal
import struct
import sys
import sysconfig
import tempfile
import time
from array import array
from itertools import repeat
from pathlib import Path

try:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
except ImportError:  # pragma: no cover - depends on the controller
    sys.exit("build_tiny_model.py needs the 'tokenizers' package: pip install tokenizers")

BOS_TOKEN = "<|endoftext|>"
IM_START = "<|im_start|>"
EOS_TOKEN = "<|im_end|>"
PAD_TOKEN = "<|pad|>"
SPECIAL_TOKENS = [BOS_TOKEN, IM_START, EOS_TOKEN, PAD_TOKEN]

# head_dim values supported by vLLM's CPU attention backend (0.32).
SUPPORTED_HEAD_DIMS = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)

MAX_POSITIONS = 2048
INIT_STD = 0.02

LICENSE_DIR = Path("/usr/share/common-licenses")
# A fixed list of pure-Python stdlib modules that exist in Python 3.9 to 3.14.
# Missing ones are skipped; the list is sorted so the corpus order is fixed.
STDLIB_MODULES = sorted([
    "abc", "argparse", "ast", "base64", "bdb", "bisect", "calendar", "cmd",
    "code", "codecs", "codeop", "colorsys", "configparser", "contextlib",
    "copy", "copyreg", "csv", "dataclasses", "datetime", "difflib", "dis",
    "doctest", "enum", "filecmp", "fileinput", "fnmatch", "fractions",
    "ftplib", "functools", "genericpath", "getopt", "getpass", "gettext",
    "glob", "gzip", "hashlib", "heapq", "hmac", "imaplib", "inspect",
    "ipaddress", "keyword", "linecache", "locale", "mimetypes", "netrc",
    "numbers", "opcode", "operator", "optparse", "os", "pdb", "pickle",
    "pkgutil", "platform", "plistlib", "poplib", "posixpath", "pprint",
    "py_compile", "queue", "quopri", "random", "reprlib", "runpy", "sched",
    "secrets", "selectors", "shlex", "shutil", "smtplib", "socket",
    "socketserver", "statistics", "string", "subprocess", "tarfile",
    "tempfile", "textwrap", "threading", "tokenize", "traceback", "types",
    "typing", "uuid", "warnings", "weakref", "zipfile",
])

CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- endif %}"
)


def parse_args(argv):
    """Parse and validate the command line."""
    parser = argparse.ArgumentParser(
        description="Build a tiny random-weight Llama (demo/test model; its output text is meaningless).")
    parser.add_argument("out_dir", metavar="OUT_DIR", type=Path, help="directory to create or update")
    parser.add_argument("--vocab", type=int, default=2048, help="vocabulary size (default 2048)")
    parser.add_argument("--hidden", type=int, default=128, help="hidden size (default 128)")
    parser.add_argument("--heads", type=int, default=2, help="attention heads (default 2)")
    parser.add_argument("--kv-heads", type=int, default=2, help="key/value heads (default 2)")
    parser.add_argument("--layers", type=int, default=2, help="decoder layers (default 2)")
    parser.add_argument("--intermediate", type=int, default=256, help="MLP intermediate size (default 256)")
    parser.add_argument("--seed", type=int, default=0, help="weight seed (default 0)")
    args = parser.parse_args(argv)

    for name in ("vocab", "hidden", "heads", "kv_heads", "layers", "intermediate"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be positive")
    if args.vocab < 256 + len(SPECIAL_TOKENS):
        parser.error(f"--vocab must be at least {256 + len(SPECIAL_TOKENS)} (byte alphabet + special tokens)")
    if args.hidden % args.heads:
        parser.error(f"--hidden {args.hidden} is not a multiple of --heads {args.heads}")
    if args.heads % args.kv_heads:
        parser.error(f"--heads {args.heads} is not a multiple of --kv-heads {args.kv_heads}")
    head_dim = args.hidden // args.heads
    if head_dim not in SUPPORTED_HEAD_DIMS:
        parser.error(
            f"head_dim = hidden/heads = {head_dim} is not supported by vLLM's CPU attention "
            f"(supported: {', '.join(map(str, SUPPORTED_HEAD_DIMS))}); the server would pass /health "
            "and then fail on the first request")
    args.head_dim = head_dim
    return args


def corpus_files():
    """Return the training files in a fixed order."""
    files = []
    if LICENSE_DIR.is_dir():
        files.extend(path for path in sorted(LICENSE_DIR.iterdir()) if path.is_file())
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files.extend(stdlib / f"{name}.py" for name in STDLIB_MODULES if (stdlib / f"{name}.py").is_file())
    return files


def iter_corpus(files):
    """Yield the training text, one file at a time."""
    for path in files:
        yield path.read_bytes().decode("utf-8", errors="replace")


def build_tokenizer(vocab_size):
    """Train the byte-level BPE tokenizer and return it."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        show_progress=False,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    files = corpus_files()
    if not files:
        raise SystemExit("no training text found (neither common-licenses nor the stdlib)")
    tokenizer.train_from_iterator(iter_corpus(files), trainer=trainer)
    for expected, token in enumerate(SPECIAL_TOKENS):
        if tokenizer.token_to_id(token) != expected:
            raise SystemExit(f"unexpected id for special token {token}")
    return tokenizer


def tokenizer_config():
    """Return tokenizer_config.json's content."""
    added = {
        str(index): {
            "content": token, "lstrip": False, "normalized": False, "rstrip": False,
            "single_word": False, "special": True,
        }
        for index, token in enumerate(SPECIAL_TOKENS)
    }
    return {
        "added_tokens_decoder": added,
        "additional_special_tokens": [IM_START],
        "bos_token": BOS_TOKEN,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": EOS_TOKEN,
        "model_max_length": MAX_POSITIONS,
        "pad_token": PAD_TOKEN,
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": None,
    }


def model_config(args):
    """Return config.json's content."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": SPECIAL_TOKENS.index(BOS_TOKEN),
        "eos_token_id": SPECIAL_TOKENS.index(EOS_TOKEN),
        "pad_token_id": SPECIAL_TOKENS.index(PAD_TOKEN),
        "head_dim": args.head_dim,
        "hidden_act": "silu",
        "hidden_size": args.hidden,
        "initializer_range": INIT_STD,
        "intermediate_size": args.intermediate,
        "max_position_embeddings": MAX_POSITIONS,
        "mlp_bias": False,
        "num_attention_heads": args.heads,
        "num_hidden_layers": args.layers,
        "num_key_value_heads": args.kv_heads,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "dtype": "bfloat16",
        "use_cache": True,
        "vocab_size": args.vocab,
    }


def generation_config():
    """Return generation_config.json's content."""
    return {
        "bos_token_id": SPECIAL_TOKENS.index(BOS_TOKEN),
        "eos_token_id": SPECIAL_TOKENS.index(EOS_TOKEN),
        "pad_token_id": SPECIAL_TOKENS.index(PAD_TOKEN),
    }


def tensor_specs(args):
    """Return (name, shape, is_norm) for every tensor, in file order."""
    hidden, inter = args.hidden, args.intermediate
    q_dim = args.heads * args.head_dim
    kv_dim = args.kv_heads * args.head_dim
    specs = [("model.embed_tokens.weight", (args.vocab, hidden), False)]
    for layer in range(args.layers):
        prefix = f"model.layers.{layer}."
        specs += [
            (prefix + "self_attn.q_proj.weight", (q_dim, hidden), False),
            (prefix + "self_attn.k_proj.weight", (kv_dim, hidden), False),
            (prefix + "self_attn.v_proj.weight", (kv_dim, hidden), False),
            (prefix + "self_attn.o_proj.weight", (hidden, q_dim), False),
            (prefix + "mlp.gate_proj.weight", (inter, hidden), False),
            (prefix + "mlp.up_proj.weight", (inter, hidden), False),
            (prefix + "mlp.down_proj.weight", (hidden, inter), False),
            (prefix + "input_layernorm.weight", (hidden,), True),
            (prefix + "post_attention_layernorm.weight", (hidden,), True),
        ]
    specs += [
        ("model.norm.weight", (hidden,), True),
        ("lm_head.weight", (args.vocab, hidden), False),
    ]
    return specs


def to_bf16_bytes(values):
    """Convert floats to little-endian bf16 bytes (round to nearest even)."""
    bits = array("I")
    if bits.itemsize != 4:  # pragma: no cover - exotic platforms only
        bits = array("L")
    bits.frombytes(array("f", values).tobytes())
    halves = array("H", [(word + 0x7FFF + ((word >> 16) & 1)) >> 16 for word in bits])
    if sys.byteorder == "big":  # pragma: no cover
        halves.byteswap()
    return halves.tobytes()


def safetensors_bytes(args):
    """Return (file content, parameter count) of model.safetensors."""
    header = {"__metadata__": {"format": "pt"}}
    chunks = []
    offset = 0
    params = 0
    for name, shape, is_norm in tensor_specs(args):
        count = 1
        for dim in shape:
            count *= dim
        if is_norm:
            values = [1.0] * count
        else:
            # One generator per tensor, seeded from (seed, name): a tensor does
            # not change when other tensors are added or resized.
            rng = random.Random(f"{args.seed}:{name}")
            values = list(map(rng.gauss, repeat(0.0, count), repeat(INIT_STD, count)))
        data = to_bf16_bytes(values)
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
        params += count
    header_json = json.dumps(header, separators=(",", ":")).encode("utf-8")
    header_json += b" " * (-len(header_json) % 8)  # align the data start to 8 bytes
    return struct.pack("<Q", len(header_json)) + header_json + b"".join(chunks), params


def json_bytes(obj):
    """Serialize obj the same way every time."""
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def build_files(args):
    """Return ({file name: bytes}, parameter count, tokenizer vocabulary size)."""
    tokenizer = build_tokenizer(args.vocab)
    weights, params = safetensors_bytes(args)
    files = {
        "config.json": json_bytes(model_config(args)),
        "generation_config.json": json_bytes(generation_config()),
        "tokenizer.json": tokenizer.to_str(pretty=True).encode("utf-8"),
        "tokenizer_config.json": json_bytes(tokenizer_config()),
        "chat_template.jinja": CHAT_TEMPLATE.encode("utf-8"),
        "model.safetensors": weights,
    }
    return files, params, tokenizer.get_vocab_size()


def same_content(path, data):
    """True when path is a regular file holding exactly data."""
    try:
        if not path.is_file() or path.stat().st_size != len(data):
            return False
        return path.read_bytes() == data
    except OSError:
        return False


def write_staged(stage, files):
    """Write files into the staging directory and flush them to disk."""
    for name, data in files.items():
        with open(stage / name, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(stage / name, 0o644)


def install(out_dir, files):
    """Put files into out_dir atomically; return the names actually written."""
    out_dir = out_dir.absolute()
    if out_dir.exists() and not out_dir.is_dir():
        raise SystemExit(f"{out_dir} exists and is not a directory")
    changed = [name for name, data in files.items() if not same_content(out_dir / name, data)]
    if not changed:
        return []
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    if not out_dir.exists():
        # Fresh build: stage a whole directory and rename it into place.
        stage = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
        try:
            write_staged(stage, files)
            os.chmod(stage, 0o755)
            os.rename(stage, out_dir)
        except BaseException:
            shutil.rmtree(stage, ignore_errors=True)
            raise
        return sorted(files)
    # Update: stage the changed files next to their targets, then replace
    # each one atomically; identical files keep their inode and mtime.
    stage = Path(tempfile.mkdtemp(prefix=".build-tmp-", dir=out_dir))
    try:
        write_staged(stage, {name: files[name] for name in changed})
        for name in changed:
            target = out_dir / name
            if target.is_dir() and not target.is_symlink():
                raise SystemExit(f"{target} is a directory")
            os.replace(stage / name, target)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return sorted(changed)


def on_sigterm(signum, frame):
    """Turn SIGTERM into SystemExit so that staging directories get removed."""
    del frame
    raise SystemExit(128 + signum)


def main(argv=None):
    """Command-line entry point."""
    started = time.monotonic()
    signal.signal(signal.SIGTERM, on_sigterm)
    args = parse_args(argv)
    files, params, tok_vocab = build_files(args)
    written = install(args.out_dir, files)
    total = sum(len(data) for data in files.values())
    state = f"wrote {len(written)}/{len(files)} files" if written else "unchanged"
    print(f"{args.out_dir}: {params:,} params, {total:,} bytes, tokenizer vocab {tok_vocab}, "
          f"{state}, {time.monotonic() - started:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
