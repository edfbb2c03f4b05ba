"""The runtime's pure rules: stdlib only; no clock, environment, disk, tmux or database."""
