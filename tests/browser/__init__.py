"""End-to-end tests in JupyterLab in headless chromium (a package so that jupyterlab.py
does not shadow the real jupyterlab module on sys.path)."""
