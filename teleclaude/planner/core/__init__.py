"""Pure decisions: stdlib and mistune only; no clock, environment, disk, git or database."""
