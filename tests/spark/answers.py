"""A method's answers, recorded: for the tests that check what panes decided, per step."""

from __future__ import annotations

from typing import Any


def record_answers(monkeypatch, owner: Any, name: str) -> list:
    """What ``owner``'s method ``name`` answers, call by call, recorded (it still answers)."""
    answers: list = []
    answer = getattr(owner, name)

    def recorded(self, *args):
        answers.append(answer(self, *args))
        return answers[-1]

    monkeypatch.setattr(owner, name, recorded)
    return answers
