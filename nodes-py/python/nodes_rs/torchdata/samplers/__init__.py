"""Mixes of several sources: by weight, or in turn."""
