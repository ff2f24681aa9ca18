"""The multi-agent proxy: several ACP agents behind one endpoint."""
