"""An MCP tool result as the text the model reads.

Text parts are kept as they are; images, audio and binary resources are named,
not inlined (a model reading base64 learns nothing and history stores
megabytes). A result with only structured content is given as its JSON.
"""

from __future__ import annotations

import json

from mcp import types


def result_text(result: types.CallToolResult) -> str:
    parts = [_part_text(part) for part in result.content]
    if not parts and result.structuredContent is not None:
        parts.append(json.dumps(result.structuredContent, ensure_ascii=False))
    return "\n".join(parts) if parts else "(no output)"


def _part_text(part: types.ContentBlock) -> str:
    if isinstance(part, types.TextContent):
        return part.text
    if isinstance(part, (types.ImageContent, types.AudioContent)):
        return f"[{part.type} ({part.mimeType}), {len(part.data) * 3 // 4} bytes, not shown]"
    if isinstance(part, types.ResourceLink):
        return f"[resource {part.uri}]"
    if isinstance(part, types.EmbeddedResource):
        resource = part.resource
        if isinstance(resource, types.TextResourceContents):
            return resource.text
        return f"[resource {resource.uri} ({resource.mimeType or 'binary'}), not shown]"
    return f"[{getattr(part, 'type', 'content')} not shown]"
