"""Browser tests: the `slow` marker (the 100k-entry page) is declared here, where it is used."""

from __future__ import annotations


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long-running (deselect with -m 'not slow')")
