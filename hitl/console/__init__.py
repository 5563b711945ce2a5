"""The terminal face: the chat, the demo, watch, the inbox and how sessions render; sits on hitl/client/."""
