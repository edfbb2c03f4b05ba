"""`python -m teleclaude`: the same as the `teleclaude` command."""

import sys

from teleclaude.cli import main

sys.exit(main())
