"""Renderers read Reports and nothing else; none imports another, and none imports Textual."""
