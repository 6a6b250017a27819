"""Guided fixes: a Plan of typed, undoable Steps per fix family (not yet implemented)."""
