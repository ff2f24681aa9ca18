"""The built-in demo agent: an offline, deterministic ACP agent on stdio."""
