"""`teleclaude demo`: the scenario on a throwaway repository (`scenario.py`) and the stand-in agent CLI its
workers run (`stand_in.py`)."""
