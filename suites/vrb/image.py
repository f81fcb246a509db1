"""Images as the reference sends them: its LLM library (fdllm `LLMImage`, detail "high") resizes every image
client-side, for every provider, and re-encodes it as an RGB PNG. Sending the original file would give
non-OpenAI models (whose servers do not apply OpenAI's high-detail resize) more pixels than the paper's."""

from __future__ import annotations

import os
from functools import lru_cache
from io import BytesIO
from pathlib import Path

from PIL import Image, UnidentifiedImageError

from suites.base import SuiteError

LONG_SIDE = 2048
SHORT_SIDE = 768
"""fdllm `LLMImage._format_image` (detail "high"): fit the longest side to 2048, then the shortest to 768;
downscale only, bilinear."""


def reference_size(width: int, height: int) -> tuple[int, int]:
    """The reference's target size, its arithmetic exactly (floats scaled, then truncated by int())."""
    w: float = width
    h: float = height
    longest = max(w, h)
    if longest > LONG_SIDE:
        w, h = w * (LONG_SIDE / longest), h * (LONG_SIDE / longest)
    scale = min(SHORT_SIDE / min(w, h), 1)
    return int(w * scale), int(h * scale)


def reference_png(path: Path) -> bytes:
    """The bytes the reference sends for the image at `path` (read once per file version)."""
    st = os.stat(path)
    return _png(str(path), st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=1024)  # the 701 items fit; a bigger set does not pile up
def _png(path: str, mtime_ns: int, size: int) -> bytes:
    try:
        with Image.open(path) as im:
            im = im.resize(reference_size(*im.size), Image.BILINEAR)  # as fdllm: resize is always called
    except (OSError, UnidentifiedImageError, Image.DecompressionBombError) as e:
        raise SuiteError(f"{path}: cannot read the image ({e}); replace the file") from e
    buf = BytesIO()
    im.convert("RGB").save(buf, format="png")  # fdllm `LLMImage.get_bytes`
    return buf.getvalue()
