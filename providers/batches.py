"""The batch APIs we implement, each registered with `providers.batch_base` as its module is imported:
import `batch_api` and `BATCH_APIS` from here (never the API modules from the base)."""

from providers import batch_anthropic, batch_openai  # noqa: F401  (importing them registers them)
from providers.batch_base import BATCH_APIS, batch_api

__all__ = ["BATCH_APIS", "batch_api"]
