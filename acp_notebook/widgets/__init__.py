"""ipywidgets views of a session."""
