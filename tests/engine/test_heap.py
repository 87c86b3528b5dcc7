"""the command line's allocator setting (store/files/heap.py): glibc takes it; elsewhere nothing changes
and nothing fails."""

from __future__ import annotations

import ctypes
import platform

import pytest

from rmqstore_cli.store.files import heap
from tests.helpers import cli


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_glibc_takes_both_settings():
    assert heap.reuse_freed_blocks() is True


def test_a_libc_without_mallopt_is_left_alone(monkeypatch):
    class NoMallopt:
        def __init__(self, name):
            pass

    monkeypatch.setattr(ctypes, "CDLL", NoMallopt)
    assert heap.reuse_freed_blocks() is False


def test_a_refused_setting_is_reported(monkeypatch):
    class Refusing:
        def __init__(self, name):
            self.mallopt = lambda param, value: 0

    monkeypatch.setattr(ctypes, "CDLL", Refusing)
    assert heap.reuse_freed_blocks() is False


def test_a_command_sets_it_and_help_does_not(monkeypatch, tmp_path):
    """Every command sets it as it starts (commands/exits.command); ``--help`` runs none."""
    calls = []
    monkeypatch.setattr(heap, "reuse_freed_blocks", lambda: calls.append(1) or True)
    assert cli("verify", "--help").exit_code == 0 and calls == []
    cli("decode-msgid", "0A00000500002A9F000000000000068F")
    assert calls == [1]
