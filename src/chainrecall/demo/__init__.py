"""The offline demo: a generated week of a team's chat, GitHub and CI, and recall over it."""

from chainrecall.demo.week import QUESTION, LoadedWeek, generate_week, load_week

__all__ = ["QUESTION", "LoadedWeek", "generate_week", "load_week"]
