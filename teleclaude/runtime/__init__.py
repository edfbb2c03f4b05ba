"""The worker runtime: agent CLIs in tmux, watched and supervised, and the unattended orchestrator loop.

`core/` holds the pure half (session records and their transitions, supervision, limits, rendering).
"""
