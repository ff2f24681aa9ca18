"""Small ACP agents of our own that misbehave on purpose, for the client's tests."""
