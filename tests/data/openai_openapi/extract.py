"""Re-vendor the chat request schema: `python extract.py path/to/openapi.json COMMIT`.

Takes `CreateChatCompletionRequest` and every schema it references (transitively) from OpenAI's
published OpenAPI description (github.com/openai/openai-openapi, MIT, see LICENSE here) and writes
them as one JSON Schema document with `$defs`, so `jsonschema` can validate request bodies offline.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = "CreateChatCompletionRequest"
PREFIX = "#/components/schemas/"


def refs(node: object) -> set[str]:
    if isinstance(node, dict):
        out = {node["$ref"][len(PREFIX):]} if isinstance(node.get("$ref"), str) else set()
        for v in node.values():
            out |= refs(v)
        return out
    if isinstance(node, list):
        return set().union(*(refs(v) for v in node)) if node else set()
    return set()


def rewrite(node: object) -> object:
    if isinstance(node, dict):
        return {
            k: ("#/$defs/" + v[len(PREFIX):] if k == "$ref" and isinstance(v, str) else rewrite(v))
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [rewrite(v) for v in node]
    return node


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    schemas = spec["components"]["schemas"]
    todo, seen = [ROOT], set()
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(refs(schemas[name]))
    doc = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$comment": f"CreateChatCompletionRequest from openai/openai-openapi@{sys.argv[2]} "
        f"(OpenAPI {spec['openapi']}, info.version {spec['info']['version']}); MIT, see LICENSE",
        "$ref": f"#/$defs/{ROOT}",
        "$defs": {k: rewrite(schemas[k]) for k in sorted(seen)},
    }
    Path(__file__).with_name("chat_request.schema.json").write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
