"""Stage 1 of the pipeline (capture), in the model process: a note left in its private Inductor cache.

``write_autotune_key()``, once Inductor has run: what names its autotuner's ``<key>.best_config`` files, so the
tool (``capture/triton_cache.py``) tells each file's kernel without importing torch (``AUTOTUNE_KEY_FILE``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from ..exchange.files import AUTOTUNE_KEY_FILE


def write_autotune_key() -> None:
    """In the model process, once Inductor has run: ``AUTOTUNE_KEY_FILE`` into ``TORCHINDUCTOR_CACHE_DIR``, from the
    ``torch_key()`` Inductor computed for its own caches. Nothing when Inductor never loaded; never raises."""
    codecache = sys.modules.get("torch._inductor.codecache")
    folder = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if codecache is None or not folder:
        return
    try:
        from torch.compiler import config

        key = {"torch_key": codecache.torch_key().hex(), "cache_key_tag": str(config.cache_key_tag)}
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / AUTOTUNE_KEY_FILE).write_text(json.dumps(key), encoding="utf-8")
    except Exception:  # a torch without them: the tool works the key out itself
        return
