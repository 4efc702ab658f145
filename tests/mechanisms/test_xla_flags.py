"""mbi's programs compile with ``graphical.FAST_COMPILE_FLAGS`` unless the user set them."""

import os

import pytest

from dprelease.mechanisms import graphical


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (None, " ".join(graphical.FAST_COMPILE_FLAGS)),
        ("--xla_dump_to=/tmp/x", "--xla_dump_to=/tmp/x " + " ".join(graphical.FAST_COMPILE_FLAGS)),
        (
            "--xla_backend_optimization_level=3",
            "--xla_backend_optimization_level=3 --xla_llvm_disable_expensive_passes=true",
        ),
        (" ".join(graphical.FAST_COMPILE_FLAGS), " ".join(graphical.FAST_COMPILE_FLAGS)),
    ],
    ids=["unset", "other-flags-kept", "a-user-level-wins", "already-set"],
)
def test_the_fast_compile_flags_are_added_once_and_a_users_own_win(monkeypatch, given, expected):
    if given is None:
        monkeypatch.delenv("XLA_FLAGS", raising=False)
    else:
        monkeypatch.setenv("XLA_FLAGS", given)
    graphical._fast_compile()
    graphical._fast_compile()
    assert os.environ["XLA_FLAGS"] == expected


def test_the_first_fit_sets_them_before_jax_starts(monkeypatch):
    """``_mbi``, the one door to mbi and JAX (every graphical fit goes through it), sets
    the flags in the environment XLA reads when its backend starts."""
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    graphical._mbi()
    assert all(f in os.environ["XLA_FLAGS"].split() for f in graphical.FAST_COMPILE_FLAGS)
