"""ACP agents that misbehave on purpose, run behind the proxy in tests/test_proxy*.py."""
