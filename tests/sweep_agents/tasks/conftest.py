"""Task folders used as data by tests/test_sweep_taskenv.py: their verifiers' own tests run inside a trial, never
as part of this suite."""

collect_ignore_glob = ["*"]
