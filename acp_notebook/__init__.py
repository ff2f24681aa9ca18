"""acp-notebook: the Agent Client Protocol in Jupyter."""
