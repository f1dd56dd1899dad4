"""``python -m capacity_broker.cli``: the console script (``local --background`` runs it so)."""

from . import main

main()
