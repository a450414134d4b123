"""Reading text out of AgentMessages, tolerant of any shape.

Content from files is untrusted: every helper accepts arbitrary JSON values and never raises.
"""

from __future__ import annotations

import json
from typing import Any

import orjson


def content_text(content: Any, *, image_placeholder: str = "[image]", image_type: bool = False) -> str:
    """Plain text of a `content` value: a string, or a list of text/image/... blocks; each
    image as `image_placeholder`, with `image_type` its media type inside ("[image image/png]")."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict):
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif kind == "image" and image_placeholder:
                mime = block.get("mimeType")
                if image_type and isinstance(mime, str) and image_placeholder.endswith("]"):
                    parts.append(f"{image_placeholder[:-1]} {mime}]")
                else:
                    parts.append(image_placeholder)
    return "\n".join(parts)


def count_images(content: Any) -> int:
    if not isinstance(content, list):
        return 0
    return sum(1 for b in content if isinstance(b, dict) and b.get("type") == "image")


def json_compact(value: Any) -> str:
    """Compact JSON for display (`arguments` of a tool call); never raises."""
    return _to_json(value, 0)


def pretty_json(value: Any) -> str:
    """Indented JSON for display; never raises."""
    return _to_json(value, orjson.OPT_INDENT_2)


def _to_json(value: Any, option: int) -> str:
    try:
        return orjson.dumps(value, option=option).decode()
    except (TypeError, orjson.JSONEncodeError):
        pass  # integers beyond 64 bits, nesting beyond orjson's limit: try the slow encoder
    try:
        return json.dumps(value, ensure_ascii=False, indent=2 if option else None, default=str)
    except (ValueError, RecursionError, TypeError):  # e.g. a 5,000-digit integer
        return "<value too large or too deeply nested to show>"


def tool_calls(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == "toolCall"]


def format_tool_call(call: dict[str, Any], *, max_args: int = 80) -> str:
    """`name(key=value, …)` as a one-liner for previews."""
    name = call.get("name") if isinstance(call.get("name"), str) else "?"
    args = call.get("arguments")
    if isinstance(args, dict):
        inner = ", ".join(f"{k}={json_compact(v)}" for k, v in args.items())
    elif args is None:
        inner = ""
    else:
        inner = json_compact(args)
    if len(inner) > max_args:
        inner = inner[: max_args - 1] + "…"
    return f"{name}({inner})"


def _blocks(message: dict[str, Any], kind: str, key: str) -> str:
    content = message.get("content")
    if not isinstance(content, list):
        return ""
    return "\n".join(
        b[key]
        for b in content
        if isinstance(b, dict) and b.get("type") == kind and isinstance(b.get(key), str)
    )


def assistant_text(message: dict[str, Any]) -> str:
    """The visible text blocks of an assistant message."""
    content = message.get("content")
    return content if isinstance(content, str) else _blocks(message, "text", "text")


def thinking_text(message: dict[str, Any]) -> str:
    return _blocks(message, "thinking", "thinking")


def message_text(message: Any) -> str:
    """The main human-readable text of any AgentMessage role."""
    if not isinstance(message, dict):
        return ""
    role = message.get("role")
    if role == "assistant":
        return assistant_text(message)
    if role == "bashExecution":
        command = message.get("command")
        return f"$ {command}" if isinstance(command, str) else "$ ?"
    if role in ("branchSummary", "compactionSummary"):
        summary = message.get("summary")
        return summary if isinstance(summary, str) else ""
    return content_text(message.get("content"))
