"""Endpoint URLs built from a configured `base_url`, query strings kept where servers expect them."""

from __future__ import annotations


def endpoint_url(base: str, path: str) -> str:
    """`base` + `path`, the path going before any query string: Azure-style
    `https://h/openai/v1?api-version=X` + `/chat/completions` is `https://h/openai/v1/chat/completions?api-version=X`
    (appended after the query, every call would be a 404)."""
    head, q, query = base.partition("?")
    return head.rstrip("/") + path + q + query


def userinfo(url: str) -> bool:
    """Whether a URL carries credentials (`scheme://user:pass@host`)."""
    rest = url.partition("://")[2]
    return "@" in rest.split("/", 1)[0].split("?", 1)[0]
