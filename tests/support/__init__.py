"""What the tests share: sessions and waits (sessions.py), the product's processes and servers
(stack.py, api_server.py), fakes (fake_openai.py, adversarial and real MCP servers), the bad-input
catalogue and session health checks. Fixtures stay in tests/conftest.py."""
